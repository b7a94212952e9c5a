"""Benchmark L-sparse local steps (Hughes 2016 thesis Ch. 7) against the dense ones.

(a) Mixture substeps on one batch of N = 36,000 64-D atoms under a zero-mean Gaussian mixture
    (the thesis' patch experiment, §7.1.2): the responsibility step given the expected
    log-likelihoods, and the summary step (N_k, H_k and the K 64 x 64 statistics Σ r xxᵀ),
    dense vs L ∈ {1, 2, 4, 8, 16}, at K ∈ {50, 200, 800}. Also: the expected log-likelihood
    itself (untouched by sparsity, the floor of a lap), and the mean distance Σ_k |r_sparse − r_dense|
    of the responsibilities (= twice the dense mass outside the top L).
(b) The topic-model document step on 1,000 wiki documents (``bench_sparse_topics.py``), when
    that corpus is found.
(c) End to end: memoized VB of a DP mixture of zero-mean Gaussians from K = 200 (``--e2e-ks``) on a generated
    64-D data set of 360,000 atoms in 10 batches, dense vs L = 4: seconds per lap and the held-out score of
    36,000 other atoms stored in the file's held-out split, as a run reports it (``points_loglik``: the mean
    of ln Σ_k exp(E ln π_k + E ln p(x | φ_k)), a lower bound on the log predictive density, always dense).

Times are the best of ``--repeats`` runs (time.perf_counter), in seconds.

Usage::

    python scripts/bench_sparse.py              # everything (several minutes)
    python scripts/bench_sparse.py --quick      # N = 6,000, K ∈ {50, 200}, a 60,000-atom run
    python scripts/bench_sparse.py --parts a,c
    python scripts/bench_sparse.py --parts c --e2e-ks 800 --e2e-atoms 120000 --laps 3
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.alloc import DPMixAlloc
from bnpvi.data.batch import PointBatch
from bnpvi.data.points import HeldoutPoints
from bnpvi.data.store import BatchStore, write_points
from bnpvi.learn.heldout import points_loglik
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.model import Model
from bnpvi.obs import make_obs
from bnpvi.stats import ClusterIds, Responsibilities
from timing import best_of  # scripts/timing.py

D = 64


def zero_mean_data(n: int, n_clusters: int = 100, seed: int = 0) -> np.ndarray:
    """n atoms from a mixture of zero-mean Gaussians whose covariances share a low-rank part (as patches'
    do) plus their own low-rank and diagonal parts."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(n_clusters, 5.0))
    shared = rng.standard_normal((1, D, 6))
    factors = shared + rng.standard_normal((n_clusters, D, 6)) * rng.uniform(0.2, 1.0, size=(n_clusters, 1, 6))
    scales = rng.uniform(0.3, 0.6, size=(n_clusters, D))
    labels = rng.choice(n_clusters, size=n, p=weights)
    X = np.einsum("ndr,nr->nd", factors[labels], rng.standard_normal((n, 6))) \
        + scales[labels] * rng.standard_normal((n, D))
    return np.ascontiguousarray(X)


def zm_model() -> Model:
    return Model(DPMixAlloc(10.0), make_obs({"name": "zm_gauss", "sF": 1.0, "prior_cov": "eye", "nu": None},
                                            D, None))


def fitted_globals(model: Model, batch: PointBatch, K: int, seed: int = 1):
    """Globals of K clusters fitted by one hard step from random labels, then two dense steps."""
    rng = np.random.default_rng(seed)
    globals_ = model.global_step(model.hard_stats(batch, rng.integers(0, K, batch.n_atoms), K))
    for _ in range(2):
        local = model.local_step(batch, globals_)[1]
        globals_ = model.global_step(model.summarize(batch, local))
    return globals_


