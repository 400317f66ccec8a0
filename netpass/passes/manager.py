"""Manager: runs registered passes in order, with per-pass validation, tracing and profiling.

Environment (read at each ``run_passes``):

- ``NETPASS_VISUALIZE_TRACING=dir[:filters]`` / ``NETPASS_SERIALIZE_TRACING=dir[:filters]``:
  after every pass write ``<model>_<NNN>_<pass>.svg`` (VisualizeTree) / ``.xml`` + ``.bin``
  (Serialize) into ``dir``; ``filters`` is a comma list, and only passes whose name contains
  one of them (substring) are dumped. ``NNN`` is a process-wide counter shared by all
  Managers, so nested Managers' dumps interleave in run order. OpenVINO's
  ``OV_ENABLE_VISUALIZE_TRACING`` / ``OV_ENABLE_SERIALIZE_TRACING`` are accepted too
  (true/1/on: all passes into the current folder; otherwise a filter list).
- ``NETPASS_PROFILE_PASS=1`` (or ``OV_ENABLE_PROFILE_PASS``): each pass's time, ``+``
  (changed the model) / ``-`` and the time its validation took, on stderr; set to a file path,
  lines ``t;<pass>;<manager>;<ns>;<0|1>`` (the pass), ``v;<pass>;<manager>;<ns>`` (its
  validation) and ``m;<manager>;<ns>;<0|1>`` are appended to it.

Per-pass validation (:mod:`netpass.passes.validation`) checks what each pass changed, from the
change log the graph's mutation primitives fill while the pass runs.
"""
from __future__ import annotations

import itertools
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..core.changes import ChangeLog, tracking
from .base import ModelPass, PassBase
from .graph_rewrite import MatcherPass, wrap_matcher_pass
from .pass_config import PassConfig
from .validation import Interface, check_interface, validate_changes, validate_model

if TYPE_CHECKING:
    from ..core.model import Model

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("", "0", "false", "off", "no")

# Process-wide dump counter (OpenVINO shares one across all managers as well).
_dump_counter = itertools.count()


class Validate(ModelPass):
    """Re-infers every node's types and shapes and lints the graph; never reports a change."""

    def run_on_model(self, model: Model) -> bool:
        validate_model(model)
        return False


def _trace_spec(names: tuple[str, str]) -> tuple[Path, list[str]] | None:
    """(folder, filters) from ``NETPASS_*`` = ``dir[:a,b]`` or OpenVINO's bool/filter form."""
    own, ov = names
    value = os.environ.get(own, "").strip()
    if value:
        folder, _, filters = value.partition(":")
        return Path(folder or "."), [f for f in filters.split(",") if f]
    value = os.environ.get(ov, "").strip()
    if value.lower() in _FALSE:
        return None
    if value.lower() in _TRUE:
        return Path("."), []
    return Path("."), [f for f in value.split(",") if f]


def _wanted(spec: tuple[Path, list[str]] | None, pass_name: str) -> bool:
    if spec is None:
        return False
    filters = spec[1]
    return not filters or any(f in pass_name for f in filters)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text) or "model"


def dump_svg(model: Model, path: Path) -> None:
    """Tracing writer for ``NETPASS_VISUALIZE_TRACING`` (VisualizeTree, imported lazily)."""
    from .visualize import VisualizeTree
    VisualizeTree(str(path)).run_on_model(model)


def dump_xml(model: Model, path: Path) -> None:
    """Tracing writer for ``NETPASS_SERIALIZE_TRACING`` (Serialize, imported lazily)."""
    from .serialize import Serialize
    Serialize(str(path), str(path.with_suffix(".bin"))).run_on_model(model)


class _Profiler:
    """``NETPASS_PROFILE_PASS``: per-pass times to stderr or appended to a file."""

    def __init__(self, manager_name: str) -> None:
        value = os.environ.get("NETPASS_PROFILE_PASS", "").strip() or \
            os.environ.get("OV_ENABLE_PROFILE_PASS", "").strip()
        self.on = value.lower() not in _FALSE
        self.path = None if value.lower() in _TRUE or not self.on else value
        self.manager = manager_name
        self.lines: list[str] = []
        if self.on and self.path is None:
            print(f"PassManager started: {manager_name}", file=sys.stderr)

    def pass_done(self, name: str, seconds: float, changed: bool,
                  validation: float | None) -> None:
        """One pass: its own time, and its validation's (None when not validated)."""
        if self.path is None:
            checked = "" if validation is None else f" (validation {validation * 1e3:.3f}ms)"
            print(f"{name} {seconds * 1e3:.3f}ms {'+' if changed else '-'}{checked}",
                  file=sys.stderr)
            return
        self.lines.append(f"t;{name};{self.manager};{int(seconds * 1e9)};{int(changed)}")
        if validation is not None:
            self.lines.append(f"v;{name};{self.manager};{int(validation * 1e9)}")

    def finish(self, seconds: float, changed: bool) -> None:
        if self.path is None:
            print(f"PassManager finished: {self.manager} {seconds * 1e3:.3f}ms "
                  f"{'+' if changed else '-'}", file=sys.stderr)
            return
        self.lines.append(f"m;{self.manager};{int(seconds * 1e9)};{int(changed)}")
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("\n".join(self.lines) + "\n")


