"""Whole-data candidates kept as running totals: one summary per candidate, not one per batch.

A whole-data candidate (a merge of ``bnpvi.moves.whole_merge``, a delete of a model with
``whole_delete``) re-runs the local step on every batch under the lap's globals with its clusters
changed. Its batch summaries differ from the current ones in every entry, not only in the clusters
it changes: in an assortative MMSB each pair's normaliser Z_ij sums over every community
(Stephenson 2015 App. C Eq. 49-50), so merging a and b, or deleting t, moves every column of a
batch's node usage U_b, and U_b is dense over all N nodes. Judging the candidate needs only the
sum of its batch summaries; its batch summaries themselves are needed only if it is accepted, to
rewrite the memo caches (Hughes 2016 thesis §4.1.3, §4.3.3: the candidate's summaries replace each
batch's).

So a lap keeps, per candidate, the running sum of its batch summaries (:class:`RunningTotals`, in
the order the batches were visited), and per batch what its local step saw (:class:`Visit`: the
allocation globals of the batch's round, the driver's own arrays rather than a copy, and the
family's log-likelihood table). An accepted candidate's batch summaries are made again from the
visits while the caches are rewritten, one batch at a time: the same computation on the same inputs,
so bit for bit the summaries that were summed and judged. Only for models whose candidate local
steps need nothing else (``AllocModel.whole_totals``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnpvi.stats import SuffStats


@dataclass(frozen=True, eq=False)
class Visit:
    """What a batch's local step saw in this lap, enough to re-run a candidate's local step on it exactly.

    Attributes
    ----------
    alloc : dict
        The allocation globals of the batch's round (``Globals.alloc``; shared with the driver, not copied).
    log_lik : ndarray
        The family's expected log-likelihoods (``Model.local_step``'s first output).
    plan : ndarray of int
        The move's plan for the batch (cluster positions, one row per candidate).
    merged : ndarray or None
        Per merge candidate, the log-likelihood table of its merged cluster (``AllocModel.merged_log_liks``); None for deletes.
    """

    alloc: dict
    log_lik: np.ndarray
    plan: np.ndarray
    merged: np.ndarray | None = None

    def to_tree(self) -> dict:
        tree = {"alloc": dict(self.alloc), "log_lik": self.log_lik, "plan": self.plan}
        if self.merged is not None:
            tree["merged"] = self.merged
        return tree

    @classmethod
    def from_tree(cls, tree: dict) -> "Visit":
        merged = tree.get("merged")
        return cls({n: np.asarray(v) for n, v in tree["alloc"].items()}, np.asarray(tree["log_lik"]),
                   np.asarray(tree["plan"], dtype=np.intp), None if merged is None else np.asarray(merged))


class RunningTotals:
    """The running sums of a lap's whole-data candidates over the batches visited so far, and those batches'
    :class:`Visit` (module docstring)."""

    def __init__(self):
        self.sums: list[SuffStats] = []
        self.visits: dict[int, Visit] = {}

    def __len__(self) -> int:
        """How many batches were added."""
        return len(self.visits)

    def add(self, b: int, summaries: list[SuffStats], visit: Visit) -> None:
        """Batch b's summaries of every candidate, made under ``visit``."""
        self.sums = list(summaries) if not self.sums else [_padded_sum(t, s) for t, s in zip(self.sums, summaries)]
        self.visits[b] = visit

    def to_tree(self) -> dict:
        return {"sums": {str(m): s.to_tree() for m, s in enumerate(self.sums)},
                "visits": {str(b): v.to_tree() for b, v in self.visits.items()}}

    @classmethod
    def from_tree(cls, tree: dict) -> "RunningTotals":
        totals = cls()
        sums = tree.get("sums", {})
        totals.sums = [SuffStats.from_tree(sums[str(m)]) for m in range(len(sums))]
        totals.visits = {int(b): Visit.from_tree(v) for b, v in tree.get("visits", {}).items()}
        return totals


def _padded_sum(total: SuffStats, part: SuffStats) -> SuffStats:
    """total + part, the one with fewer clusters padded with empty ones (a batch visited before a mid-lap birth)."""
    K = max(total.K, part.K)
    return total.pad_to(K) + part.pad_to(K)
