"""Memoized VB (spec 01 §4.3, Alg. 3.3): exact per-batch cache swap, global step after every batch."""
from __future__ import annotations


from bnpvi.learn.base import Algorithm
from bnpvi.moves import MoveSchedule
from bnpvi.stats import SuffStats
from bnpvi.stats.resp import Responsibilities


class MemoizedVB(Algorithm):
    """Memoized coordinate ascent over fixed batches, optionally with birth/merge/delete moves.

    State: one cache of summaries per batch and the whole-data aggregate
    N^G = Σ_b N_b (likewise S, H). Visiting batch b replaces its cache:
    aggregate ← aggregate − cache[b] + new, then a global step. From the end of
    lap 1 on, the aggregate summarises the current responsibilities of every
    atom, so L*(aggregate) is the exact whole-data ELBO and never decreases.
    Caches made before a birth have fewer columns; they are zero-padded when next
    used (nested truncation, Eq. 4.21).

    Parameters
    ----------
    moves : the ``moves`` config node, or None for no moves.
    """

    name = "memo"

    def __init__(self, model, store, cfg, rng, moves=None):
        super().__init__(model, store, cfg, rng)
        self.caches: list[SuffStats | None] = [None] * self.n_batches
        self.aggregate: SuffStats = model.empty_stats()
        self.moves = MoveSchedule(moves, rng) if moves is not None else None

    def start_lap(self) -> None:
        if self.moves is not None:
            self.moves.start_lap(self)

    def visit(self, b, batch) -> None:
        model = self.model
        log_lik, log_pi = model.expected_log_lik(batch), model.log_pi
        resp = Responsibilities.from_weights(log_lik, log_pi)
        new = model.summarize(batch, resp)
        if self.moves is not None:
            self.moves.track(self, b, batch, log_lik, log_pi, resp)
        old = self.caches[b]
        self.aggregate = self.aggregate + new if old is None else self.aggregate - old.pad_to(new.K) + new
        self.caches[b] = new
        model.set_globals(self.aggregate)

    def finish_lap(self):
        if self.moves is not None:
            self.moves.end_lap(self)
        stats = self.sort_clusters([self.aggregate] + [c if c is None else c.pad_to(self.aggregate.K) for c in self.caches])
        self.aggregate, self.caches = stats[0], stats[1:]
        return self.model.elbo(self.aggregate), self.aggregate.N.copy()

    def lap_moves(self) -> dict:
        return {} if self.moves is None else dict(self.moves.counts)

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
        state["caches"] = {str(b): c.to_tree() for b, c in enumerate(self.caches) if c is not None}
        if self.moves is not None:
            state["moves"] = self.moves.state()
        return state

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.aggregate = SuffStats.from_tree(state["aggregate"])
        caches = state.get("caches", {})
        self.caches = [SuffStats.from_tree(caches[str(b)]) if str(b) in caches else None
                       for b in range(self.n_batches)]
        if self.moves is not None:
            self.moves.load_state(state["moves"])
