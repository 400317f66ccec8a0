"""Graph nodes and their ports.

Ownership runs one way, as in OpenVINO: a node holds its producers strongly (through its
inputs) and its consumers only weakly. A node nobody consumes and nobody references is freed,
and disappears from its producers' consumer lists at once; this is what makes mutation during
a traversal safe and keeps ``consumers()`` exact after a rewrite.

``Output`` and ``Input`` (:mod:`netpass.core.ports`) are light views ``(node, index)``; the
per-output data lives on the node, one small ``_Port`` per output, so a node is a handful of
objects: building, ordering and freeing large graphs pays per object.
"""
from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np

from ..errors import NetpassError, ShapeInferenceError
from .changes import tracking
from .dimension import Dimension

# Output, Input, as_output and _Topology are also imported from here by the rest of netpass.
from .ports import (
    Input,
    Output,
    _connect,
    _Port,
    _Topology,
    as_output,
    port_states,
    topology_changed,
)
from .shape import PartialShape, ShapeLike, as_partial_shape
from .types import Type

__all__ = ["OP_TYPES", "VALUE_PROPAGATION_LIMIT", "Input", "Node", "Output", "_Port", "_Topology",
           "as_output", "made_up_name", "port_states", "topology_changed"]

_ids = itertools.count()


def made_up_name(type_name: str) -> str:
    """The unique name a node of ``type_name`` built now would have (``<Type>_<id>``, taking
    the next id): for a rewrite that skips building a node whose name another one takes."""
    return f"{type_name}_{next(_ids)}"

# Op classes by type name; every subclass of Node that sets its own ``type_name`` is listed.
OP_TYPES: dict[str, type[Node]] = {}

# Values of outputs up to this many elements are computed during shape inference, so that
# shape sub-graphs (ShapeOf -> Gather -> Concat -> Reshape) resolve to static shapes.
VALUE_PROPAGATION_LIMIT = 4096


