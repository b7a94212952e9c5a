# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled document-level local step of the HDP topic model (and of LDA).

Never call these directly: ``bnpvi.kernels.topic`` validates dtypes, shapes,
contiguity, finiteness, ``doc_range``, ``word_ids`` and ``pairs``, allocates the
outputs and checks the result. Every function here assumes valid, C-contiguous input.

Math (Hughes 2016 thesis, Alg. 5.1 / Eq. 5.44-5.46). Document d is rows u of C with
token counts c_u; C_u is row u of the dense (nnz, K) ``log_lik``, or in table mode row
``word_ids[u]`` of the (V, K) table ``log_lik``. a = prior (α β̂_k), a_rest = α β̂_{>K}.
Block coordinate ascent alternates

    r_uk ∝ exp(C_uk + w_k),   N_dk = Σ_u c_u r_uk,   θ_dk = N_dk + a_k,   w_k = ψ(θ_dk)

(ψ(Σ θ) is constant in k and dropped). The first weights are w_k = ln a_k ("from the
likelihood"), or ψ(N⁰_dk + a_k) for warm-start counts N⁰. One iteration is one update
of w from N followed by one of N (through r); the loop stops once
max_k |N_dk(new) − N_dk(old)| < conv_thr or after max_iters iterations, so N_d is
always the count of the current r. Efficient form: per row m_u = max_k C_uk and
L_uk = exp(C_uk − m_u), held in the document's rows of a block buffer R until the
document is done (dense mode: computed per row; table mode: computed once per word type
used in the batch and copied, the same numbers); with w̃ = w − max w and p_k = exp(w̃_k),
s_u = Σ_k L_uk p_k and N_k = p_k Σ_u c_u L_uk / s_u. A row whose s_u < 1e-250 (its best
topics have underflowing weights) is done directly by log-sum-exp of C_u + w̃ instead, so
the form never divides by an underflowed sum. The rows go four at a time (s_u of four
rows interleaved, Σ_u c_u L_uk / s_u updated once per four rows) with every sum in the
order of one row at a time.

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

Summaries of the returned r (0 ln 0 = 0), written while r is formed (from the s_u and
ln s_u that the last pass and objective of the current state left, kept apart from a
proposal's):

* H_k = −Σ_u c_u r_uk ln r_uk (Hughes 2016 thesis Eq. 5.47), without a log per entry:
  ln r_uk = (C_uk − m_u) + w̃_k − ln s_u, or for a row done directly
  (C_uk − mx_u) + w̃_k − ln s'_u with mx_u = max_k (C_uk + w̃_k) and
  s'_u = Σ_k exp(C_uk + w̃_k − mx_u). Where r_uk > 1/2 that sum would cancel (ln r_uk ≈ 0
  from terms as large as |w̃_k|), so it is ln r_uk itself; r_uk = 0 adds exactly 0.
* PH_j = −Σ_u c_u t ln t, t = r_ua + r_ub for pairs[j] = (a, b): the entropy of topics a
  and b merged (Hughes, Kim & Sudderth 2015 §5.1). Where t rounds to r_ua (or r_ub), the
  entry's ln r above is used; otherwise ln t.
* In table mode, word_topic[v] = Σ_{u: word_ids[u] = v} c_u r_u.

Blocks and memory: documents go in blocks of consecutive documents, at most BLOCK_DOCS
of them and BLOCK_ROWS rows (a longer document alone); the block boundaries depend on
doc_range only. A block's rows of R are those of ``resp`` itself, or of a scratch of one
block when resp is not kept, so the scratch never grows with nnz (table mode also holds
L and m of the word types, (V, K)).

L-sparse mode (Hughes 2016 thesis §7.3, Alg. 7.4; Hughes & Sudderth 2016, fast and accurate
local steps (sparse), §5, Alg. 2), doc_topic_step_sparse: row u keeps at most L topics (its
support; Le = min(L, K) slots) and r_u = softmax of C_u + w̃ on it. First support: the top L of
C_uk + w̃_k over all K with the dense mode's first weights (ties to the lower k; in table mode from
a cold start done once per word type of the batch). The active set A_d (a list in increasing k)
starts as the union of the supports. Selection iterations, 1-5 and every 10th (all of them with
``select_always``), prune A_d to N_dk > ε when ε > 0 (unless none would be left; a pruned topic
gets w̃ = −inf and N = 0), set w̃_k = ψ(N_dk + a_k) − max on A_d and re-select every row's top
min(L, |A_d|) over A_d; the other iterations keep A_d and the supports and only re-weight (as in
Hughes's own implementation of Alg. 7.4, bnpy's sparse local step, which revises the active set
only when it re-selects). Once a re-selection puts less than a fraction STABLE_MASS of the
document's tokens on the topics that entered the supports (Σ_u c_u Σ_{i entered} r_ui), the
supports count as stable: the rest of iterations 2-5 only re-weight; every 10th still re-selects.

