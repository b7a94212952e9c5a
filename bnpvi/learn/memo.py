"""Memoized VB (Hughes 2016 thesis §3.5.3, Alg. 3.3): exact per-batch cache swap, global step after every batch."""
from __future__ import annotations

from bnpvi.learn.base import Algorithm
from bnpvi.learn.work import process_batch
from bnpvi.moves import Edit, MoveSchedule
from bnpvi.stats import SuffStats


class MemoizedVB(Algorithm):
    """Memoized coordinate ascent over fixed batches, optionally with birth/merge/delete moves.

    State: one cache of summaries per batch and the whole-data aggregate
    Σ_b cache[b] (the summaries the globals are made from). Visiting batch b
    replaces its cache: aggregate ← aggregate − cache[b] + new, then a global step
    (in lap 1 of a model with ``full_first_pass``, such as an HMM whose batches each
    see only some states, the first global step waits for the end of the lap).
    From the end of lap 1 on, the aggregate summarises the current responsibilities
    of every atom, so the ELBO at the globals is the exact whole-data ELBO and never
    decreases. Caches made before a birth have fewer clusters; they are padded with
    empty clusters when next used (nested truncation, thesis Eq. 4.21).
    Local steps start from the batch's previous one where the model allows it
    (``Algorithm.warm_for``).

    Parameters
    ----------
    moves : the ``moves`` config node, or None for no moves.
    """

    name = "memo"

    def __init__(self, model, store, cfg, rng, globals_, ids, moves=None):
        super().__init__(model, store, cfg, rng, globals_, ids)
        self.caches = [None] * self.n_batches
        self.aggregate: SuffStats = model.empty_stats(globals_.K)
        self.moves = MoveSchedule(moves, rng, model.alloc.birth_kind) if moves is not None else None

    def start_lap(self) -> None:
        if self.moves is not None:
            self.moves.start_lap(self)

    def visit(self, b, batch) -> None:
        if self._visit_once(b, batch):
            self._visit_once(b, batch)  # a move rewrote this batch's cache mid-lap: refresh it

    def _visit_once(self, b, batch) -> bool:
        """One memoized update of batch b; whether a move then rewrote its cache."""
        plans = self.moves.batch_plans(self, b) if self.moves is not None else {}
        result = process_batch(self.model, self.globals, batch, plans, self.moves, self.warm_for(b))
        self.warm[b] = result.warm
        new, old = result.stats, self.caches[b]
        self.aggregate = self.aggregate + new if old is None else self.aggregate - old.pad_to(new.K) + new
        self.caches[b] = new
        if self.lap > 0 or not self.model.alloc.full_first_pass or self.pos == self.n_batches - 1:
            self.globals = self.model.global_step(self.aggregate, self.globals.alloc)
        return self.moves is not None and self.moves.after_batch(self, b, result.tracked)

    def apply(self, edit: Edit) -> None:
        super().apply(edit)
        self.aggregate = self.globals.stats

    def finish_lap(self):
        if self.moves is not None:
            self.moves.end_lap(self)
        self.sort_clusters()
        return self.elbo(), self.aggregate.N.copy()

    def lap_moves(self) -> dict:
        return {} if self.moves is None else dict(self.moves.counts)

    def cache_total(self) -> SuffStats:
        """Σ_b cache[b] (for checking that the aggregate has not drifted)."""
        total = self.model.empty_stats(self.aggregate.K)
        for cache in self.caches:
            if cache is not None:
                total = total + cache.pad_to(total.K)
        return total

    def state(self) -> dict:
        state = super().state()
        if self.aggregate is not self.globals.stats:
            state["aggregate"] = self.aggregate.to_tree()
        state["caches"] = {str(b): c.to_tree() for b, c in enumerate(self.caches) if c is not None}
        if self.moves is not None:
            state["moves"] = self.moves.state()
        return state

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.aggregate = SuffStats.from_tree(state["aggregate"]) if "aggregate" in state else self.globals.stats
        caches = state.get("caches", {})
        self.caches = [SuffStats.from_tree(caches[str(b)]) if str(b) in caches else None
                       for b in range(self.n_batches)]
        if self.moves is not None:
            self.moves.load_state(state["moves"])
