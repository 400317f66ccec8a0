"""Both readers open only what a model may name: the same hostile files, the same refusals.

A model folder holds a model whose one weight (16 f32) lives in a weights file: the IR's
``m.bin`` or an ONNX tensor's external data. Each case makes that file hostile (a name that
leaves the folder, a symlink out of it, a FIFO, a device, a directory, a short or long file).
Next to the folder lies a canary file of distinctive bytes, of the size the weight declares.
Every refusal must be a ModelFileError naming the file and the model, and the canary must never
be opened (an audit hook records every open) nor show up in an error, constant or output.
"""
from __future__ import annotations

import os
import re
import stat
import sys
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import netpass
from netpass import Model, opset
from netpass.errors import ModelFileError
from netpass.frontend import files
from netpass.ops import Constant

W = np.linspace(0.5, 2.0, 16, dtype=np.float32)
CANARY = (b"CANARY!netpass#" * 5)[:W.nbytes]
X = np.random.default_rng(3).uniform(-1, 1, 16).astype(np.float32)

# -- every file opened while a test reads a model ---------------------------------------------
_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


def _read_recording_opens(path: Path, *weights) -> tuple[Model | None, Exception | None,
                                                           list[str]]:
    global _opened
    _opened = []
    try:
        return netpass.read_model(path, *weights), None, _opened
    except Exception as e:  # the test asserts its type
        return None, e, _opened
    finally:
        _opened = None


# -- the two readers' model folders -----------------------------------------------------------
def _write_ir(folder: Path, ref: str) -> tuple[Path, str]:
    """m.xml + m.bin; the weights file is m.bin, a symlink to ``ref`` unless ref is m.bin."""
    x = opset.parameter([16], np.float32, name="x")
    model = Model([opset.add(x, opset.constant(W), name="y")], [x], "m")
    netpass.save_model(model, folder / "m.xml")
    if ref != "m.bin":
        (folder / "m.bin").unlink()
        (folder / "m.bin").symlink_to(ref)
    return folder / "m.xml", "m.bin"


def _write_onnx(folder: Path, ref: str) -> tuple[Path, str]:
    """m.onnx whose initializer 'w' is external data at location ``ref``, offset 0."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", ref), ("offset", "0"), ("length", str(W.nbytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                              [vi("x", TensorProto.FLOAT, [16])],
                              [vi("y", TensorProto.FLOAT, [16])], [w])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    (folder / "m.onnx").write_bytes(proto.SerializeToString())
    return folder / "m.onnx", ref


WRITERS = {"ir": _write_ir, "onnx": _write_onnx}
NAME = {"ir": "m.bin", "onnx": "w.bin"}  # the weights file's own name inside the folder


class Folder:
    """A model folder with a canary file of distinctive bytes just outside it."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "model"
        self.outside = tmp_path / "outside"
        self.path.mkdir()
        self.outside.mkdir()
        self.canary = self.outside / "canary.bin"
        self.canary.write_bytes(CANARY)

    def write(self, reader: str, case: Callable[[Folder, Path], str | None]) -> tuple[Path, str]:
        """The reader's model with a real weights file, then ``case(folder, weights_path)``:
        it replaces the weights file, or returns another reference for the model to hold
        (the IR names no file, so its m.bin becomes a symlink to that reference). Returns
        the model's path and the name the model refers to its weights by."""
        weights = self.path / NAME[reader]
        model, _ = WRITERS[reader](self.path, NAME[reader])
        if reader == "onnx":
            weights.write_bytes(W.tobytes())
        ref = case(self, weights)
        if ref is not None:
            WRITERS[reader](self.path, ref)
        return model, NAME[reader] if reader == "ir" or ref is None else ref


@pytest.fixture
def folder(tmp_path) -> Folder:
    return Folder(tmp_path)


def _replacing(make: Callable[[Path], None]) -> Callable[[Folder, Path], None]:
    def case(f: Folder, weights: Path) -> None:
        weights.unlink()
        make(weights)
    case.__name__ = make.__name__
    return case


