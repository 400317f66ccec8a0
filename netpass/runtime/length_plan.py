"""Length plans: one step plan for every step of a decoding loop.

A decoder with its key/value cache in variables meets a new symbolic binding at every token
(``past`` grows by one), so a :class:`~netpass.runtime.step_plan.StepPlan`, which replays one
binding, never comes back. Along such a loop the bindings lie on a line: some named symbols
move together with the variables' length ``t`` (``past``, the attention mask's ``total``,
their sums) and the others stay put (``batch``, ``seq``). Everything a step decides is then a
function of ``t``, and for the kernels of a decoder it is an affine one: shapes, shape-infer
values, buffer sizes, a launch's integer arguments (sizes, strides, offsets) and work sizes
(the same, or a count rounded up to the work-group size).

A :class:`LengthFamily` holds that loop's exec order as step-plan entries whose varying fields
are :class:`Form` s (``base + slope * t`` over the structure of the field): fitted on the
step plans of two steps, checked against the step plan of a third (an entry whose prediction
differs, or whose implementation changes its kernels, runs the per-primitive path from then
on), then replayed for any ``t``. Entries that do not vary are the step plan's own.

Family of a binding (:meth:`LengthPlans.key`): the *pivot* is the first symbol bound by a
variable's shape; comparing a request's binding with its previous one, the symbols that moved
by the pivot's step are *moving*, the others must not have moved. The key holds which symbols
move, the moving ones' offsets from the pivot, the others' values and the variables' buffer
layouts; ``t`` is the pivot's value. A prompt of any length then decodes in the same family.

Only the kinds whose implementations keep their kernels and argument structure for every
size of a dim above 1 vary (:data:`UNIFORM_KINDS`); the checked third step guards the rest.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .invariants import check_read
from .memory import Tensor, reusable
from .step_plan import (CHECKED, IMPL_BUFFER, WEIGHTS, GeneralEntry, KernelEntry, ShapeEntry,
                        StepPlan, ViewEntry)

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network

SAMPLES = 3        # steps of a family run the per-primitive path: two to fit, one to check
FAMILIES = 16      # per compiled model
# kinds whose implementations take any size of a growing dim (>= 2) with the same kernels and
# arguments laid out the same way (impls.eltwise_impl, strided copies, the row attention)
UNIFORM_KINDS = frozenset({
    "Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "Select", "Equal",
    "NotEqual", "Less", "Greater", "LessEqual", "GreaterEqual", "LogicalAnd", "LogicalOr",
    "LogicalNot", "LogicalXor", "Convert", "Transpose", "Broadcast", "Concat", "Gather",
    "FusedAttention", "Relu", "Exp", "Sqrt", "Negative", "Abs", "Sigmoid", "Tanh"})


# -- forms: nested int structures affine in t --------------------------------------------------
def _flatten(x: Any, out: list) -> Any:
    """The structure of ``x`` (ints in tuples, lists, int arrays, dicts of them), its ints
    appended to ``out``; None when ``x`` holds something else."""
    if type(x) is int or isinstance(x, np.integer):
        out.append(int(x))
        return "i"
    if type(x) in (tuple, list):
        specs = []
        for v in x:
            s = _flatten(v, out)
            if s is None:
                return None
            specs.append(s)
        return (type(x), tuple(specs))
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "iub":
            return None
        out.extend(int(v) for v in x.reshape(-1))
        return ("a", x.shape, x.dtype)
    if isinstance(x, dict):
        keys = sorted(x)
        specs = []
        for k in keys:
            s = _flatten(x[k], out)
            if s is None:
                return None
            specs.append(s)
        return ("d", tuple(keys), tuple(specs))
    if x is None:
        return "n"
    return None


def _build(spec: Any, it) -> Any:
    if spec == "i":
        return next(it)
    if spec == "n":
        return None
    tag = spec[0]
    if tag == "a":
        shape, dtype = spec[1], spec[2]
        n = 1
        for d in shape:
            n *= d
        return np.array([next(it) for _ in range(n)], dtype=dtype).reshape(shape)
    if tag == "d":
        return {k: _build(s, it) for k, s in zip(spec[1], spec[2])}
    return tag(_build(s, it) for s in spec[1])


def _expr(spec: Any, items) -> str | None:
    """Python source of ``spec``'s value with its ints ``base + slope * t`` (``items``: their
    (base, slope) in order); None for structures holding arrays or dicts."""
    if spec == "i":
        b, sl = next(items)
        return str(b) if not sl else f"({b} + {sl} * t)"
    if spec == "n":
        return "None"
    if spec[0] not in (tuple, list):
        return None
    parts = []
    for sub in spec[1]:
        e = _expr(sub, items)
        if e is None:
            return None
        parts.append(e)
    if spec[0] is list:
        return "[" + ", ".join(parts) + "]"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


class Form:
    """A value whose ints are ``base + slope * t`` (``const``: the value itself when nothing
    moves)."""

    __slots__ = ("spec", "base", "slope", "const", "fn")

    def __init__(self, spec: Any, base: list[int], slope: list[int], const: Any) -> None:
        self.spec, self.base, self.slope, self.const = spec, base, slope, const
        # the value at t as one generated expression where the structure is ints in tuples
        # and lists (shapes, argument lists: evaluated on every replayed step)
        text = _expr(spec, iter(zip(base, slope))) if const is None else None
        self.fn = eval(f"lambda t: {text}", {}) if text is not None else None

    @staticmethod
    def fit(a: Any, b: Any, ta: int, tb: int) -> "Form | None":
        """The form through ``a`` at ``ta`` and ``b`` at ``tb`` (integer slopes only)."""
        fa: list[int] = []
        fb: list[int] = []
        sa, sb = _flatten(a, fa), _flatten(b, fb)
        if sa is None or sa != sb or len(fa) != len(fb):
            return None
        if fa == fb:
            return Form(sa, fa, [0] * len(fa), a)
        dt = tb - ta
        slope, base = [], []
        for x, y in zip(fa, fb):
            d = y - x
            if d % dt:
                return None
            s = d // dt
            slope.append(s)
            base.append(x - s * ta)
        return Form(sa, base, slope, None)

    @property
    def fixed(self) -> bool:
        return self.const is not None or not any(self.slope)

    def at(self, t: int) -> Any:
        if self.const is not None:
            return self.const
        if self.fn is not None:
            return self.fn(t)
        return _build(self.spec, iter([b + s * t for b, s in zip(self.base, self.slope)]))

    def agrees(self, value: Any, t: int) -> bool:
        flat: list[int] = []
        spec = _flatten(value, flat)
        if spec != self.spec:
            return False
        return flat == [b + s * t for b, s in zip(self.base, self.slope)]


class _Work:
    """Work sizes of one launch at one ``t`` (what ``Launcher.launch`` reads of a Launch)."""

    __slots__ = ("gws", "lws", "cdims")

    def __init__(self, gws: tuple, lws: tuple | None) -> None:
        self.gws, self.lws, self.cdims = gws, lws, None


def _fit_work(launches: list, ints_at: list, ta: int, tb: int):
    """Per global work size dim: ("c", value), ("a", base, slope), or ("r", candidates,
    local size): the work-group size's multiple covering the largest ``ceil(ints[pos] /
    div)`` of the candidates (impls._1d over an element count, or the float4 count of
    eltwise_vec4; the kernels bound-check their work-items, so covering more is safe and
    covering less never happens); None otherwise."""
    la, lb = launches
    ia, ib = ints_at
    if la.lws != lb.lws or len(la.gws) != len(lb.gws):
        return None
    out = []
    for d, (ga, gb) in enumerate(zip(la.gws, lb.gws)):
        local = la.lws[d] if la.lws is not None else 1
        # moving counts whose rounding gives the work size (which may not have moved yet:
        # 64 work-items cover 2 and 3 elements alike)
        cands = tuple((pos, div) for pos, (xa, xb) in enumerate(zip(ia, ib)) if xa != xb
                      for div in (1, 4)
                      if _cover(xa, div, local) == ga and _cover(xb, div, local) == gb)
        found = ("r", cands, local) if cands else None
        if found is None and ga == gb:
            found = ("c", ga)
        if found is None:
            dg = gb - ga
            if dg % (tb - ta):
                return None
            s = dg // (tb - ta)
            found = ("a", ga - s * ta, s)
        out.append(found)
    return out


def _cover(n: int, div: int, local: int) -> int:
    items = max((n + div - 1) // div, 1)
    return (items + local - 1) // local * local


def _work_at(work: list, ints: list, t: int) -> tuple:
    out = []
    for w in work:
        if w[0] == "c":
            out.append(w[1])
        elif w[0] == "a":
            out.append(w[1] + w[2] * t)
        else:
            out.append(max(_cover(ints[pos], div, w[2]) for pos, div in w[1]))
    return tuple(out)


# -- entries --------------------------------------------------------------------------------
class LinKernel:
    """A kernel primitive whose shapes and arguments move with ``t``."""

    __slots__ = ("index", "out", "need", "keys", "dtypes", "skippable", "weights", "single",
                 "impl", "launches", "feeds", "values", "works")

    def __init__(self, a: KernelEntry, b: KernelEntry, ta: int, tb: int) -> None:
        self.index = a.index
        self.impl = b.impl  # (its kernels: any impl of these sources has the same)
        self.keys, self.dtypes, self.skippable = a.keys, a.dtypes, a.skippable
        self.weights, self.single = a.weights, a.single
        self.out = Form.fit(a.out, b.out, ta, tb)
        self.need = Form.fit(a.need, b.need, ta, tb)
        self.values = Form.fit(a.values, b.values, ta, tb)
        self.feeds = False
        self.works: dict = {}  # work sizes met -> their _Work (C arrays made once)
        self.launches = []
        for (la, bufs_a, ints_a, _, slots_a), (lb, _, ints_b, _, slots_b) in \
                zip(a.launches, b.launches):
            ints = Form.fit(ints_a, ints_b, ta, tb)
            slot_forms = []
            for sa, sb in zip(slots_a, slots_b):
                off = Form.fit(sa[4], sb[4], ta, tb) if sa[:4] == sb[:4] else None
                if off is None:
                    slot_forms = None
                    break
                slot_forms.append((sa[0], sa[1], sa[2], sa[3], off))
            work = _fit_work([la, lb], [ints_a, ints_b], ta, tb)
            if ints is None or slot_forms is None or work is None:
                self.launches = None
                return
            self.launches.append((la, bufs_a, ints, slot_forms, work))

    @property
    def ok(self) -> bool:
        return None not in (self.out, self.need, self.values) and self.launches is not None

    def agrees(self, c: KernelEntry, tc: int) -> bool:
        if c.impl.sources != self.impl.sources or len(c.launches) != len(self.launches) \
                or not self.out.agrees(c.out, tc) or not self.need.agrees(c.need, tc) \
                or not self.values.agrees(c.values, tc):
            return False
        for (ln, _, ints, slots, work), (lc, _, ints_c, _, slots_c) in \
                zip(self.launches, c.launches):
            if not ints.agrees(ints_c, tc) or len(slots) != len(slots_c):
                return False
            if any(s[:4] != sc[:4] or not s[4].agrees(sc[4], tc) for s, sc in zip(slots, slots_c)):
                return False
            if _work_at(work, ints_c, tc) != tuple(lc.gws) or lc.lws != ln.lws:
                return False
        return True


class LinView:
    """A skipped primitive whose view (shapes, offsets, strides) moves with ``t``."""

    __slots__ = ("index", "src", "k", "out", "views", "skippable")

    def __init__(self, a: ViewEntry, b: ViewEntry, ta: int, tb: int) -> None:
        self.index, self.src, self.k, self.skippable = a.index, a.src, a.k, a.skippable
        self.out = Form.fit(a.out, b.out, ta, tb) if (a.src, a.k) == (b.src, b.k) else None
        self.views = Form.fit(a.views, b.views, ta, tb) if self.out is not None else None

    @property
    def ok(self) -> bool:
        return self.out is not None and self.views is not None

    def agrees(self, c: ViewEntry, tc: int) -> bool:
        return (c.src, c.k) == (self.src, self.k) and self.out.agrees(c.out, tc) \
            and self.views.agrees(c.views, tc)


class GrowForm:
    """A host value whose one output grows with ``t`` along one axis (the others of length 1)
    and whose elements along it are ``a + b * t + c * i`` (``arange`` over the grown length,
    position offsets, an all-true causal row): (output shapes, arrays) at ``t``."""

    __slots__ = ("shapes", "a", "b", "c", "dtype")

    def __init__(self, shapes: Form, a: int, b: int, c: int, dtype: np.dtype) -> None:
        self.shapes, self.a, self.b, self.c, self.dtype = shapes, a, b, c, dtype

    @staticmethod
    def fit(ha: tuple, hb: tuple, ta: int, tb: int) -> "GrowForm | None":
        (sa, (va,)), (sb, (vb,)) = ha, hb
        if len(ha[1]) != 1 or len(hb[1]) != 1 or va.dtype != vb.dtype or va.dtype.kind not in "iub":
            return None
        shapes = Form.fit(sa, sb, ta, tb)
        if shapes is None or va.ndim != vb.ndim or va.size < 2 or \
                sum(d > 1 for d in va.shape) != 1 or sum(d > 1 for d in vb.shape) != 1:
            return None
        x, y = va.reshape(-1).astype(np.int64), vb.reshape(-1).astype(np.int64)
        c = int(x[1] - x[0])
        if (y[0] - x[0]) % (tb - ta):
            return None
        b = int(y[0] - x[0]) // (tb - ta)
        form = GrowForm(shapes, int(x[0]) - b * ta, b, c, va.dtype)
        return form if form.agrees(ha, ta) and form.agrees(hb, tb) else None

    def at(self, t: int) -> tuple:
        shapes = self.shapes.at(t)
        n = 1
        for d in shapes[0]:
            n *= d
        values = self.a + self.b * t + self.c * np.arange(n, dtype=np.int64)
        return shapes, (values.astype(self.dtype).reshape(shapes[0]),)

    def agrees(self, value: tuple, t: int) -> bool:
        shapes, arrays = self.at(t)
        return value[0] == shapes and len(value[1]) == 1 and \
            value[1][0].dtype == arrays[0].dtype and np.array_equal(value[1][0], arrays[0])


class LinHost:
    """A host-evaluated shape sub-graph node (a value of the binding alone: positions, mask
    pieces) whose output shapes and values are int or bool arrays affine in ``t`` (``Form``:
    fixed sizes; ``GrowForm``: growing along one axis): set from its form, not evaluated."""

    __slots__ = ("index", "form")

    def __init__(self, index: int, form: "Form | GrowForm") -> None:
        self.index, self.form = index, form


def _host_values(net: "Network", plan: StepPlan) -> dict[int, tuple]:
    """Per general entry of a host-evaluated shape sub-graph node: (output shapes, output
    arrays) as the step left them."""
    out = {}
    for e in plan.entries:
        if type(e) is not GeneralEntry:
            continue
        inst = net.insts[e.index]
        node = inst.node
        if not node.in_shape_of_subgraph or node.state_role is not None \
                or inst.out_shapes is None or not all(inst.host_valid):
            continue
        out[e.index] = (tuple(tuple(s) for s in inst.out_shapes),
                        tuple(np.array(a, copy=True) for a in inst.host))
    return out


def _shape_value(e: ShapeEntry) -> tuple:
    """A shape entry's (output shapes, host arrays), as LinHost's forms take them."""
    return tuple(tuple(o) for o in e.out), tuple(e.host)


def _same_shape_value(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and \
        all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a[1], b[1]))


def _general(index: int) -> GeneralEntry:
    """A general entry for the node at ``index`` (the per-primitive path runs it)."""
    e = GeneralEntry.__new__(GeneralEntry)
    e.index = index
    return e


def _same_kernel(a: KernelEntry, b: KernelEntry) -> bool:
    """The two steps launched the same thing the same way (a fixed entry)."""
    if a.impl is not b.impl or a.out != b.out or a.need != b.need \
            or len(a.launches) != len(b.launches):
        return False
    for (la, _, ia, _, sa), (lb, _, ib, _, sb) in zip(a.launches, b.launches):
        if la is not lb or ia != ib or sa != sb:
            return False
    return True


def _same_view(a: ViewEntry, b: ViewEntry) -> bool:
    return (a.src, a.k, a.out, a.views) == (b.src, b.k, b.out, b.views)


def _combine(net: "Network", a, b, ta: int, tb: int):
    """The family entry for one primitive from its entries at two steps: the entry itself
    when nothing moved, a LinKernel / LinView when it moves affinely, else a GeneralEntry."""
    if type(a) is not type(b) or a.index != b.index:
        return None
    if type(a) is GeneralEntry:
        return a
    if type(a) is ShapeEntry:  # (a shape_of value of the binding: fixed, affine, or general)
        ha, hb = _shape_value(a), _shape_value(b)
        if _same_shape_value(ha, hb):
            return b
        form = Form.fit(ha, hb, ta, tb) or GrowForm.fit(ha, hb, ta, tb)
        return LinHost(a.index, form) if form is not None else _general(a.index)
    kind = net.program.nodes[a.index].kind
    if type(a) is KernelEntry:
        if _same_kernel(a, b):
            return b
        if kind in UNIFORM_KINDS and a.impl.sources == b.impl.sources and not b.impl.buffers \
                and not a.weights:
            lin = LinKernel(a, b, ta, tb)
            if lin.ok:
                lin.feeds = bool(net.insts[a.index].sym_feeds)
                return lin
        return _general(a.index)
    if _same_view(a, b):
        return b
    lin = LinView(a, b, ta, tb)
    return lin if lin.ok else _general(a.index)


class LengthFamily:
    """The exec loop of one family of bindings (module docstring)."""

    __slots__ = ("entries", "general", "samples", "ready", "n_kernels", "n_launches",
                 "n_views", "n_fused")

    def __init__(self) -> None:
        self.entries: list | None = None
        self.general: list[int] = []
        self.samples: list[tuple[int, StepPlan]] = []
        self.ready = False
        self.n_kernels = self.n_launches = self.n_views = self.n_fused = 0

    def add_sample(self, net: "Network", t: int, plan: StepPlan) -> None:
        """A step run by the per-primitive path: fit on the second, check on the third."""
        if any(t == s for s, _, _ in self.samples):
            return
        self.samples.append((t, plan, _host_values(net, plan)))
        if len(self.samples) == 2:
            (ta, a, ha), (tb, b, hb) = self.samples
            if len(a.entries) != len(b.entries):
                self.samples.pop(0)
                return
            entries = [_combine(net, x, y, ta, tb) for x, y in zip(a.entries, b.entries)]
            if any(e is None for e in entries):
                self.samples.pop(0)
                return
            for i, e in enumerate(entries):  # host values affine in t: set, not evaluated
                if type(e) is GeneralEntry and e.index in ha and e.index in hb:
                    form = Form.fit(ha[e.index], hb[e.index], ta, tb) or \
                        GrowForm.fit(ha[e.index], hb[e.index], ta, tb)
                    if form is not None:
                        entries[i] = LinHost(e.index, form)
            self.entries = entries
        elif len(self.samples) == SAMPLES:
            tc, c, hc = self.samples[-1]
            if len(c.entries) != len(self.entries):
                self.samples = self.samples[-1:]
                self.entries = None
                return
            checked = []
            for e, ec in zip(self.entries, c.entries):
                sampled = KernelEntry if type(e) is LinKernel else ViewEntry
                if type(e) is LinHost:
                    value = _shape_value(ec) if type(ec) is ShapeEntry else hc.get(e.index)
                    if value is None or not e.form.agrees(value, tc):
                        e = _general(e.index)
                elif type(e) is ShapeEntry:
                    if type(ec) is not ShapeEntry or not _same_shape_value(_shape_value(e),
                                                                            _shape_value(ec)):
                        e = _general(e.index)
                elif type(e) in (LinKernel, LinView) and not (
                        type(ec) is sampled and e.index == ec.index and e.agrees(ec, tc)):
                    e = _general(e.index)
                elif type(e) in (KernelEntry, ViewEntry) and (type(ec) is not type(e) or not (
                        _same_kernel(e, ec) if type(e) is KernelEntry else _same_view(e, ec))):
                    e = _general(e.index)
                checked.append(e)
            self._finish(net, checked)

    def _finish(self, net: "Network", entries: list) -> None:
        self.entries = entries
        self.general = [e.index for e in entries if type(e) in (GeneralEntry, LinHost)]
        kernels = [e for e in entries if type(e) in (KernelEntry, LinKernel)]
        self.n_kernels = len(kernels)
        self.n_launches = sum(len(e.launches) for e in kernels)
        # (the step plans' count: views elided from the entries are skipped primitives too)
        demoted = sum(type(e) is GeneralEntry and type(c) is ViewEntry
                      for e, c in zip(entries, self.samples[-1][1].entries))
        # (host values set from their forms: as the per-primitive path leaves them)
        self.n_views = self.samples[-1][1].n_views - demoted
        self.n_fused = sum(net.insts[e.index].n_fused for e in kernels)
        self.samples = []
        self.ready = True

    def run(self, net: "Network", t: int, flush_every: int) -> None:
        """Replay at ``t`` on ``net`` entry by entry: the step plan's replay, with the moving
        fields of the Lin entries evaluated at ``t`` (a request's later steps take its tape of
        this family, length_tape)."""
        insts = net.insts
        stats = net.stats
        count = 0
        epoch, debug = net.epoch, net.debug
        counts = [0, 0]  # reuses, primitives whose arguments changed
        for e in self.entries:
            inst = insts[e.index]
            te = type(e)
            if debug:
                net.reader = inst
            if te is KernelEntry or te is LinKernel:
                kernel_step(net, inst, e, t, counts)
            elif te is ViewEntry or te is LinView:
                view_step(net, inst, e, t)
            elif te is LinHost:
                host_step(inst, e, t)
            elif te is ShapeEntry:
                shape_step(inst, e)
            else:
                general_step(inst)
            inst.stamp = epoch
            count += 1
            if count % flush_every == 0:
                net.queue.flush()
        self.count(stats, counts)

    def count(self, stats: dict, counts: list) -> None:
        """The counters a replay advances (as the per-primitive path would)."""
        stats["primitives"] += self.n_kernels
        stats["impl_cache_hits"] += self.n_kernels
        stats["kernels_enqueued"] += self.n_launches
        stats["skipped"] += self.n_views
        stats["fused"] += self.n_fused
        stats["reuses"] += counts[0]
        stats["set_arguments"] += counts[1]


def general_step(inst: Any) -> None:
    """A primitive through the per-primitive path."""
    if inst.plain and inst.recordable:
        inst.step_recorded()
    else:
        inst.prepare()
        inst.execute()


def shape_step(inst: Any, e: ShapeEntry) -> None:
    """A ShapeEntry that does not move: its recorded shapes, values and host arrays (an
    upload of the same array is still valid: step_plan's replay)."""
    inst.in_shapes, inst.values, inst.out_shapes = e.in_shapes, e.values, e.out
    hv, dv, host, outs = inst.host_valid, inst.device_valid, inst.host, inst.outputs
    for i, a in enumerate(e.host):
        dv[i] = dv[i] and host[i] is a and outs[i] is not None and outs[i].alloc is inst.own[i]
        host[i] = a
        hv[i] = True
    inst.executed_once = True


def host_step(inst: Any, e: LinHost, t: int) -> None:
    """A LinHost: the node's output shapes and host values at ``t``."""
    shapes, arrays = e.form.at(t)
    inst.out_shapes = list(shapes)
    host, hv, dv = inst.host, inst.host_valid, inst.device_valid
    for k, a in enumerate(arrays):
        host[k] = a
        hv[k] = True
        dv[k] = False
    inst.executed_once = True


def view_step(net: "Network", inst: Any, e: Any, t: int) -> None:
    """A ViewEntry / LinView: the outputs as views of the input at their offsets."""
    if type(e) is LinView:
        inst.in_shapes, inst.values = None, {}
        inst.out_shapes = e.out.at(t)
        views = e.views.at(t)
    else:
        inst.in_shapes, inst.values, inst.out_shapes = e.in_shapes, e.values, e.out
        views = e.views
    if e.skippable:
        inst.can_be_optimized = True
    src = net.insts[e.src]
    if net.debug:
        check_read(net, src, e.k)
    tensor = src.outputs[e.k]
    if tensor is None or not src.device_valid[e.k]:
        tensor = net.device_tensor(src, e.k)
    inst.set_views(tensor, views)


def kernel_step(net: "Network", inst: Any, e: Any, t: int, counts: list) -> None:
    """A KernelEntry / LinKernel: store the shapes, check the buffers (reallocating through
    the per-primitive path when they do not fit), set what changed of the arguments, launch.
    ``counts``: reuses and primitives whose arguments changed, advanced."""
    insts = net.insts
    launcher = net.launcher
    debug = net.debug
    lin = type(e) is LinKernel
    if lin:
        out = e.out.at(t)
        need = e.need.at(t)
        if e.feeds:
            inst._feed_dead_producers(e.values.at(t))
            for src, k in inst.sym_feeds.values():
                src.device_valid[k] = False
        # the per-primitive path rebuilds what a later step may ask of it
        inst.in_shapes, inst.values = None, {}
    else:
        out, need = e.out, e.need
        inst.in_shapes, inst.values = e.in_shapes, e.values
    if e.skippable:
        inst.can_be_optimized = False
    impl = e.impl
    new_impl = impl is not inst.impl
    if new_impl:
        kernels = inst.kernels_of.get(impl.sources)
        inst.kernels = kernels if kernels is not None else inst.kernels_for(impl)
        inst.impl = None if lin else impl
        if e.weights and not lin:
            inst.update_weights()
    cur = inst.out_shapes
    if new_impl or (out is not cur and out != cur) or None in inst.own:
        inst.out_shapes = out
        own, cap = inst.own, inst.capacity
        if all(reusable(own[i], cap[i], n) for i, n in enumerate(need)):
            outputs, keys, dtypes = inst.outputs, e.keys, e.dtypes
            record = net.predictor.record
            for i, shape in enumerate(out):
                record(keys[i], shape)
                outputs[i] = Tensor(own[i], 0, shape, dtypes[i])
            counts[0] += len(out)
        else:
            inst.realloc_if_needed()
    changed = False
    bufs = None
    for h, ln in zip(inst.kernels, e.launches):
        if lin:
            lw, buffers, iform, slots, work = ln
            ints = list(iform.at(t))
            cints = None
        else:
            lw, buffers, ints, cints, slots = ln
        buffers = buffers.copy()
        now = None
        for b, i, si, k, off in slots:
            if lin:
                off = off.at(t)
            if debug and si != WEIGHTS and si != IMPL_BUFFER and si != e.index:
                check_read(net, insts[si if si >= 0 else CHECKED - si], k)
            if si >= 0:
                tensor = insts[si].outputs[k]
            elif si <= CHECKED:
                src = insts[CHECKED - si]
                tensor = src.outputs[k]
                if tensor is None or not src.device_valid[k]:
                    tensor = net.device_tensor(src, k)
            elif si == WEIGHTS:
                tensor = inst.weights_tensor
            else:
                if bufs is None:
                    bufs = net.impl_buffers(impl)
                buffers[b] = bufs[k].buffer
                continue
            buffers[b] = tensor.alloc.buffer
            v = tensor.offset + off
            if v != ints[i]:
                if now is None:
                    now = ints if lin else ints.copy()
                now[i] = v
        if lin:
            if launcher.set_args(h, buffers, ints):
                changed = True
            gws = _work_at(work, ints, t)
            w = lw if gws == lw.gws else e.works.get(gws)
            if w is None:
                w = e.works[gws] = _Work(gws, lw.lws)
        else:
            if now is None:
                if (buffers != h.bufs or cints is not h.ints) \
                        and launcher.set_packed(h, buffers, cints):
                    changed = True
            elif launcher.set_args(h, buffers, now):
                changed = True
            w = lw
        ev = launcher.launch(h, w)
        if net.profiling and ev is not None:
            inst.events.append(ev)
    if changed:
        counts[1] += 1
    dv, hv = inst.device_valid, inst.host_valid
    for i in range(len(dv)):
        dv[i] = True
        hv[i] = False


class LengthPlans:
    """A compiled model's families (shared by its requests) and how a binding finds its own."""

    def __init__(self, program: Any) -> None:
        sym = program.symbolic
        self.named = list(dict.fromkeys(s for s, _, _ in sym.bindings))
        n_inputs = len(program.inputs)
        reads = program.reads
        # a variable's growing dim: its append axis, else a dim no input binds
        by_inputs = {s for s, pos, _ in sym.bindings if pos < n_inputs}
        pivots = [s for s, pos, axis in sym.bindings if pos >= n_inputs and (
            reads[pos - n_inputs].state_axis == axis if reads[pos - n_inputs].state_axis is not None
            else s not in by_inputs)]
        self.pivot = self.named.index(pivots[0]) if pivots else None
        self.families: dict = {}

    def key(self, binding: dict, last: tuple | None,
            layout: tuple) -> tuple[tuple | None, tuple, int]:
        """(family key or None, the named symbols' values, t) of ``binding`` after a binding
        whose named values were ``last``."""
        values = tuple(binding[s] for s in self.named)
        if self.pivot is None or last is None:
            return None, values, 0
        t = values[self.pivot]
        step = t - last[self.pivot]
        if step == 0:
            return None, values, t
        moving = []
        for v, old in zip(values, last):
            if v - old == step:
                moving.append(True)
            elif v == old:
                moving.append(False)
            else:
                return None, values, t
        offsets = tuple(v - t if m else v for v, m in zip(values, moving))
        return (tuple(moving), offsets, layout), values, t

