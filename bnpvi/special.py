"""Log-normalisers and special functions shared by the families.

``multigammaln`` is scipy's multivariate log-gamma function, lnΓ_D(a) = D(D−1)/4 ln π +
Σ_{d=1}^{D} lnΓ(a + (1−d)/2), elementwise in ``a`` (it refuses a <= (D−1)/2, where lnΓ_D is
undefined), offered here beside the families' other normalisers.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, multigammaln, xlogy

__all__ = ["LOG_PI", "LOG_2PI", "multigammaln", "c_beta", "c_dir", "dirichlet_mode", "dirichlet_log_density"]

LOG_PI = float(np.log(np.pi))
LOG_2PI = float(np.log(2.0 * np.pi))


def c_beta(a, b):
    """c_B(a, b) = lnΓ(a+b) − lnΓ(a) − lnΓ(b), the log normaliser of Beta (Hughes 2016 thesis Eq. 3.34)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return gammaln(a + b) - gammaln(a) - gammaln(b)


def c_dir(alpha, axis: int = -1):
    """c_Dir(α) = lnΓ(Σ α_m) − Σ lnΓ(α_m), the log normaliser of Dirichlet (Hughes 2016 thesis Eq. 2.44)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    return gammaln(alpha.sum(axis=axis)) - gammaln(alpha).sum(axis=axis)


def dirichlet_mode(counts, alpha, shift: float):
    """The mode of Dir(counts + α) along the last axis, in the coordinates that ``shift`` names.

    shift = 1: the simplex (π_m ∝ counts_m + α_m − 1, the usual MAP; needs α_m ≥ 1); shift = 0: the
    natural (softmax) coordinates, whose density carries the Jacobian Π_m π_m (π_m ∝ counts_m + α_m, Hughes
    2016 thesis Eq. 2.64 and 2.77). A row whose weights are all 0 (no counts, α_m = shift) has a flat
    density; its mode is taken as uniform.
    """
    weights = np.asarray(counts, dtype=np.float64) + np.asarray(alpha, dtype=np.float64) - shift
    weights = np.maximum(weights, 0.0)
    total = weights.sum(axis=-1, keepdims=True)
    flat = total <= 0.0
    return np.where(flat, 1.0 / weights.shape[-1], weights / np.where(flat, 1.0, total))


def dirichlet_log_density(p, alpha, shift: float):
    """ln Dir(p | α) in the coordinates of :func:`dirichlet_mode`: c_Dir(α) + Σ_m (α_m − shift) ln p_m along
    the last axis (0 ln 0 = 0)."""
    p = np.asarray(p, dtype=np.float64)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), p.shape)
    return c_dir(alpha) + xlogy(alpha - shift, p).sum(axis=-1)
