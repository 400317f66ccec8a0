"""A stateful netpass request and onnxruntime on the plain export, stepped together.

onnxruntime runs the export as exported, its cache fed back from the host; the request holds
its cache in its variables. Each step feeds both the same tokens, attention mask (all of it:
past and new) and positions (from the mask, Hugging Face's left-padding convention), and
compares the logits of the real (unpadded) tokens within rel. L2 ``RTOL_L2`` and the greedy
choices of the last position (where onnxruntime's two best are further apart than the
tolerance: closer ones are a tie).
"""
from __future__ import annotations

import numpy as np

RTOL_L2 = 1e-4


def left_padded(rng: np.random.Generator, vocab: int, lengths: list[int]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Prompts of ``lengths`` tokens, left-padded to the longest: (ids, mask)."""
    width = max(lengths)
    ids = np.zeros((len(lengths), width), np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, width - n:] = rng.integers(1, vocab, n)
        mask[row, width - n:] = 1
    return ids, mask


class Twin:
    """``req`` (a stateful request) and ``session`` (onnxruntime on ``dec``'s plain export)
    decoding ``batch`` sequences from an empty cache."""

    def __init__(self, req, session, dec, batch: int) -> None:
        self.req, self.session, self.dec = req, session, dec
        self.names = [o.name for o in session.get_outputs()]
        self.takes = {i.name for i in session.get_inputs()}
        self.start(batch)

    def start(self, batch: int) -> None:
        """A new sequence on both sides (the request's state reset)."""
        self.req.reset_state()
        self.cache = {n: np.zeros(self.dec.past_shape(n, batch, 0), np.float32)
                      for n in self.dec.past_names}
        self.mask = np.zeros((batch, 0), np.int64)

    def feeds(self, ids: np.ndarray, new_mask: np.ndarray | None = None,
              extra: int = 0) -> dict[str, np.ndarray]:
        """The inputs of a step of ``ids``; ``extra``: that many more mask positions than past
        + new, zeros after them (the export reads the first past + new: were the last read,
        the new tokens would be masked)."""
        new_mask = np.ones_like(ids) if new_mask is None else new_mask
        mask = np.concatenate([self.mask, new_mask, np.zeros((ids.shape[0], extra), np.int64)],
                              1)
        seen = mask[:, :mask.shape[1] - extra]
        pos = (np.cumsum(seen, 1) - 1).clip(min=0)[:, -ids.shape[1]:]
        feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": pos}
        return {k: v for k, v in feeds.items() if k in self.takes}

    def step(self, ids: np.ndarray, new_mask: np.ndarray | None = None,
             extra: int = 0) -> np.ndarray:
        """One step on both sides, compared; the greedy next tokens ``[batch, 1]``."""
        new_mask = np.ones_like(ids) if new_mask is None else new_mask
        feeds = self.feeds(ids, new_mask, extra)
        want = dict(zip(self.names, self.session.run(None, {**feeds, **self.cache})))
        got = self.req.infer(feeds)["logits"]
        keep = new_mask.astype(bool)
        err = np.linalg.norm(got[keep] - want["logits"][keep]) / \
            np.linalg.norm(want["logits"][keep])
        assert err <= RTOL_L2, f"{ids.shape[1]} tokens over {self.mask.shape[1]}: {err:.2e}"
        last, mine = want["logits"][:, -1], got[:, -1]
        top = np.sort(last, -1)[:, -2:]
        clear = top[:, 1] - top[:, 0] > RTOL_L2 * np.linalg.norm(last, axis=-1)
        np.testing.assert_array_equal(mine.argmax(-1)[clear], last.argmax(-1)[clear])
        self.cache = {p: want[r] for p, r in zip(self.dec.past_names, self.dec.present_names)}
        self.mask = np.concatenate([self.mask, new_mask], 1)
        return last.argmax(-1)[:, None]

    def decode(self, first: np.ndarray, steps: int) -> np.ndarray:
        """``steps`` single-token steps from the tokens ``first``; the last choice."""
        nxt = first
        for _ in range(steps):
            nxt = self.step(nxt)
        return nxt

    def copy_into(self, other: Twin) -> None:
        """``other`` continues from this twin's sequence: the request's states copied through
        ``query_state``, onnxruntime's cache and mask copied."""
        states = {s.name: s.state for s in self.req.query_state()}
        for s in other.req.query_state():
            s.state = states[s.name]
        other.cache, other.mask = dict(self.cache), self.mask.copy()
