"""Delete proposals (Hughes 2016 thesis §4.3): remove cluster t, re-dividing the mass of A ∪ {t} among A.

r'_{n,A_j} = (r_nt + Σ_{ℓ∈A} r_nℓ) · p̃_nj with p̃_n = softmax_j(E log p(x_n|φ_{A_j}) + E ln π_{A_j})
(Eq. 4.25-4.27 with E ln π, the exact local-step optimum restricted to A) for every atom holding
more than ``FAINT_MASS`` of t; an atom holding none of t keeps its responsibilities (with dense
ones, the same thing: its r_{n,A} already is Σ_A r_nℓ · p̃_n), and a faint one (0 < r_nt ≤
``FAINT_MASS``) gives r_nt to the largest cluster of A (:func:`absorbed`). The proposal's summaries
for A are collected in every batch of the lap (§4.3.3) and the candidate is judged by the exact
whole-data ELBO at the end of the lap.

A model whose states interact (an HMM, ``whole_delete``) instead re-runs its local step
on every batch without the target (forward-backward over the other K − 1 states,
thesis §6.5.3 with every sequence a target), so the candidate's summaries, and its
ELBO, are exact for the whole data set; it then changes every cluster.

Up to ``max_per_lap`` deletes are tracked per lap (fewer where the allocation model caps them,
``AllocModel.deletes_per_lap``: the HDP topic model tracks one), vanishing targets first (less than
``VANISHING_MASS`` atoms in all: accepted unless they lower the ELBO beyond float noise, since their exact
gain is a few 1e-6 nats either way), then targets never tried, and judged in that order; once one is
accepted, the others whose clusters it changed are dropped (their tracked summaries describe clusters that
no longer exist).

Tracking a delete costs a restricted local step per batch (a whole local step for
``whole_delete`` models), so after laps in which every delete was rejected the move
waits: 0, 1, 3, then ``max_skip`` laps (at most) before it tries again; an accepted
delete resets the wait. A run does not converge while a delete is still waiting to
be tried, and it does not wait once a lap has met the convergence test and only the
moves keep it going (``MoveSchedule.settled``).
"""
from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from bnpvi.kernels import mixture as kernels
from bnpvi.alloc.base import Local
from bnpvi.data.batch import atom_weights
from bnpvi.moves.base import (FAINT_MASS, VANISHING_MASS, Move, accepts, accepts_removal, faint_stats, ordered_sum,
                              per_lap)
from bnpvi.moves.history import FailureLog
from bnpvi.moves.judge import Proposal, judge
from bnpvi.moves.protocols import TrackedDeletes, WholeDeletes
from bnpvi.moves.merge import merge_scores
from bnpvi.moves.whole import RunningTotals, Visit
from bnpvi.stats import Responsibilities, SuffStats


