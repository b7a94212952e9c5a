"""Allocation models of mixtures: the DP stick-breaking prior and the finite Dirichlet.

Both map effective counts N (K,) to q(π) and give the ELBO allocation term at the
optimum, L_alloc*(N); the general term for another q is L_alloc*(N) − KL(q ‖ q*(N))
(the same identity as the observation families, see ``bnpvi.obs.base``).
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma

from bnpvi.errors import BnpviError
from bnpvi.special import c_beta, c_dir


def _counts(N: np.ndarray) -> np.ndarray:
    """Counts clipped at 0 (memoized aggregates can come out as −1e-13; spec 01 §10.3)."""
    return np.maximum(np.asarray(N, dtype=np.float64), 0.0)


def counts_after(N: np.ndarray) -> np.ndarray:
    """N^>_k = Σ_{ℓ>k} N_ℓ (spec 01 Eq. 3.36) along the last axis, by a reversed cumulative sum."""
    tail = np.cumsum(N[..., ::-1], axis=-1)[..., ::-1]
    return np.concatenate([tail[..., 1:], np.zeros(N.shape[:-1] + (1,))], axis=-1)


class DPMixAlloc:
    """DP mixture by stick-breaking with nested truncation (spec 01 §3).

    q(u_k) = Beta(η̂_k1, η̂_k0) with η̂_k1 = 1 + N_k, η̂_k0 = γ + N^>_k (Eq. 3.43, fixed),
    E ln π_k = E ln u_k + Σ_{ℓ<k} E ln(1 − u_ℓ) (Eq. 3.11, 3.32-3.33).
    """

    name = "dp_mix"

    def __init__(self, gamma: float):
        if not np.isfinite(gamma) or gamma <= 0:
            raise BnpviError(f"model.gamma must be a positive number, got {gamma}")
        self.gamma = float(gamma)

    def posterior(self, N: np.ndarray) -> dict[str, np.ndarray]:
        N = _counts(N)
        return {"eta1": 1.0 + N, "eta0": self.gamma + counts_after(N)}

    def expected_log_pi(self, post) -> np.ndarray:
        eta1, eta0 = post["eta1"], post["eta0"]
        total = digamma(eta1 + eta0)
        log_u = digamma(eta1) - total
        log_1mu = digamma(eta0) - total
        return log_u + np.concatenate([[0.0], np.cumsum(log_1mu)[:-1]])

    def expected_pi(self, post) -> np.ndarray:
        """E[π_k] = û_k Π_{ℓ<k}(1 − û_ℓ) (Eq. 3.18)."""
        u = post["eta1"] / (post["eta1"] + post["eta0"])
        return u * np.concatenate([[1.0], np.cumprod(1.0 - u)[:-1]])

    def log_marginal(self, N: np.ndarray):
        """L_DP-alloc* = Σ_k [ln γ − c_B(1 + N_k, γ + N^>_k)] (Eq. 3.44).

        N may be (K,) (returns a float) or (P, K) (one count vector per row; returns (P,)).
        """
        N = _counts(N)
        value = np.sum(np.log(self.gamma) - c_beta(1.0 + N, self.gamma + counts_after(N)), axis=-1)
        return float(value) if N.ndim == 1 else value

    def kl(self, post_q, post_p) -> float:
        """Σ_k KL(Beta(q) ‖ Beta(p))."""
        a1, b1, a0, b0 = post_q["eta1"], post_q["eta0"], post_p["eta1"], post_p["eta0"]
        total = digamma(a1 + b1)
        return float(np.sum(
            c_beta(a1, b1) - c_beta(a0, b0)
            + (a1 - a0) * (digamma(a1) - total) + (b1 - b0) * (digamma(b1) - total)
        ))


class FiniteMixAlloc:
    """Finite mixture with a symmetric Dirichlet prior π ~ Dir(γ/K, ..., γ/K) (spec 01 §2).

    q(π) = Dir(θ̂), θ̂_k = N_k + γ/K (Eq. 2.115); at the optimum
    L_Dir-alloc* = c_Dir(γ/K · 1) − c_Dir(N + γ/K) (Eq. 2.102, fixed).
    """

    name = "finite_mix"

    def __init__(self, gamma: float):
        if not np.isfinite(gamma) or gamma <= 0:
            raise BnpviError(f"model.gamma must be a positive number, got {gamma}")
        self.gamma = float(gamma)

    def _alpha(self, K: int) -> np.ndarray:
        return np.full(K, self.gamma / K)

    def posterior(self, N: np.ndarray) -> dict[str, np.ndarray]:
        N = _counts(N)
        return {"theta": N + self._alpha(N.shape[0])}

    def expected_log_pi(self, post) -> np.ndarray:
        theta = post["theta"]
        return digamma(theta) - digamma(theta.sum())

    def expected_pi(self, post) -> np.ndarray:
        return post["theta"] / post["theta"].sum()

    def log_marginal(self, N: np.ndarray):
        """c_Dir(γ/K · 1) − c_Dir(N + γ/K); N (K,) gives a float, (P, K) gives (P,)."""
        N = _counts(N)
        alpha = self._alpha(N.shape[-1])
        value = c_dir(alpha) - c_dir(N + alpha, axis=-1)
        return float(value) if N.ndim == 1 else value

    def kl(self, post_q, post_p) -> float:
        q, p = post_q["theta"], post_p["theta"]
        return float(c_dir(q) - c_dir(p) + np.sum((q - p) * (digamma(q) - digamma(q.sum()))))


ALLOC_MODELS = {cls.name: cls for cls in (DPMixAlloc, FiniteMixAlloc)}


def make_alloc(cfg) -> DPMixAlloc | FiniteMixAlloc:
    """The allocation model named by the ``model`` config node."""
    name = cfg.get("name")
    if name not in ALLOC_MODELS:
        raise BnpviError(f"unknown model {name!r}; choose one of {sorted(ALLOC_MODELS)}")
    return ALLOC_MODELS[name](gamma=cfg.get("gamma"))
