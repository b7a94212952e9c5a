"""Merge proposals (Hughes 2016 thesis §4.1): combine two clusters' responsibilities, r'_A = r_A + r_B.

Linear summaries add (Eq. 4.2); the non-linear ("tracked") ones, such as the
merged entropy −Σ_n (r_nA + r_nB) ln(r_nA + r_nB) (Eq. 4.3), must come from the
responsibilities, so candidate pairs are fixed at the start of a lap, their tracked
terms are collected in every batch (§4.1.3), and at the end of the lap the pairs
are judged greedily by the exact whole-data ELBO; a pair whose cluster took part
in an earlier accepted merge is skipped (its tracked terms are stale). A K x K
tracked field (an HMM's entropy table) is tracked as the merged state's row and
column; after an earlier merge of the lap, the entries at that merged state are
unknown and taken as 0, so the gain is a lower bound (thesis §6.5.1), logged as
not exact in ``moves.csv``.
"""
from __future__ import annotations

import numpy as np

from bnpvi.moves.base import Move, alloc_part, ordered_sum
from bnpvi.moves.judge import Proposal, judge
from bnpvi.moves.protocols import TrackedMerges
from bnpvi.moves.history import FailureLog
from bnpvi.stats import SuffStats

SCREEN_RTOL = 1e-4
"""A merge candidate whose gain at the warm-start global parameters (``AllocModel.warm_start``: the merged
sticks of the current ones) is below −SCREEN_RTOL |L| is rejected without its own global step (an
Newton fit of the sticks, ``hdp_top.optimize``), and logged with that gain, a lower bound (``exact`` False). Fitting the
sticks raised the gain by 0.4 nats (median) and 69 nats at most over 749 candidates of the HDP topic
model on the wiki corpus (|L| = 2.0e7, so the threshold is 2,000 nats), where the rejected candidates'
gains were −100 to −40,000 nats. Only for allocation models whose ``warm_start`` gives complete global
parameters (``AllocModel.warm_is_params``); the others are always judged at their global step."""


def data_merge_scores(model, stats: SuffStats, pairs: np.ndarray) -> np.ndarray:
    """ΔL_data of merging each pair: L_data*(A ∪ B) − L_data*(A) − L_data*(B) (thesis Eq. 4.6)."""
    N = np.maximum(stats.N, 0.0)
    fields = stats.select(model.obs_fields)
    base = model.obs.log_marginal(N, fields)
    return model.obs.merged_log_marginal(N, fields, pairs) - base[pairs[:, 0]] - base[pairs[:, 1]]


def merge_scores(model, globals_, pairs) -> np.ndarray:
    """m-score of each pair (a < b): ΔL without the tracked terms (thesis Eq. 4.10).

    For mixtures merging never raises the entropy, so the m-score bounds the exact
    gain from above and pairs with m-score ≤ 0 can never be accepted.
    """
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    if pairs.shape[0] == 0:
        return np.zeros(0)
    stats = globals_.stats
    return data_merge_scores(model, stats, pairs) + model.alloc.merge_score(stats, globals_.alloc, pairs)


