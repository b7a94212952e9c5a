"""Python face of the compiled mixture kernels (csrc/local_step.pyx): the local step of a mixture, dense and
L-sparse, its entropies, and the pair and feature passes of the merge and Gaussian families.

Every function validates its inputs (dtype float64 / int64, shape, C-contiguity,
finiteness of the result) and raises :class:`KernelInputError` — a ``ValueError``
and a ``BnpviError`` — with a one-line message; it never casts or copies inputs
silently. Outputs are freshly allocated unless ``out=`` arrays are given.

The compiled kernels split the rows into chunks that depend only on N and add
per-chunk partial sums in chunk order, so every result is bit-identical from call
to call and for any ``n_threads`` (see the extension's docstring).
The extension is built by ``pip install .`` (or ``python setup.py build_ext
--inplace`` in a checkout); without it this module does not import.
"""
from __future__ import annotations

import numpy as np

from bnpvi.kernels._checks import KernelInputError, check_array, compiled, row_preview, thread_count
from bnpvi.kernels.blas import blas_single_thread
from bnpvi.kernels.features import n_quad_features

_ext = compiled("_local_step", "kernels")

__all__ = ["dense_local_step", "entropy_of", "mult_reassign_gains", "pair_logdets", "pair_merge_entropy",
           "quad_argmax", "quad_features", "sparse_local_step", "sparse_pair_entropy"]


# --------------------------------------------------------------------------- checks
def _check_out(a, name: str, shape: tuple, inputs: tuple) -> np.ndarray:
    """Validate an ``out=`` array, or allocate one when ``a`` is None."""
    if a is None:
        return np.empty(shape)
    check_array(a, name, len(shape))
    if a.shape != shape:
        raise KernelInputError(f"{name} must have shape {shape}, got {a.shape}")
    if not a.flags.writeable:
        raise KernelInputError(f"{name} is read-only")
    for other in inputs:
        if np.shares_memory(a, other):
            raise KernelInputError(f"{name} overlaps another argument")
    return a


def _same_buffer(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.shape, a.strides, a.__array_interface__["data"][0]) == (b.shape, b.strides,
                                                                      b.__array_interface__["data"][0])


def _split_out(out, n: int) -> tuple:
    if out is None:
        return (None,) * n
    if isinstance(out, np.ndarray) and n == 1:
        return (out,)
    if not isinstance(out, tuple) or len(out) != n:
        raise KernelInputError(f"out must be None or a tuple of {n} arrays (entries may be None)")
    return out


def _check_pairs(pairs, K: int) -> int:
    """Validate (M, 2) int64 column pairs (a, b), 0 ≤ a, b < K, a ≠ b; returns M (which may be 0)."""
    check_array(pairs, "pairs", 2, np.int64)
    if pairs.shape[1] != 2:
        raise KernelInputError(f"pairs must have shape (M, 2), got {pairs.shape}")
    if pairs.shape[0]:
        lo, hi = int(pairs.min()), int(pairs.max())
        if lo < 0 or hi >= K:
            raise KernelInputError(f"pairs hold column indices in [{lo}, {hi}], outside [0, {K - 1}]")
        same = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
        if same.size:
            raise KernelInputError(f"pairs[{same[0]}] merges column {pairs[same[0], 0]} with itself")
    return pairs.shape[0]


def _check_resp(resp) -> np.ndarray:
    check_array(resp, "resp", 2)
    if resp.shape[1] < 1:
        raise KernelInputError(f"resp must have at least one column, got shape {resp.shape}")
    return resp


