"""First-order vector autoregression with a matrix-normal-Wishart prior ("ar_gauss").

The emission of the auto-regressive HMM (Hughes 2016 thesis Eq. 6.3, §6.6.3; Stephenson 2015
undergraduate thesis §7.1): with the regressor p_t := x_{t−1} ∈ R^E (E = D),

    x_t | x_{t−1}, z_t = k ~ N(A_k p_t, Λ_k⁻¹),
    Λ_k ~ W(ν̄, B̄)  (inverse scale B̄, E[Λ] = ν̄B̄⁻¹, as in ``_wishart``),
    A_k | Λ_k ~ MN(M̄, Λ_k⁻¹, V̄⁻¹):  p(A | Λ) ∝ |Λ|^{E/2} |V̄|^{D/2} exp(−½ tr[Λ (A − M̄) V̄ (A − M̄)ᵀ]),

i.e. A_k has row covariance Λ_k⁻¹ and column precision V̄.

**Statistics are relative to the prior regression M̄** (as Gauss's are relative to m̄): with the
residual y_t = x_t − M̄ p_t,

    Sxx_k = Σ_t r_tk y_t y_tᵀ (D × D),  Spx_k = Σ_t r_tk p_t y_tᵀ (E × D),  Spp_k = Σ_t r_tk p_t p_tᵀ (E × E).

In these coordinates the prior regression is 0 and the conjugate global step reads

    ν̂ = ν̄ + N,  V̂ = V̄ + Spp,  M̂ = M̄ + Spxᵀ V̂⁻¹,  B̂ = B̄ + Sxx − Spxᵀ V̂⁻¹ Spx,

which is the textbook M̂ = (M̄V̄ + Σ r x pᵀ) V̂⁻¹, B̂ = B̄ + M̄V̄M̄ᵀ + Σ r x xᵀ − M̂V̂M̂ᵀ (Stephenson 2015
App. D) without its cancellation: with the default M̄ = I, y_t is the first difference x_t − x_{t−1},
so slowly moving data far from the origin lose no precision. Spxᵀ V̂⁻¹ Spx is formed from the
Cholesky factor of V̂ (a Schur complement, never an explicit inverse).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from bnpvi.data.batch import SeqBatch
from bnpvi.errors import BnpviError
from bnpvi.obs import _wishart as W
from bnpvi.obs.base import DataMoments, ObsFamily, Posterior
from bnpvi.stats.resp import Responsibilities

MEAN_MATRICES = ("eye", "zero")


class ARGauss(ObsFamily):
    """First-order vector autoregression, matrix-normal-Wishart prior; name "ar_gauss".

    Needs the previous observation of every step (``SeqBatch.Xprev``; a file without it is
    read with ``SeqStore.lagged()``).

    Parameters
    ----------
    nu : float
        ν̄ > D − 1, Wishart degrees of freedom.
    B : (D, D) array
        Inverse scale B̄ of the noise precision (SPD).
    M : (D, D) array
        Prior mean M̄ of the regression matrix (also the origin of the statistics).
    V : (D, D) array
        Column precision V̄ of the regression matrix (SPD).

    Notes
    -----
    ``from_config`` defaults (Stephenson 2015 App. D.3): ν̄ = D + 2; C = the first-difference
    covariance scale chosen by ``obs.prior_cov`` ("diag" [default]: its diagonal, "eye": its mean
    variance × I, "cov": all of it; ``DataMoments.diff_cov``, the identity without moments);
    B̄ = (ν̄ − D − 1)·sF·C (prior E[Λ⁻¹] = sF·C; ν̄·sF·C when ν̄ ≤ D + 1); M̄ = I ("eye") or
    0 ("zero") by ``obs.mean_matrix``; V̄ = sV·C.
    """

    name = "ar_gauss"
    data_kinds = ("seq",)
    needs_xprev = True

    def __init__(self, nu: float, B, M, V):
        self.B, self.B_chol, self.logdet_B = W.prior_scale(B)
        self.D = D = self.B.shape[0]
        self.nu = W.check_nu(nu, D - 1.0, D)
        self.M = _check_square(M, D, "M")
        self.V, self.V_chol, self.logdet_V = W.prior_scale(_check_square(V, D, "V"), key="V",
                                                           what="the prior column precision")

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "ARGauss":
        """Build from the ``obs`` keys nu, sF, sV, prior_cov, mean_matrix (see class notes)."""
        nu = W.nu_option(options, D, D)
        sF = W.positive_option(options, "sF", 0.5)
        sV = W.positive_option(options, "sV", 0.5)
        C = W.scale_matrix(W.prior_cov_option(options), _first_difference_cov(moments, D))
        return cls(nu, W.inverse_scale(nu, sF, C, D), _mean_matrix(options.get("mean_matrix"), D), sV * C)

    def stat_shapes(self) -> dict[str, tuple]:
        D = self.D
        return {"Sxx": (D, D), "Spx": (D, D), "Spp": (D, D)}

    def prior_params(self) -> dict[str, np.ndarray]:
        return {"nu": np.float64(self.nu), "B": self.B.copy(), "M": self.M.copy(), "V": self.V.copy()}

    def _regression(self, batch: SeqBatch) -> tuple[np.ndarray, np.ndarray]:
        """(Y, P), each (T, D): residuals y_t = x_t − M̄ p_t and regressors p_t = x_{t−1} of a batch."""
        X = W.data_matrix(batch, self.D, self.name)
        Xprev = getattr(batch, "Xprev", None)
        if Xprev is None:
            raise BnpviError(f"obs={self.name} needs the previous observation of every step (Xprev), but the batch "
                             "has none (read sequences without Xprev with SeqStore.lagged())")
        P = np.asarray(Xprev, dtype=np.float64)
        if P.shape != X.shape:
            raise BnpviError(f"the batch's Xprev has shape {P.shape} but its X has shape {X.shape}")
        return X - P @ self.M.T, P

    # ------------------------------------------------------------ summaries
    def summarize(self, batch: SeqBatch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """Sxx, Spx, Spp (module docstring) as the blocks of Σ_t r_tk z_t z_tᵀ, z_t = [p_t; y_t]: one BLAS pass."""
        Y, P = self._regression(batch)
        S = W.weighted_outer_sum(resp.matrix(), np.hstack([P, Y]))
        D = self.D
        return {"Sxx": np.ascontiguousarray(S[:, D:, D:]), "Spx": np.ascontiguousarray(S[:, :D, D:]),
                "Spp": np.ascontiguousarray(S[:, :D, :D])}

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """q(A_k, Λ_k) = MNW(M̂, V̂, B̂, ν̂) from N and the relative statistics (module docstring).

        Returns
        -------
        dict of K-leading arrays: nu, B (B̂), B_chol, logdet_B, E_logdet_Lambda (E ln|Λ|), V (V̂),
        V_chol (lower Cholesky of V̂), logdet_V, M (M̂), M_rel (M̂ − M̄ = Spxᵀ V̂⁻¹).
        """
        N = W.counts(N)
        Spx = np.asarray(stats["Spx"], dtype=np.float64)
        V_chol, V = W.chol_spd(self.V + np.asarray(stats["Spp"], dtype=np.float64),
                               what="posterior column precision V̂")
        V_inv_chol = W.chol_inverse(V_chol)
        half = V_inv_chol @ Spx  # L_V⁻¹ Spx, so Spxᵀ V̂⁻¹ Spx = halfᵀ half
        half_t = np.swapaxes(half, 1, 2)
        post = W.wishart_posterior(self.nu + N, self.B + np.asarray(stats["Sxx"], dtype=np.float64) - half_t @ half)
        M_rel = half_t @ V_inv_chol
        post.update(V=V, V_chol=V_chol, logdet_V=W.logdet_chol(V_chol), M=self.M + M_rel, M_rel=M_rel)
        return post

    # --------------------------------------------------------------- ELBO
    def expected_log_lik(self, post: Posterior, batch: SeqBatch) -> np.ndarray:
        """E_q log N(x_t | A p_t, Λ⁻¹) = −(D/2) ln 2π + ½ E ln|Λ| − ½[ν̂ (x − M̂p)ᵀ B̂⁻¹ (x − M̂p) + D pᵀ V̂⁻¹ p].

        (A − M̂)p | Λ ~ N(0, (pᵀV̂⁻¹p) Λ⁻¹) gives the last term. Both quadratic forms are one
        BLAS product per block of clusters (``_wishart.map_sq_norms``), never a loop over time.
        """
        Y, P = self._regression(batch)
        maha = post["nu"] * _residual_sq_norms(Y, P, post) + self.D * W.whitened_sq_norms(P, post["V_chol"])
        return W.gauss_expected_log_lik(post["E_logdet_Lambda"], maha, self.D)

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """L_data,k* = −(N D/2) ln π + (D/2) ln(|V̄|/|V̂|) + (ν̄/2) ln|B̄| − (ν̂/2) ln|B̂| + lnΓ_D(ν̂/2) − lnΓ_D(ν̄/2).

        The log marginal likelihood of the cluster's steps given their regressors, for hard
        assignments. (bnpy writes the exponent of |V| as E/2; here E = D.) Exactly 0 for empty
        clusters (N_k = 0 and zero statistics).
        """
        N = W.counts(N)
        post = self.posterior(N, stats) if post is None else post
        out = W.wishart_log_marginal(N, self.nu, self.logdet_B, post["nu"], post["logdet_B"], self.D)
        out = out + 0.5 * self.D * (self.logdet_V - post["logdet_V"])
        return np.where(W.empty_rows(N, stats), 0.0, out)

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """KL(q ‖ p) = KL_W(ν_q, B_q ‖ ν_p, B_p) + E_{q(Λ)} KL(MN(M_q, Λ⁻¹, V_q⁻¹) ‖ MN(M_p, Λ⁻¹, V_p⁻¹)).

        With vec(A) ~ N(vec M, V⁻¹ ⊗ Λ⁻¹) the matrix-normal part is
        ½[D tr(V_p V_q⁻¹) − D E + D ln(|V_q|/|V_p|) + ν_q tr(B_q⁻¹ Δ V_p Δᵀ)], Δ = M_q − M_p
        (the Normal part of the Normal-Wishart KL with κ replaced by V).
        """
        D = self.D
        trace = W.trace_inv_prod(post_q["B_chol"], post_p["B_chol"])
        kl = W.kl_wishart(post_q["nu"], post_q["logdet_B"], post_p["nu"], post_p["logdet_B"], trace, D)
        spread = np.linalg.solve(post_q["B_chol"], (post_q["M_rel"] - post_p["M_rel"]) @ post_p["V_chol"])
        maha = post_q["nu"] * np.sum(spread * spread, axis=(-2, -1))
        trace_V = W.trace_inv_prod(post_q["V_chol"], post_p["V_chol"])
        return kl + 0.5 * D * (trace_V - D + post_q["logdet_V"] - post_p["logdet_V"]) + 0.5 * maha

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode of q*(A_k, Λ_k) = MNW(M̂, V̂, B̂, ν̂) in (A, Λ): A_k = M̂_k and Λ_k = (ν̂_k − 1) B̂_k⁻¹ (the
        matrix normal's |Λ|^{E/2}, E = D, adds E/2 to the Wishart's exponent (ν̂ − D − 1)/2); hard EM uses it too,
        as ``Gauss.map_point`` says. Keys M, M_rel, B, B_chol, logdet_B and prec_scale ν̂ − 1."""
        post = self.posterior(N, stats)
        return {"M": post["M"], "M_rel": post["M_rel"], **W.precision_point(post, 1.0)}

    def map_prior_problem(self, natural: bool = False) -> str | None:
        if self.nu <= 1.0:
            return (f"alg=em with obs=ar_gauss needs obs.nu > 1 (the matrix-normal-Wishart prior's mode has noise "
                    f"covariance B̄/(ν̄ − 1)), got {self.nu:g}")
        return None

    def log_lik_at(self, point: Posterior, batch: SeqBatch) -> np.ndarray:
        """log N(x_t | A_k p_t, Λ_k⁻¹) = −(D/2) ln 2π + ½ ln|Λ_k| − ½ (y_t − A_k,rel p_t)ᵀ Λ_k (y_t − A_k,rel p_t)."""
        Y, P = self._regression(batch)
        const = -0.5 * self.D * W.LOG_2PI + 0.5 * W.point_logdet(point, self.D)
        return const[None, :] - 0.5 * point["prec_scale"][None, :] * _residual_sq_norms(Y, P, point)

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """ln MN(A_k | M̄, Λ_k⁻¹, V̄⁻¹) + ln W(Λ_k | ν̄, B̄)."""
        D = self.D
        spread = np.linalg.solve(point["B_chol"], point["M_rel"] @ self.V_chol)  # tr[Λ Δ V̄ Δᵀ] = c ‖L_B⁻¹ Δ L_V‖²
        normal = (-0.5 * D * D * W.LOG_2PI + 0.5 * D * W.point_logdet(point, D) + 0.5 * D * self.logdet_V
                  - 0.5 * point["prec_scale"] * np.sum(spread * spread, axis=(-2, -1)))
        return normal + W.wishart_log_density(point, self.nu, self.B_chol, self.logdet_B, D)

    # ------------------------------------------------------------- divergence
    def divergence(self, batch: SeqBatch, centers: Posterior) -> np.ndarray:
        """(T, J) KL(N(M̃_t p_t, Σ̃_t) ‖ N(M̂_j p_t, B̂_j/ν̂_j)): the two point estimates' predictions of x_t.

        The smoothed atom is the point estimate of the one-step posterior (N = 1, Sxx = y yᵀ,
        Spx = p yᵀ, Spp = p pᵀ). With s_t = p_tᵀ V̄⁻¹ p_t and c_t = 1/(1 + s_t) (Sherman-Morrison):
        M̃_t p_t = M̄ p_t + (1 − c_t) y_t and Σ̃_t = (B̄ + c_t y_t y_tᵀ)/(ν̄ + 1). A center predicts
        M̂_j p_t with covariance B̂_j/ν̂_j = E[Λ]⁻¹. Like Gauss's KL between Gaussians (the Bregman
        divergence of Hughes 2016 thesis Eq. 2.35 with the smoothing of Alg. 2.2), it is ≥ 0 and 0
        for a center built from the atom's own one-step summary; unlike it, it compares the
        regressions only at the atom's own p_t (an AR family's statistics mix x and p, so there is
        no Bregman divergence in x alone). With ν_a = ν̄ + 1 and L_j the Cholesky factor of B̂_j,

            2 KL = (ν̂_j/ν_a)[tr(B̂_j⁻¹B̄) + c_t ‖L_j⁻¹y_t‖²] + ν̂_j ‖L_j⁻¹((1 − c_t) y_t − M̂_j,rel p_t)‖² − D
                   + ln|B̂_j| − D ln ν̂_j − ln|B̄| − ln(1 + c_t ‖L̄⁻¹y_t‖²) + D ln ν_a.
        """
        Y, P = self._regression(batch)
        D = self.D
        nu_atom = self.nu + 1.0
        shrink = 1.0 / (1.0 + W.whitened_sq_norms(P, self.V_chol[None])[:, 0])
        atom_logdet = (self.logdet_B + np.log1p(shrink * W.whitened_sq_norms(Y, self.B_chol[None])[:, 0])
                       - D * np.log(nu_atom))
        nu_c = centers["nu"]
        trace = W.trace_inv_prod(centers["B_chol"], self.B_chol[None]) + shrink[:, None] * W.whitened_sq_norms(
            Y, centers["B_chol"])
        shift = _residual_sq_norms((1.0 - shrink)[:, None] * Y, P, centers)
        out = (nu_c / nu_atom) * trace + nu_c * shift + (centers["logdet_B"] - D * np.log(nu_c)) - atom_logdet[:, None]
        return np.maximum(0.5 * (out - D), 0.0)