# ------------------------------------------------------------------------- (a)
def micro(N: int, Ks, Ls, repeats: int) -> None:
    X = zero_mean_data(N, seed=2)
    batch = PointBatch(X)
    model = zm_model()
    print(f"\n(a) mixture substeps, N = {N}, D = {D}, zero-mean Gaussian; seconds (ratio dense / sparse)")
    print(f"{'K':>5} {'L':>6} {'E log-lik':>10} {'resp step':>16} {'summary step':>18} {'mean |r - r_dense|':>19}")
    for K in Ks:
        globals_ = fitted_globals(model, PointBatch(X[: min(N, 20000)]), K)
        t_lik, log_lik = best_of(lambda: model.alloc.expected_log_lik(model.obs, globals_.obs, batch), repeats)
        log_pi = model.alloc.expected_log_pi(globals_.alloc)
        t_dense, dense = best_of(lambda: Responsibilities.from_weights(log_lik, log_pi), repeats)
        s_dense, _ = best_of(lambda: (dense.counts(), dense.entropy(), model.obs.summarize(batch, dense)), repeats)
        print(f"{K:>5} {'dense':>6} {t_lik:>10.3f} {t_dense:>9.4f} {'':>6} {s_dense:>10.4f} {'':>7} {0.0:>19.4f}")
        for L in Ls:
            if L >= K:
                continue
            t, sparse = best_of(lambda: Responsibilities.from_weights(log_lik, log_pi, sparse_L=L), repeats)
            s, _ = best_of(lambda: (sparse.counts(), sparse.entropy(), model.obs.summarize(batch, sparse)), repeats)
            inside = np.take_along_axis(dense.values, sparse.indices.astype(np.intp), axis=1).sum(axis=1)
            print(f"{K:>5} {L:>6} {'':>10} {t:>9.4f} ({t_dense / t:4.1f}x) {s:>10.4f} ({s_dense / s:5.1f}x) "
                  f"{2.0 * np.mean(1.0 - inside):>19.4f}")


# ------------------------------------------------------------------------- (c)
def end_to_end(n_atoms: int, K: int, L: int, laps: int, folder: Path) -> None:
    X = zero_mean_data(n_atoms + n_atoms // 10, seed=3)
    n_held = X.shape[0] - n_atoms
    path = folder / "zm64.h5"
    index = np.arange(X.shape[0])
    write_points(path, X[:n_atoms], n_batches=10,
                 heldout=HeldoutPoints(X[n_atoms:], index[n_atoms:], index[:n_atoms]))
    print(f"\n(c) memoized VB, DP mixture of zero-mean Gaussians, {n_atoms} atoms x {D} in 10 batches, "
          f"K = {K}, {laps} laps; held-out: {n_held} atoms")
    print(f"{'local step':>10} {'s/lap':>8} {'ratio':>6} {'final ELBO':>16} {'held-out/atom':>14}")
    base = None
    for sparse_L in (None, L):
        with BatchStore.open(path) as store:
            model = zm_model()
            model.alloc.use_sparse(sparse_L)
            rng = np.random.default_rng(0)
            init = OmegaConf.create({"name": "random", "K": K, "n_samples": 20000, "n_trials": None,
                                     "kmeans_iters": 0})
            stats = initial_stats(model, store, init, rng, K)
            alg = MemoizedVB(model, store, {}, rng, model.global_step(stats), ClusterIds.first(K))
            times, elbo = [], None
            while alg.lap < laps:
                t0 = time.perf_counter()
                result = None
                while result is None:
                    result = alg.step()
                times.append(time.perf_counter() - t0)
                elbo = result.elbo
            per_lap = float(np.mean(times[1:] if len(times) > 1 else times))
            base = per_lap if base is None else base
            name = "dense" if sparse_L is None else f"L = {sparse_L}"
            score = points_loglik(model, alg.globals, store)["loglik_per_point"]
            print(f"{name:>10} {per_lap:>8.2f} {base / per_lap:>5.2f}x {elbo:>16.6g} {score:>14.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--parts", default="a,b,c", help="comma-separated parts to run (a, b, c)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--laps", type=int, default=4)
    parser.add_argument("--e2e-ks", type=int, nargs="+", default=[200], help="K of the end-to-end runs (c)")
    parser.add_argument("--e2e-atoms", type=int, default=None, help="training atoms of (c) (default 360,000)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    print(f"threads: {__import__('bnpvi.kernels.mixture', fromlist=['_ext'])._ext.max_threads()}")
    if "a" in parts:
        micro(6000 if args.quick else 36000, (50, 200) if args.quick else (50, 200, 800), (1, 2, 4, 8, 16),
              args.repeats)
    if "b" in parts:
        try:
            from bench_sparse_topics import main as topics  # scripts/bench_sparse_topics.py
        except ImportError as err:
            print(f"\n(b) skipped: {err}")
        else:
            topics(["--n-docs", "300", "--ks", "100"] if args.quick else [])
    if "c" in parts:
        for K in args.e2e_ks:
            with tempfile.TemporaryDirectory() as folder:
                end_to_end(args.e2e_atoms or (60000 if args.quick else 360000), K, 4, args.laps, Path(folder))


if __name__ == "__main__":
    main()