# -------------------------------------------------------------------------- kernels
def dense_local_step(log_lik: np.ndarray, log_prior: np.ndarray, *, out=None, n_threads=None, weights=None):
    """Dense local step of a mixture: responsibilities, log normalisers, entropies.

    With W_nk = log_lik_nk + log_prior_k (Hughes 2016 thesis Eq. 3.47) and
    m_n = max_k W_nk:

    * log_norm_n = logsumexp_k W_nk = m_n + log1p(Σ_{k≠argmax} exp(W_nk − m_n));
    * resp_nk = exp(W_nk − log_norm_n), rows summing to 1 (Eq. 3.49);
    * entropy_k = Σ_n resp_nk (log_norm_n − W_nk) = −Σ_n r_nk ln r_nk (Eq. 3.51),
      exact and free of ln 0; a cell with resp 0 (e.g. log_prior_k = −inf) adds 0.

    Parameters
    ----------
    log_lik : (N, K) ndarray of float64, C-contiguous
        E_q log p(x_n | φ_k). May contain −inf.
    log_prior : (K,) ndarray of float64, C-contiguous
        E_q ln π_k. −inf marks a cluster with zero weight (its resp is exactly 0).
    out : tuple (resp, log_norm, entropy), optional
        Preallocated outputs of shapes (N, K), (N,), (K,); any entry may be None.
        ``resp`` may be ``log_lik`` itself (computed in place); no other overlap.
    n_threads : int, optional
        OpenMP threads; default all available for large inputs, 1 for small ones.
        Results do not depend on it.
    weights : (N,) ndarray of float64, C-contiguous, optional
        Atom weights w_n: ``entropy`` is then −Σ_n w_n r_nk ln r_nk (the responsibilities and
        log normalisers do not depend on them).

    Returns
    -------
    resp : (N, K) ndarray
    log_norm : (N,) ndarray
    entropy : (K,) ndarray

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, K = 0, or a row of W with a NaN, a +inf, or no
        finite entry.
    """
    check_array(log_lik, "log_lik", 2)
    check_array(log_prior, "log_prior", 1)
    N, K = log_lik.shape
    if K < 1:
        raise KernelInputError(f"log_lik must have at least one column, got shape {log_lik.shape}")
    if log_prior.shape != (K,):
        raise KernelInputError(f"log_prior must have shape ({K},) to match log_lik {log_lik.shape}, "
                               f"got {log_prior.shape}")
    o_resp, o_norm, o_ent = _split_out(out, 3)
    resp = _check_out(o_resp, "out[0] (resp)", (N, K), (log_prior,))
    if o_resp is not None and np.shares_memory(resp, log_lik) and not _same_buffer(resp, log_lik):
        raise KernelInputError("out[0] (resp) overlaps log_lik without being the same array")
    log_norm = _check_out(o_norm, "out[1] (log_norm)", (N,), (log_lik, log_prior, resp))
    entropy = _check_out(o_ent, "out[2] (entropy)", (K,), (log_lik, log_prior, resp, log_norm))

    if weights is not None:
        check_array(weights, "weights", 1)
        if weights.shape != (N,):
            raise KernelInputError(f"weights must have shape ({N},) to match log_lik {log_lik.shape}, "
                                   f"got {weights.shape}")
    nt = thread_count(n_threads, N * K)
    bad = _ext.dense_local_step(log_lik, log_prior, resp, log_norm, entropy, nt, weights)
    if bad >= 0:
        raise KernelInputError(_bad_weight_row(log_lik, log_prior, bad, in_place=resp is log_lik))
    return resp, log_norm, entropy


def entropy_of(resp: np.ndarray, *, out=None, n_threads=None) -> np.ndarray:
    """Entropy summaries H_k = −Σ_n r_nk ln r_nk with 0 ln 0 := 0 (Hughes 2016 thesis Eq. 3.51).

    For responsibilities that did not come from :func:`dense_local_step`
    (constructed merge / birth / delete proposals).

    Parameters
    ----------
    resp : (N, K) ndarray of float64, C-contiguous
        Non-negative, finite entries (exact zeros allowed).
    out : (K,) ndarray, optional
    n_threads : int, optional
        See :func:`dense_local_step`.

    Returns
    -------
    entropy : (K,) ndarray

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, or a negative, NaN or infinite entry.
    """
    _check_resp(resp)
    N, K = resp.shape
    (o_ent,) = _split_out(out, 1)
    entropy = _check_out(o_ent, "out", (K,), (resp,))
    nt = thread_count(n_threads, N * K)
    bad = _ext.entropy_of(resp, entropy, nt)
    if bad >= 0:
        raise KernelInputError(f"resp row {bad} has a negative, NaN or infinite entry: {row_preview(resp[bad])}")
    return entropy


