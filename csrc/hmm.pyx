# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled forward-backward and Viterbi for hidden Markov models.

Never call these directly: ``bnpvi.kernels.hmm`` validates dtypes, shapes,
contiguity and ``seq_range``, allocates the outputs and turns the returned status
into an error. Every function here assumes valid, C-contiguous input.

Math (Hughes 2016 thesis §6.3.3, Eq. 6.24-6.25, 6.48; Rabiner 1989 §V.A for the
scaling). For one sequence with potentials C (T_d, K), a (K,), W (K, K):
c_t = max_k C_tk, E_t = exp(C_t − c_t), Π̃ = exp(W), ã = exp(a − max a);
forward f̃_1 = ã ⊙ E_1, f̃_t = (Π̃ᵀ f_{t−1}) ⊙ E_t, n_t = Σ_k f̃_t(k), f_t = f̃_t / n_t;
backward g_T = 1, v_t = E_{t+1} ⊙ g_{t+1} / n_{t+1}, g_t = Π̃ v_t;
r_t = f_t ⊙ g_t, s_t(j, k) = f_t(j) Π̃_jk v_t(k), log Z = max a + Σ_t (c_t + ln n_t).
Σ_k f_t(k) g_t(k) = 1 exactly; g_t is divided by the computed sum, which keeps
rounding from drifting along long sequences (1e5 steps) without changing the math.

Pairwise tables. Since s_t(j, k) = Π̃_jk · f_t(j) v_t(k) and its row sum is
r_t(j) = f_t(j) g_t(j), the conditional is s/r = Π̃_jk v_t(k) / g_t(j) and

    M_jk = Π̃_jk A_jk,                     A = Σ_t f_t v_tᵀ,
    H_jk = Π̃_jk (X_jk − W_jk A_jk),       X = Σ_t (f_t ⊙ ln g_t) v_tᵀ − f_t (v_t ⊙ ln v_t)ᵀ,

sums over the steps t < T_d of every sequence (terms with a zero factor are 0;
ln v_t(k) = (C_{t+1,k} − c_{t+1}) + (ln g_{t+1}(k) − ln n_{t+1}) needs no log).
A and X are rank-B updates over blocks of B steps (BLAS dgemm for large K), so the
(T, K, K) pairwise array is never stored and the K² tables are swept once per
block, not once per step. H is clamped at 0 from below (it is ≥ 0 exactly; the
difference may round below).

BLAS. On request (``use_blas``; the Python face asks for it when K is large) the
K × K mat-vecs and the block updates go through SciPy's BLAS
(``scipy.linalg.cython_blas`` dgemv / dgemm, looked up at import); otherwise plain
loops. Both give the same results up to rounding. BLAS results may depend on
BLAS's own thread count, so the caller keeps BLAS single-threaded during the call.

Determinism
-----------
Sequences are processed in fixed chunks whose boundaries depend only on S, K and
``seq_range`` (never on the number of threads). Per-step and per-sequence outputs
(``resp``, ``log_norm``, Viterbi paths) do not depend on the thread count at all.
The summed tables are accumulated sequentially inside each chunk into a private
partial buffer, and the partials are then added in chunk order by one thread, so
they are bit-identical for any thread count, including builds without OpenMP.

Status codes
------------
Each kernel returns ``(-1, 0)`` when every sequence is valid, otherwise
``(s, code)`` for the first invalid sequence s (smallest index over all chunks):
code 1 — a row of log_lik holds a NaN, a +inf, or no finite entry; 2 — the
sequence has probability 0 (a forward normaliser n_t = 0, or every Viterbi score
−inf); 3 — a forward normaliser overflowed (exp(log_trans) far from stochastic).
"""
import numpy as np

from cython.parallel cimport prange
from libc.math cimport exp, log, INFINITY


cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int bnpvi_hmm_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int bnpvi_hmm_max_threads(void) { return 1; }
    #endif
    """
    int bnpvi_hmm_max_threads() noexcept nogil


# At most MAX_CHUNKS chunks of sequences, and at most TABLE_BYTES of per-chunk
# (K, K) partial tables in all (two tables of K² doubles per chunk).
cdef enum:
    MAX_CHUNKS = 32
cdef Py_ssize_t TABLE_BYTES = 1 << 28

