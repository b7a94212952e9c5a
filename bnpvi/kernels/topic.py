"""Python face of the compiled topic-model local step (csrc/topic_dense.pyx, csrc/topic_sparse.pyx).

:func:`doc_topic_step` is the document-level local step of the HDP topic model and of
LDA (Hughes 2016 thesis, Alg. 5.1 / Eq. 5.44-5.46), with the sparse restarts of
Hughes, Kim & Sudderth 2015 (AISTATS), sparse restarts. It validates its inputs
(dtype, shape, C-contiguity, finiteness, positive counts and priors, ``doc_range``)
and raises :class:`KernelInputError` with a one-line message; it never casts or
copies inputs silently.

It can also read C as a (V, K) table indexed by ``word_ids`` instead of a dense
(nnz, K) matrix, and return the batch's summaries (topic entropies, word-topic counts,
merged-pair entropies) without ever holding the (nnz, K) responsibilities
(``keep_resp=False``): its scratch is then that of a block of documents.

With ``sparse_L`` = L it runs the L-sparse mode instead (Hughes 2016 thesis §7.3, Alg. 7.4;
Hughes & Sudderth 2016, fast and accurate local steps (sparse), §5): at most L topics per row,
an active set of topics per document pruned at ``active_eps``, same outputs.

Documents are independent and each is done start to finish by one thread; sums over
documents are added in document order. So every result is bit-identical from call to
call and for any ``n_threads``. A NumPy reference with the same equations lives in
:mod:`bnpvi.kernels.reference`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bnpvi.kernels._checks import KernelInputError, check_array, compiled, row_preview, thread_count

_dense = compiled("_topic_dense", "topic-model kernels")
_sparse = compiled("_topic_sparse", "topic-model kernels")

__all__ = ["DocTopicResult", "doc_topic_step"]

INT_MAX = 2**31 - 1

RESTART_MIN_GAIN = 1e-12
"""A restart is accepted when L_d grows by more than this times 1 + |L_d| (csrc/topic_common.pxd)."""


@dataclass(frozen=True)
class DocTopicResult:
    """Local parameters of a batch of documents (see :func:`doc_topic_step`).

    Attributes
    ----------
    resp : (nnz, K) ndarray, or None
        r_uk, the responsibilities of the (document, word type) rows; rows sum to 1.
        None when called with ``keep_resp=False``.
    doc_counts : (D, K) ndarray
        N_dk = Σ_u c_u r_uk over the rows of document d (0 for a document without rows).
    iters : (D,) ndarray of int64
        Coordinate-ascent iterations each document used (restarts not counted).
    objective : (D,) ndarray
        The collapsed per-document objective L_d of the returned state.
    restarts_accepted : (D,) ndarray of int64
        Sparse restart proposals accepted per document.
    entropy : (K,) ndarray
        H_k = −Σ_u c_u r_uk ln r_uk over all rows (0 ln 0 = 0): the batch's entropy
        summary of topic k (Hughes 2016 thesis Eq. 5.47).
    word_topic : (V, K) ndarray, or None
        Σ_u c_u r_uk over the rows u with word_ids[u] = v, at row v: the batch's
        word-topic counts. None without ``word_ids``.
    pair_entropy : (M,) ndarray, or None
        −Σ_u c_u t_u ln t_u with t_u = r_ua + r_ub for pairs[m] = (a, b): the entropy
        summary of topic a and b merged (Hughes, Kim & Sudderth 2015 §5.1). None without
        ``pairs``.
    """

    resp: np.ndarray | None
    doc_counts: np.ndarray
    iters: np.ndarray
    objective: np.ndarray
    restarts_accepted: np.ndarray
    entropy: np.ndarray
    word_topic: np.ndarray | None
    pair_entropy: np.ndarray | None


# --------------------------------------------------------------------------- checks
def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not minimum <= value <= INT_MAX:
        raise KernelInputError(f"{name} must be an int in [{minimum}, {INT_MAX}], got {value!r}")
    return int(value)


def _check_real(value, name: str, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or value < minimum:
        raise KernelInputError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")
    return float(value)


def _first_bad(a: np.ndarray, bad: np.ndarray):
    """Index (int, or tuple of ints) of the first True entry of ``bad``, and what ``a`` holds there."""
    at = np.unravel_index(int(np.flatnonzero(bad)[0]), a.shape)
    where = int(at[0]) if a.ndim == 1 else tuple(int(i) for i in at)
    x = a[at]
    what = "a NaN" if np.isnan(x) else ("+inf" if x > 0 else ("-inf" if np.isinf(x) else repr(float(x))))
    return where, what


def _check_inputs(log_lik, counts, doc_range, prior, prior_rest, init_counts,
                  word_ids) -> tuple[int, int, int, float]:
    check_array(log_lik, "log_lik", 2)
    check_array(counts, "counts", 1)
    check_array(doc_range, "doc_range", 1, np.int64)
    check_array(prior, "prior", 1)
    rows, K = log_lik.shape
    if K < 1:
        raise KernelInputError(f"log_lik must have at least one column (topic), got shape {log_lik.shape}")
    if word_ids is None:
        nnz, what = rows, "the rows of log_lik"
        if counts.shape != (nnz,):
            raise KernelInputError(f"counts must have shape ({nnz},) to match log_lik {log_lik.shape}, "
                                   f"got {counts.shape}")
    else:
        check_array(word_ids, "word_ids", 1, np.int64)
        nnz, what = counts.shape[0], "the entries of counts and word_ids"
        if word_ids.shape != (nnz,):
            raise KernelInputError(f"word_ids must have shape ({nnz},) to match counts {counts.shape}, "
                                   f"got {word_ids.shape}")
        bad = (word_ids < 0) | (word_ids >= rows)
        if bad.any():
            u = int(np.flatnonzero(bad)[0])
            raise KernelInputError(f"word_ids[{u}] = {int(word_ids[u])} is out of range: log_lik is a table of "
                                   f"{rows} word types, so 0 <= word_ids < {rows}")
    if prior.shape != (K,):
        raise KernelInputError(f"prior must have shape ({K},) to match log_lik {log_lik.shape}, got {prior.shape}")
    if doc_range.shape[0] < 1:
        raise KernelInputError("doc_range must hold D + 1 document boundaries, got an empty array")
    if doc_range[0] != 0:
        raise KernelInputError(f"doc_range[0] must be 0, got {int(doc_range[0])}")
    if doc_range[-1] != nnz:
        raise KernelInputError(f"doc_range[-1] must be nnz = {nnz} ({what}), got {int(doc_range[-1])}")
    step = np.diff(doc_range)
    if step.size and step.min() < 0:
        s = int(np.flatnonzero(step < 0)[0])
        raise KernelInputError(f"doc_range must not decrease: doc_range[{s}] = {int(doc_range[s])}, "
                               f"doc_range[{s + 1}] = {int(doc_range[s + 1])}")
    bad = ~np.isfinite(log_lik)
    if bad.any():
        (u, k), what = _first_bad(log_lik, bad)
        raise KernelInputError(f"log_lik has {what} at ({u}, {k}) (row {u}: {row_preview(log_lik[u])}); "
                               "every entry must be finite")
    bad = ~(counts > 0.0) | ~np.isfinite(counts)
    if bad.any():
        u, what = _first_bad(counts, bad)
        raise KernelInputError(f"counts[{u}] must be a finite number > 0 (tokens of the row's word type), got {what}")
    bad = ~(prior > 0.0) | ~np.isfinite(prior)
    if bad.any():
        k, what = _first_bad(prior, bad)
        raise KernelInputError(f"prior[{k}] must be a finite number > 0 (alpha * beta_k), got {what}")
    rest = _check_real(prior_rest, "prior_rest", 0.0)
    D = doc_range.shape[0] - 1
    if init_counts is not None:
        check_array(init_counts, "init_counts", 2)
        if init_counts.shape != (D, K):
            raise KernelInputError(f"init_counts must have shape ({D}, {K}) (documents, topics), "
                                   f"got {init_counts.shape}")
        bad = ~(init_counts >= 0.0) | ~np.isfinite(init_counts)
        if bad.any():
            at, what = _first_bad(init_counts, bad)
            raise KernelInputError(f"init_counts must be finite and >= 0, got {what} at {at}")
    return nnz, K, D, rest


def _check_pairs(pairs, K: int) -> np.ndarray:
    """pairs as given (validated), or an empty (0, 2) array for None."""
    if pairs is None:
        return np.empty((0, 2), dtype=np.int64)
    check_array(pairs, "pairs", 2, np.int64)
    if pairs.shape[1] != 2:
        raise KernelInputError(f"pairs must have shape (M, 2) (pairs of topics), got {pairs.shape}")
    bad = (pairs < 0) | (pairs >= K)
    if bad.any():
        j, i = np.unravel_index(int(np.flatnonzero(bad)[0]), pairs.shape)
        raise KernelInputError(f"pairs[{j}, {i}] = {int(pairs[j, i])} is out of range: topics are 0 .. {K - 1}")
    same = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
    if same.size:
        j = int(same[0])
        raise KernelInputError(f"pairs[{j}] = ({int(pairs[j, 0])}, {int(pairs[j, 1])}) pairs topic "
                               f"{int(pairs[j, 0])} with itself; a merge needs two different topics")
    return pairs


# -------------------------------------------------------------------------- kernel
def doc_topic_step(log_lik: np.ndarray, counts: np.ndarray, doc_range: np.ndarray, prior: np.ndarray,
                   prior_rest: float, *, init_counts: np.ndarray | None = None, max_iters: int = 100,
                   conv_thr: float = 0.05, n_restarts: int = 0, restart_iters: int = 2,
                   word_ids: np.ndarray | None = None, keep_resp: bool = True, pairs: np.ndarray | None = None,
                   sparse_L: int | None = None, active_eps: float = 0.01, n_threads=None) -> DocTopicResult:
    """Document-level local step of the HDP topic model / LDA for every document of a batch.

    Hughes 2016 thesis, Alg. 5.1 / Eq. 5.44-5.46. Document d is rows
    u ∈ ``doc_range[d]:doc_range[d+1]`` of C = ``log_lik``, with c = ``counts``,
    a = ``prior`` and a_> = ``prior_rest``. Block coordinate ascent alternates

        r_uk ∝ exp(C_uk + w_k),   N_dk = Σ_u c_u r_uk,   θ_dk = N_dk + a_k,   w_k = ψ(θ_dk)

    (ψ(Σ θ) is constant in k and dropped), starting from w_k = ln a_k ("from the
    likelihood": r_uk ∝ exp(C_uk) a_k), or from w_k = ψ(N⁰_dk + a_k) for the warm-start
    counts N⁰ = ``init_counts``. One iteration updates w from N, then r and N from w; a
    document stops once max_k |N_dk(new) − N_dk(old)| < ``conv_thr`` or after
    ``max_iters`` iterations. The returned N_d is always that of the returned r, and
    θ_d = N_d + a. The compiled loop uses the efficient form with per-row
    m_u = max_k C_uk, L_uk = exp(C_uk − m_u), p_k = exp(w_k − max w) and
    s_u = Σ_k L_uk p_k: N_dk = p_k Σ_u c_u L_uk / s_u.

    The objective reported (and used by the restarts) is the collapsed

        L_d = Σ_u c_u (m_u + ln s_u) − Σ_k N_dk w̃_k + Σ_k lnΓ(θ_dk) + lnΓ(a_>) − lnΓ(Σ_k θ_dk + a_>),

    with w̃ = w − max w (the lnΓ(a_>) term left out when a_> = 0, LDA); it equals
    Σ_u c_u Σ_k r_uk (C_uk − ln r_uk) − c_Dir(θ_d, a_>) and never decreases over the
    iterations.

    Sparse restarts (Hughes, Kim & Sudderth 2015 (AISTATS), sparse restarts), when
    ``n_restarts`` > 0: the topics with N_dk > 0.1 after the iterations, smallest first
    (ties: lower k), at most ``n_restarts`` of them and at most (their number − 1), are
    tried in turn while the current state still has two such topics: N' = N_d with
    N'_j = 0, ``restart_iters`` iterations from θ' = N' + a, and the proposal replaces
    the current state iff its L_d is larger by more than rounding,
    L'_d − L_d > ``RESTART_MIN_GAIN`` (1 + |L_d|): a proposal that returns to the
    current state must not be accepted (or not) by rounding noise.

    Summaries of the returned r, each summed over all rows (0 ln 0 = 0):

    * ``entropy`` H_k = −Σ_u c_u r_uk ln r_uk (Hughes 2016 thesis Eq. 5.47), from
      ln r_uk = (C_uk − m_u) + w̃_k − ln s_u (no log per entry; the log of r_uk itself
      where r_uk > 1/2, where that form would cancel);
    * ``word_topic`` (V, K), Σ_u c_u r_uk at row ``word_ids[u]`` (table mode);
    * ``pair_entropy`` −Σ_u c_u t_u ln t_u, t_u = r_ua + r_ub, for every pair (a, b) of
      ``pairs``: the entropy of topics a and b merged (Hughes, Kim & Sudderth 2015 §5.1;
      never H_a + H_b, which only bounds it).

    With ``keep_resp=False`` no (nnz, K) array is made: the documents go in blocks of at
    most 512 documents and 16384 rows (a longer document alone) whose r lives in a scratch
    of one block (table mode also holds exp(C − max C) of the word types, (V, K)). All
    outputs other than ``resp`` are the same bits either way, and table mode gives the
    same bits as the dense ``log_lik = table[word_ids]``.

    L-sparse mode (``sparse_L`` = L < K; Hughes 2016 thesis §7.3, Alg. 7.4; Hughes &
    Sudderth 2016, fast and accurate local steps (sparse), §5, Alg. 2): every row keeps at
    most L topics, r_u = the softmax of C_u + w over the row's support. The first support of
    a row is the top L of C_uk + w_k over all K (the same first weights as above; ties to
    the lower k); it and a list of the row's 2L largest C_uk (for the re-selections) are the
    only work that costs O(K) per row (per word type of the batch in table mode). The
    document's active set A_d starts as the union of the supports. Selection iterations - the
    first 5 until the supports are stable (a re-selection put under 1 % of the document's
    tokens on the topics that entered them)
    and every 10th - first prune A_d to the topics with N_dk > ``active_eps`` (not when that
    would leave none; ε = 0: no pruning), then set w_k = ψ(N_dk + a_k) on A_d and re-select
    every row's top L over A_d (only |A_d| topics if fewer), exactly but reading few C_uk;
    the other iterations keep A_d and the supports and only re-weight (w_k on A_d, r on the
    supports). Convergence, the objective (the same L_d, now over the rows' supports;
    inactive topics have θ_dk = a_k) and the restarts are those of the dense step; a
    restart's iterations all re-select, and its topic j leaves the proposal's active set
    through the pruning (N'_j = 0 ≤ ε; with ε = 0 it stays a topic of weight ψ(a_j), as in
    the dense step). The summaries are those of the returned sparse r (0 outside the
    support), ``resp`` is returned dense for checks, and with ``keep_resp=False`` the
    scratch of a block is O(rows L) (plus the first supports and the lists of the word types
    in table mode, O(V L)). With pruning off, the objective never decreases over
    the iterations (every update is exact on a set that holds the previous state).

    Parameters
    ----------
    log_lik : (nnz, K) or (V, K) ndarray of float64, C-contiguous
        C_uk = E ln φ_{k, v_u} of every (document, word type) row; or, with ``word_ids``,
        the table E ln φ_{k, v} of every word type v (C_u = ``log_lik[word_ids[u]]``).
        Finite.
    counts : (nnz,) ndarray of float64, C-contiguous
        c_u > 0, the tokens of the row's word type in its document.
    doc_range : (D + 1,) ndarray of int64, C-contiguous
        Document boundaries: 0, ..., nnz, non-decreasing (a document may have no rows).
    prior : (K,) ndarray of float64, C-contiguous
        a_k = α β̂_k > 0.
    prior_rest : float
        a_> = α β̂_{>K} ≥ 0 (0 for LDA); enters only the objective.
    init_counts : (D, K) ndarray of float64, C-contiguous, optional
        Warm-start counts N⁰_dk ≥ 0 (memoized VI); default: start from the likelihood.
    max_iters : int, default 100
        Iterations per document, ≥ 0 (0: r from the first weights only).
    conv_thr : float, default 0.05
        Convergence threshold on max_k |ΔN_dk|, ≥ 0 (0: always ``max_iters`` iterations).
    n_restarts : int, default 0
        Sparse restart proposals per document, ≥ 0.
    restart_iters : int, default 2
        Iterations of every restart proposal, ≥ 1.
    word_ids : (nnz,) ndarray of int64, C-contiguous, optional
        The word type v_u ∈ [0, V) of every row: ``log_lik`` is then the (V, K) table
        ("table mode") and ``word_topic`` is returned.
    keep_resp : bool, default True
        Return ``resp``; False: no (nnz, K) array is allocated and ``resp`` is None.
    pairs : (M, 2) ndarray of int64, C-contiguous, optional
        Topic pairs (a, b), 0 ≤ a, b < K, a ≠ b (M may be 0): ``pair_entropy`` is returned.
    sparse_L : int, optional
        L ≥ 1: the L-sparse mode (above); None (default) or L ≥ K: the dense step.
    active_eps : float, default 0.01
        ε ≥ 0, the active-set pruning threshold of the L-sparse mode (0: no pruning).
    n_threads : int, optional
        OpenMP threads over documents; default all available for large inputs, 1 for
        small ones. Results do not depend on it (bit for bit).

    Returns
    -------
    DocTopicResult
        resp (nnz, K) or None, doc_counts (D, K), iters (D,) int64, objective (D,),
        restarts_accepted (D,) int64, entropy (K,), word_topic (V, K) or None,
        pair_entropy (M,) or None. A document without rows has N_d = 0, 0 iterations,
        L_d = Σ_k lnΓ(a_k) + lnΓ(a_>) − lnΓ(Σ_k a_k + a_>), and adds nothing to the sums.

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, a malformed ``doc_range``, a non-finite entry of
        ``log_lik``, a count ≤ 0, a prior entry ≤ 0, a negative or non-finite
        ``prior_rest`` / ``init_counts`` / ``conv_thr``, bad iteration or restart
        numbers, a word id outside the table, a pair out of range or of one topic, a
        ``sparse_L`` that is not None or an int ≥ 1, a negative or non-finite
        ``active_eps``, or priors so small that ψ underflows to −inf everywhere.
    """
    return _doc_topic_step(log_lik, counts, doc_range, prior, prior_rest, init_counts=init_counts,
                           max_iters=max_iters, conv_thr=conv_thr, n_restarts=n_restarts, restart_iters=restart_iters,
                           word_ids=word_ids, keep_resp=keep_resp, pairs=pairs, sparse_L=sparse_L,
                           active_eps=active_eps, n_threads=n_threads)


def _doc_topic_step(log_lik, counts, doc_range, prior, prior_rest, *, init_counts=None, max_iters=100,
                    conv_thr=0.05, n_restarts=0, restart_iters=2, word_ids=None, keep_resp=True, pairs=None,
                    sparse_L=None, active_eps=0.01, n_threads=None, force_sparse=False,
                    select_always=False) -> DocTopicResult:
    """:func:`doc_topic_step`, plus two switches of the L-sparse mode for the tests:
    ``force_sparse`` runs the L-sparse algorithm also when L ≥ K (rows of all K topics), and
    ``select_always`` makes every iteration re-select the rows' topics."""
    nnz, K, D, rest = _check_inputs(log_lik, counts, doc_range, prior, prior_rest, init_counts, word_ids)
    max_iters = _check_int(max_iters, "max_iters", 0)
    conv_thr = _check_real(conv_thr, "conv_thr", 0.0)
    n_restarts = _check_int(n_restarts, "n_restarts", 0)
    restart_iters = _check_int(restart_iters, "restart_iters", 1)
    if not isinstance(keep_resp, (bool, np.bool_)):
        raise KernelInputError(f"keep_resp must be True or False, got {keep_resp!r}")
    pair_list = _check_pairs(pairs, K)
    if sparse_L is not None and (isinstance(sparse_L, bool) or not isinstance(sparse_L, (int, np.integer))
                                 or not 1 <= sparse_L <= INT_MAX):
        raise KernelInputError(f"sparse_L must be None or an int in [1, {INT_MAX}], got {sparse_L!r}")
    active_eps = _check_real(active_eps, "active_eps", 0.0)
    sparse = sparse_L is not None and (sparse_L < K or force_sparse)
    M = pair_list.shape[0]
    width = min(int(sparse_L), K) if sparse else K
    nt = thread_count(n_threads, nnz * (width * max(1, max_iters) + M))
    table = word_ids is not None
    out = DocTopicResult((np.zeros if sparse else np.empty)((nnz, K)) if keep_resp else None, np.empty((D, K)),
                         np.empty(D, dtype=np.int64), np.empty(D), np.empty(D, dtype=np.int64), np.zeros(K),
                         np.zeros(log_lik.shape) if table else None, np.zeros(M) if pairs is not None else None)
    warm = init_counts is not None
    none = np.empty((0, K))
    args = (log_lik, word_ids if table else np.empty(0, dtype=np.int64), table, counts, doc_range, prior,
            rest, init_counts if warm else none, warm, max_iters, conv_thr, n_restarts, restart_iters,
            pair_list, out.resp if keep_resp else none, bool(keep_resp), out.doc_counts, out.iters,
            out.objective, out.restarts_accepted, out.entropy, out.word_topic if table else none,
            out.pair_entropy if pairs is not None else np.zeros(0), nt)
    if sparse:
        _sparse.doc_topic_step_sparse(*args, int(sparse_L), active_eps, bool(select_always))
    else:
        _dense.doc_topic_step(*args)
    bad = ~np.isfinite(out.objective)
    if bad.any():
        d = int(np.flatnonzero(bad)[0])
        raise KernelInputError(
            f"document {d} (rows {int(doc_range[d])}:{int(doc_range[d + 1])}): the local step is not finite; "
            f"the prior is too extreme (min prior = {float(prior.min()):.4g}, sum = {float(prior.sum()) + rest:.4g})"
        )
    return out
