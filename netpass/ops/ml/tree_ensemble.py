"""TreeEnsemble (``ai.onnx.ml`` version 5): sums (or averages, min, max) of the leaf weights
that each row of ``X`` reaches in a forest of decision trees.

The forest is held as ONNX writes it: per interior node a split value, a feature, a comparison
mode, the ids its true and false branches go to and whether those ids name a leaf or another
node; per leaf a target and a weight; one root node per tree. The evaluation walks every row
down one tree at a time, all rows a level per step (numpy over the rows).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import NETPASS_OPSET, set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["tree_ensemble"]

ML = "ai.onnx.ml"
# nodes_modes: BRANCH_LEQ, LT, GTE, GT, EQ, NEQ, MEMBER
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AGGREGATES = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}
# post_transform: 0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO (4 PROBIT is refused)
POST_TRANSFORMS = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO"}
_NODE_LISTS = ("nodes_featureids", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
               "nodes_trueleafs", "nodes_falseleafs")


class TreeEnsemble(Node):
    """``Y [N, n_targets]`` from ``X [N, F]`` (float types; ``Y`` in ``X``'s): each tree
    sends a row from its root down (``X[feature] <mode> split``, NaN following the true branch
    where ``nodes_missing_value_tracks_true`` says so) to a leaf, whose weight goes to its
    target; the targets aggregate over the trees (``aggregate_function``), then
    ``post_transform`` applies per row. MEMBER nodes test membership in their run of
    ``membership_values`` (the runs end with NaN, one per MEMBER node in order)."""

    type_name = "TreeEnsemble"
    version = NETPASS_OPSET
    ATTRS = {
        "nodes_splits": None, "nodes_featureids": [], "nodes_modes": [],
        "nodes_truenodeids": [], "nodes_falsenodeids": [], "nodes_trueleafs": [],
        "nodes_falseleafs": [], "nodes_missing_value_tracks_true": [],
        "membership_values": None, "leaf_targetids": [], "leaf_weights": None,
        "tree_roots": [], "n_targets": 1, "aggregate_function": 1, "post_transform": 0}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "X must be a float tensor, got {}", et)
        self._check_forest()
        x = self.get_input_partial_shape(0)
        if x.rank_is_static:
            self.check(len(x) == 2, "X must be [N, F], got {}", x)
            features = max(self.nodes_featureids, default=-1) + 1
            self.check(x[1].max >= features, "the trees read feature {} but X has {}",
                       features - 1, x[1])
        batch = x[0] if x.rank_is_static else Dimension()
        self.set_output_type(0, et, PartialShape([batch, self.n_targets]))

    def _check_forest(self) -> None:
        splits, weights = self.nodes_splits, self.leaf_weights
        self.check(isinstance(splits, np.ndarray) and isinstance(weights, np.ndarray),
                   "needs nodes_splits and leaf_weights")
        n = len(splits)
        for name in _NODE_LISTS:
            self.check(len(getattr(self, name)) == n, "{} has {} entries, nodes_splits {}",
                       name, len(getattr(self, name)), n)
        tracks = self.nodes_missing_value_tracks_true
        self.check(not tracks or len(tracks) == n,
                   "nodes_missing_value_tracks_true has {} entries, nodes_splits {}",
                   len(tracks), n)
        leaves = len(weights)
        self.check(len(self.leaf_targetids) == leaves, "leaf_targetids has {} entries, "
                   "leaf_weights {}", len(self.leaf_targetids), leaves)
        self.check(self.n_targets >= 1, "n_targets must be >= 1, got {}", self.n_targets)
        self.check(all(0 <= t < self.n_targets for t in self.leaf_targetids),
                   "leaf_targetids {} out of range for n_targets={}", self.leaf_targetids,
                   self.n_targets)
        self.check(all(f >= 0 for f in self.nodes_featureids), "negative feature id in {}",
                   self.nodes_featureids)
        self.check(all(0 <= m <= MEMBER for m in self.nodes_modes), "nodes_modes {} must be "
                   "in 0..6", self.nodes_modes)
        for ids, leaf in (("nodes_truenodeids", "nodes_trueleafs"),
                          ("nodes_falsenodeids", "nodes_falseleafs")):
            for i, is_leaf in zip(getattr(self, ids), getattr(self, leaf)):
                self.check(0 <= i < (leaves if is_leaf else n), "{} holds {}, out of range "
                           "for {} {}", ids, i, leaves if is_leaf else n,
                           "leaves" if is_leaf else "nodes")
        self.check(len(self.tree_roots) >= 1 and all(0 <= r < n for r in self.tree_roots),
                   "tree_roots {} must name nodes (of {})", self.tree_roots, n)
        members = sum(m == MEMBER for m in self.nodes_modes)
        runs = 0 if self.membership_values is None else \
            int(np.isnan(np.asarray(self.membership_values, np.float64)).sum())
        self.check(runs == members, "{} MEMBER nodes but membership_values holds {} runs",
                   members, runs)
        self.check(self.aggregate_function in AGGREGATES, "aggregate_function {} must be in "
                   "0..3", self.aggregate_function)
        self.check(self.post_transform in POST_TRANSFORMS, "post_transform {} is not supported "
                   "(0..3: NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO)", self.post_transform)

    def _member_sets(self) -> dict[int, np.ndarray]:
        """node index -> its membership values, for the MEMBER nodes."""
        sets: dict[int, np.ndarray] = {}
        values = np.asarray(self.membership_values if self.membership_values is not None
                            else [], np.float64)
        ends = np.flatnonzero(np.isnan(values))
        start = 0
        nodes = [i for i, m in enumerate(self.nodes_modes) if m == MEMBER]
        for node, end in zip(nodes, ends):
            sets[node] = values[start:end]
            start = end + 1
        return sets

    def _leaves(self, x: np.ndarray) -> np.ndarray:
        """``[trees, N]``: the leaf each row reaches in each tree."""
        splits = self.nodes_splits.astype(np.float64)
        feats = np.asarray(self.nodes_featureids, np.int64)
        modes = np.asarray(self.nodes_modes, np.int64)
        true_ids = np.asarray(self.nodes_truenodeids, np.int64)
        false_ids = np.asarray(self.nodes_falsenodeids, np.int64)
        true_leaf = np.asarray(self.nodes_trueleafs, bool)
        false_leaf = np.asarray(self.nodes_falseleafs, bool)
        tracks = np.asarray(self.nodes_missing_value_tracks_true or [0] * len(splits), bool)
        members = self._member_sets()
        rows = np.arange(len(x))
        out = np.empty((len(self.tree_roots), len(x)), np.int64)
        for t, root in enumerate(self.tree_roots):
            cur = np.full(len(x), root, np.int64)
            done = np.zeros(len(x), bool)
            for _ in range(len(splits) + 1):
                if done.all():
                    break
                r, c = rows[~done], cur[~done]
                v = x[r, feats[c]].astype(np.float64)
                s, m = splits[c], modes[c]
                with np.errstate(invalid="ignore"):
                    go = np.select([m == LEQ, m == LT, m == GTE, m == GT, m == EQ, m == NEQ],
                                   [v <= s, v < s, v >= s, v > s, v == s, v != s], False)
                for node in np.unique(c[m == MEMBER]):
                    at = c == node
                    go[at] = np.isin(v[at], members[int(node)])
                go |= tracks[c] & np.isnan(v)
                cur[r] = np.where(go, true_ids[c], false_ids[c])
                done[r] = np.where(go, true_leaf[c], false_leaf[c])
            self.check(bool(done.all()), "tree {} (root {}) has a cycle", t, root)
            out[t] = cur
        return out

    def evaluate(self, inputs):
        x = inputs[0]
        self.check(x.ndim == 2, "X must be [N, F], got {}", x.shape)
        need = max(self.nodes_featureids, default=-1) + 1
        self.check(x.shape[1] >= need, "the trees read feature {} but X has {}", need - 1,
                   x.shape[1])
        leaves = self._leaves(x)
        weights = self.leaf_weights.astype(np.float64)[leaves]  # [trees, N]
        targets = np.asarray(self.leaf_targetids, np.int64)[leaves]
        n, k = len(x), self.n_targets
        rows = np.broadcast_to(np.arange(n), leaves.shape)
        agg = AGGREGATES[self.aggregate_function]
        y = np.zeros((n, k))
        if agg in ("SUM", "AVERAGE"):
            np.add.at(y, (rows, targets), weights)
            if agg == "AVERAGE":
                y /= len(self.tree_roots)
        else:
            # a target no leaf of a row reaches stays 0 (onnxruntime's choice)
            fill = np.inf if agg == "MIN" else -np.inf
            y[:] = fill
            (np.minimum if agg == "MIN" else np.maximum).at(y, (rows, targets), weights)
            y[y == fill] = 0.0
        return [_post_transform(y, POST_TRANSFORMS[self.post_transform]).astype(x.dtype)]


def _post_transform(y: np.ndarray, how: str) -> np.ndarray:
    if how == "LOGISTIC":
        return 1.0 / (1.0 + np.exp(-y))
    if how == "SOFTMAX":
        e = np.exp(y - y.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if how == "SOFTMAX_ZERO":  # zeros stay zero and take no part
        e = np.where(y != 0, np.exp(y - y.max(axis=1, keepdims=True)), 0.0)
        total = e.sum(axis=1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return y


def tree_ensemble(x: Any, name: str | None = None, **forest: Any) -> Node:
    """TreeEnsemble: ``x [N, F]`` through the forest given by ONNX's attributes (``nodes_*``,
    ``leaf_*``, ``tree_roots``, ``membership_values``, ``n_targets``, ``aggregate_function``,
    ``post_transform``)."""
    for key in ("nodes_splits", "leaf_weights", "membership_values"):
        if forest.get(key) is not None:
            forest[key] = np.asarray(forest[key]).reshape(-1)
    return set_name(TreeEnsemble([to_output(x)], **forest), name)


@onnx_rule("TreeEnsemble", since=5, domain=ML)
def _import_tree_ensemble(ctx):
    forest: dict[str, Any] = {}
    for key, default in TreeEnsemble.ATTRS.items():
        if key in ("nodes_splits", "leaf_weights", "membership_values", "nodes_modes"):
            value = ctx.attr(key)
            if value is not None:
                value = np.asarray(value).reshape(-1)
                if key == "nodes_modes":
                    value = [int(m) for m in value]
        else:
            value = ctx.attr(key, default)
        forest[key] = value
    if forest["post_transform"] == 4:
        ctx.error("post_transform PROBIT is not supported")
    return TreeEnsemble(ctx.inputs[:1], **forest)


@onnx_export(TreeEnsemble)
def _export_tree_ensemble(node, ectx):
    attrs = dict(node.get_attributes())
    attrs["nodes_modes"] = np.asarray(attrs["nodes_modes"], np.uint8)
    for key in ("nodes_missing_value_tracks_true", "membership_values"):
        if attrs[key] is None or not len(attrs[key]):
            del attrs[key]
    ectx.add_node("TreeEnsemble", ectx.inputs(node), ectx.outputs(node), domain=ML, version=5,
                  **attrs)