# exp(x) rounds to +0.0 for every x < ln(2⁻¹⁰⁷⁵) ≈ −745.1332; skip the slow libm call there.
cdef double EXP_ZERO = -745.2


# ------------------------------------------------------------------------- BLAS
include "blas.pxi"


cdef inline void _matvec_t(const double* P, const double* x, double* y, Py_ssize_t K,
                           bint blas) noexcept nogil:
    """y = Π̃ᵀ x (P row-major)."""
    cdef Py_ssize_t j, k
    cdef double xj
    cdef const double* prow
    cdef char tr = b'N'
    cdef int n = <int>K, one = 1
    cdef double alpha = 1.0, beta = 0.0
    if blas:
        _dgemv(&tr, &n, &n, &alpha, <double*>P, &n, <double*>x, &one, &beta, y, &one)
        return
    for k in range(K):
        y[k] = 0.0
    for j in range(K):
        xj = x[j]
        if xj != 0.0:
            prow = P + j * K
            for k in range(K):
                y[k] = y[k] + xj * prow[k]


cdef inline void _matvec(const double* P, const double* PT, const double* x, double* y,
                         Py_ssize_t K, bint blas) noexcept nogil:
    """y = Π̃ x (P row-major; PT = Pᵀ row-major for the plain loops, which are _matvec_t's on PT)."""
    cdef char tr = b'T'
    cdef int n = <int>K, one = 1
    cdef double alpha = 1.0, beta = 0.0
    if blas:
        _dgemv(&tr, &n, &n, &alpha, <double*>P, &n, <double*>x, &one, &beta, y, &one)
        return
    _matvec_t(PT, x, y, K, 0)


cdef inline void _rank_update(const double* F, const double* FL, const double* V,
                              const double* VL, Py_ssize_t nb, Py_ssize_t K,
                              double* A, double* X, bint blas) noexcept nogil:
    """A += Fᵀ V and X += FLᵀ V − Fᵀ VL for (nb, K) row-major blocks (rows = steps)."""
    cdef Py_ssize_t j, k, b
    cdef double fj, cj
    cdef double* arow
    cdef double* xrow
    cdef const double* vrow
    cdef const double* wrow
    cdef char tn = b'N', tt = b'T'
    cdef int n = <int>K, m = <int>nb
    cdef double one = 1.0, mone = -1.0
    if blas:
        # column-major view: A' (K × K) += V' F'ᵀ, with V' = Vᵀ, F' = Fᵀ (K × nb)
        _dgemm(&tn, &tt, &n, &n, &m, &one, <double*>V, &n, <double*>F, &n, &one, A, &n)
        _dgemm(&tn, &tt, &n, &n, &m, &one, <double*>V, &n, <double*>FL, &n, &one, X, &n)
        _dgemm(&tn, &tt, &n, &n, &m, &mone, <double*>VL, &n, <double*>F, &n, &one, X, &n)
        return
    for j in range(K):
        arow = A + j * K
        xrow = X + j * K
        for b in range(nb):
            fj = F[b * K + j]
            if fj == 0.0:      # adds exact zeros
                continue
            cj = FL[b * K + j]
            vrow = V + b * K
            wrow = VL + b * K
            for k in range(K):
                arow[k] = arow[k] + fj * vrow[k]
                xrow[k] = xrow[k] + (cj * vrow[k] - fj * wrow[k])


# ----------------------------------------------------------------------- layout
def _exp_nowarn(a):
    with np.errstate(over="ignore"):
        return np.exp(a)


def max_threads():
    """Number of threads OpenMP would use by default (1 without OpenMP)."""
    return bnpvi_hmm_max_threads()


