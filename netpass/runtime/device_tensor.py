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

from ..core.types import Type
from ..errors import InputError, OutOfMemoryError
from .memory import Allocation


def device_array(array: Any) -> np.ndarray:
    """``array`` as a C-contiguous host array whose bytes may go to a device: of one of the
    element types (f32, i64, bool, ...). Anything else is an InputError: an object array's
    bytes are pointers to Python objects, and reading them back into an object array made
    objects of freed memory (a segfault); a str array is no model's input."""
    try:
        arr = np.asarray(array, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
    except MemoryError as e:
        raise OutOfMemoryError(f"device tensor: out of memory copying an array of shape "
                               f"{list(getattr(array, 'shape', ()))} ({e})") from e
    except (ValueError, TypeError) as e:
        raise InputError("device tensor", f"cannot be made an array from a "
                                          f"{type(array).__name__}: {e}") from e
    try:
        et = Type.of(arr.dtype)
    except TypeError:
        et = None
    if et is None or et.dtype is None or et.dtype.hasobject:
        raise InputError("device tensor", f"dtype {arr.dtype} cannot be held in device memory; "
                                          f"use a numeric or boolean array")
    return arr


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
        """A new tensor holding a copy of ``array`` (of a numeric or boolean element type)."""
        arr = device_array(array)
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
        arr = device_array(array)
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
