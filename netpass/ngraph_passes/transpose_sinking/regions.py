"""TSBackwardRegions: the backward transpose sinking traversal (TSGeneralBackward's members,
TSFuse unmarking) on a shadow of the graph, for a stage without callbacks or no-sinking marks
(the GNA pipeline's RescueStuckTransposes).

A backward step moves the Transposes below an op above it once every consumer of the op is a
Transpose of one order; TSFuse merges a Transpose with the Transposes below it once they all
have one order. Each step builds a Transpose per input, re-infers the op and drops the ones
below, so a Transpose crossing a region of n ops builds, infers and drops n Transposes, and
the op is inferred at every step. The steps do not commute (crossing an op can take a
Transpose another one would have fused with), so this pass takes the same steps in the same
order as the traversal (the Transposes from the results up, each step's new ones next), on a
shadow where a Transpose is an order on an edge; then it rewrites each crossed op once,
builds the Transposes that stay and infers what changed once.

At a step it does not model (an input needing an Unsqueeze, Squeeze/Unsqueeze/Reshape, a
per-channel PRelu, orders of different lengths) it leaves the model as it was, to the
step-by-step traversal, which runs after it in any case (and then finds nothing left). The
result is the traversal's, but for names a step makes up: an op a step names after a
Transpose it built (``Transpose_<id>``) keeps its own name."""
from __future__ import annotations

import collections

from ...core.boundary import Constant, Parameter
from ...core.changes import tracking
from ...core.graph_util import copy_runtime_info
from ...core.node import Node, Output
from ...core.shape import PartialShape
from ...core.types import Type
from ...ops.movement import Transpose
from ...passes.base import ModelPass
from .attr import NO_SINKING
from .general import BACKWARD
from .region_graph import VT, Order, ShadowGraph, Value, feeds_result
from .region_rules import UNSUPPORTED, Plan, Rule, rules_for
from .utils import _transposed

# The tensor names of a VT a step makes: none, shared (``add_names`` gives a VT a set of its
# own; a sweep at 100k nodes made ~60k VTs, each with an empty set to build and free).
_NO_NAMES: frozenset[str] = frozenset()


class _Unmodeled(Exception):
    """A step the sweep does not model: the model is left to the traversal."""


