"""TfIdfVectorizer against onnxruntime on random rows of integers and strings: n-gram sizes
1-3, skips 0-2, TF/IDF/TFIDF with and without weights, [C] and [B, C] inputs; the export read
back by onnxruntime; the runtime (host fallback). Exact to float32."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_runtime, one_node

RNG = np.random.default_rng(9)


def _pool(strings: bool):
    unigrams = [2, 3, 5, 7]
    bigrams = [2, 3, 3, 5, 7, 2, 5, 5]
    trigrams = [2, 3, 5]
    pool = unigrams + bigrams + trigrams
    counts = [0, len(unigrams), len(unigrams) + len(bigrams)]
    n_grams = len(unigrams) + len(bigrams) // 2 + 1
    indexes = list(RNG.permutation(n_grams))
    if strings:
        return {"pool_strings": [f"w{v}" for v in pool]}, counts, indexes
    return {"pool_int64s": pool}, counts, indexes


@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("mode,weighted", [("TF", False), ("IDF", False), ("IDF", True),
                                           ("TFIDF", True)])
@pytest.mark.parametrize("grams,skip", [((1, 1), 0), ((2, 2), 1), ((1, 3), 2), ((2, 3), 0)])
@pytest.mark.parametrize("batched", [False, True])
def test_tfidf_matches_onnxruntime(strings, mode, weighted, grams, skip, batched):
    pool, counts, indexes = _pool(strings)
    shape = (3, 12) if batched else (12,)
    values = RNG.choice([2, 3, 5, 7, 9], size=shape)
    x = np.asarray([f"w{v}" for v in values.reshape(-1)], dtype=object).reshape(shape) \
        if strings else values.astype(np.int64)
    attrs = dict(mode=mode, min_gram_length=grams[0], max_gram_length=grams[1],
                 max_skip_count=skip, ngram_counts=counts, ngram_indexes=indexes, **pool)
    if weighted:
        attrs["weights"] = RNG.uniform(0.5, 2.0, len(indexes)).round(3).tolist()
    model = check_import(one_node("TfIdfVectorizer", {"x": x}, opset=9, **attrs), {"x": x},
                         rtol=0, atol=0)
    check_export(model, {"x": x}, rtol=0, atol=0)
    check_runtime(model, {"x": x}, rtol=0, atol=0)
