"""Property: on any chain of the GNA layout blocks (``netpass.synthetic``: NHWC transposes around
channel Split/Concat with a channel-permutation Gather and a residual Add, Slice/Pad,
ReduceMean/Reshape (keepdims or ReduceMean -> Unsqueeze), a mid-graph channel shuffle ending in
NHWC or back in NCHW), with any seed,
block count and static shape, GnaTransformationsPipeline + split_pre_post_processing leave no
Gather and no Transpose GNA cannot run in the main model, and the pre-model -> main model ->
post-model chain computes what onnxruntime computes on the original ONNX model (random
inputs, relative L2 error <= 1e-5)."""
from __future__ import annotations

import pytest
from gna_graphs import check_gna_flow
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netpass.synthetic import ALL_BLOCK_KINDS, gna_blocks_onnx, random_blocks

SHAPES = [(1, 8, 8, 8), (1, 4, 8, 8), (1, 16, 4, 4), (1, 8, 4, 16), (1, 6, 5, 7), (2, 8, 8, 8)]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shape=st.sampled_from(SHAPES),
       kinds=st.lists(st.sampled_from(ALL_BLOCK_KINDS), min_size=1, max_size=len(ALL_BLOCK_KINDS),
                      unique=True),
       count=st.integers(1, 40), seed=st.integers(0, 2 ** 31 - 1))
def test_blocks_leave_no_layout_op_inside(shape, kinds, count, seed):
    _check_blocks(shape, kinds, count, seed)


@pytest.mark.parametrize("count,seed", [(2, 14), (2, 34), (4, 30)])
def test_a_reduction_that_drops_its_axis_leaves_no_transpose_inside(count, seed):
    """Found by an independent generator: ``x + Unsqueeze(ReduceMean(x, keepdims=0))`` next to
    channel shuffles left ``x`` read by a Transpose and by the reduction in another order
    (TSReductionAlign)."""
    _check_blocks((1, 6, 5, 7), ("reduce_unsqueeze", "channel_shuffle", "shuffle"), count, seed)


def _check_blocks(shape, kinds, count, seed):
    check_gna_flow(gna_blocks_onnx(random_blocks(count, seed, channels=shape[1], kinds=kinds),
                                      shape=shape, seed=seed))
