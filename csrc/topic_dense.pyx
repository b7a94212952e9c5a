# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled document-level local step of the HDP topic model and of LDA, dense mode: every row's
responsibilities over all K topics (Hughes 2016 thesis Alg. 5.1 / Eq. 5.44-5.46), the sparse restarts
(Hughes, Kim & Sudderth 2015, AISTATS) and the summaries (Eq. 5.47; merged pairs: ibid. §5.1). The math, its
efficient form, the blocks and why every result is the same bits for any thread count: docs/topics.md,
"The compiled document step".

Never call these directly: ``bnpvi.kernels.topic`` validates dtypes, shapes,
contiguity, finiteness, ``doc_range``, ``word_ids`` and ``pairs``, allocates the
outputs and checks the result. Every function here assumes valid, C-contiguous input.
"""
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport exp, log, lgamma, INFINITY
from libc.string cimport memcpy

from topic_common cimport *


cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int bnpvi_topic_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int bnpvi_topic_max_threads(void) { return 1; }
    #endif
    """
    int bnpvi_topic_max_threads() noexcept nogil


cdef extern from *:
    """
    /* Four doubles (GCC / clang vector extension); the u type loads unaligned. Without AVX the
       compiler does each as two SSE2 pairs. */
    typedef double bnpvi_v4 __attribute__((vector_size(32)));
    typedef double bnpvi_v4u __attribute__((vector_size(32), aligned(8)));

    /* The row loops below are compiled twice where GCC can pick a clone at load time (ifunc): for
       AVX2 (four doubles per instruction) and for the baseline x86-64 (SSE2). The AVX2 clone does
       not use FMA (not enabled by "avx2"; setup.py also builds with -ffp-contract=off), so both
       do the same roundings in the same order: the same bits on every machine. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define BNPVI_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define BNPVI_CLONES
    #endif

    /* s[j] = sum_k x_j[k] y[k] for four rows, each summed exactly as _dot does it (four
       partial sums over k mod 4, the lanes of one vector; the tail k >= K4 into the first;
       then (s0 + s1) + (s2 + s3)), with sixteen independent additions in flight instead of
       four. */
    BNPVI_CLONES
    static void bnpvi_dot4(const double* x0, const double* x1, const double* x2, const double* x3,
                           const double* y, Py_ssize_t K, double* s)
    {
        const double* x[4] = {x0, x1, x2, x3};
        bnpvi_v4 a0 = {0.0, 0.0, 0.0, 0.0}, a1 = a0, a2 = a0, a3 = a0;
        Py_ssize_t k, K4 = K - K % 4;
        int j;
        for (k = 0; k < K4; k += 4) {
            bnpvi_v4 yv = *(const bnpvi_v4u*)(y + k);
            a0 += *(const bnpvi_v4u*)(x0 + k) * yv;
            a1 += *(const bnpvi_v4u*)(x1 + k) * yv;
            a2 += *(const bnpvi_v4u*)(x2 + k) * yv;
            a3 += *(const bnpvi_v4u*)(x3 + k) * yv;
        }
        {
            bnpvi_v4 a[4] = {a0, a1, a2, a3};
            for (j = 0; j < 4; j++) {
                double s0 = a[j][0];
                for (k = K4; k < K; k++)
                    s0 = s0 + x[j][k] * y[k];
                s[j] = (s0 + a[j][1]) + (a[j][2] + a[j][3]);
            }
        }
    }

    /* acc[k] = acc[k] + f0 x0[k] + f1 x1[k] + f2 x2[k] + f3 x3[k], added left to right (as one row
       at a time would add them). */
    BNPVI_CLONES
    static void bnpvi_axpy4(double* __restrict acc, double f0, const double* x0, double f1, const double* x1,
                            double f2, const double* x2, double f3, const double* x3, Py_ssize_t K)
    {
        Py_ssize_t k;
        for (k = 0; k < K; k++)
            acc[k] = acc[k] + f0 * x0[k] + f1 * x1[k] + f2 * x2[k] + f3 * x3[k];
    }

    /* out[k] = psi(x[k]) by the recurrence and asymptotic series of _digamma, for x[k] > 0 away
       from the root (the caller redoes the others with _digamma): the same operations in the same
       order as _digamma, four values at a time. Every x > 0 reaches 10 in at most ten steps of
       the recurrence, so a lane that is already >= 10 keeps its values (bitwise select) while the
       others step on; ln is taken per value. out may be x. */
    typedef long long bnpvi_m4 __attribute__((vector_size(32)));
    static inline double bnpvi_digamma_far1(double x)
    {
        double acc = 0.0, y2, t;
        while (x < 10.0) {
            acc = acc - 1.0 / x;
            x = x + 1.0;
        }
        y2 = 1.0 / (x * x);
        t = y2 * (1.0 / 12.0 - y2 * (1.0 / 120.0 - y2 * (1.0 / 252.0 - y2 * (1.0 / 240.0 - y2 * (
            1.0 / 132.0 - y2 * (691.0 / 32760.0 - y2 * (1.0 / 12.0)))))));
        return acc + (log(x) - 0.5 / x - t);
    }
    BNPVI_CLONES
    static void bnpvi_digamma_far(const double* xin, double* out, Py_ssize_t n)
    {
        const bnpvi_v4 one = {1.0, 1.0, 1.0, 1.0}, ten = {10.0, 10.0, 10.0, 10.0};
        const bnpvi_v4 c12 = one * (1.0 / 12.0), c120 = one * (1.0 / 120.0), c252 = one * (1.0 / 252.0);
        const bnpvi_v4 c240 = one * (1.0 / 240.0), c132 = one * (1.0 / 132.0), c691 = one * (691.0 / 32760.0);
        Py_ssize_t k, n4 = n - n % 4;
        int i, j;
        for (k = 0; k < n4; k += 4) {
            bnpvi_v4 x = *(const bnpvi_v4u*)(xin + k), acc = {0.0, 0.0, 0.0, 0.0}, y2, t;
            for (i = 0; i < 10; i++) {
                bnpvi_m4 step = x < ten;
                bnpvi_v4 acc1 = acc - one / x, x1 = x + one;
                acc = (bnpvi_v4)(((bnpvi_m4)acc1 & step) | ((bnpvi_m4)acc & ~step));
                x = (bnpvi_v4)(((bnpvi_m4)x1 & step) | ((bnpvi_m4)x & ~step));
            }
            y2 = one / (x * x);
            t = y2 * (c12 - y2 * (c120 - y2 * (c252 - y2 * (c240 - y2 * (c132 - y2 * (c691 - y2 * c12))))));
            for (j = 0; j < 4; j++)
                out[k + j] = acc[j] + (log(x[j]) - 0.5 / x[j] - t[j]);
        }
        for (k = n4; k < n; k++)
            out[k] = bnpvi_digamma_far1(xin[k]);
    }
    """
    void bnpvi_dot4(const double* x0, const double* x1, const double* x2, const double* x3,
                    const double* y, Py_ssize_t K, double* s) noexcept nogil
    void bnpvi_axpy4(double* acc, double f0, const double* x0, double f1, const double* x1,
                     double f2, const double* x2, double f3, const double* x3, Py_ssize_t K) noexcept nogil
    void bnpvi_digamma_far(const double* x, double* out, Py_ssize_t n) noexcept nogil


