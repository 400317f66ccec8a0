"""``impls.gemm_strides``: a GEMM epilogue's side inputs addressed by (batch, m, n) strides,
or None where a side input's strides do not merge within those groups of dims."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from netpass.runtime.impls import gemm_strides


@pytest.mark.parametrize("extras,out,bmn,want", [
    ([(1, 256, 1, 1), (8, 256, 56, 56)], (8, 256, 56, 56), (8, 256, 3136),
     [[0, 1, 0], [802816, 3136, 1]]),                          # conv bias and residual
    ([(768,), (8, 197, 768)], (8, 197, 768), (1, 1576, 768), [[0, 0, 1], [0, 768, 1]]),
    ([(1, 768)], (4, 8, 197, 768), (32, 197, 768), [[0, 0, 1]]),
    ([(1, 1, 768)], (1, 1, 768), (1, 1, 768), [[0, 0, 1]]),
    ([(197, 1)], (8, 197, 768), (1, 1576, 768), None),        # per row of one image only
    ([(8, 1, 768)], (8, 197, 768), (1, 1576, 768), None),
    ([(5,)], (2, 3, 5), (1, 2, 15), None),                     # a row of 5 repeats within n
])
def test_strides_over_batch_rows_and_columns(extras, out, bmn, want):
    assert gemm_strides(SimpleNamespace(extra_shapes=extras), out, *bmn) == want
