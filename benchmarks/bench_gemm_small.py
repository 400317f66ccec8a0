"""Kernel times of a small GPT decoder's GEMMs and QKV split, old kernels against new.

For each FullyConnected shape of the decoder (d = 256: K x N = 256x768 QKV, 256x256 output
projection, 256x1024 and 1024x256 FFN, 256x2048 head) and each sequence length M, the launch
that ``kinds.legacy.fully_connected_impl`` builds (reordered [K, N] weights, bias epilogue) is timed
with OpenCL profiling events twice: with the tiled ``gemm`` kernels (``kinds.matmul.skinny_width``
forced off: the selection before the skinny GEMM) and with the current selection. Every
output is checked against numpy. Then the VariadicSplit of [1, M, 768] into three
[1, M, 256]: three strided copies (before) against the one-launch ``split`` kernel.

    python benchmarks/bench_gemm_small.py --device GPU            # M = 1..128, all lengths
    python benchmarks/bench_gemm_small.py --device CPU --m 1,17,64 --reps 3

Prints one line per shape and M (median microseconds over ``--reps`` runs, after one warm-up
run) and per shape the mean over the lengths: what each decoder step of a 1..128 sequence
pays per call.
"""
from __future__ import annotations

import argparse
import contextlib

import numpy as np

from netpass.ops import FullyConnected, VariadicSplit
from netpass.runtime.device import Engine, resolve_device_name, select_device
from netpass.runtime.impls import Launch, Params, contiguous_strides, strided_copy
from netpass.runtime.kinds import TABLE, legacy, matmul, movement

F32 = np.dtype(np.float32)
DECODER_FC = [(256, 768), (256, 256), (256, 1024), (1024, 256), (256, 2048)]  # (K, N)


@contextlib.contextmanager
def tiled_only():
    """The GEMM selection as it was before the skinny kernel."""
    saved = matmul.skinny_width
    matmul.skinny_width = lambda *args: None
    try:
        yield
    finally:
        matmul.skinny_width = saved


class Bench:
    """Device buffers and timed launches on one profiling engine."""

    def __init__(self, device: str) -> None:
        self.engine = Engine.get(select_device(resolve_device_name(device)), profiling=True)
        self.cl = self.engine.cl
        self.kernels: dict = {}

    def buffer(self, array: np.ndarray):
        mf = self.cl.mem_flags
        return self.cl.Buffer(self.engine.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=array)

    def empty(self, nbytes: int):
        return self.cl.Buffer(self.engine.context, self.cl.mem_flags.READ_WRITE, max(nbytes, 64))

    def _kernel(self, ln: Launch):
        kern = self.kernels.get(ln.source.text)
        if kern is None:
            prg = self.engine.build(ln.source.text)
            kern = self.kernels[ln.source.text] = self.cl.Kernel(prg, ln.source.name)
        return kern

    def time_us(self, launches: list[Launch], tensors: dict, reps: int) -> float:
        """Median over ``reps`` of the summed kernel time of ``launches``; ``tensors`` maps
        ("i" | "o", j) to a buffer (offsets in the specs are added to 0)."""
        q = self.engine.queue
        ready = []
        for ln in launches:
            nb, ints, slots = ln.template()
            bufs, ints = [None] * nb, list(ints)
            for b, i, kind, j, off in slots:
                bufs[b] = tensors[(kind, j)]
                ints[i] = off
            kern = self._kernel(ln)
            ready.append((kern, bufs + ([np.array(ints, np.int32)] if ints else []), ln))
        times = []
        for rep in range(reps + 1):
            total = 0.0
            for kern, args, ln in ready:
                kern.set_args(*args)
                ev = self.cl.enqueue_nd_range_kernel(q, kern, ln.gws, ln.lws)
                ev.wait()
                total += (ev.profile.end - ev.profile.start) * 1e-3
            if rep:  # the first run compiles and warms caches
                times.append(total)
        return float(np.median(times))


def fc_launch(engine: Engine, m: int, k: int, n: int) -> Launch:
    p = Params(row=TABLE[FullyConnected], attrs={"_weights_reordered": True},
               in_shapes=[(1, m, k), (n, k), (n,)], in_dtypes=[F32] * 3,
               out_shapes=[(1, m, n)], out_dtypes=[F32], values={}, fused=[],
               extra_shapes=[], extra_dtypes=[], engine=engine)
    return legacy.fully_connected_impl(p, None).launches[0]


