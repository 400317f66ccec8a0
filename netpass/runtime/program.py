"""The program: lowered primitives with compile-time flags, built once per compiled model.

A program is a list of :class:`ProgramNode` in topological order. Each node names an op kind
(an OpenVINO type name such as ``"MatMul"`` or a legacy layer type such as
``"FullyConnected"``), its attributes, its inputs as ``(producer node, output index)`` and, for
``"Constant"`` nodes, the value. ``Program.from_model`` lowers a :class:`~netpass.core.Model`;
the legacy stage builds the same nodes from its layers and calls ``Program(nodes)``.

Build passes (in order): users, shape_of sub-graphs, fusion of elementwise consumers,
``mark_runtime_skippable_nodes``, in-place concat candidates, ``build_exec_order``, the
memory dependencies (restrictions) used by the memory pool, and the symbolic shapes
(:mod:`netpass.runtime.symbolic`).
"""
from __future__ import annotations

import heapq
from typing import Any, Iterable, Sequence

import numpy as np

from ..core.dimension import Dimension, Symbol
from ..core.node import OP_TYPES
from ..core.shape import PartialShape
from ..errors import NetpassError, UnsupportedTypeError
from . import impls
from .attention import KIND as ATTENTION, fuse_attention
from .const_fold import fold_constants
from .cse import merge_common_subexpressions
from .gemm_reshapes import drop_gemm_reshapes
from .memory import Lifetime
from .norm_gemm import fuse_norm_gemms
from .shape_terms import reshape_keeps_prefix
from .state import STATE_KINDS, mark_state
from .symbolic import SymbolicShapes

# Inputs whose values decide the output shape (the reference's get_shape_infer_dependencies).
SHAPE_INFER_DEPS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Transpose": (1,),
    "Broadcast": (1, 2), "Tile": (1,), "StridedSlice": (1, 2, 3), "Slice": (1, 2, 3, 4),
    "Pad": (1, 2, 3), "Split": (1,), "VariadicSplit": (1, 2), "Gather": (2,), "Range": (0, 1, 2),
    "TopK": (1,), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogicalAnd": (1,),
    "ReduceLogicalOr": (1,), "MVN": (1,), "Interpolate": (1, 2, 3), "OneHot": (1,),
    "ConstantOfShape": (0,), "CumSum": (), "Roll": (1, 2), "Reverse": (1,), "NormalizeL2": (1,),
    "Expand": (1,),
}
class _DataDependentKinds:
    """Kinds whose output shape depends on input data (their op class sets
    ``DATA_DEPENDENT_SHAPE``): computed on the host (the value is needed anyway)."""

    def __contains__(self, kind: object) -> bool:
        cls = OP_TYPES.get(kind) if isinstance(kind, str) else None
        return cls is not None and cls.DATA_DEPENDENT_SHAPE


DYNAMIC_OUTPUT_KINDS = _DataDependentKinds()
SHAPE_OF_KINDS = {"ShapeOf"}
# Constants larger than this keep a node out of shape_of sub-graphs (it computes data, not shapes).
SHAPE_OF_CONST_LIMIT = 64
ALWAYS_OPTIMIZED = {"Reshape", "Squeeze", "Unsqueeze", "Result"}
FUSED_REGION_LIMIT = 64  # ops a fused region may grow to before it is cut


RESTRICTION_PAIRS_PER_NODE = 64  # overlapping-node sets kept while no larger on average


def _overlap_sets(order: list, spans: dict[int, tuple[int, int]], limit: int) -> dict | None:
    """id -> ids of the nodes whose (first, last) spans overlap its own, by a sweep over the
    start positions (the nodes still live when one starts overlap it): O(n log n + pairs);
    None once the pairs pass ``limit``."""
    sets: dict[int, set] = {id(n): set() for n in order}
    live: dict[int, None] = {}
    ends: list[tuple[int, int]] = []
    pairs = 0
    for n in order:
        key = id(n)
        first, last = spans[key]
        while ends and ends[0][0] < first:
            del live[heapq.heappop(ends)[1]]
        pairs += 2 * len(live)
        if pairs > limit:
            return None
        mine = sets[key]
        for other in live:
            mine.add(other)
            sets[other].add(key)
        live[key] = None
        heapq.heappush(ends, (last, key))
    return sets


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
    from ..ops.state import ReadValue

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


