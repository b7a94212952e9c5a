# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled document-level local step of the HDP topic model (and of LDA).

Never call these directly: ``bnpvi.kernels.topic`` validates dtypes, shapes,
contiguity, finiteness and ``doc_range``, allocates the outputs and checks the
result. Every function here assumes valid, C-contiguous input.

Math (Hughes 2016 thesis, Alg. 5.1 / Eq. 5.44-5.46). Document d is rows u of
C = log_lik with token counts c_u; a = prior (α β̂_k), a_rest = α β̂_{>K}. Block
coordinate ascent alternates

    r_uk ∝ exp(C_uk + w_k),   N_dk = Σ_u c_u r_uk,   θ_dk = N_dk + a_k,   w_k = ψ(θ_dk)

(ψ(Σ θ) is constant in k and dropped). The first weights are w_k = ln a_k ("from the
likelihood"), or ψ(N⁰_dk + a_k) for warm-start counts N⁰. One iteration is one update
of w from N followed by one of N (through r); the loop stops once
max_k |N_dk(new) − N_dk(old)| < conv_thr or after max_iters iterations, so N_d is
always the count of the current r. Efficient form: per row m_u = max_k C_uk and
L_uk = exp(C_uk − m_u), computed once per document (stored in ``resp`` until the
document is done); with w̃ = w − max w and p_k = exp(w̃_k), s_u = Σ_k L_uk p_k and
N_k = p_k Σ_u c_u L_uk / s_u. A row whose s_u < 1e-250 (its best topics have
underflowing weights) is done directly by log-sum-exp of C_u + w̃ instead, so the
form never divides by an underflowed sum.

Objective (collapsed over θ; the constant c_Dir(a, a_rest) left out). For r from w̃
and θ = N(r) + a,

    L_d = Σ_u c_u (m_u + ln s_u) − Σ_k N_dk w̃_k + Σ_k lnΓ(θ_dk) + lnΓ(a_rest) − lnΓ(Σ_k θ_dk + a_rest),

without the lnΓ(a_rest) term when a_rest = 0 (LDA). It equals
Σ_u c_u Σ_k r_uk (C_uk − ln r_uk) − c_Dir(θ_d, a_rest) and never decreases over the
iterations (each half-step maximises it in r or in θ).

Sparse restarts (Hughes, Kim & Sudderth 2015 (AISTATS), sparse restarts). After the
loop, the topics with N_dk > 0.1 are candidates, smallest first (ties: lower k), at
most n_restarts of them and at most (number used − 1). For candidate j (skipped, and
the rest too, once fewer than two topics of the current state have N_dk > 0.1):
N' = N_d with N'_j = 0, restart_iters iterations from θ' = N' + a, and the proposal
is accepted iff its L_d is larger than the current one by more than rounding:
L'_d − L_d > 1e-12 (1 + |L_d|). (Proposals often return to the current state, and their
L_d then differs from the current one by rounding noise only.)

ψ is :c:func:`_digamma` below (recurrence to x ≥ 10, asymptotic series; Taylor series
about the positive root near it); lnΓ is libm's ``lgamma``.

