"""Initialisation: pick K atoms (Bregman k-means++ or at random) and turn them into globals, or take
the globals of a saved run (``init=from_run``, :func:`saved_globals`).

Hughes 2016 thesis §3.5.4: each chosen atom gets a one-hot responsibility on its
own cluster and one global step on those K atoms gives the initial q (τ̂_k = τ̄ + s(x_{n_k}),
ν̂_k = ν̄ + 1; for a DP mixture η̂_k1 = 2, η̂_k0 = γ + K − k). Optionally Bregman k-means
iterations (Alg. 2.1) on the sample follow the seeding. Seeding works on a random sample of
at most ``init.n_samples`` atoms read batch by batch, so memory does not grow with N.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.alloc.mixture import MixtureAlloc
from bnpvi.config import schema_of
from bnpvi.data.batch import unweighted
from bnpvi.errors import BnpviError
from bnpvi.io.model_file import read_model_to_apply
from bnpvi.moves.base import finds_K
from bnpvi.obs.bregman import hard_summaries, kmeans, kmeanspp_seeds
from bnpvi.stats import ClusterIds, SuffStats


def sample_atoms(store, n_samples: int, rng: np.random.Generator):
    """A uniform random sample (without replacement) of at most ``n_samples`` atoms, and the data set's
    size over the sample's (in the store's batch units; of a weighted points file, its total weight over the
    sample's; 1 when the sample is the whole data set)."""
    sizes = np.asarray(store.batch_sizes(), dtype=np.int64)
    whole = n_samples >= store.n_atoms
    if whole:
        counts = sizes
    else:
        counts = rng.multivariate_hypergeometric(sizes, n_samples)
    parts = []
    for b, count in enumerate(counts):
        if count == 0:
            continue
        batch = store.read_batch(b)
        parts.append(batch if count == batch.n_atoms else batch.take(np.sort(rng.choice(batch.n_atoms, count, replace=False))))
    sample = type(parts[0]).concat(parts)
    weights = getattr(sample, "weights", None)
    if weights is not None and not whole:
        return sample, store.weight_total() / max(float(weights.sum()), 1e-300)
    return sample, float(sizes.sum()) / float(counts.sum())


def fixed_K_start(alloc, moves) -> bool:
    """Whether a run starts from the clusters it keeps: a finite model, or a mixture without births or splits
    (``moves``: the run's moves node, or None), whose merges and deletes cannot part a cluster that took two
    groups. Such a start is its seeds' cells (:func:`initial_stats`), kept through memo's first lap
    (``full_first_pass``)."""
    return alloc.finite or (isinstance(alloc, MixtureAlloc) and not finds_K(moves))


def initial_stats(model, store, cfg, rng: np.random.Generator, K: int, cells: bool = False) -> SuffStats:
    """Effective summaries of K initial clusters that define the initial globals (``init`` config node).

    With ``cells`` (:func:`fixed_K_start`: no cluster the run will have is missing), the clusters start as the seeds'
    cells: every sampled atom goes to the seed of smallest Bregman divergence (the k-means assignment
    step, thesis Eq. 2.75), so each cluster starts from the shape of its group, not from one atom (one
    atom's posterior is as wide as the prior, and the widest cluster takes a neighbour's group in the
    first local step). Otherwise the clusters are the hard summaries of the seeds (after ``init.kmeans_iters``
    Bregman k-means iterations on the sample; null: the allocation model's
    ``init_kmeans_iters``; without them, the seeds themselves). K-means clusters
    summarise the whole sample and are scaled by the data set's size over the
    sample's, as a birth's pieces are scaled to their target's whole-data mass:
    globals made from a third of the data would be as vague as that third's
    posterior (an HDP topic model's first lap then spreads its documents over
    near-duplicate topics that the merges remove; docs/births.md). The allocation
    model's own summaries (entropies, transition tables) start at zero.
    """
    obs = model.obs
    K = int(K)
    if hasattr(model.alloc, "initial_stats"):  # a model with its own start (a graph model's memberships)
        return model.alloc.initial_stats(model, store, cfg, rng, K)
    if K < 1:
        raise BnpviError(f"init.K must be at least 1, got {K}")
    n_samples = int(cfg.get("n_samples"))
    if n_samples < 1:
        raise BnpviError(f"init.n_samples must be at least 1, got {n_samples}")
    sample, scale = sample_atoms(store, n_samples, rng)
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
    if cells:
        labels = np.argmin(obs.atom_divergences(sample)(seeds), axis=1)
        labels[seeds] = np.arange(K)  # a seed is in its own cell, also where two atoms coincide
        start = hard_summaries(obs, sample, labels, K)
    elif n_iters == 0:  # each seed is one atom (whatever its weight; thesis §3.5.4)
        return model.hard_stats(unweighted(sample.take(seeds)), np.arange(K), K)
    else:
        start = hard_summaries(obs, unweighted(sample.take(seeds)), np.arange(K), K)
    N, fields = kmeans(obs, sample, *start, n_iters)
    return model.empty_stats(K).with_fields(N=N, **fields).scaled(scale)


def saved_globals(model, store, run_dir) -> tuple[object, ClusterIds]:
    """The globals and cluster ids of the run in ``run_dir`` (its model.h5), for ``model`` on ``store``.

    The saved global summaries are taken as they are (:meth:`bnpvi.model.Model.restore`), under the
    priors of ``model``; a run on the same data and config continues from the saved run's ELBO.

    Raises
    ------
    BnpviError
        No model.h5, or one of another model, observation family, kind of data or dimension
        (a topic model's: vocabulary size) than ``model`` and ``store`` (one line).
    """
    run_dir = Path(str(run_dir)).expanduser()
    if not (run_dir / "model.h5").is_file():
        raise BnpviError(f"init.path={run_dir} holds no model.h5 (a run writes it when it ends or is interrupted)")
    tree = read_model_to_apply(run_dir / "model.h5")
    cfg = OmegaConf.create(tree["config"])
    saved = {"model": schema_of("model", cfg.model)[0], "obs": schema_of("obs", cfg.obs)[0]}
    for group, ours in (("model", model.alloc.name), ("obs", model.obs.name)):
        if saved[group] != ours:
            raise BnpviError(f"init=from_run: {run_dir} has {group}={saved[group]}, this run {group}={ours}; "
                             f"add {group}={saved[group]}")
    kind, D = str(tree["data"]["kind"]), int(tree["data"]["D"])
    if kind != store.kind:
        raise BnpviError(f"init=from_run: {run_dir} was trained on {kind} data; {store.path} holds {store.kind} data")
    if D != store.D:
        size = "vocabulary size V" if kind == "bow" else "dimension D"
        raise BnpviError(f"init=from_run: {run_dir} was trained with {size}={D}; {store.path} has {store.D}")
    globals_ = model.restore(SuffStats.from_tree(tree["stats"]), tree["allocation"])
    return globals_, ClusterIds(np.asarray(tree["uids"], dtype=np.int64))