def _same_dim(d, o) -> bool:
    """Whether Dimensions ``d`` and ``o`` are provably equal: the same static size, or the
    same symbol."""
    return d.min == d.max == o.min == o.max or (d.symbol is not None and d.symbol is o.symbol)


def _keeps_prefix(src: PartialShape, out: PartialShape, prefix: int) -> bool:
    """Whether a reshape from ``src`` to ``out`` provably keeps the first ``prefix`` dims (the
    same static sizes or symbols) and reshapes only the rest."""
    if not src.rank_is_static or not out.rank_is_static or len(src) < prefix or len(out) < prefix:
        return False
    return all(_same_dim(d, o) for d, o in zip(list(src)[:prefix], list(out)[:prefix]))


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


def _broadcasts_into(src: "ProgramNode", k: int, p: "ProgramNode", out_ps: PartialShape) -> bool:
    """Whether a computed tensor can be a side input of ``p``'s fused epilogue: produced
    before ``p``, and possibly broadcasting into its output (``may_fit``)."""
    ps = src.out_pshapes[k]
    return src.index < p.index and ps.rank_is_static and may_fit(list(ps), out_ps)


def _data_users(node: "ProgramNode") -> list:
    """The users of ``node``'s first output that read its data (not a ShapeOf, which reads
    only the shape: a view keeps it)."""
    return [(u, j) for u, j in node.users[0] if u.kind != "ShapeOf"]


def node_users(nodes: Iterable["ProgramNode"]) -> dict[int, list]:
    """id(node) -> [(user, input index)] over ``nodes`` (for passes that run before a Program
    links its users)."""
    users: dict[int, list] = {}
    for n in nodes:
        for j, (src, _) in enumerate(n.inputs):
            users.setdefault(id(src), []).append((n, j))
    return users


def splice(nodes: list, replace: dict[int, list], dropped: set[int]) -> list:
    """``nodes`` with each node whose id ``replace`` holds swapped for its list of nodes (the
    last of them takes its place as its users' producer), and the ``dropped`` ones left out."""
    if not replace:
        return nodes
    out: list = []
    for n in nodes:
        if id(n) in replace:
            out.extend(replace[id(n)])
        elif id(n) not in dropped:
            out.append(n)
    new_of = {key: new[-1] for key, new in replace.items()}
    for n in out:
        n.inputs = [(new_of.get(id(s), s), k) for s, k in n.inputs]
    return out


