"""Exceptions raised by netpass.

Every failure a user can cause (a bad file, an unsupported op, a wrong input) is raised as a
subclass of :class:`NetpassError` whose message names the node, op, input or shape at fault.
"""
from __future__ import annotations

from typing import Any, Sequence


class NetpassError(Exception):
    """Base class of every error netpass raises on purpose."""

    hint: str = ""


class UnsupportedOpError(NetpassError):
    """An operation netpass cannot import or execute."""

    hint = "run `netpass passes` / see README for the supported op list"

    def __init__(self, op_type: str, domain: str = "", opset: int | None = None,
                 node_name: str = "", reason: str = "") -> None:
        self.op_type, self.domain, self.opset, self.node_name = op_type, domain, opset, node_name
        self.reason = reason
        where = f" (node '{node_name}')" if node_name else ""
        dom = f" in domain '{domain}'" if domain else ""
        ver = f" at opset {opset}" if opset is not None else ""
        why = f": {reason}" if reason else ""
        super().__init__(f"unsupported op '{op_type}'{dom}{ver}{where}{why}")


class UnsupportedTypeError(NetpassError):
    """A valid element type netpass does not support (string, float8, int4...)."""

    hint = "supported element types: f32, f16, bf16, f64, i64, i32, i16, i8, u64, u32, u16, u8, boolean"


class ModelFormatError(NetpassError):
    """A malformed, truncated or hostile model file."""

    hint = "check that the file is a complete ONNX model or IR v11 xml"


class ShapeInferenceError(NetpassError):
    """Shape or type inference failed on a node."""

    def __init__(self, message: str, node: Any = None,
                 input_shapes: Sequence[Any] | None = None) -> None:
        self.node = node
        self.input_shapes = list(input_shapes) if input_shapes is not None else None
        prefix = ""
        if node is not None:
            prefix = f"{node.type_name} '{node.friendly_name}'"
            if self.input_shapes is not None:
                prefix += " with inputs " + ", ".join(str(s) for s in self.input_shapes)
            prefix += ": "
        super().__init__(prefix + message)


class InputError(NetpassError):
    """An inference input is missing, unexpected or of the wrong dtype or shape."""

    hint = "pass a dict of input name -> numpy array matching the model's parameters"

    def __init__(self, input_name: str, reason: str) -> None:
        self.input_name = input_name
        super().__init__(f"input '{input_name}': {reason}")


class LintError(NetpassError):
    """The graph breaks an IR invariant (see :func:`netpass.core.lint`)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("graph invariants broken:\n  " + "\n  ".join(self.problems))


class PassValidationError(NetpassError):
    """A pass left the model invalid; the message names the pass."""

    def __init__(self, pass_name: str, cause: Exception) -> None:
        self.pass_name, self.cause = pass_name, cause
        super().__init__(f"model invalid after pass '{pass_name}': {cause}")


class DeviceError(NetpassError):
    """The requested execution device is not available or failed."""

    hint = "run `netpass devices` to list OpenCL devices, or use --device REFERENCE"


class RuntimeInvariantError(NetpassError):
    """The runtime broke one of its own invariants (a bug in netpass, found by the checks of
    debug mode: ``NETPASS_DEBUG=1`` or the config key ``DEBUG_CHECKS``)."""

    hint = "this is a netpass bug: please report it with the model and the input shapes"
