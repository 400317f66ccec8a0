"""Arrays kept in a device's memory, fed to a compiled model without a trip through the host.

A model whose input already lives on the device (a camera frame decoded there, the output of
another model, a benchmark's fixed batch) should not pay a host-to-device copy on every
inference: OpenVINO's ``RemoteTensor`` and onnxruntime's device ``OrtValue`` exist for this.
A :class:`DeviceTensor` is made by ``RuntimeCompiledModel.create_device_tensor`` on that
model's OpenCL context; an infer request given one copies it device-to-device into the
input's buffer (on its own queue, in order with its kernels), so the caller may write the
tensor again once ``infer`` has returned (or ``wait``, after ``start_async``).

Where a host array is needed instead (the reference device, host pre-processing, a request of
another context), ``numpy(tensor)`` reads it back: the result is the same, only slower.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .memory import Allocation


class DeviceTensor:
    """A C-contiguous array of ``shape`` and ``dtype`` in one device buffer of ``engine``.

    ``on_device`` marks it for ``check_feeds`` (which checks its dtype and shape as an
    array's); ``np.asarray(tensor)`` and ``numpy()`` read it back; ``write`` replaces its
    contents."""

    on_device = True

    def __init__(self, engine: Any, shape: tuple[int, ...], dtype: Any) -> None:
        self.engine = engine
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.alloc: Allocation = engine.allocate(self.nbytes, what="a device tensor")

    @classmethod
    def from_array(cls, engine: Any, array: Any) -> DeviceTensor:
        """A new tensor holding a copy of ``array``."""
        arr = np.ascontiguousarray(array)
        tensor = cls(engine, arr.shape, arr.dtype)
        tensor.write(arr)
        return tensor

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def write(self, array: Any) -> None:
        """Copy ``array`` (same shape and dtype) into the tensor; returns once it is there."""
        arr = np.ascontiguousarray(array)
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise InputError("device tensor", f"writing {arr.dtype} {list(arr.shape)} into a "
                                              f"{self.dtype} {list(self.shape)} tensor")
        if arr.nbytes:
            self.engine.cl.enqueue_copy(self.engine.queue, self.alloc.buffer, arr,
                                        is_blocking=True)

    def numpy(self) -> np.ndarray:
        """A host copy of the tensor's contents."""
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self.engine.cl.enqueue_copy(self.engine.queue, out, self.alloc.buffer,
                                        is_blocking=True)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"DeviceTensor({self.dtype} {list(self.shape)} on {self.engine.describe()})"
