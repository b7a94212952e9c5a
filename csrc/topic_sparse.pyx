# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled document-level local step of the HDP topic model and of LDA, L-sparse mode: at most L topics
per row over an active set of topics per document (Hughes 2016 thesis §7.3, Alg. 7.4; Hughes & Sudderth
2016, §5, Alg. 2), with the restarts and summaries of the dense mode (topic_dense.pyx). The math, the
selection, the scratch and the order of every sum: docs/topics.md, "The compiled document step", "L-sparse
mode". Called only by ``bnpvi.kernels.topic``, which validates the inputs (topic_dense.pyx says how).
"""
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport exp, log, lgamma, INFINITY
from libc.string cimport memcpy

from topic_common cimport *


cdef extern from *:
    """
    #include <stdlib.h>
    /* Topics and weights (bnpvi_wk) sorted by decreasing w, then increasing k. */
    static int bnpvi_wk_cmp(const void* a, const void* b)
    {
        const bnpvi_wk* x = (const bnpvi_wk*)a;
        const bnpvi_wk* y = (const bnpvi_wk*)b;
        if (x->w != y->w)
            return x->w > y->w ? -1 : 1;
        return (x->k > y->k) - (x->k < y->k);
    }
    static void bnpvi_sort_wk(bnpvi_wk* a, Py_ssize_t n) { qsort(a, (size_t)n, sizeof(bnpvi_wk), bnpvi_wk_cmp); }
    """
    void bnpvi_sort_wk(bnpvi_wk* a, Py_ssize_t n) noexcept nogil


cdef extern from *:
    """
    /* Ask for the cache lines of x[srt[j].k], j < n (the topics a row's selection reads first). */
    static void bnpvi_prefetch_topics(const double* x, const bnpvi_wk* srt, Py_ssize_t n)
    {
        Py_ssize_t j;
        for (j = 0; j < n; j++)
            __builtin_prefetch(x + srt[j].k);
    }
    """
    void bnpvi_prefetch_topics(const double* x, const bnpvi_wk* srt, Py_ssize_t n) noexcept nogil


# L-sparse mode: a document's supports are stable once a re-selection put less than this fraction
# of its tokens on the topics that entered them (docs/topics.md, "L-sparse mode").
cdef double STABLE_MASS = 1e-2


BLOCK = (BLOCK_DOCS, BLOCK_ROWS)
"""(documents, rows) of a block at most (docs/topics.md, "The compiled document step")."""


# One document of the L-sparse mode (docs/topics.md, "L-sparse mode"). Row u keeps
# nz_u ≤ Le topics idx_u, their C_{u,idx_ui} (cv) and e_ui = exp(C_{u,idx_ui} − m_u), m_u the
# largest C_uk of them; its responsibilities are r_ui = e_ui p_{idx_ui} / s_u with s_u = Σ_i e_ui p_{idx_ui}
# (the efficient form of the dense mode on the row's support), or by log-sum-exp when
# s_u < S_MIN. Topics outside the active set have w̃_k = −inf; every loop over topics
# runs over the active list act (increasing k), so a document costs O(K) only for its
# first selection, its first weights and its outputs.
cdef enum:
    # scratch vectors of K doubles and of K ints per thread (see _sp_doc)
    SP_VECS = 15
    SP_IVECS = 4
    # iterations that re-select every row: the first SELECT_FIRST (until the supports are stable),
    # then every SELECT_EVERY-th
    SELECT_FIRST = 5
    SELECT_EVERY = 10
    # selections ask for the C of the next row's first PREFETCH_TOPICS candidates in advance
    PREFETCH_TOPICS = 64
    # a row's list holds its LIST_PER_SLOT Le largest C_uk (at most LIST_MAX, K); the threshold
    # algorithm selects when more than TA_MIN_PER_SLOT times the row width are active
    LIST_PER_SLOT = 2
    LIST_MAX = 64
    TA_MIN_PER_SLOT = 12


cdef struct SRows:
    # the sparse rows of one document (idx, cv = C_{u,idx}, e: n Le; the rest: n); sb, lzb as in _pass
    int* idx
    double* cv
    double* e
    int* nz
    double* m
    double* sb
    double* lzb


cdef inline SRows _srows(int* idx, double* cv, double* e, int* nz, double* m, double* sb,
                         double* lzb) noexcept nogil:
    cdef SRows s
    s.idx = idx
    s.cv = cv
    s.e = e
    s.nz = nz
    s.m = m
    s.sb = sb
    s.lzb = lzb
    return s


cdef struct Best:
    # the best n ≤ width topics offered so far (topic k, C_k and x = C_k + w̃_k; in no particular
    # order), the slot w of the worst (smallest x, ties: the larger k) and its x, thr (−inf until
    # width are held), how many offers entered
    int* k
    double* c
    double* x
    int n
    int width
    int w
    double thr
    int entered


cdef inline Best _best(int* k, double* c, double* x, int width) noexcept nogil:
    """An empty Best of the given width on the scratch k, c, x (width each)."""
    cdef Best b
    b.k = k
    b.c = c
    b.x = x
    b.n = 0
    b.width = width
    b.w = 0
    b.thr = -INFINITY
    b.entered = 0
    return b


cdef inline void _set_worst(Best* b) noexcept nogil:
    """Find the worst slot, the one a better topic replaces."""
    cdef int i
    b.w = 0
    for i in range(1, b.n):
        if b.x[i] < b.x[b.w] or (b.x[i] == b.x[b.w] and b.k[i] > b.k[b.w]):
            b.w = i
    b.thr = b.x[b.w]


cdef inline bint _offer(Best* b, int k, double c, double x) noexcept nogil:
    """Offer topic k (C_k = c, x = C_k + w̃_k; −inf: never held), not held: it takes the next free
    slot, or the worst one's if it beats it (ties: the lower k). Returns whether it entered."""
    cdef int slot
    if b.n < b.width:
        if x == -INFINITY:
            return False
        slot = b.n
        b.n = b.n + 1
    elif x > b.thr or (x == b.thr and k < b.k[b.w]):
        slot = b.w
    else:
        return False
    b.k[slot] = k
    b.c[slot] = c
    b.x[slot] = x
    b.entered = b.entered + 1
    if b.n == b.width:
        _set_worst(b)
    return True