class ProgramNode:
    """One primitive: kind, attributes, inputs ``[(ProgramNode, out_index)]``, output dtypes
    and partial shapes, an optional constant ``value``, an optional source ``op`` (a
    :class:`~netpass.core.node.Node` used for shape inference and host evaluation)."""

    def __init__(self, id: str, kind: str, attrs: dict | None = None,
                 inputs: Sequence[tuple["ProgramNode", int]] = (), value: Any = None,
                 op: Any = None, out_dtypes: Sequence[Any] = (), out_pshapes: Sequence[Any] = (),
                 name: str | None = None) -> None:
        self.id = id
        self.kind = kind
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)
        self.value = None if value is None else np.asarray(value)
        self.op = op
        self.out_dtypes = [np.dtype(d) for d in out_dtypes]
        self.out_pshapes = [PartialShape(s) if not isinstance(s, PartialShape) else s
                            for s in out_pshapes]
        if self.value is not None and not self.out_dtypes:
            self.out_dtypes = [self.value.dtype]
            self.out_pshapes = [PartialShape(self.value.shape)]
        self.name = name or id
        # filled by Program
        self.index = -1
        self.users: list[list[tuple[ProgramNode, int]]] = [[] for _ in self.out_dtypes]
        self.is_output = False
        self.output_names: list[str] = []
        self.in_shape_of_subgraph = False
        self.dependant_shape_ofs: list[ProgramNode] = []
        self.shape_only = False          # every user is ShapeOf: never executed
        self.optimized = False
        self.runtime_skippable = False
        self.fused: list[impls.FusedDesc] = []
        self.fused_inputs: list[tuple[ProgramNode, int]] = []
        self.fused_into: ProgramNode | None = None
        self.inplace_concat = False      # concat whose inputs may write into its buffer
        self.permute_view: tuple | None = None  # Transpose order read through by its MatMul
        self.permuted_inputs: dict[int, tuple] = {}  # MatMul: input -> that order
        self.strided_view = False  # Split/Slice whose outputs are strided views of the input
        self.strided_inputs: set[int] = set()  # inputs that may be strided views (impl keys)
        self.restrictions: Any = frozenset()  # memory.Lifetime once the program is built
        self.has_kernel = False
        self.is_dynamic = any(not ps.is_static for ps in self.out_pshapes)
        # known elements of small integer outputs (ints, or Dimensions that may carry a
        # symbol), from the source op's partial values; None where unknown
        self.out_pvalues: list | None = None
        self.sym_out: list | None = None  # set by SymbolicShapes
        self.sym_deps: dict = {}
        self.sym_records: dict = {}  # (binding, input shapes) -> (shapes, values, impl, kernels)
        # a node standing for a fused sub-graph (attention.AttentionDesc): its shape rule and
        # host reference
        self.subgraph: Any = None
        # model state (netpass.runtime.state): role (read, append, assign), variable id, and
        # the axis of the variable's capacity layout (None: a copied variable)
        self.state_role: str | None = None
        self.state_var: str | None = None
        self.state_axis: int | None = None

    @property
    def num_outputs(self) -> int:
        return len(self.out_dtypes)

    def get_shape_infer_dependencies(self) -> tuple[int, ...]:
        """Indices of inputs whose values (not only shapes) decide the output shape."""
        if self.kind in SHAPE_INFER_DEPS:
            return tuple(i for i in SHAPE_INFER_DEPS[self.kind] if i < len(self.inputs))
        if self.kind in DYNAMIC_OUTPUT_KINDS:
            return tuple(range(len(self.inputs)))
        cls = OP_TYPES.get(self.kind)  # an op class may declare them (Node.SHAPE_INFER_INPUTS)
        deps = cls.SHAPE_INFER_INPUTS if cls is not None else ()
        return tuple(i for i in deps if i < len(self.inputs))

    def data_inputs(self) -> tuple[int, ...]:
        """Indices of the inputs whose data this primitive may read (by a kernel, a view, a host
        evaluation or a host fallback). The reshape-likes read input 0 only: their other input
        is a shape-infer value that ``update_shape`` holds, and in symbolic mode its producer
        may not run at all (``SymbolicShapes.order``)."""
        if self.kind in ALWAYS_OPTIMIZED:
            return (0,)
        return tuple(range(len(self.inputs)))

    def all_users(self) -> list["ProgramNode"]:
        seen: dict[int, ProgramNode] = {}
        for lst in self.users:
            for u, _ in lst:
                seen.setdefault(id(u), u)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"<ProgramNode {self.kind} '{self.id}'>"


