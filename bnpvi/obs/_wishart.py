"""Shared machinery of the Gaussian families: Wishart, Normal-Wishart, matrix-normal-Wishart and Normal-Gamma priors.

Everything the Gaussian families (and the Wishart part of the autoregressive one) have in common lives here once:

* reading and validating the ``obs`` config node and the data-driven prior defaults;
* Cholesky factors of SPD scale matrices, with a tiny logged ridge when round-off makes one indefinite;
* the Wishart log normaliser, E ln|Λ|, KL between Wisharts and the ELBO data term
  L_data,k* at the optimum. A 1-D Wishart(ν, b) with inverse scale b is exactly
  Gamma(shape ν/2, rate b/2), so the diagonal (Normal-Gamma) family uses the same functions with
  D = 1, elementwise per dimension;
* the Normal part of the Normal-Wishart KL and of E_q log p(x | m, Λ);
* summaries Σ_n r_nk y_n y_nᵀ, whitened distances ‖L_k⁻¹(y_n − μ_k)‖² (generally ‖G_k z_n − c_k‖²), and the Bregman
  divergence (= KL between Gaussians) from smoothed atoms to centers for the full-covariance
  families (zero-mean Wishart and Normal-Wishart).

Wishart convention: Λ ~ W(ν, B) with *inverse* scale B,
p(Λ) ∝ |Λ|^{(ν−D−1)/2} exp(−½ tr(BΛ)), E[Λ] = ν B⁻¹ (scipy's ``wishart`` uses scale = B⁻¹).

The formulas are the standard conjugate results for these priors. The Hughes 2016 thesis uses
the zero-mean family (§3.6.1, §4.4.2) and the full-mean one (§4.4.4) without writing them out.
"""
from __future__ import annotations

import logging
from typing import Mapping

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma

from bnpvi.errors import BnpviError
from bnpvi.kernels.mixture import pair_logdets, quad_argmax, quad_features
from bnpvi.special import LOG_2PI, multigammaln

LOG_2 = float(np.log(2.0))
_log = logging.getLogger("bnpvi.obs")

PRIOR_COV_CHOICES = ("eye", "diag", "cov")
VAR_FLOOR = 1e-6
"""Per-dimension data variances are floored at VAR_FLOOR × their mean (constant pixels etc.)."""
_CHUNK_ELEMS = 1 << 22
"""Target size (float64 elements) of temporaries in chunked products (32 MB)."""
_CHUNK_ELEMS_SMALL = 1 << 20
"""The same for the per-cluster weighted rows of ``weighted_outer_sum`` (8 MB: faster, measured)."""
_CHUNK_ELEMS_FEATURES = 1 << 18
"""The same for a block of :func:`~bnpvi.kernels.mixture.quad_features` (2 MB, near the cache: 1,024 rows at D = 16)."""


# ====================================================================== config
def _cfg_get(cfg, key: str):
    if cfg is None:
        return None
    return cfg.get(key)


def _as_float(cfg, key: str, default):
    value = _cfg_get(cfg, key)
    if value is None:
        return default
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise BnpviError(f"obs.{key} must be a number, got {value!r}") from None
    if not np.isfinite(value):
        raise BnpviError(f"obs.{key} must be a finite number, got {value!r}")
    return value


def check_nu(nu: float, min_nu: float, D: int) -> float:
    """ν̄ must exceed ``min_nu``: D − 1 for a D-dim Wishart, 0 per dimension for the diagonal family.

    Otherwise ψ((ν̂ + 1 − d)/2) in E ln|Λ| hits non-positive arguments for empty clusters.
    """
    nu = float(nu)
    if not np.isfinite(nu) or nu <= min_nu:
        raise BnpviError(f"obs.nu must be > {min_nu:g} for D={D} (Wishart degrees of freedom), got {nu:g}")
    return nu


def check_kappa(kappa: float) -> float:
    kappa = float(kappa)
    if not np.isfinite(kappa) or kappa <= 0:
        raise BnpviError(f"obs.kappa must be a positive number, got {kappa:g}")
    return kappa


def check_mean(m, D: int) -> np.ndarray:
    try:
        m = np.asarray(list(m) if not isinstance(m, np.ndarray) else m, dtype=np.float64)
    except (TypeError, ValueError):
        raise BnpviError(f"obs.mean must be a list of {D} numbers, got {m!r}") from None
    if m.shape != (D,) or not np.all(np.isfinite(m)):
        raise BnpviError(f"obs.mean must be a list of {D} finite numbers, got shape {m.shape}")
    return m


