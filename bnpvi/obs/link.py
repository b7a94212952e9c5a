"""Community link strengths of an assortative MMSB: one Bernoulli per community, Beta prior; name "link".

x_ij | s_ij = r_ij = k ~ Bern(φ_k), φ_k ~ Beta(λ̄₁, λ̄₀) (Stephenson 2015 §4.4 writes τ_1, τ_0;
App. D.4 λ_1, λ_0). It is the ``bern`` family with one dimension, whose atoms are the two values
an edge can take: the allocation model hands it the weights S_0k = Σ_{x_ij=0} η_ijkk and
S_1k = Σ_{x_ij=1} η_ijkk as "responsibilities" of the atoms x = 0 and x = 1, so N_k = S_0k + S_1k
(the pairs inside community k) and S_k = S_1k (its edges). Posterior Beta(λ̄₁ + S_1k, λ̄₀ + S_0k).

Unlike ``bern`` it accepts λ̄₀ = 0, the improper prior Beta(10, 0) of the source's experiments
(Stephenson 2015 App. D.4), as the limit λ̄₀ → 0: E ln(1 − φ_k) = −∞ while λ̂₀ = 0, so f_k(0) = 0 and
no non-edge is ever put inside a community; the ELBO's λ₀ part is then exactly 0 (−∞ if some
non-edge had mass there, which the local step never gives).
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from bnpvi.errors import BnpviError, check_number
from bnpvi.obs.bern import Bern
from bnpvi.obs.base import DataMoments, Posterior


def _diff_or_zero(a: np.ndarray, b: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``value`` where a ≠ b, 0 where a = b (so that lnΓ(0) − lnΓ(0) and 0 · (−∞) are the limits 0)."""
    return np.where(a == b, 0.0, value)


class LinkStrength(Bern):
    """q(φ_k) = Beta(λ̂₁_k, λ̂₀_k) of every community (module docstring).

    Parameters
    ----------
    lam1 : float
        λ̄₁ > 0 (config ``obs.lam1``, default 10, Stephenson 2015 App. D.4).
    lam0 : float
        λ̄₀ ≥ 0 (config ``obs.lam0``, default 1; 0 is the source's improper prior).
    """

    name = "link"
    data_kinds = ("graph",)

    def __init__(self, lam1: float = 10.0, lam0: float = 1.0, D: int = 1):
        if int(D) != 1:
            raise BnpviError(f"obs=link has one dimension (an edge is 0 or 1), got D={D}")
        self.lam1 = check_number(lam1, "obs.lam1")
        self.lam0 = check_number(lam0, "obs.lam0", strict=False)
        self.D = 1
        self._gammaln1, self._gammaln0 = float(gammaln(self.lam1)), float(gammaln(self.lam0))
        self._gammaln10 = float(gammaln(self.lam1 + self.lam0))

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "LinkStrength":
        """Build from the ``obs`` keys ``lam1`` (default 10) and ``lam0`` (default 1); D is ignored (graphs)."""
        lam1, lam0 = options.get("lam1"), options.get("lam0")
        return cls(10.0 if lam1 is None else lam1, 1.0 if lam0 is None else lam0)

    def expected_log_lik(self, post: Posterior, batch) -> np.ndarray:
        """(atoms, K): E ln φ_k for an atom x = 1, E ln(1 − φ_k) for x = 0 (−∞ allowed, never 0 · ∞)."""
        X, _ = self._binary(batch)
        return np.where(X == 1.0, post["E_log_mu"][:, 0][None, :], post["E_log_1mmu"][:, 0][None, :])

    def log_marginal(self, N: np.ndarray, stats, post=None) -> np.ndarray:
        """Σ [c_B(λ̄₁, λ̄₀) − c_B(λ̂₁, λ̂₀)] per community, with lnΓ(λ̂₀) − lnΓ(λ̄₀) = 0 when λ̂₀ = λ̄₀ (also at 0)."""
        lam1, lam0 = self._params(N, stats)
        with np.errstate(invalid="ignore"):
            zeros = _diff_or_zero(lam0, self.lam0, gammaln(lam0) - self._gammaln0)
        return ((gammaln(lam1) - self._gammaln1) + zeros - (gammaln(lam1 + lam0) - self._gammaln10)).sum(axis=1)

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """KL(Beta(a₁, a₀) ‖ Beta(b₁, b₀)) per community, the λ₀ terms taken as 0 where a₀ = b₀."""
        a1, a0 = post_q["lam1"], post_q["lam0"]
        b1, b0 = (np.broadcast_to(post_p[key], a1.shape) for key in ("lam1", "lam0"))
        with np.errstate(invalid="ignore"):
            zero_part = _diff_or_zero(a0, b0, -(gammaln(a0) - gammaln(b0)) + (a0 - b0) * post_q["E_log_1mmu"])
        log_norm = (gammaln(a1 + a0) - gammaln(b1 + b0)) - (gammaln(a1) - gammaln(b1))
        return np.sum(log_norm + zero_part + (a1 - b1) * post_q["E_log_mu"], axis=1)