cdef inline Py_ssize_t _padded(Py_ssize_t n) noexcept nogil:
    """n rounded up to 8 doubles plus one 64-byte line (no false sharing between chunks)."""
    return ((n + 7) // 8 + 1) * 8


cdef inline Py_ssize_t _block_steps(Py_ssize_t K) noexcept nogil:
    """Time steps per backward block: 4·B·K doubles of block rows stay in L2."""
    cdef Py_ssize_t b = 32768 // (K if K > 0 else 1)
    return 8 if b < 8 else (128 if b > 128 else b)


def block_steps(Py_ssize_t K):
    """Time steps per backward block for K states (no effect on results beyond rounding)."""
    return _block_steps(K)


def n_chunks_for(Py_ssize_t S, Py_ssize_t K):
    """Number of sequence chunks for S sequences of K states (independent of threads)."""
    cdef Py_ssize_t cap = TABLE_BYTES // (16 * K * K) if K > 0 else MAX_CHUNKS
    cdef Py_ssize_t n = S if S < MAX_CHUNKS else MAX_CHUNKS
    if cap < 1:
        cap = 1
    if n > cap:
        n = cap
    return n if n > 0 else 1


def chunk_bounds(const long long[::1] seq_range, Py_ssize_t K):
    """First sequence of every chunk (n_chunks + 1 entries), balancing time steps.

    A function of ``seq_range`` and K only, so results never depend on threads.
    """
    cdef Py_ssize_t S = seq_range.shape[0] - 1
    cdef Py_ssize_t n = n_chunks_for(S, K)
    sr = np.asarray(seq_range)
    T = int(sr[S]) if S >= 0 else 0
    targets = (np.arange(n + 1, dtype=np.int64) * T) // n
    bounds = np.searchsorted(sr[:S], targets, side="left").astype(np.intp)
    bounds[0] = 0
    bounds[n] = S
    return np.ascontiguousarray(np.maximum.accumulate(bounds))


def _chunk_offsets(seq_range, bounds, Py_ssize_t per_step):
    """Offsets of per-chunk scratch of ``per_step`` × (longest sequence of the chunk),
    reused by the chunk's sequences one after another."""
    lens = np.diff(np.asarray(seq_range))
    sizes = [_padded(per_step * int(lens[bounds[c]:bounds[c + 1]].max())) if bounds[c + 1] > bounds[c] else 0
             for c in range(len(bounds) - 1)]
    return np.ascontiguousarray(np.concatenate([[0], np.cumsum(sizes, dtype=np.intp)]).astype(np.intp))


# ------------------------------------------------------------------------- rows
cdef inline bint _row_max(const double* c, Py_ssize_t K, double* out) noexcept nogil:
    """out = max_k c_k; False when the row has a NaN, a +inf, or no finite entry."""
    cdef Py_ssize_t k
    cdef double m = -INFINITY, x
    for k in range(K):
        x = c[k]
        if x > m:
            m = x
        elif not (x <= m):      # NaN
            return False
    out[0] = m
    return m > -INFINITY and m < INFINITY


# ------------------------------------------------------------- forward-backward
cdef int _fb_sequence(const double* C, Py_ssize_t L, Py_ssize_t K,
                      const double* ta, double ashift, const double* P, const double* PT,
                      double* F, double* E, double* nrm, double* lnrm, double* cmx,
                      double* gc, double* lgc, double* V, double* VL, double* G, double* LG,
                      Py_ssize_t B, bint blas,
                      double* A, double* X, double* M0, double* H0, double* logz,
                      double* gout, double* vout) noexcept nogil:
    """Scaled forward-backward of one sequence; adds its summaries into A, X, M0, H0.

    When ``gout`` and ``vout`` are not NULL, g_t (L, K) and v_t (L, K; row L − 1 is 0)
    are written there (for the merge terms of moves, ``bnpvi.kernels.hmm``).

    F (L, K) receives f_t, then r_t in place; E (L, K), nrm, lnrm, cmx (L,) are
    scratch (E_t, n_t, ln n_t, c_t); gc, lgc (K,) carry g and ln g between backward
    blocks; V, VL, G, LG (B, K) hold v_t, v_t ⊙ ln v_t, g_t and ln g_t (then
    f_t ⊙ ln g_t) of one block, row b for step tl + b.
    Returns 0, or the status code of the module docstring.
    """
    cdef Py_ssize_t t, j, k, b, th, tl, nb
    cdef double m, x, n, inv, vk, r, cm, lnn, rho, lz = ashift
    cdef const double* row
    cdef const double* pg
    cdef const double* plg
    cdef double* e
    cdef double* f
    cdef double* vrow
    cdef double* vlrow
    cdef double* grow
    cdef double* lgrow

    # ---- forward
    for t in range(L):
        row = C + t * K
        e = E + t * K
        f = F + t * K
        if not _row_max(row, K, &m):
            return 1
        for k in range(K):
            x = row[k] - m
            e[k] = exp(x) if x >= EXP_ZERO else 0.0
        if t == 0:
            for k in range(K):
                f[k] = ta[k] * e[k]
        else:
            _matvec_t(P, f - K, f, K, blas)
            for k in range(K):
                f[k] = f[k] * e[k]
        n = 0.0
        for k in range(K):
            n = n + f[k]
        if n == 0.0:
            return 2
        if not (n < INFINITY):
            return 3
        for k in range(K):
            f[k] = f[k] / n
        nrm[t] = n
        lnn = log(n)
        lnrm[t] = lnn
        cmx[t] = m
        lz = lz + (m + lnn)
    logz[0] = lz
    if gout != NULL:
        for k in range(K):
            gout[(L - 1) * K + k] = 1.0
            vout[(L - 1) * K + k] = 0.0

    # ---- backward in blocks of steps tl..th (row b = t − tl), latest block first
    for k in range(K):
        gc[k] = 1.0
        lgc[k] = 0.0
    th = L - 2
    while th >= 0:
        tl = th - B + 1
        if tl < 0:
            tl = 0
        nb = th - tl + 1
        # (1) the recursion, t = th down to tl: v_t = E_{t+1} ⊙ g_{t+1} / n_{t+1}, g_t = Π̃ v_t
        for b in range(nb - 1, -1, -1):
            t = tl + b
            e = E + (t + 1) * K
            row = C + (t + 1) * K
            cm = cmx[t + 1]
            lnn = lnrm[t + 1]
            inv = 1.0 / nrm[t + 1]
            pg = gc if b == nb - 1 else G + (b + 1) * K
            plg = lgc if b == nb - 1 else LG + (b + 1) * K
            vrow = V + b * K
            vlrow = VL + b * K
            for k in range(K):
                vk = e[k] * pg[k] * inv
                vrow[k] = vk
                vlrow[k] = vk * ((row[k] - cm) + (plg[k] - lnn)) if vk > 0.0 else 0.0
            grow = G + b * K
            _matvec(P, PT, vrow, grow, K, blas)
            # Σ_j f_t(j) g_t(j) = 1 exactly; dividing by the computed sum keeps rounding
            # from drifting along long sequences (rows of resp sum to 1 within ulps)
            f = F + t * K
            rho = 0.0
            for j in range(K):
                rho = rho + f[j] * grow[j]
            if rho > 0.0 and rho < INFINITY:
                for j in range(K):
                    grow[j] = grow[j] / rho
            lgrow = LG + b * K
            for j in range(K):
                lgrow[j] = log(grow[j]) if grow[j] > 0.0 else 0.0
            if gout != NULL:
                for k in range(K):
                    gout[t * K + k] = grow[k]
                    vout[t * K + k] = vrow[k]
        for k in range(K):
            lgc[k] = LG[k]
        # (2) the pairwise tables: LG becomes f_t ⊙ ln g_t, then rank-nb updates
        for b in range(nb):
            f = F + (tl + b) * K
            lgrow = LG + b * K
            for j in range(K):
                lgrow[j] = f[j] * lgrow[j]
        _rank_update(F + tl * K, LG, V, VL, nb, K, A, X, blas)
        # (3) f_{t+1} is no longer needed: r_{t+1} = f_{t+1} ⊙ g_{t+1}
        for b in range(nb):
            pg = gc if b == nb - 1 else G + (b + 1) * K
            f = F + (tl + b + 1) * K
            for k in range(K):
                f[k] = f[k] * pg[k]
        for k in range(K):
            gc[k] = G[k]
        th = tl - 1
    for k in range(K):
        r = F[k] * gc[k]
        F[k] = r
        M0[k] = M0[k] + r
        if r > 0.0 and r < 1.0:
            H0[k] = H0[k] - r * log(r)
    return 0


def forward_backward(const double[:, ::1] log_lik, const long long[::1] seq_range,
                     const double[::1] log_start, const double[:, ::1] log_trans,
                     double[:, ::1] resp, double[::1] start_counts, double[:, ::1] trans_counts,
                     double[::1] start_entropy, double[:, ::1] trans_entropy,
                     double[::1] log_norm, int n_threads, bint use_blas,
                     double[:, ::1] backward, double[:, ::1] scaled_next):
    """Scaled forward-backward over every sequence (see the module docstring).

    ``backward`` and ``scaled_next`` receive g_t and v_t (both (T, K)) when they have
    T rows; pass (0, K) arrays to skip them.

    ``use_blas`` selects SciPy's BLAS for the K × K products (ignored when it was not
    found); the caller keeps BLAS single-threaded meanwhile. Writes every output;
    returns (first invalid sequence, status code) or (-1, 0).
    """
    cdef Py_ssize_t T = log_lik.shape[0], K = log_lik.shape[1]
    cdef Py_ssize_t KK = K * K, pk = _padded(K), pkk = _padded(K * K)
    cdef Py_ssize_t B = _block_steps(K), pbk = _padded(B * K)
    cdef Py_ssize_t[::1] bounds = chunk_bounds(seq_range, K)
    cdef Py_ssize_t n_chunks = bounds.shape[0] - 1
    cdef Py_ssize_t[::1] eoff = _chunk_offsets(seq_range, bounds, K)
    cdef Py_ssize_t[::1] soff = _chunk_offsets(seq_range, bounds, 3)
    cdef Py_ssize_t c, d, j, k, t0, t1, ml
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef bint blas = use_blas and _dgemv != NULL and _dgemm != NULL
    cdef double amax = -INFINITY, ashift = 0.0, acc, accx, h

    cdef double[::1] ta = np.empty(max(K, 1))
    cdef double[:, ::1] P = _exp_nowarn(np.asarray(log_trans))
    cdef double[:, ::1] PT = np.ascontiguousarray(np.asarray(P).T)
    cdef double[::1] ebuf = np.empty(max(eoff[n_chunks], 1))
    cdef double[::1] sbuf = np.empty(max(soff[n_chunks], 1))
    cdef double[:, ::1] vecs = np.empty((n_chunks, 2 * pk + 4 * pbk))
    cdef double[:, ::1] tabs = np.zeros((n_chunks, 2 * pkk))
    cdef double[:, ::1] vtabs = np.zeros((n_chunks, 2 * pk))
    cdef Py_ssize_t[::1] bad = np.full(n_chunks, -1, dtype=np.intp)
    cdef int[::1] code = np.zeros(n_chunks, dtype=np.intc)
    cdef int rc
    cdef double* w
    cdef double* sv
    cdef bint keep = backward.shape[0] == T and scaled_next.shape[0] == T and T > 0

    for k in range(K):
        if log_start[k] > amax:
            amax = log_start[k]
    if amax > -INFINITY:
        ashift = amax
        for k in range(K):
            ta[k] = exp(log_start[k] - amax)
    else:
        for k in range(K):
            ta[k] = 0.0     # every sequence has probability 0 (reported below)

    with nogil:
        for c in prange(n_chunks, schedule="dynamic", num_threads=nt):
            w = &vecs[c, 0]
            sv = &sbuf[soff[c]]
            ml = (soff[c + 1] - soff[c]) // 3
            for d in range(bounds[c], bounds[c + 1]):
                t0 = seq_range[d]
                t1 = seq_range[d + 1]
                rc = _fb_sequence(&log_lik[t0, 0], t1 - t0, K, &ta[0], ashift, &P[0, 0], &PT[0, 0],
                                  &resp[t0, 0], &ebuf[eoff[c]], sv, sv + ml, sv + 2 * ml,
                                  w, w + pk, w + 2 * pk, w + 2 * pk + pbk, w + 2 * pk + 2 * pbk,
                                  w + 2 * pk + 3 * pbk, B, blas,
                                  &tabs[c, 0], &tabs[c, pkk], &vtabs[c, 0], &vtabs[c, pk],
                                  &log_norm[d], &backward[t0, 0] if keep else NULL,
                                  &scaled_next[t0, 0] if keep else NULL)
                if rc != 0:
                    bad[c] = d
                    code[c] = rc
                    break
        # chunk partials added in chunk order (deterministic); then M = Π̃ ⊙ A and
        # H = max(Π̃ ⊙ (X − W ⊙ A), 0), with W's −inf entries (Π̃ = 0) giving 0
        for j in range(KK):
            acc = 0.0
            accx = 0.0
            for c in range(n_chunks):
                acc = acc + tabs[c, j]
                accx = accx + tabs[c, pkk + j]
            trans_counts[j // K, j % K] = P[j // K, j % K] * acc
            h = 0.0
            if P[j // K, j % K] > 0.0:
                h = P[j // K, j % K] * (accx - log_trans[j // K, j % K] * acc)
            trans_entropy[j // K, j % K] = h if h > 0.0 else 0.0
        for k in range(K):
            acc = 0.0
            accx = 0.0
            for c in range(n_chunks):
                acc = acc + vtabs[c, k]
                accx = accx + vtabs[c, pk + k]
            start_counts[k] = acc
            start_entropy[k] = accx
    for c in range(n_chunks):
        if bad[c] >= 0:
            return bad[c], code[c]
    return -1, 0


# ---------------------------------------------------------------------- Viterbi
cdef int _viterbi_sequence(const double* C, Py_ssize_t L, Py_ssize_t K, const double* a,
                           const double* W, double* delta, double* dn, int* bp,
                           long long* z) noexcept nogil:
    """Most likely path of one sequence into z (L,); ties go to the lowest index.

    δ is shifted by its maximum after every step (the argmaxes do not change).
    bp (L, K) is scratch for the back-pointers (the chunk's, reused by its sequences).
    Returns 0, 1 or 2 (module docstring).
    """
    cdef Py_ssize_t t, j, k, best
    cdef double m, x, dj, mx
    cdef const double* row
    cdef const double* wrow
    cdef int* bprow

    row = C
    if not _row_max(row, K, &m):
        return 1
    mx = -INFINITY
    for k in range(K):
        x = a[k] + row[k]
        delta[k] = x
        if x > mx:
            mx = x
    if mx == -INFINITY:
        return 2
    for k in range(K):
        delta[k] = delta[k] - mx
    for t in range(1, L):
        row = C + t * K
        if not _row_max(row, K, &m):
            return 1
        bprow = bp + t * K
        dj = delta[0]
        for k in range(K):
            dn[k] = dj + W[k]
            bprow[k] = 0
        for j in range(1, K):
            dj = delta[j]
            if dj == -INFINITY:
                continue
            wrow = W + j * K
            for k in range(K):
                x = dj + wrow[k]
                if x > dn[k]:
                    dn[k] = x
                    bprow[k] = <int>j
        mx = -INFINITY
        for k in range(K):
            x = dn[k] + row[k]
            dn[k] = x
            if x > mx:
                mx = x
        if mx == -INFINITY:
            return 2
        for k in range(K):
            delta[k] = dn[k] - mx
    best = 0
    for k in range(1, K):
        if delta[k] > delta[best]:
            best = k
    z[L - 1] = best
    for t in range(L - 1, 0, -1):
        z[t - 1] = bp[t * K + z[t]]
    return 0


def viterbi(const double[:, ::1] log_lik, const long long[::1] seq_range,
            const double[::1] log_start, const double[:, ::1] log_trans,
            long long[::1] path, int n_threads):
    """Viterbi path of every sequence into ``path`` (T,).

    Returns (first invalid sequence, status code) or (-1, 0).
    """
    cdef Py_ssize_t T = log_lik.shape[0], K = log_lik.shape[1]
    cdef Py_ssize_t pk = _padded(K)
    cdef Py_ssize_t[::1] bounds = chunk_bounds(seq_range, 0)
    cdef Py_ssize_t n_chunks = bounds.shape[0] - 1
    cdef Py_ssize_t[::1] boff = _chunk_offsets(seq_range, bounds, K)
    cdef Py_ssize_t c, d, t0, t1
    cdef int nt = n_threads if n_threads > 0 else 1
    cdef int[::1] bp = np.empty(max(boff[n_chunks], 1), dtype=np.intc)
    cdef double[:, ::1] vecs = np.empty((n_chunks, 2 * pk))
    cdef Py_ssize_t[::1] bad = np.full(n_chunks, -1, dtype=np.intp)
    cdef int[::1] code = np.zeros(n_chunks, dtype=np.intc)
    cdef int rc
    cdef double* w

    with nogil:
        for c in prange(n_chunks, schedule="dynamic", num_threads=nt):
            w = &vecs[c, 0]
            for d in range(bounds[c], bounds[c + 1]):
                t0 = seq_range[d]
                t1 = seq_range[d + 1]
                rc = _viterbi_sequence(&log_lik[t0, 0], t1 - t0, K, &log_start[0],
                                       &log_trans[0, 0], w, w + pk, &bp[boff[c]], &path[t0])
                if rc != 0:
                    bad[c] = d
                    code[c] = rc
                    break
    for c in range(n_chunks):
        if bad[c] >= 0:
            return bad[c], code[c]
    return -1, 0
