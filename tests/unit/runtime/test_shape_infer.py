"""The runtime op table's concrete shape rules agree with the ops' own shape inference."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64

from netpass import Model, opset
from netpass.runtime import Program
from netpass.runtime.kinds.base import broadcast
from netpass.runtime.shape_infer import ShapeInfer

CASES = [
    (lambda x: opset.unsqueeze(x, ints64([0, -1])), (3, 4)),
    (lambda x: opset.squeeze(x, ints64([1])), (3, 1, 4)),
    (lambda x: opset.slice(x, ints64([1, -5]), ints64([100, -1]), ints64([2, 1]), ints64([0, 1])), (7, 9)),
    (lambda x: opset.slice(x, ints64([-1]), ints64([-100]), ints64([-2])), (9, 2)),
    (lambda x: opset.variadic_split(x, ints64(-1), ints64([2, -1, 3])), (4, 10)),
    (lambda x: opset.split(x, ints64(0), 3), (6, 5)),
    (lambda x: opset.reshape(x, ints64([0, -1, 2]), True), (3, 4, 6)),
    (lambda x: opset.transpose(x, ints64([2, 0, 1])), (3, 4, 6)),
    (lambda x: opset.gather(x, ints64([[0, 2], [1, 1]]), ints64(1)), (3, 4, 6)),
    (lambda x: opset.matmul(x, np.ones((2, 6, 5), np.float32), False, False), (4, 1, 3, 6)),
    (lambda x: opset.mvn(x, ints64([-1]), True, 1e-5, "inside_sqrt"), (2, 3)),
]


@pytest.mark.parametrize("build,shape", CASES)
def test_fast_rule_matches_op_inference(build, shape):
    x = opset.parameter([-1] * len(shape), np.float32, name="x")
    node = build(x)
    prog = Program.from_model(Model([opset.result(o) for o in node.outputs()], [x]))
    pnode = next(n for n in prog.nodes if n.kind == node.type_name)
    shapes = [shape] + [tuple(s.value.shape) for s, _ in pnode.inputs[1:]]
    values = {j: s.value for j, (s, _) in enumerate(pnode.inputs) if s.is_constant}
    fast = pnode.row.shape(pnode.attrs, shapes, values)
    assert fast is not None
    assert fast == ShapeInfer(pnode)._generic(shapes, values)


def test_broadcast_rule_matches_numpy():
    rng = np.random.default_rng(0)
    for _ in range(500):
        shapes = [tuple(int(x) for x in rng.choice([1, 2, 3], size=rng.integers(0, 4)))
                  for _ in range(rng.integers(1, 4))]
        try:
            expected = [tuple(np.broadcast_shapes(*shapes))]
        except ValueError:
            expected = None
        assert broadcast(shapes) == expected, shapes
