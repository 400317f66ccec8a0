"""Pass base classes: PassBase (name, PassConfig, transformation callback) and ModelPass."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import NetpassError, PassError
from .pass_config import PassConfig

if TYPE_CHECKING:
    from ..core.model import Model


class PassBase:
    """Common part of every pass: a name (default: class name) and the PassConfig it obeys.

    Each pass starts with a private PassConfig; a Manager (or a GraphRewrite holding the pass)
    installs the shared one.
    """

    # Skip this pass on models with dynamic shapes (OpenVINO's REQUIRE_STATIC_SHAPE).
    requires_static_shape: ClassVar[bool] = False
    # True for a pass that changes the model's inputs or outputs on purpose (their names,
    # element types, shapes or number: removing an input Convert, making a model stateful).
    # Per-pass validation otherwise raises PassValidationError when they change.
    changes_model_io: ClassVar[bool] = False

    def __init__(self) -> None:
        self._name: str | None = None
        self.pass_config = PassConfig()

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

    def get_name(self) -> str:
        return self.name

    def set_name(self, name: str) -> None:
        self._name = name

    def get_pass_config(self) -> PassConfig:
        return self.pass_config

    def set_pass_config(self, config: PassConfig) -> None:
        """Use ``config`` from now on; passes this pass disabled in its own config (for
        instance in its constructor) stay disabled unless ``config`` force-enables them."""
        if config is not self.pass_config:
            config.add_disabled_passes(self.pass_config)
        self.pass_config = config

    def transformation_callback(self, node: Any) -> bool:
        """The PassConfig verdict for ``node``: True means *do not transform it*."""
        return self.pass_config.get_callback(type(self))(node)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} '{self.name}'>"


def _guard(run: Callable[..., Any]) -> Callable[..., Any]:
    """Refuse re-entering the same ``run_on_model`` on the same pass (a pass that ends up
    registering itself in its own nested Manager would otherwise recurse forever), and raise
    any exception from inside as a :class:`PassError` naming the pass."""

    @functools.wraps(run)
    def run_on_model(self: ModelPass, model: Model) -> bool:
        running = self.__dict__.get("_running")
        if running is None:
            running = self.__dict__["_running"] = set()
        if run in running:
            raise NetpassError(f"cycle detected: pass '{self.name}' re-entered run_on_model")
        running.add(run)
        try:
            changed: bool = run(self, model)
            return changed
        except PassError:
            raise  # a nested pass already named itself
        except Exception as e:
            raise PassError(self.name, None, e) from e
        finally:
            running.discard(run)

    run_on_model._netpass_guarded = True  # type: ignore[attr-defined]
    return run_on_model


class ModelPass(PassBase):
    """A pass over a whole model; ``run_on_model`` returns True when it changed the model.

    A ModelPass can hold other passes: build ``Manager(self.get_pass_config())`` in
    ``run_on_model`` so the nested passes obey the same disabled set and callbacks.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run_on_model")
        if run is not None and not getattr(run, "_netpass_guarded", False):
            cls.run_on_model = _guard(run)  # type: ignore[method-assign]

    def run_on_model(self, model: Model) -> bool:
        raise NotImplementedError(f"{self.name} does not implement run_on_model")
