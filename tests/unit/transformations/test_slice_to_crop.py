"""ConvertSliceToCrop: in one traversal with SliceToStridedSlice and ConvertStridedSliceToCrop
(the GNA pipeline's last stage) it leaves the graph those two leave alone, node by node:
types, attributes, constants, wiring, shapes, friendly names, rt_info and tensor names. On
random Slices (ranks 1-6, negative and masked axes, steps, empty windows, a dynamic input),
and with the two given callbacks or disabled, when it leaves every Slice to them."""
from __future__ import annotations

import re

import numpy as np
import pytest
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.core.rt_info import FusedNames
from netpass.ngraph_passes.common import SliceToStridedSlice
from netpass.ngraph_passes.gna import ConvertSliceToCrop, ConvertStridedSliceToCrop
from netpass.passes import GraphRewrite, PassConfig


def describe(model) -> list:
    """Every node as a comparable tuple (the Constants' values included; a name made up of a
    type and an id, ``<Type>_<id>``, which differs between two builds, as made up)."""
    index: dict[int, int] = {}
    rows = []
    for i, n in enumerate(model.get_ordered_ops()):
        index[id(n)] = i
        attrs = sorted((k, repr(v.tolist() if isinstance(v, np.ndarray) else v))
                       for k, v in n.get_attributes().items())
        rt = sorted((k, sorted(v.names) if isinstance(v, FusedNames) else repr(v))
                    for k, v in n.rt_info.items())
        outs = [(str(o.partial_shape), str(o.element_type), sorted(o.names)) for o in n.outputs()]
        name = "<made up>" if re.fullmatch(r"[A-Za-z]+_\d+", n.friendly_name) else n.friendly_name
        rows.append((n.type_name, attrs, name, rt, outs,
                     [(index[id(v.node)], v.index) for v in n.input_values()]))
    return rows


def pair() -> GraphRewrite:
    return GraphRewrite(SliceToStridedSlice(), ConvertStridedSliceToCrop())


def tail() -> GraphRewrite:
    return GraphRewrite(ConvertSliceToCrop(), SliceToStridedSlice(), ConvertStridedSliceToCrop())


def slices(seed: int):
    """A model of Slices of a random rank-1..6 input (some feeding the Result, some a Relu),
    with random bounds, axes (negative ones too) and steps, and rt_info on each Slice."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 7))
    shape = [int(d) for d in rng.integers(1, 6, rank)]
    x = param(shape)
    outs = []
    for k in range(3):
        n = int(rng.integers(1, rank + 1))
        axes = [int(a) for a in rng.permutation(rank)[:n]]
        axes = [a - rank if rng.random() < 0.3 else a for a in axes]
        start, stop = [], []
        for a in axes:
            d = shape[a]
            lo = int(rng.integers(0, d))
            hi = lo if rng.random() < 0.05 else int(rng.integers(lo + 1, d + 3))
            start.append(lo - d if rng.random() < 0.3 else lo)
            stop.append(hi - d if hi < d and rng.random() < 0.3 else hi)
        step = [int(rng.choice([1] * 8 + [2, -1])) for _ in range(n)]
        sl = opset.slice(x, start, stop, step, axes, name=f"sl{k}")
        sl.rt_info["fused_names_0"] = FusedNames({f"sl{k}", "y"})
        sl.rt_info["note"] = k
        outs.append(sl if k == 0 else opset.relu(sl))
    return model_of(outs, x)


@pytest.mark.parametrize("seed", range(120))
def test_random_slices_match_the_pair(seed):
    model, ref = slices(seed), slices(seed)
    run(ref, pair())
    run_checked(model, tail())
    assert describe(model) == describe(ref)


def test_the_one_step_takes_every_slice_the_pair_crops():
    """On the random Slices it rewrites exactly those the pair turns into a lone CropIE."""
    taken = 0
    for seed in range(120):
        model, ref = slices(seed), slices(seed)
        run(ref, pair())
        run(model, ConvertSliceToCrop())
        assert count(model, "CropIE") == count(ref, "CropIE") - count(ref, "Reshape")
        taken += count(model, "CropIE")
    assert taken > 100


def test_feeding_a_result_keeps_the_output_names():
    x = param([2, 4, 6])
    sl = opset.slice(opset.relu(x), [1, 2], [3, 5], [1, 1], [2, -2], name="sl")
    sl.output(0).names.add("y")
    model = model_of(sl, x)
    run_checked(model, ConvertSliceToCrop())
    crop = model.results[0].input_value(0).node
    assert crop.type_name == "CropIE" and crop.friendly_name == "sl"
    assert crop.offset == [0, 2, 1] and crop.dim == [2, 2, 2] and crop.output(0).names == {"y"}


@pytest.mark.parametrize("setup", ["callback_pair", "callback_all", "disabled_crop",
                                   "disabled_slice"])
def test_callbacks_and_disabled_members_leave_slices_to_the_pair(setup):
    config = PassConfig()
    if setup == "callback_pair":
        config.set_callback(lambda node: False, SliceToStridedSlice)
    elif setup == "callback_all":
        config.set_callback(lambda node: node.friendly_name == "sl1")
    elif setup == "disabled_crop":
        config.disable(ConvertStridedSliceToCrop)
    else:
        config.disable(SliceToStridedSlice)
    def build():
        x = param([2, 4, 6])
        return model_of([opset.slice(x, [1], [3], [1], [k], name=f"sl{k}") for k in range(3)], x)
    model, ref, alone = build(), build(), build()
    run(ref, pair(), config=config)
    run(alone, ConvertSliceToCrop(), config=config)
    assert count(alone, "CropIE") == 0
    run(model, tail(), config=config)
    assert describe(model) == describe(ref)
