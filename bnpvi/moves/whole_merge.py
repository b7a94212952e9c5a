"""Merges judged on a whole-data re-run of the local step (``AllocModel.merge_kind = "whole"``).

For a model whose merged summaries do not follow from the two clusters' own (an assortative MMSB:
merging communities a and b turns the pairs whose labels were (a, b) or (b, a), counted as
background ε pairs, into pairs inside the merged community, so its strength statistics, the
background counts and the entropy all change; Stephenson 2015 §6.2 mentions such merges but never
built them), every batch of the lap runs its local step a second time per candidate pair, with a
and b merged (``AllocModel.local_step_merged``), under merged strength log-likelihoods fixed for the lap
when it is planned (``AllocModel.merged_log_liks``: for the MMSB, those of the strength the merged
community will have, its pairs between a and b included). The candidate's summaries are then those of a
valid q for the whole data set, and its ELBO at its own global step is exact; the gain is that
ELBO minus the current one (as a whole delete, ``bnpvi.moves.delete``).

Pairs are ranked by the allocation model's ``merge_ranking`` (for the MMSB: how densely the two
communities' members are linked to each other), at most ``max_pairs`` per lap (and the model's
``merges_per_lap``), at most ``max_per_cluster`` per cluster. A whole-data candidate changes every
cluster, so at most one merge is accepted per lap: the one of largest gain. That one first gets up to
``AllocModel.merge_refine_laps`` whole-data laps of local and global steps under its own globals (each
kept only if it raises the candidate's ELBO): one local step after a merge can leave the merged
community's strength and the nodes' memberships far from where they settle, and a candidate judged
there loses to the current state (an MMSB's halves of one community, held together by mixed
memberships). Every refined candidate is still a valid q of the whole data set, so the gain stays exact.

A candidate keeps only the running sum of its batch summaries (``bnpvi.moves.whole``); the accepted one's are
made again while the caches are rewritten, from the lap's visits or under its last refinement's globals.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from bnpvi.moves.judge import Proposal, Verdict, install, log, weigh
from bnpvi.moves.protocols import WholeMerges
from bnpvi.moves.merge import MergeMove, merge_sources
from bnpvi.moves.whole import RunningTotals, Visit
from bnpvi.stats import SuffStats


class WholeMergeMove(MergeMove):
    """Merges of pairs ranked by ``merge_ranking``, each re-run on every batch, judged exactly (module docstring).

    Each pair keeps the running sum of its batch summaries and each batch its :class:`~bnpvi.moves.whole.Visit`;
    the accepted pair's batch summaries are made again from those (``bnpvi.moves.whole``)."""

    requires = WholeMerges
    saved = {"tracked": RunningTotals, "merged": np.ndarray}

    def reset(self) -> None:
        super().reset()
        self.tracked = RunningTotals()
        self.merged = np.zeros((0, 2, 1))

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        """The pairs (``MergeMove.plan``) and each one's merged strength log-likelihoods for the lap."""
        used = super().plan(run, rng, excluded)
        if used:
            pairs = run.ids.positions(self.pair_uids.ravel()).reshape(-1, 2)
            self.merged = run.model.alloc.merged_log_liks(run.model, run.globals, pairs, run.store)
        return used

    def batch_plan(self, run, b: int):
        """The planned pairs' positions and their merged strength log-likelihoods."""
        pairs = super().batch_plan(run, b)
        return None if pairs is None else {"pairs": pairs, "merged": self.merged}

    def _max_pairs(self, run) -> int:
        """``max_pairs``, and at most the model's ``merges_per_lap``."""
        cap = run.model.alloc.merges_per_lap
        return min(int(self.cfg.max_pairs), cap if cap is not None else int(self.cfg.max_pairs))

    def _pair_scores(self, run, pairs: np.ndarray) -> np.ndarray:
        """The allocation model's ``merge_ranking``."""
        return run.model.alloc.merge_ranking(run.globals.alloc, pairs, run.store)

    def track(self, model, globals_, batch, log_lik, local, plan):
        """The batch's whole summaries with each planned pair merged, and the :class:`Visit` they were made under."""
        visit = Visit(globals_.alloc, log_lik, np.asarray(plan["pairs"], dtype=np.intp).reshape(-1, 2),
                      np.asarray(plan["merged"], dtype=np.float64))
        return [merged_summaries(model, batch, visit, m) for m in range(visit.plan.shape[0])], visit

    def collect(self, run, schedule, b: int, tracked) -> None:
        self.tracked.add(b, *tracked)

    def decide(self, run, schedule) -> None:
        if not self.pair_uids.shape[0]:
            return
        self.check_complete(run, self.tracked, "merge pairs")
        if schedule.changed:
            return  # an earlier move changed the clusters these candidates were tracked under
        current = run.elbo()
        batches = sorted(self.tracked.visits)
        proposals, results = [], []
        for m, pair in enumerate(self.pair_uids):
            a, b = (int(p) for p in run.ids.positions(pair))
            sources = merge_sources(run.globals.K, a, b)
            proposals.append(Proposal(self.name, "+".join(str(int(u)) for u in pair), sources,
                                      # made_under is read when the edit is applied: the refinement's last
                                      lambda i, cache, m=m: self._batch_summaries(run, i, m, made_under),
                                      changes=set(self.plan_uids.tolist())))
            results.append(run.evaluate(self.tracked.sums[m], sources))
        best = int(np.argmax([value - current for value, _ in results]))
        made_under = None  # the globals the best candidate's batch summaries come from (None: the lap's visits)
        for _ in range(run.model.alloc.merge_refine_laps):  # whole-data laps under the best candidate's globals
            value, globals_ = results[best]
            refined = run.model.evaluate(_summed_lap(run, batches, globals_), globals_.alloc)
            if refined[0] - current <= value - current:
                break
            results[best], made_under = refined, globals_
        sizes = [tuple(run.globals.stats.N[run.ids.positions(pair)]) for pair in self.pair_uids]
        for m, (proposal, evaluated) in enumerate(zip(proposals, results)):
            verdict = weigh(run, replace(proposal, evaluated=evaluated), current)
            accepted = m == best and verdict.accepted
            if accepted:
                install(run, schedule, proposal, verdict)
            if accepted or not verdict.accepted:  # a good pair that lost to a better one is tried again
                self.failures.record(tuple(int(u) for u in self.pair_uids[m]), accepted, sizes[m])
            log(schedule, proposal, Verdict(verdict.gain, accepted))

    def _batch_summaries(self, run, i: int, m: int, made_under) -> SuffStats:
        """Batch i's summaries of accepted pair m, made again: from the lap's visit of the batch, or, after
        refinement laps, by the local step under the globals ``made_under`` of the last one kept."""
        batch = run.store.read_batch(i)
        if made_under is None:
            return merged_summaries(run.model, batch, self.tracked.visits[i], m)
        return run.model.summarize(batch, run.model.local_step(batch, made_under)[1])


def _summed_lap(run, batches: list[int], globals_) -> SuffStats:
    """Σ_b of the batches' summaries of a local step under ``globals_``, added in batch order as made (no batch's
    kept: an accepted candidate's are made again, ``WholeMergeMove._batch_summaries``)."""
    total = None
    for i in batches:
        batch = run.store.read_batch(i)
        part = run.model.summarize(batch, run.model.local_step(batch, globals_)[1])
        total = part if total is None else total + part
    return total


def merged_summaries(model, batch, visit: Visit, m: int) -> SuffStats:
    """The batch's summaries with planned pair m merged, under ``visit`` (the tracking, and its remaking)."""
    a, b = (int(p) for p in visit.plan[m])
    return model.summarize(batch, model.alloc.local_step_merged(batch, visit.log_lik, visit.alloc, a, b,
                                                                visit.merged[m]))