cdef int _topl_all(const double* C, const double* wt, Py_ssize_t K, int Le, int* bi, double* bc,
                   double* bx) noexcept nogil:
    """The min(Le, K) topics k < K with the largest x_k = C_k + w̃_k, ties to the lower k, by a
    running-threshold scan: topics to bi, C_k to bc, x to bx (in no particular order); returns
    their number."""
    cdef Py_ssize_t k
    cdef Best b = _best(bi, bc, bx, Le)
    for k in range(K):
        _offer(&b, <int>k, C[k], C[k] + wt[k])
    return b.n


cdef void _top_list(const double* C, Py_ssize_t K, Py_ssize_t T, int* bi, double* bc, double* bx,
                    bnpvi_wk* top) noexcept nogil:
    """A row's list for _topl_ta: its T ≤ K largest C_k as (C_k, k) by decreasing C_k (ties: the
    lower k first); bi, bc, bx (T) are scratch."""
    cdef Py_ssize_t k
    cdef int i
    cdef Best b = _best(bi, bc, bx, <int>T)
    for k in range(K):
        _offer(&b, <int>k, C[k], C[k])
    for i in range(b.n):
        top[i].w = bc[i]
        top[i].k = bi[i]
    bnpvi_sort_wk(top, T)


cdef void _topl_sorted(const double* C, double cmax, const bnpvi_wk* srt, int nA, const double* pen,
                       Best* b) noexcept nogil:
    """Offer the active topics srt (sorted by decreasing w̃_k) to b in turn, with an exact early
    stop: once b is full and cmax + w̃_k (cmax = max_k C_k, a bound on every later x_k) is below
    the worst x held, no later topic can enter. pen_k = −inf for the topics b already holds (the
    seeds), which the scan passes over without a branch, 0 otherwise."""
    cdef int j, k
    for j in range(nA):
        if b.n == b.width and cmax + srt[j].w < b.thr:
            break
        k = srt[j].k
        _offer(b, k, C[k], (C[k] + srt[j].w) + pen[k])


cdef void _topl_ta(const double* C, const bnpvi_wk* top, Py_ssize_t T, const double* wt, const bnpvi_wk* srt,
                   int nA, double* pen, Best* b) noexcept nogil:
    """_topl_sorted by the threshold algorithm (Fagin, Lotem & Naor 2003) on two lists read in
    turn: the row's list ``top`` of its T largest C_k (_top_list; an inactive topic there has
    w̃ = −inf) and the active topics srt. A topic read in neither list has C_k at most the next
    entry of ``top`` (or its last once it is used up) and w̃_k at most the next of srt: once b is
    full and that sum is below the worst x held, no such topic can enter. So the result is the
    exact top, for far fewer reads of C than _topl_sorted when many topics are active (Hughes 2016
    thesis §7.3 / Alg. 7.4: the re-selections of the first iterations). A topic that enters gets
    pen_k = −inf, so that the other list passes over it; on exit pen is 0 at every topic read."""
    cdef Py_ssize_t i = 0, i0
    cdef int j = 0, j0, k
    cdef double c
    while j < nA:
        c = top[i].w if i < T else top[T - 1].w
        if b.n == b.width and c + srt[j].w < b.thr:
            break
        if i < T:
            k = top[i].k
            if _offer(b, k, top[i].w, (top[i].w + wt[k]) + pen[k]):
                pen[k] = -INFINITY
            i = i + 1
        k = srt[j].k
        if _offer(b, k, C[k], (C[k] + srt[j].w) + pen[k]):
            pen[k] = -INFINITY
        j = j + 1
    for i0 in range(i):
        pen[top[i0].k] = 0.0
    for j0 in range(j):
        pen[srt[j0].k] = 0.0


