"""GNA TSConcatForward and TSSplitBackward (flat Concat/Split + Gather)."""
from __future__ import annotations

from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import TSConcatForward, TSSplitBackward


def test_concat_of_unsupported_transposes_becomes_gather():
    x, y = param([1, 3, 5, 7], "x"), param([1, 2, 5, 7], "y")
    tx, ty = opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])
    m = model_of(opset.concat([opset.reshape(tx, [1, 105], False), opset.reshape(ty, [1, 70], False)], 1), [x, y])
    run(m, TSConcatForward())
    assert count(m, "Gather") == 0  # the Concat inputs are Reshapes, not Transposes
    x, y = param([1, 3, 5, 7], "x"), param([1, 3, 5, 7], "y")
    m = model_of(opset.concat([opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])], 1), [x, y])
    run_checked(m, TSConcatForward())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1


def test_concat_mixed_inputs_3d_name_kept():
    x, y = param([1, 5, 3], "x"), param([1, 4, 5], "y")
    c = opset.concat([opset.transpose(x, [0, 2, 1]), y], 1, name="cat")
    m = model_of(c, [x, y])
    run_checked(m, TSConcatForward())
    assert m.results[0].input_value(0).node.friendly_name == "cat"


def test_concat_on_other_axis_stays():
    x, y = param([1, 3, 5, 7], "x"), param([1, 3, 5, 7], "y")
    m = model_of(opset.concat([opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])], 3), [x, y])
    run(m, TSConcatForward())
    assert count(m, "Gather") == 0


def test_split_with_unsupported_transposes():
    x = param([1, 2, 15, 7])
    s = opset.split(x, 1, 2)
    m = model_of([opset.transpose(s.output(0), [0, 2, 3, 1]), opset.relu(s.output(1))], x)
    run_checked(m, TSSplitBackward())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1 and count(m, "VariadicSplit") == 1


def test_split_with_multiple_consumers_on_transposed_output_stays():
    x = param([1, 2, 15, 7])
    s = opset.split(x, 1, 2)
    m = model_of([opset.transpose(s.output(0), [0, 2, 3, 1]), opset.relu(s.output(0)), s.output(1)], x)
    run(m, TSSplitBackward())
    assert count(m, "Gather") == 0


def test_transpose_rewrites_offer_concats_and_splits_only_when_they_can_start():
    """GnaTransposeRewrites (the pipeline's traversal of TransposeCompress, TSConcatForward and
    TSSplitBackward) gives the Concat and Split members the nodes only where a Transpose GNA
    cannot run meets a Concat or Split; either way the model ends as the three members alone
    leave it."""
    from netpass.ngraph_passes.gna import TransposeCompress
    from netpass.ngraph_passes.gna.pipeline import GnaTransposeRewrites
    from netpass.passes import GraphRewrite

    def concat_of_transposes():
        x, y = param([1, 3, 5, 7], "x"), param([1, 3, 5, 7], "y")
        return model_of(opset.concat([opset.transpose(x, [0, 2, 3, 1]),
                                      opset.transpose(y, [0, 2, 3, 1])], 1), [x, y])

    def split_into_transpose():
        x = param([1, 2, 15, 7])
        s = opset.split(x, 1, 2)
        return model_of([opset.transpose(s.output(0), [0, 2, 3, 1]), opset.relu(s.output(1))], x)

    def compressible_alone():  # NCHW -> NHWC of [1, 8, 4, 4]: [8, 16] -> [16, 8]
        x = param([1, 8, 4, 4])
        t = opset.transpose(x, [0, 2, 3, 1])
        return model_of(opset.concat([opset.relu(t), opset.sigmoid(t)], 3), x)

    for build, gathers in ((concat_of_transposes, 1), (split_into_transpose, 1),
                           (compressible_alone, 0)):
        m, alone = build(), build()
        run_checked(m, GnaTransposeRewrites())
        run(alone, GraphRewrite(TransposeCompress(), TSConcatForward(), TSSplitBackward()))
        assert count(m, "Gather") == count(alone, "Gather") == gathers
        for kind in ("Transpose", "Reshape", "Concat", "VariadicSplit"):
            assert count(m, kind) == count(alone, kind), kind
    assert count(m, "Reshape") == 2  # the compressed Transpose


def test_transpose_rewrites_traverse_nothing_without_a_transpose_gna_cannot_run():
    """No Transpose of a static shape GNA cannot run (here: a dynamic batch): none of the three
    members can start (GnaTransposeRewrites then traverses nothing), no callback runs, and the
    model keeps its order and ends as their traversal leaves it."""
    from netpass.ngraph_passes.gna import TransposeCompress
    from netpass.ngraph_passes.gna.pipeline import GnaTransposeRewrites
    from netpass.passes import GraphRewrite

    def dynamic_batch():
        x, y = param(["N", 3, 5, 7], "x"), param(["N", 3, 5, 7], "y")
        cat = opset.concat([opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])], 1)
        s = opset.split(cat, 3, 3)
        return model_of([opset.transpose(s.output(0), [0, 3, 1, 2]), s.output(1), s.output(2)],
                        [x, y])

    m, alone = dynamic_batch(), dynamic_batch()
    order = m.cached_order()
    offered = []
    rewrites = GnaTransposeRewrites()
    for mp in rewrites.matchers:
        mp.callback = (lambda cb: lambda match: offered.append(match.match_root) or cb(match))(
            mp.callback)
    assert rewrites.run_on_model(m) is False
    assert not offered and m.cached_order() is order
    run(alone, GraphRewrite(TransposeCompress(), TSConcatForward(), TSSplitBackward()))
    for kind in ("Transpose", "Reshape", "Concat", "Split", "Gather"):
        assert count(m, kind) == count(alone, kind), kind