class DeleteMove(Move):
    """Deletes of the smallest eligible clusters, each absorbed by the ``absorb`` most alike clusters."""

    name = "delete"
    saved = {"failures": FailureLog, "idle": int, "next_lap": int, "proposals": list[np.ndarray],
             "tracked": dict[int, list[SuffStats]], "warm_after": dict[int, list[np.ndarray | None]],
             "totals": RunningTotals}

    def protocol(self, alloc) -> type:
        return WholeDeletes if alloc.whole_delete else TrackedDeletes

    def __init__(self, cfg):
        super().__init__(cfg)
        self.failures = FailureLog()
        self.idle = 0  # laps in a row whose deletes were all rejected
        self.next_lap = 0  # the first lap that may track deletes again
        self.reset()

    def reset(self) -> None:
        self.proposals: list[np.ndarray] = []  # ids [target, absorbing ...] of each delete
        self.tracked: dict[int, list[SuffStats]] = {}
        self.warm_after: dict[int, list] = {}  # whole deletes: each batch's warm start without the target
        self.totals = RunningTotals()  # whole deletes of a model with ``whole_totals``, instead of the two above

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        if run.lap + 1 < self.next_lap and not run.moves.settled:
            return set()
        limit = per_lap(self.cfg.max_per_lap, run.model.alloc.deletes_per_lap)
        self.proposals = self._choose(run, excluded, self.cfg.max_fails, limit)
        return {int(uids[0]) for uids in self.proposals}

    def _waited(self, lap: int, accepted: bool) -> None:
        """After lap ``lap``'s decisions: when may deletes be tracked again (module docstring)."""
        self.idle = 0 if accepted else self.idle + 1
        skip = min(2 ** max(self.idle - 1, 0) - 1, int(self.cfg.get("max_skip", 0) or 0))
        self.next_lap = lap + 1 + skip

    def pending(self, run) -> bool:
        """A target never tried, or changed since it was last rejected (retries up to ``max_fails`` do
        not hold a run that has otherwise converged)."""
        return self.active(run.lap + 1) and bool(self._choose(run, set(), 1, 1))

    def _choose(self, run, excluded: set[int], max_fails: int, limit: int) -> list[np.ndarray]:
        """Up to ``limit`` deletes, ids [t, A...]: targets t are non-empty clusters holding at most
        ``max_size_frac`` of the data and not blocked by earlier rejections, vanishing ones first
        (``VANISHING_MASS``), then those tried fewer times, then the smallest; A: the ``absorb`` clusters with
        the highest merge score with t (none when the model re-runs its local step without t, ``whole_delete``).
        Only the targets are kept from other moves: births may target clusters of A too, and are
        dropped at the lap's end if a delete changed them (see ``MoveSchedule.end_lap``)."""
        stats, uids, cfg = run.globals.stats, run.ids.uids, self.cfg
        N = stats.N
        total = max(float(N.sum()), 1.0)
        free = [k for k in range(stats.K) if int(uids[k]) not in excluded]
        tries = np.array([self.failures.failures(u) for u in uids])
        chosen: list[np.ndarray] = []
        for t in np.lexsort((N, tries, N >= VANISHING_MASS)):
            t = int(t)
            if len(chosen) >= limit:
                break
            if (t not in free or N[t] <= 0 or N[t] > cfg.max_size_frac * total
                    or self.failures.blocked(uids[t], (N[t],), max_fails, cfg.retry_change)):
                continue
            others = np.array([k for k in free if k != t], dtype=np.intp)
            if others.size == 0:
                continue
            if run.model.alloc.whole_delete:  # the local step re-divides t's mass among all the others
                chosen.append(uids[[t]])
                continue
            pairs = np.stack([np.minimum(others, t), np.maximum(others, t)], axis=1)
            order = np.argsort(-merge_scores(run.model, run.globals, pairs), kind="stable")
            absorb = np.sort(others[order[: cfg.absorb]])
            chosen.append(uids[np.concatenate([[t], absorb])])
        return chosen

    def batch_plan(self, run, b: int):
        return [run.ids.positions(uids) for uids in self.proposals] or None

    uses_batch_stats = True  # A's own summaries of the batch spare a delete the atoms its target does not touch

    def track(self, model, globals_, batch, log_lik, local, plan, stats=None):
        """Per delete: summaries over A of this batch's proposal responsibilities (:func:`absorbed`, from the
        batch's summaries ``stats``, made here when not given), or, for a model
        with ``whole_delete``, the batch's whole summaries without the target and the warm start
        (``AllocModel.warm_state``) of that local step, where the batch starts if the delete is accepted; for a model
        with ``whole_totals``, the batch's whole summaries without each target and the :class:`Visit` they were
        made under (``bnpvi.moves.whole``)."""
        if model.alloc.whole_totals:
            visit = Visit(globals_.alloc, log_lik, np.array([int(p[0]) for p in plan], dtype=np.intp))
            return [summaries_without(model, batch, visit, i) for i in range(len(plan))], visit
        if model.alloc.whole_delete:
            out = []
            for positions in plan:
                without = model.alloc.local_step_without(batch, log_lik, globals_.alloc, int(positions[0]), local)
                out.append((model.summarize(batch, without), model.alloc.warm_state(without)))
            return out
        stats = model.summarize(batch, local) if stats is None else stats
        log_pi = model.alloc.expected_log_pi(globals_.alloc)
        N = globals_.stats.N
        return [(absorbed(model, batch, local.resp, log_lik, log_pi, int(positions[0]), positions[1:], stats,
                          int(np.argmax(N[positions[1:]]))), None) for positions in plan]

    def collect(self, run, schedule, b: int, tracked) -> None:
        if run.model.alloc.whole_totals:
            self.totals.add(b, *tracked)
            return
        self.tracked[b] = [stats for stats, _ in tracked]
        self.warm_after[b] = [warm for _, warm in tracked]

    def decide(self, run, schedule) -> None:
        if not self.proposals:
            return
        totals = run.model.alloc.whole_totals
        self.check_complete(run, self.totals if totals else self.tracked, "delete proposal")
        whole = run.model.alloc.whole_delete
        any_accepted = False
        for i, uids in enumerate(self.proposals):
            if schedule.changed & (set(run.ids.uids.tolist()) if whole else set(uids.tolist())):
                continue  # a whole-data candidate was tracked under clusters that have since changed
            pos = run.ids.positions(uids)
            target, absorb = int(pos[0]), pos[1:]
            stats = run.globals.stats
            if totals:
                total = self.totals.sums[i].pad_to(stats.K - 1)
            else:
                if whole:  # batches visited before a mid-lap birth have no mass on the fresh states
                    for b in self.tracked:
                        self.tracked[b][i] = self.tracked[b][i].pad_to(stats.K - 1)
                total = ordered_sum(self.tracked[b][i] for b in sorted(self.tracked))
            candidate = total if whole else stats.with_clusters(absorb, total).remove([target])
            sources = [[k] for k in range(stats.K) if k != target]
            if totals:  # each batch's summaries made again from the lap's visit (bnpvi.moves.whole)
                rewrite, warm = (lambda b, cache, i=i, K=stats.K - 1: summaries_without(
                    run.model, run.store.read_batch(b), self.totals.visits[b], i).pad_to(K)), None
            elif whole:  # the batches start where the candidate's local steps ended, not from the old N_d
                rewrite, warm = (lambda b, cache, i=i: self.tracked[b][i]), (
                    lambda b, w, i=i: self._warm_after(b, i, stats.K - 1))
            else:
                rewrite, warm = (lambda b, cache, absorb=absorb, target=target, i=i: cache.with_clusters(
                    absorb, self.tracked[b][i]).remove([target])), None
            changes = (set(run.ids.uids.tolist()) | {int(uids[0])}) if whole else set(uids.tolist())
            accepted = judge(run, schedule, Proposal(
                self.name, str(int(uids[0])), sources, rewrite, stats=candidate, changes=changes, warm=warm,
                rule=accepts_removal if stats.N[target] < VANISHING_MASS else accepts), run.elbo()).accepted
            self.failures.record(uids[0], accepted, (float(stats.N[target]),))
            any_accepted |= accepted
        self._waited(schedule.lap, any_accepted)

    def _warm_after(self, b: int, i: int, K: int):
        """Batch b's warm start under accepted whole delete i, with zero columns for topics born after it
        was tracked (None: the batch starts cold)."""
        warm = self.warm_after.get(b, [None] * (i + 1))[i]
        return None if warm is None else np.pad(warm, ((0, 0), (0, K - warm.shape[1])))


