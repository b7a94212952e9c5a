# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled local-step kernels of mixtures: dense (Hughes 2016 thesis §3.4.2, Eq. 3.47-3.51)
and L-sparse (thesis §7.1, Eq. 7.4-7.5, Alg. 7.2).

Never call these directly: ``bnpvi.kernels`` validates dtypes, shapes,
contiguity and aliasing, allocates the outputs and turns the returned status
into an error. Every function here assumes valid, C-contiguous float64 input.

Determinism
-----------
Rows are processed in fixed chunks whose boundaries depend only on N (never on
the number of threads). Per-row outputs (``resp``, ``log_norm``) do not depend
on the thread count at all. Column sums over rows (entropies) are accumulated
sequentially inside each chunk into a private (n_chunks, K) partial buffer and
the partials are then added in chunk order by one thread, so they are
bit-identical for any thread count, including builds without OpenMP. Which
thread computes a chunk does not matter either (the L-sparse kernel hands
chunks out dynamically).

Status codes
------------
Each kernel returns ``-1`` when all rows are valid, otherwise the index of the
first invalid row (smallest row index over all chunks).
"""
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport exp, fabs, fmax, lgamma, log, log1p, sqrt, INFINITY, NAN

include "blas.pxi"


cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int bnpvi_max_threads(void) { return omp_get_max_threads(); }
    static int bnpvi_have_openmp(void) { return 1; }
    #else
    static int bnpvi_max_threads(void) { return 1; }
    static int bnpvi_have_openmp(void) { return 0; }
    #endif
    """
    int bnpvi_max_threads() noexcept nogil
    int bnpvi_have_openmp() noexcept nogil


# Chunking depends on N only: at most MAX_CHUNKS chunks of at least MIN_CHUNK rows.
cdef enum:
    MIN_CHUNK = 128
    MAX_CHUNKS = 64


def max_threads():
    """Number of threads OpenMP would use by default (1 without OpenMP)."""
    return bnpvi_max_threads()


def have_openmp():
    """True when the extension was compiled with OpenMP."""
    return bool(bnpvi_have_openmp())


# exp(x) rounds to +0.0 for every x < ln(2⁻¹⁰⁷⁵) ≈ −745.1332 (below half the smallest
# subnormal); libm's underflow path is slow, so such entries are set to 0 without a call.
cdef double EXP_ZERO = -745.2


