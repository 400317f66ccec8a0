"""``netpass benchmark MODEL --decode PROMPT_LEN:NEW_TOKENS``: greedy generation with a decoder
made stateful (its key/value cache held by the infer request), timed as a serving loop sees it:
time to first token (the prompt's prefill), per-token latency and tokens per second."""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from ..errors import NetpassError
from .common import SEED, UsageError, compile_for_device, device_label
from .output import percentiles


def parse_decode(text: str) -> tuple[int, int]:
    """``PROMPT_LEN:NEW_TOKENS`` -> two ints >= 1."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        prompt, new = int(parts[0]), int(parts[1])
    except ValueError:
        raise UsageError(f"--decode '{text}': expected PROMPT_LEN:NEW_TOKENS, two integers "
                         "(e.g. 128:128)") from None
    if prompt < 1 or new < 1:
        raise UsageError(f"--decode '{text}': needs PROMPT_LEN >= 1 and NEW_TOKENS >= 1")
    return prompt, new


def _stateful(model):
    """``model`` made stateful (its past/present pairs), or as it is when it already is."""
    from ..generation import stateful_decoder
    from ..ngraph_passes.common import find_kv_cache_pairs
    if find_kv_cache_pairs(model):
        return stateful_decoder(model, last_logits=True)
    if model.sinks:
        return model
    raise UsageError(f"--decode needs a decoder exported with its key/value cache "
                     f"(past_key_values.N.key / present.N.key) or a stateful model; inputs "
                     f"are {model.input_names}, outputs {model.output_names}")


def _vocabulary(cm) -> int:
    """Token ids the prompt may use: the logits' last dim when static, else 100."""
    port = next((p for p in cm.outputs if p.name == "logits"), cm.outputs[0])
    ps = port.partial_shape
    last = ps[len(ps) - 1] if ps.rank_is_static and len(ps) else None
    return last.min if last is not None and last.is_static else 100


def cmd_decode(args: argparse.Namespace) -> int:
    from .. import read_model
    from ..generation import GreedyDecoder
    if args.iterations < 1 or args.warmup < 0:
        raise UsageError(f"needs --iterations >= 1 and --warmup >= 0, got {args.iterations} "
                         f"and {args.warmup}")
    prompt_len, new_tokens = parse_decode(args.decode)
    model = _stateful(read_model(args.model))
    cm = compile_for_device(model, args)
    decoder = GreedyDecoder(cm)
    prompt = np.random.default_rng(SEED).integers(0, _vocabulary(cm), (1, prompt_len))
    for _ in range(args.warmup):  # kernels built on a request of their own
        decoder.generate(prompt, new_tokens)
    req = cm.create_infer_request()
    runs = [decoder.generate(prompt, new_tokens, req) for _ in range(args.iterations)]
    ttft = [g.time_to_first_token_s for g in runs]
    steps = [t for g in runs for t in g.token_latencies_s]
    variables = len(req.query_state())
    if not variables:
        raise NetpassError("the stateful model has no variables to decode with")
    print(f"decode {Path(str(args.model)).name}: {args.transformations} pipeline, "
          f"device {device_label(cm)}, {variables} variables")
    print(f"  prompt {prompt_len} tokens, {new_tokens} new tokens, batch 1, greedy, "
          f"{args.iterations} generation(s) after {args.warmup} warm-up")
    print(f"time to first token: {percentiles(ttft)}")
    if steps:
        print(f"per-token latency: {percentiles(steps)}, mean "
              f"{statistics.fmean(steps) * 1e3:.3f} ms")
        print(f"tokens/s: {len(steps) / sum(steps):.1f} (decode)")
        last = runs[-1].decode_stats
        n = len(runs[-1].token_latencies_s)
        if "kernels_enqueued" in last:
            state = last.get("state_allocations", 0)
            print(f"launches per token: {last['kernels_enqueued'] / n:.1f}, host waits per "
                  f"token: {last.get('host_waits', 0) / n:.2f}")
            print(f"allocations over the {n} decode steps: {state} for the variables "
                  f"({state / variables:.2f} per variable), {last.get('allocations', 0)} in all")
    print(f"tokens: {runs[-1].tokens[0][:16].tolist()}{' ...' if new_tokens > 16 else ''}")
    return 0