cdef enum:
    # scratch vectors of K doubles per thread (see _doc)
    N_VECS = 8


BLOCK = (BLOCK_DOCS, BLOCK_ROWS)
"""(documents, rows) of a block at most (docs/topics.md, "The compiled document step")."""


def max_threads():
    """Number of threads OpenMP would use by default (1 without OpenMP)."""
    return bnpvi_topic_max_threads()


def _digamma_array(const double[::1] x):
    """ψ elementwise with the kernel's own digamma (for tests)."""
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = _digamma(x[i])
    return out


def _digamma_weights_array(const double[::1] x):
    """ψ elementwise as _weights computes it (four values at a time, the root's neighbourhood by
    _digamma; for tests: the same bits as :func:`_digamma_array`)."""
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        if n > 0:
            bnpvi_digamma_far(&x[0], &o[0], n)
        for i in range(n):
            if (x[i] - DG_ROOT < 0.25 and DG_ROOT - x[i] < 0.25) or x[i] <= 0.0:
                o[i] = _digamma(x[i])
    return out


# ------------------------------------------------------------------ one document
cdef void _exp_rows(const double* C, Py_ssize_t n, Py_ssize_t K, double* L, double* m) noexcept nogil:
    """m_u = max_k C_uk and L_uk = exp(C_uk − m_u) for n rows."""
    cdef Py_ssize_t u, k
    cdef double mx, x
    cdef const double* row
    cdef double* Lrow
    for u in range(n):
        row = C + u * K
        Lrow = L + u * K
        mx = row[0]
        for k in range(1, K):
            if row[k] > mx:
                mx = row[k]
        m[u] = mx
        for k in range(K):
            x = row[k] - mx
            Lrow[k] = exp(x) if x >= EXP_ZERO else 0.0