def mult_reassign_gains(X, resp: np.ndarray, lam: np.ndarray, total: np.ndarray, lam0: float, prior_total: float,
                        *, n_threads=None) -> np.ndarray:
    """(N, K) change of Σ_k L_data,k* of a Dirichlet-multinomial mixture when document n's responsibilities
    become a one-hot on cluster j, for every n and j (the reassign move's gains, ``Mult.reassign_gains``;
    NumPy reference ``bnpvi.kernels.reference.mult_reassign_gains``).

    Parameters
    ----------
    X : (N, V) scipy CSR matrix of non-negative float64 counts
    resp : (N, K) ndarray of float64, C-contiguous
        The documents' responsibilities r_n (included in ``lam``).
    lam : (K, V) ndarray of float64, any layout
        λ_kv = λ̄ + S_kv, the clusters' posterior pseudo-counts (V: the columns ``X`` uses; a caller may
        pass the words of its documents only, renumbered).
    total : (K,) ndarray of float64
        Σ_v λ_kv over the whole vocabulary.
    lam0, prior_total : float
        λ̄ and Vλ̄: the floors of λ and of Σ_v λ_kv once a document is taken out.
    n_threads : int, optional
        See :func:`dense_local_step`.
    """
    _check_resp(resp)
    if not isinstance(lam, np.ndarray) or lam.dtype != np.float64 or lam.ndim != 2:
        raise KernelInputError("lam must be a 2-D float64 numpy.ndarray (any layout: it is read by word)")
    N, K = resp.shape
    if X.shape[0] != N or lam.shape != (K, X.shape[1]) or np.shape(total) != (K,):
        raise KernelInputError(f"X {X.shape}, resp {resp.shape}, lam {lam.shape} and total {np.shape(total)} "
                               "do not fit together")
    out = np.empty((N, K))
    nt = thread_count(n_threads, X.nnz * K)
    _ext.mult_reassign_gains(X.indptr.astype(np.int64), X.indices.astype(np.int64),
                             np.ascontiguousarray(X.data, dtype=np.float64), resp, np.ascontiguousarray(lam.T),
                             np.ascontiguousarray(total, dtype=np.float64), float(lam0), float(prior_total), out, nt)
    return out


def pair_merge_entropy(resp: np.ndarray, pairs: np.ndarray, *, out=None, n_threads=None) -> np.ndarray:
    """Entropy of merged column pairs: H_m = −Σ_n s ln s, s = r_na + r_nb (Hughes 2016 thesis §4.1.3).

    Parameters
    ----------
    resp : (N, K) ndarray of float64, C-contiguous
        Non-negative, finite entries.
    pairs : (M, 2) ndarray of int64, C-contiguous
        Column pairs (a, b) with 0 ≤ a, b < K and a ≠ b. M may be 0.
    out : (M,) ndarray, optional
    n_threads : int, optional
        See :func:`dense_local_step`.

    Returns
    -------
    entropy : (M,) ndarray
        The entropy summary the merged cluster would have (never H_a + H_b, which is
        only an upper bound).

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, a column index out of range, a == b, or a
        negative, NaN or infinite entry in a paired column.
    """
    _check_resp(resp)
    N, K = resp.shape
    M = _check_pairs(pairs, K)
    (o_ent,) = _split_out(out, 1)
    entropy = _check_out(o_ent, "out", (M,), (resp, pairs))
    nt = thread_count(n_threads, N * max(M, 1) * 2)
    bad = _ext.pair_merge_entropy(resp, pairs, entropy, nt)
    if bad >= 0:
        raise KernelInputError(
            f"resp row {bad} has a negative, NaN or infinite entry in a paired column: {row_preview(resp[bad])}"
        )
    return entropy


