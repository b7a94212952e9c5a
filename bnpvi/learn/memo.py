"""Memoized VB (Hughes 2016 thesis §3.5.3, Alg. 3.3): exact per-batch cache swap, global step after every
batch, or after every round of P batches (parallel memoized VI, thesis §8.1; docs/parallel.md)."""
from __future__ import annotations

import functools
import operator
from dataclasses import replace

import numpy as np

from bnpvi.data.base import piece_range
from bnpvi.errors import check_int
from bnpvi.learn.base import Algorithm
from bnpvi.learn.cache import MemoryCaches
from bnpvi.learn.work import BatchJob, BatchResult
from bnpvi.moves import Edit, MoveSchedule
from bnpvi.stats import SuffStats


def joined(parts: list[BatchResult]) -> BatchResult:
    """The result of a batch worked on in pieces (``MemoizedVB._work``): the pieces' summaries added in order,
    their warm starts stacked; nothing tracked (pieces are cut only in rounds that track no move)."""
    if len(parts) == 1:
        return parts[0]
    warm = [part.warm for part in parts]
    return BatchResult(functools.reduce(operator.add, (part.stats for part in parts)), {},
                       None if any(w is None for w in warm) else np.concatenate(warm))


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

    Rounds: the batches are visited P at a time (``batches_per_round``). The P
    batches of a round are planned in turn and worked on under the same globals
    (in parallel, by the pool); then their caches are swapped in batch order and
    one global step follows. Each swap keeps the aggregate the sum of the caches and
    each local step is optimal for its batch given the round's globals, so the ELBO
    still never decreases after lap 1; the run depends on P but not on the pool nor
    on the order in which the work finishes. A round ends early after a batch whose
    plan the next batch's plan depends on (``MoveSchedule.ends_round``, e.g. the batch
    that seeds births). The moves' mid-lap decisions (``MoveSchedule.after_batch``)
    come after the round's global step, batch by batch; a batch whose cache a decision
    rewrote is visited again (a refresh, itself a round). P = 1 is plain memoized VI. A round of fewer
    than P batches that tracks no move is worked on in P pieces (``_work``).

    Parameters
    ----------
    moves : the ``moves`` config node, or None for no moves.
    pool : where the batches' work runs (``Algorithm``).
    caches : MemoryCaches or DiskCaches, optional
        The per-batch caches (default: in memory).
    batches_per_round : int
        P, batches worked on under the same globals.
    """

    name = "memo"

    def __init__(self, model, store, cfg, rng, globals_, ids, moves=None, pool=None, caches=None,
                 batches_per_round: int = 1):
        super().__init__(model, store, cfg, rng, globals_, ids, pool)
        self.caches = MemoryCaches(self.n_batches) if caches is None else caches
        self.aggregate: SuffStats = model.empty_stats(globals_.K)
        self.moves = (MoveSchedule(moves, rng, model.alloc.birth_kind, model.alloc.merge_kind)
                      if moves is not None else None)
        if self.moves is not None:
            self.moves.check_offers(model.alloc)
        self.batches_per_round = check_int(batches_per_round, "alg.batches_per_round", 1)
        self.round: list[int] = []  # the batches of the round being visited

    def start_lap(self) -> None:
        if self.moves is not None:
            self.moves.start_lap(self)

    def plan_batch(self, b: int) -> BatchJob:
        """Batch b's job under the current globals: what the moves track in it and where its local step starts."""
        plans = self.moves.batch_plans(self, b) if self.moves is not None else {}
        return BatchJob(b, plans, self.warm_for(b))

    def visit_next(self) -> int:
        """One round (class docstring): plan, work, swaps in batch order, one global step, then the moves'
        mid-lap decisions and the refresh of the batches they rewrote."""
        start = self.pos
        jobs = []
        for pos in range(start, min(start + self.batches_per_round, self.n_batches)):
            jobs.append(self._planned_at(pos))
            if self.moves is not None and self.moves.ends_round(jobs[-1].plans):
                break
        self.round = [job.b for job in jobs]
        rewritten = self._visit(start, jobs)
        if rewritten:  # a move rewrote these batches' caches mid-lap: refresh them
            self._visit(start, [self._planned_at(start + self.round.index(b)) for b in rewritten])
        self.pos = start
        return len(jobs)

    def _planned_at(self, pos: int) -> BatchJob:
        """The job of the batch at position ``pos`` of the lap's order (its plans see that position)."""
        self.pos = pos
        return self.plan_batch(int(self.order[pos]))

    def _visit(self, start: int, jobs: list[BatchJob]) -> list[int]:
        """Work on ``jobs`` (batches of the round that starts at position ``start``) under the current
        globals, swap their caches in order, one global step, the moves' mid-lap decisions; returns the
        batches whose caches a decision rewrote."""
        results = self._work(jobs)
        for job, result in zip(jobs, results):
            self.warm[job.b] = result.warm
            new, old = result.stats, self.caches[job.b]
            self.aggregate = self.aggregate + new if old is None else self.aggregate - old.pad_to(new.K) + new
            self.caches[job.b] = new
        last = start + len(self.round) - 1
        if self.lap > 0 or not self.model.alloc.full_first_pass or last == self.n_batches - 1:
            self.globals = self.model.global_step(self.aggregate, self.globals.alloc)
        if self.moves is None:
            return []
        rewritten = []
        for job, result in zip(jobs, results):
            self.pos = start + self.round.index(job.b)
            if self.moves.after_batch(self, job.b, result.tracked):
                rewritten.append(job.b)
        return rewritten

    def _work(self, jobs: list[BatchJob]) -> list[BatchResult]:
        """The pool's results of ``jobs``, in order. A round of fewer than P batches that tracks no move (the
        last round of a lap whose batches P does not divide) would leave workers idle: its batches are cut into
        P pieces of contiguous units (documents, sequences, points), worked on as P jobs and added up again in
        order, each piece's local step starting from its rows of the batch's warm start. The cut depends on P
        and the round alone, so the run is the same on any pool; the sum is the batch's summaries up to the
        order of the additions (local steps are per unit)."""
        P, m = self.batches_per_round, len(jobs)
        if m >= P or any(job.plans for job in jobs):
            return self.pool.run(self.model, self.globals, jobs, self.moves)
        sizes = self.store.batch_sizes()
        cut, counts = [], []
        for idx, job in enumerate(jobs):
            size = int(sizes[job.b])
            n = min(P // m + (idx < P % m), size)
            counts.append(max(n, 1))
            if n <= 1:
                cut.append(job)
                continue
            for i in range(n):
                lo, hi = piece_range(0, size, i, n)
                cut.append(replace(job, piece=(i, n), warm=None if job.warm is None else job.warm[lo:hi]))
        results = iter(self.pool.run(self.model, self.globals, cut, self.moves))
        return [joined([next(results) for _ in range(count)]) for count in counts]

    def apply(self, edit: Edit) -> None:
        if self.moves is not None:
            self.moves.before_edit(self, edit)
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
        state["caches"] = self.caches.state()
        state["batches_per_round"] = self.batches_per_round
        if self.moves is not None:
            state["moves"] = self.moves.state()
        return state

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.aggregate = SuffStats.from_tree(state["aggregate"]) if "aggregate" in state else self.globals.stats
        self.caches.load(state.get("caches", {}))
        if self.moves is not None:
            self.moves.load_state(state["moves"])

    def checkpointed(self) -> None:
        self.caches.committed()

    def close(self) -> None:
        self.caches.close()
