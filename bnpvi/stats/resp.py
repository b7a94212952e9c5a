"""Responsibilities: the output of one local step on one batch (spec 01 §3.5; spec 04 §1.5).

Dense form: ``values`` is the (N, K) matrix r_nk and ``indices`` is None.
Sparse (top-L) form, reserved for the L-sparse local step of spec 04 §1: ``values``
and ``indices`` are (N, L) row-major arrays (the fixed-L "ELL" layout of spec 04
§1.5) — row n holds the responsibilities of the clusters ``indices[n]``; padding
entries have value 0.0 and repeat a valid index, so scatter-adds need no mask.
K is always ``entropy.shape[0]``.

Responsibilities are transient: a batch is summarised (``counts``, ``entropy``,
the family's statistics via ``to_dense``) and then dropped (spec 04 §1.5).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnpvi import kernels


@dataclass(frozen=True, eq=False)
class Responsibilities:
    """Responsibilities r_nk of N atoms over K clusters, with their per-batch summaries.

    Attributes
    ----------
    values : (N, K) or (N, L) ndarray of float64
        r_nk (dense) or the L stored responsibilities per row (sparse). Rows sum to 1.
    log_norm : (N,) ndarray of float64
        log_norm_n = logsumexp_k W_nk, the optimal per-atom objective (spec 01 Eq. 3.46;
        spec 04 §1.2).
    entropy : (K,) ndarray of float64
        H_k = −Σ_n r_nk ln r_nk (spec 01 Eq. 3.51).
    indices : (N, L) ndarray of int32, optional
        Active clusters of each row for the sparse form; None for dense.
    """

    values: np.ndarray
    log_norm: np.ndarray
    entropy: np.ndarray
    indices: np.ndarray | None = None

    def __post_init__(self):
        N = self.values.shape[0] if self.values.ndim == 2 else -1
        if self.values.ndim != 2 or self.log_norm.shape != (N,) or self.entropy.ndim != 1:
            raise ValueError(
                f"Responsibilities: values {self.values.shape}, log_norm {self.log_norm.shape} and "
                f"entropy {self.entropy.shape} must be (N, K or L), (N,) and (K,)"
            )
        if self.indices is None:
            if self.values.shape[1] != self.K:
                raise ValueError(f"dense values {self.values.shape} do not match K={self.K} of entropy")
        elif self.indices.shape != self.values.shape or self.indices.dtype != np.int32:
            raise ValueError(
                f"sparse indices must be int32 of the values' shape {self.values.shape}, "
                f"got {self.indices.dtype} {self.indices.shape}"
            )

    # --------------------------------------------------------------- constructors
    @classmethod
    def from_weights(cls, log_lik, log_prior, **kernel_kw) -> "Responsibilities":
        """Dense local step from E_q log p(x_n|φ_k) (N, K) and E_q ln π_k (K,).

        r_nk ∝ exp(log_lik_nk + log_prior_k) (spec 01 Eq. 3.47-3.49) via
        :func:`bnpvi.kernels.dense_local_step`. Inputs are converted to C-contiguous
        float64 (no copy when they already are); ``kernel_kw`` (e.g. ``n_threads``)
        is passed through.
        """
        log_lik = np.ascontiguousarray(log_lik, dtype=np.float64)
        log_prior = np.ascontiguousarray(log_prior, dtype=np.float64)
        return cls(*kernels.dense_local_step(log_lik, log_prior, **kernel_kw))

    # ----------------------------------------------------------------- properties
    @property
    def n_atoms(self) -> int:
        """N, the number of atoms (rows)."""
        return self.values.shape[0]

    @property
    def K(self) -> int:
        """Number of clusters."""
        return self.entropy.shape[0]

    @property
    def is_sparse(self) -> bool:
        return self.indices is not None

    # -------------------------------------------------------------------- summaries
    def to_dense(self) -> np.ndarray:
        """(N, K) responsibilities. The dense form returns ``values`` itself (no copy)."""
        if self.indices is None:
            return self.values
        N, L = self.values.shape
        flat = (np.arange(N, dtype=np.int64)[:, None] * self.K + self.indices).ravel()
        return np.bincount(flat, weights=self.values.ravel(), minlength=N * self.K).reshape(N, self.K)

    def counts(self) -> np.ndarray:
        """N_k = Σ_n r_nk, shape (K,)."""
        if self.indices is None:
            return self.values.sum(axis=0)
        return np.bincount(self.indices.ravel(), weights=self.values.ravel(), minlength=self.K)

    def pair_entropy(self, pairs) -> np.ndarray:
        """Merged-column entropies −Σ_n (r_na + r_nb) ln(r_na + r_nb) for (M, 2) pairs.

        Delegates to :func:`bnpvi.kernels.pair_merge_entropy` (spec 01 §5.3, §10.7).
        The sparse form currently goes through ``to_dense``.
        """
        pairs = np.asarray(pairs)
        if pairs.size == 0:
            pairs = np.empty((0, 2), dtype=np.int64)
        elif pairs.dtype.kind in "iu":  # anything else is left for the kernel to reject
            pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        return kernels.pair_merge_entropy(np.ascontiguousarray(self.to_dense()), pairs)