cdef void _gather(const double* Lt, const double* mt, const long long* wid, Py_ssize_t n, Py_ssize_t K,
                  double* L, double* m) noexcept nogil:
    """L_u = Lt[wid[u]] and m_u = mt[wid[u]] for n rows (table mode)."""
    cdef Py_ssize_t u
    for u in range(n):
        if u + 1 < n:
            bnpvi_prefetch(Lt + wid[u + 1] * K, K)
        memcpy(L + u * K, Lt + wid[u] * K, K * sizeof(double))
        m[u] = mt[wid[u]]


cdef inline void _weights(const double* N, const double* a, Py_ssize_t K,
                          double* wt, double* p) noexcept nogil:
    """w̃_k = ψ(N_k + a_k) − max_j ψ(N_j + a_j) and p_k = exp(w̃_k); ψ four values at a time
    (bnpvi_digamma_far), the same bits as _digamma."""
    cdef Py_ssize_t k
    cdef double x
    for k in range(K):
        wt[k] = N[k] + a[k]
    bnpvi_digamma_far(wt, wt, K)
    for k in range(K):
        x = N[k] + a[k]
        if (x - DG_ROOT < 0.25 and DG_ROOT - x < 0.25) or x <= 0.0:
            wt[k] = _digamma(x)
    _shift(wt, p, K)



cdef inline double _dot(const double* x, const double* y, Py_ssize_t K) noexcept nogil:
    """Σ_k x_k y_k with four partial sums (a fixed order: deterministic)."""
    cdef Py_ssize_t k, K4 = K - K % 4
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    for k in range(0, K4, 4):
        s0 = s0 + x[k] * y[k]
        s1 = s1 + x[k + 1] * y[k + 1]
        s2 = s2 + x[k + 2] * y[k + 2]
        s3 = s3 + x[k + 3] * y[k + 3]
    for k in range(K4, K):
        s0 = s0 + x[k] * y[k]
    return (s0 + s1) + (s2 + s3)


cdef inline double _direct_row(const double* C, const double* wt, Py_ssize_t K,
                               double scale, double* out, bint add, double* mx_out) noexcept nogil:
    """Row done by log-sum-exp of C_u + w̃: out_k (+)= scale · r_uk.

    Returns ln s with s = Σ_k exp(C_uk + w̃_k − mx); mx = max_k (C_uk + w̃_k) goes to mx_out.
    """
    cdef Py_ssize_t k
    cdef double mx = -INFINITY, s = 0.0, x, inv
    for k in range(K):
        x = C[k] + wt[k]
        if x > mx:
            mx = x
    for k in range(K):
        x = C[k] + wt[k] - mx
        if x >= EXP_ZERO:
            s = s + exp(x)
    inv = scale / s
    for k in range(K):
        x = C[k] + wt[k] - mx
        x = exp(x) * inv if x >= EXP_ZERO else 0.0
        if add:
            out[k] = out[k] + x
        else:
            out[k] = x
    mx_out[0] = mx
    return log(s)


cdef inline double _row_weight(const Rows* rw, Py_ssize_t u, Py_ssize_t K, double s, const double* wt,
                               double* sb, double* lzb, double* extra) noexcept nogil:
    """Row u of _pass given s_u = s: c_u / s_u (efficient form), or 0 once the row is added
    to extra directly."""
    cdef double mx, ls
    if s >= S_MIN:
        sb[u] = s
        return rw.cnt[u] / s
    sb[u] = 0.0
    ls = _direct_row(_crow(rw, u, K), wt, K, rw.cnt[u], extra, True, &mx)
    lzb[u] = mx + ls
    return 0.0


