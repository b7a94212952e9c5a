"""Initialisation: pick K atoms (Bregman k-means++ or at random) and turn them into globals.

Spec 01 §4.4: each chosen atom gets a one-hot responsibility on its own cluster and
one global step on those K atoms gives the initial q (τ̂_k = τ̄ + s(x_{n_k}),
ν̂_k = ν̄ + 1, η̂_k1 = 2, η̂_k0 = γ + K − k). Optionally Bregman k-means iterations
(Alg. 2.1) on the sample follow the seeding. Seeding works on a random sample of
at most ``init.n_samples`` atoms read batch by batch, so memory does not grow with N.
"""
from __future__ import annotations

import math

import numpy as np

from bnpvi.data.batch import PointBatch
from bnpvi.errors import BnpviError
from bnpvi.stats import SuffStats


def sample_atoms(store, n_samples: int, rng: np.random.Generator):
    """A uniform random sample (without replacement) of at most ``n_samples`` atoms."""
    sizes = np.asarray(store.batch_sizes(), dtype=np.int64)
    if n_samples >= store.n_atoms:
        counts = sizes
    else:
        counts = rng.multivariate_hypergeometric(sizes, n_samples)
    parts = []
    for b, count in enumerate(counts):
        if count == 0:
            continue
        batch = store.read_batch(b)
        parts.append(batch if count == batch.n_atoms else batch.take(np.sort(rng.choice(batch.n_atoms, count, replace=False))))
    return type(parts[0]).concat(parts)


def hard_stats(obs, sample: PointBatch, labels: np.ndarray, K: int) -> SuffStats:
    """Summaries of hard assignments ``labels`` (values in 0..K-1) of the sample's atoms."""
    resp = np.zeros((sample.n_atoms, K))
    resp[np.arange(sample.n_atoms), labels] = 1.0
    fields = {"N": resp.sum(axis=0), "H": np.zeros(K)}
    fields.update(obs.summarize(sample, resp))
    return SuffStats(fields, {"n_atoms": sample.n_atoms})


def _centers(obs, sample: PointBatch, idx) -> dict:
    """Posteriors of one-observation clusters at the atoms ``idx`` (smoothed atoms, Alg. 2.2)."""
    atoms = sample.take(idx)
    stats = hard_stats(obs, atoms, np.arange(atoms.n_atoms), atoms.n_atoms)
    return obs.posterior(stats.N, stats.obs_fields())


def kmeanspp_seeds(obs, sample: PointBatch, K: int, rng: np.random.Generator, n_trials: int | None = None) -> np.ndarray:
    """Greedy Bregman k-means++ seeding (Alg. 2.2 with ``n_trials`` candidates per seed).

    Each new seed is drawn with probability proportional to the divergence d_n of
    atom n's smoothed mean to its closest seed; of ``n_trials`` such draws the one
    that lowers Σ_n d_n most is kept (default 2 + ⌊ln K⌋ trials; 1 is plain k-means++).
    """
    n = sample.n_atoms
    trials = n_trials if n_trials is not None else 2 + int(math.log(K))
    seeds = [int(rng.integers(n))]
    dist = obs.divergence(sample, _centers(obs, sample, seeds))[:, 0]
    for _ in range(1, K):
        total = dist.sum()
        if not np.isfinite(total) or total <= 0:
            free = np.setdiff1d(np.arange(n), seeds)
            candidates = rng.choice(free, size=min(trials, free.size), replace=False)
        else:
            candidates = rng.choice(n, size=trials, p=dist / total)
        cand_dist = np.minimum(dist[:, None], obs.divergence(sample, _centers(obs, sample, candidates)))
        best = int(np.argmin(cand_dist.sum(axis=0)))
        seeds.append(int(candidates[best]))
        dist = cand_dist[:, best]
    return np.asarray(seeds)


def kmeans_refine(obs, sample: PointBatch, stats: SuffStats, n_iters: int) -> SuffStats:
    """Bregman k-means / hard EM (Alg. 2.1, Eq. 2.75-2.77) started from ``stats``."""
    K = stats.K
    labels = None
    for _ in range(n_iters):
        post = obs.posterior(stats.N, stats.obs_fields())
        log_weights = np.log((stats.N + 1.0 / K) / (stats.N.sum() + 1.0))
        new_labels = np.argmax(obs.point_log_lik(sample, post) + log_weights, axis=1)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        stats = hard_stats(obs, sample, labels, K)
    return stats


def initial_stats(obs, store, cfg, rng: np.random.Generator) -> SuffStats:
    """Effective summaries that define the initial globals, from the ``init`` config node."""
    K = int(cfg.get("K"))
    if K < 1:
        raise BnpviError(f"init.K must be at least 1, got {K}")
    n_samples = int(cfg.get("n_samples"))
    if n_samples < 1:
        raise BnpviError(f"init.n_samples must be at least 1, got {n_samples}")
    sample = sample_atoms(store, n_samples, rng)
    if K > sample.n_atoms:
        raise BnpviError(f"init.K={K} exceeds the {sample.n_atoms} atoms available for initialisation")
    name = cfg.get("name")
    if name == "kmeanspp":
        seeds = kmeanspp_seeds(obs, sample, K, rng, cfg.get("n_trials"))
    elif name == "random":
        seeds = rng.choice(sample.n_atoms, size=K, replace=False)
    else:
        raise BnpviError(f"unknown init {name!r}; choose kmeanspp or random")
    stats = hard_stats(obs, sample.take(seeds), np.arange(K), K)
    n_iters = int(cfg.get("kmeans_iters") or 0)
    if n_iters > 0:
        stats = kmeans_refine(obs, sample, stats, n_iters)
    return stats