A re-selection is exact (ties to the lower k in any order) but reads few C: it starts from the
row's support (the seeds; its threshold starts near its final value, and the seeds' C are stored,
cv), then offers the active topics by decreasing w̃ and stops once no later one can beat the
worst held: by the bound max_k C_uk + w̃_k (_topl_sorted), or, when more than TA_MIN_PER_SLOT
times Le topics are active (the first iterations), by the threshold algorithm on that list and
the row's list of its T = min(K, 2 Le, 64) largest C_uk (_topl_ta; the lists are made once per word
type of the batch in table mode, per row otherwise). A topic kept keeps its slot and e, so only
the topics that enter cost an exponential, and the C of the next row's first candidates are
asked for in advance. With at most Le active topics a row holding all of them keeps its support.

Values use the efficient form on the support: e_ui = exp(C_{u,k_i} − m_u) (m_u the largest C of
the support, stored), s_u = Σ_i e_ui p_{k_i}, r_ui = e_ui p_{k_i} / s_u (rows with s_u < 1e-250 by
log-sum-exp; a row of one topic has r = 1 exactly), so a re-weighting costs no exp. The
objective is L_d above summed over the supports and A_d (an inactive topic has θ_dk = a_k:
Σ_k lnΓ(a_k) and Σ_k a_k are batch constants). Restarts as above, each proposal starting from
the current rows and all its iterations re-selecting; its topic j (N'_j = 0) leaves the
proposal's A_d through the pruning, or with ε = 0 stays with weight ψ(a_j) as in the dense mode,
so at L = K, ε = 0 and ``select_always`` the mode is the dense step up to rounding. Scratch of a
block: two sets (state, proposal) of Le slots (topic, C, e) per row, the rows' lists (T per row,
or per word type of the batch in table mode) and the returned r (Le per row), never rows × K;
per thread O(K).

ψ is :c:func:`_digamma` below (recurrence to x ≥ 10, asymptotic series; Taylor series
about the positive root near it); lnΓ is libm's ``lgamma``.

Determinism
-----------
Documents are independent: each one is done start to finish by one thread in a fixed
order of operations, with per-thread scratch, and writes only its own outputs; its H
and PH go to its own row of a per-block buffer. After each block, one thread adds those
rows in document order and c_u r_u to word_topic in row order. So results are
bit-identical for any thread count, including builds without OpenMP, and do not depend
on whether resp is kept or on the mode (dense or table) C comes in.
"""
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport exp, log, lgamma, INFINITY
from libc.string cimport memcpy


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

    /* Ask for the cache lines of x[0:n] (a table row read next, at a place the hardware
       cannot guess). */
    static void bnpvi_prefetch(const double* x, Py_ssize_t n)
    {
        Py_ssize_t i;
        for (i = 0; i < n; i += 8)
            __builtin_prefetch(x + i);
    }
    """
    void bnpvi_dot4(const double* x0, const double* x1, const double* x2, const double* x3,
                    const double* y, Py_ssize_t K, double* s) noexcept nogil
    void bnpvi_axpy4(double* acc, double f0, const double* x0, double f1, const double* x1,
                     double f2, const double* x2, double f3, const double* x3, Py_ssize_t K) noexcept nogil
    void bnpvi_digamma_far(const double* x, double* out, Py_ssize_t n) noexcept nogil
    void bnpvi_prefetch(const double* x, Py_ssize_t n) noexcept nogil


