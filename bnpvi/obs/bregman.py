"""Bregman k-means++ seeding and hard (Bregman) k-means for any observation family.

Hughes 2016 thesis §2.5 (Alg. 2.1-2.2; Banerjee et al. 2005): each atom is
smoothed into the point estimate of its one-observation posterior, a cluster is
the point estimate of its posterior, and distances are the family's Bregman
divergence (``ObsFamily.divergence``). Used to initialise runs and to seed births.
Everything works on hard labels; summaries of hard labels come from the family's
own ``summarize`` on one-hot responsibilities.
"""
from __future__ import annotations

import math

import numpy as np

from bnpvi.data.batch import atom_weights, unweighted
from bnpvi.stats.resp import Responsibilities


def hard_summaries(obs, batch, labels, K: int) -> tuple[np.ndarray, dict]:
    """Counts (K,) and the family's statistics of hard assignments ``labels`` (values in 0..K-1), each atom
    counted with its weight w_n (``PointBatch.weights``)."""
    resp = Responsibilities.one_hot(labels, K).with_weights(atom_weights(batch))
    return resp.counts(), obs.summarize(batch, resp.mass())


def atom_posteriors(obs, batch, idx) -> dict:
    """Posteriors of one-observation clusters at the atoms ``idx`` (smoothed atoms, thesis Alg. 2.2), whatever
    their weights."""
    atoms = unweighted(batch.take(idx))
    N, fields = hard_summaries(obs, atoms, np.arange(atoms.n_atoms), atoms.n_atoms)
    return obs.posterior(N, fields)


def kmeanspp_seeds(obs, batch, K: int, rng: np.random.Generator, n_trials: int | None = None) -> np.ndarray:
    """Greedy Bregman k-means++: K atom indices of ``batch`` (thesis Alg. 2.2, ``n_trials`` candidates per seed).

    Each new seed is drawn with probability proportional to the divergence d_n of
    atom n's smoothed mean to its closest seed; of ``n_trials`` such draws the one
    that lowers Σ_n d_n most is kept (default 2 + ⌊ln K⌋ trials; 1 is plain k-means++).
    Weighted atoms (``PointBatch.weights``) count w_n times: the first seed is drawn ∝ w_n, the
    others ∝ w_n d_n, and a draw lowers Σ_n w_n d_n; an atom of weight 0 is never a seed.
    """
    n = batch.n_atoms
    trials = n_trials if n_trials is not None else 2 + int(math.log(K))
    w = atom_weights(batch)
    seeds = [int(rng.integers(n)) if w is None else int(rng.choice(n, p=w / w.sum()))]
    divergence = obs.atom_divergences(batch)
    dist = divergence(seeds)[:, 0]
    for _ in range(1, K):
        mass = dist if w is None else w * dist
        total = mass.sum()
        if not np.isfinite(total) or total <= 0:
            free = np.setdiff1d(np.arange(n), seeds)
            candidates = rng.choice(free, size=min(trials, free.size), replace=False)
        else:
            candidates = rng.choice(n, size=trials, p=mass / total)
        cand_dist = np.minimum(dist[:, None], divergence(candidates))
        cost = cand_dist if w is None else w[:, None] * cand_dist
        best = int(np.argmin(cost.sum(axis=0)))
        seeds.append(int(candidates[best]))
        dist = cand_dist[:, best]
    return np.asarray(seeds)


def kmeans(obs, batch, N: np.ndarray, fields: dict, n_iters: int) -> tuple[np.ndarray, dict]:
    """Bregman k-means / hard EM (thesis Alg. 2.1, Eq. 2.75-2.77) from the clusters of summaries (N, fields).

    Returns the summaries of the final hard assignments (the input when ``n_iters`` is 0).
    """
    K = N.shape[0]
    labels = None
    for _ in range(n_iters):
        post = obs.posterior(N, fields)
        log_weights = np.log((N + 1.0 / K) / (N.sum() + 1.0))
        new_labels = np.argmax(obs.point_log_lik(batch, post) + log_weights, axis=1)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        N, fields = hard_summaries(obs, batch, labels, K)
    return N, fields
