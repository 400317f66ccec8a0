"""Model state in the runtime: the variables of ``ReadValue`` / ``Assign``, held in device
memory by each infer request (:class:`VariableStore`). How each variable is updated is decided
at build time (:func:`~netpass.runtime.state_marks.mark_state`).

Two ways to update a variable:

- **In-place append** (a decoder's key/value cache): ``Assign(v, Concat(ReadValue(v), x))``.
  The variable's buffer has room along the concat axis (``capacity``: the live shape with that
  dim enlarged, OpenVINO's kv_cache preallocation of PREALLOC_STEPS iterations ahead through
  the request's ShapePredictor). The ReadValue's output is a strided view of the live part;
  the Concat writes only ``x`` behind it (one small strided copy) and its output is the grown
  view; the Assign does nothing but commit the new shape. A buffer is allocated again only
  when the capacity runs out (the old contents copied once). Every reader of the views must
  read through strides (GEMM and fused-attention inputs, their permuted views, reshapes that
  keep the strided dims, ShapeOf), so it is taken only where they do.
- **Copy** (anything else): the Assign copies its input into the variable's second buffer
  (double buffering: a ReadValue of this inference still reads the first); the buffers swap
  when the inference ends. Buffers grow with the same prediction along the dim that grew.

What the Assigns write becomes the variables' state when the inference has run
(:meth:`VariableStore.commit`), so every ReadValue reads the state from before it. A variable
never set reads as its init input (aliased) or as zeros whose dynamic dims are 0.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import NetpassError, ShapeInferenceError, StateError
from . import impls
from .kernels.decode import DECODE_ROWS
from .launcher import KernelHandle, kernel_handle
from .memory import Allocation, Tensor
from .state_marks import APPEND, ASSIGN, READ

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network, PrimitiveInst
    from .program import ProgramNode

# Steps of growth a variable's buffer is sized for (OpenVINO GPU: kv_cache prealloc iterations).
PREALLOC_STEPS = 128


class Variable:
    """One variable of one request: its buffer(s), live shape and this inference's update."""

    __slots__ = ("id", "dtype", "pshape", "axis", "alloc", "capacity", "shape", "back",
                 "read_buffer", "pending", "_strides")

    def __init__(self, read: ProgramNode) -> None:
        self.id = read.state_var
        self.dtype = read.out_dtypes[0]
        self.pshape = read.out_pshapes[0]
        self.axis: int | None = read.state_axis
        self.alloc: Allocation | None = None  # the buffer holding the state
        self.capacity: tuple | None = None  # its shape (append layout: room along ``axis``)
        self.shape: tuple | None = None  # the state's shape; None: never set
        self.back: Allocation | None = None  # copied variables: the buffer Assign writes
        self.read_buffer = False  # this inference's ReadValue read the buffer
        self.pending: tuple | None = None  # (alloc, capacity, shape) to commit
        self._strides: tuple = (None, None)  # (capacity, its strides)

    def strides(self) -> tuple | None:
        if self.axis is None:
            return None
        cap, st = self._strides
        if cap is not self.capacity:
            st = tuple(impls.contiguous_strides(self.capacity))
            self._strides = (self.capacity, st)
        return st

    def view(self, shape: tuple | None = None) -> Tensor:
        return Tensor(self.alloc, 0, tuple(self.shape if shape is None else shape), self.dtype,
                      self.strides())

    def initial_shape(self) -> tuple:
        return tuple(d.min for d in self.pshape)


def _left_to_reader(append: ProgramNode, new_rows: int, past: int) -> bool:
    """Whether the attention reading an append's cache writes its new rows itself
    (kv_append): a decode step's, and a prompt's over an empty cache."""
    return append.append_by is not None and (new_rows <= DECODE_ROWS or not past)