cdef inline Py_ssize_t _padded(Py_ssize_t K) noexcept nogil:
    """Row stride of per-thread / per-chunk buffers: K rounded up to 8 doubles plus one
    64-byte line, so rows written by different threads never share a cache line."""
    return ((K + 7) // 8 + 1) * 8


cdef inline Py_ssize_t _chunk_size(Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t c = (N + MAX_CHUNKS - 1) // MAX_CHUNKS
    return c if c > MIN_CHUNK else MIN_CHUNK


def chunk_size(Py_ssize_t N):
    """Rows per chunk for N rows (a function of N only, so results are thread-count free)."""
    return _chunk_size(N)


# ----------------------------------------------------------------------------- rows
cdef inline bint _softmax_row(const double* ll, const double* lp, double* w, double* r,
                              double* h, double* lnorm, Py_ssize_t K, double wn) noexcept nogil:
    """One row of the dense local step; returns False when the row is invalid. ``wn`` is the row's weight in
    the entropy sums (1: unweighted, and then exactly the unweighted sums, as 1 · x = x).

    w is a K-long scratch row (may not alias r); r may alias ll (in-place).
    With W_k = ll_k + lp_k, m = max_k W_k (first argmax j), t_k = W_k − m and
    s1 = Σ_{k≠j} exp(t_k):  log_norm = m + log1p(s1),  r_k = exp(t_k) · (1 + s1)⁻¹,
    h_k += r_k (log1p(s1) − t_k)  (= −r_k ln r_k, as ln r_k = t_k − log1p(s1)). exp is
    skipped where it is exactly 0 anyway (t_k < EXP_ZERO), which also makes W_k = −inf add
    exactly 0.
    """
    cdef Py_ssize_t k, j = 0
    cdef double m = -INFINITY, v, t, s1 = 0.0, ls, inv, rk
    for k in range(K):
        v = ll[k] + lp[k]
        w[k] = v
        if v > m:
            m = v
            j = k
    for k in range(K):
        t = w[k] - m
        if t < EXP_ZERO:
            # exp(t) rounds to 0 (incl. W_k = −inf): skip the call, and keep w finite so
            # that r_k (ls − w_k) below is 0 · finite = 0, not 0 · inf = NaN.
            w[k] = EXP_ZERO
            r[k] = 0.0
        else:                   # NaN lands here and propagates into s1
            w[k] = t
            r[k] = exp(t)
    for k in range(j):
        s1 = s1 + r[k]
    for k in range(j + 1, K):
        s1 = s1 + r[k]
    ls = log1p(s1)
    v = m + ls
    lnorm[0] = v
    # NaN anywhere in the row, +inf, or no finite weight (m = -inf) all land here.
    if not (v > -INFINITY and v < INFINITY):
        return False
    w[j] = 0.0
    r[j] = 1.0
    inv = 1.0 / (1.0 + s1)
    for k in range(K):
        rk = r[k] * inv
        r[k] = rk
        h[k] = h[k] + (wn * rk) * (ls - w[k])   # adds exactly 0 where r_k = 0
    return True


# -------------------------------------------------------------------------- kernels
def dense_local_step(const double[:, ::1] log_lik, const double[::1] log_prior,
                     double[:, ::1] resp, double[::1] log_norm, double[::1] entropy,
                     int n_threads, const double[::1] weights=None):
    """Dense softmax responsibilities, log normalisers and entropy summaries.

    Hughes 2016 thesis Eq. 3.47-3.49 and 3.51; with ``weights`` (N,), the entropy sums
    −Σ_n w_n r_nk ln r_nk. ``resp`` may be ``log_lik`` itself (in place); no other
    aliasing is allowed. Returns the first invalid row or -1.
    """
    cdef bint weighted = weights is not None
    cdef double wn = 1.0
    cdef Py_ssize_t N = log_lik.shape[0], K = log_lik.shape[1]
    cdef Py_ssize_t csize = _chunk_size(N)
    cdef Py_ssize_t n_chunks = (N + csize - 1) // csize
    cdef Py_ssize_t c, n, start, stop
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef double[:, ::1] part = np.zeros((max(n_chunks, 1), _padded(K)))
    cdef double[:, ::1] scratch = np.empty((nt, _padded(K)))
    cdef Py_ssize_t[::1] bad = np.full(max(n_chunks, 1), -1, dtype=np.intp)
    cdef double* w
    cdef double* h

    with nogil:
        for c in prange(n_chunks, schedule="static", num_threads=nt):
            w = &scratch[threadid(), 0]
            h = &part[c, 0]
            start = c * csize
            stop = start + csize
            if stop > N:
                stop = N
            for n in range(start, stop):
                wn = weights[n] if weighted else 1.0
                if not _softmax_row(&log_lik[n, 0], &log_prior[0], w, &resp[n, 0], h,
                                    &log_norm[n], K, wn):
                    if bad[c] < 0:
                        bad[c] = n
        _reduce_chunks(part, n_chunks, entropy, 1.0)
    return _first_bad(bad, n_chunks)


def entropy_of(const double[:, ::1] resp, double[::1] entropy, int n_threads):
    """H_k = −Σ_n r_nk ln r_nk with 0 ln 0 := 0 (Hughes 2016 thesis Eq. 3.51).

    A row is invalid when it holds a negative, NaN or infinite entry.
    Returns the first invalid row or -1.
    """
    cdef Py_ssize_t N = resp.shape[0], K = resp.shape[1]
    cdef Py_ssize_t csize = _chunk_size(N)
    cdef Py_ssize_t n_chunks = (N + csize - 1) // csize
    cdef Py_ssize_t c, n, k, start, stop
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef double[:, ::1] part = np.zeros((max(n_chunks, 1), _padded(K)))
    cdef Py_ssize_t[::1] bad = np.full(max(n_chunks, 1), -1, dtype=np.intp)
    cdef const double* r
    cdef double* h
    cdef double x

    with nogil:
        for c in prange(n_chunks, schedule="static", num_threads=nt):
            h = &part[c, 0]
            start = c * csize
            stop = start + csize
            if stop > N:
                stop = N
            for n in range(start, stop):
                r = &resp[n, 0]
                for k in range(K):
                    x = r[k]
                    if x > 0.0 and x < INFINITY:
                        h[k] = h[k] + x * log(x)
                    elif not (x == 0.0):
                        if bad[c] < 0:
                            bad[c] = n
        _reduce_chunks(part, n_chunks, entropy, -1.0)
    return _first_bad(bad, n_chunks)


def pair_merge_entropy(const double[:, ::1] resp, const long long[:, ::1] pairs,
                       double[::1] entropy, int n_threads):
    """H_m = −Σ_n s_n ln s_n with s_n = r_na + r_nb for pairs[m] = (a, b).

    The entropy summary of the merged column of a merge proposal (Hughes 2016 thesis
    §4.1.3). Column indices must already be validated. A row is invalid when it
    holds a negative, NaN or infinite entry in a paired column.
    Returns the first invalid row or -1.
    """
    cdef Py_ssize_t N = resp.shape[0]
    cdef Py_ssize_t M = pairs.shape[0]
    cdef Py_ssize_t csize = _chunk_size(N)
    cdef Py_ssize_t n_chunks = (N + csize - 1) // csize
    cdef Py_ssize_t c, n, m, start, stop
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef double[:, ::1] part = np.zeros((max(n_chunks, 1), _padded(M)))
    cdef Py_ssize_t[::1] bad = np.full(max(n_chunks, 1), -1, dtype=np.intp)
    cdef const double* r
    cdef const long long* p = &pairs[0, 0] if M > 0 else NULL
    cdef double* h
    cdef double ra, rb, s

    if M == 0:
        return -1
    with nogil:
        for c in prange(n_chunks, schedule="static", num_threads=nt):
            h = &part[c, 0]
            start = c * csize
            stop = start + csize
            if stop > N:
                stop = N
            for n in range(start, stop):
                r = &resp[n, 0]
                for m in range(M):
                    ra = r[p[2 * m]]
                    rb = r[p[2 * m + 1]]
                    s = ra + rb
                    if ra >= 0.0 and rb >= 0.0 and s < INFINITY:
                        if s > 0.0:
                            h[m] = h[m] + s * log(s)
                    elif bad[c] < 0:
                        bad[c] = n
        _reduce_chunks(part, n_chunks, entropy, -1.0)
    return _first_bad(bad, n_chunks)


# ------------------------------------------------------------------ L-sparse kernels
# Selection of the L largest weights W_k of a row (Hughes 2016 thesis Alg. 7.2). A plain pass that
# inserts every weight beating the L-th kept one is branchy (its test is unpredictable while the
# kept weights are still small), so with at least L blocks of BLOCK weights it is done in steps
# whose loop bodies have no data-dependent branch:
#   1. one pass over all K weights: the maximum of each block, and the NaN / +inf check;
#   2. a lower bound t on the L-th largest weight: the maxima of G = min(2 L, #blocks) groups of
#      blocks are G different weights, so the L-th largest of them is ≤ the L-th largest weight;
#   3. the weights ≥ t of the blocks whose maximum is ≥ t are the candidates (in increasing cluster
#      order; about 1.2 L of them on mixture data), and the L largest candidates, ties to the lower
#      index, are found by ranking them (at most RANK_MAX) or by insertion.
cdef enum:
    BLOCK = 8           # weights per block of step 1
    RANK_MAX = 24       # up to this many candidates are ranked (O(m²), branch-free), more inserted


cdef struct TopScratch:
    double* block_max   # ⌈K / BLOCK⌉ block maxima
    double* group_max   # 2 L group maxima
    int* blocks         # ⌈K / BLOCK⌉ blocks that may hold one of the L largest weights
    double* cand_w      # K candidate weights, in increasing cluster order
    int* cand_k         # K their clusters
    double* top_w       # L + 1: the ranked top L; slot L takes every other candidate
    int* top_k          # L + 1
    double* e           # L: exp(t_i) of the softmax


cdef inline void _keep(double v, int k, Py_ssize_t n, Py_ssize_t L, double* val, int* idx) noexcept nogil:
    """Offer the n-th weight v (cluster k) of a scan in increasing cluster order to the descending list
    ``val`` / ``idx`` of the L largest so far: the first L fill it, a later one enters only if it
    beats the L-th kept one strictly, and moves up past the strictly smaller ones (ties: lower index
    first, the order of a stable descending sort)."""
    cdef Py_ssize_t i
    if n < L:
        i = n
    elif v > val[L - 1]:
        i = L - 1
    else:
        return
    while i > 0 and val[i - 1] < v:
        val[i] = val[i - 1]
        idx[i] = idx[i - 1]
        i = i - 1
    val[i] = v
    idx[i] = k


cdef inline bint _scan_top(const double* ll, const double* lp, Py_ssize_t K, Py_ssize_t L, double* val,
                           int* idx) noexcept nogil:
    """The L largest weights by one insertion pass over the row (for rows of fewer than L blocks);
    False when a weight is NaN or +inf."""
    cdef Py_ssize_t k
    cdef double v
    for k in range(K):
        v = ll[k] + lp[k]
        if not (v < INFINITY):
            return False
        _keep(v, <int>k, k, L, val, idx)
    return True


cdef inline double _max_weight(const double* ll, const double* lp, Py_ssize_t n, int* ok) noexcept nogil:
    """max_{j<n} ll_j + lp_j (−inf for n = 0); clears ``ok`` when a weight is NaN or +inf."""
    cdef Py_ssize_t j
    cdef double w, m = -INFINITY
    cdef int good = 1
    for j in range(n):
        w = ll[j] + lp[j]
        m = w if w > m else m
        good = good & (w < INFINITY)
    ok[0] = ok[0] & good
    return m


cdef inline bint _block_maxima(const double* ll, const double* lp, Py_ssize_t K, double* block_max) noexcept nogil:
    """block_max[b] = the largest weight of block b (BLOCK weights, the last block may be shorter).

    Returns False when a weight is NaN or +inf: this is the one pass over all K weights."""
    cdef Py_ssize_t b, full = K // BLOCK
    cdef int ok = 1
    for b in range(full):
        block_max[b] = _max_weight(ll + b * BLOCK, lp + b * BLOCK, BLOCK, &ok)
    if full * BLOCK < K:
        block_max[full] = _max_weight(ll + full * BLOCK, lp + full * BLOCK, K - full * BLOCK, &ok)
    return ok != 0


cdef inline void _group_maxima(const double* block_max, Py_ssize_t nb, Py_ssize_t G, double* group_max) noexcept nogil:
    """group_max[g] = the largest block maximum of group g, for G ≤ nb groups of consecutive blocks
    (the first nb % G groups hold one block more than the others)."""
    cdef Py_ssize_t g, b = 0, stop, size = nb // G, extra = nb % G
    cdef double m
    for g in range(G):
        stop = b + size + (g < extra)
        m = -INFINITY
        while b < stop:
            m = block_max[b] if block_max[b] > m else m
            b = b + 1
        group_max[g] = m


cdef inline double _lth_largest(const double* x, Py_ssize_t n, Py_ssize_t L) noexcept nogil:
    """The L-th largest of x[:n] (L ≤ n, no NaN): the smallest x_i that fewer than L others exceed.

    O(n²), branch-free, with loop lengths fixed for a call."""
    cdef Py_ssize_t i, j, above
    cdef double lth = INFINITY
    for i in range(n):
        above = 0
        for j in range(n):
            above = above + (x[j] > x[i])
        lth = x[i] if (above < L) & (x[i] < lth) else lth
    return lth


cdef inline Py_ssize_t _blocks_above(const double* block_max, Py_ssize_t nb, double bound, int* blocks) noexcept nogil:
    """The blocks whose maximum is ≥ bound, in order, into ``blocks``; returns their number.
    Branch-free: each block is written, and kept by advancing the count."""
    cdef Py_ssize_t b, c = 0
    for b in range(nb):
        blocks[c] = <int>b
        c = c + (block_max[b] >= bound)
    return c


cdef inline Py_ssize_t _candidates(const double* ll, const double* lp, Py_ssize_t K, const int* blocks,
                                   Py_ssize_t c, double bound, double* cand_w, int* cand_k) noexcept nogil:
    """Copies the weights ≥ bound of the blocks ``blocks[:c]`` (and their clusters), in increasing
    cluster order, to cand_w / cand_k; returns their number. Branch-free like _blocks_above."""
    cdef Py_ssize_t i, j, start, stop, m = 0
    cdef double w
    for i in range(c):
        start = blocks[i] * BLOCK
        stop = start + BLOCK if start + BLOCK < K else K
        for j in range(start, stop):
            w = ll[j] + lp[j]
            cand_w[m] = w
            cand_k[m] = <int>j
            m = m + (w >= bound)
    return m


cdef inline void _rank_top(const double* w, const int* k, Py_ssize_t m, Py_ssize_t L, double* val, int* idx,
                           double* top_w, int* top_k) noexcept nogil:
    """The L largest of m candidates (in increasing cluster order) into ``val`` / ``idx`` by rank:
    candidate i goes to slot #{j : w_j > w_i, or w_j ≥ w_i and j < i} (the order of a stable
    descending sort) if that is < L, else to the spare slot L of top_w / top_k."""
    cdef Py_ssize_t i, j, r
    for i in range(m):
        r = 0
        for j in range(m):
            r = r + ((w[j] > w[i]) | ((j < i) & (w[j] >= w[i])))
        r = r if r < L else L
        top_w[r] = w[i]
        top_k[r] = k[i]
    for i in range(L):
        val[i] = top_w[i]
        idx[i] = top_k[i]


cdef inline bint _select_top(const double* ll, const double* lp, Py_ssize_t K, Py_ssize_t L, double* val,
                             int* idx, TopScratch* s) noexcept nogil:
    """The L largest weights W_k = ll_k + lp_k of one row into ``val`` / ``idx``, descending, ties to
    the lower index (Hughes 2016 thesis Alg. 7.2; steps above). False when a weight is NaN or +inf."""
    cdef Py_ssize_t i, c, m, nb = (K + BLOCK - 1) // BLOCK
    cdef Py_ssize_t G = 2 * L if 2 * L < nb else nb
    cdef double bound
    if nb < L:
        return _scan_top(ll, lp, K, L, val, idx)
    if not _block_maxima(ll, lp, K, s.block_max):
        return False
    _group_maxima(s.block_max, nb, G, s.group_max)
    bound = _lth_largest(s.group_max, G, L)
    c = _blocks_above(s.block_max, nb, bound, s.blocks)
    m = _candidates(ll, lp, K, s.blocks, c, bound, s.cand_w, s.cand_k)
    if m <= RANK_MAX:
        _rank_top(s.cand_w, s.cand_k, m, L, val, idx, s.top_w, s.top_k)
    else:
        for i in range(m):
            _keep(s.cand_w[i], s.cand_k[i], i, L, val, idx)
    return True


cdef inline bint _top_row(const double* ll, const double* lp, Py_ssize_t K, Py_ssize_t L, double* val,
                          int* idx, TopScratch* s, double* h, double* lnorm) noexcept nogil:
    """One row of the L-sparse local step; returns False when the row is invalid.

    _select_top keeps the L largest weights W_k = ll_k + lp_k in ``val`` / ``idx`` (Hughes 2016
    thesis Alg. 7.2). Then, with m = val_0 and t_i = val_i − m: log_norm = m + log1p(Σ_{i≥1} exp t_i),
    r_i = exp(t_i) / (1 + Σ_{i≥1} exp t_i), h[idx_i] += r_i (log1p(·) − t_i), and ``val`` is
    overwritten with r.
    """
    cdef Py_ssize_t i
    cdef double m, t, s1 = 0.0, ls, inv, r
    cdef double* e = s.e
    if not _select_top(ll, lp, K, L, val, idx, s):
        return False
    m = val[0]
    if not (m > -INFINITY):             # no finite weight
        return False
    e[0] = 1.0
    val[0] = 0.0
    for i in range(1, L):
        t = val[i] - m
        if t < EXP_ZERO:                # exp(t) rounds to 0 (incl. −inf): keep t finite, r = 0
            val[i] = EXP_ZERO
            e[i] = 0.0
        else:
            val[i] = t
            e[i] = exp(t)
            s1 = s1 + e[i]
    ls = log1p(s1)
    lnorm[0] = m + ls
    inv = 1.0 / (1.0 + s1)
    for i in range(L):
        r = e[i] * inv
        h[idx[i]] = h[idx[i]] + r * (ls - val[i])
        val[i] = r
    return True


cdef inline TopScratch _scratch_of(double* f, int* i, Py_ssize_t K, Py_ssize_t L) noexcept nogil:
    """One thread's TopScratch, carved from its row of doubles (⌈K / BLOCK⌉ + K + 4 L + 1) and of
    ints (⌈K / BLOCK⌉ + K + L + 1)."""
    cdef Py_ssize_t nb = (K + BLOCK - 1) // BLOCK
    cdef TopScratch s
    s.block_max = f
    s.group_max = f + nb
    s.cand_w = f + nb + 2 * L
    s.top_w = f + nb + 2 * L + K
    s.e = f + nb + 3 * L + K + 1
    s.blocks = i
    s.cand_k = i + nb
    s.top_k = i + nb + K
    return s


def sparse_local_step(const double[:, ::1] log_lik, const double[::1] log_prior, double[:, ::1] values,
                      int[:, ::1] indices, double[::1] log_norm, double[::1] entropy, int n_threads):
    """L-sparse responsibilities (L = values.shape[1] ≤ K), log normalisers and entropy summaries.

    Hughes 2016 thesis Eq. 7.4-7.5, Alg. 7.2: the optimal q(z_n) with at most L nonzero
    entries is the softmax of the L largest weights. Row n's clusters go to
    ``indices[n]`` in descending weight (ties: lower index first), their
    responsibilities to ``values[n]``. Returns the first invalid row or -1.

    Chunks are handed out dynamically: a thread slowed by another process (e.g. a BLAS thread
    still spinning after a summary step) takes fewer of them, and results stay per chunk.
    """
    cdef Py_ssize_t N = log_lik.shape[0], K = log_lik.shape[1], L = values.shape[1]
    cdef Py_ssize_t nb = (K + BLOCK - 1) // BLOCK
    cdef Py_ssize_t csize = _chunk_size(N)
    cdef Py_ssize_t n_chunks = (N + csize - 1) // csize
    cdef Py_ssize_t c, n, start, stop
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef double[:, ::1] part = np.zeros((max(n_chunks, 1), _padded(K)))
    cdef double[:, ::1] f_scratch = np.empty((nt, _padded(nb + K + 4 * L + 1)))
    # ints take half the room of doubles: twice the padded length keeps rows on their own cache lines
    cdef int[:, ::1] i_scratch = np.empty((nt, 2 * _padded(nb + K + L + 1)), dtype=np.intc)
    cdef Py_ssize_t[::1] bad = np.full(max(n_chunks, 1), -1, dtype=np.intp)
    cdef TopScratch s

    with nogil:
        for c in prange(n_chunks, schedule="dynamic", num_threads=nt):
            s = _scratch_of(&f_scratch[threadid(), 0], &i_scratch[threadid(), 0], K, L)
            start = c * csize
            stop = start + csize
            if stop > N:
                stop = N
            for n in range(start, stop):
                if not _top_row(&log_lik[n, 0], &log_prior[0], K, L, &values[n, 0], &indices[n, 0], &s,
                                &part[c, 0], &log_norm[n]):
                    if bad[c] < 0:
                        bad[c] = n
        _reduce_chunks(part, n_chunks, entropy, 1.0)
    return _first_bad(bad, n_chunks)


def sparse_pair_entropy_change(const double[:, ::1] values, const int[:, ::1] indices,
                               const int[:, ::1] pair_of, double[::1] change, int n_threads):
    """Per pair m: Σ over rows storing both a and b of s ln s − r_a ln r_a − r_b ln r_b, s = r_a + r_b.

    ``pair_of[a, b]`` is the pair number of (a, b) (both orders) or −1. Rows holding one
    of the two keep their term, so the merged entropy is H_a + H_b − change_m (Hughes
    2016 thesis §4.1.3 with sparse rows). O(N L²), whatever the number of pairs.
    Returns the first row with a negative, NaN or infinite value, or -1.
    """
    cdef Py_ssize_t N = values.shape[0], L = values.shape[1], M = change.shape[0]
    cdef Py_ssize_t csize = _chunk_size(N)
    cdef Py_ssize_t n_chunks = (N + csize - 1) // csize
    cdef Py_ssize_t c, n, i, j, start, stop
    cdef int nt = n_threads if n_threads > 0 else 1, m
    cdef double[:, ::1] part = np.zeros((max(n_chunks, 1), _padded(M)))
    cdef Py_ssize_t[::1] bad = np.full(max(n_chunks, 1), -1, dtype=np.intp)
    cdef const double* r
    cdef const int* ix
    cdef double ra, rb, s, d

    if M == 0:
        return -1
    with nogil:
        for c in prange(n_chunks, schedule="static", num_threads=nt):
            start = c * csize
            stop = start + csize
            if stop > N:
                stop = N
            for n in range(start, stop):
                r = &values[n, 0]
                ix = &indices[n, 0]
                for i in range(L):
                    if not (r[i] >= 0.0 and r[i] < INFINITY):
                        if bad[c] < 0:
                            bad[c] = n
                        break
                    if r[i] == 0.0:
                        continue
                    for j in range(i + 1, L):
                        m = pair_of[ix[i], ix[j]]
                        if m < 0 or not (r[j] > 0.0 and r[j] < INFINITY):
                            continue
                        ra = r[i]
                        rb = r[j]
                        s = ra + rb
                        d = s * log(s) - ra * log(ra) - rb * log(rb)
                        part[c, m] = part[c, m] + d
        _reduce_chunks(part, n_chunks, change, 1.0)
    return _first_bad(bad, n_chunks)


# --------------------------------------------------------- most responsible cluster
# For Gaussian families E ln π_k + E ln p(y | φ_k) = f(y)·W_k + c_k over the quadratic features
# f(y) = [y_d y_e (d ≤ e, row-major upper triangle), y_d (when W has those rows)]. A block of rows'
# features goes through one float32 BLAS product (twice the speed of float64, and the block's
# features never leave the cache); a row's winner is kept when its float32 margin exceeds the
# product's worst-case error, otherwise the row is scored again in float64. So the labels are
# those of the float64 scores: |fl32(f·W_k) − f·W_k| ≤ γ_{F+2} Σ_j |f_j W_jk| ≤ γ_{F+2} ‖f‖ ‖W_k‖
# (Higham 2002, Eq. 3.5, with the rounding of f and W to float32), γ_m = m u / (1 − m u), u = 2⁻²⁴.
cdef enum:
    FEATURE_BLOCK = 1024   # rows whose float32 features and scores a thread holds at once

cdef double F32_UNIT = 5.9604644775390625e-08   # 2⁻²⁴
cdef double F64_UNIT = 1.1102230246251565e-16   # 2⁻⁵³
cdef double F32_SAFE = 1.0e30                   # larger features would overflow the float32 product


cdef inline bint _has_nonfinite(const double* y, Py_ssize_t D) noexcept nogil:
    cdef Py_ssize_t d
    for d in range(D):
        if not (y[d] - y[d] == 0.0):
            return True
    return False


cdef inline void _block_features(const double* X, const double* shift, Py_ssize_t m, Py_ssize_t D, bint linear,
                                 Py_ssize_t F, double* y, float* f, double* norm) noexcept nogil:
    """Rows y = x − shift of rows 0..m-1 of X as float32 features f (m × F) and their norms ‖f‖₂ (−1: too
    large for float32; NaN: the row holds a NaN or an infinity). ‖f‖² = ((Σ_d y_d²)² + Σ_d y_d⁴) / 2
    (+ Σ_d y_d² with the linear features), from the coordinates alone, so the feature loops are plain
    stores. y: scratch of D doubles."""
    cdef Py_ssize_t i, d, e
    cdef float* row
    cdef double yd, s2, s4, sq
    for i in range(m):
        for d in range(D):
            y[d] = X[i * D + d] - shift[d]
        row = f + i * F
        s2 = 0.0
        s4 = 0.0
        for d in range(D):
            yd = y[d] * y[d]
            s2 = s2 + yd
            s4 = s4 + yd * yd
        if not (s2 - s2 == 0.0):  # a NaN or an infinity, or squares beyond float64
            norm[i] = NAN if _has_nonfinite(y, D) else -1.0
            for e in range(F):
                row[e] = 0.0
            continue
        sq = 0.5 * (s2 * s2 + s4) + (s2 if linear else 0.0)
        norm[i] = sqrt(sq) * (1.0 + 8.0 * F64_UNIT) if sq < F32_SAFE * F32_SAFE else -1.0
        for d in range(D):
            yd = y[d]
            for e in range(D - d):
                row[e] = <float>(yd * y[d + e])
            row = row + (D - d)
        if linear:
            for d in range(D):
                row[d] = <float>y[d]


cdef inline long long _argmax_f64(const double* x, const double* shift, Py_ssize_t D, bint linear,
                                  const double* W, const double* c, Py_ssize_t K, double* y,
                                  double* s) noexcept nogil:
    """argmax_k f(y)·W_k + c_k at y = x − shift in float64 (features formed on the fly; ties to the first).
    y: scratch of D doubles, s of K."""
    cdef Py_ssize_t d, e, k, j = 0
    cdef long long best = 0
    cdef double v
    for d in range(D):
        y[d] = x[d] - shift[d]
    for k in range(K):
        s[k] = 0.0
    for d in range(D):
        for e in range(d, D):
            v = y[d] * y[e]
            for k in range(K):
                s[k] = s[k] + v * W[j * K + k]
            j = j + 1
    if linear:
        for d in range(D):
            v = y[d]
            for k in range(K):
                s[k] = s[k] + v * W[j * K + k]
            j = j + 1
    for k in range(K):
        s[k] = s[k] + c[k]
        if s[k] > s[best]:
            best = k
    return best


cdef Py_ssize_t _argmax_block(const double* X, const double* shift, Py_ssize_t m, Py_ssize_t D, bint linear,
                              const double* W, float* W32, const double* c, Py_ssize_t F, Py_ssize_t K,
                              double err, float* f, float* s, double* norm, double* exact,
                              long long* labels) noexcept nogil:
    """Labels of rows 0..m-1 of X − shift (see above; −1 for a row with a NaN or an infinity); the number of
    rows scored again in float64. exact: scratch of D + K doubles."""
    cdef Py_ssize_t i, k, n_exact = 0
    cdef long long best
    cdef double v, top, second
    cdef int Kc = <int>K, mc = <int>m, Fc = <int>F
    cdef float one = 1.0, zero = 0.0
    cdef char no = b'N'
    _block_features(X, shift, m, D, linear, F, exact, f, norm)
    # row-major (m × F)·(F × K) as column-major (K × F)·(F × m)
    _sgemm(&no, &no, &Kc, &mc, &Fc, &one, W32, &Kc, f, &Fc, &zero, s, &Kc)
    for i in range(m):
        best = 0
        top = -INFINITY
        second = -INFINITY
        for k in range(K):
            v = <double>s[i * K + k] + c[k]
            if v > top:
                second = top
                top = v
                best = k
            elif v > second:
                second = v
        if norm[i] != norm[i]:
            labels[i] = -1
            continue
        if norm[i] < 0.0 or not (top - second > 2.0 * err * norm[i] + 4.0 * F64_UNIT * (fabs(top) + fabs(second))):
            best = _argmax_f64(X + i * D, shift, D, linear, W, c, K, exact, exact + D)
            n_exact = n_exact + 1
        labels[i] = best
    return n_exact


def quad_argmax(const double[:, ::1] X, const double[::1] shift, const double[:, ::1] W, float[:, ::1] W32,
                const double[::1] c, double w_norm, long long[::1] labels, float[:, ::1] f_scratch,
                float[:, ::1] s_scratch, double[:, ::1] d_scratch, Py_ssize_t[::1] n_exact, int n_threads):
    """labels_n = argmax_k f(y_n)·W_k + c_k at y_n = x_n − shift (ties to the first; −1 for a row of X with a
    NaN or an infinity); n_exact[b]: rows of block b scored in float64.

    W: (F, K) with F = D(D+1)/2 (+ D with the linear features); W32 its float32 copy; w_norm = max_k ‖W_k‖₂.
    Scratch per thread: f (FEATURE_BLOCK·F), s (FEATURE_BLOCK·K), d (FEATURE_BLOCK + D + K). BLAS must be
    on one thread during the call.
    """
    cdef Py_ssize_t N = X.shape[0], D = X.shape[1], F = W.shape[0], K = W.shape[1]
    cdef Py_ssize_t n_blocks = (N + FEATURE_BLOCK - 1) // FEATURE_BLOCK
    cdef Py_ssize_t b, t, start, m
    cdef bint linear = F > D * (D + 1) // 2
    cdef double err = (F + 2) * F32_UNIT / (1.0 - (F + 2) * F32_UNIT) * w_norm
    cdef int nt = n_threads
    if N == 0:
        return
    with nogil:
        for b in prange(n_blocks, schedule="static", num_threads=nt):
            t = threadid()
            start = b * FEATURE_BLOCK
            m = N - start if N - start < FEATURE_BLOCK else FEATURE_BLOCK
            n_exact[b] = _argmax_block(&X[start, 0], &shift[0], m, D, linear, &W[0, 0], &W32[0, 0], &c[0], F, K, err,
                                       &f_scratch[t, 0], &s_scratch[t, 0], &d_scratch[t, 0],
                                       &d_scratch[t, FEATURE_BLOCK], &labels[start])


def quad_features(const double[:, ::1] Y, double[:, ::1] out, bint linear, int n_threads):
    """out_n = [y_d y_e for d ≤ e (row-major upper triangle), y_d (when ``linear``)] for every row y_n of Y;
    rows in parallel, each written as one contiguous run (elementwise, so the threads change no bit)."""
    cdef Py_ssize_t N = Y.shape[0], D = Y.shape[1], F = out.shape[1]
    cdef Py_ssize_t n, d, e
    cdef const double* y
    cdef double* row
    cdef double yd
    cdef int nt = n_threads
    with nogil:
        for n in prange(N, schedule="static", num_threads=nt):
            y = &Y[n, 0]
            row = &out[n, 0]
            for d in range(D):
                yd = y[d]
                for e in range(d, D):
                    row[e - d] = yd * y[e]
                row = row + (D - d)
            if linear:
                for d in range(D):
                    row[d] = y[d]


# ----------------------------------------------------------- merged scale matrices
def pair_logdets(const double[:, ::1] base, const double[:, :, ::1] X, const long long[:, ::1] pairs,
                 const double[:, ::1] Y, const double[::1] s, double[::1] out, double[:, ::1] scratch,
                 int n_threads):
    """out_p = ln|M_p| for M_p = sym(base + (X_a + X_b) − u uᵀ/s_p), u = Y_a + Y_b, (a, b) = pairs[p]
    (no rank-one term when Y has no columns), sym(W) = (W + Wᵀ)/2; NaN where M_p is not positive
    definite. One LAPACK Cholesky (dpotrf) per pair, pairs in parallel (each pair's bits do not depend on
    the threads); ln|M| = 2 Σ_d ln L_dd. scratch: (threads, 2·D·D + D). BLAS must be on one thread."""
    cdef Py_ssize_t P = pairs.shape[0], D = base.shape[0]
    cdef Py_ssize_t p, d, e, t, a, b
    cdef bint rank_one = Y.shape[1] > 0
    cdef int Dc = <int>D, info
    cdef char lower = b'L'
    cdef double* W
    cdef double* M
    cdef double* u
    cdef double acc
    cdef int nt = n_threads
    if P == 0:
        return
    with nogil:
        for p in prange(P, schedule="static", num_threads=nt):
            t = threadid()
            W = &scratch[t, 0]
            M = W + D * D
            u = M + D * D
            a = pairs[p, 0]
            b = pairs[p, 1]
            for d in range(D):
                for e in range(D):
                    W[d * D + e] = base[d, e] + (X[a, d, e] + X[b, d, e])
            if rank_one:
                for d in range(D):
                    u[d] = Y[a, d] + Y[b, d]
                for d in range(D):
                    for e in range(D):
                        W[d * D + e] = W[d * D + e] - u[d] * (u[e] / s[p])
            for d in range(D):
                for e in range(D):
                    M[d * D + e] = 0.5 * (W[d * D + e] + W[e * D + d])
            info = 0
            _dpotrf(&lower, &Dc, M, &Dc, &info)
            if info != 0:
                out[p] = NAN
                continue
            acc = 0.0
            for d in range(D):
                acc = acc + log(M[d * D + d])
            out[p] = 2.0 * acc


def feature_block():
    """Rows per block of :func:`quad_argmax` (its scratch sizes)."""
    return FEATURE_BLOCK


# -------------------------------------------------------------------------- helpers
cdef void _reduce_chunks(double[:, ::1] part, Py_ssize_t n_chunks, double[::1] out,
                         double sign) noexcept nogil:
    """out_k = sign · Σ_c part[c, k], added in chunk order (deterministic)."""
    cdef Py_ssize_t c, k, K = out.shape[0]
    cdef double acc
    for k in range(K):
        acc = 0.0
        for c in range(n_chunks):
            acc = acc + part[c, k]
        out[k] = acc if sign > 0.0 else 0.0 - acc   # 0.0 - acc: never −0.0


cdef Py_ssize_t _first_bad(Py_ssize_t[::1] bad, Py_ssize_t n_chunks) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(n_chunks):
        if bad[c] >= 0:
            return bad[c]
    return -1


# ------------------------------------------------------------ reassign gains (Mult)
cdef inline double _log_rise(double a, double c) noexcept nogil:
    """lnΓ(a + c) − lnΓ(a): for a whole c ≤ 16, the sum of ln(a + i), i < c (the rising factorial), else
    two log-gammas."""
    cdef double s = 0.0
    cdef int i, m
    if c == 1.0:
        return log(a)
    if c > 0.0 and c <= 16.0 and c == <double>(<int>c):
        m = <int>c
        for i in range(m):
            s = s + log(a + i)
        return s
    return lgamma(a + c) - lgamma(a)


def mult_reassign_gains(const long long[::1] indptr, const long long[::1] indices, const double[::1] data,
                        const double[:, ::1] resp, const double[:, ::1] lam_by_word, const double[::1] total,
                        double lam0, double prior_total, double[:, ::1] out, int n_threads):
    """Change of Σ_k L_data,k* of a Dirichlet-multinomial mixture when document n's responsibilities r_n
    become a one-hot on cluster j, for every n and j (the NumPy reference: ``Mult.reassign_gains``).

    With λ_kw = ``lam_by_word[w, k]``, Λ_k = ``total[k]`` and the document taken out of every cluster,
    λ⁻ = max(λ − r_nk c, λ̄) and Λ⁻ = max(Λ − r_nk C_n, Vλ̄):

        out[n, j] = Σ_k Σ_w [lnΓ(λ⁻_kw) − lnΓ(λ_kw)] − Σ_k [lnΓ(Λ⁻_k) − lnΓ(Λ_k)]
                    + Σ_w [lnΓ(λ⁻_jw + c_w) − lnΓ(λ⁻_jw)] − [lnΓ(Λ⁻_j + C_n) − lnΓ(Λ⁻_j)].

    A term whose argument does not change (r_nk c below the last bit of λ) is skipped: it is 0. Rows are
    independent, so the result does not depend on the number of threads.
    """
    cdef Py_ssize_t N = resp.shape[0], K = resp.shape[1]
    cdef Py_ssize_t n, k, e, w
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef double length, removed, r, t, t_out, a, a_out, c
    cdef const double* lam_w
    cdef const double* r_n
    cdef double* o
    with nogil:
        for n in prange(N, schedule="static", num_threads=nt):
            o = &out[n, 0]
            r_n = &resp[n, 0]
            length = 0.0
            for e in range(indptr[n], indptr[n + 1]):
                length = length + data[e]
            removed = 0.0
            for k in range(K):
                t = total[k]
                t_out = fmax(t - r_n[k] * length, prior_total)
                if t_out != t:
                    removed = removed + lgamma(t) - lgamma(t_out)
                o[k] = -_log_rise(t_out, length)
            for e in range(indptr[n], indptr[n + 1]):
                w = indices[e]
                c = data[e]
                lam_w = &lam_by_word[w, 0]
                for k in range(K):
                    a = lam_w[k]
                    a_out = fmax(a - r_n[k] * c, lam0)
                    if a_out != a:
                        removed = removed + lgamma(a_out) - lgamma(a)
                    o[k] = o[k] + _log_rise(a_out, c)
            for k in range(K):
                o[k] = o[k] + removed
    return None
