"""Benchmark the dense local step (spec 01 §3.5) against NumPy and scikit-learn.

(a) Normalisation only — given W = E log p(x|φ) and E ln π: the compiled
    ``bnpvi.kernels.dense_local_step`` (1 thread and default threads) against the
    NumPy reference ``bnpvi.kernels.reference.dense_local_step``.
(b) Whole E-step of a full-covariance DP Gaussian mixture: ours = a self-contained
    NumPy E[log lik] (batched Cholesky, then one GEMM per cluster, the way scikit-learn
    does it) + E ln π + the compiled kernel (which also yields the entropies), against
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
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import digamma

try:
    import bnpvi  # noqa: F401
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bnpvi import kernels
from bnpvi.kernels import reference

try:
    from sklearn.mixture import BayesianGaussianMixture
    from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky
except ImportError:  # pragma: no cover
    BayesianGaussianMixture = None

LOG_2PI = float(np.log(2.0 * np.pi))


# ----------------------------------------------------------------- model pieces
def gauss_expected_log_lik(X, kappa, m, nu, B):
    """E_q log N(x_n | μ_k, Λ_k⁻¹) under Normal-Wishart q (spec 01 §1.5 F4), shape (N, K).

    q(Λ_k) = Wishart(ν_k, B_k⁻¹) (E Λ_k = ν_k B_k⁻¹), q(μ_k | Λ_k) = N(m_k, (κ_k Λ_k)⁻¹):
    E log p = −D/2 ln 2π + ½ E ln|Λ_k| − D/(2κ_k) − ½ ν_k (x − m_k)ᵀ B_k⁻¹ (x − m_k),
    E ln|Λ_k| = Σ_{d=1}^{D} ψ((ν_k + 1 − d)/2) + D ln 2 − ln|B_k|.
    """
    N, D = X.shape
    K = m.shape[0]
    out = np.empty((N, K))
    # NumPy's own LAPACK only (mixing in scipy.linalg wakes a second OpenBLAS thread pool)
    L = np.linalg.cholesky(B)                                   # (K, D, D), B_k = L_k L_kᵀ
    U = np.linalg.inv(L).transpose(0, 2, 1)                     # U_k U_kᵀ = B_k⁻¹
    logdet_B = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
    e_logdet = digamma(0.5 * nu[:, None] - 0.5 * np.arange(D)).sum(axis=1) + D * np.log(2.0) - logdet_B
    const = -0.5 * D * LOG_2PI + 0.5 * e_logdet - 0.5 * D / kappa
    for k in range(K):
        y = X @ U[k]
        y -= m[k] @ U[k]
        out[:, k] = const[k] - 0.5 * nu[k] * np.einsum("ij,ij->i", y, y)
    return out


def dp_expected_log_pi(eta1, eta0):
    """E ln π_k = E ln u_k + Σ_{ℓ<k} E ln(1 − u_ℓ) (spec 01 Eq. 3.11, 3.32-3.33)."""
    dsum = digamma(eta1 + eta0)
    e_log_u = digamma(eta1) - dsum
    e_log_1mu = digamma(eta0) - dsum
    return e_log_u + np.concatenate(([0.0], np.cumsum(e_log_1mu)[:-1]))


def make_problem(N, D, K, seed=0):
    """Data and a hand-set Normal-Wishart / stick-breaking posterior for K clusters."""
    rng = np.random.default_rng([seed, N, D, K])
    means = 4.0 * rng.standard_normal((K, D))
    labels = rng.integers(0, K, N)
    X = means[labels] + rng.standard_normal((N, D))
    Nk = np.bincount(labels, minlength=K).astype(float)
    A = rng.standard_normal((K, D, D)) / np.sqrt(D)
    cov = A @ A.transpose(0, 2, 1) + 0.5 * np.eye(D)  # E[Λ_k]⁻¹
    kappa = Nk + 1.0
    nu = Nk + D + 2.0
    B = nu[:, None, None] * cov
    eta1 = 1.0 + Nk
    eta0 = 1.0 + (Nk.sum() - np.cumsum(Nk))
    return X, dict(kappa=kappa, m=means, nu=nu, B=B, eta1=eta1, eta0=eta0, cov=cov)


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


# --------------------------------------------------------------------- timing
def best_of(fn, repeats):
    best = np.inf
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def run_case(N, D, K, repeats):
    X, post = make_problem(N, D, K)
    row = {"D": D, "K": K}

    def our_estep():
        log_lik = gauss_expected_log_lik(X, post["kappa"], post["m"], post["nu"], post["B"])
        log_prior = dp_expected_log_pi(post["eta1"], post["eta0"])
        return kernels.dense_local_step(log_lik, log_prior)

    # (a) normalisation only, on fixed weights
    log_lik = gauss_expected_log_lik(X, post["kappa"], post["m"], post["nu"], post["B"])
    log_prior = dp_expected_log_pi(post["eta1"], post["eta0"])
    row["norm_c1"], _ = best_of(lambda: kernels.dense_local_step(log_lik, log_prior, n_threads=1), repeats)
    row["norm_c"], ours = best_of(lambda: kernels.dense_local_step(log_lik, log_prior), repeats)
    row["norm_ref"], refres = best_of(lambda: reference.dense_local_step(log_lik, log_prior), repeats)
    row["norm_err"] = float(np.max(np.abs(ours[0] - refres[0])))
    del refres

    # (b) whole E-step
    row["loglik"], _ = best_of(
        lambda: gauss_expected_log_lik(X, post["kappa"], post["m"], post["nu"], post["B"]), repeats
    )
    row["ours"], ours = best_of(our_estep, repeats)
    if BayesianGaussianMixture is not None:
        bgm = make_sklearn_bgm(post, K)
        row["sklearn"], (_, log_resp) = best_of(lambda: bgm._estimate_log_prob_resp(X), repeats)
        row["estep_err"] = float(np.max(np.abs(ours[0] - np.exp(log_resp))))
    del log_lik, ours
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="N = 20k and fewer cases")
    p.add_argument("--n", type=int, default=None, help="number of atoms N (default 100000, 20000 with --quick)")
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs (default 3)")
    args = p.parse_args(argv)

    N = args.n or (20_000 if args.quick else 100_000)
    Ds, Ks = ([2, 16], [8, 64]) if args.quick else ([2, 16, 64], [8, 64, 256])
    threads = kernels._ext.max_threads() if kernels.HAVE_COMPILED else 1
    print(
        f"N = {N}, best of {args.repeats}; compiled kernel: {kernels.HAVE_COMPILED} "
        f"(OpenMP threads {threads}); numpy {np.__version__}; {platform.processor() or platform.machine()}"
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
