"""Memoized VB (spec 01 §4.3, Alg. 3.3): exact per-batch cache swap, global step after every batch."""
from __future__ import annotations

import numpy as np

from bnpvi.learn.base import Algorithm
from bnpvi.stats import SuffStats


class MemoizedVB(Algorithm):
    """Memoized coordinate ascent over fixed batches.

    State: one cache of summaries per batch and the whole-data aggregate
    N^G = Σ_b N_b (likewise S, H). Visiting batch b replaces its cache:
    aggregate ← aggregate − cache[b] + new, then a global step. From the end of
    lap 1 on, the aggregate summarises the current responsibilities of every
    atom, so L*(aggregate) is the exact whole-data ELBO and never decreases.
    """

    name = "memo"

    def __init__(self, model, store, cfg, rng):
        super().__init__(model, store, cfg, rng)
        self.caches: list[SuffStats | None] = [None] * self.n_batches
        self.aggregate: SuffStats = model.empty_stats()

    def visit(self, b, batch) -> None:
        new = self.model.summarize(batch, self.model.local_step(batch))
        old = self.caches[b]
        self.aggregate = self.aggregate + new if old is None else self.aggregate - old.pad_to(new.K) + new
        self.caches[b] = new
        self.model.set_globals(self.aggregate)

    def finish_lap(self):
        stats = self.sort_clusters([self.aggregate] + self.caches)
        self.aggregate, self.caches = stats[0], stats[1:]
        return self.model.elbo(self.aggregate), self.aggregate.N.copy()

    def cache_total(self) -> SuffStats:
        """Σ_b cache[b] (for checking that the aggregate has not drifted)."""
        total = self.model.empty_stats()
        for cache in self.caches:
            if cache is not None:
                total = total + cache.pad_to(total.K)
        return total

    def state(self) -> dict:
        state = super().state()
        state["aggregate"] = self.aggregate.to_tree()
        state["cached"] = np.array([c is not None for c in self.caches])
        state["caches"] = {str(b): c.to_tree() for b, c in enumerate(self.caches) if c is not None}
        return state

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.aggregate = SuffStats.from_tree(state["aggregate"])
        caches = state.get("caches", {})
        self.caches = [SuffStats.from_tree(caches[str(b)]) if str(b) in caches else None
                       for b in range(self.n_batches)]
