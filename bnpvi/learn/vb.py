"""Full-data VB (Hughes 2016 thesis §3.5.1, Alg. 3.1): one local step over every batch, then one global step."""
from __future__ import annotations

from bnpvi.learn.base import Algorithm
from bnpvi.learn.work import BatchJob
from bnpvi.stats import SuffStats


class FullVB(Algorithm):
    """Block coordinate ascent; the ELBO never decreases from one lap to the next.

    A lap reads the batches one at a time (or as many at once as the pool has
    slots) with the globals fixed and adds their summaries in batch order, so
    memory is O(batch), not O(N), and the result does not depend on the pool; the
    global step and the ELBO come at the end of the lap.
    """

    name = "vb"
    shuffles = False

    def __init__(self, model, store, cfg, rng, globals_, ids, pool=None):
        super().__init__(model, store, cfg, rng, globals_, ids, pool)
        self.accum: SuffStats | None = None

    def start_lap(self) -> None:
        self.accum = self.model.empty_stats(self.globals.K)

    def visit_next(self) -> int:
        batches = self.next_batches(self.pool.slots)
        results = self.pool.run(self.model, self.globals, [BatchJob(b, warm=self.warm_for(b)) for b in batches])
        for b, result in zip(batches, results):
            self.warm[b] = result.warm
            self.accum = self.accum + result.stats
        return len(batches)

    def finish_lap(self):
        self.globals = self.model.global_step(self.accum, self.globals.alloc)
        self.accum = None
        self.sort_clusters()
        return self.elbo(), self.globals.stats.N.copy()

    def state(self) -> dict:
        state = super().state()
        if self.accum is not None:
            state["accum"] = self.accum.to_tree()
        return state

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.accum = SuffStats.from_tree(state["accum"]) if "accum" in state else None