class Program:
    """Primitives plus compile-time decisions; shared by every infer request of a model."""

    def __init__(self, nodes: Iterable[ProgramNode], fuse: bool = True) -> None:
        self.nodes = fuse_norm_gemms(fuse_attention(drop_gemm_reshapes(
            merge_common_subexpressions(fold_constants(list(nodes)))))) if fuse else list(nodes)
        for i, n in enumerate(self.nodes):
            n.index = i
        self.inputs = [n for n in self.nodes if n.kind == "Parameter"]
        self.outputs = [n for n in self.nodes if n.kind == "Result"]
        self.reads: list[ProgramNode] = []  # ReadValues and Assigns (mark_state)
        self.sinks: list[ProgramNode] = []
        self._link_users()
        self._mark_shape_of_subgraphs()
        for n in self.nodes:
            n.has_kernel = n.kind in impls.HAS_KERNEL
        if fuse:
            self._fuse_elementwise()
            self._fold_input_permutes()
            self._mark_strided_views()
        mark_state(self, ATTENTION)
        self._mark_runtime_skippable_nodes()
        self._mark_inplace_concats()
        self.exec_order = self._build_exec_order()
        self._memory_dependencies()
        self.symbolic = SymbolicShapes(self)

    # -- construction from a Model ---------------------------------------------------------------
    @classmethod
    def from_model(cls, model: Any, fuse: bool = True) -> "Program":
        """Lower every op of ``model`` to a program node (kind = the op's type name)."""
        from ..core.model import parameter_name, result_name
        model = _with_input_symbols(model)
        nodes: list[ProgramNode] = []
        by_op: dict[int, ProgramNode] = {}
        for op in model.get_ordered_ops():
            kind = op.type_name
            ins = [(by_op[id(o.node)], o.index) for o in op.input_values()]
            attrs = {} if kind in ("Parameter", "Constant") else op.get_attributes()
            n_out = op.get_output_size()
            dts = [_np_dtype(op, op.get_output_element_type(i)) for i in range(n_out)]
            name = None
            if kind == "Parameter":
                name = parameter_name(op)
            elif kind == "Result":
                name = result_name(op)
            pn = ProgramNode(op.name, kind, attrs, ins,
                             value=op.value if kind == "Constant" else None, op=op,
                             out_dtypes=dts, name=name,
                             out_pshapes=[op.get_output_partial_shape(i) for i in range(n_out)])
            if kind != "Constant":
                pn.out_pvalues = [op.output(i).partial_value for i in range(n_out)]
            by_op[id(op)] = pn
            nodes.append(pn)
        return cls(nodes, fuse=fuse)

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
            if n.kind in SHAPE_OF_KINDS:
                n.in_shape_of_subgraph = True
                n.dependant_shape_ofs = [n]
                continue
            if n.kind in ("Parameter", "Constant", "Result", *STATE_KINDS) or not n.inputs:
                continue
            srcs = [s for s, _ in n.inputs if s.kind != "Constant"]
            small_consts = all(s.value.size <= SHAPE_OF_CONST_LIMIT for s, _ in n.inputs
                               if s.kind == "Constant")
            if srcs and small_consts and all(s.in_shape_of_subgraph for s in srcs):
                n.in_shape_of_subgraph = True
                deps: dict[int, ProgramNode] = {}
                for s in srcs:
                    for d in s.dependant_shape_ofs:
                        deps.setdefault(id(d), d)
                n.dependant_shape_ofs = list(deps.values())
        for n in self.nodes:
            users = n.all_users()
            if users and all(u.kind in SHAPE_OF_KINDS for u in users) and \
                    n.kind not in ("Parameter", "Constant") and not n.is_output:
                n.shape_only = True
                n.optimized = True

    @staticmethod
    def _side_input_ok(src: ProgramNode, k: int, p: ProgramNode, out_ps: PartialShape) -> bool:
        """A tensor an op fused into ``p`` may read besides ``p``'s values: a constant or a
        computed tensor (``_broadcasts_into``) whose dims may broadcast into the output."""
        if src.kind == "Constant":
            return may_fit([int(d) for d in src.value.shape], out_ps)
        return _broadcasts_into(src, k, p, out_ps)

    def _absorbable(self, u: ProgramNode, p: ProgramNode, region: dict) -> bool:
        """Whether elementwise ``u`` can join ``p``'s fused region: every input is a region
        value or a side input that broadcasts into ``p``'s output, and it computes in the
        output's dtype."""
        if (u.kind not in impls.ELTWISE_KINDS and u.kind not in ("PowerIE", "ReLUIE", "Eltwise")) \
                or u.kind == "Convert" or u.num_outputs != 1 or u.out_dtypes[0] != p.out_dtypes[0] \
                or u.in_shape_of_subgraph:
            return False
        out_ps = p.out_pshapes[0]
        for src, k in u.inputs:
            if id(src) in region:
                continue
            if not self._side_input_ok(src, k, p, out_ps):
                return False
        in_dts = [s.out_dtypes[k] for s, k in u.inputs]
        return impls.fusable_expr(u.kind, u.attrs, in_dts, u.out_dtypes[0]) is not None

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
            if p.kind not in impls.FUSABLE_PRODUCERS or p.fused_into is not None:
                continue
            if p.is_output or p.num_outputs != 1 or p.in_shape_of_subgraph \
                    or not p.out_pshapes[0].rank_is_static:
                continue
            if p.kind in impls.ELTWISE_KINDS and any(np.dtype(d) == np.float16 for d in p.out_dtypes):
                continue
            region = self._fused_region(p)
            stage = {id(p): 0}
            for t, u in enumerate(region):
                refs, others = [], []
                for src, k in u.inputs:
                    if id(src) in stage:
                        refs.append(stage[id(src)])
                    else:
                        refs.append(None)
                        others.append((src, k))
                in_dts = [s.out_dtypes[k] for s, k in u.inputs]
                p.fused.append(impls.FusedDesc(u.kind, u.attrs, refs, others, in_dts, u.out_dtypes[0], u))
                p.fused_inputs.extend(others)
                u.fused_into = p
                u.optimized = True
                stage[id(u)] = t + 1

    def _fold_input_permutes(self) -> None:
        """A Transpose by a constant order whose only user is a MatMul (or a fused attention's
        q, k or v) becomes a strided view the kernel reads through (the per-head layouts of
        attention): no kernel, no buffer (OpenVINO's gemm input transpose orders)."""
        for m in self.nodes:
            if m.kind not in ("MatMul", ATTENTION) or m.fused_into is not None:
                continue
            for j in range(2 if m.kind == "MatMul" else 3):
                t, k = m.inputs[j]
                if t.kind != "Transpose" or t.is_output or t.fused or len(_data_users(t)) != 1 \
                        or t.inputs[1][0].kind != "Constant" or t.in_shape_of_subgraph \
                        or t.inputs[0][0].out_dtypes[t.inputs[0][1]] != t.out_dtypes[0]:
                    continue
                order = tuple(int(x) for x in np.asarray(t.inputs[1][0].value).reshape(-1))
                if len(order) < 2 or sorted(order) != list(range(len(order))):
                    continue
                t.permute_view = order
                t.optimized = True
                m.permuted_inputs[j] = order

    @staticmethod
    def _strided_readers(node: ProgramNode, k: int, prefix: int | None, found: list) -> bool:
        """Whether every reader of output ``k`` of ``node`` takes a strided tensor: a GEMM or a
        fused attention input, a permuted view read by one, or, for a split piece (``prefix``:
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
                if u.kind == "ShapeOf":
                    continue
                if u.fused_into is not None:
                    return False
                if (u.kind == "MatMul" and j < 2) or u.kind == ATTENTION:
                    found.append((u, j))
                elif u.permute_view is not None:
                    found.append(_data_users(u)[0])
                elif u.kind == "Reshape" and prefix is not None and j == 0 and not u.is_output \
                        and (_keeps_prefix(n.out_pshapes[kk], u.out_pshapes[0], prefix)
                             or reshape_keeps_prefix(u, prefix)):
                    stack.append((u, 0))
                else:
                    return False
        return True

    def _mark_strided_views(self) -> None:
        """Split pieces and Slices that only stride-reading kernels read become views of their
        input (a QKV projection's q, k, v; an attention mask cut from a larger constant): no
        launch, no buffer. The readers' impls are keyed by the strides they get."""
        for n in self.nodes:
            if n.fused or n.is_output or n.in_shape_of_subgraph or n.fused_into is not None:
                continue
            same_dt = bool(n.inputs) and n.inputs[0][0].out_dtypes[n.inputs[0][1]] == n.out_dtypes[0]
            found: list = []
            if n.kind in ("Split", "VariadicSplit") and same_dt and n.inputs[1][0].kind == "Constant":
                ps = n.inputs[0][0].out_pshapes[n.inputs[0][1]]
                if not ps.rank_is_static:
                    continue
                axis = int(np.asarray(n.inputs[1][0].value).reshape(-1)[0]) % len(ps)
                if all(self._strided_readers(n, k, axis, found) for k in range(n.num_outputs)):
                    n.strided_view = True
            elif n.kind == "Slice" and same_dt and self._strided_readers(n, 0, None, found):
                n.strided_view = True
            if n.strided_view:
                for u, j in found:
                    u.strided_inputs.add(j)

    def _mark_runtime_skippable_nodes(self) -> None:
        """Per-type rules of the reference's mark_runtime_skippable_nodes."""
        for n in self.nodes:
            if n.kind in ("Parameter", "Constant") or n.fused_into is not None or n.shape_only:
                continue
            if n.in_shape_of_subgraph or n.permute_view is not None:
                continue
            if n.strided_view:
                n.optimized = n.runtime_skippable = True
                continue
            k = n.kind
            same_dt = bool(n.inputs) and n.inputs[0][0].out_dtypes[n.inputs[0][1]] == n.out_dtypes[0]
            if k in ALWAYS_OPTIMIZED:
                n.optimized = True
            elif k == "Gather" and not n.fused and same_dt and n.inputs[1][0].kind != "Constant" \
                    and n.inputs[1][0].out_pshapes[n.inputs[1][1]].rank.is_static \
                    and len(n.inputs[1][0].out_pshapes[n.inputs[1][1]]) == 1:
                n.optimized = n.runtime_skippable = True
            elif n.strided_inputs:
                continue  # (a variable's strided view is copied, never aliased: state.py)
            elif k == "Transpose" and not n.is_output and not n.fused and same_dt and n.is_dynamic \
                    and not (len(n.users[0]) == 1 and n.users[0][0][0].kind == "Concat"):
                n.optimized = n.runtime_skippable = True
            elif k in ("StridedSlice", "Slice") and not n.is_output and not n.fused and same_dt:
                n.optimized = n.runtime_skippable = True
            elif k == "Broadcast" and not n.is_output and not n.fused and same_dt and n.is_dynamic:
                n.optimized = n.runtime_skippable = True
            elif k == "CropIE" and not n.is_output and same_dt:
                n.optimized = n.runtime_skippable = True

    def _mark_inplace_concats(self) -> None:
        """Concats whose inputs can be written straight into the concat buffer (decided again
        at runtime: only where each input is one contiguous chunk of the output)."""
        for c in self.nodes:
            if c.kind != "Concat" or c.is_output or c.fused or c.in_shape_of_subgraph \
                    or not c.is_dynamic or len(c.inputs) < 2 or c.state_role is not None:
                continue
            ok = True
            for src, k in c.inputs:
                if src.num_outputs != 1 or len(src.users[0]) != 1 or src.is_output \
                        or src.kind in ("Parameter", "Constant") or src.optimized \
                        or src.in_shape_of_subgraph or not src.has_kernel \
                        or src.out_dtypes[0] != c.out_dtypes[0] or src.kind in impls.MOVEMENT_KINDS \
                        or src.kind == "Concat":
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
        """Each node's output lifetime in exec order: from its position to the last position
        of a user, following buffers through aliasing users (skipped, fused, in-place, results)
        to where those end; network outputs live to the end. ``restrictions(n)`` tells which
        other nodes' lifetimes overlap n's (the pool never hands a record to a node that
        conflicts with one of the record's users). O(nodes + edges), without recursion: an
        explicit-stack post-order over the aliasing users; then the overlapping nodes as a set
        per node (the pool tests them at C speed) when they are at most
        RESTRICTION_PAIRS_PER_NODE per node on average, else an O(1) overlap test per question
        (``memory.Lifetime``: long-lived values make the sets quadratic)."""
        order = self.exec_order
        pos = {id(n): i for i, n in enumerate(order)}
        big = len(order) + 1

        def aliases(u: ProgramNode) -> bool:
            return u.optimized or u.fused_into is not None or u.kind == "Result"

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
        spans = self.lifetimes = {id(n): (pos[id(n)], end[id(n)]) for n in order}
        sets = _overlap_sets(order, spans, RESTRICTION_PAIRS_PER_NODE * len(order))
        for n in order:
            n.restrictions = frozenset(sets[id(n)]) if sets is not None else Lifetime(id(n), spans)

    def host_fallbacks(self) -> list[tuple[str, str, str]]:
        """``(kind, name, why)`` of the primitives that can only run on the host (the host
        fallback), known before any shape is: no kernel for the kind or its element types.
        Shape math, views, state and the graph boundary are not fallbacks."""
        out = []
        for n in self.nodes:
            if n.kind in ("Parameter", "Constant", "Result") or n.kind in ALWAYS_OPTIMIZED or \
                    n.in_shape_of_subgraph or n.shape_only or n.state_role is not None or \
                    n.fused_into is not None:
                continue
            dtypes = list(n.out_dtypes) + [s.out_dtypes[k] for s, k in n.inputs]
            why = "output shape from the data" if n.kind in DYNAMIC_OUTPUT_KINDS else \
                impls.host_only_reason(n.kind, dtypes)
            if why is not None:
                out.append((n.kind, n.name, why))
        return out

    def describe(self) -> list[dict]:
        """Per node: id, kind, flags (for docs, tests and debugging)."""
        return [{"id": n.id, "kind": n.kind, "optimized": n.optimized,
                 "runtime_skippable": n.runtime_skippable, "shape_of": n.in_shape_of_subgraph,
                 "fused": [f.kind for f in n.fused], "fused_into": n.fused_into.id if n.fused_into else None,
                 "inplace_concat": n.inplace_concat, "permute_view": n.permute_view is not None}
                for n in self.exec_order]

    def node(self, id: str) -> ProgramNode:
        for n in self.nodes:
            if n.id == id or n.name == id:
                return n
        raise NetpassError(f"no program node '{id}'")