cdef void _sp_first(const double* C, const double* wt, Py_ssize_t K, int Le, int* idx, double* cv, double* e,
                    int* nz, double* m, int* bi, double* bc, double* bx) noexcept nogil:
    """First row of C: its top min(Le, K) of C + w̃ over all K (_topl_all), with its C, e and m."""
    cdef int n = _topl_all(C, wt, K, Le, bi, bc, bx)
    memcpy(idx, bi, n * sizeof(int))
    memcpy(cv, bc, n * sizeof(double))
    nz[0] = n
    _sp_exps(cv, e, n, m, True)


cdef inline void _sp_exps(const double* cv, double* e, int n, double* m, bint fresh) noexcept nogil:
    """m = max_i cv_i and e_i = exp(cv_i − m) for a row of n ≥ 1 slots: all of them when ``fresh``
    or when m changes, else only those marked e_i < 0 (the others hold that very number)."""
    cdef int i
    cdef double mx = cv[0], x
    for i in range(1, n):
        if cv[i] > mx:
            mx = cv[i]
    fresh = fresh or mx != m[0]
    m[0] = mx
    for i in range(n):
        if fresh or e[i] < 0.0:
            x = cv[i] - mx
            e[i] = exp(x) if x >= EXP_ZERO else 0.0


cdef int _sp_keep(const double* wt, int* idx, double* cv, double* e, int* nz, double* m) noexcept nogil:
    """Drop the inactive topics (w̃ = −inf) from a row's support, the others keeping their order, C
    and e (e and m redone when m changes); returns the number kept."""
    cdef int i, n = 0
    for i in range(nz[0]):
        if wt[idx[i]] == -INFINITY:
            break
    else:
        return nz[0]
    for i in range(nz[0]):
        if wt[idx[i]] != -INFINITY:
            idx[n] = idx[i]
            cv[n] = cv[i]
            e[n] = e[i]
            n = n + 1
    nz[0] = n
    if 0 < n:
        _sp_exps(cv, e, n, m, False)
    return n


cdef int _sp_select(const double* C, double cmax, const bnpvi_wk* top, Py_ssize_t T, const double* wt,
                     const bnpvi_wk* srt, int nA, int width, bint ta, int* idx, double* cv, double* e, int* nz,
                     double* m, int* bi, double* bc, double* bx, double* pen) noexcept nogil:
    """Re-select a row (its support active, see _sp_keep): the top ``width`` of C + w̃ over the
    active topics, by _topl_ta when ``ta``, else by _topl_sorted, seeded with the row's support.

    Seeded, the threshold starts near its final value: few topics enter, and the test that turns
    the others away is one the branch predictor gets right. A topic kept keeps its slot and its e
    when m is unchanged, so only the topics that enter cost an exponential (_sp_exps). Returns the
    number of topics that entered, their slots flagged 1 in bi (the others 0) when there are any.
    bi, bc, bx (width) are scratch; pen (K) is zero on entry and on exit.
    """
    cdef Best b = _best(bi, bc, bx, width)
    cdef int i, n = nz[0]
    for i in range(n):
        bi[i] = idx[i]
        bc[i] = cv[i]
        bx[i] = cv[i] + wt[idx[i]]
        pen[idx[i]] = -INFINITY
    b.n = n
    if n == width:
        _set_worst(&b)
    if ta:
        _topl_ta(C, top, T, wt, srt, nA, pen, &b)
    else:
        _topl_sorted(C, cmax, srt, nA, pen, &b)
    for i in range(n):
        pen[idx[i]] = 0.0
    if b.entered == 0:
        return 0
    n = 0
    for i in range(b.n):
        if i >= nz[0] or bi[i] != idx[i]:
            idx[i] = bi[i]
            cv[i] = bc[i]
            e[i] = -1.0
            bi[i] = 1
            n = n + 1
        else:
            bi[i] = 0
    nz[0] = b.n
    _sp_exps(cv, e, b.n, m, False)
    return n


cdef inline double _sp_direct(const double* C, const int* idx, int n, const double* wt, double* out,
                              double* mx_out) noexcept nogil:
    """Row on its support by log-sum-exp of C + w̃: out_i = r_ui. Returns ln s with
    s = Σ_i exp(x_i − mx), x_i = C_{idx_i} + w̃_{idx_i}; mx = max_i x_i goes to mx_out."""
    cdef int i
    cdef double mx = -INFINITY, s = 0.0, x, inv
    for i in range(n):
        x = C[idx[i]] + wt[idx[i]]
        out[i] = x
        if x > mx:
            mx = x
    for i in range(n):
        x = out[i] - mx
        out[i] = exp(x) if x >= EXP_ZERO else 0.0
        s = s + out[i]
    inv = 1.0 / s
    for i in range(n):
        out[i] = out[i] * inv
    mx_out[0] = mx
    return log(s)


