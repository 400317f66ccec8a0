"""Running test cases ported from OpenVINO's transformation unit tests.

The cases are OpenVINO's (the graphs it builds and the graphs it expects); this module is the
netpass side of its ``TransformationTestsF`` and ``TSTestFixture``:

- ``check(model, model_ref, *passes)`` runs the passes on ``model`` and checks unique names,
  Result tensor names and producer names, ``fused_names`` on every op, then compares with
  ``model_ref`` node by node with constant values, attributes and element types (the
  comparator flags OpenVINO's transpose-sinking tests enable).
- Constant sub-graphs are folded on both sides before the comparison. OpenVINO's sinking
  inserts ``Transpose(Constant)`` / ``Gather(Constant)`` and leaves them to ConstantFolding;
  netpass transposes or gathers a Constant at once. Folding both graphs compares what they
  compute, not where the folding happened.
- ``TSCase`` is ``TSTestFixture``'s TestCase: inputs, pre/post-processing of the main op's
  inputs and outputs, main-op factories and repeat counts; ``TSCase.params()`` expands it into
  pytest parameters the way ``::testing::Combine`` does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netpass import Model, opset
from netpass.core.node import Node, Output
from netpass.ngraph_passes.common import ConstantFolding
from netpass.passes import Manager
from netpass.testing import TransformationTest

Values = list[Output]
Preprocess = Callable[[Sequence[int], Values], Values]


def as_out(v: Any) -> Output:
    return v if isinstance(v, Output) else v.output(0)


def model_of(outputs: Sequence[Any], params: Sequence[Any]) -> Model:
    results = [opset.result(as_out(o), f"Result_{i}") for i, o in enumerate(outputs)]
    return Model(results, [p for p in params if getattr(p, "type_name", "") == "Parameter"], "model")


def fold(model: Model) -> Model:
    manager = Manager()
    manager.register_pass(ConstantFolding())
    manager.run_passes(model)
    return model


def check(model: Model, model_ref: Model | None, *passes: Any, result_names: bool = True,
          rt_info: bool = True, fold_constants: bool = True, **flags: Any) -> None:
    """Run ``passes`` on ``model`` and compare with ``model_ref`` (None: unchanged model)."""
    t = TransformationTest()
    t.setup_method()
    t.model = model
    t.model_ref = model_ref
    if not result_names:
        t.disable_result_friendly_names_check()
    if not rt_info:
        t.disable_rt_info_check()
    for p in passes:
        t.manager.register_pass(p)
    if fold_constants:
        t.manager.register_pass(ConstantFolding())
        if model_ref is None:
            t.model_ref = model.clone()
        fold(t.model_ref)
    t.compare_flags.update(flags)
    t.run_and_compare()


# -- OpenVINO's ts_test_utils ----------------------------------------------------------------
def i32(*values: int) -> Node:
    return opset.constant(np.array(values, np.int32))


def reversed_order(rank: int) -> list[int]:
    return list(range(rank))[::-1]


def transpose(v: Any, order: Sequence[int], et: Any = np.int32) -> Node:
    return opset.transpose(v, opset.constant(np.array(order, et)))


def set_transpose_for(idxs: Sequence[int], outs: Values) -> Values:
    """A Transpose with the reversed order (i32) on the values at ``idxs``."""
    res = list(outs)
    for i in idxs:
        res[i] = transpose(outs[i], reversed_order(outs[i].partial_shape.rank.get_length())).output(0)
    return res


def set_gather_for(idxs: Sequence[int], outs: Values) -> Values:
    """``Gather(v, reversed(range(len(v))), 0)`` on the (1-D) values at ``idxs``."""
    res = list(outs)
    for i in idxs:
        n = outs[i].partial_shape.to_shape()[0]
        res[i] = opset.gather(outs[i], i32(*reversed_order(n)), opset.constant(np.int32(0))).output(0)
    return res


def gather_of_reversed_order(idxs: Sequence[int], outs: Values) -> Values:
    """``Gather(reversed(range(rank of value 0)), v, 0)``: the axes ``v`` name, after the main
    op's input 0 is transposed by the reversed order (OpenVINO's ``set_specific_gather_for``)."""
    res = list(outs)
    rank = outs[0].partial_shape.rank.get_length()
    for i in idxs:
        res[i] = opset.gather(i32(*reversed_order(rank)), outs[i], opset.constant(np.int32(0))).output(0)
    return res


@dataclass
class Pre:
    """OpenVINO's ``Preprocessing``: functions applied in turn, each to its index list."""

    steps: list[tuple[Preprocess, Sequence[int]]] = field(default_factory=list)

    def apply(self, values: Values) -> Values:
        for fn, idxs in self.steps:
            values = fn(idxs, values)
        return values


@dataclass
class Factory:
    name: str
    create: Callable[[Values], Node]

    def __repr__(self) -> str:
        return self.name


def create_main_node(inputs: Values, num_ops: int, factory: Factory) -> Node:
    """``num_ops`` main ops in a chain: each one's output becomes the next one's input 0."""
    current = list(inputs)
    node = None
    for _ in range(num_ops):
        node = factory.create(current)
        current[0] = node.output(0)
    return node


@dataclass
class Desc:
    """OpenVINO's ``ModelDescription``."""

    pre: Pre = field(default_factory=Pre)
    main: Sequence[Factory] = ()
    post: Pre = field(default_factory=Pre)


InputSpec = Callable[[], Any]


def param(shape: Sequence[int], et: Any = np.float32) -> InputSpec:
    return lambda: opset.parameter(list(shape), et)


def const(et: Any, shape: Sequence[int], values: Sequence[Any]) -> InputSpec:
    """OpenVINO's ``constant<T>(type, shape, values)`` (one value fills the shape)."""
    def make():
        arr = np.array(values, dtype=np.dtype(et))
        if arr.size == 1 and int(np.prod(shape)) != 1:
            arr = np.full(shape, arr.reshape(-1)[0], arr.dtype)
        return opset.constant(arr.reshape(shape))
    return make


@dataclass
class TSCase:
    """``TSTestFixture``'s TestCase: ``model`` and ``model_ref`` share main-op positions."""

    name: str
    passes: Callable[[], list]
    inputs: Sequence[InputSpec]
    num_main_ops: Sequence[int]
    model: Desc
    model_ref: Desc
    result_names: bool = True
    skip: dict[str, str] = field(default_factory=dict)   # factory name -> why not ported

    def build(self, desc: Desc, main_index: int, num_ops: int) -> Model:
        inputs = [as_out(make()) for make in self.inputs]
        new_inputs = desc.pre.apply(inputs)
        main = create_main_node(new_inputs, num_ops, desc.main[main_index])
        outs = desc.post.apply(list(main.outputs()))
        return model_of(outs, [o.node for o in inputs])

    def params(self) -> list:
        import pytest
        out = []
        for n in self.num_main_ops:
            for i, f in enumerate(self.model.main):
                marks = [pytest.mark.skip(reason=self.skip[f.name])] if f.name in self.skip else []
                out.append(pytest.param(self, i, n, id=f"{self.name}-{f.name}-x{n}", marks=marks))
        return out

    def run(self, main_index: int, num_ops: int) -> None:
        model = self.build(self.model, main_index, num_ops)
        ref = self.build(self.model_ref, main_index, num_ops)
        check(model, ref, *self.passes(), result_names=self.result_names)