class Manager:
    """Runs passes in registration order over a model.

    ``Manager(pass_config)`` shares a PassConfig (how a composite ModelPass makes its nested
    passes obey the outer disables and callbacks). Per-pass validation is on by default; like
    OpenVINO's, :meth:`set_per_pass_validation` affects passes registered after the call.
    A validated pass runs with a change log; afterwards what it changed is re-inferred and
    linted, and the model's inputs and outputs are compared with those before it (see
    :mod:`netpass.passes.validation`); inside its matcher callbacks, one returning True without
    changing anything is an error.
    """

    def __init__(self, pass_config: PassConfig | None = None, name: str = "Manager") -> None:
        self._config = pass_config if pass_config is not None else PassConfig()
        self._passes: list[tuple[PassBase, bool]] = []
        self._validate = True
        self.name = name

    def get_pass_config(self) -> PassConfig:
        return self._config

    @property
    def pass_config(self) -> PassConfig:
        return self._config

    @property
    def passes(self) -> list[PassBase]:
        return [p for p, _ in self._passes]

    def set_per_pass_validation(self, enabled: bool) -> None:
        self._validate = bool(enabled)

    def register_pass(self, pass_: Any, *args: Any, enabled: bool = True, **kwargs: Any) -> Any:
        """Register a pass instance or class (built with ``args``/``kwargs``); returns the
        instance. ``enabled=False`` registers it disabled unless the config force-enables it."""
        if isinstance(pass_, type):
            pass_ = pass_(*args, **kwargs)
        if not isinstance(pass_, (ModelPass, MatcherPass)):
            raise TypeError("Manager.register_pass expects a ModelPass or MatcherPass, got "
                            f"{pass_!r}")
        pass_.set_pass_config(self._config)
        if not enabled:
            self._config.disable_by_default(type(pass_))
        self._passes.append((pass_, self._validate))
        return pass_

    def run_passes(self, model: Model) -> bool:
        """Run every enabled pass; True when any of them changed the model."""
        config = self._config
        visualize = _trace_spec(("NETPASS_VISUALIZE_TRACING", "OV_ENABLE_VISUALIZE_TRACING"))
        serialize = _trace_spec(("NETPASS_SERIALIZE_TRACING", "OV_ENABLE_SERIALIZE_TRACING"))
        profiler = _Profiler(self.name)
        start = time.perf_counter()
        changed = False
        for p, validate in self._passes:
            if config.is_disabled(type(p)):
                continue
            if p.requires_static_shape and model.is_dynamic():
                continue
            runner = wrap_matcher_pass(p) if isinstance(p, MatcherPass) else cast(ModelPass, p)
            if validate:
                applied, ran, checked = self._run_validated(p, runner, model)
            else:
                t0 = time.perf_counter()
                applied = bool(runner.run_on_model(model))
                ran, checked = time.perf_counter() - t0, None
                log = tracking.log
                if applied and p.changes_model_io and log is not None:
                    log.io_changed_by = log.io_changed_by or p.name
            if profiler.on:
                profiler.pass_done(p.name, ran, applied, checked)
            if visualize is not None or serialize is not None:
                self._trace(model, p.name, visualize, serialize)
            changed |= applied
        if profiler.on:
            profiler.finish(time.perf_counter() - start, changed)
        return changed

    @staticmethod
    def _run_validated(p: PassBase, runner: Any, model: Model) -> tuple[bool, float, float]:
        """Run ``runner`` (``p``, or the GraphRewrite holding it) with a change log, then
        validate what it changed; returns (changed, pass seconds, validation seconds)."""
        before = Interface.of(model)
        log = ChangeLog().start()
        try:
            t0 = time.perf_counter()
            applied = bool(runner.run_on_model(model))
            t1 = time.perf_counter()
            if applied and p.changes_model_io:
                log.io_changed_by = log.io_changed_by or p.name
            if applied or log:
                validate_changes(p.name, model, log)
            if log.io_changed_by is None:
                check_interface(p.name, before, model)
            log.settled()
        finally:
            log.stop()
        return applied, t1 - t0, time.perf_counter() - t1

    @staticmethod
    def _trace(model: Model, pass_name: str, visualize: Any, serialize: Any) -> None:
        base = f"{_safe(model.friendly_name)}_{next(_dump_counter):03d}_{_safe(pass_name)}"
        if _wanted(visualize, pass_name):
            visualize[0].mkdir(parents=True, exist_ok=True)
            dump_svg(model, visualize[0] / f"{base}.svg")
        if _wanted(serialize, pass_name):
            serialize[0].mkdir(parents=True, exist_ok=True)
            dump_xml(model, serialize[0] / f"{base}.xml")

    def __repr__(self) -> str:
        return f"<Manager '{self.name}': {[p.name for p, _ in self._passes]}>"


__all__ = ["Manager", "Validate", "validate_model"]