cdef extern from *:
    """
    #include <stdlib.h>
    /* A topic k and its weight w (L-sparse mode): sorted by decreasing w, then increasing k. */
    typedef struct { double w; int k; } bnpvi_wk;
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
    ctypedef struct bnpvi_wk:
        double w
        int k
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


# exp(x) rounds to +0.0 for every x < ln(2⁻¹⁰⁷⁵) ≈ −745.1332; skip the slow libm call there.
cdef double EXP_ZERO = -745.2
# Rows with s_u below this are done directly (terms lost to underflow, < K · 2⁻¹⁰²²,
# are then negligible next to s_u).
cdef double S_MIN = 1e-250
# L-sparse mode: a document's supports are stable once a re-selection put less than this fraction
# of its tokens on the topics that entered them (module docstring).
cdef double STABLE_MASS = 1e-2
# A topic is "used" by a document (a restart candidate) when N_dk exceeds this.
cdef double USED_MIN = 0.1
# A restart is accepted when it gains more than this times 1 + |L_d| (more than rounding:
# a proposal that returns to the current state must not win or lose by rounding noise).
cdef double MIN_GAIN = 1e-12
cdef enum:
    # scratch vectors of K doubles per thread (see _doc)
    N_VECS = 8
    # a block of documents: at most this many documents and rows (a longer document alone)
    BLOCK_DOCS = 512
    BLOCK_ROWS = 16384


BLOCK = (BLOCK_DOCS, BLOCK_ROWS)
"""(documents, rows) of a block at most (module docstring)."""


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
    """L_d of the state left by the last _pass (module docstring); ln s_u goes to lzb[u] for
    the rows in the efficient form."""
    cdef Py_ssize_t u, k
    cdef double out = 0.0, tot = 0.0, th
    for u in range(rw.n):
        if sb[u] > 0.0:
            lzb[u] = log(sb[u])
            out = out + rw.cnt[u] * (rw.m[u] + lzb[u])
        else:
            out = out + rw.cnt[u] * lzb[u]
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


cdef inline Py_ssize_t _n_used(const double* N, const int* act, Py_ssize_t n) noexcept nogil:
    """How many of the topics act[0:n] (0..n−1 when act is NULL) are used: N_k > USED_MIN."""
    cdef Py_ssize_t j, used = 0
    for j in range(n):
        if N[j if act == NULL else act[j]] > USED_MIN:
            used += 1
    return used


cdef Py_ssize_t _candidates(const double* N, const int* act, Py_ssize_t n, Py_ssize_t most,
                            int* cand) noexcept nogil:
    """The (at most ``most``) used topics among act[0:n] (0..n−1 when act is NULL; act increasing)
    with the smallest N_k, in increasing (N_k, k)."""
    cdef Py_ssize_t c, j, k, best
    cdef double pv = -INFINITY, bv
    cdef Py_ssize_t pk = -1
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


cdef void _finish(const Rows* rw, const Opts* o, const double* wt, const double* sb, const double* lzb,
                  double* p, double* lr, double* H, double* PH) noexcept nogil:
    """r of the weights w̃ in place of L, and the document's H (K) and PH (M) (module
    docstring). sb and lzb are those of the last _pass and _objective with these weights;
    p and lr (K) are scratch."""
    cdef Py_ssize_t u, k, j, a, b, K = o.K
    cdef double inv, c, r, t, tl, shift, ls
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
        # lr_k = ln r_uk (0 where r_uk = 0, so that r_uk lr_k = 0)
        for k in range(K):
            r = Rrow[k]
            if r > 0.5:
                lr[k] = log(r)
            elif r > 0.0:
                lr[k] = ((Crow[k] - shift) + wt[k]) - ls
            else:
                lr[k] = 0.0
            H[k] = H[k] - c * (r * lr[k])
        for j in range(o.M):
            a = o.pairs[2 * j]
            b = o.pairs[2 * j + 1]
            t = Rrow[a] + Rrow[b]
            if t == Rrow[a]:
                tl = Rrow[a] * lr[a]
            elif t == Rrow[b]:
                tl = Rrow[b] * lr[b]
            else:
                tl = t * log(t)
            PH[j] = PH[j] - c * tl


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


cdef void _empty_doc(const Opts* o, double* Nout, long long* iters_out, double* obj_out, long long* acc_out,
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
    if o.a_rest > 0.0:
        cur = cur + lgamma(o.a_rest)
        tot = tot + o.a_rest
    obj_out[0] = cur - lgamma(tot)
    iters_out[0] = 0
    acc_out[0] = 0


cdef void _doc(const Rows* rw, const Opts* o, const double* init, double* st,
               double* ws, int* cand, double* Nout, long long* iters_out, double* obj_out,
               long long* acc_out, double* H, double* PH) noexcept nogil:
    """The whole local step of one document (module docstring).

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
    cdef Py_ssize_t k, c, j, ncand, used
    cdef int it, t
    cdef long long accepted = 0
    cdef double x, diff, cur, prop

    if rw.n == 0:
        _empty_doc(o, Nout, iters_out, obj_out, acc_out, H, PH)
        return

    # first weights, then coordinate ascent
    if init != NULL:
        for k in range(K):
            wt[k] = _digamma(init[k] + a[k])
    else:
        for k in range(K):
            wt[k] = log(a[k])
    _shift(wt, p, K)
    _pass(rw, K, wt, p, sb, lzb, acc, extra, N)
    it = 0
    while it < o.max_iters:
        it = it + 1
        _weights(N, a, K, wt, p)
        _pass(rw, K, wt, p, sb, lzb, acc, extra, Nn)
        diff = 0.0
        for k in range(K):
            x = Nn[k] - N[k]
            if x < 0.0:
                x = -x
            if x > diff:
                diff = x
            N[k] = Nn[k]
        if diff < o.thr:
            break
    iters_out[0] = it
    cur = _objective(rw, sb, lzb, K, N, wt, a, o.a_rest)

    # sparse restarts
    if o.n_restarts > 0:
        used = _n_used(N, NULL, K)
        ncand = o.n_restarts if o.n_restarts < used - 1 else used - 1
        if ncand > 0:
            ncand = _candidates(N, NULL, K, ncand, cand)
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
            if prop - cur > MIN_GAIN * (1.0 + (cur if cur > 0.0 else -cur)):
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


