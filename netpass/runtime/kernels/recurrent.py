"""Recurrent kernels: LSTM, GRU and RNN cells and sequences in one launch."""
from __future__ import annotations

from .common import Source, flit, memoized, nan_clamp

RNN_LS = 128
RNN_ACTIVATIONS = {"sigmoid": "(1.0f / (1.0f + exp(-({0}))))", "tanh": "tanh({0})",
            "relu": "(isnan({0}) ? ({0}) : fmax({0}, 0.0f))"}


@memoized
def recurrent(cell: str, hs: int, acts: tuple, clip: float, linear_before_reset: bool,
              is_cell: bool, lens_ctype: str = "int", peepholes: bool = False) -> Source:
    """LSTM / GRU / RNN over a whole sequence in one launch: one work-group per (batch row,
    direction) keeps h (and c) in local memory and loops over time; gate rows are spread over
    the work-items. OpenVINO gate orders (LSTM f,i,c,o; GRU z,r,h) and layouts (X [B, T, I],
    states [B, ND, HS], Y [B, ND, T, HS]); a cell is a sequence of length 1 without Y. LSTM
    ``peepholes`` P [ND, 3 * HS] (order i, o, f) join the gates in the update phase, where the
    cell states they read are known."""
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    act = [lambda v, a=a: RNN_ACTIVATIONS[a].format(v) for a in acts]
    cl = (lambda v: nan_clamp(v, flit(-clip), flit(clip))) if clip > 0 else (lambda v: v)
    two = cell == "lstm"
    args = ["__global const float* X", "int xoff", "__global const float* H0", "int h0off"]
    if two:
        args += ["__global const float* C0", "int c0off"]
    if not is_cell:
        args += [f"__global const {lens_ctype}* L", "int loff"]
    args += ["__global const float* W", "int woff", "__global const float* Rw", "int roff",
             "__global const float* Bb", "int boff"]
    if peepholes:
        args += ["__global const float* P", "int poff"]
    if not is_cell:
        args += ["__global float* Y", "int yoff"]
    args += ["__global float* HO", "int hooff"]
    if two:
        args += ["__global float* CO", "int cooff"]
    args += ["int T", "int I", "int ND", "int rev_all", "int use_len"]
    nb = 4 if (cell == "gru" and linear_before_reset) else gates

    def dots(g: str) -> str:
        return (f"float acc = 0.0f; for (int k = 0; k < I; ++k) "
                f"acc = mad(x[k], W[({g}) * I + k], acc); "
                f"float acc2 = 0.0f; for (int k = 0; k < HS; ++k) "
                f"acc2 = mad(h[k], Rw[({g}) * HS + k], acc2);")

    if cell == "lstm":
        # The clip waits for the peepholes: gt holds the plain sums.
        gate_phase = (f"for (int g = lid; g < 4 * HS; g += LS) {{ {dots('g')} "
                      f"gt[g] = acc + acc2 + Bb[g]; }}")
        pf, pi, po = ((" + P[2 * HS + j] * c[j]", " + P[j] * c[j]", " + P[HS + j] * cn")
                      if peepholes else ("", "", ""))
        update = f"""float f = {act[0](cl(f'gt[j]{pf}'))}, ig = {act[0](cl(f'gt[HS + j]{pi}'))};
        float cc = {act[1](cl('gt[2 * HS + j]'))};
        float cn = f * c[j] + ig * cc;
        float og = {act[0](cl(f'gt[3 * HS + j]{po}'))};
        nh = og * {act[2]('cn')}; nc = cn;"""
    elif cell == "rnn":
        gate_phase = (f"for (int g = lid; g < HS; g += LS) {{ {dots('g')} "
                      f"gt[g] = {act[0](cl('acc + acc2 + Bb[g]'))}; }}")
        update = "nh = gt[j];"
    else:
        if linear_before_reset:
            hpart = f"""for (int g = lid; g < 3 * HS; g += LS) {{ {dots('g')}
          if (g < 2 * HS) gt[g] = {act[0](cl('acc + acc2 + Bb[g]'))};
          else {{ gt[g] = acc + Bb[g]; rh[g - 2 * HS] = acc2 + Bb[g + HS]; }} }}"""
            update = (f"nh = (1.0f - gt[j]) * {act[1](cl('gt[2 * HS + j] + gt[HS + j] * rh[j]'))}"
                      " + gt[j] * h[j];")
            gate_phase = hpart
        else:
            gate_phase = f"""for (int g = lid; g < 2 * HS; g += LS) {{ {dots('g')}
        gt[g] = {act[0](cl('acc + acc2 + Bb[g]'))}; }}
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int j = lid; j < HS; j += LS) rh[j] = gt[HS + j] * h[j];
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int g = 2 * HS + lid; g < 3 * HS; g += LS) {{
        float acc = 0.0f; for (int k = 0; k < I; ++k) acc = mad(x[k], W[g * I + k], acc);
        float acc2 = 0.0f; for (int k = 0; k < HS; ++k) acc2 = mad(rh[k], Rw[g * HS + k], acc2);
        gt[g] = acc + acc2 + Bb[g]; }}"""
            update = f"nh = (1.0f - gt[j]) * {act[1](cl('gt[2 * HS + j]'))} + gt[j] * h[j];"
    ystore = "" if is_cell else "Y[yoff + ((b * ND + d) * T + t) * HS + j] = valid ? h[j] : 0.0f;"
    text = f"""#define HS {hs}
#define LS {RNN_LS}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void rnn({', '.join(args)})
{{
  const int grp = get_group_id(0), lid = get_local_id(0);
  const int b = grp / ND, d = grp - (grp / ND) * ND;
  const int reverse = rev_all || d == 1;
  __local float h[HS], c[HS], gt[{gates} * HS], rh[HS];
  for (int j = lid; j < HS; j += LS) {{
    h[j] = H0[h0off + (b * ND + d) * HS + j];
    {"c[j] = C0[c0off + (b * ND + d) * HS + j];" if two else ""}
  }}
  const int len = {"use_len ? (int)L[loff + b] : T" if not is_cell else "T"};
  W += woff + d * {gates} * HS * I;
  Rw += roff + d * {gates} * HS * HS;
  Bb += boff + d * {nb} * HS;
  {"P += poff + d * 3 * HS;" if peepholes else ""}
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = 0; step < T; ++step) {{
    const int t = reverse ? T - 1 - step : step;
    const int valid = t < len;
    __global const float* x = X + xoff + (b * T + t) * I;
    {gate_phase}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = lid; j < HS; j += LS) {{
      float nh = 0.0f, nc = 0.0f;
      {update}
      if (valid) {{ h[j] = nh; {"c[j] = nc;" if two else ""} }}
      {ystore}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  for (int j = lid; j < HS; j += LS) {{
    HO[hooff + (b * ND + d) * HS + j] = h[j];
    {"CO[cooff + (b * ND + d) * HS + j] = c[j];" if two else ""}
  }}
}}
"""
    return Source(text, "rnn")
