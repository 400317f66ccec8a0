"""Transformations (OpenVINO's names): ``common`` (any target), ``transpose_sinking`` and
``gna`` (the GNA layout pipeline, ``GnaTransformationsPipeline``)."""
from __future__ import annotations

from . import common, gna, transpose_sinking

__all__ = ["common", "gna", "transpose_sinking"]
