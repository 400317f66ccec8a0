"""Program nodes: one lowered primitive each, with the flags the program's build passes set,
and the helpers the passes that rewrite the node list share (:func:`node_users`,
:func:`splice`, :func:`fuse_matches`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..core.boundary import Constant, Parameter, Result
from ..core.shape import PartialShape
from ..ops.elementwise import Convert
from ..ops.movement import Concat
from ..ops.shape_ops import ShapeOf
from ..ops.state import Assign, ReadValue
from .impls import FusedDesc
from .kinds import op_class, row_of


def node_users(nodes: Iterable[ProgramNode]) -> dict[int, list]:
    """id(node) -> [(user, input index)] over ``nodes`` (for passes that run before a Program
    links its users)."""
    users: dict[int, list] = {}
    for n in nodes:
        for j, (src, _) in enumerate(n.inputs):
            users.setdefault(id(src), []).append((n, j))
    return users


def standing_for(last: ProgramNode, kind: str, inputs: list, subgraph: Any) -> ProgramNode:
    """A node of runtime kind ``kind`` that stands for the chain ``last`` closes (a node-list
    fusion): ``last``'s id, name, output types and shapes, the given ``inputs``, and
    ``subgraph``, what it computes (its shape rule and host reference)."""
    node = ProgramNode(last.id, kind, {}, inputs, out_dtypes=last.out_dtypes,
                       out_pshapes=last.out_pshapes, name=last.name)
    node.subgraph = subgraph
    return node


def bypass_lone_concats(nodes: list) -> list:
    """``nodes`` whose readers of a Concat of one input read that input instead (an identity
    some exports write in front of a cache append: ``cat((past,), -2)``, which would hide the
    variable's read from the append it feeds); ``drop_unread`` then takes the Concat."""
    lone = {id(n): n.inputs[0] for n in nodes
            if n.is_a(Concat) and len(n.inputs) == 1 and not n.is_output
            and n.inputs[0][0].out_dtypes[n.inputs[0][1]] == n.out_dtypes[0]}
    return _read_through(nodes, lone)


def bypass_identities(nodes: list) -> list:
    """``nodes`` whose readers of a node its row proves an identity at build time
    (``OpKind.identity``: a Broadcast to its input's own shape, a Multiply by ones) read that
    input instead; ``drop_unread`` then takes the node (and the shape math only it read).
    What an elementwise region needs to reach past it (a mask's And, then its Select)."""
    same = {}
    for n in nodes:
        j = n.row.identity(n) if n.row.identity is not None and n.inputs else None
        if j is not None:
            same[id(n)] = n.inputs[j]
    return _read_through(nodes, same)


def drop_truth_converts(nodes: list) -> list:
    """``nodes`` whose Converts of integers to bool that are read only as truth values (a
    row's ``truth_inputs``: And, Or, Select's condition), directly or through moves, are
    read through: those ops treat any nonzero as true already, so the Convert was a launch
    for nothing (a decoder's int64 padding mask before its And). The moves in between take
    the integer dtype."""
    users = node_users(nodes)
    through: dict[int, tuple] = {}
    for n in nodes:
        if not n.is_a(Convert) or n.out_dtypes[0] != np.bool_ or len(n.inputs) != 1:
            continue
        src, k = n.inputs[0]
        moves = _truth_moves(n, users)
        if np.dtype(src.out_dtypes[k]).kind in "iu" and moves is not None:
            for m in moves:
                m.out_dtypes[0] = src.out_dtypes[k]
            through[id(n)] = (src, k)
    return _read_through(nodes, through)


def _truth_moves(n: ProgramNode, users: dict) -> list | None:
    """The moves (input 0 of one-output ops that only move elements, no other boolean input)
    between boolean ``n`` and readers that read it as a truth value; None where some reader
    reads its data otherwise."""
    moves: list = []
    stack = [n]
    while stack:
        m = stack.pop()
        for u, j in users.get(id(m), ()):
            if not u.reads_data or j in u.row.truth_inputs:
                continue
            if j or u.num_outputs != 1 or not (u.row.copy_only or u.row.movement) \
                    or any(s.out_dtypes[i] == np.bool_ for s, i in u.inputs[1:]):
                return None
            moves.append(u)
            stack.append(u)
    return moves


def _read_through(nodes: list, through: dict) -> list:
    """``nodes`` whose inputs from a node in ``through`` (id -> the value it passes on) read
    that value instead, through chains of such nodes."""
    if not through:
        return nodes
    for n in nodes:
        if any(id(s) in through for s, _ in n.inputs):
            ins = []
            for s, k in n.inputs:
                while id(s) in through:
                    s, k = through[id(s)]
                ins.append((s, k))
            n.inputs = ins
    return nodes


def drop_unread(nodes: list) -> list:
    """``nodes`` (topological) without the computations nothing reads any more: what a fusion
    left behind (the target shape of a Broadcast the attention absorbed). Parameters,
    results and state (``ReadValue`` / ``Assign``) stay, and whatever they read."""
    live: set[int] = set()
    for n in reversed(nodes):
        if id(n) in live or n.is_parameter or n.is_result or n.is_a(ReadValue, Assign):
            live.add(id(n))
            live.update(id(s) for s, _ in n.inputs)
    return [n for n in nodes if id(n) in live] if len(live) < len(nodes) else nodes


def read_once(n: ProgramNode, users: dict[int, list]) -> bool:
    """Whether ``n`` (one output, not a model output) has exactly one reader in ``users``
    (:func:`node_users`): what a node-list pass may absorb into the node that reads it."""
    return not n.is_output and n.num_outputs == 1 and len(users.get(id(n), ())) == 1


def data_users(node: ProgramNode, users: dict[int, list] | None = None, k: int = 0) -> list:
    """The (reader, input index) pairs that read ``node``'s data: in ``users`` (a node-list
    pass's :func:`node_users`, every output), else of output ``k`` as the program linked them.
    A ShapeOf reads only the shape (which a view keeps: :func:`droppable`)."""
    pairs = users.get(id(node), ()) if users is not None else node.users[k]
    return [(u, j) for u, j in pairs if u.reads_data]


def droppable(absorbed: list, last: ProgramNode | None, users: dict[int, list]) -> list:
    """The ``absorbed`` nodes (but ``last``) a fusion drops. Those a ShapeOf still reads
    (torch's exporter computes view targets from the shapes of the scores, the
    probabilities, a stacked rotation), and the absorbed nodes they read, stay in the
    program, marked never to run (``shape_only``), so that those shapes are known."""
    ids = {id(n) for n in absorbed}
    stack = [n for n in absorbed if n is not last
             and any(u.is_a(ShapeOf) for u, _ in users.get(id(n), ()))]
    kept: dict[int, ProgramNode] = {}
    while stack:
        n = stack.pop()
        if id(n) not in kept:
            kept[id(n)] = n
            n.shape_only = n.optimized = True  # (what Program marks for a node read by ShapeOfs)
            stack += [s for s, _ in n.inputs if id(s) in ids and s is not last]
    return [n for n in absorbed if n is not last and id(n) not in kept]


def fuse_matches(nodes: list, rewrite: Callable[[Any, dict], tuple | None]) -> list:
    """``nodes`` (topological) with each node ``n`` for which ``rewrite(n, users)`` gives
    ``(new nodes, absorbed nodes)`` swapped for the new nodes (the last one takes its place
    as its users' producer) and the absorbed ones left out (:func:`splice`): the loop of the
    node-list fusions that match at a chain's last node."""
    users = node_users(nodes)
    replace: dict[int, list] = {}
    dropped: set[int] = set()
    for n in nodes:
        found = rewrite(n, users)
        if found is not None:
            replace[id(n)], absorbed = found
            dropped.update(id(c) for c in absorbed)
    return splice(nodes, replace, dropped)


def splice(nodes: list, replace: dict[int, list], dropped: set[int],
           moved: dict[int, tuple] | None = None) -> list:
    """``nodes`` with each node whose id ``replace`` holds swapped for its list of nodes (the
    last of them takes its place as its users' producer), and the ``dropped`` ones left out;
    a reader of a node whose id ``moved`` holds (one output) reads the (node, output) given
    there instead."""
    if not replace:
        return nodes
    out: list = []
    for n in nodes:
        if id(n) in replace:
            out.extend(replace[id(n)])
        elif id(n) not in dropped:
            out.append(n)
    new_of = {key: new[-1] for key, new in replace.items()}
    moved = moved or {}
    for n in out:
        n.inputs = [moved.get(id(s)) or (new_of.get(id(s), s), k) for s, k in n.inputs]
    return out


class ProgramNode:
    """One primitive: kind, attributes, inputs ``[(ProgramNode, out_index)]``, output dtypes
    and partial shapes, an optional constant ``value``, an optional source ``op`` (a
    :class:`~netpass.core.node.Node` used for shape inference and host evaluation).

    ``kind`` names the op class (``op_class``: the source op's own class, else the class
    registered under that type name); ``row`` is its row of the runtime op table
    (:mod:`netpass.runtime.kinds`), which the runtime reads instead of the name."""

    def __init__(self, id: str, kind: str, attrs: dict | None = None,
                 inputs: Sequence[tuple[ProgramNode, int]] = (), value: Any = None,
                 op: Any = None, out_dtypes: Sequence[Any] = (), out_pshapes: Sequence[Any] = (),
                 name: str | None = None) -> None:
        self.id = id
        self.kind = kind
        self.op_class = type(op) if op is not None else op_class(kind)
        self.row = row_of(self.op_class)
        self.is_parameter = self.op_class is Parameter
        self.is_constant = self.op_class is Constant
        self.is_result = self.op_class is Result
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
        self.fused: list[FusedDesc] = []
        self.fused_inputs: list[tuple[ProgramNode, int]] = []
        self.fused_into: ProgramNode | None = None
        # an elementwise region head's own output dtype where its region ends in another (a
        # mask's And, then its Select to float): ``out_dtypes`` holds the region's, which its
        # buffer and its readers take
        self.op_dtype: np.dtype | None = None
        # the shapes of the constants that grow an elementwise region past its head's shape
        # (``Program._fuse_elementwise``): the head's output is broadcast with them
        self.grown_by: list[tuple] = []
        self.index_forms: dict[int, Any] = {}  # output -> index_forms.Form (memo)
        self.inplace_concat = False      # concat whose inputs may write into its buffer
        self.permute_view: tuple | None = None  # Transpose order read through by its MatMul
        self.permuted_inputs: dict[int, tuple] = {}  # MatMul: input -> that order
        self.strided_view = False  # Split/Slice whose outputs are strided views of the input
        self.strided_inputs: set[int] = set()  # inputs that may be strided views (impl keys)
        self.restrictions: Any = frozenset()  # memory.Lifetime once the program is built
        self.has_kernel = self.row.has_kernel
        self.is_dynamic = any(not ps.is_static for ps in self.out_pshapes)
        # known elements of small integer outputs (ints, or Dimensions that may carry a
        # symbol), from the source op's partial values; None where unknown
        self.out_pvalues: list | None = None
        self.sym_out: list | None = None  # set by SymbolicShapes
        self.sym_deps: dict = {}
        self.sym_records: dict = {}  # (binding, input shapes) -> (shapes, values, impl, kernels)
        # a node standing for a fused sub-graph (attention.AttentionDesc): its shape rule
        # (``infer_shapes(shapes, values)``, ``values`` of its ``deps`` where it has them) and
        # host reference
        self.subgraph: Any = None
        # model state (netpass.runtime.state): role (read, append, assign), variable id, and
        # the axis of the variable's capacity layout (None: a copied variable)
        self.state_role: str | None = None
        self.state_var: str | None = None
        self.state_axis: int | None = None
        # an in-place append whose new rows the attention reading the cache writes on decode
        # steps (kv_append)
        self.append_by: ProgramNode | None = None
        # an MLP's up projection whose down projection computes both at one row (fused_mlp)
        self.mlp_fold: Any = None
        # a Rotary whose attention rotates its queries and keys on decode steps (rotary_fold)
        self.rotary_fold: Any = None
        # an attention whose output projection's kernel computes it on decode steps
        # (attention_proj)
        self.proj_fold: Any = None

    @property
    def num_outputs(self) -> int:
        return len(self.out_dtypes)

    def get_shape_infer_dependencies(self) -> tuple[int, ...]:
        """Indices of inputs whose values (not only shapes) decide the output shape or the
        kernel (the row's ``deps``; every input of a data-dependent op)."""
        if self.row.data_dependent:
            return tuple(range(len(self.inputs)))
        deps = getattr(self.subgraph, "deps", None)  # (a fused node's own: AttentionDesc)
        return tuple(i for i in (self.row.deps if deps is None else deps) or ()
                     if i < len(self.inputs))

    def data_inputs(self) -> tuple[int, ...]:
        """Indices of the inputs whose data this primitive may read (by a kernel, a view, a host
        evaluation or a host fallback). The reshape-likes read input 0 only: their other input
        is a shape-infer value that ``update_shape`` holds, and in symbolic mode its producer
        may not run at all (``SymbolicShapes.order``)."""
        if self.row.always_view:
            return (0,)
        return tuple(range(len(self.inputs)))

    @property
    def reads_data(self) -> bool:
        """Whether this node reads its inputs' data: a ShapeOf reads only their shapes, and a
        ``shape_only`` node (an absorbed node kept for a ShapeOf) never runs."""
        return not self.shape_only and self.row.cls is not ShapeOf

    def is_a(self, *classes: type) -> bool:
        """Whether this node's op is one of ``classes`` (op classes, or runtime kinds)."""
        return self.row.cls in classes

    def all_users(self) -> list[ProgramNode]:
        seen: dict[int, ProgramNode] = {}
        for lst in self.users:
            for u, _ in lst:
                seen.setdefault(id(u), u)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"<ProgramNode {self.kind} '{self.id}'>"
