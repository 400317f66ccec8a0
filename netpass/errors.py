"""Exceptions raised by netpass.

Every failure a user can cause (a bad file, an unsupported op, a wrong input) is raised as a
subclass of :class:`NetpassError` whose message names the node, op, input or shape at fault.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


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


class HostFallbackError(UnsupportedOpError):
    """The runtime would run ops on the host (no device kernel for their kind, element types
    or shapes) while the ``HOST_FALLBACK`` config is False. ``.ops``: ``(type, name, why)``."""

    hint = "allow the host fallback (HOST_FALLBACK: True, the default) or change the model"

    def __init__(self, ops: list[tuple[str, str, str]]) -> None:
        self.ops = list(ops)
        kinds = sorted({k for k, _, _ in self.ops})
        listed = ", ".join(f"{k} '{n}' ({why})" for k, n, why in self.ops[:20])
        more = f" and {len(self.ops) - 20} more" if len(self.ops) > 20 else ""
        super().__init__(", ".join(kinds), reason="HOST_FALLBACK is False and these ops run "
                         f"on the host only: {listed}{more}")


class UnsupportedTypeError(NetpassError):
    """A valid element type netpass does not support (string, float8, int4...)."""

    hint = ("supported element types: f32, f16, bf16, f64, i64, i32, i16, i8, u64, u32, u16, u8, "
            "boolean, f8e4m3, f8e5m2, f8e4m3fnuz, f8e5m2fnuz, f8e8m0, f4e2m1, i4, u4, i2, u2, "
            "string")


class ModelFormatError(NetpassError):
    """A malformed, truncated or hostile model file."""

    hint = "check that the file is a complete ONNX model or IR v11 xml"


class ModelFileError(ModelFormatError):
    """A file a model is read from is refused: it leaves the model's folder, is not a regular
    file (a FIFO, a device, a directory), is missing, or is shorter than the model declares.

    ``path`` is the file as named (by the model or the user), ``model`` the model file that
    names it (the same path for the model file itself)."""

    hint = ("a model's weights and external data must be regular files inside the model's "
            "folder (symlinks may point only inside it)")

    def __init__(self, message: str, path: str, model: str) -> None:
        self.path, self.model = path, model
        if model and model != path:
            message = f"{message} (named by model {model})"
        super().__init__(message)


class InvalidModelError(ModelFormatError):
    """A model that parses but breaks its format's rules: an ONNX graph not in single static
    assignment form (a tensor name defined twice), a repeated graph input or output, an
    attribute its op's schema does not declare or types otherwise, an input nothing defines.
    ``node``, ``op_type`` and ``tensor`` (a tensor or attribute name) name the culprit."""

    hint = "onnx.checker.check_model(model) reports the same problem"

    def __init__(self, message: str, node: str = "", op_type: str = "",
                 tensor: str = "") -> None:
        self.node, self.op_type, self.tensor = node, op_type, tensor
        super().__init__(message)


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


class StateError(NetpassError):
    """A model variable's state set with the wrong element type or shape, or a stateful model
    where state is not supported."""

    hint = ("query_state() lists the variables; set .state to an array of the variable's type "
            "and shape")

    def __init__(self, variable_id: str, reason: str) -> None:
        self.variable_id = variable_id
        super().__init__(f"variable '{variable_id}': {reason}")


class LintError(NetpassError):
    """The graph breaks an IR invariant (see :func:`netpass.core.lint`)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("graph invariants broken:\n  " + "\n  ".join(self.problems))


def describe_node(node: Any) -> str:
    """``Type 'friendly name'`` of a graph node, for messages."""
    return f"{node.type_name} '{node.friendly_name}'"


class PassError(NetpassError):
    """A pass failed: an exception inside its matcher callback or ``run_on_model``.

    ``pass_name`` names the pass, ``node`` is the node it was working on (the matched root of
    a MatcherPass; None for a whole-model pass) and ``cause`` the original exception (also
    ``__cause__``). The innermost pass is named: a composite pass passes its members'
    PassErrors through unchanged.
    """

    def __init__(self, pass_name: str, node: Any = None, cause: BaseException | None = None,
                 message: str | None = None) -> None:
        self.pass_name, self.node, self.cause = pass_name, node, cause
        if message is None:
            where = f" on {describe_node(node)}" if node is not None else ""
            what = f"{type(cause).__name__}: {cause}" if cause is not None else "failed"
            message = f"pass '{pass_name}' failed{where}: {what}"
        super().__init__(message)


