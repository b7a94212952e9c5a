"""The sticky HDP hidden Markov model (Hughes 2016 thesis Ch. 6; Fox et al. 2011 for the sticky κ).

Top-level sticks u_k ~ Beta(1, γ) give β (``bnpvi.alloc.hdp_top``); the start distribution
and every state's transition row are Dirichlet around β (Eq. 6.5-6.7):

    π_0 ~ Dir(α_0 β_1, ..., α_0 β_K, α_0 β_{>K}),   π_j ~ Dir(α β_1, ..., α β_j + κ, ..., α β_{>K}).

Mean field (Eq. 6.8-6.17): q(u_k) = Beta(ρ_k ω_k, (1−ρ_k) ω_k); q(π_j) = Dir(θ_j) with K + 1
entries (the last one is the mass on states beyond K); q(z_d) a Markov chain truncated to K
states, found by forward-backward (shared with the finite HMM, ``HMMAlloc``). With the
summaries of the finite HMM (start counts M_0, transition counts M, entropies) the
allocation part of the ELBO is (Eq. 6.26-6.33)

    Σ_{j=0}^{K} {−c_Dir(θ_j) + Σ_{ℓ≤K+1} (M_jℓ + α_j β̂_ℓ + κ[ℓ=j≥1] − θ_jℓ) P_jℓ}
      + C_K + f(ρ, ω) − Σ_ℓ β̂_ℓ Σ_j α_j P_jℓ + H[q(z)],

with P_jℓ = E ln π_jℓ, f the top-level surrogate of ``hdp_top`` (which holds the β̂-linear
terms once), and C_K = K ln α_0 + K² ln α, plus K (ln κ − ln(α+κ)) when κ > 0. The
constants depend on K and are kept: they are what make proposals that change K
comparable. The bound uses the sticky surrogate only when κ > 0 (ln κ is undefined at 0).

Global step (§6.3.2): θ_0ℓ = M_0ℓ + α_0 β̂_ℓ, θ_jℓ = M_jℓ + α β̂_ℓ + κ[ℓ=j] (Eq. 6.40, with α_0
on the start row and κ on the diagonal only, as Alg. 6.1 writes it), then (ρ, ω) and θ in
turn: once when warm-started at the same clusters, up to ``EDIT_ROUNDS`` times after the
clusters changed or without a warm start; it always ends with θ, so the slack term above is 0.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from bnpvi.alloc import hdp_top
from bnpvi.alloc.base import Params
from bnpvi.alloc.hmm import HMMAlloc, expected_log_probs
from bnpvi.errors import check_number
from bnpvi.special import c_dir
from bnpvi.stats import SuffStats

EDIT_ROUNDS = 3
"""Alternations of (ρ, ω) and θ after the cluster set changed (one otherwise). The reference code uses
10; on mocap6 3 rounds gave the same or better final ELBO in a third less time, and any number gives a
valid bound (the alternation ends with θ)."""


class HDPHMMAlloc(HMMAlloc):
    """Sticky HDP-HMM (see the module docstring); name "hdp_hmm".

    Parameters
    ----------
    gamma : float
        γ > 0, concentration of the top-level sticks.
    alpha : float
        α > 0, concentration of the transition rows around β.
    start_alpha : float
        α_0 > 0, concentration of the start distribution around β.
    sticky_kappa : float
        κ ≥ 0, extra prior mass on each row's self-transition (0: the plain HDP-HMM).
        (Unrelated to the Gaussian families' ``obs.kappa``.)
    """

    name = "hdp_hmm"
    sort_needs_check = True

    def __init__(self, gamma: float = 10.0, alpha: float = 0.5, start_alpha: float = 5.0,
                 sticky_kappa: float = 300.0):
        self.gamma = check_number(gamma, "model.gamma")
        self.alpha = check_number(alpha, "model.alpha")
        self.start_alpha = check_number(start_alpha, "model.start_alpha")
        self.sticky_kappa = check_number(sticky_kappa, "model.sticky_kappa", strict=False)

    # ------------------------------------------------------------ the bound
    def _row_weights(self, K: int) -> np.ndarray:
        """c (K+1,): how many rows' surrogate bounds hold E ln β_m (``hdp_top`` module docstring)."""
        if self.sticky_kappa > 0:
            return np.append(np.full(K, float(K)), K + 1.0)
        return np.full(K + 1, K + 1.0)

    def _sticky_gain(self) -> float:
        """ln(α+κ) − ln κ: the coefficient of β̂_k in row k's sticky bound (0 when κ = 0)."""
        if self.sticky_kappa > 0:
            return float(np.log(self.alpha + self.sticky_kappa) - np.log(self.sticky_kappa))
        return 0.0

    def _constant(self, K: int) -> float:
        """C_K = K ln α_0 + K² ln α (+ K (ln κ − ln(α+κ)) when sticky)."""
        return K * np.log(self.start_alpha) + K * K * np.log(self.alpha) - K * self._sticky_gain()

    def _linear(self, P_start: np.ndarray, P_trans: np.ndarray) -> np.ndarray:
        """T (K+1,): everything linear in β̂, Σ_j α_j P_jℓ + (ln(α+κ) − ln κ)[ℓ ≤ K]."""
        K = P_trans.shape[0]
        T = self.start_alpha * P_start + self.alpha * P_trans.sum(axis=0)
        T[:K] += self._sticky_gain()
        return T

    @staticmethod
    def _padded(start: np.ndarray, trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """M_0 and M with a zero column for the states beyond K (never entered)."""
        return np.append(start, 0.0), np.hstack([trans, np.zeros((trans.shape[0], 1))])

    def _theta(self, start: np.ndarray, trans: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """θ_0 = M_0 + α_0 β̂ and θ_j = M_j + α β̂ + κ e_j (Eq. 6.40), from counts M_0 (K,), M (K, K)."""
        beta = hdp_top.stick_means(rho)
        M_start, M_trans = self._padded(start, trans)
        theta_trans = M_trans + self.alpha * beta
        K = trans.shape[0]
        theta_trans[np.arange(K), np.arange(K)] += self.sticky_kappa
        return M_start + self.start_alpha * beta, theta_trans

    # ------------------------------------------------------------ global step
    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """θ, then (ρ, ω) and θ in turn (module docstring); warm-started from ``warm`` when it fits.

        The initial globals (no warm start, no sequence summarised yet) are those of the reference implementation:
        near-uniform sticks (β̂_k = (1 − min(0.05, 1/K))/K) and θ from unit pseudo-counts (M_0 = 1, M = 1),
        rather than the optimum on no data, whose sticks follow the prior's geometric means."""
        K = stats.K
        rounds = 1
        if warm is not None and "rho" in warm and np.shape(warm["rho"]) == (K,):
            rho, omega = np.asarray(warm["rho"], dtype=np.float64), np.asarray(warm["omega"], dtype=np.float64)
            if "edited" in warm:
                rounds = EDIT_ROUNDS
        else:
            rho, omega = hdp_top.uniform_sticks(K, self.gamma)
            rounds = EDIT_ROUNDS
        start, trans = np.maximum(stats["start"], 0.0), np.maximum(stats["trans"], 0.0)
        if warm is None and not start.any() and not trans.any():  # the initial globals (docstring)
            theta_start, theta_trans = self._theta(np.ones(K), np.ones((K, K)), rho)
            return {"rho": rho, "omega": omega, "theta_start": theta_start, "theta_trans": theta_trans}
        c = self._row_weights(K)
        theta_start, theta_trans = self._theta(start, trans, rho)
        for _ in range(rounds):
            T = self._linear(expected_log_probs(theta_start), expected_log_probs(theta_trans))
            new_rho, omega = hdp_top.optimize(c, T, self.gamma, rho, omega)
            moved = float(np.max(np.abs(new_rho - rho)))
            rho = new_rho
            theta_start, theta_trans = self._theta(start, trans, rho)
            if moved < 1e-8:
                break
        return {"rho": rho, "omega": omega, "theta_start": theta_start, "theta_trans": theta_trans}

    def quick_params(self, start: np.ndarray, trans: np.ndarray, params: Params, sources) -> dict:
        """θ from counts at the warm-started sticks of ``sources``, without optimising q(u) (merge ranking)."""
        warm = self.warm_start(params, sources)
        theta_start, theta_trans = self._theta(start, trans, warm["rho"])
        return {"rho": warm["rho"], "omega": warm["omega"], "theta_start": theta_start, "theta_trans": theta_trans}

    def warm_start(self, params: Params, sources: Sequence[Sequence[int]]) -> dict:
        """Sticks for an edited cluster set (``hdp_top.edited_sticks``), marked as edited."""
        return hdp_top.edited_sticks(params, sources, self.gamma)

    # ------------------------------------------------------------------ ELBO
    def prior_terms(self, start: np.ndarray, trans: np.ndarray, params: Params) -> float:
        """The allocation terms of the module docstring without the entropy, exact for any (θ, ρ, ω)."""
        K = trans.shape[0]
        theta_start, theta_trans = params["theta_start"], params["theta_trans"]
        P_start, P_trans = expected_log_probs(theta_start), expected_log_probs(theta_trans)
        M_start, M_trans = self._padded(start, trans)
        M_trans[np.arange(K), np.arange(K)] += self.sticky_kappa
        rows = (-float(c_dir(theta_start)) - float(np.sum(c_dir(theta_trans)))
                + float(np.sum((M_start - theta_start) * P_start)) + float(np.sum((M_trans - theta_trans) * P_trans)))
        top = hdp_top.surrogate(params["rho"], params["omega"], self._row_weights(K), self._linear(P_start, P_trans),
                                self.gamma)
        return rows + self._constant(K) + top

    def export(self, params: Params) -> dict[str, np.ndarray]:
        """E[β] (top-level probabilities), E[π_0] and E[π_j]; the last column is the mass on states beyond K."""
        start, trans = params["theta_start"], params["theta_trans"]
        return {"top_probs": hdp_top.stick_means(params["rho"]), "start_probs": start / start.sum(),
                "trans_probs": trans / trans.sum(axis=1, keepdims=True)}