class MergeMove(Move):
    """Merges for memoized VI: pairs by m-score at lap start, tracked terms every batch, exact test at lap end."""

    name = "merge"
    saved = {"pair_uids": np.ndarray, "plan_uids": np.ndarray, "failures": FailureLog, "tracked": dict[int, dict]}
    requires = TrackedMerges

    def __init__(self, cfg):
        super().__init__(cfg)
        self.failures = FailureLog()
        self.reset()

    def reset(self) -> None:
        self.pair_uids = np.zeros((0, 2), dtype=np.int64)
        self.plan_uids = np.zeros(0, dtype=np.int64)
        self.tracked: dict[int, dict] = {}

    # ---------------------------------------------------------------- plan
    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        chosen = self._choose(run, excluded)
        if not chosen.size:
            return set()
        self.pair_uids = run.ids.uids[chosen]
        self.plan_uids = run.ids.uids.copy()
        return set(self.pair_uids.ravel().tolist())

    def pending(self, run) -> bool:
        return self.active(run.lap + 1) and self._choose(run, set()).size > 0

    def _choose(self, run, excluded: set[int]) -> np.ndarray:
        """The top ``max_pairs`` pairs by m-score > 0, at most ``max_per_cluster`` per cluster,
        skipping pairs whose earlier rejection still stands; (P, 2) positions."""
        stats, uids = run.globals.stats, run.ids.uids
        none = np.zeros((0, 2), dtype=np.intp)
        if stats.K < 2:
            return none
        # the config node is read once: attribute access on it costs microseconds
        max_pairs, per_cluster = self._max_pairs(run), int(self.cfg.max_per_cluster)
        pairs = _allowed_pairs(uids, excluded)
        pairs = pairs[~self._blocked(pairs, uids, stats.N, float(self.cfg.retry_change))]
        if pairs.shape[0] == 0:
            return none
        scores = self._pair_scores(run, pairs)  # only the pairs that may be chosen are scored
        chosen, used = [], {}
        for m in np.argsort(-scores, kind="stable"):
            if scores[m] <= 0 or len(chosen) >= max_pairs:
                break
            i, j = (int(x) for x in pairs[m])
            if used.get(i, 0) >= per_cluster or used.get(j, 0) >= per_cluster:
                continue
            chosen.append((i, j))
            used[i] = used.get(i, 0) + 1
            used[j] = used.get(j, 0) + 1
        return np.array(chosen, dtype=np.intp).reshape(-1, 2)

    def _max_pairs(self, run) -> int:
        """How many pairs a lap may track: ``max_pairs``."""
        return int(self.cfg.max_pairs)

    def _pair_scores(self, run, pairs: np.ndarray) -> np.ndarray:
        """(P,) how promising each pair is, > 0 to be tried: the m-score of the tracked terms (``merge_scores``)."""
        return merge_scores(run.model, run.globals, pairs)

    def _blocked(self, pairs: np.ndarray, uids: np.ndarray, N: np.ndarray, retry_change: float) -> np.ndarray:
        """Which pairs (positions a < b) an earlier rejection still blocks (one failure, neither cluster's size
        changed by more than ``retry_change`` since); found from the rejections on record, not pair by pair."""
        K, position = uids.shape[0], {int(u): i for i, u in enumerate(uids)}
        blocked = []  # codes i K + j of the blocked pairs
        for key in self.failures.entries:
            if len(key) != 2 or key[0] not in position or key[1] not in position:
                continue
            i, j = position[key[0]], position[key[1]]  # a pair is on record as (ids of a, b) with a < b
            if i < j and self.failures.blocked(key, (N[i], N[j]), 1, retry_change):
                blocked.append(i * K + j)
        return np.isin(pairs[:, 0] * K + pairs[:, 1], np.array(blocked, dtype=np.int64))

    def batch_plan(self, run, b: int):
        if not self.pair_uids.shape[0]:
            return None
        return run.ids.positions(self.pair_uids.ravel()).reshape(-1, 2).astype(np.int64)

    # ---------------------------------------------------------------- track
    def track(self, model, globals_, batch, log_lik, local, plan):
        """The tracked terms of every planned pair in this batch (thesis §4.1.3)."""
        return model.alloc.merge_terms(local, plan)

    def collect(self, run, schedule, b: int, tracked) -> None:
        self.tracked[b] = tracked
        uids, n = run.ids.uids, self.plan_uids.shape[0]
        if uids.shape[0] > n and np.array_equal(uids[:n], self.plan_uids):
            self.plan_uids = uids.copy()  # states born mid-lap: appended, tracked from here on

    def _padded(self, tracked: dict, tables: set) -> dict:
        """A batch's tracked values with K x K rows and columns padded to the plan's states: a batch
        visited before a mid-lap birth has no mass on the fresh states, so their entries are 0 exactly."""
        K = self.plan_uids.shape[0]
        return {name: np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, K - v.shape[-1])]) if name in tables else v
                for name, v in tracked.items()}

    # --------------------------------------------------------------- decide
    def decide(self, run, schedule) -> None:
        if not self.pair_uids.shape[0]:
            return
        self.check_complete(run, self.tracked, "merge pairs")
        batches = sorted(self.tracked)
        names = list(self.tracked[batches[0]])
        tables = {name for name in names if run.globals.stats.specs[name].axes == (0, 1)}
        self.tracked = {b: self._padded(self.tracked[b], tables) for b in batches}
        totals = {name: ordered_sum(self.tracked[b][name] for b in batches) for name in names}
        planned = {int(u): i for i, u in enumerate(self.plan_uids)}
        # groups[c]: the clusters of the plan that current cluster c is made of; [] when c is new
        # or was changed by an accepted move (its tracked entries are then unknown)
        groups = [[planned[int(u)]] if int(u) in planned and int(u) not in schedule.changed else []
                  for u in run.ids.uids]

        def tracked_values(values: dict, m: int, a: int, b: int) -> tuple[dict, bool]:
            """Pair m's tracked values for merging current clusters a < b, and whether they are exact.

            A K x K field's merged row and column were tracked in the plan's numbering; an entry
            at a cluster that is not one cluster of the plan is unknown and set to 0, a lower
            bound since every entry is ≥ 0 (Hughes 2016 thesis §6.5.1)."""
            out, exact = {}, True
            sources = merge_sources(run.globals.K, a, b)
            for name in names:
                value = values[name][m]
                if name not in tables:
                    out[name] = value
                    continue
                merged = np.zeros((2, len(sources)))
                for i, src in enumerate(sources):
                    origin = groups[src[0]] if i != a else [groups[a][0]]
                    if len(origin) == 1:
                        merged[:, i] = value[:, origin[0]]
                    else:
                        exact = False
                out[name] = merged
            return out, exact

        def candidate(m):
            a, b = run.ids.positions(self.pair_uids[m])
            values, exact = tracked_values(totals, m, a, b)
            return a, b, run.globals.stats.merge(a, b, values), exact

        def gain_of(m) -> tuple[float, bool]:
            """Pair m's gain L(candidate) − L(current), both at their own global step, and whether it is
            that gain (False: the gain at the warm-start parameters, a lower bound, when that is below
            −``SCREEN_RTOL`` |L|: the candidate's own global step is skipped). Only the merged cluster's
            data term changes (the others are the current ones), so the candidate's data part is the
            current one with terms a and b replaced by the merged cluster's; the allocation part is
            evaluated in full, on the allocation summaries alone (the family's summaries of the K − 2
            other clusters are never copied). Equal to ``run.evaluate`` up to the order of the additions."""
            a, b = run.ids.positions(self.pair_uids[m])
            values = tracked_values(totals, m, a, b)[0]
            merged_data = data_total - data[a] - data[b] + _merged_data_term(run.model, run.globals.stats, a, b)
            stats = alloc_part(run.model, run.globals.stats).merge(a, b, values)
            warm = run.model.alloc.warm_start(run.globals.alloc, merge_sources(run.globals.K, a, b))
            if run.model.alloc.warm_is_params:  # the gain where the global step starts bounds it from below
                at_start = merged_data + run.model.alloc.elbo(stats, warm) - current
                if at_start < -SCREEN_RTOL * max(1.0, abs(current)):
                    return at_start, False
            return merged_data + run.model.alloc_value(stats, warm) - current, True

        data = run.data_terms()
        data_total, current = float(np.sum(data)), run.elbo()
        scored = [gain_of(m) for m in range(self.pair_uids.shape[0])]
        gains = np.array([gain for gain, _ in scored])
        unchanged = True  # no merge accepted yet: the gains above still hold
        for m in np.argsort(-gains, kind="stable"):
            ua, ub = (int(u) for u in self.pair_uids[m])
            if ua in schedule.changed or ub in schedule.changed:
                continue  # its tracked terms were computed from clusters that no longer exist
            a, b = run.ids.positions(self.pair_uids[m])
            sources = merge_sources(run.globals.K, a, b)
            gain, exact = scored[m] if unchanged else gain_of(m)  # the allocation term changes after each merge
            exact = exact and tracked_values(totals, m, a, b)[1]
            sizes = (run.globals.stats.N[a], run.globals.stats.N[b])
            accepted = judge(run, schedule, Proposal(
                self.name, f"{ua}+{ub}", sources,
                lambda i, cache, a=a, b=b, m=int(m): cache.merge(a, b, tracked_values(self.tracked[i], m, a, b)[0]),
                stats=lambda m=m: candidate(m)[2], screened_gain=gain, changes={ua, ub}, exact=exact), current).accepted
            if accepted:
                groups = [sum((groups[k] for k in src), []) for src in sources]
                data = run.data_terms()
                data_total, current, unchanged = float(np.sum(data)), run.elbo(), False
            self.failures.record((ua, ub), accepted, sizes)