def prior_from_config(cfg: Mapping, D: int, moments, *, wishart_dim: int, zero_mean: bool = False) -> dict:
    """Prior hyperparameters from the ``obs`` config node, with data-driven defaults of our choosing.

    Parameters
    ----------
    cfg : mapping with optional keys sF, prior_cov, nu, kappa, mean (see ``bnpvi.obs``).
    D : int
        Data dimension.
    moments : DataMoments or None
        Whole-data moments; None means zero mean and identity covariance.
    wishart_dim : int
        Dimension of each Wishart factor: D for the full-covariance families, 1 for the diagonal one
        (a Gamma per dimension). It sets the check ν̄ > wishart_dim − 1 and the scale factor below.
    zero_mean : bool
        Zero-mean family: the covariance scale is the second moment about 0, Σ_n x xᵀ/N = cov + mean meanᵀ,
        (the zero-mean model's ML covariance); obs.kappa and obs.mean are ignored (not read).

    Returns
    -------
    dict with ``nu`` (float), ``kappa`` (float; NaN if zero_mean), ``m`` (D,; zeros if
    zero_mean), ``B`` (D, D) SPD.

    Notes
    -----
    ν̄ = obs.nu or D + 2. C is the scale matrix chosen by obs.prior_cov ("eye": σ̄² I with
    σ̄² the mean per-dimension variance; "diag": diag of the variances [default]; "cov": the
    full covariance); variances are floored at VAR_FLOOR·σ̄². Then
    B̄ = (ν̄ − d − 1)·sF·C if ν̄ > d + 1 (so that E[Λ⁻¹] = B̄/(ν̄ − d − 1) = sF·C), otherwise
    B̄ = ν̄·sF·C (so that E[Λ]⁻¹ = sF·C), with d = ``wishart_dim``.
    """
    nu = nu_option(cfg, D, wishart_dim)
    sF = positive_option(cfg, "sF", 1.0)
    kind = prior_cov_option(cfg)
    kappa = np.nan if zero_mean else check_kappa(_as_float(cfg, "kappa", 1e-4))

    if moments is None:
        data_mean, cov = np.zeros(D), np.eye(D)
    else:
        data_mean = np.asarray(moments.mean, dtype=np.float64).reshape(-1)
        cov = np.asarray(moments.cov, dtype=np.float64)
        if data_mean.shape != (D,) or cov.shape != (D, D):
            raise BnpviError(f"data moments have shapes {data_mean.shape}, {cov.shape}, expected D={D}")
    if zero_mean:
        cov = cov + np.outer(data_mean, data_mean)
    C = scale_matrix(kind, cov)
    mean_cfg = _cfg_get(cfg, "mean")
    m = np.zeros(D) if zero_mean else (data_mean.copy() if mean_cfg is None else check_mean(mean_cfg, D))
    return {"nu": nu, "kappa": kappa, "m": m, "B": inverse_scale(nu, sF, C, wishart_dim)}


def nu_option(cfg: Mapping, D: int, wishart_dim: int) -> float:
    """ν̄ = obs.nu (default D + 2), checked to exceed wishart_dim − 1 (see ``check_nu``)."""
    return check_nu(_as_float(cfg, "nu", D + 2.0), wishart_dim - 1.0, D)


def positive_option(cfg: Mapping, key: str, default: float) -> float:
    """obs.<key> as a positive finite number (``default`` when unset)."""
    value = _as_float(cfg, key, default)
    if value <= 0:
        raise BnpviError(f"obs.{key} must be a positive number, got {value:g}")
    return value


def prior_cov_option(cfg: Mapping) -> str:
    """obs.prior_cov, one of PRIOR_COV_CHOICES (default "diag")."""
    kind = _cfg_get(cfg, "prior_cov")
    kind = "diag" if kind is None else str(kind)
    if kind not in PRIOR_COV_CHOICES:
        raise BnpviError(f"obs.prior_cov must be one of {list(PRIOR_COV_CHOICES)}, got {kind!r}")
    return kind


def inverse_scale(nu: float, sF: float, C: np.ndarray, wishart_dim: int) -> np.ndarray:
    """B̄ = (ν̄ − d − 1)·sF·C if ν̄ > d + 1 (E[Λ⁻¹] = sF·C), else ν̄·sF·C (E[Λ]⁻¹ = sF·C); d = wishart_dim."""
    factor = nu - wishart_dim - 1.0 if nu > wishart_dim + 1.0 else nu
    return factor * sF * C


def scale_matrix(kind: str, cov: np.ndarray) -> np.ndarray:
    """The prior scale matrix C for obs.prior_cov = kind ∈ {eye, diag, cov} (floored, SPD)."""
    var = np.diag(cov).copy()
    sbar2 = float(np.mean(var)) if var.size else 1.0
    if not np.isfinite(sbar2) or sbar2 <= 0:
        sbar2 = 1.0  # constant data: fall back to unit scale
    var = np.maximum(np.where(np.isfinite(var), var, sbar2), VAR_FLOOR * sbar2)
    if kind == "eye":
        return sbar2 * np.eye(cov.shape[0])
    if kind == "diag":
        return np.diag(var)
    C = 0.5 * (cov + cov.T)
    C[np.diag_indices_from(C)] = var
    return chol_spd(C, what="the data covariance (obs.prior_cov=cov)")[1]