# Each case makes the weights file hostile, in place or through the reference the model holds.
def _dotdot(f: Folder, w: Path) -> str:
    return "../outside/canary.bin"


def _absolute(f: Folder, w: Path) -> str:
    return str(f.canary)


def _symlink_dir_out(f: Folder, w: Path) -> str:
    (f.path / "sub").symlink_to(f.outside)
    return "sub/canary.bin"


def _symlink_file_out(w: Path) -> None:
    w.symlink_to(w.parent.parent / "outside" / "canary.bin")


def _dev_zero(w: Path) -> None:
    w.symlink_to("/dev/zero")


def _fifo(w: Path) -> None:
    os.mkfifo(w)


def _directory(w: Path) -> None:
    w.mkdir()


def _truncated(w: Path) -> None:
    w.write_bytes(W.tobytes()[:8])


def _dangling_symlink(w: Path) -> None:
    w.symlink_to("nowhere.bin")


HOSTILE = [
    (_dotdot, r"leaves the model directory"),
    (_absolute, r"leaves the model directory"),
    (_symlink_dir_out, r"leaves the model directory"),
    (_replacing(_symlink_file_out), r"leaves the model directory"),
    (_replacing(_dev_zero), r"leaves the model directory"),
    (_replacing(_fifo), r"is a FIFO, not a regular file"),
    (_replacing(_directory), r"is a directory, not a regular file"),
    (_replacing(_truncated), r"is truncated: .* outside the file of 8 bytes"),
    (_replacing(_dangling_symlink), r"not found"),
]


@pytest.mark.parametrize("reader", ["ir", "onnx"])
@pytest.mark.parametrize("case,reason", HOSTILE, ids=[c.__name__[1:] for c, _ in HOSTILE])
def test_hostile_weights_file_is_refused_naming_file_and_model(folder, reader, case, reason):
    model, named = folder.write(reader, case)

    back, err, opened = _read_recording_opens(model)

    assert back is None and isinstance(err, ModelFileError), repr(err)
    message = str(err)
    assert re.search(reason, message), message
    assert named in message, message
    assert f"named by model {model}" in message and err.model == str(model)
    assert CANARY.decode() not in message
    assert os.path.realpath(folder.canary) not in {os.path.realpath(p) for p in opened}


