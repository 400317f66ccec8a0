"""ConstantFolding: replace every node whose value is known at compile time by a Constant."""
from __future__ import annotations

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info
from ...core.node import Node
from ...core.subgraph import rewrite_bodies
from ...ops.shape_ops import ShapeOf
from ...passes.base import ModelPass

# rt_info key that keeps a node from being folded (OpenVINO's DisableConstantFolding).
DISABLE_CONSTANT_FOLDING = "disabled_constant_folding_0"

# Folding materializes a node's result in memory, in the model. A result that would hold more
# elements than all of the node's inputs together (Broadcast, Tile, ConstantOfShape, Range,
# Pad: ops that create data) and more than FOLD_MAX_BYTES is left to run at run time, where it
# is computed per inference instead of living in the model (a ConstantOfShape of 10^12
# elements stays an op). Results no larger than their inputs (a Transpose, Reshape, Convert or
# scaling of weights) fold at any size: they hold no more than the model already does.
FOLD_MAX_BYTES = 4 << 20


def disable_constant_folding(node: Node) -> None:
    node.rt_info[DISABLE_CONSTANT_FOLDING] = True


def enable_constant_folding(node: Node) -> None:
    node.rt_info.pop(DISABLE_CONSTANT_FOLDING, None)


def constant_folding_is_disabled(node: Node) -> bool:
    return DISABLE_CONSTANT_FOLDING in node.rt_info


def fold(node: Node) -> list | None:
    """The output values of ``node`` when they are known (all inputs Constants, or values
    propagated by shape inference such as ShapeOf of a static shape), else None."""
    # Runs for every node of the model on each folding pass: reads the ports directly.
    if not node.FOLDABLE:
        return None
    srcs = node._inputs
    if not srcs:
        return None
    rt = node._rt
    if rt and DISABLE_CONSTANT_FOLDING in rt:
        return None
    for s in srcs:
        if not isinstance(s.node, Constant):
            break
    else:
        inputs = [s.node.value for s in srcs]
        if creates_large_data(node, inputs):
            return None
        try:
            return node.evaluate(inputs)
        except (NotImplementedError, MemoryError):  # MemoryError: an unknown output shape
            return None
    vals = []
    for port in node._outs:
        v = port.val
        if v is None:
            return None
        vals.append(v)
    return vals


def _may_fold(node: Node) -> bool:
    """Whether ``fold`` may answer for ``node`` (when False, it answers None): the node has
    inputs, and its first input is a Constant or its first output has a known value."""
    ins = node._inputs
    if not ins:
        return False
    outs = node._outs
    return not outs or outs[0].val is not None or isinstance(ins[0].node, Constant)


def creates_large_data(node: Node, inputs: list) -> bool:
    """Whether folding ``node`` would create an output of more than FOLD_MAX_BYTES that holds
    more elements than its ``inputs`` together (see FOLD_MAX_BYTES)."""
    input_elements = sum(int(v.size) for v in inputs)
    for port in node._outs:
        ps = port.ps
        if not ps.is_static:
            continue
        elements = 1
        for d in ps.to_shape():
            elements *= d
        itemsize = port.et.dtype.itemsize if port.et.dtype is not None else 8
        if elements > input_elements and elements * itemsize > FOLD_MAX_BYTES:
            return True
    return False


class ConstantFolding(ModelPass):
    """Replaces nodes whose values are known by Constants.

    Folds every foldable node whose inputs are Constants (producers first, so whole constant
    sub-graphs collapse in one run), except one that would create a large tensor (see
    FOLD_MAX_BYTES), which runs at run time. The Constant takes the node's friendly name
    (``<name>.<i>`` for a multi-output node) and tensor names, so Results keep their names, and
    its rt_info merged with its inputs' (its fused names list the sub-graph it replaced). The
    bodies of If, Loop and TensorIterator are folded too (as OpenVINO's ConstantFolding
    does), and a whole op with bodies folds when its inputs are constants and
    its bodies deterministic (a Loop: with a bounded trip count)."""

    def run_on_model(self, model) -> bool:
        changed = self._fold_graph(model)
        return rewrite_bodies(model, self._fold_graph) or changed

    @staticmethod
    def _fold_graph(model) -> bool:
        constant = Constant
        if model._ordered is None:
            # The nodes ``fold`` may answer for, picked while the model is sorted (each
            # folding follows a stage that changed the model, and mostly finds nothing): with
            # none, nothing folds, and the walk below would only fetch every node again.
            picked: list[Node] = []

            def pick(node: Node) -> None:
                if _may_fold(node):
                    picked.append(node)
            order = model.cached_order(pick)
            if not picked:
                return False
        else:
            order = model.cached_order()
        changed = False
        for node in order:
            # What ``fold`` answers None for, told without calling it (this looks at every
            # node, after every stage that changed the model, and finds little): see
            # ``_may_fold``, inlined.
            ins = node._inputs
            if not ins:
                continue
            outs = node._outs
            if outs and outs[0].val is None and not isinstance(ins[0].node, constant):
                continue
            values = fold(node)
            if values is None:
                continue
            multi = node.get_output_size() > 1
            # The Constant stands for the node and for what it folded: its inputs' rt_info
            # (fused names) merges in, as OpenVINO's copy_runtime_info_from_input_values does;
            # not a ShapeOf's, whose input only lends its shape.
            sources = [node] if isinstance(node, ShapeOf) else [node, *(s.node for s in ins)]
            for out, value in zip(node.outputs(), values):
                if not out.consumers():
                    continue
                c = constant([], value=value, element_type=out.element_type)
                c.friendly_name = (f"{node.friendly_name}.{out.index}" if multi
                                   else node.friendly_name)
                copy_runtime_info(sources, c)
                out.replace(c.output(0))
                changed = True
        return changed


def run_then_fold(model, config, stage: object, name: str, *more: object) -> bool:
    """Run ``stage`` (and the passes ``more``) then ConstantFolding (as OpenVINO's sinking
    drivers do), the folding only when they changed the model: folding an unchanged model
    finds nothing and would cost a full traversal."""
    from ..utils import nested_manager
    manager = nested_manager(config, name)
    for p in (stage, *more):
        manager.register_pass(p)
    if not manager.run_passes(model):
        return False
    folding = nested_manager(config, name)
    folding.register_pass(ConstantFolding())
    folding.run_passes(model)
    return True
