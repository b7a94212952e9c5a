"""Log-normalisers and special functions shared by the families.

``multigammaln`` is scipy's multivariate log-gamma function, lnΓ_D(a) = D(D−1)/4 ln π +
Σ_{d=1}^{D} lnΓ(a + (1−d)/2), elementwise in ``a`` (it refuses a <= (D−1)/2, where lnΓ_D is
undefined), offered here beside the families' other normalisers.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, multigammaln

__all__ = ["LOG_PI", "LOG_2PI", "multigammaln", "c_beta", "c_dir"]

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