Determinism
-----------
Documents are independent: each one is done start to finish by one thread in a fixed
order of operations, with per-thread scratch, and writes only its own outputs. So
results are bit-identical for any thread count, including builds without OpenMP.
"""
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport exp, log, lgamma, INFINITY


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


# exp(x) rounds to +0.0 for every x < ln(2⁻¹⁰⁷⁵) ≈ −745.1332; skip the slow libm call there.
cdef double EXP_ZERO = -745.2
# Rows with s_u below this are done directly (terms lost to underflow, < K · 2⁻¹⁰²²,
# are then negligible next to s_u).
cdef double S_MIN = 1e-250
# A topic is "used" by a document (a restart candidate) when N_dk exceeds this.
cdef double USED_MIN = 0.1
# A restart is accepted when it gains more than this times 1 + |L_d| (more than rounding:
# a proposal that returns to the current state must not win or lose by rounding noise).
cdef double MIN_GAIN = 1e-12
# Scratch vectors of K doubles per thread (see _doc).
cdef enum:
    N_VECS = 8


def max_threads():
    """Number of threads OpenMP would use by default (1 without OpenMP)."""
    return bnpvi_topic_max_threads()


cdef inline Py_ssize_t _padded(Py_ssize_t n) noexcept nogil:
    """n rounded up to 8 doubles plus one 64-byte line (no false sharing between threads)."""
    return ((n + 7) // 8 + 1) * 8


# ---------------------------------------------------------------------- digamma
# ψ(x) = ψ(x₀) + Σ_{n≥1} (−1)^{n+1} ζ(n+1, x₀) (x − x₀)^n about the positive root x₀
# (ζ the Hurwitz zeta function; coefficients from scipy.special.zeta). Used for
# |x − x₀| < 0.25, where ψ is small and the recurrence would cancel; 24 terms leave
# < 1e-18 of the result.
cdef double DG_ROOT = 1.4616321449683623
cdef double DG_ROOT_VAL = -9.241265521729427e-17
cdef double DG_ROOT_COEF[24]
DG_ROOT_COEF[:] = [
    0.9676722454476214, -0.44276316898359214, 0.2584997609556512, -0.16394270544240658,
    0.10782405069126239, -0.07219956125645476, 0.048804288164143145, -0.033161126474847376,
    0.022597648232218125, -0.015424765904948968, 0.010538791616612182, -0.007204534386356875,
    0.004926781395729858, -0.0033698016554393317, 0.00230512632673493, -0.0015769367714301987,
    0.0010788252019162975, -0.000738070938996006, 0.0005049532658346026, -0.0003454680251063082,
    0.00023635601564027086, -0.00016170622091974825, 0.00011063372768747429, -7.569179582195077e-05,
]


cdef inline double _digamma(double x) noexcept nogil:
    """ψ(x) for x > 0, to about 1e-15 relative (ψ(0) = −inf).

    Near the root: the Taylor series above. Otherwise ψ(x) = ψ(x + n) − Σ_{i<n} 1/(x + i)
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


def _digamma_array(const double[::1] x):
    """ψ elementwise with the kernel's own digamma (for tests)."""
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = _digamma(x[i])
    return out


# ------------------------------------------------------------------ one document
cdef inline void _weights(const double* N, const double* a, Py_ssize_t K,
                          double* wt, double* p) noexcept nogil:
    """w̃_k = ψ(N_k + a_k) − max_j ψ(N_j + a_j) and p_k = exp(w̃_k)."""
    cdef Py_ssize_t k
    for k in range(K):
        wt[k] = _digamma(N[k] + a[k])
    _shift(wt, p, K)


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
                               double scale, double* out, bint add) noexcept nogil:
    """Row done by log-sum-exp of C_u + w̃: out_k (+)= scale · r_uk; returns ln Σ_k exp(C_uk + w̃_k)."""
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
    return mx + log(s)


cdef void _pass(const double* C, const double* cnt, const double* L, Py_ssize_t n, Py_ssize_t K,
                const double* wt, const double* p, double* sb, double* lzb,
                double* acc, double* extra, double* N) noexcept nogil:
    """N_k = Σ_u c_u r_uk for r ∝ exp(C + w̃), in the efficient form.

    sb[u] receives s_u, or 0 for a row done directly, whose log normaliser then goes
    to lzb[u]; acc and extra (K) are scratch.
    """
    cdef Py_ssize_t u, k
    cdef double s, f
    cdef const double* Lrow
    for k in range(K):
        acc[k] = 0.0
        extra[k] = 0.0
    for u in range(n):
        Lrow = L + u * K
        s = _dot(Lrow, p, K)
        if s >= S_MIN:
            sb[u] = s
            f = cnt[u] / s
            for k in range(K):
                acc[k] = acc[k] + f * Lrow[k]
        else:
            sb[u] = 0.0
            lzb[u] = _direct_row(C + u * K, wt, K, cnt[u], extra, True)
    for k in range(K):
        N[k] = p[k] * acc[k] + extra[k]


