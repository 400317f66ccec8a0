"""Kernels for decoding, where a step feeds a few new tokens (``DECODE_ROWS`` at most) and
reads everything else from the key/value cache and the weights.

(The GEMMs of a decode step: :mod:`netpass.runtime.kernels.decode_gemv`.)

:func:`attention_decode`: fused attention over the cache in one launch per layer, the new
keys and values appended to the cache by the same kernel. A work-group of DLS items owns one
query row of one (batch, head): it scores the keys in chunks of CHUNK (the score ops applied
with their side inputs, as the row kernel of :func:`netpass.runtime.kernels.attention`), keeps
a running maximum and sum (online softmax across chunks), and accumulates the value rows into
the output columns, each column split over ``slices`` groups of items that each take every
``slices``-th key (coalesced value reads, many loads in flight), summed at the end.

Key splits (``split``): a decode step's attention is a work-group per (batch, head) row, a
dozen on a device of a hundred compute units, each walking all the keys in a chain of load
latencies. With splits the launch's first dimension cuts every row's keys into runs of
equal length (their count is the launch's, fixed over a decode loop: the run length moves
with the keys). Each run keeps its own running maximum and sum and stores them with its
unnormalized output row; the last run of a row to arrive (a per-request counter) merges them
in run order, as the flash kernel's key splits (:mod:`netpass.runtime.kernels.flash`).

Appending (``append``): the cache operands K and V are the variables' buffers seen up to the
grown length N (their last S rows not written yet); the new rows come from XK and XV (the
projection's pieces, read through their strides). Every work-group reads the new rows from XK
and XV, and the work-groups of query row 0 of each cache head write them into the cache (one
writer per row: a head shared by several query heads, grouped-query attention, is written by
the first of them), so no work-group reads what another writes.
"""
from __future__ import annotations

import numpy as np

from .common import (
    SHUFFLE_PTX,
    Source,
    Stage,
    header,
    memoized,
    nan_max,
    offsets,
    side_params,
    stage_code,
)
from .decode_rotary import query_scale, rot_defs, rotated, row_scale
from .mma import arrival_defs, last_to_arrive
from .phase import NO_PHASE

DLS = 256          # work-items of a decode attention work-group
CHUNK = 2 * DLS    # keys scored per pass (their probabilities sit in local memory)
DECODE_ROWS = 8    # query rows (new tokens) up to which the decode kernel runs
UNROLL = 4         # keys per item in flight in the value loop
KEY_AHEAD = 16     # float4 of a key row an item loads ahead of the query's barrier, at most
# runs a row's keys may be split into (key splits). A GPT-2 small step on the H200 (12 rows,
# ~170 keys): 0.60 ms on the device with 4 against 0.67-0.69 with 8, 0.66 with 16, 0.62 with 2
MAX_SPLITS = 4


