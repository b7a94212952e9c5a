# cython: initializedcheck=False, nonecheck=False
"""What the dense and the L-sparse document steps of topic models (topic_dense.pyx, topic_sparse.pyx) share,
inline in each: a document's rows, the settings, ψ, the weights' first value and shift, the restarts'
candidates and test, the objective's terms (Hughes 2016 thesis Alg. 5.1, Eq. 5.44-5.46), the entropies' terms
(Eq. 5.47; Hughes, Kim & Sudderth 2015 §5.1) and the blocks of documents. The math and the order of every
sum: docs/topics.md, "The compiled document step"."""
from libc.math cimport exp, log, lgamma, INFINITY


cdef extern from *:
    """
    /* exp(x) rounds to +0.0 for every x < ln(2^-1075) = -745.1332...: skip the slow libm call there. */
    static const double EXP_ZERO = -745.2;
    /* Rows with s_u below this are done directly (terms lost to underflow, < K 2^-1022, are then negligible
       next to s_u). */
    static const double S_MIN = 1e-250;
    /* A topic is "used" by a document (a restart candidate) when N_dk exceeds this. */
    static const double USED_MIN = 0.1;
    /* A restart is accepted when it gains more than this times 1 + |L_d| (more than rounding: a proposal that
       returns to the current state must not win or lose by rounding noise). */
    static const double MIN_GAIN = 1e-12;
    /* psi(x) = psi(x0) + sum_{n>=1} (-1)^{n+1} zeta(n+1, x0) (x - x0)^n about the positive root x0 (zeta the
       Hurwitz zeta function; coefficients from scipy.special.zeta). Used for |x - x0| < 0.25, where psi is
       small and the recurrence would cancel; 24 terms leave < 1e-18 of the result. */
    static const double DG_ROOT = 1.4616321449683623;
    static const double DG_ROOT_VAL = -9.241265521729427e-17;
    static const double DG_ROOT_COEF[24] = {
        0.9676722454476214, -0.44276316898359214, 0.2584997609556512, -0.16394270544240658,
        0.10782405069126239, -0.07219956125645476, 0.048804288164143145, -0.033161126474847376,
        0.022597648232218125, -0.015424765904948968, 0.010538791616612182, -0.007204534386356875,
        0.004926781395729858, -0.0033698016554393317, 0.00230512632673493, -0.0015769367714301987,
        0.0010788252019162975, -0.000738070938996006, 0.0005049532658346026, -0.0003454680251063082,
        0.00023635601564027086, -0.00016170622091974825, 0.00011063372768747429, -7.569179582195077e-05,
    };

    /* Ask for the cache lines of x[0:n] (a table row read next, at a place the hardware
       cannot guess). */
    static void bnpvi_prefetch(const double* x, Py_ssize_t n)
    {
        Py_ssize_t i;
        for (i = 0; i < n; i += 8)
            __builtin_prefetch(x + i);
    }

    /* A topic k and its weight w (L-sparse mode). */
    typedef struct { double w; int k; } bnpvi_wk;
    """
    const double EXP_ZERO
    const double S_MIN
    const double USED_MIN
    const double MIN_GAIN
    const double DG_ROOT
    const double DG_ROOT_VAL
    const double DG_ROOT_COEF[24]
    void bnpvi_prefetch(const double* x, Py_ssize_t n) noexcept nogil
    ctypedef struct bnpvi_wk:
        double w
        int k


cdef enum:
    # a block of documents: at most this many documents and rows (a longer document alone)
    BLOCK_DOCS = 512
    BLOCK_ROWS = 16384


cdef struct Rows:
    # the n rows of one document: C_u at C + i_u K with i_u = wid[u] (table mode) or u
    # (dense mode, wid NULL); L_u at L + u K (then r_u), m_u = m[u], c_u = cnt[u]; L-sparse
    # mode: the list of row u's T largest C_uk at top + i_u T (_top_list), m_u = max_k C_uk, L unused
    const double* C
    const long long* wid
    double* L
    double* m
    const double* cnt
    Py_ssize_t n
    const bnpvi_wk* top


