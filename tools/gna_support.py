"""GNA compatibility of the examples and the zoo models: what is left inside the graph after
``GnaTransformationsPipeline`` + ``split_pre_post_processing`` that GNA cannot run, and why
(``netpass.ngraph_passes.gna.check_support``, for GNA 3.0 and 3.5).

GNA runs static shapes only, so every model is first fixed to one input shape: the examples to
the shapes in ``EXAMPLE_SHAPES``, the zoo models (``tests/models/zoo.py``, exported with torch at
their first opset) to their first test case with batch 1.

    python tools/gna_support.py                           # print the tables
    python tools/gna_support.py --write docs/gna-support.md
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "models")]

from netpass import read_model  # noqa: E402 (after the path set-up above)
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, check_support  # noqa: E402
from netpass.prepost import split_pre_post_processing  # noqa: E402

EXAMPLE_SHAPES = {
    "kws_cnn": {"input": [1, 1, 49, 10]},
    "lstm_speech": {"features": [1, 16, 40]},
    "transformer_block": {"x": [1, 16, 64]},
    "transpose_heavy": {"x": [1, 16, 8, 8]},
}

HEADER = """# GNA compatibility of the examples and the zoo models

What `GnaTransformationsPipeline` + `split_pre_post_processing` leave inside the graph that GNA
cannot run, per model, with the rule of OpenVINO's GNA `Limitations` each op breaks
(`netpass.ngraph_passes.gna.check_support`; `netpass check --target gna MODEL` prints the same
for one model). Every model is fixed to one static input shape first (GNA runs static shapes
only): the examples to the shapes named below, the zoo models (`tests/models/zoo.py`) to their
first test case with batch 1. "runs" means that GNA target runs the op. Regenerate with
`python tools/gna_support.py --write docs/gna-support.md`.

What the rules are, and where they come from, is in the docstring of
`netpass/ngraph_passes/gna/support.py` and in docs/transformations.md ("GNA support check").

In short: `gru_classifier` and `shared_outputs` run entirely on GNA, `crnn`, `bilstm` and the
LSTM example all but their (Log)Softmax head. What is left most often is what GNA has no layer
for: ReduceMean (layer norms, global pooling), Softmax/LogSoftmax, Erf (GELU), HSwish,
Interpolate, a transposed convolution, the transformers' token-embedding Gathers (a table
lookup by the input, not a layout permutation) with their i64 token inputs, boolean masks and
Select. MatMuls over more than 8 vectors (a sequence of 10 or more tokens at once) break the
affine batch limit. Between the attention MatMuls (both inputs activations, so no weights to
fold into) the heads' layout permutations stay as flat Gathers (`transformer_block`, BERT, the
GPT-2 models); in the SDPA decoder they stay as Transposes. On GNA 3.0 most 2-D
convolutions of these small models break the CNN2D limits (inputs below 16x16, fewer than 8
input channels, padding), which GNA 3.5 lifts; the TDNN's dilated 1-D convolutions run on
neither. Channel Splits/Concats along the last axis (`transpose_heavy`, a GPT-2's fused QKV
split) break the first-non-1-axis rule.
"""


def _report(model) -> list[tuple[str, str, str]]:
    """(op type, GNA 3.0 verdict, GNA 3.5 verdict) of every op GNA 3.0 or 3.5 cannot run."""
    rows = []
    for a, b in zip(check_support(model, "3.0"), check_support(model, "3.5")):
        if not (a.supported and b.supported):
            rows.append((a.type_name, a.rule or "runs", b.rule or "runs"))
    return rows


def _section(title: str, what: str, model) -> str:
    GnaTransformationsPipeline().run_on_model(model)
    split_pre_post_processing(model)
    inside = [n for n in model.get_ordered_ops()
              if n.type_name not in ("Parameter", "Constant", "Result")]
    rows = Counter(_report(model))
    lines = [f"## {title}", "", what, "",
             (f"{len(inside)} ops inside after the pipeline, "
              f"{sum(rows.values())} of them not run by GNA 3.0 or 3.5.")]
    if rows:
        lines += ["", "| op | count | GNA 3.0 | GNA 3.5 |", "|---|---|---|---|"]
        for (op, r30, r35), count in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"| {op} | {count} | {r30} | {r35} |")
    return "\n".join(lines) + "\n"


def _examples() -> list[str]:
    out = []
    for name, shapes in EXAMPLE_SHAPES.items():
        model = read_model(str(ROOT / "examples" / f"{name}.onnx"))
        model.reshape(shapes)
        inputs = ", ".join(f"`{k}` {v}" for k, v in shapes.items())
        out.append(_section(f"Example `{name}`", f"`examples/{name}.onnx`, inputs {inputs}.",
                            model))
    return out


def _zoo() -> list[str]:
    from zoo import ZOO, export
    out = []
    for entry in ZOO.values():
        if entry.unsupported:
            continue
        case = dict(entry.cases[0], b=1)  # GNA runs one sample at a time
        shapes = {name: list(t.shape) for name, t in zip(entry.inputs, entry.example(case))}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{entry.name}.onnx"
            path.write_bytes(export(entry, entry.opsets[0]))
            model = read_model(str(path))
        model.reshape(shapes)
        inputs = ", ".join(f"`{k}` {v}" for k, v in shapes.items())
        out.append(_section(f"Zoo `{entry.name}`",
                            f"{entry.kind}, opset {entry.opsets[0]}, inputs {inputs}.", model))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="PATH", help="write the Markdown page to PATH")
    args = parser.parse_args(argv)
    text = "\n".join([HEADER, *_examples(), *_zoo()])
    if args.write:
        Path(args.write).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