def _residual_sq_norms(Y: np.ndarray, P: np.ndarray, post: Posterior) -> np.ndarray:
    """(T, K) ‖L_k⁻¹ (y_t − M_rel,k p_t)‖², L_k the Cholesky factor of B̂_k: maps L_k⁻¹[I, −M_rel,k] on [y_t; p_t]."""
    B_inv_chol = W.chol_inverse(post["B_chol"])
    maps = np.concatenate([B_inv_chol, -B_inv_chol @ post["M_rel"]], axis=2)
    return W.map_sq_norms(np.hstack([Y, P]), maps)


def _check_square(A, D: int, key: str) -> np.ndarray:
    """obs.<key> as a finite D × D float matrix."""
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError):
        raise BnpviError(f"obs.{key} must be a {D} x {D} matrix of numbers") from None
    if A.shape != (D, D) or not np.all(np.isfinite(A)):
        raise BnpviError(f"obs.{key} must be a {D} x {D} matrix of finite numbers, got shape {A.shape}")
    return A


def _mean_matrix(kind, D: int) -> np.ndarray:
    """M̄ for obs.mean_matrix: "eye" (default; each state a random walk a priori) or "zero"."""
    kind = "eye" if kind is None else str(kind)
    if kind not in MEAN_MATRICES:
        raise BnpviError(f"obs.mean_matrix must be one of {list(MEAN_MATRICES)}, got {kind!r}")
    return np.eye(D) if kind == "eye" else np.zeros((D, D))


def _first_difference_cov(moments: DataMoments | None, D: int) -> np.ndarray:
    """The covariance of the first differences x_t − x_{t−1}; the identity without it (no moments, or not sequences)."""
    if moments is None or moments.diff_cov is None:
        return np.eye(D)
    cov = np.asarray(moments.diff_cov, dtype=np.float64)
    if cov.shape != (D, D):
        raise BnpviError(f"data moments have a first-difference covariance of shape {cov.shape}, expected D={D}")
    return cov