cdef double _objective(const double* cnt, const double* m, const double* sb, const double* lzb,
                       Py_ssize_t n, Py_ssize_t K, const double* N, const double* wt,
                       const double* a, double a_rest) noexcept nogil:
    """L_d of the state left by the last _pass (module docstring)."""
    cdef Py_ssize_t u, k
    cdef double out = 0.0, tot = 0.0, th
    for u in range(n):
        if sb[u] > 0.0:
            out = out + cnt[u] * (m[u] + log(sb[u]))
        else:
            out = out + cnt[u] * lzb[u]
    for k in range(K):
        th = N[k] + a[k]
        tot = tot + th
        out = out + lgamma(th)
        if N[k] != 0.0:          # N_k = 0 where p_k underflowed (w̃_k may be −inf)
            out = out - N[k] * wt[k]
    if a_rest > 0.0:
        out = out + lgamma(a_rest)
        tot = tot + a_rest
    return out - lgamma(tot)


cdef inline Py_ssize_t _n_used(const double* N, Py_ssize_t K) noexcept nogil:
    cdef Py_ssize_t k, n = 0
    for k in range(K):
        if N[k] > USED_MIN:
            n += 1
    return n


cdef Py_ssize_t _candidates(const double* N, Py_ssize_t K, Py_ssize_t most,
                            Py_ssize_t* cand) noexcept nogil:
    """The (at most ``most``) used topics with the smallest N_k, in increasing (N_k, k)."""
    cdef Py_ssize_t c, k, best
    cdef double pv = -INFINITY, bv
    cdef Py_ssize_t pk = -1
    for c in range(most):
        best = -1
        bv = INFINITY
        for k in range(K):
            if N[k] > USED_MIN and (N[k] > pv or (N[k] == pv and k > pk)):
                if N[k] < bv:
                    bv = N[k]
                    best = k
        if best < 0:
            return c
        cand[c] = best
        pv = bv
        pk = best
    return most


cdef void _doc(const double* C, const double* cnt, Py_ssize_t n, Py_ssize_t K,
               const double* a, double a_rest, const double* init,
               int max_iters, double thr, int n_restarts, int restart_iters,
               double* R, double* m, double* sb, double* lzb, double* ws, Py_ssize_t pk,
               Py_ssize_t* cand, double* Nout, long long* iters_out, double* obj_out,
               long long* acc_out) noexcept nogil:
    """The whole local step of one document (module docstring).

    R (n, K) holds L_uk until the end, then r_uk; m, sb, lzb (n) are per-row scratch;
    ws holds N_VECS vectors of stride pk; cand (K) is scratch.
    """
    cdef double* wt = ws
    cdef double* p = ws + pk
    cdef double* N = ws + 2 * pk
    cdef double* Nn = ws + 3 * pk
    cdef double* acc = ws + 4 * pk
    cdef double* extra = ws + 5 * pk
    cdef double* wq = ws + 6 * pk
    cdef double* Nq = ws + 7 * pk
    cdef Py_ssize_t u, k, c, j, ncand, used
    cdef int it, t
    cdef long long accepted = 0
    cdef double mx, x, diff, cur, prop, inv, s, tot
    cdef const double* row
    cdef double* Rrow

    if n == 0:
        cur = 0.0
        tot = 0.0
        for k in range(K):
            Nout[k] = 0.0
            cur = cur + lgamma(a[k])
            tot = tot + a[k]
        if a_rest > 0.0:
            cur = cur + lgamma(a_rest)
            tot = tot + a_rest
        obj_out[0] = cur - lgamma(tot)
        iters_out[0] = 0
        acc_out[0] = 0
        return

    # L_uk = exp(C_uk − m_u), once per document
    for u in range(n):
        row = C + u * K
        Rrow = R + u * K
        mx = row[0]
        for k in range(1, K):
            if row[k] > mx:
                mx = row[k]
        m[u] = mx
        for k in range(K):
            x = row[k] - mx
            Rrow[k] = exp(x) if x >= EXP_ZERO else 0.0

    # first weights, then coordinate ascent
    if init != NULL:
        for k in range(K):
            wt[k] = _digamma(init[k] + a[k])
    else:
        for k in range(K):
            wt[k] = log(a[k])
    _shift(wt, p, K)
    _pass(C, cnt, R, n, K, wt, p, sb, lzb, acc, extra, N)
    it = 0
    while it < max_iters:
        it = it + 1
        _weights(N, a, K, wt, p)
        _pass(C, cnt, R, n, K, wt, p, sb, lzb, acc, extra, Nn)
        diff = 0.0
        for k in range(K):
            x = Nn[k] - N[k]
            if x < 0.0:
                x = -x
            if x > diff:
                diff = x
            N[k] = Nn[k]
        if diff < thr:
            break
    iters_out[0] = it
    cur = _objective(cnt, m, sb, lzb, n, K, N, wt, a, a_rest)

    # sparse restarts
    if n_restarts > 0:
        used = _n_used(N, K)
        ncand = n_restarts if n_restarts < used - 1 else used - 1
        if ncand > 0:
            ncand = _candidates(N, K, ncand, cand)
        for c in range(ncand):
            if _n_used(N, K) < 2:
                break
            j = cand[c]
            for k in range(K):
                Nq[k] = N[k]
            Nq[j] = 0.0
            for t in range(restart_iters):
                _weights(Nq, a, K, wq, p)
                _pass(C, cnt, R, n, K, wq, p, sb, lzb, acc, extra, Nq)
            prop = _objective(cnt, m, sb, lzb, n, K, Nq, wq, a, a_rest)
            if prop - cur > MIN_GAIN * (1.0 + (cur if cur > 0.0 else -cur)):
                cur = prop
                accepted = accepted + 1
                for k in range(K):
                    N[k] = Nq[k]
                    wt[k] = wq[k]

    # resp of the current weights, in place of L (rows as in _pass)
    for k in range(K):
        p[k] = exp(wt[k]) if wt[k] >= EXP_ZERO else 0.0
    for u in range(n):
        Rrow = R + u * K
        s = _dot(Rrow, p, K)
        if s >= S_MIN:
            inv = 1.0 / s
            for k in range(K):
                Rrow[k] = (Rrow[k] * p[k]) * inv
        else:
            _direct_row(C + u * K, wt, K, 1.0, Rrow, False)
    for k in range(K):
        Nout[k] = N[k]
    obj_out[0] = cur
    acc_out[0] = accepted


