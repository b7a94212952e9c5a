"""The top level of a hierarchical Dirichlet process: q(u) and its surrogate bound, shared by every HDP model.

Top-level sticks u_k ~ Beta(1, γ) give the shared probabilities β_k = u_k Π_{ℓ<k}(1 − u_ℓ)
and the remainder β_{K+1} = Π_{ℓ≤K}(1 − u_ℓ) (Hughes 2016 thesis Eq. 5.5, 6.6). Each lower-level
Dirichlet π_j ~ Dir(α_j β (+ κ e_j)) (a document's topic weights, an HMM's transition row)
needs E_q[c_Dir(α_j β)], which has no closed form; the thesis replaces it by lower bounds
that are linear in E ln β_m (Eq. 5.23 for a plain row, Eq. 6.30-6.32 for a sticky one):

    c_Dir(α β)         ≥ K ln α + Σ_{m≤K+1} ln β_m,
    c_Dir(α β + κ e_k) ≥ K ln α − ln(α+κ) + ln κ + (ln(α+κ) − ln κ) β_k + Σ_{m≠k} ln β_m.

Summed over the rows this is C + Σ_m c_m E ln β_m + Σ_m β̂_m X_m, where c_m counts the rows
whose bound holds ln β_m (every plain row holds every m; the sticky row k holds all but k)
and X carries the sticky rows' linear terms. In terms of the sticks, E ln β_m = E ln u_m
+ Σ_{ℓ<m} E ln(1 − u_ℓ), so with q(u_k) = Beta(ρ_k ω_k, (1 − ρ_k) ω_k) (Eq. 5.11, 6.10) the
terms of the ELBO that involve q(u) are (Eq. 5.37, 6.45-6.47)

    f(ρ, ω) = Σ_k [c_B(1, γ) − c_B(ρ_k ω_k, (1−ρ_k) ω_k)]
              + Σ_k A1_k E ln u_k + Σ_k A0_k E ln(1 − u_k) + Σ_{ℓ≤K+1} β̂_ℓ(ρ) T_ℓ,
    A1_k = 1 + c_k − ρ_k ω_k,   A0_k = γ + Σ_{m>k} c_m − (1 − ρ_k) ω_k,

where β̂_ℓ = E[β_ℓ] (exact, the sticks are independent) and T_ℓ = Σ_j α_j E ln π_jℓ + X_ℓ collects
every term linear in β̂. The models supply c and T: an HDP-HMM with K active states has
c_m = K + 1 (non-sticky: K transition rows and the start row), or c_k = K, c_{K+1} = K + 1
(sticky; this is the thesis's sticky A0 with the "+1" that Eq. 6.33 and 6.47 omit, as
Stephenson 2015 App. A Eq. 41-43 derive); a topic model with D documents has c_m = D.

The gradient is in closed form (Stephenson 2015 App. B Eq. 46-48; the digamma terms cancel):

    ∂f/∂ω_k = A1_k (ρ_k ψ1(ρ_k ω_k) − ψ1(ω_k)) + A0_k ((1−ρ_k) ψ1((1−ρ_k) ω_k) − ψ1(ω_k)),
    ∂f/∂ρ_k = ω_k A1_k ψ1(ρ_k ω_k) − ω_k A0_k ψ1((1−ρ_k) ω_k) + β̂_k T_k / ρ_k − Σ_{ℓ>k} β̂_ℓ T_ℓ / (1 − ρ_k).

:func:`optimize` maximises f by Newton steps over ρ = sigmoid(a), ω = exp(b) with the analytic
Hessian (csrc/hdp_sticks.pyx: diagonal plus semiseparable in the ρ's, 2 × 2 blocks with the ω's),
warm-started, each step raising f, so a global step never lowers the ELBO.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, zeta

from bnpvi.kernels import sticks
from bnpvi.special import c_beta

RHO_MIN = 1e-10
"""ρ is kept in [RHO_MIN, 1 − RHO_MIN] (digamma and trigamma of ρω stay finite)."""
OMEGA_BOUNDS = (1e-4, 1e10)
LOGIT_MAX = float(np.log((1.0 - RHO_MIN) / RHO_MIN))
"""logit ρ stays in [−LOGIT_MAX, LOGIT_MAX]."""
GTOL = 1e-10
""":func:`optimize` stops when no free coordinate of the scaled gradient exceeds this."""


def stick_means(rho: np.ndarray) -> np.ndarray:
    """β̂ (K+1,): β̂_k = ρ_k Π_{ℓ<k}(1 − ρ_ℓ) and the remainder β̂_{K+1} = Π_{ℓ≤K}(1 − ρ_ℓ); along the last
    axis (one set of sticks per row)."""
    rho = np.asarray(rho, dtype=np.float64)
    rest = np.concatenate([np.ones(rho.shape[:-1] + (1,)), np.cumprod(1.0 - rho, axis=-1)], axis=-1)
    return np.concatenate([rho * rest[..., :-1], rest[..., -1:]], axis=-1)


def sticks_from_means(beta: np.ndarray) -> np.ndarray:
    """ρ (K,) whose stick means are β̂ (K active entries, the remainder implied): ρ_k = β̂_k / (1 − Σ_{ℓ<k} β̂_ℓ);
    along the last axis."""
    beta = np.asarray(beta, dtype=np.float64)
    before = np.concatenate([np.zeros(beta.shape[:-1] + (1,)), np.cumsum(beta, axis=-1)[..., :-1]], axis=-1)
    return np.clip(beta / np.maximum(1.0 - before, RHO_MIN), RHO_MIN, 1.0 - RHO_MIN)


def prior_sticks(K: int, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """q(u_k) equal to the prior Beta(1, γ): ρ_k = 1/(1+γ), ω_k = 1 + γ (thesis Eq. 5.39 for inactive sticks)."""
    return np.full(K, 1.0 / (1.0 + gamma)), np.full(K, 1.0 + gamma)


def uniform_sticks(K: int, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Sticks whose means are uniform over K states with remainder min(0.05, 1/K); ω_k = 1 + γ.

    A neutral start for an optimisation from nothing (no warm start).
    """
    remainder = min(0.05, 1.0 / K)
    return sticks_from_means(np.full(K, (1.0 - remainder) / K)), np.full(K, 1.0 + gamma)


