"""GatherSinkingTransposeReshapeForward/Backward and GatherSinkingTranspose."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import (
    GatherSinkingTranspose,
    GatherSinkingTransposeReshapeBackward,
    GatherSinkingTransposeReshapeForward,
)
from netpass.ngraph_passes.utils import transpose_gather_indexes


def test_index_formula_matches_transpose():
    x = rand(2, 3, 4, 5)
    idx = transpose_gather_indexes(x.shape, [0, 2, 3, 1])
    assert np.array_equal(np.transpose(x, [0, 2, 3, 1]).reshape(-1), x.reshape(-1)[idx])


def test_forward_transpose_reshape_becomes_gather():
    x = param([1, 3, 5, 7])
    m = model_of(opset.relu(opset.reshape(opset.transpose(x, [0, 2, 3, 1]), [1, 105], False)), x)
    run_checked(m, GatherSinkingTransposeReshapeForward())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1


def test_backward_reshape_transpose_3d_result_name():
    x = param([1, 35, 3])
    t = opset.transpose(opset.reshape(x, [1, 5, 21], False), [0, 2, 1], name="t")
    m = model_of(t, x)
    run_checked(m, GatherSinkingTransposeReshapeBackward())
    assert count(m, "Transpose") == 0 and m.results[0].input_value(0).node.friendly_name == "t"


def test_supported_transpose_stays():
    x = param([1, 8, 16])
    m = model_of(opset.reshape(opset.transpose(x, [0, 2, 1]), [1, 128], False), x)
    run(m, GatherSinkingTransposeReshapeForward())
    assert count(m, "Gather") == 0


def test_gather_then_transpose_merge():
    x = param([1, 60])
    perm = np.random.default_rng(0).permutation(60)
    g = opset.gather(x, opset.constant(perm), opset.constant(np.int64(1)))
    m = model_of(opset.transpose(opset.reshape(g, [3, 4, 5], False), [2, 0, 1]), x)
    run_checked(m, GatherSinkingTranspose())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1


def test_transpose_then_gather_merge():
    x = param([3, 4, 5])
    perm = np.random.default_rng(1).permutation(60)
    r = opset.reshape(opset.transpose(x, [1, 2, 0]), [1, 60], False)
    m = model_of(opset.gather(r, opset.constant(perm), opset.constant(np.int64(1))), x)
    run_checked(m, GatherSinkingTranspose())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1


def test_transpose_moving_only_ones_becomes_a_reshape_not_a_gather():
    """[3, 1, 10] -> [1, 3, 10] keeps the flat order: no identity Gather is made (zoo F5)."""
    x = param([3, 10])
    t = opset.transpose(opset.reshape(x, [3, 1, 10], False), [1, 0, 2], name="t")
    m = model_of(opset.relu(t), x)
    run_checked(m, GatherSinkingTransposeReshapeBackward())
    assert count(m, "Transpose", "Gather") == 0
    assert m.results[0].input_value(0).node.input_value(0).node.type_name == "Reshape"


def test_general_skips_only_models_it_cannot_change():
    """GatherSinkingGeneral spares its traversals on a model with no Gather and no Transpose
    GNA cannot run next to a Reshape (``nothing_to_sink``: the traversals would change
    nothing there), and still turns such a pair into a Gather when no Gather is there yet."""
    from netpass.ngraph_passes.gna.gather_general import (
        GatherAbsorb,
        GatherSinkingGeneral,
        GatherSinkingGeneralBackward,
        GatherSinkingGeneralForward,
        nothing_to_sink,
    )

    x = param([1, 3, 5, 7])
    m = model_of(opset.relu(opset.reshape(opset.transpose(x, [0, 2, 3, 1]), [1, 105], False)), x)
    assert not nothing_to_sink(m)
    run_checked(m, GatherSinkingGeneral())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1
    y = param([1, 35, 3])
    m = model_of(opset.transpose(opset.reshape(y, [1, 5, 21], False), [0, 2, 1]), y)
    assert not nothing_to_sink(m)
    run_checked(m, GatherSinkingGeneral())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1

    a, b = param([1, 3, 5, 7]), param([1, 8, 16], "y")
    unsupported_alone = opset.relu(opset.transpose(a, [0, 2, 3, 1]))
    supported_pair = opset.reshape(opset.transpose(b, [0, 2, 1]), [1, 128], False)
    m = model_of([unsupported_alone, supported_pair], [a, b])
    assert nothing_to_sink(m)
    for stage in (GatherAbsorb, GatherSinkingGeneralForward, GatherSinkingGeneralBackward):
        assert not stage().run_on_model(m)


def test_no_flat_gather_no_traversal():
    """A Gather over one of several non-1 axes is not flat: neither member starts from it, so
    GatherSinkingTranspose leaves the model without traversing it (and its members, run
    alone, change nothing either)."""
    from netpass.ngraph_passes.gna import (
        GatherSinkingTransposeBackward,
        GatherSinkingTransposeForward,
    )

    x = param([1, 8, 4, 4])
    g = opset.gather(x, opset.constant(np.arange(8)[::-1].copy()), opset.constant(np.int64(1)))
    m = model_of(opset.transpose(g, [0, 2, 3, 1]), x)
    assert not GatherSinkingTranspose().run_on_model(m)
    for member in (GatherSinkingTransposeForward, GatherSinkingTransposeBackward):
        assert not member().run_on_model(m)
    assert count(m, "Transpose") == 1 and count(m, "Gather") == 1


def test_gate_finds_the_flat_gathers_flat_gather_finds():
    """GatherSinkingTranspose's gate (Gathers picked at C level, shapes with two dims other
    than 1 or a dynamic one passed over) answers as ``flat_gather`` over every node does."""
    from netpass.core.dimension import Dimension
    from netpass.ngraph_passes.gna.gather_transpose import _may_start
    from netpass.ngraph_passes.gna.gather_utils import flat_gather

    for shape, axis in (([1, 8], 1), ([8, 1], 0), ([1, 1], 1), ([2, 8], 1), ([1, 8, 4], 1),
                        ([1, 8], 0), ([Dimension(1, 4), 8], 1), ([8], 0)):
        x = param(shape)
        n = [s if isinstance(s, int) else 1 for s in shape][axis]
        g = opset.gather(x, opset.constant(np.arange(n)[::-1].copy()),
                         opset.constant(np.int64(axis)))
        m = model_of(opset.relu(g), x)
        ops = m.get_ordered_ops()
        expected = any(flat_gather(op) is not None for op in ops)
        assert _may_start(ops) == expected, (shape, axis)
        assert expected == ((shape, axis) in (([1, 8], 1), ([8, 1], 0), ([1, 1], 1), ([8], 0)))
