"""Benchmark alg=em (soft EM, full covariance) against scikit-learn's GaussianMixture from the same k-means start.

Data: ``bench_moves.make_data(n, D, K, seed=0)`` (K Gaussians with random full covariances). One
scikit-learn ``KMeans`` fit gives the start of both: scikit-learn gets the weights, means and
precisions of the k-means labels (``weights_init``, ``means_init``, ``precisions_init``), and bnpvi
the MAP point estimates of the same labels' summaries. Our prior is as weak as ``reg_covar``: flat
Dirichlet weights (γ = K), κ̄ = 1e-6, ν̄ = D + 1 and B̄ = reg_covar · I, so that a covariance is
(scatter_k + B̄)/(N_k + 1) where scikit-learn's is scatter_k/N_k + reg_covar · I.

Both run ``--iters`` EM iterations (no early stop: scikit-learn with tol=0, bnpvi lap by lap with the
``EM`` algorithm on the batch file, the E-step as BLAS products and the compiled softmax). Reported:
seconds per iteration of each, the mean log-likelihood per point each reaches, and the ARI between
the two final labelings (targets: bnpvi faster, ARI ≥ 0.99).

Usage::

    python scripts/bench_em.py                    # n = 200,000, D = 16, K = 25, 100 iterations
    python scripts/bench_em.py --quick            # n = 20,000, 20 iterations
    python scripts/bench_em.py --n 50000 --iters 30 --batches 4
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from bench_moves import make_data  # scripts/bench_moves.py
from bnpvi.alloc import FiniteMixAlloc
from bnpvi.data.store import BatchStore, write_points
from bnpvi.learn.em import EM, point_model
from bnpvi.metrics import adjusted_rand_index
from bnpvi.obs.gauss import Gauss
from bnpvi.stats import ClusterIds


def kmeans_start(X: np.ndarray, K: int, reg_covar: float) -> tuple[np.ndarray, dict]:
    """Labels of one k-means fit and scikit-learn's initial parameters from them."""
    labels = KMeans(K, n_init=1, random_state=0).fit_predict(X)
    counts = np.bincount(labels, minlength=K).astype(np.float64)
    means = np.stack([X[labels == k].mean(axis=0) for k in range(K)])
    precisions = np.stack([np.linalg.inv(np.cov(X[labels == k].T, bias=True) + reg_covar * np.eye(X.shape[1]))
                           for k in range(K)])
    return labels, {"weights_init": counts / counts.sum(), "means_init": means, "precisions_init": precisions}


def run_sklearn(X, K, start, iters, reg_covar):
    gm = GaussianMixture(K, covariance_type="full", reg_covar=reg_covar, max_iter=iters, tol=0.0,
                         init_params="random_from_data", random_state=0, **start)
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # tol=0: it never "converges"; it runs the iterations asked for
        warnings.simplefilter("ignore", ConvergenceWarning)
        gm.fit(X)
    seconds = time.perf_counter() - t0
    return seconds / gm.n_iter_, gm.predict(X), float(gm.score(X))


def run_bnpvi(path: Path, X, K, labels, iters, reg_covar):
    store = BatchStore.open(path)
    D = X.shape[1]
    obs = Gauss(nu=D + 1.0, kappa=1e-6, m=X.mean(axis=0), B=reg_covar * np.eye(D))
    model = point_model(FiniteMixAlloc(float(K)), obs)
    stats = None
    for b in range(store.n_batches):  # the summaries of the k-means labels, batch by batch
        batch = store.read_batch(b)
        part = model.hard_stats(batch, labels[batch.start:batch.start + batch.n_atoms], K)
        stats = part if stats is None else stats + part
    cfg = OmegaConf.create({"name": "em", "hard": False})
    alg = EM(model, store, cfg, np.random.default_rng(0), model.global_step(stats), ClusterIds.first(K))
    objective = None
    t0 = time.perf_counter()
    while alg.lap < iters:
        result = alg.step()
        if result is not None:
            objective = result.elbo
    seconds = (time.perf_counter() - t0) / iters
    fitted = np.concatenate([model.decode(store.read_batch(b), alg.globals) for b in range(store.n_batches)])
    loglik = np.concatenate([model.local_step(store.read_batch(b), alg.globals)[1].resp.log_norm
                             for b in range(store.n_batches)])
    store.close()
    return seconds, fitted, float(loglik.mean()), objective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--D", type=int, default=16)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--batches", type=int, default=1)
    parser.add_argument("--reg-covar", type=float, default=1e-6)
    parser.add_argument("--quick", action="store_true", help="n = 20,000 and 20 iterations")
    args = parser.parse_args()
    if args.quick:
        args.n, args.iters = 20_000, 20
    X, truth = make_data(args.n, args.D, args.K, seed=0)
    labels, start = kmeans_start(X, args.K, args.reg_covar)
    sk_time, sk_labels, sk_loglik = run_sklearn(X, args.K, start, args.iters, args.reg_covar)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "points.h5"
        write_points(path, X, n_batches=args.batches)
        our_time, our_labels, our_loglik, objective = run_bnpvi(path, X, args.K, labels, args.iters, args.reg_covar)
    print(f"EM, full covariance: n={args.n} D={args.D} K={args.K}, {args.iters} iterations from one k-means start, "
          f"{args.batches} batch(es), reg_covar={args.reg_covar:g}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})")
    print(f"{'':14s} {'s / iteration':>14s} {'loglik / point':>15s} {'ARI to truth':>13s}")
    print(f"{'scikit-learn':14s} {sk_time:14.4f} {sk_loglik:15.6f} {adjusted_rand_index(truth, sk_labels):13.4f}")
    print(f"{'bnpvi alg=em':14s} {our_time:14.4f} {our_loglik:15.6f} {adjusted_rand_index(truth, our_labels):13.4f}")
    print(f"speed-up {sk_time / our_time:.2f}x; ARI between the two labelings {adjusted_rand_index(sk_labels, our_labels):.4f}; "
          f"bnpvi's last log posterior / point {objective / args.n:.6f}")


if __name__ == "__main__":
    main()