def _allowed_pairs(uids: np.ndarray, excluded: set[int]) -> np.ndarray:
    """Every pair (a, b), a < b, of positions whose cluster ids are not in ``excluded``, in row-major
    order of the upper triangle; (P, 2)."""
    free = ~np.isin(np.asarray(uids, dtype=np.int64), np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
    a, b = np.triu_indices(uids.shape[0], k=1)
    keep = free[a] & free[b]
    return np.stack([a[keep], b[keep]], axis=1)


def _merged_data_term(model, stats: SuffStats, a: int, b: int) -> float:
    """L_data* of clusters a and b merged: the data term of row a of ``stats.merge(a, b)``, from the two rows
    alone (the family's summaries add under a merge, thesis Eq. 4.2)."""
    specs = [stats.specs[name] for name in model.obs_fields if name in stats.specs]
    if any(spec.axes != (0,) or spec.merge != "sum" for spec in specs):
        raise ValueError("internal error: a merge's data term needs per-cluster summed observation summaries")
    N = np.maximum(stats.N[[a]] + stats.N[[b]], 0.0)
    fields = {name: v[[a]] + v[[b]] for name, v in stats.select(model.obs_fields).items()}
    return float(model.obs.log_marginal(N, fields)[0])


def merge_sources(K: int, a: int, b: int) -> list:
    """The ``SuffStats.remap`` sources of K clusters with b merged into a (a < b) and b dropped."""
    sources = [[k] for k in range(K) if k != b]
    sources[a] = [a, b]
    return sources