cdef void _pass(const Rows* rw, Py_ssize_t K, const double* wt, const double* p, double* sb, double* lzb,
                double* acc, double* extra, double* N) noexcept nogil:
    """N_k = Σ_u c_u r_uk for r ∝ exp(C + w̃), in the efficient form.

    sb[u] receives s_u, or 0 for a row done directly, whose log normaliser then goes
    to lzb[u]; acc and extra (K) are scratch. Rows go four at a time: acc_k gets f_u L_uk
    of rows u, u+1, u+2, u+3 in that order, with f_u = 0 for a row done directly (adding
    +0 to acc_k ≥ +0 changes nothing), so the bits are those of one row at a time.
    """
    cdef Py_ssize_t u = 0, k
    cdef double f0, f1, f2, f3
    cdef double s[4]
    cdef const double* L0
    cdef const double* L1
    cdef const double* L2
    cdef const double* L3
    for k in range(K):
        acc[k] = 0.0
        extra[k] = 0.0
    while u + 4 <= rw.n:
        L0 = rw.L + u * K
        L1 = L0 + K
        L2 = L1 + K
        L3 = L2 + K
        bnpvi_dot4(L0, L1, L2, L3, p, K, s)
        f0 = _row_weight(rw, u, K, s[0], wt, sb, lzb, extra)
        f1 = _row_weight(rw, u + 1, K, s[1], wt, sb, lzb, extra)
        f2 = _row_weight(rw, u + 2, K, s[2], wt, sb, lzb, extra)
        f3 = _row_weight(rw, u + 3, K, s[3], wt, sb, lzb, extra)
        bnpvi_axpy4(acc, f0, L0, f1, L1, f2, L2, f3, L3, K)
        u = u + 4
    while u < rw.n:
        L0 = rw.L + u * K
        f0 = _row_weight(rw, u, K, _dot(L0, p, K), wt, sb, lzb, extra)
        for k in range(K):
            acc[k] = acc[k] + f0 * L0[k]
        u = u + 1
    for k in range(K):
        N[k] = p[k] * acc[k] + extra[k]


cdef double _objective(const Rows* rw, const double* sb, double* lzb, Py_ssize_t K, const double* N,
                       const double* wt, const double* a, double a_rest) noexcept nogil:
    """L_d of the state left by the last _pass (docs/topics.md); ln s_u goes to lzb[u] for
    the rows in the efficient form."""
    cdef Py_ssize_t k
    cdef double out = _rows_objective(rw.n, rw.cnt, rw.m, sb, lzb), tot = 0.0, th
    for k in range(K):
        th = N[k] + a[k]
        tot = tot + th
        out = out + lgamma(th)
        if N[k] != 0.0:          # N_k = 0 where p_k underflowed (w̃_k may be −inf)
            out = out - N[k] * wt[k]
    return _objective_end(out, tot, a_rest)


cdef void _finish(const Rows* rw, const Opts* o, const double* wt, const double* sb, const double* lzb,
                  double* p, double* lr, double* H, double* PH) noexcept nogil:
    """r of the weights w̃ in place of L, and the document's H (K) and PH (M) (docs/topics.md).
    sb and lzb are those of the last _pass and _objective with these weights; p and lr (K) are
    scratch."""
    cdef Py_ssize_t u, k, j, K = o.K
    cdef double inv, c, r, shift, ls
    cdef const double* Crow
    cdef double* Rrow
    for k in range(K):
        p[k] = exp(wt[k]) if wt[k] >= EXP_ZERO else 0.0
        H[k] = 0.0
    for j in range(o.M):
        PH[j] = 0.0
    for u in range(rw.n):
        Crow = _crow(rw, u, K)
        if u + 1 < rw.n:
            bnpvi_prefetch(_crow(rw, u + 1, K), K)
        Rrow = rw.L + u * K
        c = rw.cnt[u]
        if sb[u] > 0.0:
            inv = 1.0 / sb[u]
            for k in range(K):
                Rrow[k] = (Rrow[k] * p[k]) * inv
            shift = rw.m[u]
            ls = lzb[u]
        else:
            ls = _direct_row(Crow, wt, K, 1.0, Rrow, False, &shift)
        for k in range(K):
            r = Rrow[k]
            lr[k] = _log_r(r, Crow[k], shift, wt[k], ls)
            H[k] = H[k] - c * (r * lr[k])
        _pair_entropies(Rrow, lr, o.pairs, o.M, c, PH)


cdef void _add_word_topic(double* word_topic, const long long* wid, const double* cnt, const double* R,
                          Py_ssize_t u0, Py_ssize_t u1, Py_ssize_t K, Py_ssize_t part, Py_ssize_t parts) noexcept nogil:
    """word_topic[v] += c_u r_u for the rows u0 <= u < u1 (r_u at R + (u − u0) K) whose word v has
    v mod ``parts`` = ``part``, in row order: the parts touch disjoint rows of word_topic, and each
    row gets its terms in the order of the serial loop (the same bits for any number of parts)."""
    cdef Py_ssize_t u, k
    cdef double c
    cdef double* W
    cdef const double* Rrow
    for u in range(u0, u1):
        if wid[u] % parts != part:
            continue
        c = cnt[u]
        W = word_topic + wid[u] * K
        Rrow = R + (u - u0) * K
        for k in range(K):
            W[k] = W[k] + c * Rrow[k]