cdef inline double _sp_sum(const double* e, const int* idx, const double* p, int nz) noexcept nogil:
    """s_u = Σ_i e_i p_{idx_i} in two partial sums (even and odd slots; half the chain of additions)."""
    cdef int i
    cdef double t0 = 0.0, t1 = 0.0
    for i in range(0, nz - 1, 2):
        t0 = t0 + e[i] * p[idx[i]]
        t1 = t1 + e[i + 1] * p[idx[i + 1]]
    if nz % 2:
        t0 = t0 + e[nz - 1] * p[idx[nz - 1]]
    return t0 + t1


cdef double _sp_pass(const Rows* rw, const SRows* s, const Opts* o, const double* wt, const double* p,
                     const int* act, int nA, bint select, double* acc, double* extra, int* bi, double* bc,
                     double* bx, double* pen, bnpvi_wk* srt) noexcept nogil:
    """One update of every row from the weights w̃ (p = exp w̃, −inf off the active list act),
    adding c_u e_ui / s_u to acc and the rows done directly (c_u r_ui) to extra at idx_ui.

    With ``select``, a row re-selects its top min(Le, |act|) topics over act (_sp_select; the
    active topics sorted by decreasing w̃ into srt (nA) when the first row needs them; rw.m holds
    max_k C_uk), the C (and list) of the next row's first candidates asked for in advance;
    otherwise it keeps its support and only its values change. A row of one topic has r = 1
    exactly. Returns the mass Σ_u c_u r_ui the re-selected rows put on topics that entered them.
    bi, bc, bx (Le) are scratch, pen (K) zero.
    """
    cdef Py_ssize_t u, Le = o.Le, K = o.K, T = o.T
    cdef int i, nz, width = <int>(Le if Le < nA else nA)
    cdef bint ready = False, ta = nA > TA_MIN_PER_SLOT * width
    cdef int fresh
    cdef double t, f, mx, c, moved = 0.0
    cdef const double* C
    cdef int* idx
    cdef double* e
    for u in range(rw.n):
        C = _crow(rw, u, K)
        idx = s.idx + u * Le
        e = s.e + u * Le
        fresh = 0
        # with at most Le active topics, the top min(Le, |act|) is the whole active set: a row
        # holding all of it keeps its support
        if select and (_sp_keep(wt, idx, s.cv + u * Le, e, &s.nz[u], &s.m[u]) < nA or nA > Le):
            if not ready:
                for i in range(nA):
                    srt[i].k = act[i]
                    srt[i].w = wt[act[i]]
                bnpvi_sort_wk(srt, nA)
                ready = True
            if u + 1 < rw.n:
                bnpvi_prefetch_topics(_crow(rw, u + 1, K), srt, min(nA, 2 * T if ta else PREFETCH_TOPICS))
                if ta:
                    bnpvi_prefetch(<const double*>_top(rw, u + 1, T), 2 * T)
            fresh = _sp_select(C, rw.m[u], _top(rw, u, T), T, wt, srt, nA, width, ta, idx, s.cv + u * Le, e,
                               &s.nz[u], &s.m[u], bi, bc, bx, pen)
        nz = s.nz[u]
        t = _sp_sum(e, idx, p, nz)
        c = rw.cnt[u]
        if nz == 1:
            # r_u = 1 exactly (L = 1 or one active topic): N gets c_u itself
            extra[idx[0]] = extra[idx[0]] + c
            s.sb[u] = t
            if t < S_MIN:
                s.sb[u] = 0.0
                s.lzb[u] = C[idx[0]] + wt[idx[0]]
            if fresh:
                moved = moved + c
        elif t >= S_MIN:
            s.sb[u] = t
            f = c / t
            for i in range(nz):
                acc[idx[i]] = acc[idx[i]] + f * e[i]
            if fresh:
                for i in range(nz):
                    if bi[i]:
                        moved = moved + f * (e[i] * p[idx[i]])
        else:
            s.sb[u] = 0.0
            s.lzb[u] = _sp_direct(C, idx, nz, wt, bx, &mx) + mx
            for i in range(nz):
                extra[idx[i]] = extra[idx[i]] + c * bx[i]
                if fresh and bi[i]:
                    moved = moved + c * bx[i]
    return moved


cdef inline void _sp_weights(const double* N, const double* a, const int* act, int nA, double* wt,
                             double* p) noexcept nogil:
    """w̃_k = ψ(N_k + a_k) − max_{j∈act} ψ(N_j + a_j) and p_k = exp(w̃_k) for k ∈ act."""
    cdef int j, k
    cdef double mx = -INFINITY
    for j in range(nA):
        k = act[j]
        wt[k] = _digamma(N[k] + a[k])
        if wt[k] > mx:
            mx = wt[k]
    for j in range(nA):
        k = act[j]
        wt[k] = wt[k] - mx
        p[k] = exp(wt[k]) if wt[k] >= EXP_ZERO else 0.0