def sparse_local_step(log_lik: np.ndarray, log_prior: np.ndarray, L: int, *, n_threads=None):
    """L-sparse local step of a mixture: the L largest weights of each row, their softmax, entropies.

    The optimal q(z_n) with at most L nonzero responsibilities (Hughes 2016 thesis
    Eq. 7.4-7.5, Alg. 7.2; Hughes & Sudderth 2016, fast and accurate local steps, §3):
    with W_nk = log_lik_nk + log_prior_k, A_n = the L largest W_nk (ties: lower k),
    r_nk = exp(W_nk) / Σ_{j∈A_n} exp(W_nj) on A_n and 0 elsewhere. Selection is one
    O(K) pass per row; only L exponentials are taken.

    Parameters
    ----------
    log_lik : (N, K) ndarray of float64, C-contiguous
        E_q log p(x_n | φ_k). May contain −inf.
    log_prior : (K,) ndarray of float64, C-contiguous
        E_q ln π_k; −inf marks a cluster with zero weight (selected only when fewer than
        L weights are finite, then with responsibility exactly 0).
    L : int
        1 ≤ L ≤ K.
    n_threads : int, optional
        See :func:`dense_local_step`. Results do not depend on it.

    Returns
    -------
    values : (N, L) ndarray
        r_nk of each row's clusters, in descending order of W_nk; rows sum to 1.
    indices : (N, L) ndarray of int32
        The clusters, distinct within a row.
    log_norm : (N,) ndarray
        log Σ_{k∈A_n} exp W_nk: the optimal per-atom objective, ≤ the dense one.
    entropy : (K,) ndarray
        H_k = −Σ_n r_nk ln r_nk.

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, L outside [1, K], or a row of W with a NaN, a +inf,
        or no finite entry.
    """
    check_array(log_lik, "log_lik", 2)
    check_array(log_prior, "log_prior", 1)
    N, K = log_lik.shape
    if log_prior.shape != (K,):
        raise KernelInputError(f"log_prior must have shape ({K},) to match log_lik {log_lik.shape}, "
                               f"got {log_prior.shape}")
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or not 1 <= L <= K:
        raise KernelInputError(f"L must be an int in [1, K = {K}], got {L!r}")
    L = int(L)
    values, indices = np.empty((N, L)), np.empty((N, L), dtype=np.int32)
    log_norm, entropy = np.empty(N), np.empty(K)
    bad = _ext.sparse_local_step(log_lik, log_prior, values, indices, log_norm, entropy,
                                 thread_count(n_threads, N * K))
    if bad >= 0:
        raise KernelInputError(_bad_weight_row(log_lik, log_prior, bad, in_place=False))
    return values, indices, log_norm, entropy


def sparse_pair_entropy(values: np.ndarray, indices: np.ndarray, entropy: np.ndarray, pairs: np.ndarray, *,
                        n_threads=None) -> np.ndarray:
    """Merged-pair entropies −Σ_n s ln s, s = r_na + r_nb, of L-sparse responsibilities.

    Only the rows that store both a and b differ from H_a + H_b (Hughes 2016 thesis
    §4.1.3), so one O(N L²) pass serves every pair: H_ab = H_a + H_b − Σ_{both}
    [s ln s − r_a ln r_a − r_b ln r_b].

    Parameters
    ----------
    values : (N, L) ndarray of float64, C-contiguous
        Non-negative stored responsibilities (0 for padding).
    indices : (N, L) ndarray of int32, C-contiguous
        Their clusters, in [0, K).
    entropy : (K,) ndarray of float64
        H_k of the same responsibilities.
    pairs : (M, 2) ndarray of int64, C-contiguous
        Pairs (a, b), a ≠ b (M may be 0; a pair may repeat).
    n_threads : int, optional
        See :func:`dense_local_step`.

    Returns
    -------
    entropy : (M,) ndarray

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, an index or pair out of range, a == b, or a negative,
        NaN or infinite value.
    """
    check_array(values, "values", 2)
    check_array(indices, "indices", 2, np.int32)
    check_array(entropy, "entropy", 1)
    K = entropy.shape[0]
    _check_pairs(pairs, K)
    if indices.shape != values.shape:
        raise KernelInputError(f"indices must have the shape of values {values.shape}, got {indices.shape}")
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= K):
        raise KernelInputError(f"indices hold clusters in [{int(indices.min())}, {int(indices.max())}], "
                               f"outside [0, {K - 1}]")
    pair_of = np.full((K, K), -1, dtype=np.int32)
    unique, which = np.unique(np.sort(pairs, axis=1), axis=0, return_inverse=True)  # a pair given twice
    pair_of[unique[:, 0], unique[:, 1]] = pair_of[unique[:, 1], unique[:, 0]] = np.arange(len(unique),
                                                                                          dtype=np.int32)
    change = np.empty(len(unique))
    bad = _ext.sparse_pair_entropy_change(values, indices, pair_of, change, thread_count(n_threads, values.size * 2))
    if bad >= 0:
        raise KernelInputError(f"values row {bad} has a negative, NaN or infinite entry: {row_preview(values[bad])}")
    return entropy[pairs[:, 0]] + entropy[pairs[:, 1]] - change[which.ravel()]