cdef void _doc(const Rows* rw, const Opts* o, const double* init, double* st,
               double* ws, int* cand, double* Nout, long long* iters_out, double* obj_out,
               long long* acc_out, double* H, double* PH) noexcept nogil:
    """The whole local step of one document (docs/topics.md).

    rw.L holds L_uk and receives r_uk; st (4 n) holds the per-row sb, lzb of _pass and
    _objective for the current state and for a restart proposal (swapped when it is
    accepted, so that _finish has them); ws holds N_VECS vectors of stride o.pk; cand (K)
    is scratch. H (K) and PH (M) receive the document's entropies (see _finish).
    """
    cdef Py_ssize_t K = o.K, pk = o.pk
    cdef const double* a = o.a
    cdef double* wt = ws
    cdef double* p = ws + pk
    cdef double* N = ws + 2 * pk
    cdef double* Nn = ws + 3 * pk
    cdef double* acc = ws + 4 * pk
    cdef double* extra = ws + 5 * pk
    cdef double* wq = ws + 6 * pk
    cdef double* Nq = ws + 7 * pk
    cdef double* sb = st
    cdef double* lzb = st + rw.n
    cdef double* sq = st + 2 * rw.n
    cdef double* lq = st + 3 * rw.n
    cdef double* swap
    cdef Py_ssize_t k, c, j, ncand
    cdef int it, t
    cdef long long accepted = 0
    cdef double diff, cur, prop

    if rw.n == 0:
        _empty_doc(o, Nout, iters_out, obj_out, acc_out, H, PH)
        return

    # first weights, then coordinate ascent
    _first_weights(init, a, K, wt, p)
    _pass(rw, K, wt, p, sb, lzb, acc, extra, N)
    it = 0
    while it < o.max_iters:
        it = it + 1
        _weights(N, a, K, wt, p)
        _pass(rw, K, wt, p, sb, lzb, acc, extra, Nn)
        diff = 0.0
        for k in range(K):
            diff = _max_change(diff, Nn[k], N[k])
            N[k] = Nn[k]
        if diff < o.thr:
            break
    iters_out[0] = it
    cur = _objective(rw, sb, lzb, K, N, wt, a, o.a_rest)

    # sparse restarts
    if o.n_restarts > 0:
        ncand = _candidates(N, NULL, K, o.n_restarts, cand)
        for c in range(ncand):
            if _n_used(N, NULL, K) < 2:
                break
            j = cand[c]
            for k in range(K):
                Nq[k] = N[k]
            Nq[j] = 0.0
            for t in range(o.restart_iters):
                _weights(Nq, a, K, wq, p)
                _pass(rw, K, wq, p, sq, lq, acc, extra, Nq)
            prop = _objective(rw, sq, lq, K, Nq, wq, a, o.a_rest)
            if _accepts(prop, cur):
                cur = prop
                accepted = accepted + 1
                for k in range(K):
                    N[k] = Nq[k]
                    wt[k] = wq[k]
                swap = sb
                sb = sq
                sq = swap
                swap = lzb
                lzb = lq
                lq = swap

    _finish(rw, o, wt, sb, lzb, p, acc, H, PH)
    for k in range(K):
        Nout[k] = N[k]
    obj_out[0] = cur
    acc_out[0] = accepted


