"""Scan kernels: CumSum along one axis (``kinds.reduction``'s CumSum row).

One work-item per row of ``R`` elements ``inner`` apart, summing in the row's order: the
sums are numpy's ``cumsum`` bit for bit (float additions in the same order, no contraction).
The rows a model scans are short (Bloom's ALiBi positions: the attention mask's cumulative
sum over the sequence) and many rows run side by side; one long row is a chain of additions,
which is still faster than reading it back to the host.
"""
from __future__ import annotations

from .common import Source, ctype, header, memoized


@memoized
def cumsum(dtype, exclusive: bool, reverse: bool) -> Source:
    """y[o, j, i] = sum of x[o, j', i] over j' <= j (``exclusive``: j' < j; ``reverse``:
    j' >= j, resp. j' > j) for rows r = o * inner + i, ``n`` rows."""
    t = ctype(dtype)
    first, step = ("R - 1", "-1") if reverse else ("0", "1")
    update = "y[j * inner] = acc; acc += x[j * inner];" if exclusive \
        else "acc += x[j * inner]; y[j * inner] = acc;"
    text = header([dtype]) + f"""__kernel void cumsum(__global const {t}* X, int xoff,
                     __global {t}* Y, int yoff, int n, int R, int inner)
{{
  const int row = get_global_id(0);
  if (row >= n) return;
  const int o = row / inner, i = row - o * inner;
  __global const {t}* x = X + xoff + o * R * inner + i;
  __global {t}* y = Y + yoff + o * R * inner + i;
  {t} acc = ({t})0;
  for (int c = 0, j = {first}; c < R; ++c, j += {step}) {{
    {update}
  }}
}}
"""
    return Source(text, "cumsum")