class Node:
    """Base of every operation.

    Subclasses set ``type_name`` and ``version`` (the opset they belong to), declare their
    attributes in ``ATTRS`` (name -> default), implement :meth:`infer_types` (shape and type
    inference on partial shapes) and :meth:`evaluate` (numpy reference).
    """

    type_name: ClassVar[str] = "Node"
    version: ClassVar[str] = "opset1"
    # The IR versions (opset names) whose layers of ``type_name`` this class reads with its own
    # semantics; empty means ``version`` alone (see :meth:`ir_versions`). An opset that kept
    # the op unchanged still names the version it was defined in, so this lists only versions
    # that another OpenVINO op class defines with the same meaning for every valid input.
    IR_VERSIONS: ClassVar[tuple[str, ...]] = ()
    commutative: ClassVar[bool] = False
    ATTRS: ClassVar[dict[str, Any]] = {}
    # Ops whose outputs may be computed at compile time when all inputs are known.
    FOLDABLE: ClassVar[bool] = True
    # Ops whose output shapes depend on input values (NonZero, Unique): shape inference bounds
    # them, the runtime computes them on the host before sizing what follows.
    DATA_DEPENDENT_SHAPE: ClassVar[bool] = False
    # Inputs whose values (not only shapes) decide the output shapes (a target shape, an axis
    # given as a tensor): the runtime reads them before it infers shapes.
    SHAPE_INFER_INPUTS: ClassVar[tuple[int, ...]] = ()

    @classmethod
    def ir_versions(cls) -> tuple[str, ...]:
        """The IR versions this class reads: its own ``IR_VERSIONS`` (not a base class's: a
        version subclass reads only what it declares), else its ``version``."""
        return cls.__dict__.get("IR_VERSIONS") or (cls.version,)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "type_name" in cls.__dict__:
            OP_TYPES[cls.type_name] = cls

    # Op attributes (ATTRS) live in the instance ``__dict__`` of the subclasses.
    __slots__ = ("_id", "_name", "_friendly", "_rt", "_in_rt", "_inputs", "_outs", "_mark",
                 "__weakref__", "__dict__")

    if TYPE_CHECKING:
        # Each op's attributes are declared in its ATTRS and set per instance, so the type
        # checker sees them as Any; what Node itself defines is checked as written.
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def __init__(self, inputs: Iterable[Output | Node] = (), **attrs: Any) -> None:
        self._init_state()
        known = self.ATTRS
        if known:
            if attrs and not attrs.keys() <= known.keys():
                unknown = sorted(set(attrs) - set(known))
                raise TypeError(f"{self.type_name}: unknown attribute(s) {unknown}")
            values = self.__dict__
            for key, default in known.items():
                value = attrs.get(key, default)
                values[key] = list(value) if isinstance(value, list) else value
        elif attrs:
            raise TypeError(f"{self.type_name}: unknown attribute(s) {sorted(attrs)}")
        # A new node is wired without set_arguments' bookkeeping: it has no old inputs and no
        # consumers, so no graph's order changes (passes build nodes by the hundred thousand).
        if inputs:
            wired = self._inputs
            me = id(self)
            ref = weakref.ref(self)
            for i, src in enumerate(inputs):
                out = src if type(src) is Output else as_output(src)
                wired.append(out)
                _connect(out.node._outs[out.index].cons, (me, i), ref)
        self._infer()  # a new node: inferring it changes no graph

    def _init_state(self) -> None:
        """The state of a node without inputs, outputs or attributes yet (``__init__`` starts
        with it; a node built without ``__init__``, as ``Constant.of`` does, too)."""
        self._id = next(_ids)
        self._name: str | None = None
        self._friendly: str | None = None
        self._rt: dict[Any, Any] | None = None
        self._in_rt: dict[int, dict[str, Any]] | None = None
        self._inputs: list[Output] = []
        # A tuple, not a list: one allocation per node fewer to build and to free.
        self._outs: tuple[_Port, ...] = ()
        self._mark = 0  # visit mark of topological_sort

    # -- identity -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Unique name, ``<Type>_<id>``."""
        if self._name is None:
            self._name = f"{self.type_name}_{self._id}"
        return self._name

    @property
    def friendly_name(self) -> str:
        return self._friendly if self._friendly is not None else self.name

    @friendly_name.setter
    def friendly_name(self, value: str) -> None:
        self._friendly = value
        log = tracking.log
        if log is not None:
            log.edited()

    def get_name(self) -> str:
        return self.name

    def get_friendly_name(self) -> str:
        return self.friendly_name

    def set_friendly_name(self, value: str) -> None:
        self.friendly_name = value

    def get_type_name(self) -> str:
        return self.type_name

    @property
    def rt_info(self) -> dict[Any, Any]:
        """Runtime info (a mutable dict, created on first use)."""
        rt = self._rt
        if rt is None:
            rt = self._rt = {}
        return rt

    @rt_info.setter
    def rt_info(self, value: dict[Any, Any]) -> None:
        self._rt = value

    def get_rt_info(self) -> dict[Any, Any]:
        return self.rt_info

    # -- wiring -------------------------------------------------------------------------
    def set_arguments(self, inputs: Iterable[Output | Node]) -> None:
        me = id(self)
        # a node being built changes no graph's order; one in a graph does, even when it had
        # no inputs (a ReadValue given an initial value)
        rewired = bool(self._inputs) or self.has_consumers()
        for i, old in enumerate(self._inputs):
            old.node._outs[old.index].cons.pop((me, i), None)
        self._inputs = wired = []
        ref = weakref.ref(self)
        for i, src in enumerate(inputs):
            out = src if type(src) is Output else as_output(src)
            wired.append(out)
            _connect(out.node._outs[out.index].cons, (me, i), ref)
        if rewired:
            topology_changed()
            log = tracking.log
            if log is not None:
                log.touched(self)

    def set_argument(self, index: int, value: Output | Node) -> None:
        Input(self, index).replace_source_output(value)

    def set_output_size(self, n: int) -> None:
        outs = self._outs
        if n < len(outs):
            self._outs = outs[:n]
        elif n > len(outs):
            self._outs = outs + tuple([_Port() for _ in range(len(outs), n)])

    def set_output_type(self, index: int, element_type: Any, shape: ShapeLike) -> None:
        outs = self._outs
        if index >= len(outs):
            # (the next port of a node being inferred, most often its first: every node built)
            if index == len(outs):
                port = _Port()
                self._outs = outs + (port,)
            else:
                self.set_output_size(index + 1)
                port = self._outs[index]
        else:
            port = outs[index]
        port.et = element_type if type(element_type) is Type else Type.of(element_type)
        port.ps = shape if type(shape) is PartialShape else as_partial_shape(shape)

    def inputs(self) -> list[Input]:
        return [Input(self, i) for i in range(len(self._inputs))]

    def input(self, i: int) -> Input:
        if not 0 <= i < len(self._inputs):
            raise IndexError(f"{self.type_name} '{self.friendly_name}' has no input {i}")
        return Input(self, i)

    def input_value(self, i: int) -> Output:
        return self._inputs[i]

    def input_values(self) -> list[Output]:
        return list(self._inputs)

    def outputs(self) -> list[Output]:
        return [Output(self, i) for i in range(len(self._outs))]

    def output(self, i: int) -> Output:
        if 0 <= i < len(self._outs):
            return Output(self, i)
        raise IndexError(f"{self.type_name} '{self.friendly_name}' has no output {i}")

    def get_input_size(self) -> int:
        return len(self._inputs)

    def get_output_size(self) -> int:
        return len(self._outs)

    def get_input_node(self, i: int) -> Node:
        return self._inputs[i].node

    def get_input_partial_shape(self, i: int) -> PartialShape:
        return self._inputs[i].partial_shape

    def get_input_element_type(self, i: int) -> Type:
        return self._inputs[i].element_type

    def get_input_shape(self, i: int) -> tuple[int, ...]:
        return self._inputs[i].shape

    def get_output_partial_shape(self, i: int) -> PartialShape:
        return self._outs[i].ps

    def get_output_element_type(self, i: int) -> Type:
        return self._outs[i].et

    def get_output_shape(self, i: int) -> tuple[int, ...]:
        return Output(self, i).shape

    def users(self) -> list[Node]:
        """Distinct nodes consuming any output of this node."""
        seen: dict[int, Node] = {}
        for i in range(len(self._outs)):
            for inp in Output(self, i).consumers():
                seen.setdefault(id(inp.node), inp.node)
        return list(seen.values())

    get_users = users

    def has_consumers(self) -> bool:
        for port in self._outs:
            for ref in port.cons.values():
                if ref() is not None:
                    return True
        return False

    # -- attributes ---------------------------------------------------------------------
    def get_attributes(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.ATTRS}

    def set_attribute(self, key: str, value: Any) -> None:
        if key not in self.ATTRS:
            raise KeyError(f"{self.type_name} has no attribute '{key}'")
        setattr(self, key, value)
        log = tracking.log
        if log is not None:
            log.touched(self)

    def clone_with_new_inputs(self, inputs: Sequence[Output | Node]) -> Node:
        return type(self)(inputs, **self.get_attributes())

    # -- inference ----------------------------------------------------------------------
    def infer_types(self) -> None:
        """Set every output's element type and partial shape from the inputs."""
        raise NotImplementedError(f"{self.type_name} has no shape inference")

    def evaluate(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Numpy reference: input arrays -> output arrays."""
        raise NotImplementedError(f"{self.type_name} has no reference implementation")

    def infer_values(self) -> None:
        """Hook: set partial values of outputs that are not fully known (e.g. ShapeOf)."""

    def validate_and_infer_types(self) -> None:
        """Re-run shape and type inference (after an in-place change); an active change log
        records that this node's consumers may now be stale."""
        log = tracking.log
        if log is None:
            self._infer()
            return
        before = port_states(self)
        self._infer()
        log.reinferred(self, before)

    def set_inferred_shapes(self, shapes: Sequence[PartialShape]) -> None:
        """Give the outputs ``shapes``, which the caller knows ``validate_and_infer_types``
        would infer, recorded as that re-inference: for a rewrite that makes an op compute what
        it knows the shapes of (the op took in a Transpose or Gather that was below it), where
        inferring them again (a Concat of many pieces) costs more than the rewrite. The
        outputs keep their element types and hold no known values, so the caller checks that
        inference would compute none."""
        log = tracking.log
        before = port_states(self) if log is not None else []
        for port, ps in zip(self._outs, shapes):
            port.ps = ps
            port.val = port.pval = None
        if log is not None:
            log.reinferred(self, before)

    def _infer(self) -> None:
        """Shape and type inference, then the known values of small outputs."""
        try:
            self.infer_types()
        except ShapeInferenceError as e:
            if e.node is None:
                raise ShapeInferenceError(str(e), self, self._input_shapes()) from e
            raise
        except NetpassError:
            raise
        except Exception as e:  # inference code of an op hit something it did not expect
            raise ShapeInferenceError(f"{type(e).__name__}: {e}", self, self._input_shapes()) from e
        self._propagate_values()

    def _input_shapes(self) -> list[PartialShape]:
        return [o.partial_shape for o in self._inputs]

    def _propagate_values(self) -> None:
        outs = self._outs
        for port in outs:
            port.val = None
            port.pval = None
        if self._inputs and self.FOLDABLE:
            vals = []
            for o in self._inputs:
                v = o.node._outs[o.index].val
                if v is None:
                    break
                vals.append(v)
            else:  # every input value is known
                if self._small_static_outputs():
                    try:
                        results = self.evaluate(vals)
                    except Exception:
                        results = None
                    if results is not None:
                        for port, r in zip(outs, results):
                            dt = port.et.dtype
                            port.val = np.asarray(r, dtype=dt) if dt is not None else np.asarray(r)
                        return
        self.infer_values()

    def _small_static_outputs(self) -> bool:
        for port in self._outs:
            ps = port.ps
            if not ps.is_static:
                return False
            n = 1
            for d in ps.to_shape():
                n *= d
            if n > VALUE_PROPAGATION_LIMIT:
                return False
        return True

    def set_output_partial_value(self, index: int, value: Sequence[Any] | None) -> None:
        """Record known elements (ints) and unknown ones (Dimensions) of a 0/1-D int output."""
        port = self._outs[index]
        if value is None:
            port.pval = None
            return
        norm = tuple(v.min if isinstance(v, Dimension) and v.is_static else
                     (v if isinstance(v, Dimension) else int(v)) for v in value)
        if all(isinstance(v, int) for v in norm):
            et = port.et
            dt = et.dtype if et.dtype is not None and (et.is_integral or et.name == "boolean") \
                else np.int64
            ps = port.ps
            arr = np.array(norm, dtype=dt)
            if ps.rank_is_static and len(ps) == 0:
                arr = arr.reshape(())
            port.val = arr
        else:
            port.pval = norm

    def input_partial_value(self, i: int) -> tuple[Any, ...] | None:
        return self._inputs[i].partial_value

    def input_constant(self, i: int) -> np.ndarray | None:
        """The compile-time value of input ``i`` (a Constant or folded shape math), or None."""
        o = self._inputs[i]
        return o.node._outs[o.index].val

    def check(self, condition: bool, message: str, *args: Any) -> None:
        """Raise a ShapeInferenceError naming this node when ``condition`` is false.

        With ``args``, the message is ``message.format(*args)``, formatted only on failure
        (checks run for every node on import; most pass).
        """
        if not condition:
            self.fail(message, *args)

    def fail(self, message: str, *args: Any) -> NoReturn:
        """Raise the ShapeInferenceError of a failed :meth:`check`: for a condition that also
        narrows a type (``if merged is None: self.fail(...)``)."""
        if args:
            message = message.format(*args)
        raise ShapeInferenceError(message, self, self._input_shapes())

    def __repr__(self) -> str:
        outs = ", ".join(f"{p.ps} {p.et}" for p in self._outs)
        return f"<{self.type_name} '{self.friendly_name}': {outs}>"
