"""What the subcommands print: values, runtime counters, percentiles, and progress for long
work."""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

SHOWN_VALUES = 5


# Runs longer than this show progress on stderr even when it is not a terminal.
LONG_RUN_S = 5.0
# Compiles longer than this show their stage on stderr.
LONG_COMPILE_S = 1.0


def format_values(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)[:SHOWN_VALUES]
    if arr.dtype.kind == "f":
        vals = ", ".join(f"{v:.6g}" for v in flat)
    else:
        vals = ", ".join(str(v) for v in flat)
    more = ", ..." if arr.size > SHOWN_VALUES else ""
    return f"[{vals}{more}]"


def _format_stat(key: str, value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value * 1e3:.3f}ms" if key.endswith("_s") else f"{value:.4g}"
    return str(value)


def format_stats(stats: dict[str, Any], columns: int = 3) -> list[str]:
    """``req.stats`` as aligned ``key value`` cells, ``columns`` to a line (times in ms)."""
    cells = [(k, _format_stat(k, v)) for k, v in stats.items()]
    if not cells:
        return ["  (none)"]
    kw = max(len(k) for k, _ in cells)
    vw = max(len(v) for _, v in cells)
    lines = []
    for i in range(0, len(cells), columns):
        row = cells[i:i + columns]
        lines.append("  " + "   ".join(f"{k:<{kw}} {v:>{vw}}" for k, v in row).rstrip())
    return lines


def format_host_fallbacks(stats: dict[str, Any]) -> str:
    """The ops that ran on the host for want of a device kernel: ``Kind xN, ...`` (primitive
    runs over all infers), or ``none``."""
    kinds = stats.get("host_fallback_kinds") or {}
    if not kinds:
        return "none"
    return ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def percentiles(times_s: Sequence[float]) -> str:
    p50, p90, p99 = np.percentile(np.asarray(times_s) * 1e3, [50, 90, 99])
    return f"p50 {p50:.3f} ms, p90 {p90:.3f} ms, p99 {p99:.3f} ms"


class Progress:
    """A one-line progress bar on stderr: redrawn in place on a terminal; elsewhere a line
    every 10% once the run has lasted ``LONG_RUN_S``. Prints nothing for short piped runs."""

    def __init__(self, total: int, label: str, stream: Any = None) -> None:
        self.total, self.label = max(total, 1), label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = self.last = time.perf_counter()
        self.done = 0
        self.next_decile = 1
        self.drawn = False

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.tty:
            if now - self.last >= 0.1 or self.done == self.total:
                self.last = now
                filled = 30 * self.done // self.total
                bar = "#" * filled + "." * (30 - filled)
                # Marked before drawing, so that a Ctrl-C between the two still ends the line.
                self.drawn = True
                self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
                self.stream.flush()
        elif now - self.start >= LONG_RUN_S and 10 * self.done >= self.next_decile * self.total:
            self.next_decile = 10 * self.done // self.total + 1
            self.stream.write(f"{self.label}: {100 * self.done // self.total}% "
                              f"({self.done}/{self.total}, {now - self.start:.0f} s)\n")
            self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


class CompileProgress:
    """``compile_model``'s progress hook for the commands: once a compile has lasted
    ``LONG_COMPILE_S`` on a terminal (``LONG_RUN_S`` elsewhere), its current stage on stderr
    (``compiling: legacy passes (5/7, 1.4 s)``), then each next one: redrawn in place on a
    terminal, a line each elsewhere; ``close(ok)`` ends with ``compiled in N s``. Prints
    nothing for shorter compiles."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self.stage: tuple[str, int, int] | None = None
        self.shown = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(LONG_COMPILE_S if self.tty else LONG_RUN_S, self._show)
        self._timer.daemon = True
        self._timer.start()

    def __call__(self, stage: str, step: int, total: int) -> None:
        with self._lock:
            self.stage = (stage, step, total)
            if self.shown and stage != "done":
                self._write()

    def _show(self) -> None:
        with self._lock:
            self.shown = True
            if self.stage is not None and self.stage[0] != "done":
                self._write()

    def _write(self) -> None:
        if self.stage is None:  # (callers write after a stage was set)
            return
        stage, step, total = self.stage
        line = f"compiling: {stage} ({step}/{total}, {time.perf_counter() - self.start:.1f} s)"
        self.stream.write(f"\r{line}\033[K" if self.tty else line + "\n")
        self.stream.flush()

    def close(self, ok: bool = True) -> None:
        self._timer.cancel()
        with self._lock:
            if self.shown:
                end = f"compiled in {time.perf_counter() - self.start:.1f} s" if ok else ""
                if self.tty:
                    self.stream.write(f"\r{end}\033[K" + ("\n" if ok else ""))
                elif ok:
                    self.stream.write(end + "\n")
                self.stream.flush()
            self.shown = False