cdef struct Opts:
    # the settings every document shares (see doc_topic_step)
    Py_ssize_t K
    Py_ssize_t pk
    const double* a
    double a_rest
    int max_iters
    double thr
    int n_restarts
    int restart_iters
    const long long* pairs
    Py_ssize_t M
    # L-sparse mode only (see _sp_doc): row width Le = min(L, K), length T of the rows' lists,
    # pruning threshold ε, select at every iteration, lnΓ(a_k), Σ_k lnΓ(a_k) and Σ_k a_k
    Py_ssize_t Le
    Py_ssize_t T
    double eps
    bint sel_all
    const double* la
    double g0
    double a0


cdef inline Py_ssize_t _padded(Py_ssize_t n) noexcept nogil:
    """n rounded up to 8 doubles plus one 64-byte line (no false sharing between threads)."""
    return ((n + 7) // 8 + 1) * 8


cdef inline Opts _opts(Py_ssize_t K, const double* a, double a_rest, int max_iters, double thr, int n_restarts,
                       int restart_iters, const long long[:, ::1] pairs) noexcept nogil:
    """The settings both modes read; the L-sparse mode's own (L = K, no lists, no pruning, no lnΓ(a)) are
    set by its caller."""
    cdef Opts o
    o.K = K
    o.pk = _padded(K)
    o.a = a
    o.a_rest = a_rest
    o.max_iters = max_iters
    o.thr = thr
    o.n_restarts = n_restarts
    o.restart_iters = restart_iters
    o.M = pairs.shape[0]
    o.pairs = &pairs[0, 0] if o.M > 0 else NULL
    o.Le = K
    o.T = 0
    o.eps = 0.0
    o.sel_all = False
    o.la = NULL
    o.g0 = 0.0
    o.a0 = 0.0
    return o


cdef inline double _digamma(double x) noexcept nogil:
    """ψ(x) for x > 0, to about 1e-15 relative (ψ(0) = −inf).

    Near the root: the Taylor series of DG_ROOT_COEF. Otherwise ψ(x) = ψ(x + n) − Σ_{i<n} 1/(x + i)
    with x + n ≥ 10, and ψ(y) = ln y − 1/(2y) − Σ_{k=1}^{7} B_{2k} / (2k y^{2k})
    (truncation error < 5e-17 at y = 10).
    """
    cdef double t, acc, y2
    cdef int n
    if x - DG_ROOT < 0.25 and DG_ROOT - x < 0.25:
        t = x - DG_ROOT
        acc = 0.0
        for n in range(23, -1, -1):
            acc = acc * t + DG_ROOT_COEF[n]
        return DG_ROOT_VAL + acc * t
    if x <= 0.0:
        return -INFINITY
    acc = 0.0
    while x < 10.0:
        acc = acc - 1.0 / x
        x = x + 1.0
    y2 = 1.0 / (x * x)
    # B2/2 = 1/12, B4/4 = −1/120, B6/6 = 1/252, B8/8 = −1/240, B10/10 = 1/132,
    # B12/12 = −691/32760, B14/14 = 1/12
    t = y2 * (1.0 / 12.0 - y2 * (1.0 / 120.0 - y2 * (1.0 / 252.0 - y2 * (1.0 / 240.0 - y2 * (
        1.0 / 132.0 - y2 * (691.0 / 32760.0 - y2 * (1.0 / 12.0)))))))
    return acc + (log(x) - 0.5 / x - t)


# ------------------------------------------------------------------ one document
cdef inline Rows _rows(const double* C, const long long* wid, double* L, double* m, const double* cnt,
                       Py_ssize_t n, const bnpvi_wk* top) noexcept nogil:
    cdef Rows rw
    rw.C = C
    rw.wid = wid
    rw.L = L
    rw.m = m
    rw.cnt = cnt
    rw.n = n
    rw.top = top
    return rw


cdef inline const double* _crow(const Rows* rw, Py_ssize_t u, Py_ssize_t K) noexcept nogil:
    """C_u."""
    return rw.C + (rw.wid[u] if rw.wid != NULL else u) * K


cdef inline const bnpvi_wk* _top(const Rows* rw, Py_ssize_t u, Py_ssize_t T) noexcept nogil:
    """The list of row u's T largest C_uk (L-sparse mode, _top_list)."""
    return rw.top + (rw.wid[u] if rw.wid != NULL else u) * T


cdef inline void _shift(double* wt, double* p, Py_ssize_t K) noexcept nogil:
    """Shift w̃ in place so that its maximum is 0, and p_k = exp(w̃_k)."""
    cdef Py_ssize_t k
    cdef double mx = -INFINITY
    for k in range(K):
        if wt[k] > mx:
            mx = wt[k]
    for k in range(K):
        wt[k] = wt[k] - mx
        p[k] = exp(wt[k]) if wt[k] >= EXP_ZERO else 0.0


cdef inline void _first_weights(const double* init, const double* a, Py_ssize_t K, double* wt,
                                double* p) noexcept nogil:
    """The first weights w̃ (shifted) and p = exp w̃: from warm-start counts, ψ(init_k + a_k), or, when init is
    NULL, from the likelihood, ln a_k."""
    cdef Py_ssize_t k
    if init != NULL:
        for k in range(K):
            wt[k] = _digamma(init[k] + a[k])
    else:
        for k in range(K):
            wt[k] = log(a[k])
    _shift(wt, p, K)


cdef inline double _max_change(double diff, double new, double old) noexcept nogil:
    """max(diff, |new − old|) (a NaN change leaves diff)."""
    cdef double x = new - old
    if x < 0.0:
        x = -x
    return x if x > diff else diff


cdef inline Py_ssize_t _n_used(const double* N, const int* act, Py_ssize_t n) noexcept nogil:
    """How many of the topics act[0:n] (0..n−1 when act is NULL) are used: N_k > USED_MIN."""
    cdef Py_ssize_t j, used = 0
    for j in range(n):
        if N[j if act == NULL else act[j]] > USED_MIN:
            used += 1
    return used


cdef inline Py_ssize_t _candidates(const double* N, const int* act, Py_ssize_t n, Py_ssize_t n_restarts,
                                   int* cand) noexcept nogil:
    """The restart candidates: the (at most ``n_restarts``, and fewer than the used) used topics among
    act[0:n] (0..n−1 when act is NULL; act increasing) with the smallest N_k, in increasing (N_k, k) to cand;
    returns their number."""
    cdef Py_ssize_t c, j, k, best, most = _n_used(N, act, n) - 1
    cdef double pv = -INFINITY, bv
    cdef Py_ssize_t pk = -1
    if n_restarts < most:
        most = n_restarts
    if most <= 0:
        return 0
    for c in range(most):
        best = -1
        bv = INFINITY
        for j in range(n):
            k = j if act == NULL else act[j]
            if N[k] > USED_MIN and (N[k] > pv or (N[k] == pv and k > pk)):
                if N[k] < bv:
                    bv = N[k]
                    best = k
        if best < 0:
            return c
        cand[c] = <int>best
        pv = bv
        pk = best
    return most


cdef inline bint _accepts(double prop, double cur) noexcept nogil:
    """A restart proposal of objective ``prop`` beats the current ``cur`` by more than rounding."""
    return prop - cur > MIN_GAIN * (1.0 + (cur if cur > 0.0 else -cur))


cdef inline double _rows_objective(Py_ssize_t n, const double* cnt, const double* m, const double* sb,
                                   double* lzb) noexcept nogil:
    """Σ_u c_u (m_u + ln s_u) of L_d, ln s_u to lzb[u] for a row in the efficient form (sb[u] = s_u > 0); a
    row done directly (sb[u] = 0) has its log normaliser in lzb[u] already."""
    cdef Py_ssize_t u
    cdef double out = 0.0
    for u in range(n):
        if sb[u] > 0.0:
            lzb[u] = log(sb[u])
            out = out + cnt[u] * (m[u] + lzb[u])
        else:
            out = out + cnt[u] * lzb[u]
    return out


cdef inline double _objective_end(double out, double tot, double a_rest) noexcept nogil:
    """L_d from ``out`` (every term but the last two) and ``tot`` = Σ_k θ_dk: + lnΓ(a_rest) −
    lnΓ(Σ_k θ_dk + a_rest), without a_rest when it is 0 (LDA)."""
    if a_rest > 0.0:
        out = out + lgamma(a_rest)
        tot = tot + a_rest
    return out - lgamma(tot)


cdef inline double _log_r(double r, double c, double shift, double w, double ls) noexcept nogil:
    """ln r_uk of a responsibility r = r_uk with C_uk = c, w̃_k = w and the row's shift and ln s: (c − shift)
    + w − ls, or ln r itself where r > 1/2 (that sum would cancel), 0 where r = 0 (so that r ln r = 0)."""
    if r > 0.5:
        return log(r)
    if r > 0.0:
        return ((c - shift) + w) - ls
    return 0.0


cdef inline void _pair_entropies(const double* r, const double* lr, const long long* pairs, Py_ssize_t M,
                                 double c, double* PH) noexcept nogil:
    """PH_j −= c t ln t, t = r_a + r_b for pairs[j] = (a, b), of a row's r and ln r (by topic): the entry's
    ln r where t rounds to r_a (or r_b), else ln t."""
    cdef Py_ssize_t j, a, b
    cdef double t, tl
    for j in range(M):
        a = pairs[2 * j]
        b = pairs[2 * j + 1]
        t = r[a] + r[b]
        if t == r[a]:
            tl = r[a] * lr[a]
        elif t == r[b]:
            tl = r[b] * lr[b]
        else:
            tl = t * log(t)
        PH[j] = PH[j] - c * tl


cdef inline void _empty_doc(const Opts* o, double* Nout, long long* iters_out, double* obj_out, long long* acc_out,
                            double* H, double* PH) noexcept nogil:
    """The outputs of a document without rows: N_d = 0, H = PH = 0, 0 iterations and restarts,
    L_d = Σ_k lnΓ(a_k) + lnΓ(a_rest) − lnΓ(Σ_k a_k + a_rest)."""
    cdef Py_ssize_t k, j
    cdef double cur = 0.0, tot = 0.0
    for k in range(o.K):
        Nout[k] = 0.0
        H[k] = 0.0
        cur = cur + lgamma(o.a[k])
        tot = tot + o.a[k]
    for j in range(o.M):
        PH[j] = 0.0
    obj_out[0] = _objective_end(cur, tot, o.a_rest)
    iters_out[0] = 0
    acc_out[0] = 0


# ------------------------------------------------------------------------ batch
cdef inline Py_ssize_t _block_end(const long long[::1] doc_range, Py_ssize_t d0) noexcept nogil:
    """End (exclusive) of the block of documents from d0: at most BLOCK_DOCS documents and
    BLOCK_ROWS rows, and at least one document."""
    cdef Py_ssize_t d1 = d0 + 1, D = doc_range.shape[0] - 1
    while d1 < D and d1 - d0 < BLOCK_DOCS and doc_range[d1 + 1] - doc_range[d0] <= BLOCK_ROWS:
        d1 = d1 + 1
    return d1


cdef inline Py_ssize_t _block_rows(const long long[::1] doc_range) noexcept nogil:
    """The most rows of a block (at least 1)."""
    cdef Py_ssize_t d0 = 0, d1, rows = 0, D = doc_range.shape[0] - 1
    while d0 < D:
        d1 = _block_end(doc_range, d0)
        rows = max(rows, doc_range[d1] - doc_range[d0])
        d0 = d1
    return max(rows, 1)


cdef inline void _mark_words(unsigned char[::1] seen, const long long[::1] word_ids) noexcept nogil:
    """seen[v] = 1 for every word type v of the batch (table mode)."""
    cdef Py_ssize_t u
    for u in range(word_ids.shape[0]):
        seen[word_ids[u]] = 1


cdef inline void _add_entropies(double[::1] entropy, double[::1] pair_entropy, const double[:, ::1] hb,
                                const double[:, ::1] pb, Py_ssize_t n_docs, Py_ssize_t K, Py_ssize_t M) noexcept nogil:
    """Add the block's per-document H (rows of hb) and PH (rows of pb) to the batch's, in document order."""
    cdef Py_ssize_t d, k, j
    for d in range(n_docs):
        for k in range(K):
            entropy[k] = entropy[k] + hb[d, k]
        for j in range(M):
            pair_entropy[j] = pair_entropy[j] + pb[d, j]