def _mknod_zero(f: Folder, w: Path) -> None:
    w.unlink()
    try:
        os.mknod(w, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")


@pytest.mark.parametrize("reader", ["ir", "onnx"])
def test_device_inside_the_folder_is_refused_without_opening_it(folder, reader):
    model, named = folder.write(reader, _mknod_zero)
    _, err, opened = _read_recording_opens(model)
    assert isinstance(err, ModelFileError) and "is a character device, not a regular file" \
        in str(err) and named in str(err), repr(err)
    assert str(folder.path / named) not in opened


def _inside_symlink(f: Folder, w: Path) -> None:
    (f.path / "data").mkdir()
    w.rename(f.path / "data" / "real.bin")
    w.symlink_to("data/real.bin")


def _oversized(f: Folder, w: Path) -> None:
    """The declared bytes, then the canary's, then a sparse tail to 256 MiB (no disk used)."""
    with open(w, "ab") as out:
        out.write(CANARY)
    os.truncate(w, 256 << 20)


def _constants_and_outputs(model: Model) -> list[bytes]:
    outs = netpass.reference.infer(model, {"x": X})
    return [n.value.tobytes() for n in model.get_ordered_ops() if isinstance(n, Constant)] + \
        [a.tobytes() for a in outs.values()]


@pytest.mark.parametrize("reader", ["ir", "onnx"])
@pytest.mark.parametrize("case", [_inside_symlink, _oversized])
def test_weights_inside_the_folder_load_and_only_the_declared_bytes_are_read(folder, reader,
                                                                            case):
    model, _ = folder.write(reader, case)
    tracemalloc.start()
    try:
        back, err, opened = _read_recording_opens(model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err is None, repr(err)
    # A 256 MiB weights file of which the model declares 64 bytes: reading it whole would
    # show here (the reader holds at most one tensor's bytes at a time).
    assert peak < 16 << 20, peak
    np.testing.assert_array_equal(netpass.reference.infer(back, {"x": X})["y"], X + W)
    assert all(CANARY[:16] not in blob for blob in _constants_and_outputs(back))
    assert os.path.realpath(folder.canary) not in {os.path.realpath(p) for p in opened}


# -- the weights path a caller passes (IR): anywhere, but a regular file --------------------
@pytest.mark.parametrize("make,reason", [
    (lambda d: Path("/dev/zero"), "is a character device, not a regular file"),
    (lambda d: (os.mkfifo(d / "pipe"), d / "pipe")[1], "is a FIFO, not a regular file"),
    (lambda d: d, "is a directory, not a regular file"),
], ids=["dev-zero", "fifo", "directory"])
def test_ir_weights_given_by_the_caller_must_be_a_regular_file(folder, make, reason):
    model, _ = folder.write("ir", lambda f, w: None)
    weights = make(folder.outside)
    with pytest.raises(ModelFileError, match=reason) as info:
        netpass.read_model(model, weights)
    assert str(weights) in str(info.value) and str(model) in str(info.value)


def test_ir_weights_given_by_the_caller_may_lie_outside_the_folder(folder):
    model, _ = folder.write("ir", lambda f, w: None)
    moved = folder.outside / "weights.bin"
    (folder.path / "m.bin").rename(moved)
    back = netpass.read_model(model, moved)
    np.testing.assert_array_equal(netpass.reference.infer(back, {"x": X})["y"], X + W)


# -- the model file itself ---------------------------------------------------------------------
def _read_in_thread(path: Path) -> BaseException | None:
    """read_model(path) on a thread; a read that blocks (a FIFO opened for reading waits for a
    writer) is released by opening the FIFO's writing end, and reported."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            netpass.read_model(path)
            result.append(None)
        except BaseException as e:  # handed to the test
            result.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        with open(path, "wb"):
            pass
        thread.join()
        pytest.fail(f"read_model({path}) blocked")
    return result[0]


@pytest.mark.parametrize("suffix", [".xml", ".onnx"])
@pytest.mark.parametrize("kind", ["fifo", "directory", "dev-zero"])
def test_model_file_that_is_not_a_regular_file_is_refused_before_reading(tmp_path, suffix, kind):
    path = tmp_path / f"m{suffix}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    err = _read_in_thread(path)
    assert isinstance(err, ModelFileError), repr(err)
    assert str(path) in str(err) and "not a regular file" in str(err)


@pytest.mark.parametrize("reader,cap", [("ir", "netpass.frontend.ir_reader.MAX_XML_BYTES"),
                                        ("onnx", "netpass.frontend.onnx_reader.MAX_ONNX_BYTES")])
def test_model_file_over_the_size_cap_is_refused(folder, monkeypatch, reader, cap):
    model, _ = folder.write(reader, lambda f, w: None)
    monkeypatch.setattr(cap, model.stat().st_size - 1)
    with pytest.raises(ModelFileError, match=rf"has {model.stat().st_size} bytes, more than"):
        netpass.read_model(model)


def test_size_caps_are_beyond_what_real_models_reach():
    assert files.MAX_XML_BYTES >= 1 << 30 and files.MAX_ONNX_BYTES == (2 << 30) - 1


@pytest.mark.parametrize("name", ["..\\outside\\canary.bin", "C:\\secret.bin", "C:secret.bin",
                                  "a/../../outside/canary.bin", ""])
def test_onnx_locations_outside_the_folder_in_any_spelling_are_refused(folder, name):
    model, _ = folder.write("onnx", lambda f, w: name)
    with pytest.raises(ModelFileError, match="leaves the model directory|empty file name"):
        netpass.read_model(model)


def test_an_onnx_location_with_a_nul_character_is_refused(folder):
    """(os.stat raised a bare ValueError: embedded null byte.)"""
    model, _ = folder.write("onnx", lambda f, w: "w.bin\0../outside/canary.bin")
    with pytest.raises(ModelFileError, match="has a NUL character in its file name"):
        netpass.read_model(model)