cdef double _sp_iter(const Rows* rw, const SRows* s, const Opts* o, double* N, double* wt, double* p,
                     int* act, int* nA, bint select, double* acc, double* extra, int* bi, double* bc,
                     double* bx, double* pen, bnpvi_wk* srt, double* moved) noexcept nogil:
    """One iteration of the L-sparse mode; returns max_k |ΔN_k|.

    With ``select``: prune the active list to N_k > ε (when ε > 0 and some topic is left; a pruned
    topic gets w̃_k = −inf, p_k = 0 and N_k = 0); then weights on it (_sp_weights), every row
    (_sp_pass, re-selecting with ``select``; the mass put on topics that entered to ``moved``)
    and N from the rows.
    """
    cdef int j, k, n = 0, nold = nA[0]
    cdef double diff = 0.0, x, Nk
    if o.eps > 0.0 and select:
        for j in range(nold):
            if N[act[j]] > o.eps:
                n = n + 1
        if 0 < n < nold:
            n = 0
            for j in range(nold):
                k = act[j]
                if N[k] > o.eps:
                    act[n] = k
                    n = n + 1
                else:
                    if N[k] > diff:
                        diff = N[k]
                    N[k] = 0.0
                    wt[k] = -INFINITY
                    p[k] = 0.0
            nA[0] = n
    _sp_weights(N, o.a, act, nA[0], wt, p)
    for j in range(nA[0]):
        acc[act[j]] = 0.0
        extra[act[j]] = 0.0
    moved[0] = _sp_pass(rw, s, o, wt, p, act, nA[0], select, acc, extra, bi, bc, bx, pen, srt)
    for j in range(nA[0]):
        k = act[j]
        Nk = p[k] * acc[k] + extra[k]
        diff = _max_change(diff, Nk, N[k])
        N[k] = Nk
    return diff


cdef double _sp_objective(const Rows* rw, const SRows* s, const Opts* o, const int* act, int nA,
                          const double* N, const double* wt) noexcept nogil:
    """L_d of the rows s with the weights w̃ that made them (docs/topics.md); ln s_u goes to
    lzb[u] for the rows in the efficient form. Inactive topics (θ_k = a_k) add nothing beyond
    Σ_k lnΓ(a_k)."""
    cdef int j, k
    cdef double out = _rows_objective(rw.n, rw.cnt, s.m, s.sb, s.lzb), tot = o.a0
    out = out + o.g0
    for j in range(nA):
        k = act[j]
        tot = tot + N[k]
        out = out + (lgamma(N[k] + o.a[k]) - o.la[k])
        if N[k] != 0.0:
            out = out - N[k] * wt[k]
    return _objective_end(out, tot, o.a_rest)


cdef void _sp_finish(const Rows* rw, const SRows* s, const Opts* o, const double* wt, const double* p,
                     double* rk, double* lr, double* H, double* PH, double* Rv, int* If, int* Zf,
                     double* resp) noexcept nogil:
    """r of the rows s (weights w̃, p = exp w̃) to Rv, If, Zf (n Le, n Le, n) and, when resp is
    not NULL, to the zeroed (n, K) rows resp; the document's H (K, zeroed here) and PH (M)
    as in _finish, with t = r_ua + r_ub over the row's support. rk and lr (K) are zero on
    entry and on exit."""
    cdef Py_ssize_t u, K = o.K, Le = o.Le, jj
    cdef int i, k, nz
    cdef double inv, c, r, shift, ls, l
    cdef const double* C
    cdef const int* idx
    cdef const double* e
    cdef double* rv
    for k in range(K):
        H[k] = 0.0
    for jj in range(o.M):
        PH[jj] = 0.0
    for u in range(rw.n):
        C = _crow(rw, u, K)
        idx = s.idx + u * Le
        e = s.e + u * Le
        rv = Rv + u * Le
        nz = s.nz[u]
        c = rw.cnt[u]
        shift = 0.0
        ls = 0.0
        if nz == 1:
            rv[0] = 1.0
        elif s.sb[u] > 0.0:
            inv = 1.0 / s.sb[u]
            for i in range(nz):
                rv[i] = (e[i] * p[idx[i]]) * inv
            shift = s.m[u]
            ls = s.lzb[u]
        else:
            ls = _sp_direct(C, idx, nz, wt, rv, &shift)
        for i in range(nz):
            k = idx[i]
            r = rv[i]
            l = _log_r(r, C[k], shift, wt[k], ls)
            H[k] = H[k] - c * (r * l)
            If[u * Le + i] = k
            if resp != NULL:
                resp[u * K + k] = r
            if o.M > 0:
                rk[k] = r
                lr[k] = l
        Zf[u] = nz
        if o.M == 0:
            continue
        _pair_entropies(rk, lr, o.pairs, o.M, c, PH)
        for i in range(nz):
            rk[idx[i]] = 0.0
            lr[idx[i]] = 0.0


cdef void _sp_copy(Py_ssize_t n, Py_ssize_t Le, const SRows* s, const SRows* q) noexcept nogil:
    """The supports and values of the n rows s copied to q."""
    memcpy(q.idx, s.idx, n * Le * sizeof(int))
    memcpy(q.cv, s.cv, n * Le * sizeof(double))
    memcpy(q.e, s.e, n * Le * sizeof(double))
    memcpy(q.nz, s.nz, n * sizeof(int))
    memcpy(q.m, s.m, n * sizeof(double))


