"""Independent Bernoulli dimensions with Beta priors.

x_n ∈ {0, 1}^D, each dimension independent:

    x_nd | μ_kd ~ Bern(μ_kd),   μ_kd ~ Beta(λ̄₁, λ̄₀)  (default Beta(0.1, 0.3), Hughes 2016 thesis §6.6.4).

Statistics: N_k and S_kd = Σ_n r_nk x_nd. Global step:
λ̂₁_kd = λ̄₁ + S_kd, λ̂₀_kd = λ̄₀ + N_k − S_kd. The base measure is h(x) = 0, so every
quantity below includes all constants.

The data must be exactly 0/1 or missing (NaN): every method that reads a batch checks it once (O(ND), the
cost of the product it precedes) and raises ``BnpviError`` naming the first offending row.

**Missing entries** are marginalised exactly (the dimensions are independent given the cluster): a family
built for data with missing entries (``missing``) also keeps No_kd = Σ_n r_nk o_nd (o_nd = 1 where x_nd is
observed), S_kd sums observed entries only, and λ̂₀_kd = λ̄₀ + No_kd − S_kd.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from scipy.special import digamma, gammaln

from bnpvi.errors import BnpviError
from bnpvi.obs.base import (DataMoments, ObsFamily, Posterior, has_missing, observed_counts, observed_entries,
                            observed_per_row, observed_sum, raise_unexpected_missing)
from bnpvi.obs.mult import clip_stats, read_positive
from bnpvi.special import dirichlet_log_density, dirichlet_mode
from bnpvi.stats.resp import Responsibilities


def _xlogx_pair(p: float) -> float:
    """p ln p + (1 − p) ln(1 − p) for 0 < p < 1: minus the entropy of Bern(p)."""
    return float(p * np.log(p) + (1.0 - p) * np.log1p(-p))


class Bern(ObsFamily):
    """Binary vectors, independent Bernoulli dimensions with Beta(λ̄₁, λ̄₀) priors; name "bern".

    Parameters
    ----------
    lam1 : float
        λ̄₁ > 0, prior pseudo-count of ones (config ``obs.lam1``, default 0.1).
    lam0 : float
        λ̄₀ > 0, prior pseudo-count of zeros (config ``obs.lam0``, default 0.3).
    D : int
        Number of binary dimensions.
    missing : bool, default False
        The data have missing (NaN) entries: the summaries keep per-dimension counts ``No`` (module notes).
    """

    name = "bern"
    handles_missing = True

    def cluster_moments(self, post: Posterior) -> dict[str, np.ndarray]:
        """``means_``: E[μ_kd], the probability of a 1."""
        return {"means_": post["lam1"] / (post["lam1"] + post["lam0"])}

    def __init__(self, lam1: float, lam0: float, D: int, missing: bool = False):
        self.lam1 = read_positive({"lam1": lam1}, "lam1", 0.1)
        self.lam0 = read_positive({"lam0": lam0}, "lam0", 0.3)
        D = int(D)
        if D < 1:
            raise BnpviError(f"the bern family needs at least one dimension, got D={D}")
        self.D = D
        self.missing = bool(missing)
        self._gammaln1, self._gammaln0 = float(gammaln(self.lam1)), float(gammaln(self.lam0))
        self._gammaln10 = float(gammaln(self.lam1 + self.lam0))

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "Bern":
        """Build from the ``obs`` keys ``lam1`` (default 0.1) and ``lam0`` (default 0.3)."""
        return cls(read_positive(options, "lam1", 0.1), read_positive(options, "lam0", 0.3), D,
                   missing=has_missing(moments))

    def stat_shapes(self) -> dict[str, tuple]:
        return {"S": (self.D,), **({"No": (self.D,)} if self.missing else {})}

    def prior_params(self) -> dict[str, np.ndarray]:
        return {"lam1": np.float64(self.lam1), "lam0": np.float64(self.lam0)}

    # ---------------------------------------------------------------- data
    def _binary(self, batch) -> tuple[np.ndarray, np.ndarray | None]:
        """(X, M): the batch's X as float64 (N, D), checked to be 0/1 or NaN (BnpviError naming the first bad
        row), with 0 at its missing entries, and the sparse 0/1 matrix M of those entries (None: none is)."""
        X = np.asarray(batch.X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.D:
            raise BnpviError(f"data have shape {X.shape} but the bern family was built for D={self.D}")
        X, M = observed_entries(X)
        bad = (X != 0.0) & (X != 1.0)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            col = int(np.flatnonzero(bad[row])[0])
            raise BnpviError(f"the bern family needs binary (0/1) data; row {getattr(batch, 'start', 0) + row} "
                             f"of the data has x[{col}] = {X[row, col]!r}")
        return X, M

    # ------------------------------------------------------------ summaries
    def summarize(self, batch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """S_kd = Σ_n r_nk x_nd = (rᵀ X)_kd over observed entries, and No_kd = Σ_n r_nk o_nd for data with missing
        entries."""
        X, M = self._binary(batch)
        R = resp.matrix()
        out = {"S": np.asarray(R.T @ X)}
        if self.missing:
            out["No"] = observed_counts(R, M, self.D)
        elif M is not None:
            raise_unexpected_missing(self.name)
        return out

    def _params(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(λ̂₁, λ̂₀) = (λ̄₁ + S, λ̄₀ + N − S) (N → No_kd with missing entries) with N, S and N − S clipped at 0
        (memoized residue such as −1e-13)."""
        S = clip_stats(stats["S"])
        N = clip_stats(stats["No"]) if self.missing else clip_stats(N)[:, None]
        return self.lam1 + S, self.lam0 + np.maximum(N - S, 0.0)

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """q(μ_kd) = Beta(λ̂₁_kd, λ̂₀_kd).

        Returns
        -------
        dict of (K, D) arrays: lam1, lam0, E_log_mu = ψ(λ̂₁) − ψ(λ̂₁ + λ̂₀),
        E_log_1mmu = ψ(λ̂₀) − ψ(λ̂₁ + λ̂₀).
        """
        lam1, lam0 = self._params(N, stats)
        total = digamma(lam1 + lam0)
        return {"lam1": lam1, "lam0": lam0, "E_log_mu": digamma(lam1) - total, "E_log_1mmu": digamma(lam0) - total}

    # ---------------------------------------------------------------- ELBO
    def expected_log_lik(self, post: Posterior, batch) -> np.ndarray:
        """(N, K) Σ_d [x_nd E ln μ_kd + (1 − x_nd) E ln(1 − μ_kd)], all constants included.

        Computed as X·(E ln μ − E ln(1−μ))ᵀ + Σ_d E ln(1 − μ_kd): one (N × D)·(D × K) product (over the
        observed d: X is 0 at missing entries and the last sum leaves out the missing ones, :func:`observed_sum`).
        """
        X, M = self._binary(batch)
        E1, E0 = post["E_log_mu"], post["E_log_1mmu"]
        return X @ (E1 - E0).T + observed_sum(M, E0)

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """L_data,k* = Σ_d [c_B(λ̄₁, λ̄₀) − c_B(λ̂₁_kd, λ̂₀_kd)].

        Evaluated as Σ_d [lnΓ(λ̂₁) − lnΓ(λ̄₁) + lnΓ(λ̂₀) − lnΓ(λ̄₀) − lnΓ(λ̂₁ + λ̂₀) + lnΓ(λ̄₁ + λ̄₀)].
        For hard assignments it is the exact Beta-Bernoulli log marginal likelihood of the
        cluster's data (h = 0, nothing dropped). Exactly 0 for empty clusters (N_k = 0, S_k = 0).
        """
        lam1, lam0 = self._params(N, stats)
        out = ((gammaln(lam1) - self._gammaln1) + (gammaln(lam0) - self._gammaln0)
               - (gammaln(lam1 + lam0) - self._gammaln10)).sum(axis=1)
        empty = (clip_stats(N) == 0) & ~np.any(clip_stats(stats["S"]) != 0, axis=1)
        return np.where(empty, 0.0, out)

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """(K,) Σ_d KL(Beta(a₁, a₀) ‖ Beta(b₁, b₀)) for q = (a₁, a₀), p = (b₁, b₀).

        = Σ_d [c_B(a₁, a₀) − c_B(b₁, b₀) + (a₁ − b₁) E_q ln μ + (a₀ − b₀) E_q ln(1 − μ)].
        """
        a1, a0 = post_q["lam1"], post_q["lam0"]
        b1, b0 = (np.broadcast_to(post_p[key], a1.shape) for key in ("lam1", "lam0"))
        log_norm = (gammaln(a1 + a0) - gammaln(b1 + b0)) - (gammaln(a1) - gammaln(b1)) - (gammaln(a0) - gammaln(b0))
        return np.sum(log_norm + (a1 - b1) * post_q["E_log_mu"] + (a0 - b0) * post_q["E_log_1mmu"], axis=1)

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode of q*(μ_kd) = Beta(λ̂₁, λ̂₀): μ = (λ̂₁ − 1)/(λ̂₁ + λ̂₀ − 2) on (0, 1), or λ̂₁/(λ̂₁ + λ̂₀) in the
        natural (logit) coordinates (``natural``; Hughes 2016 thesis Eq. 2.64); 1/2 where the density is flat.
        Key mu (K, D)."""
        lam1, lam0 = self._params(N, stats)
        shift = 0.0 if natural else 1.0
        return {"mu": dirichlet_mode(np.stack([lam1, lam0], axis=-1), 0.0, shift)[..., 0]}

    def map_prior_problem(self, natural: bool = False) -> str | None:
        for key, value in (("lam1", self.lam1), ("lam0", self.lam0)):
            if value < 1.0:
                return (f"alg=em needs every Beta parameter >= 1 (else the MAP lies on the boundary or does not "
                        f"exist): obs.{key} = {value:g}")
        return None

    def log_lik_at(self, point: Posterior, batch) -> np.ndarray:
        """Σ_d [x_nd ln μ_kd + (1 − x_nd) ln(1 − μ_kd)] by matrix products; a value the cluster never takes
        (μ_kd ∈ {0, 1}, possible only with a parameter equal to 1) makes the row impossible (−inf). Over the
        observed d."""
        X, M = self._binary(batch)
        mu = point["mu"]
        one, zero = mu > 0.0, mu < 1.0
        with np.errstate(divide="ignore"):
            log1 = np.where(one, np.log(np.where(one, mu, 1.0)), 0.0)
            log0 = np.where(zero, np.log(np.where(zero, 1.0 - mu, 1.0)), 0.0)
        out = X @ (log1 - log0).T + observed_sum(M, log0)
        if not (one.all() and zero.all()):
            never = (~zero).astype(np.float64).T
            impossible = X @ (~one).T + (1.0 - X) @ never - (0.0 if M is None else M @ never)
            out[impossible > 0] = -np.inf
        return out

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """Σ_d ln Beta(μ_kd | λ̄₁, λ̄₀) in the coordinates of :meth:`map_point`."""
        mu = point["mu"]
        pair = np.stack([mu, 1.0 - mu], axis=-1)
        return dirichlet_log_density(pair, np.array([self.lam1, self.lam0]), 0.0 if natural else 1.0).sum(axis=1)

    def point_moments(self, point: Posterior) -> dict[str, np.ndarray]:
        """``means_``: the probabilities μ_k of a 1."""
        return {"means_": np.asarray(point["mu"])}

    # -------------------------------------------------------------- Bregman
    def divergence(self, batch, centers: Posterior) -> np.ndarray:
        """(N, J) Σ_d KL(Bern(p̃_nd) ‖ Bern(μ_jd)), the Bregman divergence (Hughes 2016 thesis Eq. 2.35).

        Smoothed atom (the one-observation posterior's mean): p̃_nd = (x_nd + λ̄₁)/(1 + λ̄₁ + λ̄₀),
        i.e. p₁ where x = 1 and p₀ where x = 0. Center: the posterior mean μ_jd = λ̂₁/(λ̂₁ + λ̂₀).
        With n_n = Σ_d x_nd and g(p) = p ln p + (1 − p) ln(1 − p),

            D_nj = n_n g(p₁) + (D − n_n) g(p₀) − Σ_d [p₀ ln μ_jd + (1 − p₀) ln(1 − μ_jd)]
                   − (p₁ − p₀) Σ_d x_nd [ln μ_jd − ln(1 − μ_jd)],

        one (N × D)·(D × J) product. Zero for the center built from the atom's own one-hot
        summary; tiny negative rounding is clipped at 0. With missing entries the sums run over the atom's
        observed d (D → their number, and the base term leaves out the missing entries).
        """
        X, M = self._binary(batch)
        lam1, lam0 = np.asarray(centers["lam1"], dtype=np.float64), np.asarray(centers["lam0"], dtype=np.float64)
        log_total = np.log(lam1 + lam0)
        log_mu, log_1mmu = np.log(lam1) - log_total, np.log(lam0) - log_total
        denom = 1.0 + self.lam1 + self.lam0
        p1, p0 = (1.0 + self.lam1) / denom, self.lam1 / denom
        ones = X.sum(axis=1)
        seen = observed_per_row(M, self.D)
        neg_entropy = ones * _xlogx_pair(p1) + (seen - ones) * _xlogx_pair(p0)
        cross = observed_sum(M, p0 * log_mu + (1.0 - p0) * log_1mmu) + (p1 - p0) * (X @ (log_mu - log_1mmu).T)
        return np.maximum(neg_entropy[:, None] - cross, 0.0)
