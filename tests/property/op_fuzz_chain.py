"""Tiny chains for the operator fuzz: a drawn case whose data input ``x`` is made by a view-
like op (Transpose, a Slice that cuts a margin off, a Reshape that splits the last axis) and
whose first output may be read by one more op (Neg, or an Add of the output to itself), so
that the runtime's views, skips and fused epilogues meet every operator."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import strategies as st
from onnx import helper, numpy_helper
from op_fuzz_harness import Case


def _declare(name: str, elem: int, shapes: list[tuple[int, ...]], dynamic: bool):
    dims = [f"{name}_{a}" if dynamic or len({s[a] for s in shapes}) > 1 else shapes[0][a]
            for a in range(len(shapes[0]))]
    return (name, elem, dims)


@st.composite
def with_views(draw, inner):
    """``inner``'s case with its input ``x`` made through a drawn view op and, sometimes, one
    op after its first output."""
    case: Case = draw(inner)
    kinds = ["none", "transpose", "slice", "reshape"]
    kind = draw(st.sampled_from(kinds))
    where = [i for i, (n, _, _) in enumerate(case.inputs) if n == "x"]
    xs = [s["x"] for s in case.steps if "x" in s]
    raws: list = []
    nodes, inputs, steps, inits = copy.deepcopy(case.nodes), list(case.inputs), \
        [dict(s) for s in case.steps], list(case.inits)
    if kind != "none" and where and len(xs) == len(steps) and xs[0].ndim >= 1:
        i = where[0]
        rank = xs[0].ndim
        elem = inputs[i][1]
        dynamic = inputs[i][2] is not None and any(isinstance(v, str) for v in inputs[i][2])
        rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
        if kind == "transpose":
            perm = draw(st.permutations(range(rank)))
            inv = list(np.argsort(perm))
            raws = [x.transpose(inv) for x in xs]
            nodes.insert(0, helper.make_node("Transpose", ["raw"], ["x"], perm=list(perm)))
        elif kind == "slice":
            axis = draw(st.integers(0, rank - 1))
            front, back = draw(st.integers(0, 2)), draw(st.integers(0, 2))
            raws = []
            for x in xs:
                pad = [(0, 0)] * rank
                pad[axis] = (front, back)
                raw = np.pad(x, pad)
                noise = rng.standard_normal(raw.shape).astype(raw.dtype) if x.dtype.kind == "f" \
                    else raw
                mask = np.ones(raw.shape, bool)
                mask[tuple(slice(f, f + n) for f, n in
                           zip([0] * axis + [front], x.shape[:axis + 1]))] = False
                raws.append(np.where(mask, noise, raw).astype(x.dtype))
            end = -back if back else 2**63 - 1
            for nm, v in (("v_s", [front]), ("v_e", [end]), ("v_a", [axis])):
                inits.append(numpy_helper.from_array(np.array(v, np.int64), nm))
            nodes.insert(0, helper.make_node("Slice", ["raw", "v_s", "v_e", "v_a"], ["x"]))
        else:
            if len({x.shape[-1] for x in xs}) > 1 or any(x.size == 0 for x in xs):
                return case  # (-1 in a Reshape of an empty tensor is ambiguous)
            last = xs[0].shape[-1]
            raws = [x.reshape(*x.shape[:-2], -1) if rank >= 2 else x for x in xs]
            target = [0] * (rank - 2) + [-1, last] if rank >= 2 else [-1]
            inits.append(numpy_helper.from_array(np.array(target, np.int64), "v_shape"))
            nodes.insert(0, helper.make_node("Reshape", ["raw", "v_shape"], ["x"]))
        inputs[i] = _declare("raw", elem, [r.shape for r in raws], dynamic)
        for s, r in zip(steps, raws):
            del s["x"]
            s["raw"] = r
    outputs = list(case.outputs)
    after = draw(st.sampled_from(["none", "none", "neg", "double"]))
    if after != "none":
        y = outputs[0]
        inner_y = y + "_pre"
        for n in nodes:
            n.output[:] = [inner_y if v == y else v for v in n.output]
        if after == "neg":
            nodes.append(helper.make_node("Neg", [inner_y], [y]))
        else:
            nodes.append(helper.make_node("Add", [inner_y, inner_y], [y]))
    transformations = case.transformations
    if kind == "slice" and transformations == "GNA" and not all(
            np.isfinite(r).all() for r in raws if r.dtype.kind == "f"):
        # (the GNA flow crops at an unaligned offset by an affine layer, as GNA does: an inf
        # in the cut margin makes NaN of its row; finite values only there)
        transformations = "COMMON"
    return Case(nodes, inputs, outputs, steps, case.opset, inits, transformations)
