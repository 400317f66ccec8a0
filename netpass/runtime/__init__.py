"""OpenCL runtime with dynamic shapes (DESIGN.md section 8; docs/runtime.md).

``compile_program(model_or_program, device, config)`` -> :class:`RuntimeCompiledModel`;
``devices()`` lists the OpenCL devices; :class:`ShapePredictor` sizes growing buffers.
"""
from __future__ import annotations

from .async_queue import AsyncInferQueue, RequestBusyError
from .compiled import RuntimeCompiledModel, RuntimeInferRequest, compile_program
from .device import DEVICE_NAMES, Engine, devices, resolve_device_name, select_device
from .device_tensor import DeviceTensor
from .lru import LruCache
from .memory import Allocation, MemoryPool, Tensor, fake_aligned_shapes
from .program import Program
from .program_node import ProgramNode
from .shape_predictor import ShapePredictor, parse_options

__all__ = ["compile_program", "RuntimeCompiledModel", "RuntimeInferRequest", "AsyncInferQueue",
           "RequestBusyError", "DeviceTensor", "devices", "select_device",
           "resolve_device_name", "Engine", "DEVICE_NAMES", "ShapePredictor", "parse_options",
           "Program", "ProgramNode", "LruCache", "MemoryPool", "Allocation", "Tensor",
           "fake_aligned_shapes"]