class PassValidationError(PassError):
    """A pass broke the model: shape inference fails after it, the graph breaks an IR invariant,
    the model's inputs or outputs changed (names, element types, shapes) without the pass
    declaring it, or a matcher callback reported a change it did not make. The message names
    the pass (``pass_name``) and, where one is at fault, the node (``node``)."""

    def __init__(self, pass_name: str, cause: BaseException | None = None, node: Any = None,
                 message: str | None = None) -> None:
        if message is None:
            message = f"model invalid after pass '{pass_name}': {cause}"
        super().__init__(pass_name, node, cause, message)


class ResourceLimitError(NetpassError):
    """A model or an input needs more than this machine gives: memory, or Python's recursion
    depth (raised at the public entry points in place of MemoryError and RecursionError)."""

    hint = ("a tensor the model declares or computes is too large for this machine's memory; "
            "check the model's shapes and the input shapes")


class OutOfMemoryError(ResourceLimitError, MemoryError):
    """Memory ran out (also a MemoryError, so that code catching that still does)."""


class FileAccessError(NetpassError, OSError):
    """A file netpass writes (or reads outside a model) cannot be accessed: a missing or
    read-only folder, a full disk, no permission. Also an OSError, so that code catching that
    still does."""

    hint = "check that the folder exists, is writable and has room"


SYSTEM_ERRORS = (MemoryError, RecursionError, OSError)


def system_error_as_netpass(e: BaseException, what: str) -> NetpassError:
    """The NetpassError standing for system error ``e`` (one of SYSTEM_ERRORS, not a
    NetpassError) raised while doing ``what``: ResourceLimitError (OutOfMemoryError for memory),
    or FileAccessError for an OSError."""
    if isinstance(e, MemoryError):
        return OutOfMemoryError(f"{what}: out of memory" + (f" ({e})" if str(e) else ""))
    if isinstance(e, RecursionError):
        return ResourceLimitError(f"{what}: the model is nested too deeply ({e})")
    filename = getattr(e, "filename", None)
    where = f": {filename}" if filename else ""
    return FileAccessError(f"{what}: {getattr(e, 'strerror', None) or e}{where}")


@contextmanager
def system_errors_as_netpass(what: str) -> Iterator[None]:
    """Re-raise MemoryError and RecursionError that escape ``what`` (a public entry point:
    reading, saving, compiling a model) as ResourceLimitError naming it, and an OSError as
    FileAccessError; NetpassError passes through."""
    try:
        yield
    except NetpassError:
        raise
    except SYSTEM_ERRORS as e:
        raise system_error_as_netpass(e, what) from e


class DeviceError(NetpassError):
    """The requested execution device is not available or failed."""

    hint = "run `netpass devices` to list OpenCL devices, or use --device REFERENCE"


class RuntimeInvariantError(NetpassError):
    """The runtime broke one of its own invariants (a bug in netpass, found by the checks of
    debug mode: ``NETPASS_DEBUG=1`` or the config key ``DEBUG_CHECKS``)."""

    hint = "this is a netpass bug: please report it with the model and the input shapes"


class AllocationError(OutOfMemoryError):
    """Memory for something the runtime needed could not be had (host or device); the message
    names what was being allocated and how many bytes."""

    hint = "use smaller inputs, or a device with more memory"


class OutputTooLargeError(ResourceLimitError):
    """An output would be larger than the compiled model's ``MAX_OUTPUT_BYTES``; raised before
    anything of that size is allocated. ``output``, ``shape``, ``nbytes`` and ``limit`` say
    which and by how much."""

    hint = "raise the config key MAX_OUTPUT_BYTES if the output is meant to be that large"

    def __init__(self, output: str, shape: Sequence[int], dtype: Any, nbytes: int,
                 limit: int) -> None:
        self.output, self.shape, self.nbytes, self.limit = output, tuple(shape), nbytes, limit
        super().__init__(f"output '{output}' would have shape {list(shape)} ({dtype}, {nbytes} "
                         f"bytes), over MAX_OUTPUT_BYTES = {limit} bytes")