def edited_sticks(params, sources, gamma: float) -> dict:
    """Sticks for an edited cluster set (see ``SuffStats.remap``), to warm-start a global step: a new cluster's
    β̂ is the sum of its sources' β̂ (merges, sorts); clusters made from nothing (births) share half the
    remainder; removed clusters' mass returns to the remainder. ω is the first source's (1 + γ for new ones)."""
    beta = stick_means(params["rho"])
    fresh = [i for i, s in enumerate(sources) if not s]
    kept = np.array([beta[list(s)].sum() if s else 0.0 for s in sources])
    kept[fresh] = 0.5 * max(1.0 - kept.sum(), 0.0) / max(len(fresh), 1)
    omega = np.array([params["omega"][s[0]] if s else 1.0 + gamma for s in sources])
    return {"rho": sticks_from_means(kept), "omega": omega, "edited": np.array(True)}


def _coefficients(c: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """The constant parts of A1 and A0: 1 + c_k and γ + Σ_{m>k} c_m, k = 1..K (c has K+1 entries)."""
    after = np.cumsum(c[::-1])[::-1]
    return 1.0 + c[:-1], gamma + after[1:]


def surrogate(rho: np.ndarray, omega: np.ndarray, c: np.ndarray, T: np.ndarray, gamma: float):
    """f(ρ, ω) of the module docstring: every ELBO term that involves q(u), for fixed c and T; a float for
    (K,) sticks, one value per row for (P, K) sticks."""
    a, b = rho * omega, (1.0 - rho) * omega
    P1, P0 = _coefficients(c, gamma)
    psi = digamma(omega)
    value = np.sum(c_beta(1.0, gamma) - c_beta(a, b) + (P1 - a) * (digamma(a) - psi) + (P0 - b) * (digamma(b) - psi),
                   axis=-1) + stick_means(rho) @ T
    return float(value) if np.ndim(rho) == 1 else value


def surrogate_grad(rho: np.ndarray, omega: np.ndarray, c: np.ndarray, T: np.ndarray,
                   gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """(∂f/∂ρ, ∂f/∂ω), the closed forms of the module docstring."""
    a, b = rho * omega, (1.0 - rho) * omega
    P1, P0 = _coefficients(c, gamma)
    A1, A0 = P1 - a, P0 - b
    tri_a, tri_b, tri = zeta(2, a), zeta(2, b), zeta(2, omega)  # trigamma ψ1(x) = ζ(2, x)
    d_omega = A1 * (rho * tri_a - tri) + A0 * ((1.0 - rho) * tri_b - tri)
    beta = stick_means(rho)
    weighted = beta * T
    after = np.cumsum(weighted[::-1])[::-1][1:]  # Σ_{ℓ>k} β̂_ℓ T_ℓ, k = 1..K
    before = np.concatenate([[1.0], np.cumprod(1.0 - rho)[:-1]])  # Π_{ℓ<k}(1 − ρ_ℓ) = β̂_k/ρ_k
    d_rho = omega * (A1 * tri_a - A0 * tri_b) + before * T[:-1] - after / (1.0 - rho)
    return d_rho, d_omega


def optimize(c: np.ndarray, T: np.ndarray, gamma: float, rho: np.ndarray, omega: np.ndarray,
             max_iter: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """argmax f(ρ, ω) by damped projected Newton steps on (logit ρ, ln ω) (``bnpvi.kernels.sticks``, the Hessian
    in csrc/hdp_sticks.pyx), from (ρ, ω); each step raises f, so the result is never worse than the start. A
    warm start that is already optimal (largest projected gradient at most :data:`GTOL`) is returned as it is.

    f and its gradient are divided by Σ_m c_m + K + 1 for conditioning (Stephenson 2015 App. B.2 uses
    the unconstrained variables; the scaling is ours).
    """
    c, T = np.asarray(c, dtype=np.float64), np.asarray(T, dtype=np.float64)
    K = rho.shape[0]
    rho = np.clip(np.asarray(rho, dtype=np.float64), RHO_MIN, 1.0 - RHO_MIN)
    omega = np.clip(np.asarray(omega, dtype=np.float64), *OMEGA_BOUNDS)
    P1, P0 = _coefficients(c, gamma)
    x = np.concatenate([np.log(rho) - np.log1p(-rho), np.log(omega)])
    lo = np.concatenate([np.full(K, -LOGIT_MAX), np.full(K, np.log(OMEGA_BOUNDS[0]))])
    hi = np.concatenate([np.full(K, LOGIT_MAX), np.full(K, np.log(OMEGA_BOUNDS[1]))])
    x = np.clip(x, lo, hi)
    steps = sticks.newton(x, lo, hi, P1, P0, np.ascontiguousarray(T), float(c_beta(1.0, gamma)),
                          1.0 / (float(np.sum(c)) + K + 1.0), max_iter, GTOL)
    if steps <= 0:
        return rho, omega
    return np.clip(1.0 / (1.0 + np.exp(-x[:K])), RHO_MIN, 1.0 - RHO_MIN), np.clip(np.exp(x[K:]), *OMEGA_BOUNDS)
