"""NumPy references of the compiled local-step kernels (DESIGN.md "Kernels").

Plain vectorised NumPy with the same formulas as ``csrc/local_step.pyx``; the
tests compare the compiled kernels against these, and ``bnpvi.kernels`` falls
back to them when the extension is not built. No input validation here (that is
the job of ``bnpvi.kernels``); invalid rows come out with a non-finite
``log_norm`` / entropy instead of raising.
"""
from __future__ import annotations

import numpy as np

__all__ = ["dense_local_step", "entropy_of", "pair_merge_entropy"]


def dense_local_step(log_lik: np.ndarray, log_prior: np.ndarray):
    """Dense local step: softmax responsibilities, log normalisers, entropy summaries.

    With the weights W_nk = log_lik_nk + log_prior_k (spec 01 Eq. 3.47):

    * log_norm_n = logsumexp_k W_nk, computed as m_n + log1p(Σ_{k≠j_n} exp(W_nk − m_n))
      with m_n = max_k W_nk attained first at j_n (spec 01 §10.1);
    * resp_nk = exp(W_nk − m_n) · (1 + Σ_{k≠j_n} exp(W_nk − m_n))⁻¹ (spec 01 Eq. 3.49);
    * entropy_k = Σ_n resp_nk (log_norm_n − W_nk) = −Σ_n r_nk ln r_nk (spec 01 §3.5,
      Eq. 3.51), evaluated as r_nk (log1p(·) − (W_nk − m_n)) and skipped where r_nk = 0,
      so W_nk = −inf contributes exactly 0.

    Parameters
    ----------
    log_lik : (N, K) ndarray of float64
        E_q log p(x_n | φ_k).
    log_prior : (K,) ndarray of float64
        E_q ln π_k; −inf marks a cluster with zero weight.

    Returns
    -------
    resp : (N, K) ndarray
    log_norm : (N,) ndarray
    entropy : (K,) ndarray
    """
    N, K = log_lik.shape
    rows = np.arange(N)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        W = log_lik + log_prior
        j = np.argmax(W, axis=1) if K else np.zeros(N, dtype=np.intp)
        m = W[rows, j]
        t = W - m[:, None]
        t[rows, j] = 0.0
        e = np.exp(t)
        e[rows, j] = 0.0
        s1 = e.sum(axis=1)
        e[rows, j] = 1.0
        ls = np.log1p(s1)
        log_norm = m + ls
        resp = e * (1.0 / (1.0 + s1))[:, None]
        contrib = np.zeros_like(resp)
        np.multiply(resp, ls[:, None] - t, out=contrib, where=resp > 0.0)
        entropy = contrib.sum(axis=0)
    return resp, log_norm, entropy


def entropy_of(resp: np.ndarray) -> np.ndarray:
    """H_k = −Σ_n r_nk ln r_nk with 0 ln 0 := 0 (spec 01 Eq. 3.51, §10.2).

    Parameters
    ----------
    resp : (N, K) ndarray of float64
        Non-negative responsibilities of any origin (e.g. a constructed proposal).

    Returns
    -------
    entropy : (K,) ndarray
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        rlogr = np.zeros_like(resp)
        np.multiply(resp, np.log(resp), out=rlogr, where=resp != 0.0)
        return 0.0 - rlogr.sum(axis=0)


def pair_merge_entropy(resp: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Entropy of merged columns: H_m = −Σ_n s_nm ln s_nm, s_nm = r_na + r_nb.

    For pairs[m] = (a, b); the merged-cluster entropy of a merge proposal
    (spec 01 §5.3, §10.7), with 0 ln 0 := 0.

    Parameters
    ----------
    resp : (N, K) ndarray of float64
    pairs : (M, 2) ndarray of int64

    Returns
    -------
    entropy : (M,) ndarray
    """
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    s = resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]]
    return entropy_of(s)