def doc_topic_step(const double[:, ::1] log_lik, const double[::1] counts,
                   const long long[::1] doc_range, const double[::1] prior, double prior_rest,
                   const double[:, ::1] init_counts, bint use_init, int max_iters, double conv_thr,
                   int n_restarts, int restart_iters, double[:, ::1] resp,
                   double[:, ::1] doc_counts, long long[::1] iters, double[::1] objective,
                   long long[::1] restarts_accepted, int n_threads):
    """The local step of every document into the outputs (see the module docstring).

    ``init_counts`` (D, K) is read only when ``use_init`` (pass a (0, K) array otherwise).
    """
    cdef Py_ssize_t nnz = log_lik.shape[0], K = log_lik.shape[1]
    cdef Py_ssize_t D = doc_range.shape[0] - 1
    cdef Py_ssize_t pk = _padded(K)
    cdef Py_ssize_t d, u0, u1, tid
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef double[::1] m = np.empty(max(nnz, 1))
    cdef double[::1] sb = np.empty(max(nnz, 1))
    cdef double[::1] lzb = np.empty(max(nnz, 1))
    cdef double[:, ::1] ws = np.empty((nt, N_VECS * pk))
    cdef Py_ssize_t[:, ::1] cs = np.empty((nt, pk), dtype=np.intp)
    cdef bint warm = use_init and init_counts.shape[0] == D
    cdef double* R

    if D <= 0:
        return
    with nogil:
        for d in prange(D, schedule="dynamic", num_threads=nt):
            tid = threadid()
            u0 = doc_range[d]
            u1 = doc_range[d + 1]
            # a document without rows touches no row array (&x[u0] would be past the end)
            R = &resp[u0, 0] if u1 > u0 else NULL
            _doc(&log_lik[u0, 0] if u1 > u0 else NULL, &counts[u0] if u1 > u0 else NULL, u1 - u0, K,
                 &prior[0], prior_rest, &init_counts[d, 0] if warm else NULL,
                 max_iters, conv_thr, n_restarts, restart_iters,
                 R, &m[u0] if u1 > u0 else NULL, &sb[u0] if u1 > u0 else NULL,
                 &lzb[u0] if u1 > u0 else NULL, &ws[tid, 0], pk, &cs[tid, 0],
                 &doc_counts[d, 0], &iters[d], &objective[d], &restarts_accepted[d])
