"""Birth proposals (spec 01 §6): move all of one cluster's mass to J' fresh clusters.

The proposal is seeded at the first batch of a lap: the atoms with r_{n,t} > ε seed
J' clusters by Bregman k-means++ and k-means (§6.1 steps 1-2), refined by a few
restricted local / global steps on that batch. During the rest of the lap every
batch's target mass is re-divided among them, r'_{n,K+j} = r_{n,t} · p̃_nj with
p̃_n = softmax_j(E log p(x_n|φ̃_j) + ln π̃_j) (Eq. 4.12-4.16), and the proposal's
summaries are collected. At the end of the lap, once every batch has been
refreshed, the candidate (target emptied, new clusters appended; Eq. 4.17-4.22)
is accepted iff the exact whole-data ELBO rises (§6.2). A rejected birth leaves
the caches as they are.

(A birth judged on its seeding batch alone, as §6.3 allows, is nearly always
rejected when that batch is a small part of the data: the new clusters then look
rare, and the allocation term charges about −ln π̃ per atom moved. Judging it
after a full lap compares the whole data set's use of the new clusters.)
"""
from __future__ import annotations

import numpy as np

from bnpvi import kernels
from bnpvi.learn.init import hard_stats, kmeans_refine, kmeanspp_seeds
from bnpvi.stats import SuffStats
from bnpvi.stats.resp import Responsibilities


def birth_scores(log_lik: np.ndarray, resp) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster batch mass N_bk and b-score Σ_n r_nk E log p(x_n|φ_k) / N_bk (Eq. 4.24)."""
    values = resp.to_dense()
    mass = values.sum(axis=0)
    fit = np.einsum("nk,nk->k", values, log_lik)
    return mass, np.where(mass > 0, fit / np.maximum(mass, 1e-300), np.inf)


def transfer_stats(model, batch, r_target: np.ndarray, seed: SuffStats) -> SuffStats:
    """Summaries of r'_{n,j} = r_{n,t} p̃_nj over a batch, for fresh clusters defined by ``seed``.

    p̃_n = softmax_j(E log p(x_n | q̃_j) + ln π̃_j) with q̃ the conjugate posterior of the
    seed summaries and π̃_j = (Ñ_j + 1/J)/(Σ Ñ + 1) (§6.1 steps 2-4).
    """
    rows = np.flatnonzero(r_target > 0)
    atoms = batch.take(rows)
    post = model.obs.posterior(seed.N, seed.obs_fields())
    log_weights = np.log((seed.N + 1.0 / seed.K) / (seed.N.sum() + 1.0))
    share = Responsibilities.from_weights(model.obs.expected_log_lik(post, atoms), log_weights).values
    r_new = np.ascontiguousarray(r_target[rows, None] * share)
    fields = {"N": r_new.sum(axis=0), "H": kernels.entropy_of(r_new)}
    fields.update(model.obs.summarize(atoms, r_new))
    return SuffStats(fields, {"n_atoms": batch.n_atoms})


def seed_birth(model, batch, resp, target: int, cfg, rng: np.random.Generator, max_new: int) -> SuffStats | None:
    """Seed summaries of J' ≤ min(n_new, max_new) fresh clusters from the target's atoms in ``batch``.

    Returns None when the target's data cannot seed at least two clusters.
    """
    r_target = resp.to_dense()[:, target]
    subset = np.flatnonzero(r_target > cfg.eps)
    if subset.size > cfg.max_atoms:
        subset = np.sort(rng.choice(subset, size=cfg.max_atoms, replace=False))
    J = min(int(cfg.n_new), subset.size // 2, int(max_new))
    if J < 2:
        return None
    obs = model.obs
    sample = batch.take(subset)
    seeds = kmeanspp_seeds(obs, sample, J, rng)
    fresh = kmeans_refine(obs, sample, hard_stats(obs, sample.take(seeds), np.arange(J), J), cfg.kmeans_iters)
    for _ in range(int(cfg.refine_iters)):
        fresh = fresh.remove_rows(np.flatnonzero(fresh.N <= 1e-8))
        if fresh.K < 2:
            return None
        fresh = transfer_stats(model, batch, r_target, fresh)
    fresh = fresh.remove_rows(np.flatnonzero(fresh.N <= 1e-8))
    return fresh if fresh.K >= 2 else None


def split_rows(stats: SuffStats, target: int, new_rows: SuffStats) -> SuffStats:
    """``stats`` with row ``target`` emptied and ``new_rows`` appended (all the target's mass moved)."""
    out = stats.copy()
    for value in out.fields.values():
        value[target] = 0.0
    out = out.insert_zero_rows(new_rows.K)
    for name, value in out.fields.items():
        value[stats.K:] = new_rows.fields[name]
    return out
