"""Allocation models of mixtures: the DP stick-breaking prior and the finite symmetric Dirichlet.

A mixture assigns each atom independently: z_n ~ Cat(π). Its local step is one
softmax per atom (Hughes 2016 thesis Eq. 3.47-3.49), its summaries are the counts
N_k and entropies H_k = −Σ_n r_nk ln r_nk (Eq. 3.51), and its global step is the
conjugate posterior of the counts. Both models give the ELBO allocation term at the
optimum, L_alloc*(N), and the general term for another q as
L_alloc*(N) − KL(q ‖ q*(N)) (the identity of conjugate exponential families).
"""
from __future__ import annotations

import copy

import numpy as np
from scipy.special import digamma

from bnpvi.alloc.base import AllocModel, Local, Params
from bnpvi.data.batch import atom_weights
from bnpvi.errors import check_int, check_number
from bnpvi.special import c_beta, c_dir
from bnpvi.stats import ENTROPY, PER_CLUSTER, Responsibilities, SuffStats


def _counts(N: np.ndarray) -> np.ndarray:
    """Counts clipped at 0 (memoized aggregates can come out as −1e-13)."""
    return np.maximum(np.asarray(N, dtype=np.float64), 0.0)


def counts_after(N: np.ndarray) -> np.ndarray:
    """N^>_k = Σ_{ℓ>k} N_ℓ (Hughes 2016 thesis Eq. 3.36) along the last axis, by a reversed cumulative sum."""
    tail = np.cumsum(N[..., ::-1], axis=-1)[..., ::-1]
    return np.concatenate([tail[..., 1:], np.zeros(N.shape[:-1] + (1,))], axis=-1)


class MixtureAlloc(AllocModel):
    """What DP and finite mixtures share: the softmax local step, N and H, and the move helpers.

    Subclasses give the prior: ``posterior(N)``, ``expected_log_pi``, ``expected_pi``,
    ``log_marginal(N)`` and ``kl``.
    """

    has_sparse_step = True
    moves = ("split", "birth", "merge", "delete", "reassign")

    def __init__(self, gamma: float, temperature: float | None = 1.0, temperature_laps: int = 0):
        self.gamma = check_number(gamma, "model.gamma")
        self.annealing_laps = check_int(temperature_laps, "model.temperature_laps", 0)
        self.temperature_start: float | None = None  # T_0; None until the family is known (model.temperature=null)
        self.temperature_laps = 0
        if temperature is not None:
            self.start_temperature(temperature)

    def start_temperature(self, T0: float) -> None:
        """Anneal from T_0 = ``T0`` (1: not at all) over the configured ``model.temperature_laps``."""
        self.temperature_start = check_number(T0, "model.temperature", 1.0, strict=False)
        self.temperature_laps = self.annealing_laps if self.temperature_start > 1.0 else 0

    def temperature_at(self, lap: int) -> float:
        """T_t = T_0^(1 − t/L) in lap t < L = ``temperature_laps`` (geometric from T_0 = ``model.temperature``
        down to 1), 1 from lap L on: deterministic annealing of the local step (``bnpvi.obs.tempered``).

        Why: from one cluster, births split the data one cluster at a time, and from many, the first
        local step fixes which atoms each cluster keeps; either way the run settles in the basin of
        its first cuts. At T > 1 an atom is shared among every cluster that fits it within about T
        nats, so the clusters' boundaries move freely while T falls and the clusters take their
        places in the data before the atoms commit (docs/births.md: measured).
        """
        if lap >= self.temperature_laps:
            return 1.0
        return float(self.temperature_start ** (1.0 - lap / self.temperature_laps))

    def without_annealing(self) -> "MixtureAlloc":
        if not self.temperature_laps:
            return self
        alloc = copy.copy(self)
        alloc.temperature_laps = 0
        return alloc

    def layout(self):
        return {"N": ((), PER_CLUSTER), "H": ((), ENTROPY)}

    # -------------------------------------------------------------- local step
    def local_step(self, batch, log_lik: np.ndarray, params: Params) -> Local:
        """r_nk ∝ exp(E log p(x_n|φ_k) + E ln π_k) (Hughes 2016 thesis Eq. 3.47-3.49), compiled; over
        the L largest weights of each atom only when ``sparse_L`` is set (Eq. 7.4-7.5); with the batch's atom
        weights, whose entropies the compiled step weighs as it goes (``bnpvi.stats.resp``)."""
        return Local(Responsibilities.from_weights(log_lik, self.expected_log_pi(params), sparse_L=self.sparse_L,
                                                   atom_weights=atom_weights(batch)))

    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        return {"N": local.resp.counts(), "H": local.resp.entropy()}

    def decode(self, batch, log_lik: np.ndarray, params: Params) -> np.ndarray:
        return np.argmax(log_lik + self.expected_log_pi(params), axis=1)

    # ------------------------------------------------------------ global step
    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        return self.posterior(stats.N)

    def elbo(self, stats: SuffStats, params: Params) -> float:
        """L_alloc*(N) − KL(q ‖ q*(N)) + Σ_k H_k; the KL is exactly 0 when ``params`` = q*(N)."""
        N = _counts(stats.N)
        return self.log_marginal(N) - self.kl(params, self.posterior(N)) + float(np.sum(stats["H"]))

    def export(self, params: Params) -> dict[str, np.ndarray]:
        return {"weights": self.expected_pi(params)}

    # ------------------------------------------------------------------ moves
    def merge_terms(self, local: Local, pairs: np.ndarray) -> dict[str, np.ndarray]:
        """Per pair (a, b): the merged cluster's entropy −Σ_n (r_na + r_nb) ln(r_na + r_nb) (thesis §4.1.2)."""
        return {"H": local.resp.pair_entropy(pairs)}

    def group_terms(self, local: Local, membership: np.ndarray) -> dict[str, np.ndarray]:
        """Per group g of clusters (column g of the (K, G) 0/1 ``membership``): its merged entropy."""
        return {"H": local.resp.group_entropy(membership)}

    def merge_score(self, stats: SuffStats, params: Params, pairs: np.ndarray) -> np.ndarray:
        """ΔL_alloc of merging each pair (a < b) (Hughes 2016 thesis Eq. 4.8); the entropy term is excluded.

        Since merging never raises the entropy term, adding this to the data term's
        change gives the m-score, an upper bound on the exact gain (Eq. 4.10).
        """
        N = _counts(stats.N)
        a, b = pairs[:, 0], pairs[:, 1]
        K = N.shape[0]
        cols = np.arange(K - 1)
        keep = cols[None, :] + (cols[None, :] >= b[:, None])  # columns of each merged count vector
        merged = N[keep]
        merged[np.arange(pairs.shape[0]), a] += N[b]
        return self.log_marginal(merged) - self.log_marginal(N)

    def restricted_local_step(self, mass: np.ndarray, log_lik: np.ndarray, log_prior: np.ndarray) -> Local:
        """Atom n's mass ``mass[n]`` shared among J clusters: r'_nj = mass_n softmax_j(log_lik_nj + log_prior_j).

        The exact local-step optimum restricted to those clusters (Hughes 2016 thesis
        Eq. 4.12-4.16 for births, 4.25-4.27 for deletes).
        """
        share = Responsibilities.from_weights(log_lik, log_prior).values
        return Local(Responsibilities(np.ascontiguousarray(mass[:, None] * share), share.shape[1]))


