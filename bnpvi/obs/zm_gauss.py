"""Zero-mean full-covariance Gaussian with a Wishart prior (as in Hughes 2016 thesis §3.6.1, §4.4.2).

x | Λ ~ N(0, Λ⁻¹);  Λ ~ W(ν̄, B̄) with inverse scale B̄ (E[Λ] = ν̄B̄⁻¹). s(x) = x xᵀ, whose
mean parameter is the covariance Σ (thesis §2.2.3). Statistics: Sxx_k = Σ_n r_nk x_n x_nᵀ (raw: the model
has no mean, so there is nothing to centre on). Global step: ν̂ = ν̄ + N, B̂ = B̄ + Sxx.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from bnpvi.data.batch import PointBatch
from bnpvi.obs import _wishart as W
from bnpvi.obs.base import DataMoments, ObsFamily, Posterior
from bnpvi.stats.resp import Responsibilities


class ZeroMeanGauss(ObsFamily):
    """Zero-mean full-covariance Gaussian, Wishart prior; name "zm_gauss".

    Parameters
    ----------
    nu : float
        ν̄ > D − 1.
    B : (D, D) array
        Inverse scale B̄ (SPD).

    Notes
    -----
    ``from_config`` defaults: ν̄ = D + 2; B̄ = (ν̄ − D − 1)·sF·C when ν̄ > D + 1, otherwise
    ν̄·sF·C. For this family the data "covariance" behind C is the second moment about the
    origin, Σ_n x xᵀ/N = cov + mean meanᵀ (the zero-mean model's ML covariance); obs.kappa
    and obs.mean are ignored.
    """

    name = "zm_gauss"

    def cluster_moments(self, post: Posterior) -> dict[str, np.ndarray]:
        """``means_`` 0 and ``covariances_`` E[Λ_k]⁻¹ = B̂_k / ν̂_k (E[Σ_k] = B̂_k / (ν̂_k − D − 1) is larger)."""
        covariances = post["B"] / np.asarray(post["nu"], dtype=np.float64)[:, None, None]
        return {"means_": np.zeros(covariances.shape[:2]), "covariances_": covariances}

    def __init__(self, nu: float, B):
        self.B, self.B_chol, self.logdet_B = W.prior_scale(B)
        self.D = self.B.shape[0]
        self.nu = W.check_nu(nu, self.D - 1.0, self.D)

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "ZeroMeanGauss":
        """Build from the ``obs`` keys sF, prior_cov, nu (see class notes)."""
        p = W.prior_from_config(options, D, moments, wishart_dim=D, zero_mean=True)
        return cls(p["nu"], p["B"])

    def stat_shapes(self) -> dict[str, tuple]:
        return {"Sxx": (self.D, self.D)}

    def prior_params(self) -> dict[str, np.ndarray]:
        return {"nu": np.float64(self.nu), "B": self.B.copy()}

    def _data(self, batch: PointBatch) -> np.ndarray:
        return W.data_matrix(batch, self.D, self.name)

    # ------------------------------------------------------------ summaries
    def summarize(self, batch: PointBatch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """Sxx_k = Σ_n r_nk x_n x_nᵀ."""
        return {"Sxx": W.weighted_outer_sum(resp.matrix(), self._data(batch))}

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """q(Λ_k) = W(ν̂, B̂), ν̂ = ν̄ + N, B̂ = B̄ + Sxx.

        Returns
        -------
        dict of K-leading arrays: nu, B, B_chol (lower Cholesky), logdet_B, E_logdet_Lambda.
        """
        N = W.counts(N)
        return W.wishart_posterior(self.nu + N, self.B + np.asarray(stats["Sxx"], dtype=np.float64))

    # --------------------------------------------------------------- ELBO
    def expected_log_lik(self, post: Posterior, batch: PointBatch) -> np.ndarray:
        """E_q log p(x_n | Λ_k) = −(D/2) ln 2π + ½ E ln|Λ| − ½ ν̂ xᵀ B̂⁻¹ x."""
        return W.wishart_expected_log_lik(self._data(batch), post, self.D)

    def argmax_clusters(self, post: Posterior, batch: PointBatch, log_weights: np.ndarray) -> np.ndarray:
        """argmax_k log_weights_k + E_q log p(x_n | Λ_k), by one compiled pass where it pays."""
        return W.wishart_best_clusters(self._data(batch), post, self.D, log_weights)

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """L_data,k* = −(N D/2) ln π + lnΓ_D(ν̂/2) − lnΓ_D(ν̄/2) + (ν̄/2) ln|B̄| − (ν̂/2) ln|B̂|.

        Exactly 0 for empty clusters (N_k = 0 and zero statistics).
        """
        N = W.counts(N)
        post = self.posterior(N, stats) if post is None else post
        out = W.wishart_log_marginal(N, self.nu, self.logdet_B, post["nu"], post["logdet_B"], self.D)
        return np.where(W.empty_rows(N, stats), 0.0, out)

    def merged_log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], pairs: np.ndarray) -> np.ndarray:
        """:meth:`log_marginal` of each merged pair, B̂ = B̄ + Sxx_a + Sxx_b factored pair by pair in a compiled
        pass (:func:`bnpvi.obs._wishart.merged_logdets`)."""
        N = W.counts(N)
        a, b = pairs[:, 0], pairs[:, 1]
        Nm = N[a] + N[b]
        logdet = W.merged_logdets(self.B, stats["Sxx"], pairs)
        out = W.wishart_log_marginal(Nm, self.nu, self.logdet_B, self.nu + Nm, logdet, self.D)
        empty = W.empty_rows(N, stats)
        return np.where(empty[a] & empty[b], 0.0, out)

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode of q*(Λ_k) = W(ν̂, B̂): Λ_k = (ν̂_k − D − 1) B̂_k⁻¹, i.e. Σ_k = (Sxx_k + B̄)/(N_k + ν̄ − D − 1).

        Λ ↦ −Λ/2 is linear, so this is also the mode in the natural coordinates (Hughes 2016 thesis Eq. 2.64
        with pseudo-count ν̄ − D − 1). Keys B, B_chol, logdet_B and prec_scale ν̂ − D − 1.
        """
        return W.precision_point(self.posterior(N, stats), self.D + 1.0)

    def map_prior_problem(self, natural: bool = False) -> str | None:
        if self.nu <= self.D + 1:
            return (f"alg=em with obs=zm_gauss needs obs.nu > D + 1 = {self.D + 1} (the Wishart prior's mode has "
                    f"covariance B̄/(ν̄ − D − 1)), got {self.nu:g}")
        return None

    def log_lik_at(self, point: Posterior, batch: PointBatch) -> np.ndarray:
        """log N(x_n | 0, Λ_k⁻¹) = −(D/2) ln 2π + ½ ln|Λ_k| − ½ x_nᵀ Λ_k x_n, one BLAS pass."""
        return W.point_log_lik(self._data(batch), point, self.D)

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """ln W(Λ_k | ν̄, B̄)."""
        return W.wishart_log_density(point, self.nu, self.B_chol, self.logdet_B, self.D)

    def point_moments(self, point: Posterior) -> dict[str, np.ndarray]:
        """``means_`` 0 and ``covariances_`` Λ_k⁻¹ = B̂_k / (ν̂_k − D − 1)."""
        covariances = point["B"] / point["prec_scale"][:, None, None]
        return {"means_": np.zeros(covariances.shape[:2]), "covariances_": covariances}

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """KL_W(ν_q, B_q ‖ ν_p, B_p)."""
        trace = W.trace_inv_prod(post_q["B_chol"], post_p["B_chol"])
        return W.kl_wishart(post_q["nu"], post_q["logdet_B"], post_p["nu"], post_p["logdet_B"], trace, self.D)

    # ------------------------------------------------------------- Bregman
    def divergence(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N, J) D(Σ̃_n, Σ_j) = ½[tr(Σ_j⁻¹Σ̃_n) − ln|Σ_j⁻¹Σ̃_n| − D].

        The Bregman divergence of the zero-mean family (Hughes 2016 thesis Eq. 2.35).
        Smoothed atom Σ̃_n = (x_n x_nᵀ + B̄)/(1 + ν̄) (the one-observation posterior's B̂/ν̂);
        center Σ_j = B̂_j/ν̂_j = (Sxx_j + B̄)/(N_j + ν̄).
        """
        return W.gauss_divergence(self._data(batch), centers, **self._divergence_terms())

    def atom_divergences(self, batch: PointBatch):
        """``idx ↦ divergence(batch, centers of the atoms idx)`` by rank-one updates of the prior
        (:func:`bnpvi.obs._wishart.atom_gauss_divergences`: O(N·D) per center, not O(N·D²))."""
        return W.atom_gauss_divergences(self._data(batch), **self._divergence_terms())

    def _divergence_terms(self) -> dict:
        """The smoothing of atoms and the prior's factor, as :func:`bnpvi.obs._wishart.gauss_divergence` takes them."""
        return dict(nu_atom=self.nu + 1.0, shrink=1.0, mean_scale=None, prior_chol=self.B_chol,
                    prior_logdet=self.logdet_B)
