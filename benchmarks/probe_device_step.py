"""Probe: the device's own time for a decode step and a prompt, with the host taken out.

    python benchmarks/probe_device_step.py [--arch gpt2] [--onnx /tmp/gpt2.onnx] [--config K=V]
                                           [--next-token] [--decode-splits N] [--decode-items N]

A spin kernel (a loop on NVIDIA's ``%globaltimer``; a counted loop elsewhere) holds the
request's in-order queue while the host enqueues a whole step behind it, so the step then runs
at the device's pace: device time = wall(spin + step) - wall(spin alone). Beside it the step's
and the prompt's plain wall time (a prompt after ``reset_state``: the time to first token):
either is host-bound where its wall exceeds its device time. Then the
device's cost of back-to-back launches of a tiny kernel and of a kernel reading 9.4 MB (one
buffer, L2-resident after the first launch), queued the same way. The model is
``bench_decode``'s (GPT-2 small's config by default), prompt 128. ``--decode-splits`` and
``--decode-items`` set the decode attention's ``MAX_SPLITS`` and work-group size (``DLS``,
its key chunk twice that) for the run, to compare them.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_decode import _config, load_or_export, step_feeds  # noqa: E402
from bench_gemv_hbm import behind_spin, spin_kernel  # noqa: E402

import netpass  # noqa: E402
from netpass.generation import stateful_decoder, with_next_token  # noqa: E402
from netpass.runtime.kernels import decode  # noqa: E402

TINY = r"""
__kernel void tiny(__global float* a, const int n) {
  const int i = get_global_id(0);
  if (i < n) a[i] = a[i] * 1.0001f + 1.0f;
}
__kernel void stream(__global const float4* w, __global float* y, const int k4) {
  const int c = get_global_id(0) / 16, lane = get_global_id(0) % 16;
  float4 s = (float4)(0.0f);
  for (int q = lane; q < k4; q += 16) s += w[c * k4 + q];
  if (lane == 0) y[c] = s.x + s.y + s.z + s.w;
}"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--onnx", type=Path)
    ap.add_argument("--device", default="GPU")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--next-token", action="store_true",
                    help="the model with_next_token makes (the device-token loop's)")
    ap.add_argument("--decode-splits", type=int, help="kernels.decode.MAX_SPLITS for this run")
    ap.add_argument("--decode-items", type=int, help="kernels.decode.DLS for this run")
    args = ap.parse_args()
    if args.decode_splits:
        decode.MAX_SPLITS = args.decode_splits
    if args.decode_items:
        decode.DLS, decode.CHUNK = args.decode_items, 2 * args.decode_items
    dec = load_or_export(args.onnx, False, args.arch)
    model = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    if args.next_token:
        model = with_next_token(model)
    cm = netpass.compile_model(model, args.device,
                               {"TRANSFORMATIONS": "NONE", **_config(args.config)})
    if cm.runtime is None:
        raise SystemExit("the probe needs the OpenCL runtime")
    req = cm.create_infer_request()
    net = req._runtime_request.network
    q, cl = net.queue, net.engine.cl
    spin, _spun = spin_kernel(cl, q.context, net.engine.device)
    prog = cl.Program(q.context, TINY).build()

    spin_s = behind_spin(cl, q, spin, lambda: None, 9)
    prompt = np.random.default_rng(0).integers(0, dec.vocab, (1, 128))
    state = {"out": None, "past": 0}

    def step() -> None:
        ids = state["out"]["logits"][:, -1].argmax(-1)[:, None]
        state["out"] = req.infer(step_feeds(ids, state["past"]))
        state["past"] += 1

    for _ in range(2):  # (plans, tapes and steady steps made)
        req.reset_state()
        state["out"], state["past"] = req.infer(step_feeds(prompt, 0)), prompt.shape[1]
        for _ in range(40):
            step()
    walls = []
    for _ in range(30):
        t = time.perf_counter()
        step()
        walls.append(time.perf_counter() - t)
    device = behind_spin(cl, q, spin, step, 30) - spin_s

    def prompt_only() -> None:
        req.reset_state()
        req.infer(step_feeds(prompt, 0))
    prompt_device = behind_spin(cl, q, spin, prompt_only, 9) - spin_s
    prompt_walls = []
    for _ in range(9):
        req.reset_state()
        t = time.perf_counter()
        req.infer(step_feeds(prompt, 0))
        prompt_walls.append(time.perf_counter() - t)
    print(f"{args.arch} on {net.engine.device.name.strip()}: decode step wall "
          f"{1e3 * statistics.median(walls):.3f} ms, device {1e3 * device:.3f} ms; prompt 128 "
          f"wall {1e3 * statistics.median(prompt_walls):.3f} ms, device "
          f"{1e3 * prompt_device:.3f} ms ({net.stats['kernels_enqueued']} launches so far)")
    a = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    w = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 768 * 3072 * 4)
    y = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 3072 * 4)
    tiny, stream = cl.Kernel(prog, "tiny"), cl.Kernel(prog, "stream")
    tiny.set_args(a, np.int32(4096))
    stream.set_args(w, y, np.int32(192))
    for label, kern, gws in (("tiny", tiny, 4096), ("9.4 MB read", stream, 3072 * 16)):
        def launches(kern=kern, gws=gws):
            for _ in range(66):
                cl.enqueue_nd_range_kernel(q, kern, (gws,), (256,))
        per = (behind_spin(cl, q, spin, launches, 9) - spin_s) / 66
        print(f"  66 launches of {label} back to back: {1e6 * per:.2f} us each on the device")


if __name__ == "__main__":
    main()