class DPMixAlloc(MixtureAlloc):
    """DP mixture by stick-breaking with nested truncation (Hughes 2016 thesis §3.2-3.4).

    q(u_k) = Beta(η̂_k1, η̂_k0) with η̂_k1 = 1 + N_k, η̂_k0 = γ + N^>_k (Eq. 3.43, with
    N^>_k as Alg. 3.1 and Eq. 3.44 confirm), E ln π_k = E ln u_k + Σ_{ℓ<k} E ln(1 − u_ℓ)
    (Eq. 3.11, 3.32-3.33).

    Parameters
    ----------
    gamma : float
        γ > 0, the DP concentration (config ``model.gamma``).
    """

    name = "dp_mix"

    def take_family_temperature(self, obs, births: bool) -> None:
        """The family's T_0 only with births: at a high temperature, clusters that the data do not yet tell
        apart coincide (and merges join them), and births split them again as T falls. Without births
        (other moves, other algorithms, a finite mixture) nothing would, so annealing is then asked for by
        ``model.temperature`` alone."""
        if self.temperature_start is None:
            self.start_temperature(obs.default_temperature if births else 1.0)

    def posterior(self, N: np.ndarray) -> dict[str, np.ndarray]:
        N = _counts(N)
        return {"eta1": 1.0 + N, "eta0": self.gamma + counts_after(N)}

    def expected_log_pi(self, params: Params) -> np.ndarray:
        eta1, eta0 = params["eta1"], params["eta0"]
        total = digamma(eta1 + eta0)
        log_u = digamma(eta1) - total
        log_1mu = digamma(eta0) - total
        return log_u + np.concatenate([[0.0], np.cumsum(log_1mu)[:-1]])

    def expected_pi(self, params: Params) -> np.ndarray:
        """E[π_k] = û_k Π_{ℓ<k}(1 − û_ℓ) (Hughes 2016 thesis Eq. 3.18)."""
        u = params["eta1"] / (params["eta1"] + params["eta0"])
        return u * np.concatenate([[1.0], np.cumprod(1.0 - u)[:-1]])

    def log_marginal(self, N: np.ndarray):
        """L_DP-alloc* = Σ_k [ln γ − c_B(1 + N_k, γ + N^>_k)] (Hughes 2016 thesis Eq. 3.44).

        N may be (K,) (returns a float) or (P, K) (one count vector per row; returns (P,)).
        """
        N = _counts(N)
        value = np.sum(np.log(self.gamma) - c_beta(1.0 + N, self.gamma + counts_after(N)), axis=-1)
        return float(value) if N.ndim == 1 else value

    def merge_score(self, stats: SuffStats, params: Params, pairs: np.ndarray) -> np.ndarray:
        """ΔL_alloc of merging each pair (a < b) (Hughes 2016 thesis Eq. 4.8), from the terms that change.

        With T_k = c_B(1 + N_k, γ + N^>_k), merging b into a removes T_b and one ln γ, gives a the term
        c_B(1 + N_a + N_b, γ + N^>_a − N_b), and lowers N^>_k by N_b for a < k < b:
        ΔL = −ln γ + T_b + T_a − c_B(1 + N_a + N_b, γ + N^>_a − N_b) − Σ_{a<k<b} [c_B(1 + N_k, γ + N^>_k − N_b) − T_k].
        The sums come from one (b, k) table per block of b, O(K²) terms for all K(K−1)/2 pairs instead of
        the O(K) terms per pair of re-evaluating Eq. 3.44 (the base class's route, equal to rounding).
        """
        N = _counts(stats.N)
        a, b = pairs[:, 0], pairs[:, 1]
        K = N.shape[0]
        after = counts_after(N)
        T = c_beta(1.0 + N, self.gamma + after)
        out = T[b] + T[a] - c_beta(1.0 + N[a] + N[b], self.gamma + np.maximum(after[a] - N[b], 0.0)) - np.log(self.gamma)
        between = np.empty(pairs.shape[0])
        rows = max(1, (1 << 20) // max(K, 1))
        for lo in range(0, K, rows):
            bs = np.arange(lo, min(K, lo + rows))
            mine = np.flatnonzero((b >= lo) & (b < lo + rows))
            if not mine.size:
                continue
            # table[i, k] = c_B(1 + N_k, γ + N^>_k − N_b) − T_k for k < b = bs[i], 0 elsewhere
            table = c_beta(1.0 + N[None, :], self.gamma + np.maximum(after[None, :] - N[bs, None], 0.0)) - T[None, :]
            table[np.arange(K)[None, :] >= bs[:, None]] = 0.0
            tail = np.cumsum(table[:, ::-1], axis=1)[:, ::-1]  # tail[i, k] = Σ_{j ≥ k} table[i, j]
            tail = np.concatenate([tail, np.zeros((bs.size, 1))], axis=1)
            between[mine] = tail[b[mine] - lo, a[mine] + 1]
        return out - between

    def kl(self, q: Params, p: Params) -> float:
        """Σ_k KL(Beta(q) ‖ Beta(p))."""
        a1, b1, a0, b0 = q["eta1"], q["eta0"], p["eta1"], p["eta0"]
        total = digamma(a1 + b1)
        return float(np.sum(
            c_beta(a1, b1) - c_beta(a0, b0)
            + (a1 - a0) * (digamma(a1) - total) + (b1 - b0) * (digamma(b1) - total)
        ))


class FiniteMixAlloc(MixtureAlloc):
    """Finite mixture with a symmetric Dirichlet prior π ~ Dir(γ/K, ..., γ/K) (Hughes 2016 thesis §2.4).

    q(π) = Dir(θ̂), θ̂_k = N_k + γ/K (Eq. 2.115); at the optimum
    L_Dir-alloc* = c_Dir(γ/K · 1) − c_Dir(N + γ/K) (Eq. 2.102).

    Parameters
    ----------
    gamma : float
        γ > 0, the total prior concentration (config ``model.gamma``).
    """

    name = "finite_mix"
    finite = True

    def _alpha(self, K: int) -> np.ndarray:
        return np.full(K, self.gamma / K)

    def posterior(self, N: np.ndarray) -> dict[str, np.ndarray]:
        N = _counts(N)
        return {"theta": N + self._alpha(N.shape[0])}

    def expected_log_pi(self, params: Params) -> np.ndarray:
        theta = params["theta"]
        return digamma(theta) - digamma(theta.sum())

    def expected_pi(self, params: Params) -> np.ndarray:
        return params["theta"] / params["theta"].sum()

    def log_marginal(self, N: np.ndarray):
        """c_Dir(γ/K · 1) − c_Dir(N + γ/K); N (K,) gives a float, (P, K) gives (P,)."""
        N = _counts(N)
        alpha = self._alpha(N.shape[-1])
        value = c_dir(alpha) - c_dir(N + alpha, axis=-1)
        return float(value) if N.ndim == 1 else value

    def kl(self, q: Params, p: Params) -> float:
        a, b = q["theta"], p["theta"]
        return float(c_dir(a) - c_dir(b) + np.sum((a - b) * (digamma(a) - digamma(a.sum()))))