# ------------------------------------------------------------------ L-sparse mode
# One document of the L-sparse mode (module docstring, "L-sparse mode"). Row u keeps
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
        x = Nk - N[k]
        if x < 0.0:
            x = -x
        if x > diff:
            diff = x
        N[k] = Nk
    return diff


cdef double _sp_objective(const Rows* rw, const SRows* s, const Opts* o, const int* act, int nA,
                          const double* N, const double* wt) noexcept nogil:
    """L_d of the rows s with the weights w̃ that made them (module docstring); ln s_u goes to
    lzb[u] for the rows in the efficient form. Inactive topics (θ_k = a_k) add nothing beyond
    Σ_k lnΓ(a_k)."""
    cdef Py_ssize_t u
    cdef int j, k
    cdef double out = 0.0, tot = o.a0
    for u in range(rw.n):
        if s.sb[u] > 0.0:
            s.lzb[u] = log(s.sb[u])
            out = out + rw.cnt[u] * (s.m[u] + s.lzb[u])
        else:
            out = out + rw.cnt[u] * s.lzb[u]
    out = out + o.g0
    for j in range(nA):
        k = act[j]
        tot = tot + N[k]
        out = out + (lgamma(N[k] + o.a[k]) - o.la[k])
        if N[k] != 0.0:
            out = out - N[k] * wt[k]
    if o.a_rest > 0.0:
        out = out + lgamma(o.a_rest)
        tot = tot + o.a_rest
    return out - lgamma(tot)


