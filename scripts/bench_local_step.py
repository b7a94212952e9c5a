"""Benchmark the dense local step (Hughes 2016 thesis §3.4.2) against NumPy and scikit-learn.

(a) Normalisation only — given W = E log p(x|φ) and E ln π: the compiled
    ``bnpvi.kernels.mixture.dense_local_step`` (1 thread and default threads) against the
    NumPy reference ``bnpvi.kernels.reference.dense_local_step``.
(b) Whole E-step of a full-covariance DP Gaussian mixture: ours = bnpvi's own
    ``Model.local_step`` (the ``gauss`` family's E[log lik] + E ln π + the
    compiled kernel, which also yields the entropies), against
    ``BayesianGaussianMixture._estimate_log_prob_resp`` of a hand-set scikit-learn
    model with the same posterior (skipped when scikit-learn is missing). The two
    must agree: the last column is max |r_ours − exp(log_resp_sklearn)|.

Times are the best of ``--repeats`` runs (time.perf_counter), in seconds.

Usage::

    python scripts/bench_local_step.py            # N = 100k, D ∈ {2,16,64}, K ∈ {8,64,256}
    python scripts/bench_local_step.py --quick    # N = 20k, fewer cases
    python scripts/bench_local_step.py --n 50000
"""
from __future__ import annotations

import argparse
import platform

import numpy as np

from bnpvi.kernels import mixture
from bnpvi.alloc import DPMixAlloc
from bnpvi.data.batch import PointBatch
from bnpvi.kernels import reference
from bnpvi.model import Model
from bnpvi.obs.gauss import Gauss
from timing import best_of  # scripts/timing.py

try:
    from sklearn.mixture import BayesianGaussianMixture
    from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky
except ImportError:  # pragma: no cover
    BayesianGaussianMixture = None


# ----------------------------------------------------------------- model pieces
def make_problem(N, D, K, seed=0):
    """Data from K clusters and the bnpvi model (DP + full Gaussian) fitted to their labels."""
    rng = np.random.default_rng([seed, N, D, K])
    means = 4.0 * rng.standard_normal((K, D))
    labels = rng.integers(0, K, N)
    A = rng.standard_normal((K, D, D)) / np.sqrt(D)
    X = means[labels] + np.einsum("nd,nde->ne", rng.standard_normal((N, D)), A[labels]) + 0.7 * rng.standard_normal((N, D))
    batch = PointBatch(np.ascontiguousarray(X))
    obs = Gauss(nu=D + 2.0, kappa=1.0, m=X.mean(axis=0), B=np.eye(D))
    model = Model(DPMixAlloc(1.0), obs)
    return batch, model, model.global_step(model.hard_stats(batch, labels, K))


def sklearn_post(globals_):
    """The bnpvi posterior in scikit-learn's parameterisation: cov = B̂ / ν̂ (E[Λ]⁻¹)."""
    post = globals_.obs
    return dict(kappa=post["kappa"], m=post["m"], nu=post["nu"], cov=post["B"] / post["nu"][:, None, None],
                eta1=globals_.alloc["eta1"], eta0=globals_.alloc["eta0"])


def make_sklearn_bgm(post, K):
    """A BayesianGaussianMixture whose posterior equals ``post`` (no fitting)."""
    bgm = BayesianGaussianMixture(
        n_components=K, covariance_type="full", weight_concentration_prior_type="dirichlet_process"
    )
    bgm.weight_concentration_ = (post["eta1"], post["eta0"])
    bgm.mean_precision_ = post["kappa"]
    bgm.means_ = post["m"]
    bgm.degrees_of_freedom_ = post["nu"]
    bgm.covariances_ = post["cov"]
    bgm.precisions_cholesky_ = _compute_precision_cholesky(post["cov"], "full")
    return bgm


def run_case(N, D, K, repeats):
    batch, model, globals_ = make_problem(N, D, K)
    X = batch.X
    row = {"D": D, "K": K}

    # (a) normalisation only, on fixed weights
    log_lik = model.obs.expected_log_lik(globals_.obs, batch)
    log_prior = model.alloc.expected_log_pi(globals_.alloc)
    row["norm_c1"], _ = best_of(lambda: mixture.dense_local_step(log_lik, log_prior, n_threads=1), repeats)
    row["norm_c"], ours = best_of(lambda: mixture.dense_local_step(log_lik, log_prior), repeats)
    row["norm_ref"], refres = best_of(lambda: reference.dense_local_step(log_lik, log_prior), repeats)
    row["norm_err"] = float(np.max(np.abs(ours[0] - refres[0])))
    del refres

    # (b) whole E-step
    row["loglik"], _ = best_of(lambda: model.obs.expected_log_lik(globals_.obs, batch), repeats)
    row["ours"], (_, ours) = best_of(lambda: model.local_step(batch, globals_), repeats)
    if BayesianGaussianMixture is not None:
        bgm = make_sklearn_bgm(sklearn_post(globals_), K)
        row["sklearn"], (_, log_resp) = best_of(lambda: bgm._estimate_log_prob_resp(X), repeats)
        row["estep_err"] = float(np.max(np.abs(ours.resp.values - np.exp(log_resp))))
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="N = 20k and fewer cases")
    p.add_argument("--n", type=int, default=None, help="number of atoms N (default 100000, 20000 with --quick)")
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs (default 3)")
    args = p.parse_args(argv)

    N = args.n or (20_000 if args.quick else 100_000)
    Ds, Ks = ([2, 16], [8, 64]) if args.quick else ([2, 16, 64], [8, 64, 256])
    print(
        f"N = {N}, best of {args.repeats}; OpenMP threads {mixture._ext.max_threads()}; "
        f"numpy {np.__version__}; {platform.processor() or platform.machine()}"
    )
    print("(a) normalisation only [s]: compiled 1 thread, compiled default, NumPy reference, ref/compiled")
    print("(b) whole E-step [s]: our E[log lik] alone, ours total (E[log lik] + kernel), sklearn, sklearn/ours")
    head = (
        f"{'D':>3} {'K':>4} | {'c 1thr':>8} {'compiled':>8} {'numpy':>8} {'ratio':>6} | "
        f"{'loglik':>8} {'ours':>8} {'sklearn':>8} {'ratio':>6} | {'max|dr|':>8}"
    )
    print(head)
    print("-" * len(head))
    for D in Ds:
        for K in Ks:
            r = run_case(N, D, K, args.repeats)
            sk = r.get("sklearn", np.nan)
            print(
                f"{D:>3} {K:>4} | {r['norm_c1']:8.4f} {r['norm_c']:8.4f} {r['norm_ref']:8.4f} "
                f"{r['norm_ref'] / r['norm_c']:6.1f} | {r['loglik']:8.4f} {r['ours']:8.4f} {sk:8.4f} "
                f"{sk / r['ours']:6.2f} | {r.get('estep_err', np.nan):8.1e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
