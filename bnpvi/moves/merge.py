"""Merge proposals (spec 01 §5): combine two clusters' responsibilities, r'_A = r_A + r_B.

Linear summaries add (Eq. 4.2); the merged entropy −Σ_n (r_nA + r_nB) ln(r_nA + r_nB)
(Eq. 4.3) must come from the responsibilities, so candidate pairs are fixed at the
start of a lap and their entropies are collected in every batch during it (§5.3).
"""
from __future__ import annotations

import numpy as np

from bnpvi.stats import SuffStats

PAIR_BLOCK = 20_000_000  # float64 values of merged statistics scored at a time


def merge_gain(model, stats: SuffStats, kA: int, kB: int, merged_entropy: float) -> float:
    """Exact ΔL = L*(stats with kA, kB merged) − L*(stats) (Eq. 4.5-4.9, sign-corrected)."""
    return model.elbo(stats.merge_rows(kA, kB, merged_entropy)) - model.elbo(stats)


def merge_scores(model, stats: SuffStats, pairs: np.ndarray) -> np.ndarray:
    """m-score = ΔL_data + ΔL_alloc of each pair (Eq. 4.10): ΔL without the entropy term.

    Since ΔL_entropy ≤ 0 the m-score bounds the exact gain from above, so pairs with
    m-score ≤ 0 can never be accepted.
    """
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    if pairs.shape[0] == 0:
        return np.zeros(0)
    N = np.maximum(stats.N, 0.0)
    fields = stats.obs_fields()
    base = model.obs.log_marginal(N, fields)
    a, b = pairs[:, 0], pairs[:, 1]
    per_pair = max(1, sum(int(np.prod(v.shape[1:])) for v in fields.values()))
    step = max(1, PAIR_BLOCK // per_pair)
    data = np.empty(pairs.shape[0])
    for lo in range(0, pairs.shape[0], step):
        s = slice(lo, lo + step)
        merged = {name: v[a[s]] + v[b[s]] for name, v in fields.items()}
        data[s] = model.obs.log_marginal(N[a[s]] + N[b[s]], merged) - base[a[s]] - base[b[s]]
    K = N.shape[0]
    cols = np.arange(K - 1)
    keep = cols[None, :] + (cols[None, :] >= b[:, None])  # columns of the merged count vector
    merged_N = N[keep]
    merged_N[np.arange(pairs.shape[0]), a] += N[b]
    alloc = model.alloc.log_marginal(merged_N) - model.alloc.log_marginal(N)
    return data + alloc


def plan_merges(model, stats: SuffStats, cfg, excluded: set, failures, uids) -> np.ndarray:
    """Candidate pairs (kA < kB positions) for this lap: the top ``max_pairs`` by m-score > 0,
    at most ``max_per_cluster`` per cluster, skipping pairs whose earlier rejection still stands."""
    K = stats.K
    if K < 2:
        return np.zeros((0, 2), dtype=np.int64)
    a, b = np.triu_indices(K, k=1)
    allowed = np.array([i not in excluded and j not in excluded for i, j in zip(a, b)], dtype=bool)
    pairs = np.stack([a[allowed], b[allowed]], axis=1)
    if pairs.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int64)
    scores = merge_scores(model, stats, pairs)
    chosen, used = [], {}
    for m in np.argsort(-scores, kind="stable"):
        if scores[m] <= 0 or len(chosen) >= cfg.max_pairs:
            break
        i, j = (int(x) for x in pairs[m])
        if used.get(i, 0) >= cfg.max_per_cluster or used.get(j, 0) >= cfg.max_per_cluster:
            continue
        if failures.blocked((uids[i], uids[j]), (stats.N[i], stats.N[j]), 1, cfg.retry_change):
            continue
        chosen.append((i, j))
        used[i] = used.get(i, 0) + 1
        used[j] = used.get(j, 0) + 1
    return np.array(chosen, dtype=np.int64).reshape(-1, 2)
