"""Data movement: Reshape, Squeeze, Unsqueeze, Transpose, Concat, Split, VariadicSplit, Slice,
StridedSlice, Broadcast, Tile, Reverse, Roll, DepthToSpace, SpaceToDepth, BatchToSpace,
SpaceToBatch, ShuffleChannels, Identity, SliceScatter (Pad is in :mod:`netpass.ops.pad`: its
ONNX import builds Gathers and shape math from families above this one).

These ops carry the shape math of real models (``Reshape(x, Concat(Gather(ShapeOf(x)), ..))``)
and are what transpose and gather sinking move around, so their semantics follow OpenVINO's
exactly. Shape inputs are read as constants first and as partial values (ints and Dimensions)
second (:mod:`netpass.ops.shape_inputs`), so that static inputs give static shapes and dynamic
dims keep their symbols. One module per op or pair of close ops, each with its class, factory
and ONNX import and export rules.
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .batch_space import BatchToSpace, SpaceToBatch, batch_to_space, space_to_batch  # noqa: F401
from .broadcast import Broadcast, Tile, broadcast, tile  # noqa: F401
from .center_crop_pad import CenterCropPad, center_crop_pad  # noqa: F401
from .concat import Concat, concat  # noqa: F401
from .depth_space import DepthToSpace, SpaceToDepth, depth_to_space, space_to_depth  # noqa: F401
from .identity import Identity, identity  # noqa: F401
from .reshape import (  # noqa: F401
    Reshape,
    Squeeze,
    Squeeze15,
    Unsqueeze,
    reshape,
    squeeze,
    unsqueeze,
)
from .reverse import Reverse, reverse  # noqa: F401
from .reverse_sequence import ReverseSequence, reverse_sequence  # noqa: F401
from .roll import Roll, roll  # noqa: F401
from .shuffle_channels import ShuffleChannels, shuffle_channels  # noqa: F401
from .slice import Slice, StridedSlice, slice, strided_slice  # noqa: F401
from .slice_scatter import SliceScatter, slice_scatter  # noqa: F401
from .split import Split, VariadicSplit, split, variadic_split  # noqa: F401
from .transpose import Transpose, transpose  # noqa: F401

__all__ = ["reshape", "squeeze", "unsqueeze", "transpose", "concat", "split", "variadic_split",
           "slice", "strided_slice", "broadcast", "tile", "reverse", "depth_to_space",
           "space_to_depth", "center_crop_pad", "reverse_sequence", "roll", "batch_to_space",
           "space_to_batch", "shuffle_channels", "identity", "slice_scatter"]