def data_matrix(batch, D: int, family: str) -> np.ndarray:
    """The batch's X as float64 (N, D), with a one-line error when D does not match."""
    X = np.asarray(batch.X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != D:
        raise BnpviError(f"data have shape {X.shape} but the {family} family was built for D={D}")
    return X


def prior_scale(B, key: str = "B", what: str = "the prior scale matrix") -> tuple[np.ndarray, np.ndarray, float]:
    """Validated prior SPD matrix obs.<key> (B̄ by default): returns (matrix, its Cholesky factor, ln|matrix|)."""
    B = np.asarray(B, dtype=np.float64)
    if B.ndim != 2 or B.shape[0] != B.shape[1]:
        raise BnpviError(f"obs.{key} must be a square matrix, got shape {B.shape}")
    L, B = chol_spd(B, what=f"{what} obs.{key}")
    return B, L, float(logdet_chol(L))


# ============================================================ linear algebra
def chol_spd(B: np.ndarray, what: str = "posterior scale matrix B̂") -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factors of symmetric-positive-definite matrices, with a ridge fallback.

    Parameters
    ----------
    B : (..., D, D) ndarray
        Symmetrised as (B + Bᵀ)/2 first.

    Returns
    -------
    L : (..., D, D) lower-triangular, L Lᵀ = B_used
    B_used : (..., D, D) the symmetrised matrices, with a tiny ridge ε·mean(diag)·I added to
        those whose Cholesky failed (ε = 1e-12, 1e-11, ... until it succeeds; logged).
    """
    B = 0.5 * (B + np.swapaxes(B, -1, -2))
    if not np.all(np.isfinite(B)):
        raise BnpviError(f"{what} has non-finite entries (NaN or inf in the data or statistics)")
    try:
        return np.linalg.cholesky(B), B
    except np.linalg.LinAlgError:
        pass
    B = B.copy()
    L = np.zeros_like(B)
    D = B.shape[-1]
    for idx in np.ndindex(*B.shape[:-2]):
        try:
            L[idx] = np.linalg.cholesky(B[idx])
            continue
        except np.linalg.LinAlgError:
            pass
        scale = max(float(np.mean(np.abs(np.diag(B[idx])))), np.finfo(float).tiny)
        for power in range(-12, 1):
            ridge = scale * 10.0**power
            try:
                L[idx] = np.linalg.cholesky(B[idx] + ridge * np.eye(D))
            except np.linalg.LinAlgError:
                continue
            B[idx] = B[idx] + ridge * np.eye(D)
            _log.warning("%s %s not positive definite; added ridge %.3g", what, idx, ridge)
            break
        else:
            raise BnpviError(f"{what} {idx} is not positive definite even after adding a ridge")
    return L, B


def logdet_chol(L: np.ndarray) -> np.ndarray:
    """ln|B| = 2 Σ_d ln L_dd from the Cholesky factor (never ln det B, which can overflow or underflow)."""
    return 2.0 * np.sum(np.log(np.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


def merged_logdets(base: np.ndarray, X: np.ndarray, pairs: np.ndarray, Y: np.ndarray | None = None,
                   s: np.ndarray | None = None) -> np.ndarray:
    """(P,) ln|B̂| of the merged scale matrices sym(base + X_a + X_b − u uᵀ/s_p), u = Y_a + Y_b, of cluster
    pairs (:func:`bnpvi.kernels.mixture.pair_logdets`, one Cholesky per pair, no (P, D, D) array); a pair whose
    matrix is not numerically positive definite gets :func:`chol_spd`'s ridge, as a posterior would."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    pairs = np.ascontiguousarray(pairs, dtype=np.int64)
    if Y is not None:
        Y, s = np.ascontiguousarray(Y, dtype=np.float64), np.ascontiguousarray(s, dtype=np.float64)
    out = pair_logdets(np.ascontiguousarray(base, dtype=np.float64), X, pairs, Y, s)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        a, b = pairs[bad, 0], pairs[bad, 1]
        M = base + (X[a] + X[b])
        if Y is not None:
            u = Y[a] + Y[b]
            M = M - np.einsum("pd,pe->pde", u, u / s[bad, None])
        out[bad] = logdet_chol(chol_spd(M)[0])
    return out


def chol_inverse(L: np.ndarray) -> np.ndarray:
    """(..., D, D) inverses L⁻¹ of lower-triangular factors, batched in one NumPy LAPACK call.

    (NumPy's LAPACK, not scipy.linalg: calling both wakes two OpenBLAS thread pools,
    which made each small solve take milliseconds on a busy 2-core machine.)
    """
    L = np.asarray(L, dtype=np.float64)
    return np.tril(np.linalg.solve(L, np.broadcast_to(np.eye(L.shape[-1]), L.shape)))


def trace_inv_prod(L_q: np.ndarray, L_p: np.ndarray) -> np.ndarray:
    """tr(B_p B_q⁻¹) = ‖L_q⁻¹ L_p‖_F² for Cholesky factors of B_q, B_p (broadcast over leading axes)."""
    M = np.linalg.solve(L_q, np.broadcast_to(L_p, np.broadcast_shapes(L_q.shape, L_p.shape)))
    return np.sum(M * M, axis=(-2, -1))


def inv_quad(L: np.ndarray, v: np.ndarray) -> np.ndarray:
    """vᵀ B⁻¹ v = ‖L⁻¹ v‖² for (..., D, D) factors and (..., D) vectors."""
    z = np.linalg.solve(L, v[..., None])[..., 0]
    return np.sum(z * z, axis=-1)


def whitened_sq_norms(Y: np.ndarray, L: np.ndarray, mu: np.ndarray | None = None) -> np.ndarray:
    """(N, K) ‖L_k⁻¹ (y_n − μ_k)‖² for all atoms n and clusters k.

    One triangular inverse per cluster, then :func:`quad_forms` with B_k⁻¹ = L_k⁻ᵀL_k⁻¹ when the
    features pay (:func:`_features_pay`), else :func:`map_sq_norms` with the inverses as maps.
    """
    return scaled_sq_norms(Y, L, mu)


def scaled_sq_norms(Y: np.ndarray, L: np.ndarray, mu: np.ndarray | None, scale: np.ndarray | None = None,
                    offset: np.ndarray | None = None) -> np.ndarray:
    """(N, K) c_k + s_k ‖L_k⁻¹ (y_n − μ_k)‖² for (K,) scales s and offsets c (1 and 0 when not given): an
    expected Gaussian log-likelihood in one pass (the scale and offset folded into the product's weights
    when the features pay)."""
    Linv = chol_inverse(L)
    if _features_pay(Y.shape[1], Linv.shape[0]):
        return quad_forms(Y, _gram(Linv), mu, scale, offset)
    out = map_sq_norms(Y, Linv, None if mu is None else np.einsum("kde,ke->kd", Linv, mu))
    if scale is not None:
        out *= scale
    if offset is not None:
        out += offset
    return out


def _gram(Linv: np.ndarray) -> np.ndarray:
    """(K, D, D) B_k⁻¹ = L_k⁻ᵀ L_k⁻¹ from the inverse Cholesky factors."""
    return np.einsum("kfd,kfe->kde", Linv, Linv)


def _features_pay(D: int, K: int) -> bool:
    """Whether :func:`quad_forms` (D(D+1)/2 + D features a row) beats :func:`map_sq_norms` (K·D values a row).
    Measured at one thread: D=16, K=25 3.0× faster; D=64, K=200 3.0×; D=64, K=25 1.1× (the features
    cost as much as the product there)."""
    return D * (D + 1) // 2 + D < K * D


def quad_weights(P: np.ndarray, m: np.ndarray | None, scale: np.ndarray | None = None,
                 offset: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """((F, K) weights, (K,) constants) with c_k + s_k (y − m_k)ᵀP_k(y − m_k) = f(y)·w_k + c'_k for symmetric
    (K, D, D) P_k, (K, D) centers m_k and (K,) scales s and offsets c (1 and 0 when not given):
    yᵀP_k y − 2 yᵀP_k m_k + m_kᵀP_k m_k over the F = D(D+1)/2 + D features of
    :func:`~bnpvi.kernels.mixture.quad_features`; centers None: 0, and the D(D+1)/2 products alone."""
    K, D = P.shape[:2]
    rows, cols = np.triu_indices(D)
    quad = P[:, rows, cols] * np.where(rows == cols, 1.0, 2.0)
    if m is None:
        weights, const = np.ascontiguousarray(quad.T), np.zeros(K)
    else:
        Pm = np.einsum("kde,ke->kd", P, m)
        weights, const = np.hstack([quad, -2.0 * Pm]).T.copy(), np.einsum("kd,kd->k", Pm, m)
    if scale is not None:
        weights, const = weights * scale, const * scale
    if offset is not None:
        const = const + offset
    return weights, const


def quad_forms(Y: np.ndarray, P: np.ndarray, m: np.ndarray | None = None, scale: np.ndarray | None = None,
               offset: np.ndarray | None = None) -> np.ndarray:
    """(N, K) c_k + s_k (y_n − m_k)ᵀP_k(y_n − m_k) for symmetric (K, D, D) P_k (s = 1, c = 0 when not given):
    one (n × F)·(F × K) BLAS product per block of n rows over the F = D(D+1)/2 + D features of
    :func:`~bnpvi.kernels.mixture.quad_features` (half the multiplications of y ↦ L_k⁻¹y, and no (N, K, D) temporary)."""
    N, D = Y.shape
    weights, const = quad_weights(P, m, scale, offset)
    out = np.empty((N, P.shape[0]))
    chunk = max(1, _CHUNK_ELEMS_FEATURES // weights.shape[0])
    for s in range(0, N, chunk):
        np.dot(quad_features(Y[s:s + chunk], linear=m is not None), weights, out=out[s:s + chunk])
    out += const
    return out


def map_sq_norms(Z: np.ndarray, G: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
    """(N, K) ‖G_k z_n − c_k‖² for (N, F) rows z_n, (K, R, F) maps G_k and optional (K, R) shifts c_k.

    The maps side by side as one (N × F)·(F × kR) BLAS product per block of maps (blocks sized
    to ~32 MB): no loop over N, and few Python steps over K.
    """
    N, F = Z.shape
    K, R = G.shape[:2]
    out = np.empty((N, K))
    step = max(1, _CHUNK_ELEMS // max(N * R, 1))
    for k0 in range(0, K, step):
        k1 = min(K, k0 + step)
        block = G[k0:k1].transpose(2, 0, 1).reshape(F, (k1 - k0) * R)
        W = (Z @ block).reshape(N, k1 - k0, R)
        if shift is not None:
            W -= shift[k0:k1]
        out[:, k0:k1] = np.einsum("nkd,nkd->nk", W, W)
    return out


def weighted_outer_sum(resp, Y: np.ndarray) -> np.ndarray:
    """(K, D, D) Σ_n r_nk y_n y_nᵀ with BLAS products.

    ``resp`` is an (N, K) ndarray or sparse matrix (``Responsibilities.matrix()``).

    Dense, K ≥ D: (resp_cᵀ) @ [y_nd y_ne]_{d ≤ e} over chunks of atoms, the D(D+1)/2 distinct
    products of :func:`~bnpvi.kernels.mixture.quad_features` (half the multiplications of the full y_n ⊗ y_n). Measured at
    one thread: D=16, K=25, N=10⁵ 0.051 s against 0.079 s for the full outer products; D=64, K=200,
    N=9,000 0.16 s against 0.27 s. Dense, K < D: :func:`_weighted_outer_sum_by_cluster`.

    Sparse (L-sparse responsibilities, Hughes 2016 thesis §7.1.2): the stored entries are
    bucketed by cluster (CSC) and each cluster's S_k = (Y_k · r_k)ᵀ Y_k is one product over
    its own atoms only, N L D² operations in all instead of N K D².
    """
    N, D = Y.shape
    K = resp.shape[1]
    if sp.issparse(resp):
        cols = sp.csc_matrix(resp)
        out = np.zeros((K, D, D))
        for k in range(K):
            lo, hi = cols.indptr[k], cols.indptr[k + 1]
            if hi > lo:
                Yk = Y[cols.indices[lo:hi]]
                out[k] = (Yk * cols.data[lo:hi, None]).T @ Yk
        return 0.5 * (out + np.swapaxes(out, 1, 2))
    if K < D:  # blocks of r_nk y_n (N K D values) are smaller than blocks of features (N D(D+1)/2)
        return _weighted_outer_sum_by_cluster(resp, Y)
    n_features = D * (D + 1) // 2 + D
    sums = np.zeros((K, n_features))
    chunk = max(1, _CHUNK_ELEMS_FEATURES // n_features)
    for s in range(0, N, chunk):
        sums += np.asarray(resp[s:s + chunk]).T @ quad_features(Y[s:s + chunk])
    rows, cols = np.triu_indices(D)
    out = np.empty((K, D, D))
    out[:, rows, cols] = sums[:, :rows.size]
    out[:, cols, rows] = sums[:, :rows.size]
    return out


def _weighted_outer_sum_by_cluster(resp: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``weighted_outer_sum`` for dense resp with K < D: Yᵀ [r_nk y_n]_(k, e), one (D, K·D) product per
    chunk of ~2**20 values. Measured (N=15,000, D=64): K=8 0.016 s vs 0.10 s for the outer-product
    blocks, K=50 0.087 s vs 0.13 s; the blocks win from K ≈ D on."""
    N, D = Y.shape
    K = resp.shape[1]
    out = np.zeros((D, K * D))
    chunk = max(1, _CHUNK_ELEMS_SMALL // max(K * D, 1))
    for s in range(0, N, chunk):
        Yc = Y[s:s + chunk]
        out += Yc.T @ (np.asarray(resp[s:s + chunk])[:, :, None] * Yc[:, None, :]).reshape(Yc.shape[0], K * D)
    out = out.reshape(D, K, D).transpose(1, 0, 2)
    return 0.5 * (out + np.swapaxes(out, 1, 2))


# ================================================================ Wishart math
def expected_logdet(nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """E ln|Λ| = Σ_{d=1}^{D} ψ((ν + 1 − d)/2) + D ln 2 − ln|B|."""
    nu = np.asarray(nu, dtype=np.float64)
    d = np.arange(D, dtype=np.float64)
    return digamma((nu[..., None] - d) / 2.0).sum(axis=-1) + D * LOG_2 - logdet_B


def wishart_log_norm(nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """A(ν, B) = (νD/2) ln 2 − (ν/2) ln|B| + lnΓ_D(ν/2): log ∫ |Λ|^{(ν−D−1)/2} e^{−tr(BΛ)/2} dΛ."""
    nu = np.asarray(nu, dtype=np.float64)
    return 0.5 * nu * D * LOG_2 - 0.5 * nu * logdet_B + multigammaln(0.5 * nu, D)


def wishart_log_marginal(N, nu_prior, logdet_prior, nu_post, logdet_post, D: int) -> np.ndarray:
    """−(N D/2) ln π + lnΓ_D(ν̂/2) − lnΓ_D(ν̄/2) + (ν̄/2) ln|B̄| − (ν̂/2) ln|B̂|.

    Written as −(N D/2) ln 2π + A(ν̂, B̂) − A(ν̄, B̄); also the Wishart part of the Normal-Wishart
    family and (D = 1, per dimension) of the diagonal one.
    Exactly 0 when (ν̂, ln|B̂|) = (ν̄, ln|B̄|).
    """
    return (-0.5 * D * LOG_2PI) * N + (wishart_log_norm(nu_post, logdet_post, D) - wishart_log_norm(nu_prior, logdet_prior, D))


def kl_wishart(nu_q, logdet_q, nu_p, logdet_p, trace_pq, D: int) -> np.ndarray:
    """KL(W(ν_q, B_q) ‖ W(ν_p, B_p)), trace_pq = tr(B_p B_q⁻¹).

    = A(ν_p, B_p) − A(ν_q, B_q) + ((ν_q − ν_p)/2) E_q ln|Λ| − ν_q D/2 + (ν_q/2) tr(B_p B_q⁻¹).
    For D = 1 this is KL_Gamma(ν_q/2, b_q/2 ‖ ν_p/2, b_p/2).
    """
    e_logdet = expected_logdet(nu_q, logdet_q, D)
    return (
        wishart_log_norm(nu_p, logdet_p, D) - wishart_log_norm(nu_q, logdet_q, D)
        + 0.5 * (nu_q - nu_p) * e_logdet - 0.5 * nu_q * D + 0.5 * nu_q * trace_pq
    )


def kl_normal_part(kappa_q, kappa_p, maha, D: int) -> np.ndarray:
    """E_{q(Λ)} KL(N(m_q, (κ_qΛ)⁻¹) ‖ N(m_p, (κ_pΛ)⁻¹)), the Normal part of the Normal-Wishart KL.

    = ½[D κ_p/κ_q − D + D ln(κ_q/κ_p) + κ_p · maha], maha = ν_q (m_q − m_p)ᵀ B_q⁻¹ (m_q − m_p)
    (diagonal family: Σ_d ν_q (m_qd − m_pd)²/b_qd).
    """
    ratio = kappa_p / kappa_q
    return 0.5 * (D * ratio - D - D * np.log(ratio) + kappa_p * maha)


def gauss_expected_log_lik(e_logdet, maha, D: int, kappa=None) -> np.ndarray:
    """E_q log N(x | m, Λ⁻¹) = −(D/2) ln 2π + ½ E ln|Λ| − ½ [D/κ̂ + maha].

    ``maha`` (N, K) is ν̂ (x − m̂)ᵀ B̂⁻¹ (x − m̂); ``kappa`` None means a known zero mean (zm_gauss).
    """
    return gauss_log_lik_const(e_logdet, D, kappa)[None, :] - 0.5 * maha


def gauss_log_lik_const(e_logdet, D: int, kappa=None) -> np.ndarray:
    """(K,) −(D/2) ln 2π + ½ E ln|Λ_k| (− ½ D/κ̂_k with a Normal mean): E_q log N(x | m, Λ⁻¹) at x = m̂ and ν̂ → 0."""
    const = -0.5 * D * LOG_2PI + 0.5 * np.asarray(e_logdet, dtype=np.float64)
    if kappa is not None:
        const = const - 0.5 * D / kappa
    return const


def wishart_expected_log_lik(Y: np.ndarray, post, D: int, mu=None, kappa=None) -> np.ndarray:
    """(N, K) E_q log N(y_n | m_k, Λ_k⁻¹) under q(Λ_k) = W(ν̂_k, B̂_k) (and q(m_k | Λ_k) with precision κ̂_k Λ_k):
    −(D/2) ln 2π + ½ E ln|Λ_k| − ½[D/κ̂_k + ν̂_k (y − μ_k)ᵀ B̂_k⁻¹ (y − μ_k)], in one pass (:func:`scaled_sq_norms`)."""
    return scaled_sq_norms(Y, post["B_chol"], mu, *_log_lik_scale_offset(post, D, kappa))


def _log_lik_scale_offset(post, D: int, kappa=None) -> tuple[np.ndarray, np.ndarray]:
    """(K,) scales −½ν̂_k and offsets of the quadratic forms in :func:`wishart_expected_log_lik`."""
    return -0.5 * np.asarray(post["nu"], dtype=np.float64), gauss_log_lik_const(post["E_logdet_Lambda"], D, kappa)


def wishart_best_clusters(X: np.ndarray, post, D: int, log_weights: np.ndarray, mu=None, kappa=None,
                          shift=None) -> np.ndarray:
    """(N,) argmax_k log_weights_k + E_q log N(y_n | m_k, Λ_k⁻¹) at y_n = x_n − shift
    (:func:`wishart_expected_log_lik`; ties to the first). Where the features pay, the expectation is
    f(y)·W_k + c_k (:func:`quad_weights` of B̂_k⁻¹, scaled by −½ν̂_k and offset by the constants and the
    log weights) and the argmax is one compiled pass (:func:`bnpvi.kernels.mixture.quad_argmax`), without the (N, K) scores."""
    log_weights = np.asarray(log_weights, dtype=np.float64)
    if not (_features_pay(D, len(log_weights)) and np.all(np.isfinite(log_weights))):
        scores = wishart_expected_log_lik(X if shift is None else X - shift, post, D, mu, kappa)
        scores += log_weights
        return np.argmax(scores, axis=1)
    scale, offset = _log_lik_scale_offset(post, D, kappa)
    weights, const = quad_weights(_gram(chol_inverse(post["B_chol"])), mu, scale, offset + log_weights)
    return quad_argmax(np.ascontiguousarray(X, dtype=np.float64), weights, const,
                       None if shift is None else np.asarray(shift, dtype=np.float64))[0]


def wishart_posterior(nu: np.ndarray, B: np.ndarray) -> dict[str, np.ndarray]:
    """Posterior Wishart parameters with factors: nu, B (SPD), B_chol, logdet_B, E_logdet_Lambda."""
    L, B = chol_spd(B)
    logdet = logdet_chol(L)
    return {"nu": nu, "B": B, "B_chol": L, "logdet_B": logdet,
            "E_logdet_Lambda": expected_logdet(nu, logdet, B.shape[-1])}


def empty_rows(N: np.ndarray, stats: Mapping[str, np.ndarray]) -> np.ndarray:
    """(K,) bool: clusters with N_k = 0 and all statistics exactly 0 (their L_data,k* is 0)."""
    empty = np.asarray(N) == 0
    for value in stats.values():
        value = np.asarray(value)
        empty &= ~np.any(value.reshape(value.shape[0], -1) != 0, axis=1)
    return empty


def counts(N) -> np.ndarray:
    """N clipped at 0 (memoized aggregates can come out as −1e-13 from cancellation)."""
    return np.maximum(np.asarray(N, dtype=np.float64), 0.0)


def atom_gauss_divergences(Y, *, nu_atom, shrink, mean_scale, prior_chol, prior_logdet):
    """``idx ↦ gauss_divergence(Y, centers of the atoms idx)`` at O(N·D) per center instead of O(N·D²).

    A center made from one atom y_j (k-means++ seeding, thesis Alg. 2.2) is the one-observation
    posterior: ν̂_j = ν_a, B̂_j = B̄ + c y_j y_jᵀ, μ_j = s y_j. With z_n = L̄⁻¹y_n (one whitening of
    the batch, shared by every center), q_n = ‖z_n‖² and g_nj = z_nᵀz_j, the matrix determinant lemma
    and the Sherman-Morrison formula give, with a_j = c/(1 + c q_j),

        tr(B̂_j⁻¹B̄) = D − a_j q_j,      ‖L_j⁻¹y_n‖² = q_n − a_j g_nj²,      ln|B̂_j| = ln|B̄| + ln(1 + c q_j),
        ‖L_j⁻¹(s y_n − μ_j)‖² = s²[(q_n − 2g_nj + q_j) − a_j (g_nj − q_j)²],

    so the terms of :func:`gauss_divergence` need only the (N, J) product Z Z_idxᵀ. Equal to it up to
    rounding (tests/test_obs_gauss.py).
    """
    N, D = Y.shape
    Z = Y @ chol_inverse(prior_chol).T
    q = np.einsum("nd,nd->n", Z, Z)
    atom_logdet = prior_logdet + np.log1p(shrink * q) - D * np.log(nu_atom)

    def to_atoms(idx) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        q_c = q[idx]
        a = shrink / (1.0 + shrink * q_c)
        g = Z @ Z[idx].T
        val = (D - a * q_c) + shrink * (q[:, None] - a * g * g)
        if mean_scale is not None:
            val += nu_atom * mean_scale ** 2 * ((q[:, None] - 2.0 * g + q_c) - a * (g - q_c) ** 2)
        val += (prior_logdet + np.log1p(shrink * q_c)) - D * np.log(nu_atom) - atom_logdet[:, None]
        return np.maximum(0.5 * (val - D), 0.0)

    return to_atoms


def gauss_divergence(Y, centers, *, nu_atom, shrink, mean_scale, prior_chol, prior_logdet) -> np.ndarray:
    """(N, J) KL(N(a_n, Σ_n) ‖ N(μ_j, Σ_j)) from smoothed atoms to centers (full-covariance families).

    This KL is the Bregman divergence between the mean parameters (Hughes 2016 thesis Eq. 2.35),
    with each atom smoothed by the prior as in the k-means++ seeding of Alg. 2.2.

    Atom n (the one-observation posterior's point estimate, y_n = x_n − m̄):
    Σ_n = (B̄ + c y_n y_nᵀ)/ν_a, a_n = s·y_n; center j: Σ_j = B̂_j/ν̂_j, mean μ_j = m̂_j − m̄.
    Normal-Wishart: c = κ̄/(κ̄+1), s = 1/(κ̄+1), ν_a = ν̄+1; zero-mean: c = 1, no means. Then

        2 KL = (ν̂_j/ν_a)[tr(B̂_j⁻¹B̄) + c ‖L_j⁻¹y_n‖²] + ν̂_j ‖L_j⁻¹(s y_n − μ_j)‖² − D
               + ln|B̂_j| − D ln ν̂_j − ln|B̄| − ln(1 + c ‖L̄⁻¹y_n‖²) + D ln ν_a,

    using the matrix determinant lemma for ln|Σ_n| (no per-atom D×D work).

    Parameters
    ----------
    Y : (N, D) atoms relative to m̄ (zero-mean family: the raw atoms).
    centers : Posterior with nu, B_chol, logdet_B and (Normal-Wishart) m_rel = m̂ − m̄.
    mean_scale : float or None
        s above; None for the zero-mean family.
    """
    N, D = Y.shape
    L_c, nu_c, logdet_c = centers["B_chol"], centers["nu"], centers["logdet_B"]
    J = L_c.shape[0]
    atom_logdet = prior_logdet + np.log1p(shrink * whitened_sq_norms(Y, prior_chol[None])[:, 0]) - D * np.log(nu_atom)
    trace = trace_inv_prod(L_c, prior_chol[None])
    Linv = chol_inverse(L_c)
    out = np.empty((N, J))
    for j in range(J):
        Z = Y @ Linv[j].T
        val = (nu_c[j] / nu_atom) * (trace[j] + shrink * np.einsum("nd,nd->n", Z, Z))
        if mean_scale is not None:
            W = mean_scale * Z - Linv[j] @ centers["m_rel"][j]
            val += nu_c[j] * np.einsum("nd,nd->n", W, W)
        out[:, j] = val + (logdet_c[j] - D * np.log(nu_c[j])) - atom_logdet
    out = 0.5 * (out - D)
    return np.maximum(out, 0.0)


# ============================================================ point estimates (alg=em)
def point_logdet(point, D: int) -> np.ndarray:
    """(K,) ln|Λ_k| of point precisions Λ_k = c_k B̂_k⁻¹ (``point``: prec_scale c, logdet_B): D ln c_k − ln|B̂_k|."""
    return D * np.log(point["prec_scale"]) - point["logdet_B"]


def point_log_lik(Y: np.ndarray, point, D: int, mu=None) -> np.ndarray:
    """(N, K) log N(y_n | μ_k, Λ_k⁻¹) at point precisions Λ_k = c_k B̂_k⁻¹ (``point``: B_chol, logdet_B, prec_scale):
    −(D/2) ln 2π + ½ ln|Λ_k| − ½ c_k (y − μ_k)ᵀ B̂_k⁻¹ (y − μ_k), the quadratic form of
    :func:`wishart_expected_log_lik` in the same one pass (:func:`scaled_sq_norms`)."""
    offset = -0.5 * D * LOG_2PI + 0.5 * point_logdet(point, D)
    return scaled_sq_norms(Y, point["B_chol"], mu, -0.5 * np.asarray(point["prec_scale"], dtype=np.float64), offset)


def wishart_log_density(point, nu: float, prior_chol: np.ndarray, logdet_prior: float, D: int) -> np.ndarray:
    """(K,) ln W(Λ_k | ν̄, B̄) at Λ_k = c_k B̂_k⁻¹: ((ν̄ − D − 1)/2) ln|Λ_k| − (c_k/2) tr(B̄ B̂_k⁻¹) − A(ν̄, B̄)
    (A of :func:`wishart_log_norm`)."""
    trace = trace_inv_prod(point["B_chol"], prior_chol)
    return (0.5 * (nu - D - 1.0) * point_logdet(point, D) - 0.5 * point["prec_scale"] * trace
            - wishart_log_norm(nu, logdet_prior, D))


def precision_point(post, shift: float) -> dict[str, np.ndarray]:
    """The point (Λ_k = c_k B̂_k⁻¹ with c_k = ν̂_k − ``shift``) of a Wishart posterior ``post``, with its factors."""
    return {"B": post["B"], "B_chol": post["B_chol"], "logdet_B": post["logdet_B"],
            "prec_scale": np.asarray(post["nu"], dtype=np.float64) - shift}
