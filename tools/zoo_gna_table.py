"""What the GNA pipeline leaves inside each transformers-zoo model that GNA cannot run, and
how much the pipeline moves the outputs: the table of ``docs/zoo-gna.md``.

Per (model, exporter) of ``tools/export_zoo.py``: the export read by netpass, given the
export's static shapes (GNA compiles static models), run through ``GnaTransformationsPipeline``
and ``split_pre_post_processing`` (edge Transposes and Gathers go to the host); then the op
types left in the main graph that GNA could not run, counted, and the relative L2 difference
of the reference evaluator's outputs before and after the pipeline (on the same seeded
inputs; the largest over the outputs).

Which ops GNA runs: ``GNA_OPS`` below, the layer kinds of OpenVINO's GNA plugin (affine and
convolution layers, eltwise, its piecewise-linear activations, flat-memory Concat/Split/
Crop/Reshape) and Transposes that ``is_transpose_supported``; a MatMul only with a constant
operand (an affine layer). ``python tools/zoo_gna_table.py --out docs/zoo-gna.md`` rewrites
the table; ``tests/zoo/test_transformers_zoo.py`` checks it against the code.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# This checkout's netpass, not an installed one (the tool runs from any worktree).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import export_zoo

GNA_OPS = frozenset({
    "Parameter", "Result", "Constant", "GNAConvolution", "GNAMaxPool", "FullyConnected",
    "Add", "Subtract", "Multiply", "Eltwise", "ScaleShiftIE", "PowerIE", "Power", "Relu",
    "ReLUIE", "Sigmoid", "Tanh", "Clamp", "Abs", "Sign", "Exp", "Log", "SoftSign", "PRelu",
    "Reshape", "Squeeze", "Unsqueeze", "Concat", "Split", "VariadicSplit", "CropIE"})
TITLE = "# GNA: what the pipeline leaves in the transformers zoo"


@dataclass(frozen=True)
class Row:
    model: str
    exporter: str
    ops: int                       # ops in the main graph, constants and I/O excluded
    left: tuple[tuple[str, int], ...]   # op type -> count GNA cannot run, most first
    rel_l2: float                  # outputs after the pipeline vs before

    def left_text(self) -> str:
        return ", ".join(f"{t} x{n}" for t, n in self.left) or "nothing"


def gna_cannot_run(node) -> bool:
    """True when GNA has no layer for ``node`` as it is (see the module's docstring)."""
    from netpass.ngraph_passes.gna import is_transpose_supported
    kind = node.type_name
    if kind == "Transpose":
        shape = node.input_value(0).partial_shape
        return not (shape.is_static and is_transpose_supported(shape.to_shape()))
    if kind == "MatMul":
        return not any(v.node.type_name == "Constant" for v in node.input_values())
    return kind not in GNA_OPS


def analyse(spec: export_zoo.ZooSpec, exporter: str, path: Path) -> Row:
    """The row of one exported model (``path``)."""
    import netpass
    from netpass.ngraph_passes.gna import GnaTransformationsPipeline
    from netpass.passes import Manager
    from netpass.prepost import split_pre_post_processing
    model = netpass.read_model(path)
    feeds = export_zoo.feeds(spec.domain, spec.export_sizes(), np.random.default_rng(0))
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    before = netpass.reference.infer(model, feeds)
    manager = Manager()
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)
    after = netpass.reference.infer(model, feeds)
    diff = max(export_zoo.rel_l2(after[k], v) for k, v in before.items())
    split_pre_post_processing(model)
    ops = [n for n in model.get_ordered_ops()
           if n.type_name not in ("Parameter", "Result", "Constant")]
    left = Counter(n.type_name for n in ops if gna_cannot_run(n))
    return Row(spec.name, exporter, len(ops),
               tuple(sorted(left.items(), key=lambda kv: (-kv[1], kv[0]))), diff)


def exporter_versions() -> str:
    """The versions the exports depend on, as the page records them."""
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package).split("+")[0]
        except PackageNotFoundError:
            return "missing"
    return ", ".join(f"{p} {of(p)}" for p in ("torch", "transformers", "onnxscript"))


def render(rows: Sequence[Row]) -> str:
    """The markdown page: what the table is, then one line per (model, exporter)."""
    intro = ("Written by `python tools/zoo_gna_table.py --out docs/zoo-gna.md`; "
             "`tests/zoo/test_transformers_zoo.py` checks the op counts against the code "
             "when it runs with the exporters' versions below (other versions export other "
             "graphs). How it is measured: `tools/zoo_gna_table.py`'s docstring. The models "
             "are `tools/export_zoo.py`'s (tiny random-weight transformers configs), at "
             "their export shapes.")
    lines = [TITLE, "", intro, "", f"Exported with: {exporter_versions()}.", "",
             "| model | exporter | ops inside | GNA cannot run | rel. L2 after/before |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model} | {r.exporter} | {r.ops} | {r.left_text()} | {r.rel_l2:.1e} |")
    return "\n".join(lines) + "\n"


def parse(markdown: str) -> tuple[str, dict[tuple[str, str], tuple[int, str]]]:
    """The exporters' versions and (model, exporter) -> (ops inside, GNA-cannot-run text)
    from a rendered page."""
    versions, rows = "", {}
    for line in markdown.splitlines():
        if line.startswith("Exported with: "):
            versions = line[len("Exported with: "):].rstrip(".")
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[2].isdigit():
            rows[cells[0], cells[1]] = (int(cells[2]), cells[3])
    return versions, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="markdown file to write (default: print)")
    parser.add_argument("--models", nargs="+", choices=list(export_zoo.SPECS))
    parser.add_argument("--zoo", type=Path, help="folder of tools/export_zoo.py exports to use")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models or list(export_zoo.SPECS):
            for exporter in export_zoo.EXPORTERS:
                if (name, exporter) in export_zoo.EXPORT_FAILURES:
                    continue
                path = args.zoo / f"{name}.{exporter}.onnx" if args.zoo else None
                if path is None or not path.exists():
                    path = export_zoo.export(export_zoo.SPECS[name], exporter, Path(tmp))
                rows.append(analyse(export_zoo.SPECS[name], exporter, path))
                print(f"{name}.{exporter}: {rows[-1].left_text()}", file=sys.stderr)
    text = render(rows)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
