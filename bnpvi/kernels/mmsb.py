"""The local step of the assortative MMSB: Python face of the compiled pair kernel (``csrc/mmsb.pyx``).

For every ordered pair (i, j) of a batch's source nodes i and all nodes j ≠ i (held-out pairs
left out), the optimal joint q(s_ij, r_ij) over K × K labels keeps only its K diagonal entries
η_ijkk and its normaliser Z_ij (Stephenson 2015 Eq. 27, App. C Eq. 49-50); the kernel adds up
what the model needs from them, O(K) per pair and nothing stored per pair:

    U_ik = Σ_j E[s_ij = k] + Σ_j E[r_ji = k]   (the batch's share of node i's usage, every node),
    S_xk = Σ_{pairs with x_ij = x} η_ijkk,     E_x = Σ_{pairs with x_ij = x} (1 − Σ_k η_ijkk),
    Σ ln Z_ij.

The NumPy reference that enumerates the K × K labels is :mod:`bnpvi.kernels.mmsb_reference`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnpvi.kernels import _mmsb
from bnpvi.kernels._checks import thread_count

CHUNKS = 16
"""The nodes j (receivers) are cut into at most this many fixed chunks, worked on in parallel; a chunk's rows of
U are its own, and its sender sums are added up in chunk order (results do not depend on the thread count)."""

DIGAMMA_WORK = 16
"""A digamma counted as this many multiply-adds when deciding whether threads pay (``thread_count``)."""

CHUNK_NODES = 16
"""No chunk holds fewer nodes than this (but one), so small graphs take fewer chunks."""


@dataclass(frozen=True)
class PairSums:
    """Sums of a batch's local step (module docstring): U (N, K), S (2, K), E (2,), log_z."""

    U: np.ndarray
    S: np.ndarray
    E: np.ndarray
    log_z: float


def edge_factors(E_log_phi: np.ndarray, E_log_1mphi: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """f (2, K) with f[x, k] = f_k(x) = exp(x E ln φ_k + (1 − x) E ln(1 − φ_k)), and f_ε (2,) = (1 − ε, ε)."""
    f = np.exp(np.vstack([E_log_1mphi, E_log_phi]))
    return np.ascontiguousarray(f, dtype=np.float64), np.array([1.0 - epsilon, epsilon])


def expected_log_memberships(theta: np.ndarray, n_out: int | None = None, n_threads=None) -> np.ndarray:
    """P (N, n_out): P_im = E ln π_im = ψ(θ_im) − ψ(Σ_m θ_im) for Dirichlet rows θ_i (N, M) (Stephenson 2015
    Eq. 27's E ln π), normalised over all M entries and kept for the first ``n_out`` (None: all), rows on
    ``n_threads`` threads (None: all, for large arrays); equal to :func:`bnpvi.alloc.hmm.expected_log_probs`,
    its NumPy reference, to rounding."""
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.ndim != 2:
        raise ValueError(f"theta must be 2-D, got shape {theta.shape}")
    n_out = theta.shape[1] if n_out is None else int(n_out)
    if not 0 <= n_out <= theta.shape[1]:
        raise ValueError(f"n_out={n_out} outside 0..{theta.shape[1]}")
    out = np.empty((theta.shape[0], n_out))
    _mmsb.expected_log_memberships(theta, out, thread_count(n_threads, DIGAMMA_WORK * theta.size))
    return out


def n_chunks(N: int) -> int:
    """The fixed number of receiver chunks of a graph of N nodes."""
    return max(1, min(CHUNKS, N // CHUNK_NODES))


def pair_step(P: np.ndarray, E_log_phi: np.ndarray, E_log_1mphi: np.ndarray, epsilon: float, batch,
              n_threads=None) -> PairSums:
    """The summed local step of ``batch`` (a ``GraphBatch``) given P_ik = E ln π_ik (N, K; the K active
    communities, normalised over K + 1 entries), E ln φ_k, E ln(1 − φ_k) (K,) and ε; on ``n_threads``
    threads (None: all, for large batches)."""
    P = np.asarray(P, dtype=np.float64)
    N, K = P.shape
    if batch.n_nodes != N:
        raise ValueError(f"P has {N} rows but the graph has {batch.n_nodes} nodes")
    f, f_eps = edge_factors(E_log_phi, E_log_1mphi, epsilon)
    U = np.zeros((N, K))
    S = np.zeros((2, K))
    E = np.zeros(2)
    log_z = _mmsb.pair_step(np.ascontiguousarray(P), f, f_eps, int(batch.first),
                            np.ascontiguousarray(batch.indptr, dtype=np.int64),
                            np.ascontiguousarray(batch.indices, dtype=np.int32),
                            np.ascontiguousarray(batch.held_indptr, dtype=np.int64),
                            np.ascontiguousarray(batch.held_indices, dtype=np.int32), U, S, E,
                            n_chunks(N), thread_count(n_threads, batch.n_src * N * K))
    return PairSums(U, S, E, float(log_z))
