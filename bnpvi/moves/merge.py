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

from bnpvi.moves.base import Edit, Move, accepts, ordered_sum
from bnpvi.moves.history import FailureLog
from bnpvi.stats import SuffStats

PAIR_BLOCK = 500_000  # float64 values of merged statistics scored at a time (4 MB, and a few temporaries)


def data_merge_scores(model, stats: SuffStats, pairs: np.ndarray) -> np.ndarray:
    """ΔL_data of merging each pair: L_data*(A ∪ B) − L_data*(A) − L_data*(B) (thesis Eq. 4.6)."""
    N = np.maximum(stats.N, 0.0)
    fields = stats.select(model.obs_fields)
    base = model.obs.log_marginal(N, fields)
    a, b = pairs[:, 0], pairs[:, 1]
    per_pair = max(1, sum(int(np.prod(v.shape[1:])) for v in fields.values()))
    step = max(1, PAIR_BLOCK // per_pair)
    data = np.empty(pairs.shape[0])
    for lo in range(0, pairs.shape[0], step):
        s = slice(lo, lo + step)
        merged = {name: v[a[s]] + v[b[s]] for name, v in fields.items()}
        data[s] = model.obs.log_marginal(N[a[s]] + N[b[s]], merged) - base[a[s]] - base[b[s]]
    return data


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
        K = stats.K
        none = np.zeros((0, 2), dtype=np.intp)
        if K < 2:
            return none
        a, b = np.triu_indices(K, k=1)
        allowed = np.array([int(uids[i]) not in excluded and int(uids[j]) not in excluded for i, j in zip(a, b)],
                           dtype=bool)
        pairs = np.stack([a[allowed], b[allowed]], axis=1)
        if pairs.shape[0] == 0:
            return none
        scores = merge_scores(run.model, run.globals, pairs)
        chosen, used = [], {}
        for m in np.argsort(-scores, kind="stable"):
            if scores[m] <= 0 or len(chosen) >= self.cfg.max_pairs:
                break
            i, j = (int(x) for x in pairs[m])
            if used.get(i, 0) >= self.cfg.max_per_cluster or used.get(j, 0) >= self.cfg.max_per_cluster:
                continue
            if self.failures.blocked((uids[i], uids[j]), (stats.N[i], stats.N[j]), 1, self.cfg.retry_change):
                continue
            chosen.append((i, j))
            used[i] = used.get(i, 0) + 1
            used[j] = used.get(j, 0) + 1
        return np.array(chosen, dtype=np.intp).reshape(-1, 2)

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
            sources = _merge_sources(run.globals.K, a, b)
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

        def gain_of(m) -> float:
            """Pair m's gain L(candidate) − L(current), both at their own global step. Only the merged
            cluster's data term changes (the others are the current ones), so the candidate's data
            part is the current one with terms a and b replaced by the merged cluster's; the allocation
            part is evaluated in full. Equal to ``run.evaluate`` up to the order of the additions."""
            a, b, stats, _ = candidate(m)
            merged_data = data_total - data[a] - data[b] + float(run.model.data_terms(stats, [a])[0])
            return merged_data + run.model.alloc_value(stats, run.model.alloc.warm_start(
                run.globals.alloc, _merge_sources(run.globals.K, a, b))) - current

        data = run.model.data_terms(run.globals.stats)
        data_total, current = float(np.sum(data)), run.elbo()
        gains = np.array([gain_of(m) for m in range(self.pair_uids.shape[0])])
        unchanged = True  # no merge accepted yet: the gains above still hold
        for m in np.argsort(-gains, kind="stable"):
            ua, ub = (int(u) for u in self.pair_uids[m])
            if ua in schedule.changed or ub in schedule.changed:
                continue  # its tracked terms were computed from clusters that no longer exist
            a, b = run.ids.positions(self.pair_uids[m])
            sources = _merge_sources(run.globals.K, a, b)
            gain = float(gains[m]) if unchanged else gain_of(m)  # the allocation term changes after each merge
            exact = tracked_values(totals, m, a, b)[1]
            if accepts(gain, current):  # confirmed by the candidate's globals, which an accepted merge installs
                value, globals_ = run.evaluate(candidate(m)[2], sources)
                gain = value - current
            sizes = (run.globals.stats.N[a], run.globals.stats.N[b])
            accepted = accepts(gain, current)
            if accepted:
                per_batch = {i: tracked_values(self.tracked[i], int(m), a, b)[0] for i in batches}
                run.apply(Edit(sources, lambda i, cache, a=a, b=b: cache.merge(a, b, per_batch[i]), globals_))
                schedule.changed |= {ua, ub}
                groups = [sum((groups[k] for k in src), []) for src in sources]
                data = run.model.data_terms(run.globals.stats)
                data_total, current, unchanged = float(np.sum(data)), run.elbo(), False
            self.failures.record((ua, ub), accepted, sizes)
            schedule.event(self.name, f"{ua}+{ub}", gain, accepted, exact=exact)

    # ---------------------------------------------------------------- state
    def state(self) -> dict:
        return {"pair_uids": self.pair_uids, "plan_uids": self.plan_uids, "failures": self.failures.state(),
                "tracked": {str(b): dict(t) for b, t in self.tracked.items()}}

    def load_state(self, state: dict) -> None:
        self.pair_uids = np.asarray(state["pair_uids"], dtype=np.int64).reshape(-1, 2)
        self.plan_uids = np.asarray(state["plan_uids"], dtype=np.int64)
        self.failures.load_state(state["failures"])
        self.tracked = {int(b): {n: np.asarray(v) for n, v in t.items()} for b, t in state.get("tracked", {}).items()}


def _merge_sources(K: int, a: int, b: int) -> list:
    sources = [[k] for k in range(K) if k != b]
    sources[a] = [a, b]
    return sources

