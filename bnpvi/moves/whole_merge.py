"""Merges judged on a whole-data re-run of the local step (``AllocModel.merge_kind = "whole"``).

For a model whose merged summaries do not follow from the two clusters' own (an assortative MMSB:
merging communities a and b turns the pairs whose labels were (a, b) or (b, a), counted as
background ε pairs, into pairs inside the merged community, so its strength statistics, the
background counts and the entropy all change; Stephenson 2015 §6.2 mentions such merges but never
built them), every batch of the lap runs its local step a second time per candidate pair, with a
and b merged (``AllocModel.local_step_merged``). The candidate's summaries are then those of a
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
"""
from __future__ import annotations

import numpy as np

from bnpvi.moves.base import Edit, accepts, ordered_sum
from bnpvi.moves.merge import MergeMove, _merge_sources
from bnpvi.stats import SuffStats


class WholeMergeMove(MergeMove):
    """Merges of pairs ranked by ``merge_ranking``, each re-run on every batch, judged exactly (module docstring)."""

    def reset(self) -> None:
        super().reset()
        self.tracked: dict[int, list[SuffStats]] = {}

    def _max_pairs(self, run) -> int:
        """``max_pairs``, and at most the model's ``merges_per_lap``."""
        cap = run.model.alloc.merges_per_lap
        return min(int(self.cfg.max_pairs), cap if cap is not None else int(self.cfg.max_pairs))

    def _pair_scores(self, run, pairs: np.ndarray) -> np.ndarray:
        """The allocation model's ``merge_ranking``."""
        return run.model.alloc.merge_ranking(run.globals.alloc, pairs, run.store)

    def track(self, model, globals_, batch, log_lik, local, plan):
        """The batch's whole summaries with each planned pair merged."""
        out = []
        for a, b in np.asarray(plan, dtype=np.intp):
            merged = model.alloc.local_step_merged(batch, log_lik, globals_.alloc, int(a), int(b),
                                                   merged_log_lik(model, globals_, batch, int(a), int(b)))
            out.append(model.summarize(batch, merged))
        return out

    def collect(self, run, schedule, b: int, tracked) -> None:
        self.tracked[b] = tracked

    def decide(self, run, schedule) -> None:
        if not self.pair_uids.shape[0]:
            return
        self.check_complete(run, self.tracked, "merge pairs")
        if schedule.changed:
            return  # an earlier move changed the clusters these candidates were tracked under
        current = run.elbo()
        batches = sorted(self.tracked)
        results = []
        for m, pair in enumerate(self.pair_uids):
            a, b = (int(p) for p in run.ids.positions(pair))
            sources = _merge_sources(run.globals.K, a, b)
            value, globals_ = run.evaluate(ordered_sum(self.tracked[i][m] for i in batches), sources)
            results.append((value - current, sources, globals_))
        best = int(np.argmax([gain for gain, _, _ in results]))
        caches = {i: self.tracked[i][best] for i in batches}
        for _ in range(run.model.alloc.merge_refine_laps):  # whole-data laps under the best candidate's globals
            gain, sources, globals_ = results[best]
            refined = {i: run.model.summarize(batch, run.model.local_step(batch, globals_)[1])
                       for i, batch in ((i, run.store.read_batch(i)) for i in batches)}
            value, refined_globals = run.model.evaluate(ordered_sum(refined[i] for i in batches), globals_.alloc)
            if value - current <= gain:
                break
            results[best], caches = (value - current, sources, refined_globals), refined
        sizes = [tuple(run.globals.stats.N[run.ids.positions(pair)]) for pair in self.pair_uids]
        for m, (gain, sources, globals_) in enumerate(results):
            ua, ub = (int(u) for u in self.pair_uids[m])
            accepted = m == best and accepts(gain, current)
            if accepted:
                run.apply(Edit(sources, lambda i, cache: caches[i], globals_))
                schedule.changed |= set(self.plan_uids.tolist())
            if accepted or not accepts(gain, current):  # a good pair that lost to a better one is tried again
                self.failures.record((ua, ub), accepted, sizes[m])
            schedule.event(self.name, f"{ua}+{ub}", gain, accepted)

    def state(self) -> dict:
        return {"pair_uids": self.pair_uids, "plan_uids": self.plan_uids, "failures": self.failures.state(),
                "tracked": {str(b): {str(i): s.to_tree() for i, s in enumerate(v)} for b, v in self.tracked.items()}}

    def load_state(self, state: dict) -> None:
        self.pair_uids = np.asarray(state["pair_uids"], dtype=np.int64).reshape(-1, 2)
        self.plan_uids = np.asarray(state["plan_uids"], dtype=np.int64)
        self.failures.load_state(state["failures"])
        self.tracked = {int(b): [SuffStats.from_tree(v[str(i)]) for i in range(len(v))]
                        for b, v in state.get("tracked", {}).items()}


def merged_log_lik(model, globals_, batch, a: int, b: int) -> np.ndarray:
    """The family's expected log-likelihood of the batch's atoms under cluster a and b merged: the posterior of
    their summed summaries (one column)."""
    stats = globals_.stats
    N = np.maximum(stats.N[[a]] + stats.N[[b]], 0.0)
    fields = {name: v[[a]] + v[[b]] for name, v in stats.select(model.obs_fields).items()}
    return model.alloc.expected_log_lik(model.obs, model.obs.posterior(N, fields), batch)
