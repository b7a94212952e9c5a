"""Full-data VB (spec 01 §4.1, Alg. 3.1): one local step over every batch, then one global step."""
from __future__ import annotations

from bnpvi.learn.base import Algorithm
from bnpvi.stats import SuffStats


class FullVB(Algorithm):
    """Block coordinate ascent; the ELBO never decreases from one lap to the next.

    A lap reads the batches one at a time with the globals fixed and adds their
    summaries, so memory is O(batch), not O(N); the global step and the ELBO come
    at the end of the lap.
    """

    name = "vb"
    shuffles = False

    def __init__(self, model, store, cfg, rng):
        super().__init__(model, store, cfg, rng)
        self.accum: SuffStats | None = None

    def start_lap(self) -> None:
        self.accum = self.model.empty_stats()

    def visit(self, b, batch) -> None:
        resp = self.model.local_step(batch)
        self.accum = self.accum + self.model.summarize(batch, resp)

    def finish_lap(self):
        self.model.set_globals(self.accum)
        (stats,) = self.sort_clusters([self.accum])
        self.accum = None
        return self.model.elbo(stats), stats.N.copy()

    def state(self) -> dict:
        state = super().state()
        if self.accum is not None:
            state["accum"] = self.accum.to_tree()
        return state

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.accum = SuffStats.from_tree(state["accum"]) if "accum" in state else None