def summaries_without(model, batch, visit: Visit, i: int) -> SuffStats:
    """The batch's summaries with planned target i removed (``local_step_without``), under ``visit`` (the
    tracking of a model with ``whole_totals``, and its remaking)."""
    return model.summarize(batch, model.alloc.local_step_without(batch, visit.log_lik, visit.alloc, int(visit.plan[i])))


def absorbed(model, batch, resp, log_lik: np.ndarray, log_pi: np.ndarray, target: int, absorb: np.ndarray,
             stats: SuffStats, into: int) -> SuffStats:
    """One batch's summaries over the absorbing clusters A of the delete of ``target`` (module docstring).

    ``stats`` are the batch's summaries under ``resp``; ``into`` is the position in A of the cluster a faint
    atom's r_nt goes to. Only the atoms holding more than ``FAINT_MASS`` of t are read: one pass over them
    with the signed weights Δr_{n,A} = r'_{n,A} − r_{n,A} changes A's summaries of the batch into the
    proposal's, and the faint atoms' statistics are t's summaries less those of the read atoms
    (:func:`~bnpvi.moves.base.faint_stats`). Every
    field of a mixture's summaries is a sum over atoms, so the result is exact: the entropies change by
    Σ_n [h(r'_{n,A_j}) − h(r_{n,A_j})], h(r) = −r ln r, over the atoms whose responsibilities change.
    """
    r_t = resp.column(target)
    weights = atom_weights(batch)
    rows = np.flatnonzero(r_t > FAINT_MASS)
    faint = np.flatnonzero((r_t > 0) & (r_t <= FAINT_MASS))
    J = absorb.size
    atoms = batch.take(rows)
    out = stats.remap([[int(a)] for a in absorb])
    if rows.size:
        before = resp.matrix()[rows][:, absorb]
        before = before.toarray() if hasattr(before, "toarray") else np.asarray(before)
        after = model.alloc.restricted_local_step(r_t[rows] + before.sum(axis=1),
                                                  np.ascontiguousarray(log_lik[np.ix_(rows, absorb)]),
                                                  log_pi[absorb]).resp.values
        w = None if weights is None else weights[rows]
        change = Responsibilities(after - before, J, entropy_sums=_entropy(after, w) - _entropy(before, w), weights=w)
        out = out + model.summarize(atoms, Local(change))
    if faint.size:
        gained = faint_stats(model, stats.remap([[target]]), atoms, r_t[rows])
        had = resp.column(int(absorb[into]))[faint, None]
        w = None if weights is None else weights[faint]
        gained = gained.with_fields(H=_entropy(had + r_t[faint, None], w) - _entropy(had, w))
        out = out + gained.remap([[0] if j == into else [] for j in range(J)])
    return out.with_fields(n_atoms=np.float64(batch.n_atoms))



def _entropy(r: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ_n w_n h(r_nj) per column j, h(r) = −r ln r (0 at r = 0); w_n = 1 without ``weights``."""
    if weights is not None:
        return weights @ -xlogy(r, r)
    return kernels.entropy_of(np.ascontiguousarray(r, dtype=np.float64))
