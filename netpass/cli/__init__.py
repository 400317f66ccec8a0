"""The ``netpass`` command line (DESIGN.md section 10; docs/cli.md): one module per subcommand
(:mod:`.run`, :mod:`.convert` with visualize, :mod:`.info` with passes and devices,
:mod:`.benchmark`), the parser and ``main`` in :mod:`.main`.

    netpass run MODEL [--input NAME=file.npy] [--shape NAME=1,3,224,224] [--device D] ...
    netpass convert MODEL -o out.xml|out.onnx [--dump-dir DIR] [--transformations T]
    netpass visualize MODEL -o graph.svg [--after-pipeline] [--transformations T]
    netpass passes
    netpass devices
    netpass benchmark MODEL --shapes x=1,8,64 [x=1,9,64 ...] [--sequence x:1:1:64] ...

Every subcommand prints plain text on stdout. A failure a user can cause (a ``NetpassError``,
a file that cannot be read or written, a bad option value) prints one line
``error: <message> (hint: <hint>)`` on stderr and exits with 1; ``NETPASS_DEBUG=1`` shows the
traceback instead.
"""
from __future__ import annotations

from .inputs import make_inputs
from .main import build_parser, main
from .output import Progress, format_stats

__all__ = ["main", "build_parser", "make_inputs", "format_stats", "Progress"]