def pair_logdets(base: np.ndarray, X: np.ndarray, pairs: np.ndarray, Y: np.ndarray | None = None,
                 s: np.ndarray | None = None, *, n_threads=None) -> np.ndarray:
    """ln|M_p| of the merged scale matrices of cluster pairs, without forming them all:
    M_p = sym(base + (X_a + X_b) − u_p u_pᵀ/s_p), u_p = Y_a + Y_b, (a, b) = pairs[p], sym(W) = (W + Wᵀ)/2.

    A Wishart family's merged posterior scale B̂ (zero-mean: base B̄, X the scatters Sxx; with a mean:
    X the relative scatters, Y the relative sums Sx and s_p = κ̂ of the merged pair), as the merge m-scores
    of all K(K−1)/2 pairs need it (Hughes 2016 thesis Eq. 4.6). One LAPACK Cholesky per pair in a
    thread's scratch, pairs in parallel; each pair's result does not depend on the thread count.

    Parameters
    ----------
    base : (D, D) ndarray of float64, C-contiguous, symmetric
    X : (K, D, D) ndarray of float64, C-contiguous, symmetric slices
    pairs : (P, 2) int64 cluster indices
    Y : (K, D) ndarray of float64, optional (with ``s``)
    s : (P,) ndarray of float64, positive, optional

    Returns
    -------
    (P,) ndarray: ln|M_p|, NaN where M_p is not numerically positive definite (the caller decides).
    """
    check_array(base, "base", 2)
    check_array(X, "X", 3)
    D = base.shape[0]
    if base.shape != (D, D) or X.shape[1:] != (D, D):
        raise KernelInputError(f"base must be (D, D) and X (K, D, D) with the same D, got {base.shape} and {X.shape}")
    M = _check_pairs(pairs, X.shape[0])
    if (Y is None) != (s is None):
        raise KernelInputError("Y and s come together (the rank-one term), or neither")
    if Y is None:
        Y, s = np.zeros((X.shape[0], 0)), np.zeros(M)
    else:
        check_array(Y, "Y", 2)
        check_array(s, "s", 1)
        if Y.shape != (X.shape[0], D) or s.shape != (M,):
            raise KernelInputError(f"Y must be ({X.shape[0]}, {D}) and s ({M},), got {Y.shape} and {s.shape}")
        if not np.all(s > 0):
            raise KernelInputError("s must be positive")
    out = np.empty(M)
    nt = min(thread_count(n_threads, M * D * D), max(M, 1))
    with blas_single_thread():
        _ext.pair_logdets(base, X, pairs, Y, s, out, np.empty((nt, 2 * D * D + D)), nt)
    return out


def quad_features(Y: np.ndarray, linear: bool = True, *, out=None, n_threads=None) -> np.ndarray:
    """(N, F) quadratic features f(y_n) = [y_d y_e for d ≤ e (row-major upper triangle), y_d (when ``linear``)]
    of the rows of Y, F = D(D+1)/2 (+ D): f(y)·w is a quadratic form of y (:mod:`bnpvi.kernels.features`).

    Each row is written as one contiguous run (the NumPy reference writes D column slices, 4-8 times
    slower); rows in parallel for large inputs. Elementwise, so the result does not depend on ``n_threads``.

    Parameters
    ----------
    Y : (N, D) ndarray of float64, C-contiguous
    linear : bool
        Append the D coordinates.
    out : (N, F) ndarray of float64, optional
    n_threads : int, optional
        OpenMP threads; default all available for large inputs, 1 for small ones.
    """
    check_array(Y, "Y", 2)
    N, D = Y.shape
    F = n_quad_features(D, linear)
    out = _check_out(out, "out", (N, F), (Y,))
    _ext.quad_features(Y, out, bool(linear), thread_count(n_threads, N * F))
    return out


