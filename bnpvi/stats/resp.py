"""Responsibilities r_nk of a batch's atoms over K clusters (Hughes 2016 thesis §3.4.2).

Two storage forms, and every consumer (the observation families' summaries, the
counts, the entropies, the merge terms) works from either without building the
other:

* dense: ``values`` is the (N, K) matrix r_nk, ``indices`` is None;
* sparse: ``values`` and ``indices`` are (N, L) arrays, the fixed-L row layout
  of Hughes 2016 thesis §7 (L-sparse local steps): row n holds the
  responsibilities of the clusters ``indices[n]``; padding entries have value 0.

One-hot responsibilities (hard assignments: initialisation, k-means) are the
sparse form with L = 1. Responsibilities are transient: a batch is summarised
and then they are dropped.

Weighted atoms (a points file's ``weights``, ``fit(X, sample_weight=w)``): ``weights`` holds w_n ≥ 0 and
every sum over atoms is weighted, N_k = Σ_n w_n r_nk, H_k = −Σ_n w_n r_nk ln r_nk, and the summaries the
families read (:meth:`mass`) are those of w_n r_nk, so an atom of integer weight m counts as m copies of it
(the ELBO of Hughes 2016 thesis Eq. 3.24, 3.42 with each copy's terms). The responsibilities themselves,
``values``, :meth:`column`, :meth:`best` and :meth:`matrix`, stay r_nk: the local step does not depend on w.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from scipy.special import xlogy

from bnpvi.kernels import mixture


@dataclass(frozen=True, eq=False)
class Responsibilities:
    """Responsibilities of N atoms over K clusters.

    Attributes
    ----------
    values : (N, K) or (N, L) ndarray of float64
        r_nk (dense) or the L stored responsibilities of each row (sparse).
    K : int
        Number of clusters.
    indices : (N, L) ndarray of int32, optional
        Clusters of each row's stored values (sparse form); None for dense.
    log_norm : (N,) ndarray, optional
        log Σ_k exp W_nk, the optimal per-atom objective of the local step that made
        them (Hughes 2016 thesis Eq. 3.46); None for constructed responsibilities.
    entropy_sums : (K,) ndarray, optional
        H_k = −Σ_n r_nk ln r_nk when the local step computed it; otherwise computed
        on first use by :meth:`entropy`. With ``weights``, the weighted H_k.
    weights : (N,) ndarray of float64, optional
        w_n ≥ 0 of each atom (module docstring); None: every atom has weight 1.
    """

    values: np.ndarray
    K: int
    indices: np.ndarray | None = None
    log_norm: np.ndarray | None = None
    entropy_sums: np.ndarray | None = None
    weights: np.ndarray | None = None

    def __post_init__(self):
        if self.values.ndim != 2:
            raise ValueError(f"Responsibilities values must be 2-D, got shape {self.values.shape}")
        if self.indices is None:
            if self.values.shape[1] != self.K:
                raise ValueError(f"dense values {self.values.shape} do not match K={self.K}")
        elif self.indices.shape != self.values.shape or self.indices.dtype != np.int32:
            raise ValueError(f"sparse indices must be int32 of the values' shape {self.values.shape}, "
                             f"got {self.indices.dtype} {self.indices.shape}")
        if self.log_norm is not None and self.log_norm.shape != (self.values.shape[0],):
            raise ValueError(f"log_norm has shape {self.log_norm.shape}, expected ({self.values.shape[0]},)")
        if self.entropy_sums is not None and self.entropy_sums.shape != (self.K,):
            raise ValueError(f"entropy has shape {self.entropy_sums.shape}, expected ({self.K},)")
        if self.weights is not None and self.weights.shape != (self.values.shape[0],):
            raise ValueError(f"weights have shape {self.weights.shape}, expected ({self.values.shape[0]},)")

    def with_weights(self, weights: np.ndarray | None) -> "Responsibilities":
        """These responsibilities with atom weights w_n (module docstring); itself when ``weights`` is None or
        it already has weights. The local step's unweighted entropies are dropped (:meth:`entropy` weighs)."""
        if weights is None or self.weights is not None:
            return self
        return replace(self, weights=np.asarray(weights, dtype=np.float64), entropy_sums=None)

    def mass(self) -> "Responsibilities":
        """The responsibilities w_n r_nk (itself without weights): what the families' linear summaries
        S_k = Σ_n w_n r_nk s(x_n) are made from."""
        if self.weights is None:
            return self
        return Responsibilities(self.values * self.weights[:, None], self.K, indices=self.indices)

    # --------------------------------------------------------------- constructors
    @classmethod
    def from_weights(cls, log_lik, log_prior, sparse_L: int | None = None, atom_weights=None,
                     **kernel_kw) -> "Responsibilities":
        """Local step: r_nk ∝ exp(log_lik_nk + log_prior_k) (Hughes 2016 thesis Eq. 3.47-3.49).

        Dense by default (the compiled :func:`bnpvi.kernels.mixture.dense_local_step`); with
        ``sparse_L`` = L < K, the L-sparse optimum (thesis Eq. 7.4-7.5,
        :func:`bnpvi.kernels.mixture.sparse_local_step`) in the sparse form. L ≥ K is the dense
        step. Both kernels also return the log normalisers and the entropies.
        ``log_lik`` (N, K) and ``log_prior`` (K,) are converted to C-contiguous float64
        (no copy when they already are). With ``atom_weights`` (N,), the result carries them (module
        docstring); the dense kernel then sums the weighted entropies itself.
        """
        log_lik = np.ascontiguousarray(log_lik, dtype=np.float64)
        log_prior = np.ascontiguousarray(log_prior, dtype=np.float64)
        K = log_prior.shape[0]
        if sparse_L is not None and sparse_L < K:
            values, indices, log_norm, entropy = mixture.sparse_local_step(log_lik, log_prior, sparse_L, **kernel_kw)
            return cls(values, K, indices=indices, log_norm=log_norm, entropy_sums=entropy).with_weights(atom_weights)
        if atom_weights is not None:
            atom_weights = np.ascontiguousarray(atom_weights, dtype=np.float64)
            kernel_kw = {**kernel_kw, "weights": atom_weights}
        resp, log_norm, entropy = mixture.dense_local_step(log_lik, log_prior, **kernel_kw)
        return cls(resp, K, log_norm=log_norm, entropy_sums=entropy, weights=atom_weights)

    @classmethod
    def one_hot(cls, labels, K: int) -> "Responsibilities":
        """Hard assignments: r_nk = 1 if labels[n] == k (sparse form, L = 1)."""
        labels = np.asarray(labels, dtype=np.int32).reshape(-1, 1)
        if labels.size and (labels.min() < 0 or labels.max() >= K):
            raise ValueError(f"labels must lie in 0..{K - 1}")
        return cls(np.ones(labels.shape), int(K), indices=np.ascontiguousarray(labels),
                   entropy_sums=np.zeros(int(K)))

    # ----------------------------------------------------------------- properties
    @property
    def n_atoms(self) -> int:
        return self.values.shape[0]

    @property
    def is_sparse(self) -> bool:
        return self.indices is not None

    # -------------------------------------------------------------------- summaries
    def matrix(self):
        """The (N, K) responsibilities as an ndarray (dense form, no copy) or a CSR matrix (sparse form).

        Both support ``R.T @ Y`` and row slicing, which is all the observation
        families' summaries need; the sparse form is never densified.
        """
        if self.indices is None:
            return self.values
        N, L = self.values.shape
        return sp.csr_matrix((self.values.ravel(), self.indices.ravel(), np.arange(0, N * L + 1, L)),
                             shape=(N, self.K))

    def best(self) -> tuple[np.ndarray, np.ndarray]:
        """The cluster of largest r_nk of every atom and that r_nk, as (N,) int64 and (N,) float64 arrays
        (the first such cluster on ties; from the stored values alone in the sparse form)."""
        rows = np.arange(self.n_atoms)
        pick = np.argmax(self.values, axis=1)
        clusters = pick if self.indices is None else self.indices[rows, pick]
        return clusters.astype(np.int64), self.values[rows, pick]

    def counts(self) -> np.ndarray:
        """N_k = Σ_n w_n r_nk, shape (K,)."""
        if self.weights is not None:
            return self.weights @ self.values if self.indices is None else self.mass().counts()
        if self.indices is None:
            return self.values.sum(axis=0)
        return np.bincount(self.indices.ravel(), weights=self.values.ravel(), minlength=self.K)

    def entropy(self) -> np.ndarray:
        """H_k = −Σ_n w_n r_nk ln r_nk, shape (K,) (Hughes 2016 thesis Eq. 3.51; 0 ln 0 = 0)."""
        if self.entropy_sums is not None:
            return self.entropy_sums
        if self.weights is not None:
            terms = -xlogy(self.values, self.values) * self.weights[:, None]
            if self.indices is None:
                return terms.sum(axis=0)
            return np.bincount(self.indices.ravel(), weights=terms.ravel(), minlength=self.K)
        if self.indices is None:
            return mixture.entropy_of(np.ascontiguousarray(self.values))
        v = self.values
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(v > 0, -v * np.log(np.where(v > 0, v, 1.0)), 0.0)
        return np.bincount(self.indices.ravel(), weights=terms.ravel(), minlength=self.K)

    def group_entropy(self, membership: np.ndarray) -> np.ndarray:
        """Entropies −Σ_n s_ng ln s_ng of merged columns s_ng = Σ_k r_nk M_kg, for a (K, G) 0/1 matrix M.

        The entropy a group of clusters would have if merged into one (Hughes 2016
        thesis §4.1.2), for any groups; :meth:`pair_entropy` is the compiled case of pairs.
        """
        M = np.asarray(membership, dtype=np.float64)
        if self.indices is None:
            merged = self.values @ M
        else:
            merged = np.einsum("nl,nlg->ng", self.values, M[self.indices])
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(merged > 0, -merged * np.log(np.where(merged > 0, merged, 1.0)), 0.0)
        return terms.sum(axis=0) if self.weights is None else self.weights @ terms

    def column_sums(self, weights: np.ndarray) -> np.ndarray:
        """Σ_n w_n r_nk a_nk for an (N, K) array a (e.g. the fit Σ_n w_n r_nk E log p(x_n|φ_k))."""
        if self.weights is not None:
            return self.mass().column_sums(weights)
        if self.indices is None:
            return np.einsum("nk,nk->k", self.values, weights)
        picked = np.take_along_axis(weights, self.indices.astype(np.intp), axis=1)
        return np.bincount(self.indices.ravel(), weights=(self.values * picked).ravel(), minlength=self.K)

    def column(self, k: int) -> np.ndarray:
        """r_nk for one cluster k, shape (N,)."""
        if self.indices is None:
            return self.values[:, k].copy()
        return np.where(self.indices == k, self.values, 0.0).sum(axis=1)

    def pair_entropy(self, pairs) -> np.ndarray:
        """Merged-column entropies −Σ_n (r_na + r_nb) ln(r_na + r_nb) for (M, 2) pairs.

        Compiled for both forms (Hughes 2016 thesis §4.1.2): :func:`bnpvi.kernels.mixture.pair_merge_entropy`
        (dense) and :func:`bnpvi.kernels.mixture.sparse_pair_entropy` (one pass over the stored entries).
        """
        pairs = np.asarray(pairs)
        if pairs.size == 0:
            pairs = np.empty((0, 2), dtype=np.int64)
        elif pairs.dtype.kind in "iu":  # anything else is left for the kernel to reject
            pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        if self.weights is not None:
            return self._weighted_pair_entropy(pairs)
        if self.indices is None:
            return mixture.pair_merge_entropy(np.ascontiguousarray(self.values), pairs)
        return mixture.sparse_pair_entropy(np.ascontiguousarray(self.values), np.ascontiguousarray(self.indices),
                                          self.entropy(), pairs)

    def _weighted_pair_entropy(self, pairs: np.ndarray) -> np.ndarray:
        """−Σ_n w_n s ln s, s = r_na + r_nb, per pair, in blocks of pairs of about 2**22 values."""
        if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
            raise ValueError(f"pairs must be an (M, 2) integer array, got {pairs.dtype} {pairs.shape}")
        if pairs.size and (pairs.min() < 0 or pairs.max() >= self.K or (pairs[:, 0] == pairs[:, 1]).any()):
            raise ValueError(f"pairs must be distinct clusters in 0..{self.K - 1}")
        R = self.values if self.indices is None else self.matrix().tocsc()
        out = np.empty(pairs.shape[0])
        step = max(1, (1 << 22) // max(1, self.n_atoms))
        for lo in range(0, pairs.shape[0], step):
            a, b = pairs[lo:lo + step, 0], pairs[lo:lo + step, 1]
            s = R[:, a] + R[:, b]
            s = s.toarray() if hasattr(s, "toarray") else s
            out[lo:lo + step] = self.weights @ -xlogy(s, s)
        return out
