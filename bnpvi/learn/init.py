"""Initialisation: pick K atoms (Bregman k-means++ or at random) and turn them into globals.

Hughes 2016 thesis §3.5.4: each chosen atom gets a one-hot responsibility on its
own cluster and one global step on those K atoms gives the initial q (τ̂_k = τ̄ + s(x_{n_k}),
ν̂_k = ν̄ + 1; for a DP mixture η̂_k1 = 2, η̂_k0 = γ + K − k). Optionally Bregman k-means
iterations (Alg. 2.1) on the sample follow the seeding. Seeding works on a random sample of
at most ``init.n_samples`` atoms read batch by batch, so memory does not grow with N.
"""
from __future__ import annotations

import numpy as np

from bnpvi.errors import BnpviError
from bnpvi.obs.bregman import hard_summaries, kmeans, kmeanspp_seeds
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


def initial_stats(model, store, cfg, rng: np.random.Generator, K: int) -> SuffStats:
    """Effective summaries of K initial clusters that define the initial globals (``init`` config node).

    The clusters are the hard summaries of the seeds (after ``init.kmeans_iters``
    Bregman k-means iterations on the sample; null: the allocation model's
    ``init_kmeans_iters``); the allocation model's own summaries
    (entropies, transition tables) start at zero.
    """
    obs = model.obs
    K = int(K)
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
    n_iters = cfg.get("kmeans_iters")
    n_iters = model.alloc.init_kmeans_iters if n_iters is None else int(n_iters)
    if n_iters < 0:
        raise BnpviError(f"init.kmeans_iters must be at least 0, got {n_iters}")
    if n_iters == 0:
        return model.hard_stats(sample.take(seeds), np.arange(K), K)
    N, fields = kmeans(obs, sample, *hard_summaries(obs, sample.take(seeds), np.arange(K), K), n_iters)
    return model.empty_stats(K).with_fields(N=N, **fields)
