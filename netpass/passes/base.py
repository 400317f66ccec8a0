"""Pass base classes: PassBase (name, PassConfig, transformation callback) and ModelPass."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.model import Model


class PassBase:
    """Common part of every pass: a name (default: class name) and the PassConfig it obeys."""

    def __init__(self) -> None:
        from .pass_config import PassConfig
        self._name: str | None = None
        self.pass_config = PassConfig()

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

    def get_name(self) -> str:
        return self.name

    def set_name(self, name: str) -> None:
        self._name = name

    def get_pass_config(self):
        return self.pass_config

    def set_pass_config(self, config) -> None:
        self.pass_config = config

    def transformation_callback(self, node: Any) -> bool:
        """The PassConfig verdict for ``node``: True means *do not transform it*."""
        return self.pass_config.get_callback(type(self))(node)


class ModelPass(PassBase):
    """A pass over a whole model; ``run_on_model`` returns True when it changed the model."""

    def run_on_model(self, model: "Model") -> bool:
        raise NotImplementedError(f"{self.name} does not implement run_on_model")
