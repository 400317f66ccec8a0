"""The row of the runtime op table (:class:`OpKind`) and the shape rules several families share.

A row says everything the runtime knows of one op class: which inputs' values it reads on the
host before it runs (shape-infer dependencies), its concrete shape rule, its kernel (an impl
factory), whether that kernel only copies elements, how it can be a view of its input instead
of running, and, read from the legacy stage's own table, its legacy layer name. Rows name op
classes, never type-name strings, so a missing class fails at import. Each family module of
this package (mirroring ``netpass/ops/<family>``) registers its rows with :func:`table`.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from ...core.node import Node
from ...legacy_passes.convert import legacy_type

if TYPE_CHECKING:  # pragma: no cover
    from ..impls import Impl, Params

# (attrs, input shapes, host values of the dependencies by input) -> output shapes, or None
# when the rule does not cover the case (the op's own shape inference then runs)
ShapeRule = Callable[[dict, list, dict], "list[tuple] | None"]
# (params, impl key) -> the kernels for these shapes, or None (the host runs the op)
ImplFactory = Callable[["Params", Hashable], "Impl | None"]
# (attrs, input dtypes, output dtype) -> the OpenCL expression over {0}, {1}..., or None
ExprRule = Callable[[dict, Sequence[Any], Any], "str | None"]
# (primitive) -> element offset of the output in its input's buffer when it is a view, else None
SkipCheck = Callable[[Any], "int | None"]
# (primitive, input shape, input strides) -> (element offset, strides) of each output
ViewRule = Callable[[Any, Sequence[int], Sequence[int]], "list[tuple[int, tuple]]"]


class OpClass(Protocol):
    """What the table needs of a row's class: its type name (an op class, a ``Node``, or a
    runtime-only kind such as ``FusedAttention``)."""

    type_name: ClassVar[str]


@dataclass(frozen=True)
class Skip:
    """A runtime skip (the reference's ``mark_runtime_skippable_nodes`` and its per-primitive
    checks): ``when(node, same_dtype)`` decides at program build time whether the node may be
    skipped, ``check(inst)`` per inference whether it is (its output then aliases its input at
    the returned offset). ``reads_values``: the check reads input data, not only shapes and
    shape-infer values, so step plans replay it only where ``by_shapes(inst)`` says that this
    time the shapes alone decide."""

    when: Callable[[Any, bool], bool]
    check: SkipCheck
    reads_values: bool = False
    by_shapes: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class StridedView:
    """How the outputs are strided views of input 0 (split pieces, a stepped slice, a reshape of
    a strided tensor): ``views``; ``applies(inst)`` where it holds only for some values (a Slice
    with a negative step runs its kernel), None where it always does. ``one_piece(node)``: a
    node of one output that becomes such a view where only stride-reading kernels read it
    (``Program._mark_strided_views``; None: not chosen that way)."""

    views: ViewRule
    applies: Callable[[Any], bool] | None = None
    one_piece: Callable[[Any], bool] | None = None


@dataclass(frozen=True, eq=False)
class OpKind:
    """What the runtime knows of op class ``cls`` (one row of the table).

    - ``deps``: inputs whose values ``update_shape`` reads on the host (they decide the output
      shape, or the kernel: a reduction's axes); None takes the op class's own
      ``SHAPE_INFER_INPUTS``; data-dependent ops read every input.
    - ``shape``: concrete shape rule for the hot path; None runs the op's own partial-shape
      inference on static inputs (memoised per node and input signature).
    - ``impl``: kernel factory; None: the host runs the op's numpy reference.
    - ``expr``: elementwise OpenCL expression (the ``eltwise`` template's own stage).
    - ``fusable``: the expression may be folded into a producer's kernel (numpy-broadcast side
      inputs); ``epilogue``: its kernel applies such folded ops after its value.
    - ``copy_only``: the kernel only moves elements (float16 as 16 bits: no ``cl_khr_fp16``).
    - ``movement``: pure data movement (also: never written in place into a concat).
    - ``always_view``: the output is input 0's elements in the same order (reshape-likes,
      Result): a view, never a kernel; ``strided``: how its outputs may be strided views.
    - ``skip``: runtime skip rule; ``host``: fast numpy evaluation in shape_of sub-graphs
      (attrs, arrays, output shapes) -> arrays, or None for the op's reference.
    - ``reorders_weights``, ``fake_aligned``: FullyConnected's constant weights reordered once
      per layout (``update_weights``) and its allocations fake-aligned (``realloc``).
    - ``uniform``: the kernel takes any size of a dim above 1 with the same sources and its
      arguments laid out the same way (elementwise, strided copies, the row attention): a
      length family (``length_plan``) may compute its launches from forms affine in the length.
    - ``affine``: (node, its inputs' index forms) -> its output's form (``index_forms``: what
      the build proves of integer values, a Gather's indices an arange), or None.
    - ``literal_expr``: (attrs, {input: scalar}) -> the float expression where those inputs are
      constant scalars written as literals (``FusedDesc.literals``), or None for ``expr``.
    - ``identity``: (node) -> the input the build proves the output to be (the same dtype, and
      dims with the same static sizes or symbols: a Broadcast to its input's own shape, a
      Multiply by ones), or None; its readers read that input instead
      (``program_node.bypass_identities``).
    - ``truth_inputs``: inputs read only as truth values (nonzero is true: C's ``&&``, ``?:``),
      so a Convert to bool in front of them is redundant (``program_node.drop_truth_converts``).
    - ``mask_bound``: (node, its inputs' bounds) -> its output's bound (``mask_bounds``: where
      the build proves a mask false, true or dead past a diagonal), or None.
    """

    cls: type[OpClass]
    deps: tuple[int, ...] | None = None
    shape: ShapeRule | None = None
    impl: ImplFactory | None = None
    expr: ExprRule | None = None
    fusable: bool = False
    epilogue: bool = False
    copy_only: bool = False
    movement: bool = False
    always_view: bool = False
    strided: StridedView | None = None
    skip: Skip | None = None
    host: Callable[[dict, list, list], list[np.ndarray] | None] | None = None
    reorders_weights: bool = False
    fake_aligned: bool = False
    uniform: bool = False
    affine: Callable[[Any, list], Any] | None = None
    literal_expr: Callable[[dict, dict], str | None] | None = None
    identity: Callable[[Any], int | None] | None = None
    truth_inputs: tuple[int, ...] = ()
    mask_bound: Callable[[Any, list], Any] | None = None

    def __post_init__(self) -> None:
        if self.deps is None:  # (frozen: set once, here)
            object.__setattr__(self, "deps", tuple(getattr(self.cls, "SHAPE_INFER_INPUTS", ())))

    @property
    def name(self) -> str:
        return self.cls.type_name

    @property
    def has_kernel(self) -> bool:
        return self.impl is not None

    @property
    def data_dependent(self) -> bool:
        """Output shapes from the input data (NonZero, Unique): evaluated on the host when
        ``update_shape`` runs."""
        return bool(getattr(self.cls, "DATA_DEPENDENT_SHAPE", False))

    @property
    def legacy_type(self) -> str:
        """The legacy layer type the op becomes (``legacy_passes.convert``'s table: the legacy
        stage sits below the runtime and cannot read this one)."""
        # (a runtime-only kind such as FusedAttention has no legacy layer: its type name)
        return legacy_type(self.cls) if issubclass(self.cls, Node) else self.cls.type_name

    def __repr__(self) -> str:
        return f"<OpKind {self.name}>"


# op class -> row, filled by the family modules (netpass.runtime.kinds imports them all)
TABLE: dict[type, OpKind] = {}


def table(*rows: OpKind) -> tuple[OpKind, ...]:
    """Register ``rows`` (one per op class) and return them."""
    for row in rows:
        if row.cls in TABLE:
            raise ValueError(f"two runtime rows for {row.name}")
        TABLE[row.cls] = row
    return rows


# -- shape rules several families use -------------------------------------------------------------
def ints(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def same_dim(d: Any, o: Any) -> bool:
    """Whether Dimensions ``d`` and ``o`` are provably equal: the same static size, or the
    same symbol."""
    return d.min == d.max == o.min == o.max or (d.symbol is not None and d.symbol is o.symbol)


def static_dim(ps: Any, i: int) -> int | None:
    """Dim ``i`` of partial shape ``ps`` where it is static, else None (a dynamic rank or
    dim, or ``i`` past the rank)."""
    if not ps.rank_is_static or not -len(ps) <= i < len(ps):
        return None
    d = ps[i]
    return d.min if d.min == d.max else None


def same_as(n: Any, j: int) -> bool:
    """Whether node ``n``'s output is provably input ``j``'s dtype and shape (each dim the same
    static size or the same symbol): what ``OpKind.identity`` rules ask."""
    src, k = n.inputs[j]
    ps, out = src.out_pshapes[k], n.out_pshapes[0]
    if src.out_dtypes[k] != n.out_dtypes[0] or not ps.rank_is_static or not out.rank_is_static \
            or len(ps) != len(out):
        return False
    return all(same_dim(d, o) for d, o in zip(ps, out))


def same_shape(attrs: dict, shapes: list, values: dict) -> list[tuple]:
    """The output has input 0's shape (softmax, MVN, cumulative sums, Result...)."""
    return [shapes[0]]


def broadcast(shapes: Sequence[tuple]) -> list[tuple] | None:
    """numpy broadcasting of concrete shapes (plain Python: np.broadcast_shapes costs more
    than the whole rule for the two or three short shapes elementwise ops have)."""
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        off = len(out) - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o != d:
                if o == 1:
                    out[off + i] = d
                elif d != 1:
                    return None
    return [tuple(out)]


def broadcast_shape(attrs: dict, shapes: list, values: dict) -> list[tuple] | None:
    """Elementwise ops: numpy broadcasting of the inputs (other auto_broadcast modes: None)."""
    if attrs.get("auto_broadcast", "numpy") != "numpy":
        return None
    return broadcast(shapes)
