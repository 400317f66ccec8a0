"""The commands' compile progress line (cli.output.CompileProgress, compile_model's hook)."""
from __future__ import annotations

import io
import time

from netpass.cli import output
from netpass.cli.output import CompileProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_compile_shows_its_stage_in_place_on_a_terminal(monkeypatch):
    monkeypatch.setattr(output, "LONG_COMPILE_S", 0.05)
    term = Terminal()
    progress = CompileProgress(term)
    progress("transformations", 2, 7)
    time.sleep(0.3)  # the notice comes from a timer: the stage started before it
    progress("legacy passes", 5, 7)
    progress("done", 7, 7)
    progress.close()
    text = term.getvalue()
    assert "\rcompiling: transformations (2/7, " in text and "\rcompiling: legacy passes (5/7, " in text
    assert text.rstrip("\n").split("\r")[-1].startswith("compiled in ") and text.endswith("\n")


def test_a_short_compile_prints_nothing():
    term = Terminal()
    progress = CompileProgress(term)
    progress("reading", 1, 7)
    progress("done", 7, 7)
    progress.close()
    assert term.getvalue() == ""


def test_piped_output_waits_longer_and_prints_lines(monkeypatch):
    monkeypatch.setattr(output, "LONG_RUN_S", 0.05)
    pipe = io.StringIO()
    progress = CompileProgress(pipe)
    progress("legacy passes", 5, 7)
    time.sleep(0.3)
    progress("runtime program", 7, 7)
    progress.close()
    lines = pipe.getvalue().splitlines()
    assert lines[0].startswith("compiling: legacy passes (5/7, ")
    assert lines[1].startswith("compiling: runtime program (7/7, ") and lines[2].startswith("compiled in ")


def test_a_failed_compile_leaves_no_closing_line(monkeypatch):
    monkeypatch.setattr(output, "LONG_RUN_S", 0.05)
    pipe = io.StringIO()
    progress = CompileProgress(pipe)
    progress("legacy passes", 5, 7)
    time.sleep(0.3)
    progress.close(ok=False)
    lines = pipe.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("compiling: legacy passes")