@memoized
def attention_decode(score_ops: list[Stage], side_dtypes: list, erank: int, d: int, dv: int,
                     nan_to_zero: bool, append: bool, split: bool = False,
                     ptx: bool = False, rot: tuple | None = None,
                     proj: tuple | None = None) -> Source:
    """The decode attention kernel (module docstring) for head size ``d`` and value width
    ``dv`` (compile-time: the loops over them unroll): out[b, m, :] = softmax_n(ops(q[b, m, :]
    . k[b, n, :])) @ v[b, n, :] for a work-group (query row m, batch b = b0 * B1 + b1), the
    rows n >= N - S read from XK / XV and written into K / V when ``append``.

    Latency decides a decode step's attention (a few work-groups, each a chain of dependent
    loads), so every load of a key row is issued before its first use: a key's row as float4
    runs where K's rows are contiguous and 16-byte aligned (checked per launch), value rows
    as float4 columns (``dv`` % 4 == 0) with UNROLL keys per item in flight; an item's first
    key row and first round of value rows are loaded with the query, ahead of its barrier,
    and on NVIDIA (``ptx``) the maximum and the sum are reduced by warp shuffles.

    ``split`` (``dv`` % 4 == 0 only): the launch's first dimension splits each row's keys
    into get_num_groups(0) <= MAX_SPLITS runs of equal length ("Key splits" in the module
    docstring); ``ptx``: the merge reads the partials with NVIDIA's L1-bypassing loads.

    ``rot`` (``append`` only): (rotated width, interleaved, norms) of a rotary embedding
    folded in (:mod:`netpass.runtime.rotary_fold`): Q and XK are the queries and new keys
    before their rotation, and the kernel rotates each element as it loads it, by ``cos``
    (``RC``) and ``sin`` (``RS``) read through their batch, row and column strides (the same
    for every head), so that the keys it writes into the cache are the rotated ones.
    ``norms``: None, or ((eps, scaled) of the queries' norm, the same of the keys'): each row
    of Q and XK is first normalized, x * (1 / sqrt(mean(x^2) + eps)) (times ``GQ`` / ``GK``,
    read at stride ``gqs`` / ``gks``, where ``scaled``): the work-group sums a query row's
    squares in ``red``, the item of a new key its row's in a first loop.

    ``proj`` (``dv`` % 4 == 0 only): (epilogue stages, their side inputs' dtypes, rank) of the
    output projection folded in (:mod:`netpass.runtime.attention_proj`): the row's output
    is not stored but multiplied by its head's columns of the projection's weights ``W``
    ``[NP, KP]`` (the output row, heads side by side, is a row of KP of the projection's
    input); each head's product goes to its slot of ``PP``, and the last head of a row to
    arrive (``hp_count``) sums them in head order and stores ``C`` through the epilogue
    (:func:`_project`)."""
    n_side = len(side_dtypes)
    kq = "" if append else "const "
    args = ["__global const float* Q", "int qoff", f"__global {kq}float* Kt", "int koff",
            f"__global {kq}float* V", "int voff", "__global float* O", "int ooff"]
    if append:
        args += ["__global const float* XK", "int xkoff", "__global const float* XV", "int xvoff"]
    args += ["int M", "int N", "int D", "int DV", "int B1", "int G",
             "int sq0", "int sq1", "int sqm", "int sqd", "int sk0", "int sk1", "int skn", "int skd",
             "int sv0", "int sv1", "int svn", "int svj", "int so0", "int so1", "int som",
             "int soj"]
    if append:
        args += ["int S", "int sxk0", "int sxk1", "int sxkn", "int sxkd", "int sxv0", "int sxv1",
                 "int sxvn", "int sxvj"]
    args += side_params(side_dtypes, erank)
    norms = rot[2] if rot is not None and len(rot) > 2 else None
    if rot is not None:
        args += ["__global const float* RC", "int rcoff", "int sc0", "int scm", "int scd",
                 "__global const float* RS", "int rsoff", "int ss0", "int ssm", "int ssd"]
        for g, (_, scaled) in zip("QK", norms or ()):
            args += [f"__global const float* G{g}", f"int g{g.lower()}off",
                     f"int g{g.lower()}s"] if scaled else []
    split = split and dv % 4 == 0 and dv // 4 <= DLS
    if split:
        args += ["__global float* DP", "__global int* da_count"]
    if proj is not None:
        args += ["__global const float* W", "int woff", "__global float* C", "int coff",
                 "int NP", "int KP", "__global float* PP", "__global int* hp_count"]
        args += side_params(proj[1], proj[2], "ep", "ed")  # (the projection's)
    code = stage_code([Stage("dot", [], "float")] + list(score_ops),
                       {j: f"in{j}[o_in{j}]" for j in range(n_side)})
    offs = offsets(erank, [f"in{j}" for j in range(n_side)], "flat") if n_side else ""
    vec4 = dv % 4 == 0 and dv // 4 <= DLS
    w4 = dv // 4 if vec4 else 0
    slices = DLS // w4 if vec4 else 1
    jt = -(-dv // DLS)
    # an item's first key row and value rows are loaded with the query (_ahead)
    kahead = d % 4 == 0 and d <= 4 * KEY_AHEAD
    first_key = f"""if (c0 == lo_ && i == lid) {{
            #pragma unroll
            for (int c = 0; c < {d // 4}; ++c) s4 = mad(q4[c], kp_[c], s4);
          }} else""" if kahead else ""
    # a key's dot product: float4 runs of a contiguous, aligned row, else scalar
    if d % 4 == 0:
        kdot = f"""if (kvec) {{
          const __global float4* r4 = (const __global float4*)(Kt + n * skn);
          float4 s4 = (float4)(0.0f);
          {first_key} {{
            #pragma unroll
            for (int c = 0; c < {d // 4}; ++c) s4 = mad(q4[c], r4[c], s4);
          }}
          dot = s4.x + s4.y + s4.z + s4.w;
        }} else"""
    else:
        kdot = ""
    kdot += f""" {{
          __global const float* kr = Kt + n * skn;
          #pragma unroll 8
          for (int c = 0; c < {d}; ++c) dot = mad(qs[c], kr[c * skd], dot);
        }}"""
    newvec = f"""if (xkvec) {{
          const __global float4* x4 = (const __global float4*)(XK + (n - past) * sxkn);
          __global float* kw = Kt + n * skn;
          float4 s4 = (float4)(0.0f);
          #pragma unroll
          for (int c = 0; c < {d // 4}; ++c) {{
            const float4 kv = x4[c];
            s4 = mad(q4[c], kv, s4);
            if (wk) {{
              if (kvec) vstore4(kv, c, kw);
              else {{ kw[(4 * c) * skd] = kv.x; kw[(4 * c + 1) * skd] = kv.y;
                      kw[(4 * c + 2) * skd] = kv.z; kw[(4 * c + 3) * skd] = kv.w; }}
            }}
          }}
          dot = s4.x + s4.y + s4.z + s4.w;
        }} else """ if d % 4 == 0 and not rot else ""
    newdot = f"""{newvec}{{
          __global const float* xr = XK + (n - past) * sxkn;
          __global float* kw = Kt + n * skn;
          {row_scale("rk", "xr[c * sxkd]", d, norms[1][0]) if norms else ""}
          #pragma unroll 8
          for (int c = 0; c < {d}; ++c) {{
            const float kv = {rotated("xr", "sxkd", "(n - past)", "c", "k", norms) if rot
                              else "xr[c * sxkd]"};
            dot = mad(qs[c], kv, dot);
            if (wk) kw[c * skd] = kv;
          }}
        }}""" if append else ""
    score = f"""const int flat = (b * M + m) * N + n;
        {offs}
        {code}
        const float sc = x{len(score_ops)};
        ps[i] = sc;
        tmax = {nan_max("tmax", "sc")};"""
    if append:
        scores = f"""for (int i = lid; i < cn; i += DLS) {{
      const int n = c0 + i;
      float dot = 0.0f;
      if (n >= past) {{ {newdot} }} else {kdot}
      {{
        {score}
      }}
    }}"""
    else:
        scores = f"""for (int i = lid; i < cn; i += DLS) {{
      const int n = c0 + i;
      float dot = 0.0f;
      {kdot}
      {{
        {score}
      }}
    }}"""
    if vec4:
        old_end = "min(cn, past - c0)" if append else "cn"
        vrow = "(vvec ? vload4(0, V + n * svn + j4 * 4) : " \
               "(float4)(V[n * svn + (j4 * 4) * svj], V[n * svn + (j4 * 4 + 1) * svj], " \
               "V[n * svn + (j4 * 4 + 2) * svj], V[n * svn + (j4 * 4 + 3) * svj]))"
        vnew = """{
            const int n = c0 + i;
            __global const float* xr = XV + (n - past) * sxvn + (j4 * 4) * sxvj;
            const float4 vv = (float4)(xr[0], xr[sxvj], xr[2 * sxvj], xr[3 * sxvj]);
            if (wv) {
              __global float* vw = V + n * svn + (j4 * 4) * svj;
              vw[0] = vv.x; vw[svj] = vv.y; vw[2 * svj] = vv.z; vw[3 * svj] = vv.w;
            }
            a0 = mad((float4)(ps[i]), vv, a0);
          }"""
        new_loop = f"""for (; i < cn; i += {slices}) {vnew}""" if append else ""
        accumulate = f"""{{
      const int j4 = lid % {w4}, r = lid / {w4};
      if (r < {slices}) {{
        float4 a0 = (float4)(0.0f), a1 = a0, a2 = a0, a3 = a0;
        const int old = {old_end};
        int i = r;
        if (c0 == lo_) {{  /* the first round's rows, loaded ahead (then any new rows) */
          if (i < old) {{ a0 = mad((float4)(ps[i]), vp0_, a0); i += {slices};
            if (i < old) {{ a1 = mad((float4)(ps[i]), vp1_, a1); i += {slices};
              if (i < old) {{ a2 = mad((float4)(ps[i]), vp2_, a2); i += {slices};
                if (i < old) {{ a3 = mad((float4)(ps[i]), vp3_, a3); i += {slices}; }}
              }}
            }}
          }}
        }}
        for (; i + {3 * slices} < old; i += {4 * slices}) {{
          int n = c0 + i;
          const float4 v0 = {vrow};
          n += {slices};
          const float4 v1 = {vrow};
          n += {slices};
          const float4 v2 = {vrow};
          n += {slices};
          const float4 v3 = {vrow};
          a0 = mad((float4)(ps[i]), v0, a0);
          a1 = mad((float4)(ps[i + {slices}]), v1, a1);
          a2 = mad((float4)(ps[i + {2 * slices}]), v2, a2);
          a3 = mad((float4)(ps[i + {3 * slices}]), v3, a3);
        }}
        for (; i < old; i += {slices}) {{
          const int n = c0 + i;
          a0 = mad((float4)(ps[i]), {vrow}, a0);
        }}
        {new_loop}
        acc4 = mad(acc4, (float4)(scale), (a0 + a1) + (a2 + a3));
      }}
    }}"""
        store = f"""{"o = select(o, (float4)(0.0f), isnan(o));" if nan_to_zero else ""}
    __global float* op = O + (lid * 4) * soj;
    op[0] = o.x; op[soj] = o.y; op[2 * soj] = o.z; op[3 * soj] = o.w;""" if proj is None else \
            f"""{"o = select(o, (float4)(0.0f), isnan(o));" if nan_to_zero else ""}
    ol4[lid] = o;"""
        whole = f"""if (lid < {w4}) {{
    float4 a = (float4)(0.0f);
    for (int r = 0; r < {slices}; ++r) a += part[r * {w4} + lid];
    float4 o = a / sum;
    {store}
  }}"""
        finish = f"""__local float4 part[DLS];
  part[lid] = acc4;
  barrier(CLK_LOCAL_MEM_FENCE);
  {_merge_splits(w4, slices, store, _project(w4, proj, "da_last[0]")) if split and proj else
   _merge_splits(w4, slices, store) if split else whole}
  {_project(w4, proj) if proj is not None and not split else ""}"""
        acc_decl = "float4 acc4 = (float4)(0.0f);"
    else:
        if append:
            vload = """float vv;
          if (n >= past) {
            vv = XV[(n - past) * sxvn + j * sxvj];
            if (wv) V[n * svn + j * svj] = vv;
          } else {
            vv = V[n * svn + j * svj];
          }"""
        else:
            vload = "const float vv = V[n * svn + j * svj];"
        accumulate = """for (int t = 0; t < JT; ++t) {
      const int j = lid + t * DLS;
      if (j < DV) {
        float a = acc[t] * scale;
        #pragma unroll 4
        for (int i = 0; i < cn; ++i) {
          const int n = c0 + i;
          """ + vload + """
          a = mad(ps[i], vv, a);
        }
        acc[t] = a;
      }
    }"""
        finish = f"""for (int t = 0; t < JT; ++t) {{
    const int j = lid + t * DLS;
    if (j < DV) {{
      const float o = acc[t] / sum;
      O[j * soj] = {"isnan(o) ? 0.0f : o" if nan_to_zero else "o"};
    }}
  }}"""
        acc_decl = """float acc[JT];
  for (int t = 0; t < JT; ++t) acc[t] = 0.0f;"""
    if append:
        setup = """const int past = N - S;
  const int xkvec = sxkd == 1 && (sxkn & 3) == 0 &&
      ((xkoff + b0 * sxk0 + kb1 * sxk1) & 3) == 0;
  XK += xkoff + b0 * sxk0 + kb1 * sxk1;
  XV += xvoff + b0 * sxv0 + kb1 * sxv1;
  /* one writer per cache row: query row 0 of the first batch item and query head sharing
     the key head */
  const int wk = m == 0 && (sk0 != 0 || b0 == 0) && (sk1 != 0 ? b1 % G == 0 : b1 == 0);
  const int wv = m == 0 && (sv0 != 0 || b0 == 0) && (sv1 != 0 ? b1 % G == 0 : b1 == 0);"""
    else:
        setup = ""
    def qv(c: str) -> str:  # query element c, rotated where a rotary embedding is folded in
        return rotated("Q", "sqd", "m", c, "q", norms) if rot else f"Q[({c}) * sqd]"
    q4 = f"""__local float4 q4[{max(d // 4, 1)}];
  const int kvec = skd == 1 && (skn & 3) == 0 && (koff & 3) == 0 &&
      ((b0 * sk0 + kb1 * sk1) & 3) == 0;
  const int vvec = svj == 1 && (svn & 3) == 0 && (voff & 3) == 0 &&
      ((b0 * sv0 + kb1 * sv1) & 3) == 0;
  for (int c4 = lid; c4 < {d // 4}; c4 += DLS) {{
    const int c = 4 * c4;
    q4[c4] = (float4)({qv("c")}, {qv("c + 1")}, {qv("c + 2")}, {qv("c + 3")});
  }}""" if d % 4 == 0 else "const int kvec = 0, vvec = 0;"
    tree = """for (int s = DLS / 2; s > 0; s >>= 1) {{
      if (lid < s) red[lid] = {op};
      barrier(CLK_LOCAL_MEM_FENCE);
    }}"""
    text = header([np.float32] + list(side_dtypes) + (list(proj[1]) if proj else [])) + \
        (arrival_defs(ptx) if split or proj is not None else "") + \
        (SHUFFLE_PTX if ptx else "") + \
        (rot_defs(*rot) if rot else "") + f"""#define DLS {DLS}
#define CHUNK {CHUNK}
#define JT {jt}
__kernel __attribute__((reqd_work_group_size(DLS, 1, 1)))
void attention_decode({', '.join(args)})
{{
  const int lid = get_local_id(0), m = get_group_id(1), b = get_group_id(2);
  const int b0 = b / B1, b1 = b - b0 * B1, kb1 = b1 / G;
  Q += qoff + b0 * sq0 + b1 * sq1 + m * sqm;
  Kt += koff + b0 * sk0 + kb1 * sk1;
  V += voff + b0 * sv0 + kb1 * sv1;
  O += ooff + b0 * so0 + b1 * so1 + m * som;
  {setup}
  {"RC += rcoff + b0 * sc0; RS += rsoff + b0 * ss0;" if rot else ""}
  {" ".join(f"G{g} += g{g.lower()}off;" for g, (_, s) in zip("QK", norms or ()) if s)}
  __local float qs[{d}];
  __local float ps[CHUNK];
  __local float red[DLS];
  {f"__local float4 ol4[{max(w4, 1)}]; __local int hp_last[1], da_last[1];"
     if proj is not None else ""}
  {query_scale(d, norms[0][0], tree) if norms else ""}
  {"const int ns_ = get_num_groups(0), kc_ = (N + ns_ - 1) / ns_;" if split else ""}
  const int lo_ = {"get_group_id(0) * kc_" if split else "0"};
  const int hi_ = {"min(N, lo_ + kc_)" if split else "N"};
  for (int c = lid; c < {d}; c += DLS) qs[c] = {qv("c")};
  {q4}
  {_ahead(d, kahead, vrow if vec4 else "", w4, slices, append)}
  {acc_decl}
  float mx = -INFINITY, sum = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int c0 = lo_; c0 < hi_; c0 += CHUNK) {{
    const int cn = min(CHUNK, hi_ - c0);
    float tmax = -INFINITY;
    {scores}
    {_group_reduce("cmax_", "tmax", "fmaxn" if ptx else None, tree, ptx)}
    const float nm = {nan_max("mx", "cmax_")};
    barrier(CLK_LOCAL_MEM_FENCE);
    float scale = 1.0f, tsum = 0.0f;
    if (nm != -INFINITY) {{  /* (nothing but -inf yet: keep the sums empty) */
      scale = exp(mx - nm);
      for (int i = lid; i < cn; i += DLS) {{
        const float p = exp(ps[i] - nm);
        ps[i] = p;
        tsum += p;
      }}
    }} else {{
      for (int i = lid; i < cn; i += DLS) ps[i] = 0.0f;
    }}
    {_group_reduce("csum_", "tsum", "+", tree, ptx)}
    sum = sum * scale + csum_;
    mx = nm;
    {accumulate}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  {finish}
}}
"""
    return Source(text, "attention_decode")


def _ahead(d: int, key: bool, vrow: str, w4: int, slices: int, append: bool) -> str:
    """C statements issuing, with the query's loads, the item's loads that need nothing from
    the query: its first key row of its first chunk into ``kp_`` (``key``: contiguous,
    aligned rows, checked per launch; the scores take it where ``c0 == lo_ && i == lid``), and
    ``vrow`` (the value rows as float4 columns, where the kernel reads them so) of the first
    round of its value loop into ``vp0_`` .. ``vp3_``. Without them a work-group waited for
    the query, then the keys, then the values: three latencies where one does."""
    out = ""
    first = "min(CHUNK, hi_ - lo_)"
    if key:
        out += f"""float4 kp_[{d // 4}];
  {{
    const int n = lo_ + lid;
    if (kvec && lid < {first}{" && n < past" if append else ""}) {{
      const __global float4* r4 = (const __global float4*)(Kt + n * skn);
      #pragma unroll
      for (int c = 0; c < {d // 4}; ++c) kp_[c] = r4[c];
    }}
  }}
  """
    if vrow:
        loads = "\n    ".join(f"if (r + {u * slices} < old) {{ const int n = n0_ + {u * slices}; "
                                f"vp{u}_ = {vrow}; }}" for u in range(4))
        out += f"""float4 vp0_ = (float4)(0.0f), vp1_ = vp0_, vp2_ = vp0_, vp3_ = vp0_;
  if (lid / {w4} < {slices}) {{
    const int j4 = lid % {w4}, r = lid / {w4}, n0_ = lo_ + r;
    const int old = {f"min({first}, past - lo_)" if append else first};
    {loads}
  }}"""
    return out


def _group_reduce(name: str, value: str, op: str | None, tree: str, ptx: bool) -> str:
    """C statements declaring ``name``, the work-group's reduction of every item's ``value``
    by ``op`` (``+``, a function of two floats, or None for nan_max), through ``red``. With
    ``ptx`` each warp reduces its own by shuffles and one barrier joins the warps' results:
    a decode step's attention is a chain of latencies, and the tree's eight barriers were
    two of them a chunk (the item is left with the whole work-group's value either way)."""
    def apply(a: str, b: str) -> str:
        return f"{a} + {b}" if op == "+" else nan_max(a, b) if op is None else f"{op}({a}, {b})"
    if not ptx:
        return f"""red[lid] = {value};
    barrier(CLK_LOCAL_MEM_FENCE);
    {tree.format(op=apply("red[lid]", "red[lid + s]"))}
    const float {name} = red[0];"""
    return f"""float {name} = {value};
    #pragma unroll
    for (int o_ = 16; o_ > 0; o_ >>= 1) {name} = {apply(name, f"shfl_xor({name}, o_)")};
    if ((lid & 31) == 0) red[lid >> 5] = {name};
    barrier(CLK_LOCAL_MEM_FENCE);
    {name} = red[0];
    for (int w_ = 1; w_ < DLS / 32; ++w_) {name} = {apply(name, "red[w_]")};"""


def _project(w4: int, proj: tuple, last: str = "") -> str:
    """C statements (kernel top level) of a folded output projection (``attention_decode``'s
    ``proj``), after the row's output went to ``ol4``: this head's product with its ``4 *
    w4`` columns of ``W`` into its slot of ``PP`` (each item a few output columns, all their
    loads in flight), then the last head of the projection's row to arrive sums the row's
    slots in head order and stores ``C`` through the epilogue ``stages`` (``proj``: stages,
    their side inputs' dtypes, rank). ``last``: the condition that this work-group holds the
    row (a key split's: it arrived last; empty: every work-group); every work-group meets
    the barriers, none returns early (mma.last_to_arrive's ``returns`` False). Launched on
    its own in a persistent step (NO_PHASE: two arrivals)."""
    stages, dtypes, erank = proj
    n = len(dtypes)
    code = stage_code([Stage("v", [], "float")] + list(stages),
                      {j: f"ep{j}[o_ep{j}]" for j in range(n)})
    offs = offsets(erank, [f"ep{j}" for j in range(n)], "flat", dims="ed") if n else ""
    return f"""{NO_PHASE}
  barrier(CLK_LOCAL_MEM_FENCE);
  const int fo_p = b0 * so0 + b1 * so1 + m * som;
  const int hpr_p = KP / {4 * w4}, pr_p = fo_p / KP;
  const int ph_p = (fo_p - pr_p * KP) / {4 * w4};
  if ({last or "1"}) {{
    __global const float* wh = W + woff + ph_p * {4 * w4};
    __global float* pp = PP + (pr_p * hpr_p + ph_p) * NP;
    for (int n = lid; n < NP; n += DLS) {{
      const __global float4* wr = (const __global float4*)(wh + n * KP);
      float4 a = (float4)(0.0f);
      #pragma unroll
      for (int c = 0; c < {w4}; ++c) a = mad(wr[c], ol4[c], a);
      pp[n] = (a.x + a.y) + (a.z + a.w);
    }}
  }}
  {last_to_arrive("hp_last", "hp_count[pr_p]", "hpr_p", False, last, "lid")}
  if (hp_last[0]) {{
    for (int n = lid; n < NP; n += DLS) {{
      __global const float* pc = PP + pr_p * hpr_p * NP + n;
      float v = 0.0f;
      for (int h = 0; h < hpr_p; ++h) v += sk_load(pc + h * NP);
      const int flat = pr_p * NP + n;
      {offs}
      {code}
      C[coff + flat] = x{len(stages)};
    }}
  }}"""


def _merge_splits(w4: int, slices: int, store: str, then: str = "") -> str:
    """C statements ending a key split: it stores its unnormalized output row, running
    maximum and sum in its slot of ``DP`` (``w4`` float4 columns, summed over ``slices``
    groups of items); the last of the row's splits to arrive (counted on the row's word of
    ``da_count``, set back to 0 for the next launch) loads every split's (all in flight, up
    to MAX_SPLITS) and merges them in split order: o = sum_c exp(m_c - m) o_c / sum_c
    exp(m_c - m) l_c; ``store`` writes ``o``. The arrival and the loads past the L1 are the
    split-K GEMM's (:func:`netpass.runtime.kernels.mma.last_to_arrive`, ``arrival_defs``).
    ``then``: what every split does after, the last one marked by ``da_last[0]`` (an output
    projection's barriers and second arrival: no early return before them, and no barrier
    inside a branch, which PoCL's work-group functions took wrong)."""
    ps = 4 * w4 + 4
    loads, weights, sums = [], [], []
    for u in range(MAX_SPLITS):
        cells = ", ".join(f"a{u}{c}_ = 0.0f" for c in "xyzw")
        got = " ".join(f"a{u}{c}_ = sk_load(pc_ + {u * ps} + 4 * lid + {i});"
                       for i, c in enumerate("xyzw"))
        loads.append(f"float m{u}_ = -INFINITY, l{u}_ = 0.0f, {cells};\n    if ({u} < ns_) "
                     f"{{ m{u}_ = sk_load(pc_ + {u * ps + 4 * w4}); l{u}_ = sk_load(pc_ + "
                     f"{u * ps + 4 * w4 + 1}); {got} }}")
        weights.append(f"gm_ = {nan_max('gm_', f'm{u}_')};")
        sums.append(f"{{ const float w_ = m{u}_ == -INFINITY ? 0.0f : exp(m{u}_ - gm_); "
                    f"l_ += w_ * l{u}_; o = mad((float4)(w_), (float4)(a{u}x_, a{u}y_, a{u}z_, "
                    f"a{u}w_), o); }}")
    nl = "\n    "
    arrival = last_to_arrive("da_last", "da_count[row_]", "ns_", not then)
    if then:  # (the last split goes on in a block: no early return)
        arrival += "\n  if (da_last[0]) {"
    return f"""const int row_ = b * M + m;
  __global float* pc_ = DP + row_ * ns_ * {ps};
  if (lid < {w4}) {{
    float4 a = (float4)(0.0f);
    for (int r = 0; r < {slices}; ++r) a += part[r * {w4} + lid];
    vstore4(a, lid, pc_ + get_group_id(0) * {ps});
  }}
  if (lid == 0) {{
    pc_[get_group_id(0) * {ps} + {4 * w4}] = mx;
    pc_[get_group_id(0) * {ps} + {4 * w4 + 1}] = sum;
  }}
  const int tid = lid;
  {arrival}
  if (lid < {w4}) {{
    {nl.join(loads)}
    float gm_ = -INFINITY, l_ = 0.0f;
    float4 o = (float4)(0.0f);
    {nl.join(weights)}
    {nl.join(sums)}
    o = o / l_;
    {store}
  }}{"}" if then else ""}{then}"""