class _Sweep(ShadowGraph):
    """The traversal on the shadow graph, and what writing it back must do: the crossed ops
    with their plans, the VTs made, friendly names given, rt_info merged."""

    def __init__(self, ops: list[Node]) -> None:
        super().__init__(ops)
        self.crossed: list[tuple[Node, Plan, list[int], Order, list[int]]] = []
        self.made: list[VT] = []
        self.renames: list[tuple[Node, str]] = []
        self.merges: list[tuple[Value, VT]] = []
        self.rules: dict[type, list[Rule]] = {}
        self.replaced: dict[Node, Node] = {}  # a Slice a step rebuilt, by the old one
        self.infer: list[Node] = []  # to infer once rewired: built Transposes, ops with values

    def release(self) -> None:
        super().release()
        for vt in self.made:
            vt.consumers.clear()

    def sweep(self) -> None:
        """The backward traversal on the shadow: the Transposes from the results up, each
        step's new ones first (as GraphRewrite visits them). Raises _Unmodeled at a step it
        does not model."""
        queue = collections.deque(vt for _, vt in reversed(self.reals))
        while queue:
            root = queue.popleft()
            if root.alive:
                src = root.src
                new = self.fuse(src, root) if isinstance(src, VT) else self.cross(src[0], root)
                queue.extendleft(reversed(new))

    def cross(self, node: Node, root: VT) -> list[VT]:
        """The backward member's step on ``node`` (reached from ``root``) when every consumer
        is a VT of one order; returns the VTs it puts on the inputs."""
        below: list[tuple[int, VT]] = []
        order = None
        for k in range(len(node._outs)):
            for r in self.consumers((node, k)):
                if not isinstance(r, VT) or (order is not None and r.order != order):
                    return []
                order = r.order
                below.append((k, r))
        if order is None:
            return []
        plan = self._plan(node, order)
        if plan is None:
            return []
        if plan.rank != len(plan.order):
            raise _Unmodeled
        inputs, consts = [], []
        for i in plan.indices:
            v = self.input_value(node, i)
            if not isinstance(v, VT) and isinstance(v[0], Constant):
                consts.append(i)
            elif self.rank_of(v) != plan.rank:
                raise _Unmodeled  # an Unsqueeze first
            else:
                inputs.append((i, v))
        shared = root.const if plan.matched else Order(plan.order, root.const.type)
        self._drop_below(node, below)
        new = []
        for i, v in inputs:
            vt = VT(plan.order, shared, v, [(node, i)], None, None, _NO_NAMES, node)
            self.replace_consumer(v, (node, i), [vt])
            self.set_src((node, i), vt)
            new.append(vt)
        self.made.extend(new)
        self.crossed.append((node, plan, consts, shared, order))
        return new

    def _plan(self, node: Node, order: list[int]) -> Plan | None:
        rules = self.rules.get(node.__class__)
        if rules is None:
            rules = self.rules[node.__class__] = rules_for(node.__class__, BACKWARD)
        for rule in rules:
            plan = rule(node, order)
            if plan is UNSUPPORTED:
                raise _Unmodeled
            if plan is not None:
                return plan  # type: ignore[return-value]
        return None

    def _drop_below(self, node: Node, below: list[tuple[int, VT]]) -> None:
        """The consumers of the VTs ``below`` read ``node`` instead; ``node`` takes the name
        of the last one feeding a Result, else of the first one of output 0 (as a step does;
        a Transpose a step built has a made-up name, which the sweep does not give)."""
        named = feeding_set = False
        name = feeding = None
        for k, vt in below:
            refs = vt.consumers
            self.cons[node._outs[k]].extend(refs)
            for r in refs:
                self.set_src(r, (node, k))
            self.add_names((node, k), vt.names)
            if feeds_result(refs):
                feeding_set, feeding = True, vt.name
            elif not named and k == 0:
                named, name = True, vt.name
            vt.alive = False
        for k in {k for k, _ in below}:
            refs = self.cons[node._outs[k]]
            refs[:] = [r for r in refs if not isinstance(r, VT) or r.alive]
        final = feeding if feeding_set else name
        if final is not None:
            self.renames.append((node, final))

    def fuse(self, first: VT, second: VT) -> list[VT]:
        """TSFuse at ``second`` when every consumer of ``first`` is a VT of one order;
        returns the fused VT (none when the orders cancel)."""
        cs: list[VT] = []
        order = None
        for c in first.consumers:
            if not isinstance(c, VT) or (order is not None and c.order != order):
                return []
            order = c.order
            cs.append(c)
        o1 = first.order
        if order is None or len(o1) != len(order) or any(i >= len(o1) for i in order):
            return []
        fused = [o1[i] for i in order]
        if fused == sorted(fused):
            self._cancel(first, cs)
            return []
        et = first.const.type
        if et != second.const.type:
            et = Type.of("i64")
        readers = [r for c in cs for r in c.consumers]
        names = set(first.names)
        for c in cs:
            names |= c.names
            c.alive = False
        target = VT(fused, Order(fused, et), first.src, readers, None, second.name, names,
                     first.rt)
        self.replace_consumer(first.src, first, [target])
        for r in readers:
            self.set_src(r, target)
        first.alive = False
        self.made.append(target)
        return [target]

    def _cancel(self, first: VT, cs: list[VT]) -> None:
        """Each of ``cs`` is bypassed to ``first``'s input, as replace_output_update_name
        does: one feeding a Result names the input's node, and is kept where that node
        cannot take the name (a Parameter, several outputs, a Result already fed)."""
        x = first.src
        for c in cs:
            if feeds_result(c.consumers):
                if isinstance(x, VT):
                    if feeds_result(x.consumers):
                        continue
                    x.name = c.name
                else:
                    node = x[0]
                    if len(node._outs) != 1 or isinstance(node, Parameter) or \
                            feeds_result(self.consumers(x)):
                        continue
                    if c.name is not None:
                        self.renames.append((node, c.name))
            refs = c.consumers
            self.consumers(x).extend(refs)
            for r in refs:
                self.set_src(r, x)
            self.add_names(x, c.names)
            self.merges.append((x, c))
            c.alive = False
            first.consumers.remove(c)
        if not first.consumers:
            first.alive = False
            self.consumers(x).remove(first)

    # -- the rewrite of the model -------------------------------------------------------
    def apply(self, model) -> bool:
        """Rewrites the crossed ops and gives them the shapes the Transposes below them had,
        builds the VTs that stay, rewires what changed, and infers the nodes that need it in
        topological order; whether anything changed."""
        if not self.crossed and not self.srcs:
            return False
        replaced = self.replaced
        shaped: list[Node] = []
        for node, plan, consts, shared, order in self.crossed:
            below = [port.ps for port in node._outs]
            new = plan.rewrite(node)
            if new is not node:
                replaced[node] = new
            for i in consts:
                v = new.input_value(i)
                new.input(i).replace_source_output(
                    _transposed(v, plan.order, shared.type, new, plan.rank))
            # Shaped before the rewiring: the consumers it takes over read the same shapes.
            (shaped if _permute_shapes(new, order, below) else self.infer).append(new)
        out_of = self.out_of
        # (outputs compared by node and index, not by Output.__eq__: once per input the
        # sweep changed, tens of thousands at 100k nodes)
        for node, i, value in self.srcs.values():
            node = replaced.get(node, node)
            out = out_of(value)
            now = node._inputs[i]
            if now.node is not out.node or now.index != out.index:
                node.input(i).replace_source_output(out)
        for real, vt in self.reals:
            if vt.alive:
                out = out_of(vt.src)
                now = real._inputs[0]
                if now.node is not out.node or now.index != out.index:
                    real.input(0).replace_source_output(out)
                if vt.name is not None and vt.name != real.friendly_name:
                    real.friendly_name = vt.name
        for vt in (*self.vts.values(), *self.made):
            if vt.alive and vt.names:
                out_of(vt).names.update(vt.names)
        for node, k, names in self.names.values():
            out_of((node, k)).names.update(names)
        for node, name in self.renames:
            replaced.get(node, node).friendly_name = name
        for target, c in self.merges:
            x = out_of(target).node
            copy_runtime_info([x, c.real if c.real is not None else c.rt], x)
        log = tracking.log
        if log is not None:
            for node in shaped:  # up to date with its new inputs
                log.refreshed(node)
        ids = {id(n) for n in self.infer}
        for n in model.get_ordered_ops() if ids else ():
            if id(n) in ids:
                n.validate_and_infer_types()
        return True

    def out_of(self, value: Value) -> Output:
        """The model's output for ``value``: a VT that stays is built on first use."""
        if not isinstance(value, VT):
            return Output(self.replaced.get(value[0], value[0]), value[1])
        if value.real is not None:
            return Output(value.real, 0)
        if value.built is None:
            t = Transpose([self.out_of(value.src), value.const.get()])
            copy_runtime_info(self.replaced.get(value.rt, value.rt), t)
            if value.name is not None:
                t.friendly_name = value.name
            value.built = t
            self.infer.append(t)
        return Output(value.built, 0)


