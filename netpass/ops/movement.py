"""(placeholder: filled by the op family's implementation)"""
from __future__ import annotations

__all__: list[str] = []
