"""Checks of the legacy-stage differential fuzz: each legacy pass alone, the whole
``compile_model`` on REFERENCE and the runtime device, and the pre/post split alone, each
against the reference evaluator on the original model."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

import netpass
from netpass import Model
from netpass.compiler import apply_transformations
from netpass.legacy_passes import convert_to_legacy, run_legacy_passes
from netpass.prepost import split_pre_post_processing
from netpass.reference import infer
from netpass.runtime.graph_compiler import legacy_to_model
from netpass.testing import random_inputs

# rel. L2 bound per float type: f16's rounding differs between the reference (numpy) and a
# device, and a fused bias rounds once instead of twice
RTOL_L2 = {"float32": 1e-5, "float16": 1e-2}
# on an OpenCL device, f32 as every runtime differential test here: kernels sum in other orders
# (a lone output of a cancelling reduction moved by 2.5e-5 on PoCL)
DEVICE_RTOL_L2 = {"float32": 1e-4, "float16": 1e-2}


def fingerprint(model: Model) -> list:
    """What a user sees of a model: every op's type, name, attributes, inputs, output names,
    shapes and types, and constant values (to tell whether a stage mutated it)."""
    ids = {n: i for i, n in enumerate(model.get_ordered_ops())}
    out = []
    for node, i in ids.items():
        attrs = sorted((k, repr(v)) for k, v in node.get_attributes().items())
        value = node.value.tobytes() if hasattr(node, "value") and \
            isinstance(node.value, np.ndarray) else None
        out.append((i, node.type_name, node.friendly_name, attrs, value,
                    [(ids[s.node], s.index) for s in node.input_values()],
                    [(sorted(o.names), str(o.partial_shape), o.element_type.name)
                     for o in node.outputs()]))
    return [out, model.input_names, model.output_names]


def feeds_for(model: Model, seed: int, special: bool) -> dict[str, np.ndarray]:
    """Random non-zero inputs; ``special`` puts an inf, a -inf and a NaN into float inputs."""
    feeds = random_inputs(model, seed)
    if special:
        rng = np.random.default_rng(seed)
        for arr in feeds.values():
            if arr.dtype.kind == "f" and arr.size:
                flat = arr.reshape(-1)
                for v in (np.inf, -np.inf, np.nan):
                    flat[int(rng.integers(flat.size))] = v
    return feeds


def assert_close(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                 where: str, rtol: Mapping[str, float] = RTOL_L2) -> None:
    """Same names, shapes and dtypes; ints exact; floats: NaN and inf where the reference has
    them, rel. L2 of the finite rest <= ``rtol`` of the type."""
    assert list(got) == list(want), f"{where}: output names {list(got)} != {list(want)}"
    for name, w in want.items():
        g, w = np.asarray(got[name]), np.asarray(w)
        assert g.shape == w.shape, f"{where}: '{name}' shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{where}: '{name}' dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind != "f":
            assert np.array_equal(g, w), f"{where}: '{name}' differs:\n{g}\nvs\n{w}"
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        fin = np.isfinite(w64)
        assert np.array_equal(np.isnan(g64), np.isnan(w64)), \
            f"{where}: '{name}' NaN at other places:\n{g}\nvs\n{w}"
        assert np.array_equal(g64[np.isinf(w64)], w64[np.isinf(w64)]) and \
            not np.isinf(g64[fin]).any(), f"{where}: '{name}' inf at other places:\n{g}\nvs\n{w}"
        err = np.linalg.norm(g64[fin] - w64[fin])
        ref = np.linalg.norm(w64[fin])
        assert err <= rtol[w.dtype.name] * ref + 1e-30, \
            f"{where}: '{name}' rel. L2 {err / max(ref, 1e-30):.3g}:\n{g}\nvs\n{w}"


def transformed_copy(model: Model, which: str) -> Model:
    """``model`` through the ngraph pipeline ``which``, its output names pinned as
    compile_model pins them."""
    copy = model.clone()
    for result, name in zip(copy.results, model.output_names):
        result.friendly_name = name
    apply_transformations(copy, which)
    return copy


def check_single_pass(model: Model, which: str, legacy_pass: type, feeds, want) -> None:
    """(a) the model after ``which``, converted, one legacy pass, lowered: the reference
    evaluator gives the original's outputs under the original's names."""
    transformed = transformed_copy(model, which)
    net = convert_to_legacy(transformed)
    run_legacy_passes(net, [legacy_pass])
    executable = legacy_to_model(net)
    assert executable.output_names == model.output_names, \
        f"{legacy_pass.__name__}: outputs {executable.output_names} != {model.output_names}"
    assert executable.input_names == model.input_names
    got = infer(executable, {k: feeds[k] for k in executable.input_names})
    assert_close(got, want, f"{which} + {legacy_pass.__name__}")


def check_compile(model: Model, which: str, device: str, feeds, want) -> None:
    """(b) compile_model on ``device``: the original's outputs and names, the model untouched."""
    before = fingerprint(model)
    cm = netpass.compile_model(model, device, {"TRANSFORMATIONS": which})
    assert [p.name for p in cm.inputs] == model.input_names
    assert [p.name for p in cm.outputs] == model.output_names
    got = cm.create_infer_request().infer(feeds)
    assert fingerprint(model) == before, f"compile_model({which}) changed the user's model"
    assert_close(dict(got), want, f"{which} on {device}",
                 RTOL_L2 if device == "REFERENCE" else DEVICE_RTOL_L2)


def check_split(model: Model, which: str, feeds, want) -> None:
    """(c) split_pre_post_processing alone: pre -> main -> post equals the model; the model it
    was cut from (the user's) untouched; the main model keeps every input and output name, and
    any input it adds (an input read in two layouts, one per layout) is computed from a user
    input by a pre-processing model."""
    transformed = transformed_copy(model, which)
    before = fingerprint(model)
    reference_before = infer(transformed, feeds)
    main = transformed
    prepost = split_pre_post_processing(main)
    assert fingerprint(model) == before, "the split changed the user's model"
    users = len(model.input_names)
    assert main.input_names[:users] == model.input_names, f"inputs {main.input_names}"
    assert set(main.input_names[users:]) == set(prepost.sources), f"inputs {main.input_names}"
    assert set(prepost.sources.values()) <= set(model.input_names)
    assert main.output_names == model.output_names, f"outputs {main.output_names}"
    assert set(prepost.inputs) <= set(model.input_names) | set(prepost.sources)
    assert set(prepost.outputs) <= set(model.output_names)
    outs = prepost.postprocess(infer(main, prepost.preprocess(feeds)))
    got = {n: outs[n] for n in model.output_names}
    assert_close(got, reference_before, f"{which} split")
    assert_close(got, want, f"{which} split vs original")
