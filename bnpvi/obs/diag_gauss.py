"""Diagonal-covariance Gaussian, Normal-Gamma prior per dimension.

For each dimension d independently: x_d | m_d, λ_d ~ N(m_d, 1/λ_d); λ_d ~ Gamma(ν̄/2, rate b̄_d/2);
m_d | λ_d ~ N(m̄_d, 1/(κ̄λ_d)) — the Normal-Wishart family (``gauss``) with D = 1 per dimension,
sharing κ and ν. Gamma(ν/2, b/2) is the 1-D Wishart W(ν, b), so the Wishart functions of
``bnpvi.obs._wishart`` apply with D = 1.

**Statistics are relative to the prior mean m̄** (no cancellation for data far from the origin):
with y_n = x_n − m̄, Sx_kd = Σ_n r_nk y_nd and Sxx_kd = Σ_n r_nk y_nd² (diagonal only), so the
global step reads

    κ̂ = κ̄ + N,  ν̂ = ν̄ + N,  m̂_d = m̄_d + Sx_d/κ̂,  b̂_d = b̄_d + Sxx_d − Sx_d²/κ̂.

**Missing entries** (NaN) are marginalised exactly: given the cluster the dimensions are independent, so an
unobserved x_nd integrates out of p(x_n | φ_k) and the atom's likelihood is the product over its observed
dimensions. A family built for data with missing entries (``missing``) keeps per-dimension counts
No_kd = Σ_n r_nk o_nd (o_nd = 1 where x_nd is observed) and sums Sx, Sxx over observed entries only, so
κ̂_kd = κ̄ + No_kd and ν̂_kd = ν̄ + No_kd are per dimension and every formula below holds per dimension with
N → No_kd (Ghahramani & Jordan 1994 give the EM form of this marginalisation).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from scipy.special import gammaln

from bnpvi.data.batch import PointBatch
from bnpvi.errors import BnpviError
from bnpvi.obs import _wishart as W
from bnpvi.obs.base import (DataMoments, ObsFamily, Posterior, has_missing, observed_counts, observed_entries,
                            observed_per_row, observed_sum, per_dim, raise_unexpected_missing)
from bnpvi.obs.bregman import atom_posteriors
from bnpvi.stats.resp import Responsibilities


class DiagGauss(ObsFamily):
    """Diagonal-covariance Gaussian, Normal-Gamma prior per dimension; name "diag_gauss".

    Parameters
    ----------
    nu : float
        ν̄ > 0 (each dimension is a 1-D Wishart, so the full-covariance bound ν̄ > D − 1 becomes ν̄ > 0).
    kappa : float
        κ̄ > 0.
    m : (D,) array
        Prior mean m̄ (also the origin of the statistics).
    b : (D,) array
        Gamma rates ×2, b̄_d > 0.
    missing : bool, default False
        The data have missing (NaN) entries: the summaries keep per-dimension counts ``No`` (module notes).

    Notes
    -----
    ``from_config`` defaults: ν̄ = D + 2, κ̄ = 1e-4, m̄ = data mean, and per dimension
    b̄_d = (ν̄ − 2)·sF·C_dd when ν̄ > 2 (prior E[1/λ_d] = b̄_d/(ν̄ − 2) = sF·C_dd), otherwise
    b̄_d = ν̄·sF·C_dd (E[λ_d]⁻¹ = sF·C_dd); C from ``obs.prior_cov`` (only its diagonal is used).
    """

    name = "diag_gauss"
    handles_missing = True
    default_temperature = 30.0  # deterministic annealing pays for Gaussians with learned means (docs/births.md)

    def cluster_moments(self, post: Posterior) -> dict[str, np.ndarray]:
        """``means_`` E[μ_k] and ``covariances_`` the diagonal matrices of E[λ_kd]⁻¹ = b̂_kd / ν̂_k (the
        covariance under which the local step scores a point; E[σ²_kd] is larger)."""
        b = np.asarray(post["b"])
        covariances = np.zeros(b.shape + b.shape[-1:])
        diagonal = np.arange(b.shape[-1])
        covariances[:, diagonal, diagonal] = b / per_dim(np.asarray(post["nu"], dtype=np.float64))
        return {"means_": np.asarray(post["m"]), "covariances_": covariances}

    def __init__(self, nu: float, kappa: float, m, b, missing: bool = False):
        b = np.asarray(b, dtype=np.float64)
        if b.ndim != 1 or not np.all(np.isfinite(b)) or np.any(b <= 0):
            raise BnpviError(f"obs.b must be a vector of positive numbers, got {b!r}")
        self.D = D = b.shape[0]
        self.b = b.copy()
        self.log_b = np.log(self.b)
        self.nu = W.check_nu(nu, 0.0, D)
        self.kappa = W.check_kappa(kappa)
        self.m = W.check_mean(m, D)
        self.missing = bool(missing)

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "DiagGauss":
        """Build from the ``obs`` keys sF, prior_cov, nu, kappa, mean (see class notes)."""
        p = W.prior_from_config(options, D, moments, wishart_dim=1)
        return cls(p["nu"], p["kappa"], p["m"], np.diag(p["B"]).copy(), missing=has_missing(moments))

    def stat_shapes(self) -> dict[str, tuple]:
        return {"Sx": (self.D,), "Sxx": (self.D,), **({"No": (self.D,)} if self.missing else {})}

    def prior_params(self) -> dict[str, np.ndarray]:
        return {"nu": np.float64(self.nu), "kappa": np.float64(self.kappa), "m": self.m.copy(), "b": self.b.copy()}

    def _relative(self, batch: PointBatch) -> np.ndarray:
        return W.data_matrix(batch, self.D, self.name) - self.m

    def _observed(self, batch: PointBatch) -> tuple[np.ndarray, np.ndarray | None]:
        """(Y, M): Y = X − m̄ with 0 at missing entries, and M the sparse (N, D) 0/1 matrix of the missing ones
        (None when every entry is observed: Y is then :meth:`_relative`)."""
        return observed_entries(self._relative(batch))

    # ------------------------------------------------------------ summaries
    def summarize(self, batch: PointBatch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """Sx_kd = Σ_n r_nk o_nd (x_nd − m̄_d), Sxx_kd = Σ_n r_nk o_nd (x_nd − m̄_d)² (relative to m̄; o_nd = 1
        everywhere for complete data), and No_kd = Σ_n r_nk o_nd for data with missing entries."""
        Y, M = self._observed(batch)
        R = resp.matrix()
        out = {"Sx": np.asarray(R.T @ Y), "Sxx": np.asarray(R.T @ (Y * Y))}
        if self.missing:
            out["No"] = observed_counts(R, M, self.D)
        elif M is not None:
            raise_unexpected_missing(self.name)
        return out

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """q = Π_d NormalGamma(m̂_d, κ̂, ν̂, b̂_d) (relative statistics).

        Returns
        -------
        dict of K-leading arrays: kappa (K,), nu (K,) (both (K, D) for data with missing entries), m (K, D),
        m_rel = m̂ − m̄, b (K, D),
        log_b, E_log_lambda = ψ(ν̂/2) − ln(b̂_d/2). b̂ is floored at 1e-12·b̄ (it is ≥ b̄ in
        exact arithmetic; the floor only guards float residue of memoized subtraction).
        """
        N = W.counts(stats["No"]) if self.missing else W.counts(N)
        Sx = np.asarray(stats["Sx"], dtype=np.float64)
        kappa = self.kappa + N
        nu = self.nu + N
        mu = Sx / per_dim(kappa)
        b = self.b + np.asarray(stats["Sxx"], dtype=np.float64) - Sx * mu
        if not np.all(np.isfinite(b)):
            raise BnpviError("diag_gauss posterior rates b̂ are not finite (NaN or inf in the data or statistics)")
        b = np.maximum(b, 1e-12 * self.b)
        log_b = np.log(b)
        return {"kappa": kappa, "nu": nu, "m": self.m + mu, "m_rel": mu, "b": b, "log_b": log_b,
                "E_log_lambda": W.expected_logdet(per_dim(nu), log_b, 1)}

    # --------------------------------------------------------------- ELBO
    def expected_log_lik(self, post: Posterior, batch: PointBatch) -> np.ndarray:
        """E_q log p(x_n | φ_k) = Σ_d [−½ ln 2π + ½ E ln λ_d − ½ (1/κ̂ + (ν̂/b̂_d)(x_d − m̂_d)²)].

        Vectorised as Y²·(ν̂/b̂)ᵀ − 2Y·(ν̂μ/b̂)ᵀ + Σ_d ν̂μ_d²/b̂_d with Y = X − m̄, μ = m̂ − m̄. With missing
        entries the sum runs over the observed d (Y is 0 at the others): the constant and the last term
        join in Σ_d (...) less a sparse product with the missing entries M (:func:`observed_sum`).
        """
        Y, M = self._observed(batch)
        prec = per_dim(post["nu"]) / post["b"]
        if M is None and post["kappa"].ndim == 1:
            return W.gauss_expected_log_lik(post["E_log_lambda"].sum(axis=1), _diag_maha(Y, prec, post["m_rel"]),
                                            self.D, post["kappa"])
        mu = post["m_rel"]
        const = -0.5 * W.LOG_2PI + 0.5 * post["E_log_lambda"] - 0.5 / per_dim(post["kappa"]) - 0.5 * prec * mu * mu
        out = (Y * Y) @ (-0.5 * prec).T  # three products, as for complete data: the constant joins the mask's
        out += Y @ (prec * mu).T
        out += observed_sum(M, const)
        return out

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """L_data,k* = Σ_d [−(N/2) ln π + lnΓ(ν̂/2) − lnΓ(ν̄/2) + (ν̄/2) ln b̄_d − (ν̂/2) ln b̂_d + ½ ln(κ̄/κ̂)].

        Exactly 0 for empty clusters (N_k = 0 and zero statistics). With missing entries, per dimension with
        N → No_kd and κ̂ → κ̂_kd.
        """
        N = W.counts(N)
        post = self.posterior(N, stats) if post is None else post
        if self.missing:  # per dimension, N → No_kd
            terms = W.wishart_log_marginal(W.counts(stats["No"]), self.nu, self.log_b[None, :], post["nu"],
                                           post["log_b"], 1) + 0.5 * np.log(self.kappa / post["kappa"])
            out = terms.sum(axis=1)
        else:
            terms = W.wishart_log_marginal(N[:, None], self.nu, self.log_b[None, :], post["nu"][:, None],
                                           post["log_b"], 1)
            out = terms.sum(axis=1) + 0.5 * self.D * np.log(self.kappa / post["kappa"])
        return np.where(W.empty_rows(N, stats), 0.0, out)

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """Σ_d KL_Gamma(ν_q/2, b_qd/2 ‖ ν_p/2, b_pd/2) + ½[D κ_p/κ_q − D + D ln(κ_q/κ_p) + κ_p Σ_d (ν_q/b_qd) δ_d²]
        (with missing entries κ and ν are per dimension and the Normal part is summed over d)."""
        nu_q, nu_p = per_dim(post_q["nu"]), per_dim(post_p["nu"])
        kl = W.kl_wishart(nu_q, post_q["log_b"], nu_p, post_p["log_b"], post_p["b"] / post_q["b"], 1).sum(axis=1)
        delta = post_q["m_rel"] - post_p["m_rel"]
        if post_q["kappa"].ndim == 2:
            normal = W.kl_normal_part(post_q["kappa"], post_p["kappa"], nu_q * delta * delta / post_q["b"], 1)
            return kl + normal.sum(axis=1)
        maha = np.sum(nu_q * delta * delta / post_q["b"], axis=1)
        return kl + W.kl_normal_part(post_q["kappa"], post_p["kappa"], maha, self.D)

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode of q*(m_kd, λ_kd) = NormalGamma(m̂_d, κ̂, ν̂, b̂_d) in (m, λ): m̂_kd and λ_kd = (ν̂_k − 1)/b̂_kd
        (the Normal-Wishart mode with D = 1 per dimension; hard EM uses it too, as ``Gauss.map_point`` says).
        Keys m, m_rel, b and lam (K, D)."""
        post = self.posterior(N, stats)
        return {"m": post["m"], "m_rel": post["m_rel"], "b": post["b"], "lam": (per_dim(post["nu"]) - 1.0) / post["b"]}

    def map_prior_problem(self, natural: bool = False) -> str | None:
        if self.nu <= 1.0:
            return (f"alg=em with obs=diag_gauss needs obs.nu > 1 (the Normal-Gamma prior's mode has variances "
                    f"b̄_d/(ν̄ − 1)), got {self.nu:g}")
        return None

    def log_lik_at(self, point: Posterior, batch: PointBatch) -> np.ndarray:
        """Σ_d [−½ ln 2π + ½ ln λ_kd − ½ λ_kd (x_d − m_kd)²], by three matrix products (the observed d only)."""
        lam = point["lam"]
        Y, M = self._observed(batch)
        if M is not None:
            return observed_sum(M, -0.5 * W.LOG_2PI + 0.5 * np.log(lam)) - 0.5 * _diag_maha(Y, lam, point["m_rel"], M)
        const = -0.5 * self.D * W.LOG_2PI + 0.5 * np.log(lam).sum(axis=1)
        return const[None, :] - 0.5 * _diag_maha(Y, lam, point["m_rel"])

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """Σ_d [ln N(m_kd | m̄_d, 1/(κ̄λ_kd)) + ln Gamma(λ_kd | ν̄/2, b̄_d/2)]."""
        lam, mu = point["lam"], point["m_rel"]
        log_lam = np.log(lam)
        normal = -0.5 * W.LOG_2PI + 0.5 * np.log(self.kappa) + 0.5 * log_lam - 0.5 * self.kappa * lam * mu * mu
        half = 0.5 * self.nu
        gamma = half * (self.log_b - W.LOG_2) - gammaln(half) + (half - 1.0) * log_lam - 0.5 * self.b * lam
        return (normal + gamma).sum(axis=1)

    def point_moments(self, point: Posterior) -> dict[str, np.ndarray]:
        """``means_`` m_k and ``covariances_`` the diagonal matrices of 1/λ_kd = b̂_kd / (ν̂_k − 1)."""
        var = 1.0 / point["lam"]
        covariances = np.zeros(var.shape + var.shape[-1:])
        diagonal = np.arange(var.shape[-1])
        covariances[:, diagonal, diagonal] = var
        return {"means_": np.asarray(point["m"]), "covariances_": covariances}

    # ------------------------------------------------------------- Bregman
    def divergence(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N, J) Σ_d KL(N(m̃_nd, σ̃²_nd) ‖ N(m̂_jd, b̂_jd/ν̂_j)) (Bregman divergence of point estimates).

        Smoothed atom = point estimate of the one-observation posterior: m̃_n = m̄ + s·y_n,
        σ̃²_nd = (b̄_d + c y_nd²)/(ν̄ + 1), with s = 1/(κ̄+1), c = κ̄/(κ̄+1). Center: mean m̂_j,
        variances b̂_jd/ν̂_j. 2 KL = Σ_d [σ̃²/σ² + (m̂ − m̃)²/σ² − 1 + ln σ² − ln σ̃²], expanded into
        matrix products over (atoms × dimensions) · (dimensions × centers). With missing entries the sum runs
        over each atom's observed dimensions.
        """
        Y, M = self._observed(batch)
        if M is not None or centers["nu"].ndim == 2:
            return self._observed_divergence(Y, M, centers)
        nu_a = self.nu + 1.0
        s = 1.0 / (self.kappa + 1.0)
        c = self.kappa * s
        inv_b = 1.0 / centers["b"]
        nu_c = centers["nu"]
        trace = (nu_c / nu_a)[None, :] * ((self.b @ inv_b.T)[None, :] + c * ((Y * Y) @ inv_b.T))
        maha = _diag_maha(s * Y, nu_c[:, None] * inv_b, centers["m_rel"])
        logdet_c = centers["log_b"].sum(axis=1) - self.D * np.log(nu_c)
        logdet_a = np.log(self.b + c * Y * Y).sum(axis=1) - self.D * np.log(nu_a)
        out = 0.5 * (trace + maha - self.D + logdet_c[None, :] - logdet_a[:, None])
        return np.maximum(out, 0.0)

    def atom_divergences(self, batch: PointBatch):
        """``idx ↦ divergence(batch, centers of the atoms idx)``, the batch's missing entries found once for all
        the calls (k-means++ seeding makes one per seed)."""
        Y, M = self._observed(batch)
        if M is None and not self.missing:
            return super().atom_divergences(batch)
        return lambda idx: self._observed_divergence(Y, M, atom_posteriors(self, batch, idx))

    def _observed_divergence(self, Y: np.ndarray, M, centers: Posterior) -> np.ndarray:
        """:meth:`divergence` summed over each atom's observed dimensions (all but the missing entries M; all
        of them when None), for centers whose ν̂, κ̂ may be per dimension."""
        nu_a = self.nu + 1.0
        s = 1.0 / (self.kappa + 1.0)
        c = self.kappa * s
        prec = per_dim(centers["nu"]) / centers["b"]
        trace = (observed_sum(M, self.b * prec) + c * ((Y * Y) @ prec.T)) / nu_a
        maha = _diag_maha(s * Y, prec, centers["m_rel"], M)
        logdet_c = observed_sum(M, centers["log_b"] - np.log(per_dim(centers["nu"])))
        logdet_a = np.sum(np.log(self.b + c * Y * Y) - np.log(nu_a), axis=1)  # Y = 0 at M: those terms are known
        if M is not None:
            logdet_a -= M @ (self.log_b - np.log(nu_a))
        seen = observed_per_row(M, self.D)
        out = 0.5 * (trace + maha - np.reshape(seen, (-1, 1)) + logdet_c - logdet_a[:, None])
        return np.maximum(out, 0.0)


def _diag_maha(Y: np.ndarray, prec: np.ndarray, mu: np.ndarray, M=None) -> np.ndarray:
    """(N, K) Σ_d prec_kd (y_nd − μ_kd)² by three matrix products, over the observed d only when the sparse
    matrix ``M`` of missing entries is given (Y is 0 at them)."""
    out = (Y * Y) @ prec.T - 2.0 * (Y @ (prec * mu).T) + observed_sum(M, prec * mu * mu)
    return np.maximum(out, 0.0)