def bench_fc(b: Bench, ms: list[int], reps: int) -> None:
    rng = np.random.default_rng(0)
    print(f"FullyConnected (+ bias) on {b.engine.describe()}, {b.engine.device.max_compute_units} CUs")
    print(f"{'K':>5} {'N':>5} {'M':>4} {'tiled us':>9} {'skinny us':>10} {'speedup':>8}  launch (gws / lws)  max rel err")
    for k, n in DECODER_FC:
        w = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        wb, bb = b.buffer(w), b.buffer(bias)
        sums = [0.0, 0.0]
        for m in ms:
            x = rng.standard_normal((m, k)).astype(np.float32)
            want = x.astype(np.float64) @ w + bias
            tensors = {("i", 0): b.buffer(x), ("i", 1): wb, ("i", 2): bb, ("o", 0): b.empty(m * n * 4)}
            row, err = [], 0.0
            for old in (True, False):
                with tiled_only() if old else contextlib.nullcontext():
                    ln = fc_launch(b.engine, m, k, n)
                row.append(b.time_us([ln], tensors, reps))
                got = np.empty((m, n), np.float32)
                b.cl.enqueue_copy(b.engine.queue, got, tensors[("o", 0)])
                err = max(err, float(np.abs(got - want).max() / np.abs(want).max()))
            for i in range(2):
                sums[i] += row[i]
            print(f"{k:5d} {n:5d} {m:4d} {row[0]:9.1f} {row[1]:10.1f} {row[0] / row[1]:7.1f}x  "
                  f"{ln.source.name} {ln.gws} / {ln.lws}  {err:.1e}")
        print(f"{k:5d} {n:5d} mean {sums[0] / len(ms):8.1f} {sums[1] / len(ms):10.1f} "
              f"{sums[0] / sums[1]:7.1f}x\n")


def bench_split(b: Bench, ms: list[int], reps: int) -> None:
    rng = np.random.default_rng(1)
    print("VariadicSplit [1, M, 768] -> 3 x [1, M, 256]")
    print(f"{'M':>4} {'3 copies us':>12} {'1 launch us':>12}")
    sums = [0.0, 0.0]
    for m in ms:
        shape, outs = (1, m, 768), [(1, m, 256)] * 3
        x = rng.standard_normal(shape).astype(np.float32)
        tensors = {("i", 0): b.buffer(x), **{("o", j): b.empty(m * 256 * 4) for j in range(3)}}
        cs = contiguous_strides(shape)
        copies = [strided_copy(F32, o, cs, 256 * j, contiguous_strides(o), 0, 0, j)
                  for j, o in enumerate(outs)]
        p = Params(row=TABLE[VariadicSplit], attrs={}, in_shapes=[shape, (), (3,)],
                   in_dtypes=[F32, np.dtype(np.int64), np.dtype(np.int64)], out_shapes=outs,
                   out_dtypes=[F32] * 3, values={1: np.int64(2), 2: np.array([256] * 3)},
                   fused=[], extra_shapes=[], extra_dtypes=[], engine=b.engine)
        row = [b.time_us(copies, tensors, reps), b.time_us(movement.split_impl(p, None).launches, tensors, reps)]
        got = np.empty((1, m, 256), np.float32)
        b.cl.enqueue_copy(b.engine.queue, got, tensors[("o", 2)])
        assert np.array_equal(got, x[..., 512:]), "split output differs"
        sums = [s + r for s, r in zip(sums, row)]
        print(f"{m:4d} {row[0]:12.1f} {row[1]:12.1f}")
    print(f"mean {sums[0] / len(ms):12.1f} {sums[1] / len(ms):12.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="AUTO")
    ap.add_argument("--m", default="1-128", help="sequence lengths: '1-128' or '1,17,64'")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if "-" in args.m:
        lo, hi = (int(v) for v in args.m.split("-"))
        ms = list(range(lo, hi + 1))
    else:
        ms = [int(v) for v in args.m.split(",")]
    b = Bench(args.device)
    bench_fc(b, ms, args.reps)
    bench_split(b, ms, args.reps)


if __name__ == "__main__":
    main()
