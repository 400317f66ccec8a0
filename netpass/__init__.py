"""netpass: bring neural networks to layout-strict hardware.

Read a model (ONNX or IR v11), rewrite it with a pass framework until the target accepts every
op, split edge Transposes/Gathers into CPU pre/post-processing, lower to a legacy layer graph
and run it on an OpenCL runtime with dynamic shapes.
"""
from __future__ import annotations

from typing import Any

from . import errors, ops, opset, reference
from .core import (
    Dimension,
    Input,
    Model,
    Node,
    Output,
    PartialShape,
    Symbol,
    Type,
    copy_runtime_info,
    lint,
    replace_node,
    replace_node_update_name,
    replace_output_update_name,
)
from .core import types as element
from .frontend import read_model
from .passes.replace import replace_node_keep_names, replace_output_keep_names
from .version import __version__  # noqa: F401  (netpass.__version__)


def save_model(model: Model, path: Any, weights: Any = None) -> None:
    """Write ``model`` as ONNX (``.onnx``) or IR v11 (``.xml`` + ``.bin``). A file that cannot
    be written raises FileAccessError (a NetpassError and an OSError)."""
    if not isinstance(model, Model):
        raise errors.NetpassError(f"save_model expects a Model, got {type(model).__name__}")
    p = str(path)
    for name in (p, weights):
        if name is not None and "\0" in str(name):  # (no OS takes one: a bare ValueError)
            raise errors.FileAccessError(f"saving {name!r}: a file name cannot hold a NUL "
                                         f"character")
    if p.endswith(".onnx"):
        from .frontend.onnx_writer import write_onnx
        with errors.system_errors_as_netpass(f"saving {p}"):
            write_onnx(model, p)
    elif p.endswith(".xml"):
        from .passes.serialize import write_ir
        write_ir(model, p, weights)
    else:
        raise errors.ModelFormatError(f"unknown model file suffix: {p} (use .onnx or .xml)")


def compile_model(model: Any, device: str = "AUTO", config: dict | None = None,
                  progress: Any = None):
    """Compile a model (or a path) for ``device`` (AUTO | GPU | CPU | REFERENCE); ``progress``
    (a callable ``(stage, step, total)`` or a logging.Logger) hears of each stage."""
    from .compiler import compile_model as _compile
    return _compile(model, device=device, config=config, progress=progress)


def __getattr__(name: str) -> Any:
    """``netpass.AsyncInferQueue`` without importing the runtime (pyopencl) with netpass."""
    if name == "AsyncInferQueue":
        from .runtime.async_queue import AsyncInferQueue
        return AsyncInferQueue
    raise AttributeError(f"module 'netpass' has no attribute '{name}'")


__all__ = [
    "Dimension", "PartialShape", "Symbol", "Type", "element", "Node", "Input", "Output", "Model",
    "read_model", "save_model", "compile_model", "AsyncInferQueue", "replace_node",
    "replace_output_update_name", "replace_node_update_name", "replace_output_keep_names",
    "replace_node_keep_names", "copy_runtime_info", "lint", "opset", "ops", "reference", "errors",
]