cdef void _sp_doc(const Rows* rw, SRows s, SRows q, const Opts* o, const double* init, const int* ti,
                  const double* tc, const double* te, const int* tz, const double* tm, const double* wt0,
                  const double* p0, double* ws, int* wi, double* Nout, long long* iters_out, double* obj_out,
                  long long* acc_out, double* H, double* PH, double* Rv, int* If, int* Zf, double* resp) noexcept nogil:
    """The whole L-sparse local step of one document with rows (docs/topics.md, "L-sparse mode").

    s and q hold the rows of the current state and of a restart proposal (a copy of s at its
    start; swapped when it is accepted); rw.top holds the rows' lists and rw.m receives their
    heads, max_k C_uk. ti, tc, te, tz, tm are the first rows of the word types (table mode, cold
    start), else NULL; wt0, p0 the cold first weights w̃ and exp w̃ (K). From the first pass on, w̃
    is −inf off the active set (the lists hold inactive topics too). ws holds SP_VECS vectors of
    stride o.pk (rk, lr and pen zero on entry and on exit; srt takes two), wi SP_IVECS int vectors
    of stride o.pk. Outputs as for _doc, r to Rv, If, Zf (and resp).
    """
    cdef Py_ssize_t K = o.K, pk = o.pk, Le = o.Le, u, k
    cdef const double* a = o.a
    cdef double* wt = ws
    cdef double* p = ws + pk
    cdef double* N = ws + 2 * pk
    cdef double* acc = ws + 3 * pk
    cdef double* extra = ws + 4 * pk
    cdef double* wq = ws + 5 * pk
    cdef double* pq = ws + 6 * pk
    cdef double* Nq = ws + 7 * pk
    cdef double* bx = ws + 8 * pk
    cdef double* rk = ws + 9 * pk
    cdef double* lr = ws + 10 * pk
    cdef bnpvi_wk* srt = <bnpvi_wk*>(ws + 11 * pk)
    cdef double* bc = ws + 13 * pk
    cdef double* pen = ws + 14 * pk
    cdef int* act = wi
    cdef int* actq = wi + pk
    cdef int* cand = wi + 2 * pk
    cdef int* bi = wi + 3 * pk
    cdef int* iswap
    cdef double* swap
    cdef SRows sswap
    cdef int nA = 0, nAq, c, j, i, ncand, it, t
    cdef bint select
    cdef long long accepted = 0
    cdef double diff, cur, prop, tokens = 0.0, moved = INFINITY, mv

    # max_k C_uk (the head of each row's list) and the document's tokens
    for u in range(rw.n):
        rw.m[u] = _top(rw, u, o.T)[0].w
        tokens = tokens + rw.cnt[u]
    # first weights over all K, the rows' top L of C_u + w̃ (a word type's from the table)
    if init != NULL:
        _first_weights(init, a, K, wt, p)
    else:
        memcpy(wt, wt0, K * sizeof(double))
        memcpy(p, p0, K * sizeof(double))
    for u in range(rw.n):
        if tz != NULL:
            k = rw.wid[u]
            memcpy(s.idx + u * Le, ti + k * Le, Le * sizeof(int))
            memcpy(s.cv + u * Le, tc + k * Le, Le * sizeof(double))
            memcpy(s.e + u * Le, te + k * Le, Le * sizeof(double))
            s.nz[u] = tz[k]
            s.m[u] = tm[k]
        else:
            _sp_first(_crow(rw, u, K), wt, K, <int>Le, s.idx + u * Le, s.cv + u * Le, s.e + u * Le, &s.nz[u],
                      &s.m[u], bi, bc, bx)
    # the active set: the topics of the rows' supports, in increasing order (w̃ = −inf off it)
    for k in range(K):
        acc[k] = 0.0
    for u in range(rw.n):
        for i in range(s.nz[u]):
            acc[s.idx[u * Le + i]] = 1.0
    for k in range(K):
        if acc[k] != 0.0:
            act[nA] = <int>k
            nA = nA + 1
            acc[k] = 0.0
        else:
            wt[k] = -INFINITY
        extra[k] = 0.0
    _sp_pass(rw, &s, o, wt, p, act, nA, False, acc, extra, bi, bc, bx, pen, srt)
    for j in range(nA):
        k = act[j]
        N[k] = p[k] * acc[k] + extra[k]
    it = 0
    while it < o.max_iters:
        it = it + 1
        select = o.sel_all or it % SELECT_EVERY == 0 or (it <= SELECT_FIRST and moved >= STABLE_MASS * tokens)
        diff = _sp_iter(rw, &s, o, N, wt, p, act, &nA, select, acc, extra, bi, bc, bx, pen, srt, &mv)
        if select:
            moved = mv
        if diff < o.thr:
            break
    iters_out[0] = it
    cur = _sp_objective(rw, &s, o, act, nA, N, wt)

    # sparse restarts: N'_j = 0, then restart_iters iterations that all select
    if o.n_restarts > 0:
        ncand = <int>_candidates(N, act, nA, o.n_restarts, cand)
        for c in range(ncand):
            if _n_used(N, act, nA) < 2:
                break
            j = cand[c]
            for i in range(nA):
                k = act[i]
                actq[i] = <int>k
                Nq[k] = N[k]
            nAq = nA
            Nq[j] = 0.0
            _sp_copy(rw.n, Le, &s, &q)
            memcpy(wq, wt, K * sizeof(double))
            for t in range(o.restart_iters):
                _sp_iter(rw, &q, o, Nq, wq, pq, actq, &nAq, True, acc, extra, bi, bc, bx, pen, srt, &mv)
            prop = _sp_objective(rw, &q, o, actq, nAq, Nq, wq)
            if _accepts(prop, cur):
                cur = prop
                accepted = accepted + 1
                sswap = s
                s = q
                q = sswap
                swap = N
                N = Nq
                Nq = swap
                swap = wt
                wt = wq
                wq = swap
                swap = p
                p = pq
                pq = swap
                iswap = act
                act = actq
                actq = iswap
                nA = nAq

    _sp_finish(rw, &s, o, wt, p, rk, lr, H, PH, Rv, If, Zf, resp)
    for k in range(K):
        Nout[k] = 0.0
    for j in range(nA):
        Nout[act[j]] = N[act[j]]
    obj_out[0] = cur
    acc_out[0] = accepted