class VariableStore:
    """The variables of one request (a Network's): reads, appends, assigns, commits, and
    what ``query_state`` / ``reset_state`` need."""

    def __init__(self, net: Network) -> None:
        self.net = net
        self.vars: dict[str, Variable] = {}
        for r in net.program.reads:
            self.vars.setdefault(r.state_var, Variable(r))
        for a in net.program.sinks:
            if a.state_var not in self.vars:
                raise NetpassError(f"Assign '{a.name}' writes variable '{a.state_var}', which "
                                   "no ReadValue reads")
        self._kernels: dict[str, KernelHandle] = {}
        self._copies: dict[tuple, tuple] = {}  # (dtype, shape, strides) -> (Launch, kernel)
        # symbol -> (input position, axis) of an input dim that carries it
        self._input_dims: dict = {}
        for pos, p in enumerate(net.program.inputs):
            ps = p.out_pshapes[0]
            if ps.rank_is_static:
                for axis, d in enumerate(ps):
                    if d.symbol is not None:
                        self._input_dims.setdefault(d.symbol, (pos, axis))
        # the appended variables, the symbols of their grown lengths and the named symbols
        # those are made of (room_for checks them on every decode step)
        self._append_vars = []
        for n in net.program.nodes:
            if n.state_role == APPEND:
                sym = n.out_pshapes[0][n.state_axis].symbol
                self._append_vars.append((self.vars[n.state_var], sym,
                                          tuple(sym.named()) if sym is not None else ()))

    # -- per inference ----------------------------------------------------------------------------
    def begin(self) -> bool:
        """An inference starts: nothing read or assigned yet. Whether a variable holds a
        state (:meth:`holds_state`, in the same pass: the inference continues a sequence)."""
        held = False
        for v in self.vars.values():
            v.read_buffer = False
            v.pending = None
            if v.shape is not None:
                held = True
        return held

    def commit(self) -> None:
        """What the Assigns wrote becomes the state (end of an inference)."""
        for v in self.vars.values():
            if v.pending is not None:
                alloc, capacity, shape = v.pending
                if v.axis is None and alloc is v.back:
                    v.back = v.alloc
                    # (its ReadValue reads the other buffer next time: a length tape's
                    # grouped kernels that read it must set their arguments again)
                    self.net.mem_epoch += 1
                v.alloc, v.capacity, v.shape = alloc, capacity, shape
                v.pending = None
            v.read_buffer = False

    def holds_state(self) -> bool:
        """Whether a variable holds a state (the inference continues a sequence)."""
        return any(v.shape is not None for v in self.vars.values())

    def read_shapes(self, input_shapes: list[tuple]) -> list[tuple | None]:
        """Per ``program.reads``: the shape the ReadValue will give this inference (for the
        symbolic binding): the variable's, else its initial value's. An init sub-graph's
        value has the shape its partial shape states where each dim is static or an input
        dim (``input_shapes``, in ``program.inputs`` order: a stateful decoder's empty cache
        [batch, heads, 0, head]), else None (the full path evaluates it)."""
        out: list[tuple | None] = []
        for r in self.net.program.reads:
            v = self.vars[r.state_var]
            if v.shape is not None:
                out.append(v.shape)
            elif not r.inputs:
                out.append(v.initial_shape())
            else:
                out.append(self._init_shape(r, input_shapes))
        return out

    def _init_shape(self, read: ProgramNode, input_shapes: list[tuple]) -> tuple | None:
        src, k = read.inputs[0]
        ps = src.out_pshapes[k]
        if not ps.rank_is_static:
            return None
        shape = []
        for d in ps:
            if d.is_static:
                shape.append(d.min)
                continue
            at = self._input_dims.get(d.symbol) if d.symbol is not None else None
            if at is None:
                return None
            shape.append(input_shapes[at[0]][at[1]])
        return tuple(shape)

    def room_for(self, binding: dict) -> bool:
        """Whether every appended variable's buffer holds the length this inference grows it
        to (its Concat's dim along the append axis, evaluated in the symbolic ``binding``):
        a step that reallocates one changes its readers' strides midway (length_plan)."""
        need: dict = {}  # symbol -> its length in ``binding`` (evaluated once per symbol)
        for v, sym, named in self._append_vars:
            cap = v.capacity
            if v.shape is None or cap is None or sym is None:
                return False
            n = need.get(sym)
            if n is None:
                for s in named:
                    if s not in binding:
                        return False
                n = need[sym] = sym.evaluate(binding)
            if n > cap[v.axis]:
                return False
        return True

    def layout_key(self) -> tuple:
        """The variables' buffer layouts: readers' implementations depend on their strides,
        and an attention filling empty caches (a prompt after ``reset_state``, whose buffers
        are kept) writes through them. None: a variable with no state, or no buffer yet (a
        new request's: it takes the layout of the plan it replays, :meth:`take_layout`)."""
        return tuple([v.capacity if v.shape is not None or v.axis is not None else None
                      for v in self.vars.values()])

    def take_layout(self, layout: tuple) -> bool:
        """Before a step plan's replay: give the appended variables without a buffer (a new
        request's) buffers laid out as ``layout`` (the plan's, ``layout_key`` order), where
        the predictor lets them be preallocated; whether every appended variable is now laid
        out so. The plan was made by another new request's first inference and its kernels
        read the caches through those strides, but the buffers this request would size
        itself can differ (the exact size where the preallocation does not fit, another
        PREALLOC_STEPS)."""
        pred = self.net.predictor
        for v, cap in zip(self.vars.values(), layout):
            if v.axis is None:
                continue  # (read contiguous: the shapes say its layout)
            if v.capacity is None and cap is not None:
                nbytes = impls.size(cap) * v.dtype.itemsize
                if not pred.can_preallocate(nbytes):
                    return False
                v.alloc, v.capacity = self._allocate(nbytes), cap
            elif v.capacity != cap:
                return False
        return True

    def layout_moved(self, before: tuple) -> bool:
        """Whether a variable that had a buffer before this inference (``before``: its
        ``layout_key``) was moved into another one: what ran then used strides the key does
        not say (the new buffer's size depends on the request's own growth history)."""
        return any(b is not None and b != a for b, a in zip(before, self.layout_key()))

    # -- the primitives ----------------------------------------------------------------------------
    def prepare(self, inst: PrimitiveInst) -> None:
        node = inst.node
        role = node.state_role
        if role == APPEND:
            try:
                inst.update_shape()
            except ShapeInferenceError as e:  # (a batch of another size than the state's)
                raise StateError(node.state_var, f"its value does not take this inference's "
                                                 f"new part: {e}") from e
            return
        if role == READ:
            v = self.vars[node.state_var]
            if v.shape is not None:
                shape = v.shape
            elif node.inputs:
                src, k = inst.src(0)
                shape = src.out_shapes[k]
            else:
                shape = v.initial_shape()
        else:
            src, k = inst.src(0)
            shape = src.out_shapes[k]
        new = [tuple(shape)]
        inst.shape_changed = new != inst.out_shapes
        inst.out_shapes = new

    def execute(self, inst: PrimitiveInst) -> None:
        node = inst.node
        role = node.state_role
        if node.shape_only:
            return
        inst.executed_once = True
        if role == READ:
            self._read(inst)
        elif role == APPEND:
            self._append(inst)
        elif node.state_axis is None:
            self._copy_into_back(inst)

    def step(self, inst: PrimitiveInst) -> None:
        """``prepare`` + ``execute`` of a state primitive in a step plan's or a length
        family's replay: the same outcome, with the shapes taken from the variable and the
        append's inputs instead of shape inference."""
        node = inst.node
        role = node.state_role
        v = self.vars[node.state_var]
        if role == READ and v.shape is not None:
            inst.out_shapes = [v.shape]
            if not node.shape_only:
                inst.executed_once = True
                self._view_of(inst, v, v.shape)
                v.read_buffer = True
            return
        if role == APPEND and not node.shape_only:
            (a, ka), (b, kb) = inst.src_insts
            s0, s1 = a.out_shapes[ka], b.out_shapes[kb]
            axis = v.axis
            assert axis is not None  # (an appended variable has its axis: mark_state)
            inst.in_shapes = (s0, s1)
            inst.out_shapes = [s0[:axis] + (s0[axis] + s1[axis],) + s0[axis + 1:]]
            inst.executed_once = True
            self._append(inst)
            return
        if role == ASSIGN and v.axis is not None and not node.shape_only:
            src, k = inst.src_insts[0]  # (an appended variable: its Concat did the work)
            inst.out_shapes = [src.out_shapes[k]]
            inst.executed_once = True
            return
        self.prepare(inst)
        self.execute(inst)

    def stepper(self, inst: PrimitiveInst) -> Callable[[], None]:
        """:meth:`step` of ``inst`` as a function of its own (a length tape calls it on every
        decode step): the variable and the role looked up once; a read of a set variable, a
        decode step's in-place append and the assign of an appended variable inlined."""
        node = inst.node
        v = self.vars[node.state_var]
        role = node.state_role
        if node.shape_only or v.axis is None and role != READ:
            return lambda: self.step(inst)
        view_of = self._view_of
        if role == APPEND:
            return self._appender(inst, v)
        if role == READ:
            def read() -> None:
                shape = v.shape
                if shape is None:
                    self.step(inst)
                    return
                inst.out_shapes = [shape]
                inst.executed_once = True
                view_of(inst, v, shape)
                v.read_buffer = True
            return read
        src, k = inst.src_insts[0]

        def assign() -> None:  # (an appended variable: its Concat did the work)
            inst.out_shapes = [src.out_shapes[k]]
            inst.executed_once = True
        return assign

    def _appender(self, inst: PrimitiveInst, v: Variable) -> Callable[[], None]:
        """The APPEND step of :meth:`stepper`: where the state is in the variable's buffer, the
        grown shape fits it and the new rows are few enough for the reading attention to
        write them itself (``append_by``), only the bookkeeping of :meth:`_append`."""
        (a, ka), (b, kb) = inst.src_insts
        axis = v.axis
        assert axis is not None  # (an appended variable has its axis: mark_state)
        by_reader = inst.node.append_by is not None
        stats = self.net.stats
        view_of = self._view_of

        def append() -> None:
            s0, s1 = a.out_shapes[ka], b.out_shapes[kb]
            out = s0[:axis] + (s0[axis] + s1[axis],) + s0[axis + 1:]
            inst.in_shapes = (s0, s1)
            inst.out_shapes = [out]
            inst.executed_once = True
            cap = v.capacity
            if v.read_buffer and v.alloc is not None and cap is not None and \
                    len(cap) == len(out) and out[axis] <= cap[axis] and \
                    cap[:axis] == out[:axis] and cap[axis + 1:] == out[axis + 1:] and \
                    (not impls.size(s1) or by_reader and s1[axis] <= DECODE_ROWS):
                v.pending = (v.alloc, cap, out)
                view_of(inst, v, out)
                stats["state_appends"] += 1
            else:
                self._append(inst)
        return append

    def _read(self, inst: PrimitiveInst) -> None:
        v = self.vars[inst.node.state_var]
        if v.shape is not None:
            self._set_device(inst, v.view())
            v.read_buffer = True
            return
        if inst.node.inputs:
            src, k = inst.src(0)
            if src.device_valid[k] and src.outputs[k] is not None:
                self._set_device(inst, src.outputs[k])
            else:
                inst._set_host_one(0, self.net.host_values([(src, k)])[0])
            return
        inst._set_host_one(0, np.zeros(inst.out_shapes[0], v.dtype))

    @staticmethod
    def _view_of(inst: PrimitiveInst, v: Variable, shape: tuple) -> None:
        """``inst``'s output: the live part ``shape`` of ``v``'s buffer (its tensor kept, with
        the new shape, while it views that buffer: a decode step's reads and appends)."""
        t = inst.outputs[0]
        if t is not None and t.alloc is v.alloc and t.strides is v.strides() and t.offset == 0:
            t.shape = shape
        else:
            inst.outputs[0] = Tensor(v.alloc, 0, shape, v.dtype, v.strides())
        inst.device_valid[0] = True
        inst.host_valid[0] = False

    @staticmethod
    def _set_device(inst: PrimitiveInst, t: Tensor) -> None:
        inst.outputs[0] = t
        inst.device_valid[0] = True
        inst.host_valid[0] = False

    def _append(self, inst: PrimitiveInst) -> None:
        """Write the new part behind the state in the variable's buffer (module docstring)."""
        net = self.net
        node = inst.node
        v = self.vars[node.state_var]
        axis = v.axis
        assert axis is not None  # (an appended variable has its axis: mark_state)
        out = tuple(inst.out_shapes[0])
        past = inst.in_shapes[0][axis]
        cap = v.capacity
        fits = v.alloc is not None and len(cap) == len(out) and out[axis] <= cap[axis] and \
            cap[:axis] == out[:axis] and cap[axis + 1:] == out[axis + 1:]
        if not (fits and v.read_buffer):  # the state is not in this buffer yet
            if not fits:
                self._allocate_append(v, out)
            if past:  # the state read (a view of the old buffer, or the init value) goes first
                self._copy(net.device_tensor(*inst.src(0)), Tensor(v.alloc, 0, inst.in_shapes[0],
                                                                  v.dtype, self._cap_strides(v)))
        new = inst.in_shapes[1]
        if impls.size(new) and not _left_to_reader(node, new[axis], past):
            self._write_new_rows(inst, v, past, new)
        v.pending = (v.alloc, v.capacity, out)
        self._view_of(inst, v, out)
        net.stats["state_appends"] += 1

    def write_rows_left_to(self, reader: PrimitiveInst) -> None:
        """Write the new rows that appends left to ``reader`` (their ``append_by``: its kernel
        writes them) into the variables' buffers, as :meth:`_append` would: ``reader`` runs on
        the host this time (a fallback), which reads the caches and writes nothing."""
        net = self.net
        for inst in net.insts:
            node = inst.node
            if node.append_by is not reader.node or inst.in_shapes is None:
                continue
            v = self.vars[node.state_var]
            axis = v.axis
            assert axis is not None  # (an appended variable has its axis: mark_state)
            past, new = inst.in_shapes[0][axis], inst.in_shapes[1]
            if impls.size(new) and v.alloc is not None and _left_to_reader(node, new[axis], past):
                self._write_new_rows(inst, v, past, new)

    def _write_new_rows(self, inst: PrimitiveInst, v: Variable, past: int, new: tuple) -> None:
        """Copy append ``inst``'s new rows (its input 1) behind the ``past`` rows of ``v``."""
        assert v.axis is not None  # (an appended variable has its axis: mark_state)
        strides = self._cap_strides(v)
        self._copy(self.net.device_tensor(*inst.src(1)),
                   Tensor(v.alloc, past * strides[v.axis], new, v.dtype, strides))

    @staticmethod
    def _cap_strides(v: Variable) -> tuple:
        strides = v.strides()
        assert strides is not None  # (only appended variables have a capacity layout)
        return strides

    def _allocate_append(self, v: Variable, out: tuple) -> None:
        """A buffer for ``out`` with room for PREALLOC_STEPS more steps along the axis (the
        predictor's custom count; the exact size when that much does not fit)."""
        pred = self.net.predictor
        ok, pshape = pred.predict_preallocation_shape(
            f"variable:{v.id}", out, v.dtype.itemsize * 8, False,
            custom_count=PREALLOC_STEPS, custom_dim=v.axis)
        cap = tuple(pshape) if ok and pred.can_preallocate(impls.size(pshape) * v.dtype.itemsize) \
            else out
        v.alloc = self._allocate(impls.size(cap) * v.dtype.itemsize)
        v.capacity = cap

    def _copy_into_back(self, inst: PrimitiveInst) -> None:
        """A copied variable: the Assign's input into the second buffer, sized with the
        predictor along the dim that grew since the state (PREALLOC_STEPS ahead)."""
        v = self.vars[inst.node.state_var]
        src, k = inst.src(0)
        shape = tuple(src.out_shapes[k])
        n = impls.size(shape)
        back = v.back
        if back is None or back.nbytes < n * v.dtype.itemsize:
            grown = [i for i, (a, b) in enumerate(zip(shape, v.shape or ())) if a > b] \
                if v.shape is not None and len(v.shape) == len(shape) else []
            size = n
            if len(grown) == 1:
                pred = self.net.predictor
                ok, pshape = pred.predict_preallocation_shape(
                    f"variable:{v.id}", shape, v.dtype.itemsize * 8, False,
                    custom_count=PREALLOC_STEPS, custom_dim=grown[0])
                if ok and pred.can_preallocate(impls.size(pshape) * v.dtype.itemsize):
                    size = impls.size(pshape)
            back = v.back = self._allocate(max(size, 1) * v.dtype.itemsize)
        if n:
            self._copy(self.net.device_tensor(src, k), Tensor(back, 0, shape, v.dtype))
        v.pending = (back, shape, shape)

    def _allocate(self, nbytes: int) -> Allocation:
        net = self.net
        alloc = net.engine.allocate(nbytes)
        net.count_alloc(alloc)
        net.stats["state_allocations"] += 1
        return alloc

    def _copy(self, src: Tensor, dst: Tensor) -> None:
        """A strided device copy of ``src`` into ``dst`` (same shape), on the request's queue.
        A prompt copies every layer's keys and values into the cache, the same few layouts
        each time: the copy's launch and kernel are kept per (dtype, shape, strides)."""
        shape = tuple(dst.shape)
        in_st = src.strides if src.strides is not None else impls.contiguous_strides(shape)
        out_st = dst.strides if dst.strides is not None else impls.contiguous_strides(shape)
        key = (dst.dtype, shape, tuple(in_st), tuple(out_st))
        net = self.net
        found = self._copies.get(key)
        if found is None:
            ln = impls.strided_copy(dst.dtype, shape, in_st, 0, out_st, 0, 0, 0)
            h = self._kernels.get(ln.source.text)
            if h is None:
                h = self._kernels[ln.source.text] = kernel_handle(net.engine, ln.source,
                                                                  net.stats)
            found = self._copies[key] = (ln, h)
        ln, h = found
        buffers, ints = ln.args([src], [dst], [])
        net.launcher.set_args(h, buffers, ints)
        net.launcher.launch(h, ln)
        net.stats["kernels_enqueued"] += 1

    # -- the user's view ---------------------------------------------------------------------------
    def reset(self, vid: str | None = None) -> None:
        """Variables back to never set (their buffers are kept for the next sequence)."""
        self.net.mem_epoch += 1  # (a steady step continues no sequence: length_steady)
        for v in self.vars.values():
            if vid is None or v.id == vid:
                v.shape = None
                v.pending = None

    def get(self, vid: str) -> np.ndarray | None:
        """The state of ``vid`` read back from the device (None when never set)."""
        v = self.vars[vid]
        if v.shape is None:
            return None
        t = v.view()
        n = t.extent()
        region = np.empty(n, dtype=v.dtype)
        if n:
            self.net.launcher.read(region, t.alloc.buffer, 0)
        self.net.queue.finish()
        if t.strides is None:
            return region.reshape(t.shape)
        it = region.itemsize
        return np.lib.stride_tricks.as_strided(region, t.shape,
                                               tuple(s * it for s in t.strides)).copy()

    def set(self, vid: str, value: np.ndarray) -> None:
        """Set the state of ``vid`` (checked by the caller) into a new buffer laid out as the
        variable's (with room for PREALLOC_STEPS more along an append axis)."""
        v = self.vars[vid]
        shape = tuple(value.shape)
        if v.axis is not None:
            cap = list(shape)
            cap[v.axis] += PREALLOC_STEPS
            full = np.zeros(cap, v.dtype)
            full[tuple(slice(0, d) for d in shape)] = value
            v.capacity = tuple(cap)
        else:
            full = np.ascontiguousarray(value, dtype=v.dtype)
            v.capacity = shape
        v.alloc = self._allocate(max(full.nbytes, 1))
        if full.size:
            self.net.launcher.write(v.alloc.buffer, 0, full)
            self.net.queue.finish()  # (``full`` is freed when this returns)
        v.shape = shape
