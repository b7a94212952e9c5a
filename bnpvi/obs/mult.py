"""Multinomial (bag-of-words) likelihood with a symmetric Dirichlet prior (Hughes 2016 thesis §2.2).

Document n is a count vector x_n ∈ Z≥0^V with length C_n = Σ_v x_nv (thesis Eq. 2.19):

    log p(x_n | μ_k) = h(x_n) + Σ_v x_nv ln μ_kv,   h(x_n) = ln(C_n! / Π_v x_nv!),
    μ_k ~ Dir(λ̄, ..., λ̄)  (symmetric, Eq. 2.43-2.44).

Statistics: S_kv = Σ_n r_nk x_nv (word counts per cluster); N_k is used by the allocation
model only. Global step: λ̂_kv = λ̄ + S_kv (never the generic "ν̂ = ν̄ + N" of Eq. 3.41, which
assumes one count per atom: by Eq. 2.21 a document of length C_n counts C_n times).

**The multinomial coefficient h(x_n) is dropped everywhere** (``expected_log_lik`` and
``log_marginal`` alike), so every reported ELBO is the log probability of the documents'
*word sequences* (each document's tokens in a fixed order) rather than of their count
vectors. The two differ by the constant Σ_n ln(C_n!/Π_v x_nv!), which depends on the data only
and so never affects a decision.

All products with the data use the sparse (N, V) count matrix ``batch.csr()``; it is
never densified (V can be 10⁴ and N 10⁵).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from bnpvi.errors import BnpviError, check_int, check_number
from bnpvi.kernels.mixture import mult_reassign_gains
from bnpvi.obs.base import DataMoments, ObsFamily, Posterior
from bnpvi.special import dirichlet_log_density, dirichlet_mode
from bnpvi.stats.resp import Responsibilities


def read_positive(cfg: Mapping | None, key: str, default: float) -> float:
    """``obs.<key>`` as a finite number > 0 (``default`` when unset); BnpviError naming obs.<key> otherwise."""
    value = None if cfg is None else cfg.get(key)
    if value is None:
        value = default
    return check_number(value, f"obs.{key}")


def clip_stats(S) -> np.ndarray:
    """Statistics as float64 clipped at 0 (memoized aggregates can come out as −1e-13 from cancellation)."""
    return np.maximum(np.asarray(S, dtype=np.float64), 0.0)




class Mult(ObsFamily):
    """Mixture of multinomials with a symmetric Dirichlet(λ̄) prior; name "mult".

    Parameters
    ----------
    lam : float
        λ̄ > 0, the symmetric Dirichlet pseudo-count of every word (config ``obs.lam``, default 0.1).
    V : int
        Vocabulary size (the data dimension D of a bag-of-words store).
    lam_start : float, optional
        With ``anneal_laps`` > 0, the pseudo-count of the first lap: the prior is annealed from λ̄_0 =
        ``lam_start`` down to λ̄ over the run's first laps (:meth:`annealed`; docs/births.md says why).
        None, or a value ≤ λ̄: no annealing.
    anneal_laps : int
        How many laps the annealing lasts (config ``obs.anneal_laps``).

    Notes
    -----
    Works on ``WordCountBatch`` (sparse counts); a ``PointBatch`` of dense non-negative counts
    is accepted too (converted to CSR). The multinomial coefficient h(x_n) is excluded from
    ``expected_log_lik`` and ``log_marginal`` consistently (see the module docstring).
    """

    name = "mult"
    data_kinds = ("bow",)
    local_fields = ("E_log_mu",)  # what expected_log_lik and word_table read

    def __init__(self, lam: float, V: int, lam_start: float | None = None, anneal_laps: int = 0):
        self.lam = read_positive({"lam": lam}, "lam", 0.1)
        V = int(V)
        if V < 1:
            raise BnpviError(f"the mult family needs a vocabulary of at least one word, got V={V}")
        self.V = self.D = V
        self._log_norm_prior = float(gammaln(V * self.lam))  # lnΓ(Σ_v λ̄_v)
        laps = check_int(anneal_laps, "obs.anneal_laps")
        start = None if lam_start is None else check_number(lam_start, "obs.lam_start")
        self.lam_start = start if start is not None and start > self.lam and laps > 0 else None
        self.anneal_laps = laps if self.lam_start is not None else 0
        self._by_lap: dict[int, Mult] = {}

    @classmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "Mult":
        """Build from the ``obs`` keys ``lam`` (default 0.1), ``lam_start`` and ``anneal_laps`` (default: no
        annealing); D is the vocabulary size V."""
        return cls(read_positive(options, "lam", 0.1), D, options.get("lam_start"), options.get("anneal_laps") or 0)

    def annealed(self, lap: int) -> "Mult":
        """The family of lap ``lap`` (0-based): pseudo-count λ̄_t = λ̄_0^(1 − t/L) λ̄^(t/L) for lap t < L =
        ``anneal_laps`` (geometric from ``lam_start`` λ̄_0 down to λ̄), λ̄ itself from lap L on.

        Why: the local step weighs word v in cluster k by exp E ln μ_kv = exp ψ(λ̂_kv) / exp ψ(Σ_w λ̂_kw),
        and exp ψ(λ̄) / λ̄ ≈ 3·10⁻⁴ at λ̄ = 0.1 (0.28 at 0.5): a cluster that has not seen a word yet
        all but refuses it, so on real text one catch-all cluster that has seen every word keeps the
        rare ones and the fit stays in that optimum. Mean-field VB with λ̄ acts much like a point
        estimate with λ̄ − 1/2 (Asuncion, Welling, Smyth & Teh 2009, §3), so a start near 1/2 lets
        clusters take up words before the prior tightens to λ̄. Every lap's ELBO is exact for the
        prior in force then; from lap L on it is the bound of the configured model.
        """
        if lap >= self.anneal_laps:
            return self
        if lap not in self._by_lap:
            t = lap / self.anneal_laps
            self._by_lap[lap] = Mult(self.lam_start ** (1.0 - t) * self.lam ** t, self.V)
        return self._by_lap[lap]

    def without_annealing(self) -> "Mult":
        return Mult(self.lam, self.V) if self.anneal_laps else self

    def stat_shapes(self) -> dict[str, tuple]:
        return {"S": (self.V,)}

    def prior_params(self) -> dict[str, np.ndarray]:
        return {"lam": np.float64(self.lam)}

    # ---------------------------------------------------------------- data
    def _counts(self, batch) -> sp.csr_matrix:
        """The batch's (N, V) float64 CSR count matrix, checked cheaply (O(nnz)) once per call."""
        if hasattr(batch, "csr"):
            if int(batch.vocab_size) != self.V:
                raise BnpviError(f"documents have vocabulary size {batch.vocab_size} but the mult family "
                                 f"was built for V={self.V}")
            X = batch.csr()
            if X.dtype != np.float64:
                X = X.astype(np.float64)
        else:
            dense = np.asarray(batch.X)
            if dense.ndim != 2 or dense.shape[1] != self.V:
                raise BnpviError(f"data have shape {dense.shape} but the mult family was built for V={self.V}")
            X = sp.csr_matrix(dense, dtype=np.float64)
        if X.nnz:
            if X.indices.min() < 0 or X.indices.max() >= self.V:
                raise BnpviError(f"word ids must lie in [0, {self.V}), found {X.indices.min()}..{X.indices.max()}")
            bad = ~np.isfinite(X.data) | (X.data < 0)
            if bad.any():
                row = int(np.searchsorted(X.indptr, np.flatnonzero(bad)[0], side="right") - 1)
                raise BnpviError(f"word counts must be finite and non-negative; document {row} of the batch "
                                 f"(row {getattr(batch, 'start', 0) + row} of the data) has {X.data[bad][0]!r}")
        return X

    def _compact_counts(self, batch) -> tuple[np.ndarray, sp.csr_matrix]:
        """The word ids the batch's documents contain, and its count matrix on those columns alone (renumbered)."""
        X = self._counts(batch)
        words, column = np.unique(X.indices, return_inverse=True)
        return words, sp.csr_matrix((X.data, column.ravel(), X.indptr), shape=(X.shape[0], words.size))

    # ------------------------------------------------------------ summaries
    def summarize(self, batch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """S_kv = Σ_n r_nk x_nv, i.e. S = (Xᵀ r)ᵀ as one sparse-dense product."""
        X = self._counts(batch)
        S = X.T @ resp.matrix()
        return {"S": np.ascontiguousarray((S.toarray() if sp.issparse(S) else S).T)}

    def add_weighted(self, stats: dict[str, np.ndarray], batch, weights: np.ndarray) -> None:
        """S += (Xᵀ W)ᵀ in place, on the columns of the words the documents contain only (O(K · their words))."""
        words, compact = self._compact_counts(batch)
        stats["S"][:, words] += np.asarray(compact.T @ np.asarray(weights, dtype=np.float64)).T

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """q(μ_k) = Dir(λ̂_k), λ̂_kv = λ̄ + S_kv (N is not used).

        Returns
        -------
        dict of K-leading arrays: lam (K, V) λ̂, E_log_mu (K, V) E ln μ_kv = ψ(λ̂_kv) − ψ(Σ_w λ̂_kw)
        (cf. Hughes 2016 thesis Eq. 2.47).
        """
        lam = self.lam + clip_stats(stats["S"])
        E_log_mu = digamma(lam) - digamma(lam.sum(axis=1))[:, None]
        return {"lam": lam, "E_log_mu": E_log_mu}

    # ------------------------------------------------------- one-word atoms
    def word_table(self, post: Posterior) -> np.ndarray:
        """(V, K) E ln μ_kv by word: the log-likelihood of an atom that is c tokens of word v is c times
        row v (a topic model's (document, word type) entries look it up instead of a dense product)."""
        return np.ascontiguousarray(post["E_log_mu"].T)

    def word_stats(self, word_topic: np.ndarray) -> dict[str, np.ndarray]:
        """The summaries from Σ_u c_u r_uk accumulated by word, (V, K): S = its transpose."""
        return {"S": np.ascontiguousarray(np.asarray(word_topic, dtype=np.float64).T)}

    # ---------------------------------------------------------------- ELBO
    def expected_log_lik(self, post: Posterior, batch) -> np.ndarray:
        """(N, K) Σ_v x_nv E ln μ_kv = X · (E ln μ)ᵀ, **without** h(x_n) = ln(C_n!/Π x_nv!)."""
        X = self._counts(batch)
        return np.asarray(X @ np.ascontiguousarray(post["E_log_mu"].T))

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """L_data,k* = c_Dir(λ̄) − c_Dir(λ̂_k) (Hughes 2016 thesis Eq. 3.42, with its sign corrected).

        Evaluated as Σ_v [lnΓ(λ̂_kv) − lnΓ(λ̄)] − [lnΓ(Σ_v λ̂_kv) − lnΓ(Vλ̄)], so words absent
        from a cluster contribute exactly 0 and nothing cancels across the vocabulary.

        For hard assignments this is the exact Dirichlet-multinomial (Pólya urn) log probability
        of the cluster's word *sequence*; the multinomial coefficients Σ_n ln(C_n!/Π_v x_nv!) are
        excluded (constant in every decision; module docstring). N does not enter. Clusters with
        S_k = 0 (empty clusters, or only empty documents) give exactly 0.
        """
        S = clip_stats(stats["S"])
        lam_post = self.lam + S
        per_word = (gammaln(lam_post) - gammaln(self.lam)).sum(axis=1)
        out = per_word - (gammaln(lam_post.sum(axis=1)) - self._log_norm_prior)
        return np.where(np.any(S != 0, axis=1), out, 0.0)

    has_reassign_gains = True

    def reassign_gains(self, N: np.ndarray, stats: Mapping[str, np.ndarray], batch, resp: np.ndarray) -> np.ndarray:
        """(N, K) change of Σ_k L_data,k* when document n's responsibilities r_n become a one-hot on j.

        With D(λ) = Σ_v lnΓ(λ_v) − lnΓ(Σ_v λ_v) (:meth:`log_marginal` up to constants),
        λ_k = λ̄ + S_k and λ⁻_k = λ_k − r_nk x_n (document n taken out of every cluster),

            Σ_k [D(λ⁻_k) − D(λ_k)] + D(λ⁻_j + x_n) − D(λ⁻_j),

        the second part the Pólya-urn predictive log probability of the document's words
        under cluster j without it. Only the document's own words enter, so the cost is
        O(nnz · K), compiled (``bnpvi.kernels.mixture.mult_reassign_gains``). N is not used.
        """
        S = stats["S"]
        words, compact = self._compact_counts(batch)  # only these columns of λ are read
        total = self.V * self.lam + clip_stats(S).sum(axis=1)
        return mult_reassign_gains(compact, np.asarray(resp, dtype=np.float64), self.lam + clip_stats(S[:, words]),
                                   total, self.lam, self.V * self.lam)

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """(K,) KL(Dir(λ_q) ‖ Dir(λ_p)) = c_Dir(λ_q) − c_Dir(λ_p) + Σ_v (λ_qv − λ_pv) E_q ln μ_v."""
        a, b = post_q["lam"], np.broadcast_to(post_p["lam"], post_q["lam"].shape)
        log_norm = (gammaln(b) - gammaln(a)).sum(axis=1) + gammaln(a.sum(axis=1)) - gammaln(b.sum(axis=1))
        return log_norm + np.sum((a - b) * post_q["E_log_mu"], axis=1)

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode of q*(μ_k) = Dir(λ̄ + S_k): μ_kv ∝ S_kv + λ̄ − 1 on the simplex, or ∝ S_kv + λ̄ in the
        natural coordinates (``natural``; Hughes 2016 thesis Eq. 2.64). Keys mu and log_mu (K, V)."""
        mu = dirichlet_mode(clip_stats(stats["S"]), self.lam, 0.0 if natural else 1.0)
        with np.errstate(divide="ignore"):
            return {"mu": mu, "log_mu": np.log(mu)}

    def map_prior_problem(self, natural: bool = False) -> str | None:
        if self.lam < 1.0:
            return (f"alg=em needs every Dirichlet parameter >= 1 (else the MAP lies on the boundary or does not "
                    f"exist): obs.lam = {self.lam:g}")
        return None

    def log_lik_at(self, point: Posterior, batch) -> np.ndarray:
        """Σ_v x_nv ln μ_kv (h(x_n) dropped, as in :meth:`expected_log_lik`): one sparse product, in which a word
        the cluster never emits (μ_kv = 0, possible only with λ̄ = 1) makes the document impossible (−inf)."""
        return np.asarray(self._counts(batch) @ point["log_mu"].T)

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """ln Dir(μ_k | λ̄) in the coordinates of :meth:`map_point`."""
        return dirichlet_log_density(point["mu"], self.lam, 0.0 if natural else 1.0)

    def point_moments(self, point: Posterior) -> dict[str, np.ndarray]:
        """``means_``: the word probabilities μ_k."""
        return {"means_": np.asarray(point["mu"])}

    # -------------------------------------------------------------- Bregman
    def divergence(self, batch, centers: Posterior) -> np.ndarray:
        """(N, J) C_n · KL(p̃_n ‖ μ_j) from smoothed documents to centers (Hughes 2016 thesis Eq. 2.38).

        Smoothed atom (the one-document posterior's mean): p̃_nv = (x_nv + λ̄)/a_n, a_n = C_n + Vλ̄.
        Center: the posterior mean μ_jv = λ̂_jv / Σ_w λ̂_jw. With the sparse data,

            Σ_v p̃_nv ln p̃_nv = [Σ_{v: x_nv>0} (x_nv + λ̄) ln(x_nv + λ̄) + (V − nnz_n) λ̄ ln λ̄]/a_n − ln a_n,
            Σ_v p̃_nv ln μ_jv = [x_n · ln μ_j + λ̄ Σ_v ln μ_jv]/a_n,

        and the divergence is C_n times their difference (the count-scaled KL of Eq. 2.38, so a
        long document weighs more). Zero for the center built from the document's own
        one-hot summary; tiny negative rounding is clipped at 0; empty documents give 0.
        """
        X = self._counts(batch)
        if not X.has_canonical_format:  # duplicates would break the per-nonzero entropy sum
            X = X.copy()
            X.sum_duplicates()
        lam = np.asarray(centers["lam"], dtype=np.float64)
        log_mu = np.log(lam) - np.log(lam.sum(axis=1))[:, None]  # (J, V)
        C = np.asarray(X.sum(axis=1)).ravel()
        a = C + self.V * self.lam
        nnz = np.diff(X.indptr)
        smoothed = X.data + self.lam
        rows = np.repeat(np.arange(X.shape[0]), nnz)
        ent_num = np.bincount(rows, weights=smoothed * np.log(smoothed), minlength=X.shape[0])
        neg_entropy = (ent_num + (self.V - nnz) * self.lam * np.log(self.lam)) / a - np.log(a)
        cross = (np.asarray(X @ np.ascontiguousarray(log_mu.T)) + self.lam * log_mu.sum(axis=1)[None, :]) / a[:, None]
        out = C[:, None] * (neg_entropy[:, None] - cross)
        return np.maximum(out, 0.0)
