"""The program: lowered primitives with compile-time flags, built once per compiled model.

A program is a list of :class:`ProgramNode` in topological order. Each node names an op kind
(an OpenVINO type name such as ``"MatMul"`` or a legacy layer type such as
``"FullyConnected"``), its attributes, its inputs as ``(producer node, output index)`` and, for
``"Constant"`` nodes, the value; what the runtime knows of its kind is the node's row of the op
table (:mod:`netpass.runtime.kinds`). ``Program.from_model`` lowers a
:class:`~netpass.core.Model`; the legacy stage builds the same nodes from its layers and calls
``Program(nodes)``.

Build passes (in order): users, shape_of sub-graphs, fusion of elementwise consumers,
``mark_runtime_skippable_nodes``, in-place concat candidates, ``build_exec_order``, the
memory dependencies (restrictions) used by the memory pool, and the symbolic shapes
(:mod:`netpass.runtime.symbolic`).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..core.boundary import Constant, Parameter, Result
from ..core.containers import is_container
from ..core.dimension import Dimension, Symbol
from ..core.model import parameter_name, result_name
from ..core.shape import PartialShape
from ..errors import NetpassError, UnsupportedTypeError
from ..ops.matmul import MatMul
from ..ops.movement import Concat, Reshape, Split, VariadicSplit
from ..ops.shape_ops import ShapeOf
from ..ops.state import Assign, ReadValue
from .attention import fuse_attention
from .attention_proj import fold_decode_projections
from .concat_pieces import distribute_concats
from .const_fold import fold_constants
from .cse import merge_common_subexpressions
from .expert_gemm import fuse_expert_gemms
from .fused_mlp import fold_decode_mlps
from .gather_grid import slice_grid_gathers
from .gather_sum import fuse_gather_sums
from .gemm_reshapes import drop_gemm_reshapes
from .gemm_scales import fold_gemm_scales
from .impls import fused_chain, host_only_reason
from .input_views import fold_input_permutes, fold_view_chains
from .kernels.common import CTYPES
from .kinds import FusedAttention, Rotary
from .kinds.base import same_dim
from .kinds.normalization import RmsNorm
from .kv_append import attach_kv_appends
from .memory import Lifetime, overlap_sets
from .norm_gemm import fuse_norm_gemms
from .parallel_gemms import (
    fold_gated_inputs,
    merge_gated_mlps,
    merge_parallel_gemms,
    read_shapes_upstream,
)
from .program_node import (
    ProgramNode,
    bypass_identities,
    bypass_lone_concats,
    data_users,
    drop_truth_converts,
    drop_unread,
)
from .rms_norm import center_rms_norms, fuse_rms_norms
from .rotary import absorb_partial_rotaries, fuse_rotaries, merge_rotary_pairs
from .rotary_fold import fold_decode_rotaries
from .shape_terms import reshape_keeps_prefix
from .state_marks import mark_state
from .swap_views import fold_3d_swaps
from .symbolic import SymbolicShapes
from .unaries import merge_unaries


def _runtime_shape(op: Any, i: int) -> PartialShape:
    """An output's shape as the runtime holds it: a sequence or optional value travels as a
    0-d object array (its box, ``core.containers``), whatever shape its elements have."""
    if is_container(op.get_output_element_type(i)):
        return PartialShape([])
    return op.get_output_partial_shape(i)


# Constants larger than this keep a node out of shape_of sub-graphs (it computes data, not shapes).
SHAPE_OF_CONST_LIMIT = 64
FUSED_REGION_LIMIT = 64  # ops a fused region may grow to before it is cut
RESTRICTION_PAIRS_PER_NODE = 64  # overlapping-node sets kept while no larger on average


def _np_dtype(op: Any, et: Any) -> np.dtype:
    """The numpy dtype of element type ``et``: bf16 as ml_dtypes' bfloat16 (the host runs
    every bf16 primitive); dynamic element types as float32."""
    if et.dtype is not None:
        return et.dtype
    if et.name == "bf16":
        try:
            import ml_dtypes
        except ImportError as e:
            raise UnsupportedTypeError(f"{op.type_name} '{op.name}': bf16 needs the ml_dtypes "
                                       "package") from e
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float32)


def _with_input_symbols(model: Any) -> Any:
    """``model``, or a clone whose parameters' and ReadValues' unnamed dynamic dims carry fresh
    symbols (shape inference then proves which inner dims equal them: what the runtime's
    symbolic shapes use, as OpenVINO labels every input dim before its symbolic
    optimizations; a variable's shape is known at the start of an inference as an input's)."""
    def unnamed(ps: PartialShape) -> bool:
        return ps.rank_is_static and any(d.min != d.max and d.symbol is None for d in ps)

    def named(ps: PartialShape) -> PartialShape:
        return PartialShape([d if d.min == d.max or d.symbol is not None
                             else Dimension(d.min, d.max, Symbol()) for d in ps])

    reads = [n for n in model.get_ordered_ops() if isinstance(n, ReadValue)]
    if not any(unnamed(p.get_output_partial_shape(0)) for p in [*model.get_parameters(), *reads]):
        return model
    clone = model.clone()
    for p in clone.get_parameters():
        ps = p.get_output_partial_shape(0)
        if unnamed(ps):
            p.set_partial_shape(named(ps))
    for r in clone.get_ordered_ops():
        if isinstance(r, ReadValue) and unnamed(r.get_output_partial_shape(0)):
            r.variable_shape = named(r.get_output_partial_shape(0))
    clone.validate_nodes_and_infer_types()
    return clone


def _keeps_prefix(src: PartialShape, out: PartialShape, prefix: int) -> bool:
    """Whether a reshape from ``src`` to ``out`` provably keeps the first ``prefix`` dims (the
    same static sizes or symbols) and reshapes only the rest."""
    if not src.rank_is_static or not out.rank_is_static or len(src) < prefix or len(out) < prefix:
        return False
    return all(same_dim(d, o) for d, o in zip(list(src)[:prefix], list(out)[:prefix]))


def may_fit(dims: Sequence[Any], out_ps: PartialShape) -> bool:
    """Whether a tensor of ``dims`` (ints or Dimensions) may broadcast into ``out_ps`` without
    changing it: each dim 1 or provably equal to the output's (static, or the same symbol),
    or a pair the partial shapes cannot decide (an unknown output dim; an unknown dim against
    a static output dim other than 1, which a valid graph can only meet with 1 or its equal).
    Exporters lose symbols (a batch dim through an attention mask's broadcast), so a residual
    Add is seldom provable; the impl checks the real shapes (``impls.extras_fit``) and leaves
    a region that would grow the output to the host. An output dim statically 1 against an
    unknown dim is taken as a broadcast and refused."""
    if not out_ps.rank_is_static or len(dims) > len(out_ps):
        return False
    for d, od in zip(list(dims)[::-1], list(out_ps)[::-1]):
        lo, hi = (d, d) if isinstance(d, (int, np.integer)) else (d.min, d.max)
        if hi == 1 or (lo == hi and od.min == od.max == lo):
            continue
        if od.min == od.max:
            if od.min == 1 or lo == hi:
                return False
            continue
        if not isinstance(d, (int, np.integer)) and d.symbol is not None and d.symbol is od.symbol:
            continue
        if lo == hi and not od.min <= lo <= od.max:
            return False
    return True


def _broadcasts_into(src: ProgramNode, k: int, p: ProgramNode, out_ps: PartialShape) -> bool:
    """Whether a computed tensor can be a side input of ``p``'s fused epilogue: produced
    before ``p``, and possibly broadcasting into its output (``may_fit``)."""
    ps = src.out_pshapes[k]
    return src.index < p.index and ps.rank_is_static and may_fit(list(ps), out_ps)


def _grows(src: ProgramNode, u: ProgramNode, p: ProgramNode) -> bool:
    """Whether side input ``src`` of ``u`` is a constant that grows elementwise head ``p``'s
    region to ``u``'s output (broadcasting into it: a Convert of positions [B, L, 1] then
    a Multiply by the inverse frequencies [D]); the head's shape rule then broadcasts its
    output with it (``ProgramNode.grown_by``)."""
    out = u.out_pshapes[0]
    return p.row.expr is not None and src.is_constant and src.value is not None \
        and out.rank_is_static and may_fit([int(d) for d in src.value.shape], out)


# the passes over the node list, in order, before the program links its users
NODE_PASSES = (fold_constants, merge_common_subexpressions, slice_grid_gathers, distribute_concats,
               fuse_gather_sums, fuse_expert_gemms, fuse_rms_norms, center_rms_norms,
               fuse_rotaries, absorb_partial_rotaries, drop_gemm_reshapes, fold_3d_swaps,
               fuse_attention, read_shapes_upstream, fold_gemm_scales, merge_parallel_gemms,
               merge_gated_mlps, fold_gated_inputs, merge_rotary_pairs, fuse_norm_gemms,
               bypass_lone_concats, bypass_identities, drop_truth_converts, drop_unread,
               merge_unaries)


class Program:
    """Primitives plus compile-time decisions; shared by every infer request of a model.
    ``mlps``: the MLPs a single-row step runs in one launch (compiled.mlp_fusion);
    ``projections``: whether decode attentions fold into their output projections
    (attention_proj; compiled.projection_fusion)."""

    def __init__(self, nodes: Iterable[ProgramNode], fuse: bool = True,
                 mlps: str = "gated", projections: bool = False) -> None:
        self.nodes = list(nodes)
        if fuse:
            for node_pass in NODE_PASSES:
                self.nodes = node_pass(self.nodes)
        for i, n in enumerate(self.nodes):
            n.index = i
        self.inputs = [n for n in self.nodes if n.is_parameter]
        self.outputs = [n for n in self.nodes if n.is_result]
        self.reads: list[ProgramNode] = []  # ReadValues and Assigns (mark_state)
        self.sinks: list[ProgramNode] = []
        self._link_users()
        self._mark_shape_of_subgraphs()
        if fuse:
            self._fuse_elementwise()
            fold_input_permutes(self.nodes)
            fold_view_chains(self.nodes)
            self._mark_strided_views()
            fold_decode_mlps(self.nodes, mlps)
        mark_state(self)
        if fuse and attach_kv_appends(self):
            self._mark_strided_views()  # (the projection's pieces: now all read as views)
            fold_decode_rotaries(self.nodes)
            if projections:
                fold_decode_projections(self.nodes)
        self._mark_runtime_skippable_nodes()
        self._mark_inplace_concats()
        self.exec_order = self._build_exec_order()
        self._memory_dependencies()
        self.symbolic = SymbolicShapes(self)
        # what every step plan built over this program asks of it (step_plan.plan_sets)
        self.plan_sets: tuple[set[int], set[int]] | None = None

    # -- construction from a Model ---------------------------------------------------------------
    @classmethod
    def from_model(cls, model: Any, fuse: bool = True, mlps: str = "gated",
                   projections: bool = False) -> Program:
        """Lower every op of ``model`` to a program node (kind = the op's type name)."""
        model = _with_input_symbols(model)
        nodes: list[ProgramNode] = []
        by_op: dict[int, ProgramNode] = {}
        for op in model.get_ordered_ops():
            ins = [(by_op[id(o.node)], o.index) for o in op.input_values()]
            constant = isinstance(op, Constant)
            attrs = {} if constant or isinstance(op, Parameter) else op.get_attributes()
            n_out = op.get_output_size()
            dts = [_np_dtype(op, op.get_output_element_type(i)) for i in range(n_out)]
            name = None
            if isinstance(op, Parameter):
                name = parameter_name(op)
            elif isinstance(op, Result):
                name = result_name(op)
            pn = ProgramNode(op.name, op.type_name, attrs, ins,
                             value=op.value if constant else None, op=op,
                             out_dtypes=dts, name=name,
                             out_pshapes=[_runtime_shape(op, i) for i in range(n_out)])
            if not constant:
                pn.out_pvalues = [op.output(i).partial_value for i in range(n_out)]
            by_op[id(op)] = pn
            nodes.append(pn)
        return cls(nodes, fuse=fuse, mlps=mlps, projections=projections)

    # -- passes ----------------------------------------------------------------------------------
    def _link_users(self) -> None:
        for n in self.nodes:
            n.users = [[] for _ in range(n.num_outputs)]
        for n in self.nodes:
            for j, (src, k) in enumerate(n.inputs):
                src.users[k].append((n, j))
        for r in self.outputs:
            src = r.inputs[0][0]
            src.is_output = True
            r.is_output = True

    def _mark_shape_of_subgraphs(self) -> None:
        """ShapeOf nodes and nodes computed only from them (and small constants) run on the
        host; ``dependant_shape_ofs`` are the ShapeOfs whose change makes them re-run."""
        for n in self.nodes:
            if n.is_a(ShapeOf):
                n.in_shape_of_subgraph = True
                n.dependant_shape_ofs = [n]
                continue
            if n.is_parameter or n.is_constant or n.is_result or n.is_a(ReadValue, Assign) \
                    or not n.inputs:
                continue
            srcs = [s for s, _ in n.inputs if not s.is_constant]
            small_consts = all(s.value.size <= SHAPE_OF_CONST_LIMIT for s, _ in n.inputs
                               if s.is_constant and s.value is not None)
            if srcs and small_consts and all(s.in_shape_of_subgraph for s in srcs):
                n.in_shape_of_subgraph = True
                deps: dict[int, ProgramNode] = {}
                for s in srcs:
                    for d in s.dependant_shape_ofs:
                        deps.setdefault(id(d), d)
                n.dependant_shape_ofs = list(deps.values())
        for n in self.nodes:
            users = n.all_users()
            if users and all(u.is_a(ShapeOf) for u in users) and \
                    not (n.is_parameter or n.is_constant) and not n.is_output:
                n.shape_only = True
                n.optimized = True

    @staticmethod
    def _side_input_ok(src: ProgramNode, k: int, p: ProgramNode, out_ps: PartialShape) -> bool:
        """A tensor an op fused into ``p`` may read besides ``p``'s values: a constant or a
        computed tensor (``_broadcasts_into``) whose dims may broadcast into the output."""
        if src.is_constant and src.value is not None:
            return may_fit([int(d) for d in src.value.shape], out_ps)
        return _broadcasts_into(src, k, p, out_ps)

    @staticmethod
    def _retypes(u: ProgramNode, p: ProgramNode) -> bool:
        """Whether ``u`` may compute in a dtype other than ``p``'s own: where ``p`` is an
        elementwise kernel (each stage's value typed in its code, the buffer in the region's
        last dtype), to a boolean, an integer or float32 (a comparison, a Convert, a Select
        back to float: what needs no extension), and only after a head OpenCL has a type for
        (a Convert to float8 runs on the host, so must the Convert back)."""
        dt = np.dtype(u.out_dtypes[0])
        return p.row.expr is not None and (dt.kind in "biu" or dt == np.float32) \
            and np.dtype(p.out_dtypes[0]) in CTYPES

    def _absorbable(self, u: ProgramNode, p: ProgramNode, region: dict) -> bool:
        """Whether elementwise ``u`` can join ``p``'s fused region: every input is a region
        value or a side input that broadcasts into ``p``'s output, and it computes in the
        output's dtype (or, after an elementwise head, one ``_retypes`` allows)."""
        if not u.row.fusable or u.num_outputs != 1 or u.in_shape_of_subgraph or u.shape_only \
                or (u.out_dtypes[0] != p.out_dtypes[0] and not self._retypes(u, p)):
            return False
        out_ps = p.out_pshapes[0]
        for src, k in u.inputs:
            if id(src) in region:
                continue
            if not self._side_input_ok(src, k, p, out_ps) and not _grows(src, u, p):
                return False
        in_dts = [s.out_dtypes[k] for s, k in u.inputs]
        expr = u.row.expr
        return expr is not None and expr(u.attrs, in_dts, u.out_dtypes[0]) is not None

    def _fused_region(self, p: ProgramNode) -> list[ProgramNode]:
        """The elementwise ops after ``p`` that its kernel can compute: grown over users in
        program order while each op's inputs are region values or side inputs, then cut to
        the longest prefix whose only value used outside is its last (a single-consumer chain,
        or a region reading ``p``'s value several times, as tanh-GELU does)."""
        region: dict[int, int] = {id(p): 0}  # node -> position in ``grown``
        grown = [p]
        frontier = {id(u): u for u, _ in p.users[0]}
        while frontier and len(grown) < FUSED_REGION_LIMIT:
            u = min(frontier.values(), key=lambda n: n.index)
            del frontier[id(u)]
            if u.index < p.index or not self._absorbable(u, p, region):
                continue
            region[id(u)] = len(grown)
            grown.append(u)
            for w, _ in u.users[0]:
                if id(w) not in region:
                    frontier[id(w)] = w
        best = 0
        inside: set[int] = set()
        for t, n in enumerate(grown):
            inside.add(id(n))
            if t == 0:
                continue
            # every value before n used only inside the prefix
            if all(id(w) in inside for m in grown[:t] for w, _ in m.users[0]) and not \
                    any(m.is_output for m in grown[:t]):
                best = t
        return grown[1:best + 1]

    def _fuse_elementwise(self) -> None:
        """Fold elementwise consumers into the producing kernel (GEMM/conv epilogue, or a
        longer elementwise expression): single-consumer chains and single-exit regions
        (``_fused_region``). Side inputs are constants, or computed tensors that broadcast
        into the output (a residual Add, an attention mask)."""
        for p in self.nodes:
            if not p.row.epilogue or p.fused_into is not None:
                continue
            if p.is_output or p.num_outputs != 1 or p.in_shape_of_subgraph or p.shape_only \
                    or not p.out_pshapes[0].rank_is_static:
                continue
            if p.row.expr is not None and any(np.dtype(d) == np.float16 for d in p.out_dtypes):
                continue
            region = self._fused_region(p)
            for u, f in zip(region, fused_chain(region, (p, 0))):
                p.fused.append(f)
                p.fused_inputs.extend(f.others)
                u.fused_into = p
                u.optimized = True
            if region and region[-1].out_dtypes[0] != p.out_dtypes[0]:  # (its buffer's)
                p.op_dtype, p.out_dtypes[0] = p.out_dtypes[0], region[-1].out_dtypes[0]
            consts = [s.value.shape for s, _ in p.fused_inputs if s.value is not None]
            p.grown_by = [tuple(int(d) for d in c) for c in consts
                          if not may_fit(c, p.out_pshapes[0])]
            if p.grown_by:
                p.out_pshapes[0] = region[-1].out_pshapes[0]
                p.is_dynamic = any(not ps.is_static for ps in p.out_pshapes)

    @staticmethod
    def _strided_readers(node: ProgramNode, k: int, prefix: int | None, found: list) -> bool:
        """Whether every reader of output ``k`` of ``node`` takes a strided tensor: a GEMM, a
        fused attention or a Rotary input (GPT-NeoX rotates slices of its fused projection's
        heads), a permuted view read by one, an RmsNorm of a split piece (its rows one stride
        apart: OLMo2 normalizes its whole q and k projections; or per head of each token, the
        piece reshaped to heads: Qwen3's and Gemma 3's q and k norms), or, for a
        split piece (``prefix``:
        its first ``prefix`` dims and its other dims are each contiguous, not together), a
        Reshape keeping those first dims, whose readers must be such readers in turn (walked
        with a stack: a chain of Reshapes is as deep as the model). ShapeOf users read only the
        shape, which a view keeps. The inputs reached are appended to ``found`` as (node,
        input index)."""
        stack = [(node, k)]
        while stack:
            n, kk = stack.pop()
            users = n.users[kk]
            if not users or n.is_output:
                return False
            for u, j in users:
                if not u.reads_data:
                    continue
                if u.fused_into is not None:
                    return False
                if (u.is_a(MatMul) and j < 2) or u.is_a(FusedAttention) \
                        or (u.is_a(Rotary) and j in (0, 3)) \
                        or (u.is_a(RmsNorm) and prefix is not None
                            and n.out_pshapes[kk].rank_is_static
                            and prefix < len(n.out_pshapes[kk])):
                    found.append((u, j))
                elif u.permute_view is not None:
                    found.append(data_users(u)[0])
                elif u.is_a(Reshape) and prefix is not None and j == 0 and not u.is_output \
                        and (_keeps_prefix(n.out_pshapes[kk], u.out_pshapes[0], prefix)
                             or reshape_keeps_prefix(u, prefix)):
                    stack.append((u, 0))
                else:
                    return False
        return True

    def _mark_strided_views(self) -> None:
        """Split pieces, Slices and one-index Gathers (``StridedView.one_piece``) that only
        stride-reading kernels read become views of their input (a QKV projection's q, k, v;
        an attention mask cut from a larger constant): no launch, no buffer. The readers'
        impls are keyed by the strides they get."""
        for n in self.nodes:
            if n.fused or n.is_output or n.in_shape_of_subgraph or n.fused_into is not None:
                continue
            same_dt = bool(n.inputs) \
                and n.inputs[0][0].out_dtypes[n.inputs[0][1]] == n.out_dtypes[0]
            found: list = []
            if n.is_a(Split, VariadicSplit) and same_dt and n.inputs[1][0].is_constant:
                ps = n.inputs[0][0].out_pshapes[n.inputs[0][1]]
                if not ps.rank_is_static:
                    continue
                axis = int(np.asarray(n.inputs[1][0].value).reshape(-1)[0]) % len(ps)
                if all(self._strided_readers(n, k, axis, found) for k in range(n.num_outputs)):
                    n.strided_view = True
            elif n.num_outputs == 1 and same_dt and n.row.strided is not None \
                    and n.row.strided.one_piece is not None and n.row.strided.one_piece(n) \
                    and self._strided_readers(n, 0, None, found):
                n.strided_view = True
            if n.strided_view:
                for u, j in found:
                    u.strided_inputs.add(j)

    def _mark_runtime_skippable_nodes(self) -> None:
        """The reference's mark_runtime_skippable_nodes: reshape-likes are always views; a
        node whose row has a skip rule that holds here may alias its input at runtime."""
        for n in self.nodes:
            if n.is_parameter or n.is_constant or n.fused_into is not None or n.shape_only:
                continue
            if n.in_shape_of_subgraph or n.permute_view is not None:
                continue
            if n.strided_view:
                n.optimized = n.runtime_skippable = True
                continue
            if n.row.always_view:
                n.optimized = True
                continue
            if n.strided_inputs:
                continue  # (a variable's strided view is copied, never aliased: state.py)
            skip = n.row.skip
            same_dt = bool(n.inputs) \
                and n.inputs[0][0].out_dtypes[n.inputs[0][1]] == n.out_dtypes[0]
            if skip is not None and skip.when(n, same_dt):
                n.optimized = n.runtime_skippable = True

    def _mark_inplace_concats(self) -> None:
        """Concats whose inputs can be written straight into the concat buffer (decided again
        at runtime: only where each input is one contiguous chunk of the output)."""
        for c in self.nodes:
            if not c.is_a(Concat) or c.is_output or c.fused or c.in_shape_of_subgraph \
                    or not c.is_dynamic or len(c.inputs) < 2 or c.state_role is not None:
                continue
            ok = True
            for src, _ in c.inputs:
                if src.num_outputs != 1 or len(src.users[0]) != 1 or src.is_output \
                        or src.is_parameter or src.is_constant or src.optimized \
                        or src.in_shape_of_subgraph or not src.has_kernel \
                        or src.out_dtypes[0] != c.out_dtypes[0] or src.row.movement \
                        or src.is_a(Concat):
                    ok = False
                    break
            if ok:
                c.inplace_concat = True
                c.optimized = c.runtime_skippable = True

    def _build_exec_order(self) -> list[ProgramNode]:
        """Topological order with the inputs of in-place concat candidates moved right before
        their concat, so they run back to back."""
        moved = {id(src) for c in self.nodes if c.inplace_concat for src, _ in c.inputs}
        order: list[ProgramNode] = []
        for n in self.nodes:
            if id(n) in moved:
                continue
            if n.inplace_concat:
                order.extend(src for src, _ in n.inputs)
            order.append(n)
        return order

    def _memory_dependencies(self) -> None:
        """Each node's output lifetime in exec order: from its position (an in-place concat's: its
        first input's) to the last position of a user, following buffers through aliasing users
        (skipped, fused, in-place, results) to where those end; network outputs live to the end.
        ``restrictions(n)`` tells which other nodes' lifetimes overlap n's (the pool never hands a
        record to a node that conflicts with one of the record's users). O(nodes + edges), without
        recursion: an explicit-stack post-order over the aliasing users; then the overlapping nodes
        as a set per node (the pool tests them at C speed) when they are at most
        RESTRICTION_PAIRS_PER_NODE per node on average, else an O(1) overlap test per question
        (``memory.Lifetime``: long-lived values make the sets quadratic)."""
        order = self.exec_order
        pos = {id(n): i for i, n in enumerate(order)}
        big = len(order) + 1

        def aliases(u: ProgramNode) -> bool:
            return u.optimized or u.fused_into is not None or u.is_result

        end: dict[int, int] = {}
        for root in order:
            stack: list[tuple[ProgramNode, bool]] = [(root, False)]
            while stack:
                n, users_done = stack.pop()
                if id(n) in end:
                    continue
                users = n.all_users()
                if not users_done:
                    stack.append((n, True))
                    stack.extend((u, False) for u in users if aliases(u) and id(u) not in end)
                    continue
                e = big if n.is_output else pos[id(n)]
                for u in users:
                    e = max(e, pos[id(u)], end[id(u)] if aliases(u) else 0)
                end[id(n)] = e
        # (an in-place concat's buffer is written from its first input's position on: its
        # inputs' kernels write their outputs into it)
        spans = self.lifetimes = {
            id(n): (min([pos[id(n)]] + [pos[id(s)] for s, _ in n.inputs if id(s) in pos])
                    if n.inplace_concat else pos[id(n)], end[id(n)]) for n in order}
        sets = overlap_sets(order, spans, RESTRICTION_PAIRS_PER_NODE * len(order))
        for n in order:
            n.restrictions = frozenset(sets[id(n)]) if sets is not None else Lifetime(id(n), spans)

    def host_fallbacks(self) -> list[tuple[str, str, str]]:
        """``(kind, name, why)`` of the primitives that can only run on the host (the host
        fallback), known before any shape is: no kernel for the kind or its element types.
        Shape math, views, state and the graph boundary are not fallbacks."""
        out = []
        for n in self.nodes:
            if n.is_parameter or n.is_constant or n.row.always_view or \
                    n.in_shape_of_subgraph or n.shape_only or n.state_role is not None or \
                    n.fused_into is not None:
                continue
            dtypes = list(n.out_dtypes) + [s.out_dtypes[k] for s, k in n.inputs]
            why = "output shape from the data" if n.row.data_dependent else \
                host_only_reason(n.row, dtypes)
            if why is not None:
                out.append((n.kind, n.name, why))
        return out

    def describe(self) -> list[dict]:
        """Per node: id, kind, flags (for docs, tests and debugging)."""
        return [{"id": n.id, "kind": n.kind, "optimized": n.optimized,
                 "runtime_skippable": n.runtime_skippable, "shape_of": n.in_shape_of_subgraph,
                 "fused": [f.row.name for f in n.fused],
                 "fused_into": n.fused_into.id if n.fused_into else None,
                 "inplace_concat": n.inplace_concat, "permute_view": n.permute_view is not None}
                for n in self.exec_order]

    def node(self, id: str) -> ProgramNode:
        for n in self.nodes:
            if n.id == id or n.name == id:
                return n
        raise NetpassError(f"no program node '{id}'")
