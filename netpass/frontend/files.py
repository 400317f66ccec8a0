"""Opening the files a model is read from, so that a hostile model cannot reach past them.

A model names other files: an IR ``.xml`` its ``.bin`` (next to it, same stem), an ONNX model
its external data (a ``location`` relative to the model). Every such file:

- resolves inside the model's folder: a name that is absolute or has a ``..`` part is refused
  as written, and the path is then resolved (symlinks followed) and must still lie inside the
  resolved folder, so a symlink that points out of the folder is refused too;
- must be a regular file: a FIFO, a device (``/dev/zero``), a socket or a directory is refused
  from ``stat`` before it is opened, so nothing blocks or streams without end; the open itself
  is non-blocking and re-checked on the descriptor, which closes a swap between the two;
- is read only over the ranges the model declares (offset and length), each checked against
  the file's size first: a file shorter than declared is an error, a longer one is read only
  as far as declared; a range larger than the machine's memory is refused before reading
  (OutOfMemoryError).

The model file the user names (``.xml`` or ``.onnx``) is the user's choice and may lie
anywhere, but it too must be a regular file, and it is read whole only up to a size cap that a
real model does not reach (:data:`MAX_XML_BYTES`, :data:`MAX_ONNX_BYTES`).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath
from types import TracebackType

from ..errors import ModelFileError, OutOfMemoryError

# An IR xml holds the graph only (weights live in the .bin); the largest OpenVINO IRs of
# today's LLMs have xml files of tens of MiB, so 1 GiB is never reached by a real model.
MAX_XML_BYTES = 1 << 30
# protobuf cannot parse a message of 2 GiB or more; larger ONNX models keep external data.
MAX_ONNX_BYTES = (2 << 30) - 1

# os.pread returns at most this many bytes per call on Linux.
_MAX_READ = 0x7FFFF000


def physical_memory() -> int | None:
    """This machine's memory in bytes, where the OS says."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def contained_path(folder: Path, name: str, what: str, model: str) -> Path:
    """``folder / name`` resolved, refused unless it stays inside ``folder``.

    ``name`` is a path as a model wrote it; ``what`` says which file it is (for errors) and
    ``model`` names the model file that refers to it.
    """
    if not name:
        raise ModelFileError(f"{what} has an empty file name", name, model)
    if "\0" in name:  # (no OS takes one: os.stat raised a bare ValueError)
        raise ModelFileError(f"{what} {name!r} has a NUL character in its file name", name,
                             model)
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() \
            or PureWindowsPath(name).drive:
        raise ModelFileError(f"{what} '{name}' is an absolute path, which leaves the model "
                             "directory (a model may name files only relative to it)", name,
                             model)
    if ".." in PureWindowsPath(name).parts:  # splits on both / and \
        raise ModelFileError(f"{what} '{name}' has a '..' part, which leaves the model "
                             "directory", name, model)
    return inside_folder(folder, folder / name, what, model)


def inside_folder(folder: Path, path: Path, what: str, model: str) -> Path:
    """``path`` with symlinks resolved, refused unless it lies inside ``folder`` (resolved)."""
    try:
        root = folder.resolve(strict=True)
        target = path.resolve(strict=False)
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ModelFileError(f"{what} '{path}' cannot be resolved: {e}", str(path),
                             model) from None
    if target != root and root not in target.parents:
        raise ModelFileError(f"{what} '{path}' resolves to {target}, which leaves the model "
                             f"directory {root}", str(path), model)
    return target


class RegularFile:
    """A regular file opened for reading without blocking; a context manager.

    Refuses (with :class:`ModelFileError` naming ``what``, the path and ``model``) a path that
    does not exist or is not a regular file, before opening it.
    """

    def __init__(self, path: Path, what: str, model: str, named: str | Path | None = None) -> None:
        self.path, self.what, self.model = path, what, model
        # How errors call the file: as named, with the path it resolved to when that differs.
        self.label = str(path) if named is None or str(named) == str(path) else \
            f"{named} (resolved to {path})"
        self._fd = -1
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise ModelFileError(f"{what} not found: {self.label}", str(path), model) from None
        except OSError as e:
            raise self.error(f"cannot be read: {e.strerror or e}") from None
        except ValueError as e:  # a NUL character in the name, which no OS takes
            raise self.error(f"cannot be read: {e}") from None
        if not stat.S_ISREG(mode):
            raise self.error(f"is {_kind(mode)}, not a regular file")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
            | getattr(os, "O_BINARY", 0)
        try:
            self._fd = os.open(path, flags)
            st = os.fstat(self._fd)
        except OSError as e:
            self.close()
            raise self.error(f"cannot be read: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):  # swapped after the stat above
            self.close()
            raise self.error(f"is {_kind(st.st_mode)}, not a regular file")
        self.size = st.st_size

    def error(self, reason: str) -> ModelFileError:
        return ModelFileError(f"{self.what} {self.label} {reason}", str(self.path), self.model)

    def read_range(self, offset: int, length: int, where: str) -> bytes:
        """``length`` bytes at ``offset``; refused when the file does not hold them all.
        ``where`` names what the model declared the range for (a tensor, a layer)."""
        if offset < 0 or length < 0:
            raise self.error(f"declares a negative offset or length for {where} "
                             f"(offset {offset}, length {length})")
        if offset + length > self.size:
            raise self.error(f"is truncated: {where} lies at [{offset}, {offset + length}) "
                             f"outside the file of {self.size} bytes")
        memory = physical_memory()
        if memory is not None and length > memory:
            raise OutOfMemoryError(f"{where} in {self.what} {self.label} declares {length} "
                                   f"bytes, more than this machine's {memory} bytes of memory")
        parts = []
        done = 0
        while done < length:
            try:
                chunk = os.pread(self._fd, min(length - done, _MAX_READ), offset + done)
            except OSError as e:
                raise self.error(f"cannot be read: {e.strerror or e}") from None
            if not chunk:  # shrank while we read it
                raise self.error(f"is truncated: it ended at {offset + done} bytes while "
                                 f"reading {where} at [{offset}, {offset + length})")
            parts.append(chunk)
            done += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_all(self, limit: int) -> bytes:
        """The whole file, refused when it is larger than ``limit`` bytes."""
        if self.size > limit:
            raise self.error(f"has {self.size} bytes, more than the {limit} a model file "
                             "may have")
        return self.read_range(0, self.size, "the whole file")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RegularFile:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_model_file(path: Path, what: str, limit: int) -> bytes:
    """A model file the user named, whole: a regular file of at most ``limit`` bytes."""
    with RegularFile(path, what, str(path)) as f:
        return f.read_all(limit)


__all__ = ["MAX_XML_BYTES", "MAX_ONNX_BYTES", "RegularFile", "contained_path", "inside_folder",
           "physical_memory", "read_model_file"]