cdef void _sp_finish(const Rows* rw, const SRows* s, const Opts* o, const double* wt, const double* p,
                     double* rk, double* lr, double* H, double* PH, double* Rv, int* If, int* Zf,
                     double* resp) noexcept nogil:
    """r of the rows s (weights w̃, p = exp w̃) to Rv, If, Zf (n Le, n Le, n) and, when resp is
    not NULL, to the zeroed (n, K) rows resp; the document's H (K, zeroed here) and PH (M)
    as in _finish, with t = r_ua + r_ub over the row's support. rk and lr (K) are zero on
    entry and on exit."""
    cdef Py_ssize_t u, K = o.K, Le = o.Le, jj, a, b
    cdef int i, k, nz
    cdef double inv, c, r, t, tl, shift, ls, l
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
            if r > 0.5:
                l = log(r)
            elif r > 0.0:
                l = ((C[k] - shift) + wt[k]) - ls
            else:
                l = 0.0
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
        for jj in range(o.M):
            a = o.pairs[2 * jj]
            b = o.pairs[2 * jj + 1]
            t = rk[a] + rk[b]
            if t == rk[a]:
                tl = rk[a] * lr[a]
            elif t == rk[b]:
                tl = rk[b] * lr[b]
            else:
                tl = t * log(t)
            PH[jj] = PH[jj] - c * tl
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
    """The whole L-sparse local step of one document with rows (module docstring, "L-sparse mode").

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
    cdef int nA = 0, nAq, c, j, i, ncand, used, it, t
    cdef bint select
    cdef long long accepted = 0
    cdef double diff, cur, prop, tokens = 0.0, moved = INFINITY, mv

    # max_k C_uk (the head of each row's list) and the document's tokens
    for u in range(rw.n):
        rw.m[u] = _top(rw, u, o.T)[0].w
        tokens = tokens + rw.cnt[u]
    # first weights over all K, the rows' top L of C_u + w̃ (a word type's from the table)
    if init != NULL:
        for k in range(K):
            wt[k] = _digamma(init[k] + a[k])
        _shift(wt, p, K)
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
        used = _n_used(N, act, nA)
        ncand = o.n_restarts if o.n_restarts < used - 1 else used - 1
        if ncand > 0:
            ncand = _candidates(N, act, nA, ncand, cand)
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
            if prop - cur > MIN_GAIN * (1.0 + (cur if cur > 0.0 else -cur)):
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
cdef Py_ssize_t _block_end(const long long[::1] doc_range, Py_ssize_t d0) noexcept nogil:
    """End (exclusive) of the block of documents from d0: at most BLOCK_DOCS documents and
    BLOCK_ROWS rows, and at least one document."""
    cdef Py_ssize_t d1 = d0 + 1, D = doc_range.shape[0] - 1
    while d1 < D and d1 - d0 < BLOCK_DOCS and doc_range[d1 + 1] - doc_range[d0] <= BLOCK_ROWS:
        d1 = d1 + 1
    return d1


def doc_topic_step(const double[:, ::1] log_lik, const long long[::1] word_ids, bint table,
                   const double[::1] counts, const long long[::1] doc_range, const double[::1] prior,
                   double prior_rest, const double[:, ::1] init_counts, bint use_init, int max_iters,
                   double conv_thr, int n_restarts, int restart_iters, const long long[:, ::1] pairs,
                   double[:, ::1] resp, bint keep_resp, double[:, ::1] doc_counts, long long[::1] iters,
                   double[::1] objective, long long[::1] restarts_accepted, double[::1] entropy,
                   double[:, ::1] word_topic, double[::1] pair_entropy, int n_threads):
    """The local step of every document into the outputs (see the module docstring).

    ``log_lik`` is the (V, K) table of ``word_ids`` when ``table``, else the (nnz, K) rows.
    ``init_counts`` (D, K) is read only when ``use_init``, ``resp`` (nnz, K) only when
    ``keep_resp`` and ``word_topic`` (V, K) only when ``table`` (pass (0, K) arrays
    otherwise). ``entropy``, ``word_topic`` and ``pair_entropy`` must be zero on entry.
    """
    cdef Py_ssize_t K = log_lik.shape[1], V = log_lik.shape[0], nnz = counts.shape[0]
    cdef Py_ssize_t D = doc_range.shape[0] - 1, M = pairs.shape[0]
    cdef Py_ssize_t pk = _padded(K), pm = _padded(M)
    cdef Py_ssize_t d, d0, d1, u, u0, n, ub, k, j, v, tid, rows = 0
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef bint warm = use_init and init_counts.shape[0] == D
    cdef Opts o
    cdef Rows rw
    cdef double* Rb
    cdef double* R

    if D <= 0:
        return
    d0 = 0
    while d0 < D:
        d1 = _block_end(doc_range, d0)
        rows = max(rows, doc_range[d1] - doc_range[d0])
        d0 = d1
    rows = max(rows, 1)
    o.K = K
    o.pk = pk
    o.a = &prior[0]
    o.a_rest = prior_rest
    o.max_iters = max_iters
    o.thr = conv_thr
    o.n_restarts = n_restarts
    o.restart_iters = restart_iters
    o.pairs = &pairs[0, 0] if M > 0 else NULL
    o.M = M
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
            for u in range(nnz):
                seen[word_ids[u]] = 1
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
            for d in range(d0, d1):
                for k in range(K):
                    entropy[k] = entropy[k] + hb[d - d0, k]
                for j in range(M):
                    pair_entropy[j] = pair_entropy[j] + pb[d - d0, j]
            if table:
                for j in prange(nt, schedule="static", num_threads=nt):
                    _add_word_topic(&word_topic[0, 0], &word_ids[0], &counts[0], Rb, ub, doc_range[d1], K, j, nt)
            d0 = d1


def doc_topic_step_sparse(const double[:, ::1] log_lik, const long long[::1] word_ids, bint table,
                          const double[::1] counts, const long long[::1] doc_range, const double[::1] prior,
                          double prior_rest, const double[:, ::1] init_counts, bint use_init, int max_iters,
                          double conv_thr, int n_restarts, int restart_iters, const long long[:, ::1] pairs,
                          double[:, ::1] resp, bint keep_resp, double[:, ::1] doc_counts, long long[::1] iters,
                          double[::1] objective, long long[::1] restarts_accepted, double[::1] entropy,
                          double[:, ::1] word_topic, double[::1] pair_entropy, int n_threads, int sparse_L,
                          double active_eps, bint select_always):
    """The L-sparse local step of every document into the outputs (module docstring,
    "L-sparse mode"); arguments as for :func:`doc_topic_step`, plus L = ``sparse_L`` ≥ 1 (any
    L, also ≥ K: rows then keep all K topics), ε = ``active_eps`` ≥ 0 (0: no pruning) and
    ``select_always`` (re-select at every iteration, not only on the schedule). ``resp``
    (read only when ``keep_resp``) must be zero on entry, like ``entropy``, ``word_topic``
    and ``pair_entropy``.
    """
    cdef Py_ssize_t K = log_lik.shape[1], V = log_lik.shape[0], nnz = counts.shape[0]
    cdef Py_ssize_t D = doc_range.shape[0] - 1, M = pairs.shape[0]
    cdef Py_ssize_t pk = _padded(K), pm = _padded(M), Le = min(<Py_ssize_t>sparse_L, K)
    cdef Py_ssize_t T = min(K, LIST_PER_SLOT * Le, LIST_MAX)
    cdef Py_ssize_t d, d0, d1, u, u0, n, ub, k, j, v, tid, off, rows = 0
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef int i
    cdef bint warm = use_init and init_counts.shape[0] == D
    cdef bint first_table = table and not warm
    cdef Opts o
    cdef Rows rw
    cdef SRows s, q
    cdef double c
    cdef double* W

    if D <= 0:
        return
    d0 = 0
    while d0 < D:
        d1 = _block_end(doc_range, d0)
        rows = max(rows, doc_range[d1] - doc_range[d0])
        d0 = d1
    rows = max(rows, 1)
    la_arr = np.empty(K)
    cdef double[::1] la = la_arr
    o.K = K
    o.pk = pk
    o.a = &prior[0]
    o.a_rest = prior_rest
    o.max_iters = max_iters
    o.thr = conv_thr
    o.n_restarts = n_restarts
    o.restart_iters = restart_iters
    o.pairs = &pairs[0, 0] if M > 0 else NULL
    o.M = M
    o.Le = Le
    o.T = T
    o.eps = active_eps
    o.sel_all = select_always
    o.la = &la[0]
    o.g0 = 0.0
    o.a0 = 0.0
    for k in range(K):
        la[k] = lgamma(prior[k])
        o.g0 = o.g0 + la[k]
        o.a0 = o.a0 + prior[k]
    # cold first weights w̃ = ln a − max ln a and exp w̃
    cdef double[::1] wt0 = np.empty(K)
    cdef double[::1] p0 = np.empty(K)
    for k in range(K):
        wt0[k] = log(prior[k])
    _shift(&wt0[0], &p0[0], K)
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
            for u in range(nnz):
                seen[word_ids[u]] = 1
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
            for d in range(d0, d1):
                for k in range(K):
                    entropy[k] = entropy[k] + hb[d - d0, k]
                for j in range(M):
                    pair_entropy[j] = pair_entropy[j] + pb[d - d0, j]
            if table:
                for u in range(ub, doc_range[d1]):
                    c = counts[u]
                    W = &word_topic[word_ids[u], 0]
                    off = (u - ub) * Le
                    for i in range(zf[u - ub]):
                        W[rf[off + i]] = W[rf[off + i]] + c * rv[off + i]
            d0 = d1