# ------------------------------------------------------------------------ batch
def doc_topic_step_sparse(const double[:, ::1] log_lik, const long long[::1] word_ids, bint table,
                          const double[::1] counts, const long long[::1] doc_range, const double[::1] prior,
                          double prior_rest, const double[:, ::1] init_counts, bint use_init, int max_iters,
                          double conv_thr, int n_restarts, int restart_iters, const long long[:, ::1] pairs,
                          double[:, ::1] resp, bint keep_resp, double[:, ::1] doc_counts, long long[::1] iters,
                          double[::1] objective, long long[::1] restarts_accepted, double[::1] entropy,
                          double[:, ::1] word_topic, double[::1] pair_entropy, int n_threads, int sparse_L,
                          double active_eps, bint select_always):
    """The L-sparse local step of every document into the outputs (module docstring,
    "L-sparse mode"); arguments as for ``doc_topic_step`` (topic_dense.pyx), plus L = ``sparse_L`` ≥ 1 (any
    L, also ≥ K: rows then keep all K topics), ε = ``active_eps`` ≥ 0 (0: no pruning) and
    ``select_always`` (re-select at every iteration, not only on the schedule). ``resp``
    (read only when ``keep_resp``) must be zero on entry, like ``entropy``, ``word_topic``
    and ``pair_entropy``.
    """
    cdef Py_ssize_t K = log_lik.shape[1], V = log_lik.shape[0]
    cdef Py_ssize_t D = doc_range.shape[0] - 1, M = pairs.shape[0]
    cdef Py_ssize_t pk = _padded(K), pm = _padded(M), Le = min(<Py_ssize_t>sparse_L, K)
    cdef Py_ssize_t T = min(K, LIST_PER_SLOT * Le, LIST_MAX)
    cdef Py_ssize_t d, d0, d1, u, u0, n, ub, k, v, tid, off, rows
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef int i
    cdef bint warm = use_init and init_counts.shape[0] == D
    cdef bint first_table = table and not warm
    cdef Opts o = _opts(K, &prior[0], prior_rest, max_iters, conv_thr, n_restarts, restart_iters, pairs)
    cdef Rows rw
    cdef SRows s, q
    cdef double c
    cdef double* W

    if D <= 0:
        return
    rows = _block_rows(doc_range)
    la_arr = np.empty(K)
    cdef double[::1] la = la_arr
    o.Le = Le
    o.T = T
    o.eps = active_eps
    o.sel_all = select_always
    o.la = &la[0]
    for k in range(K):
        la[k] = lgamma(prior[k])
        o.g0 = o.g0 + la[k]
        o.a0 = o.a0 + prior[k]
    # cold first weights w̃ = ln a − max ln a and exp w̃
    cdef double[::1] wt0 = np.empty(K)
    cdef double[::1] p0 = np.empty(K)
    _first_weights(NULL, &prior[0], K, &wt0[0], &p0[0])
    # rows of one block: current state and proposal (idx, cv, e, nz, m, sb, lzb), max_k C_uk, returned r
    cdef int[::1] si = np.empty(2 * rows * Le, dtype=np.intc)
    cdef double[::1] sc = np.empty(2 * rows * Le)
    cdef double[::1] se = np.empty(2 * rows * Le)
    cdef int[::1] sz = np.empty(2 * rows, dtype=np.intc)
    cdef double[::1] sm = np.empty(2 * rows)
    cdef double[::1] st = np.empty(4 * rows)
    cdef double[::1] cmb = np.empty(rows)
    cdef double[::1] rv = np.empty(rows * Le)
    cdef int[::1] rf = np.empty(rows * Le, dtype=np.intc)
    cdef int[::1] zf = np.empty(rows, dtype=np.intc)
    # the rows' lists of their T largest C_uk (_top_list; a bnpvi_wk is two doubles): of the word
    # types used in table mode, else of the rows of one block
    cdef double[::1] tl = np.empty(2 * T * (V if table else rows))
    cdef bnpvi_wk* top = <bnpvi_wk*>&tl[0] if tl.shape[0] > 0 else NULL
    # table mode, cold start: the first rows of the word types used (top L of C_v + w̃)
    cdef int[::1] ti = np.empty(V * Le if first_table else 0, dtype=np.intc)
    cdef double[::1] tc = np.empty(V * Le if first_table else 0)
    cdef double[::1] te = np.empty(V * Le if first_table else 0)
    cdef int[::1] tz = np.empty(V if first_table else 0, dtype=np.intc)
    cdef double[::1] tm = np.empty(V if first_table else 0)
    cdef unsigned char[::1] seen = np.zeros(V if table else 0, dtype=np.uint8)
    # per-document entropies of one block; per-thread vectors (rk, lr zero)
    cdef double[:, ::1] hb = np.empty((BLOCK_DOCS, pk))
    cdef double[:, ::1] pb = np.empty((BLOCK_DOCS, pm))
    cdef double[:, ::1] ws = np.zeros((nt, SP_VECS * pk))
    cdef int[:, ::1] wi = np.empty((nt, SP_IVECS * pk), dtype=np.intc)
    cdef const double* Cb = &log_lik[0, 0] if V > 0 else NULL

    with nogil:
        if table:
            _mark_words(seen, word_ids)
            for v in prange(V, schedule="static", num_threads=nt):
                if seen[v]:
                    tid = threadid()
                    _top_list(&log_lik[v, 0], K, T, &wi[tid, 3 * pk], &ws[tid, 13 * pk], &ws[tid, 8 * pk],
                              top + v * T)
                    if first_table:
                        _sp_first(&log_lik[v, 0], &wt0[0], K, <int>Le, &ti[v * Le], &tc[v * Le], &te[v * Le], &tz[v],
                                  &tm[v], &wi[tid, 3 * pk], &ws[tid, 13 * pk], &ws[tid, 8 * pk])
        d0 = 0
        while d0 < D:
            d1 = _block_end(doc_range, d0)
            ub = doc_range[d0]
            for d in prange(d0, d1, schedule="dynamic", num_threads=nt):
                tid = threadid()
                u0 = doc_range[d]
                n = doc_range[d + 1] - u0
                off = u0 - ub
                if n == 0:
                    # a document without rows touches no row array (&x[off] could be past the end)
                    _empty_doc(&o, &doc_counts[d, 0], &iters[d], &objective[d], &restarts_accepted[d],
                               &hb[d - d0, 0], &pb[d - d0, 0])
                else:
                    if table:
                        rw = _rows(Cb, &word_ids[u0], NULL, &cmb[off], &counts[u0], n, top)
                    else:
                        rw = _rows(&log_lik[u0, 0], NULL, NULL, &cmb[off], &counts[u0], n, top + off * T)
                        for u in range(n):
                            _top_list(&log_lik[u0 + u, 0], K, T, &wi[tid, 3 * pk], &ws[tid, 13 * pk],
                                      &ws[tid, 8 * pk], top + (off + u) * T)
                    s = _srows(&si[off * Le], &sc[off * Le], &se[off * Le], &sz[off], &sm[off], &st[off],
                               &st[rows + off])
                    q = _srows(&si[(rows + off) * Le], &sc[(rows + off) * Le], &se[(rows + off) * Le], &sz[rows + off],
                               &sm[rows + off], &st[2 * rows + off], &st[3 * rows + off])
                    _sp_doc(&rw, s, q, &o, &init_counts[d, 0] if warm else NULL,
                            &ti[0] if first_table else NULL, &tc[0] if first_table else NULL,
                            &te[0] if first_table else NULL,
                            &tz[0] if first_table else NULL, &tm[0] if first_table else NULL, &wt0[0], &p0[0],
                            &ws[tid, 0], &wi[tid, 0], &doc_counts[d, 0], &iters[d], &objective[d],
                            &restarts_accepted[d], &hb[d - d0, 0], &pb[d - d0, 0], &rv[off * Le], &rf[off * Le],
                            &zf[off], &resp[u0, 0] if keep_resp else NULL)
            # sums over documents and rows, in their order
            _add_entropies(entropy, pair_entropy, hb, pb, d1 - d0, K, M)
            if table:
                for u in range(ub, doc_range[d1]):
                    c = counts[u]
                    W = &word_topic[word_ids[u], 0]
                    off = (u - ub) * Le
                    for i in range(zf[u - ub]):
                        W[rf[off + i]] = W[rf[off + i]] + c * rv[off + i]
            d0 = d1