def quad_argmax(X: np.ndarray, weights: np.ndarray, const: np.ndarray, shift: np.ndarray | None = None, *,
                n_threads=None) -> tuple[np.ndarray, int]:
    """argmax_k f(y_n)·W_k + c_k at y_n = x_n − shift for every row, over the quadratic features f of
    :func:`quad_features`, without forming the (N, K) scores.

    The most responsible cluster of a Gaussian mixture (``bnpvi.obs.gauss.Gauss.argmax_clusters``). Blocks of
    rows go through a float32 product; a row whose float32 margin is within the product's worst-case
    error is scored again in float64, so the labels are those of the float64 scores (ties to the first).

    Parameters
    ----------
    X : (N, D) ndarray of float64, C-contiguous (a row with a NaN or an infinity is an error)
    weights : (F, K) ndarray of float64, C-contiguous: F = D(D+1)/2 (products only) or D(D+1)/2 + D
    const : (K,) ndarray of float64
    shift : (D,) ndarray of float64, optional
        Subtracted from every row first (a data mean: the features of centred rows lose less to rounding);
        default 0.
    n_threads : int, optional
        OpenMP threads (results do not depend on it).

    Returns
    -------
    labels : (N,) int64 ndarray
    n_exact : int
        Rows scored again in float64.
    """
    check_array(X, "X", 2)
    check_array(weights, "weights", 2)
    check_array(const, "const", 1)
    N, D = X.shape
    shift = np.zeros(D) if shift is None else check_array(shift, "shift", 1)
    if shift.shape != (D,) or not np.all(np.isfinite(shift)):
        raise KernelInputError(f"shift must be a finite ({D},) array, got shape {shift.shape}")
    F, K = weights.shape
    if K < 1 or F not in (n_quad_features(D, False), n_quad_features(D)):
        raise KernelInputError(f"weights must have shape ({n_quad_features(D, False)} or {n_quad_features(D)}, K >= 1) "
                               f"for D = {D}, got {weights.shape}")
    if const.shape != (K,):
        raise KernelInputError(f"const must have shape ({K},) to match weights {weights.shape}, got {const.shape}")
    if not (np.all(np.isfinite(weights)) and np.all(np.isfinite(const))):
        raise KernelInputError("weights and const must be finite")
    block = _ext.feature_block()
    labels = np.empty(N, dtype=np.int64)
    n_exact = np.zeros(-(-N // block), dtype=np.intp)
    nt = min(thread_count(n_threads, N * K), len(n_exact) or 1)  # no more threads than blocks
    with blas_single_thread():
        _ext.quad_argmax(X, shift, weights, weights.astype(np.float32), const, float(np.linalg.norm(weights, axis=0).max()),
                         labels, np.empty((nt, block * F), dtype=np.float32), np.empty((nt, block * K), dtype=np.float32),
                         np.empty((nt, block + D + K)), n_exact, nt)
    bad = np.flatnonzero(labels < 0)
    if bad.size:
        raise KernelInputError(f"X row {bad[0]} has a NaN or an infinity: {row_preview(X[bad[0]])}")
    return labels, int(n_exact.sum())


# ---------------------------------------------------------------------- messages
def _bad_weight_row(log_lik, log_prior, n: int, in_place: bool) -> str:
    if in_place:
        return (f"row {n} of the weights W = log_lik + log_prior has a NaN, a +inf, or no finite entry "
                "(log_lik was overwritten in place)")
    with np.errstate(invalid="ignore"):
        w = log_lik[n] + log_prior
    if np.isnan(w).any():
        why = f"NaN at column {int(np.flatnonzero(np.isnan(w))[0])}"
    elif np.isposinf(w).any():
        why = f"+inf at column {int(np.flatnonzero(np.isposinf(w))[0])}"
    else:
        why = "no finite entry (every cluster has weight −inf)"
    return f"row {n} of the weights W = log_lik + log_prior has {why}"