def _permute_shapes(node: Node, order: list[int], below: list[PartialShape]) -> bool:
    """``node``'s outputs take the shapes ``below`` (theirs before the step) permuted by
    ``order``: what inference gives once the Transposes moved above it (the step's rewrite
    makes it compute the transposed values), without inferring a Concat of many pieces again.
    False (nothing set) for outputs carrying known values: those are inferred."""
    outs = node._outs
    dims = [d for d in (ps._dims for ps in below) if d is not None]
    if len(dims) != len(outs) or any(p.val is not None or p.pval is not None for p in outs):
        return False
    for k, (port, d) in enumerate(zip(outs, dims)):
        node.set_output_type(k, port.et, PartialShape.of_dims(tuple([d[a] for a in order])))
    return True


class TSBackwardRegions(ModelPass):
    """Backward transpose sinking in one sweep, as TSGeneralBackward's members with an
    unmarking TSFuse would leave the graph (see the module doc); does nothing when the pass
    config gives one of those members a callback or disables it, or a Transpose is marked
    ``no_transpose_sinking``. Run the step-by-step members after it: they take what it left."""

    def run_on_model(self, model) -> bool:
        config = self.get_pass_config()
        if any(config.is_disabled(m) or config.has_callback(m) for m in BACKWARD):
            return False
        ops = model.cached_order()
        if any(n._rt and NO_SINKING in n._rt for n in ops if isinstance(n, Transpose)):
            return False
        shadow = _Sweep(ops)
        try:
            shadow.sweep()
            return shadow.apply(model)
        except _Unmodeled:
            return False
        finally:
            shadow.release()
