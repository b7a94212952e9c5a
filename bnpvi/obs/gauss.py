"""Full-covariance Gaussian with a Normal-Wishart prior (the "full-mean DP-GMM" of Hughes 2016 thesis §4.4.4).

x | m, Λ ~ N(m, Λ⁻¹);  Λ ~ W(ν̄, B̄) (inverse scale B̄, E[Λ] = ν̄B̄⁻¹);  m | Λ ~ N(m̄, (κ̄Λ)⁻¹).

**Statistics are relative to the prior mean m̄**: with y_n = x_n − m̄,

    Sx_k = Σ_n r_nk y_n,   Sxx_k = Σ_n r_nk y_n y_nᵀ.

In these coordinates the prior mean is 0, so the conjugate global step reads

    κ̂ = κ̄ + N,  ν̂ = ν̄ + N,  m̂ = m̄ + Sx/κ̂,  B̂ = B̄ + Sxx − Sx Sxᵀ/κ̂,

which is the textbook B̄ + Sxx + κ̄m̄m̄ᵀ − κ̂m̂m̂ᵀ without its cancellation for data far from
the origin. All methods of this class use these relative statistics consistently.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from scipy.special import digamma, gammaln, polygamma

from bnpvi.data.batch import PointBatch
from bnpvi.obs import _wishart as W
from bnpvi.obs.base import DataMoments, ObsFamily, Posterior
from bnpvi.special import multigammaln
from bnpvi.stats.resp import Responsibilities


TAYLOR_STEP = 1e-3
"""Weights within this of 0 or 1 take :func:`multigamma_change` from a second-order expansion."""


def multigamma_change(nu: np.ndarray, w: np.ndarray, D: int) -> np.ndarray:
    """(N, K) lnΓ_D((ν_k + w_nk)/2) − lnΓ_D(ν_k/2).

    Most weights of a reassignment are 0 − r_nk or 1 − r_nk with r_nk within 1e-3 of 0 or 1; there a
    second-order expansion around w = 0 or w = 1 (per cluster: D digamma and trigamma values) replaces
    the N K D log-gamma values (third-order error below D·1e-10); the other weights are exact.
    """
    half = 0.5 * nu[:, None] - 0.5 * np.arange(D)  # (K, D): the arguments at w = 0
    at_one = (gammaln(half + 0.5) - gammaln(half)).sum(axis=1)
    out = np.empty(w.shape)
    exact = np.ones(w.shape, dtype=bool)
    for center, base, args in ((0.0, 0.0, half), (1.0, at_one, half + 0.5)):
        near = np.abs(w - center) < TAYLOR_STEP
        delta = w - center
        value = base + 0.5 * delta * digamma(args).sum(axis=1) + 0.125 * delta ** 2 * polygamma(1, args).sum(axis=1)
        out[near] = value[near]
        exact &= ~near
    rows, cols = np.nonzero(exact)
    out[rows, cols] = multigammaln(0.5 * (nu[cols] + w[rows, cols]), D) - multigammaln(0.5 * nu[cols], D)
    return out


class Gauss(ObsFamily):
    """Full-covariance Gaussian, Normal-Wishart prior; name "gauss".

    Parameters
    ----------
    nu : float
        ν̄ > D − 1, Wishart degrees of freedom.
    kappa : float
        κ̄ > 0, pseudo-count of the mean.
    m : (D,) array
        Prior mean m̄ (also the origin of the statistics).
    B : (D, D) array
        Inverse scale B̄ (SPD).

    Notes
    -----
    ``from_config`` defaults (data-driven choices of ours): ν̄ = D + 2,
    κ̄ = 1e-4, m̄ = data mean, B̄ = (ν̄ − D − 1)·sF·C when ν̄ > D + 1 (prior E[Σ] = sF·C),
    otherwise B̄ = ν̄·sF·C (E[Λ]⁻¹ = sF·C; keeps B̄ SPD), C chosen by ``obs.prior_cov``.
    """

    name = "gauss"
    default_temperature = 30.0  # deterministic annealing pays for full covariances (docs/births.md)

    def cluster_moments(self, post: Posterior) -> dict[str, np.ndarray]:
        """``means_`` E[μ_k] and ``covariances_`` E[Λ_k]⁻¹ = B̂_k / ν̂_k (the covariance under which the local
        step scores a point; E[Σ_k] = B̂_k / (ν̂_k − D − 1) is larger)."""
        covariances = post["B"] / np.asarray(post["nu"], dtype=np.float64)[:, None, None]
        return {"means_": np.asarray(post["m"]), "covariances_": covariances}

    def __init__(self, nu: float, kappa: float, m, B):
        self.B, self.B_chol, self.logdet_B = W.prior_scale(B)
        self.D = D = self.B.shape[0]
        self.nu = W.check_nu(nu, D - 1.0, D)
        self.kappa = W.check_kappa(kappa)
        self.m = W.check_mean(m, D)

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "Gauss":
        """Build from the ``obs`` keys sF, prior_cov, nu, kappa, mean (see class notes)."""
        p = W.prior_from_config(options, D, moments, wishart_dim=D)
        return cls(p["nu"], p["kappa"], p["m"], p["B"])

    def stat_shapes(self) -> dict[str, tuple]:
        return {"Sx": (self.D,), "Sxx": (self.D, self.D)}

    def prior_params(self) -> dict[str, np.ndarray]:
        return {"nu": np.float64(self.nu), "kappa": np.float64(self.kappa), "m": self.m.copy(), "B": self.B.copy()}

    def _relative(self, batch: PointBatch) -> np.ndarray:
        return W.data_matrix(batch, self.D, self.name) - self.m

    # ------------------------------------------------------------ summaries
    def summarize(self, batch: PointBatch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """Sx_k = Σ_n r_nk (x_n − m̄), Sxx_k = Σ_n r_nk (x_n − m̄)(x_n − m̄)ᵀ (relative to m̄)."""
        Y = self._relative(batch)
        R = resp.matrix()
        return {"Sx": np.asarray(R.T @ Y), "Sxx": W.weighted_outer_sum(R, Y)}

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """q(m_k, Λ_k) = NW(m̂, κ̂, B̂, ν̂) from N and the relative statistics.

        Returns
        -------
        dict of K-leading arrays: kappa, nu, m (m̂), m_rel (m̂ − m̄ = Sx/κ̂), B (B̂),
        B_chol (lower Cholesky of B̂), logdet_B (ln|B̂|), E_logdet_Lambda (E ln|Λ|).
        """
        N = W.counts(N)
        Sx = np.asarray(stats["Sx"], dtype=np.float64)
        kappa = self.kappa + N
        mu = Sx / kappa[:, None]
        B = self.B + np.asarray(stats["Sxx"], dtype=np.float64) - np.einsum("kd,ke->kde", Sx, mu)
        post = W.wishart_posterior(self.nu + N, B)
        post.update(kappa=kappa, m=self.m + mu, m_rel=mu)
        return post

    # --------------------------------------------------------------- ELBO
    def expected_log_lik(self, post: Posterior, batch: PointBatch) -> np.ndarray:
        """E_q log p(x_n | m_k, Λ_k) = −(D/2) ln 2π + ½ E ln|Λ| − ½[D/κ̂ + ν̂ (x − m̂)ᵀ B̂⁻¹ (x − m̂)]."""
        return W.wishart_expected_log_lik(self._relative(batch), post, self.D, post["m_rel"], post["kappa"])

    def argmax_clusters(self, post: Posterior, batch: PointBatch, log_weights: np.ndarray) -> np.ndarray:
        """argmax_k log_weights_k + E_q log p(x_n | m_k, Λ_k), by one compiled pass where it pays."""
        return W.wishart_best_clusters(W.data_matrix(batch, self.D, self.name), post, self.D, log_weights,
                                       post["m_rel"], post["kappa"], shift=self.m)

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """L_data,k* = −(N D/2) ln π + lnΓ_D(ν̂/2) − lnΓ_D(ν̄/2) + (ν̄/2) ln|B̄| − (ν̂/2) ln|B̂| + (D/2) ln(κ̄/κ̂).

        Exactly 0 for empty clusters (N_k = 0 and zero statistics).
        """
        N = W.counts(N)
        post = self.posterior(N, stats) if post is None else post
        out = W.wishart_log_marginal(N, self.nu, self.logdet_B, post["nu"], post["logdet_B"], self.D)
        out = out + 0.5 * self.D * np.log(self.kappa / post["kappa"])
        return np.where(W.empty_rows(N, stats), 0.0, out)

    def merged_log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], pairs: np.ndarray) -> np.ndarray:
        """:meth:`log_marginal` of each merged pair, B̂ = B̄ + Sxx_a + Sxx_b − u uᵀ/κ̂ (u = Sx_a + Sx_b) factored
        pair by pair in a compiled pass (:func:`bnpvi.obs._wishart.merged_logdets`)."""
        N = W.counts(N)
        a, b = pairs[:, 0], pairs[:, 1]
        Nm = N[a] + N[b]
        kappa = self.kappa + Nm
        logdet = W.merged_logdets(self.B, stats["Sxx"], pairs, stats["Sx"], kappa)
        out = W.wishart_log_marginal(Nm, self.nu, self.logdet_B, self.nu + Nm, logdet, self.D)
        out = out + 0.5 * self.D * np.log(self.kappa / kappa)
        empty = W.empty_rows(N, stats)
        return np.where(empty[a] & empty[b], 0.0, out)

    has_reassign_gains = True

    def reassign_gains(self, N: np.ndarray, stats: Mapping[str, np.ndarray], batch, resp: np.ndarray) -> np.ndarray:
        """(N, K) change of Σ_k L_data,k* when point n's responsibilities r_n become a one-hot on j.

        Giving cluster k extra weight w of point y (relative to m̄; w < 0 takes weight away) changes
        κ̂ and ν̂ by w and B̂ by a rank-one term, B̂ + (κ̂ w/(κ̂ + w)) (y − μ̂)(y − μ̂)ᵀ with μ̂ = Sx/κ̂, so
        by the matrix determinant lemma ln|B̂| grows by ln(1 + κ̂ w/(κ̂ + w) · (y − μ̂)ᵀ B̂⁻¹ (y − μ̂)) and
        :meth:`log_marginal` by Δ_k(w) in closed form. The move takes r_nk from every cluster and then
        gives cluster j the whole point: Σ_k Δ_k(−r_nk) + Δ_j(1 − r_nj) − Δ_j(−r_nj). O(N K D²).

        The formula needs summaries that hold the point at weights ``resp``. The reassign move's screening
        passes the responsibilities of a new local step with the aggregate of the lap before, and a cluster
        can then hold less of the point than r_nk (κ̂ − r_nk ≤ 0, or a determinant ratio ≤ 0). Such a
        point's gains are −inf, so the move does not try it: no value would be right.
        """
        N = W.counts(N)
        post = self.posterior(N, stats)
        R = np.asarray(resp, dtype=np.float64)
        d2 = W.whitened_sq_norms(self._relative(batch), post["B_chol"], post["m_rel"])  # (N, K)
        kappa, nu, logdet = post["kappa"], post["nu"], post["logdet_B"]
        D = self.D

        def change(w: np.ndarray) -> np.ndarray:  # A(ν̂ + w, B̂ + rank one) − A(ν̂, B̂) and the rest of Δ_k(w)
            grown = logdet + np.log1p(kappa * w / (kappa + w) * d2)
            return (-0.5 * D * W.LOG_2PI * w + 0.5 * w * D * W.LOG_2 - 0.5 * (nu + w) * grown + 0.5 * nu * logdet
                    + multigamma_change(nu, w, D) + 0.5 * D * np.log(kappa / (kappa + w)))

        with np.errstate(invalid="ignore", divide="ignore"):
            removed = change(-R)
            gains = removed.sum(axis=1, keepdims=True) + change(1.0 - R) - removed
        return np.where(np.isnan(gains), -np.inf, gains)

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """KL(q ‖ p) = KL_W(ν_q, B_q ‖ ν_p, B_p) + ½[Dκ_p/κ_q − D + D ln(κ_q/κ_p) + κ_p ν_q δᵀB_q⁻¹δ], δ = m_q − m_p."""
        trace = W.trace_inv_prod(post_q["B_chol"], post_p["B_chol"])
        kl = W.kl_wishart(post_q["nu"], post_q["logdet_B"], post_p["nu"], post_p["logdet_B"], trace, self.D)
        maha = post_q["nu"] * W.inv_quad(post_q["B_chol"], post_q["m_rel"] - post_p["m_rel"])
        return kl + W.kl_normal_part(post_q["kappa"], post_p["kappa"], maha, self.D)

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode of q*(m_k, Λ_k) = NW(m̂, κ̂, B̂, ν̂) in (m, Λ): m̂_k and Λ_k = (ν̂_k − D) B̂_k⁻¹.

        The Normal's |Λ|^{1/2} adds ½ to the Wishart's exponent (ν̂ − D − 1)/2. The prior has two
        pseudo-counts (κ̄, ν̄), so the one-count form of Hughes 2016 thesis Eq. 2.64 does not apply: hard EM
        (``natural``) uses this same mode. Keys m, m_rel, B, B_chol, logdet_B and prec_scale ν̂ − D.
        """
        post = self.posterior(N, stats)
        return {"m": post["m"], "m_rel": post["m_rel"], **W.precision_point(post, self.D)}

    def map_prior_problem(self, natural: bool = False) -> str | None:
        if self.nu <= self.D:
            return (f"alg=em with obs=gauss needs obs.nu > D = {self.D} (the Normal-Wishart prior's mode has "
                    f"covariance B̄/(ν̄ − D)), got {self.nu:g}")
        return None

    def log_lik_at(self, point: Posterior, batch: PointBatch) -> np.ndarray:
        """log N(x_n | m_k, Λ_k⁻¹) = −(D/2) ln 2π + ½ ln|Λ_k| − ½ (x − m_k)ᵀ Λ_k (x − m_k), one BLAS pass."""
        return W.point_log_lik(self._relative(batch), point, self.D, point["m_rel"])

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """ln N(m_k | m̄, (κ̄Λ_k)⁻¹) + ln W(Λ_k | ν̄, B̄)."""
        c = point["prec_scale"]
        normal = (-0.5 * self.D * W.LOG_2PI + 0.5 * self.D * np.log(self.kappa) + 0.5 * W.point_logdet(point, self.D)
                  - 0.5 * self.kappa * c * W.inv_quad(point["B_chol"], point["m_rel"]))
        return normal + W.wishart_log_density(point, self.nu, self.B_chol, self.logdet_B, self.D)

    def point_moments(self, point: Posterior) -> dict[str, np.ndarray]:
        """``means_`` m_k and ``covariances_`` Λ_k⁻¹ = B̂_k / (ν̂_k − D)."""
        return {"means_": np.asarray(point["m"]), "covariances_": point["B"] / point["prec_scale"][:, None, None]}

    # ------------------------------------------------------------- Bregman
    def divergence(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N, J) KL(N(m̃_n, Σ̃_n) ‖ N(m̂_j, B̂_j/ν̂_j)), the Bregman divergence (Hughes 2016 thesis Eq. 2.35).

        The smoothed atom is the point estimate of the one-observation posterior
        (N = 1, Sx = y_n, Sxx = y_n y_nᵀ): m̃_n = m̄ + y_n/(κ̄+1) and
        Σ̃_n = (B̄ + κ̄/(κ̄+1) y_n y_nᵀ)/(ν̄+1). Point estimate of a posterior: mean m̂,
        covariance B̂/ν̂ = E[Λ]⁻¹ (always SPD; B̂/(ν̂ − D − 1) would need ν̂ > D + 1).
        Zero for a center built from the atom's own one-hot summary.
        """
        return W.gauss_divergence(self._relative(batch), centers, **self._divergence_terms())

    def atom_divergences(self, batch: PointBatch):
        """``idx ↦ divergence(batch, centers of the atoms idx)`` by rank-one updates of the prior
        (:func:`bnpvi.obs._wishart.atom_gauss_divergences`: O(N·D) per center, not O(N·D²))."""
        return W.atom_gauss_divergences(self._relative(batch), **self._divergence_terms())

    def _divergence_terms(self) -> dict:
        """The smoothing of atoms and the prior's factor, as :func:`bnpvi.obs._wishart.gauss_divergence` takes them."""
        return dict(nu_atom=self.nu + 1.0, shrink=self.kappa / (self.kappa + 1.0),
                    mean_scale=1.0 / (self.kappa + 1.0), prior_chol=self.B_chol, prior_logdet=self.logdet_B)
