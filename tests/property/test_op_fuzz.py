"""Differential fuzz of single ONNX operators (and tiny chains) against onnxruntime.

Hypothesis builds one-operator models with ``onnx.helper`` over random attributes, shapes,
dtypes and opsets (13, 17, 18, 28), inputs declared with symbolic dims where their sizes
change (or all static), and runs ONE compiled model on 2-4 feeds of different shapes in one
infer request, for ``RUNTIME_DEVICE`` (with a drawn ``TRANSFORMATIONS``) and the reference
device, against onnxruntime: relative L2 <= 1e-4 for floats, exact for integers and booleans
(``op_fuzz_harness.check``). The families (``op_fuzz_spatial``, ``op_fuzz_index``,
``op_fuzz_math``) and the view-op prefixes and epilogues (``op_fuzz_chain``) say what they
draw; where onnxruntime departs from the ONNX spec (and onnx.reference and netpass agree on
the spec), the family does not draw that corner and says so.

Derandomized: 15 draws a family in CI; ``-m slow`` draws 150. A draw onnxruntime refuses, or
that netpass refuses with a clear ``netpass.errors`` exception, is discarded. Failures found
are kept in ``REGRESSIONS`` (the shrunk case, with what was wrong).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from onnx import TensorProto, helper, numpy_helper
from op_fuzz_chain import with_views
from op_fuzz_families import FAMILIES
from op_fuzz_harness import Case, Invalid, Refused, check

from netpass.testing import RUNTIME_DEVICE

pytest.importorskip("onnxruntime")

DEVICES = (RUNTIME_DEVICE, "REFERENCE")
CI_EXAMPLES, SLOW_EXAMPLES = 15, 150
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def _run(case: Case) -> None:
    try:
        check(case, DEVICES)
    except (Invalid, Refused):
        assume(False)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_op_fuzz(family):
    @settings(max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=HEALTH)
    @given(with_views(FAMILIES[family]()))
    def run(case):
        _run(case)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_op_fuzz_slow(family):
    @settings(max_examples=SLOW_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=HEALTH)
    @given(with_views(FAMILIES[family]()))
    def run(case):
        _run(case)

    run()


# -- regressions: shrunk failures, each with what was wrong -----------------------------------
F = TensorProto.FLOAT


def _slice_case(shape, starts, ends, steps, axes, dims=None) -> Case:
    x = np.random.default_rng(0).uniform(0.5, 2.0, shape).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in (("s", starts), ("e", ends), ("a", axes), ("t", steps))]
    return Case([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
                [("x", F, dims or [f"d{i}" for i in range(len(shape))])], ["y"],
                [{"x": x}, {"x": x[:, :2] if len(shape) > 1 else x}], 13, inits, "NONE")


def _shape_slice_case() -> Case:
    """``Expand(1, Slice(Shape(x), -9, -9, -1))``: a shape vector sliced from the front."""
    x = np.ones((3, 4), np.float32)
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in (("s", [-9]), ("e", [-9]), ("a", [0]), ("t", [-1]))]
    inits.append(numpy_helper.from_array(np.array([2.0], np.float32), "one"))
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Slice", ["sh", "s", "e", "a", "t"], ["cut"]),
             helper.make_node("Expand", ["one", "cut"], ["y"])]
    return Case(nodes, [("x", F, ["a", "b"])], ["y"], [{"x": x}, {"x": x[:2, :3]}], 13, inits,
                "NONE")


def _gather_elements_case(dims_x, dims_i) -> Case:
    """``GatherElements(x [3, 4], i [2, 2], axis 0)`` and a second step of other sizes: the
    indices are shorter than the data off the axis (torch.gather's exports)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    steps = [{"x": x, "i": np.array([[2, 0], [1, -1]], np.int64)},
             {"x": x[:2, :3], "i": np.array([[1, 0], [0, -2]], np.int64)}]
    if all(isinstance(d, int) for d in dims_x):
        steps = steps[:1]
    return Case([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)],
                [("x", F, dims_x), ("i", TensorProto.INT64, dims_i)], ["y"], steps, 13)


def _empty_grown_case() -> Case:
    """``-(relu(c) + a)`` with ``c [1, 0]`` and ``a [2, 0]`` after a step of non-empty
    sizes, and ``Gemm(a, b [2, 0], c [1, 0], beta 0.5)`` (hypothesis' shrink)."""
    f = np.float32
    relu = [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "a"], ["t"]),
            helper.make_node("Neg", ["t"], ["y"])]
    gemm = [helper.make_node("Gemm", ["a", "b", "c"], ["z"], beta=0.5)]
    steps = [{"a": np.ones((2, 3), f), "c": np.full((1, 3), 2, f)},
             {"a": np.ones((2, 0), f), "c": np.ones((1, 0), f)}]
    return Case(relu, [("a", F, ["m", "n"]), ("c", F, ["p", "q"])], ["y"], steps, 13, [],
                "NONE"), Case(gemm, [("a", F, ["m", "k"]), ("c", F, ["p", "q"])], ["z"],
                              [{"a": np.ones((2, 2), f), "c": np.ones((1, 0), f)}], 17,
                              [numpy_helper.from_array(np.ones((2, 0), f), "b")], "NONE")


def _unranked_case() -> Case:
    """``GatherElements(x, i, axis -1)`` with ``x`` of dynamic rank and ``i [n]`` always of
    one element: the binding (n = 1) is the same at every step while x's length changes."""
    xs = [np.arange(1, n + 1, dtype=np.float32) for n in (3, 2, 2, 3)]
    idx = [np.array([v], np.int64) for v in (0, 0, 1, 2)]
    return Case([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=-1)],
                [("x", F, None), ("i", TensorProto.INT64, ["n"])], ["y"],
                [{"x": x, "i": i} for x, i in zip(xs, idx)], 17, [], "NONE")


REGRESSIONS = {
    # Slice with a negative step and a start below -dim reads element 0 (the spec clamps the
    # start to [0, dim - 1]); the runtime sized and placed it with Python's slice.indices,
    # which reads nothing there: an empty output instead of one row
    "slice_negative_step_start_below_minus_dim": _slice_case(
        (6, 4), [-1000], [-1000], [-2], [0]),
    "slice_negative_step_start_below_minus_dim_2": _slice_case(
        (2, 5, 1), [-1000, -1000], [-3, -3], [-1, -1], [-3, 1]),
    "slice_of_a_shape_vector_negative_step": _shape_slice_case(),
    # GatherElements with static indices shorter than the data off the axis (onnxruntime and
    # torch.gather allow it) was refused by the op's inference (at compile time, or at run
    # time where the data's dims were symbolic): the ONNX rule now cuts the data to them
    "gather_elements_short_indices_static": _gather_elements_case([3, 4], [2, 2]),
    "gather_elements_short_indices_dynamic_data": _gather_elements_case(["a", "b"], [2, 2]),
    # an elementwise op fused into its producer with a side input that grows the output: when
    # the output was empty the primitive skipped with the producer's shape ([1, 0], not
    # [2, 0]); it now takes the host path, which broadcasts
    "fused_side_input_grows_an_empty_output": _empty_grown_case()[0],
    "gemm_beta_empty_columns": _empty_grown_case()[1],
    # an input of dynamic rank binds no symbol: the symbolic mode's records and step plans,
    # keyed by the binding, replayed step 2's GatherElements (data length 2) at step 3
    # (length 3): index 2 read as out of range, 0 instead of 3
    "dynamic_rank_input_changes_under_one_binding": _unranked_case(),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_op_fuzz_regression(name):
    check(REGRESSIONS[name], DEVICES)