# ------------------------------------------------------------------------ batch
def doc_topic_step(const double[:, ::1] log_lik, const long long[::1] word_ids, bint table,
                   const double[::1] counts, const long long[::1] doc_range, const double[::1] prior,
                   double prior_rest, const double[:, ::1] init_counts, bint use_init, int max_iters,
                   double conv_thr, int n_restarts, int restart_iters, const long long[:, ::1] pairs,
                   double[:, ::1] resp, bint keep_resp, double[:, ::1] doc_counts, long long[::1] iters,
                   double[::1] objective, long long[::1] restarts_accepted, double[::1] entropy,
                   double[:, ::1] word_topic, double[::1] pair_entropy, int n_threads):
    """The local step of every document into the outputs (docs/topics.md, "The compiled document step").

    ``log_lik`` is the (V, K) table of ``word_ids`` when ``table``, else the (nnz, K) rows.
    ``init_counts`` (D, K) is read only when ``use_init``, ``resp`` (nnz, K) only when
    ``keep_resp`` and ``word_topic`` (V, K) only when ``table`` (pass (0, K) arrays
    otherwise). ``entropy``, ``word_topic`` and ``pair_entropy`` must be zero on entry.
    """
    cdef Py_ssize_t K = log_lik.shape[1], V = log_lik.shape[0], nnz = counts.shape[0]
    cdef Py_ssize_t D = doc_range.shape[0] - 1, M = pairs.shape[0]
    cdef Py_ssize_t pk = _padded(K), pm = _padded(M)
    cdef Py_ssize_t d, d0, d1, u0, n, ub, j, v, tid, rows
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef bint warm = use_init and init_counts.shape[0] == D
    cdef Opts o = _opts(K, &prior[0], prior_rest, max_iters, conv_thr, n_restarts, restart_iters, pairs)
    cdef Rows rw
    cdef double* Rb
    cdef double* R

    if D <= 0:
        return
    rows = _block_rows(doc_range)
    # per-row scratch of one block; table mode: L and m of the word types used
    cdef double[:, ::1] Rs = np.empty((0 if keep_resp else rows, K))
    cdef double[::1] mb = np.empty(rows)
    cdef double[::1] st = np.empty(4 * rows)
    cdef double[:, ::1] Lt = np.empty((V if table else 0, K))
    cdef double[::1] mt = np.empty(V if table else 0)
    cdef unsigned char[::1] seen = np.zeros(V if table else 0, dtype=np.uint8)
    # per-document entropies of one block; per-thread vectors
    cdef double[:, ::1] hb = np.empty((BLOCK_DOCS, pk))
    cdef double[:, ::1] pb = np.empty((BLOCK_DOCS, pm))
    cdef double[:, ::1] ws = np.empty((nt, N_VECS * pk))
    cdef int[:, ::1] cs = np.empty((nt, pk), dtype=np.intc)
    cdef double* resp0 = &resp[0, 0] if keep_resp and nnz > 0 else NULL
    cdef const double* Cb = &log_lik[0, 0] if V > 0 else NULL

    with nogil:
        if table:
            _mark_words(seen, word_ids)
            for v in prange(V, schedule="static", num_threads=nt):
                if seen[v]:
                    _exp_rows(&log_lik[v, 0], 1, K, &Lt[v, 0], &mt[v])
        d0 = 0
        while d0 < D:
            d1 = _block_end(doc_range, d0)
            ub = doc_range[d0]
            Rb = resp0 + ub * K if keep_resp else &Rs[0, 0]
            for d in prange(d0, d1, schedule="dynamic", num_threads=nt):
                tid = threadid()
                u0 = doc_range[d]
                n = doc_range[d + 1] - u0
                # a document without rows touches no row array (&x[u0] would be past the end)
                if n == 0:
                    rw = _rows(NULL, NULL, NULL, NULL, NULL, 0, NULL)
                elif table:
                    R = Rb + (u0 - ub) * K
                    _gather(&Lt[0, 0], &mt[0], &word_ids[u0], n, K, R, &mb[u0 - ub])
                    rw = _rows(Cb, &word_ids[u0], R, &mb[u0 - ub], &counts[u0], n, NULL)
                else:
                    R = Rb + (u0 - ub) * K
                    _exp_rows(&log_lik[u0, 0], n, K, R, &mb[u0 - ub])
                    rw = _rows(&log_lik[u0, 0], NULL, R, &mb[u0 - ub], &counts[u0], n, NULL)
                _doc(&rw, &o, &init_counts[d, 0] if warm else NULL, &st[4 * (u0 - ub)] if n > 0 else NULL,
                     &ws[tid, 0], &cs[tid, 0], &doc_counts[d, 0], &iters[d],
                     &objective[d], &restarts_accepted[d], &hb[d - d0, 0], &pb[d - d0, 0])
            # sums over documents and rows, in their order
            _add_entropies(entropy, pair_entropy, hb, pb, d1 - d0, K, M)
            if table:
                for j in prange(nt, schedule="static", num_threads=nt):
                    _add_word_topic(&word_topic[0, 0], &word_ids[0], &counts[0], Rb, ub, doc_range[d1], K, j, nt)
            d0 = d1
