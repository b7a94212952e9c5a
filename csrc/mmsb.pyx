# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled local step of the assortative mixed-membership stochastic blockmodel.

Never call this directly: ``bnpvi.kernels.mmsb`` checks dtypes, shapes and contiguity and
allocates the outputs. Every argument is assumed valid and C-contiguous.

Math (Stephenson 2015 Eq. 27, App. C Eq. 49-50). For an ordered pair (i, j) with value x,
scaled weights w_ik = exp(E ln π_ik − m_i) (m_i: the row's largest E ln π_ik), W_i = Σ_{k≤K} w_ik,
f_k(x) = exp(x E ln φ_k + (1−x) E ln(1−φ_k)) and f_ε(x) = ε^x (1−ε)^{1−x}:

    d_k = w_ik w_jk,  Z = Σ_k d_k f_k(x) + f_ε(x) (W_i W_j − Σ_k d_k),
    η_kk = d_k f_k(x) / Z,   Σ_k η_kk = Σ_k d_k f_k(x) / Z,
    E[s_ij = k] = η_kk + w_ik (W_j − w_jk) f_ε(x) / Z,  E[r_ij = k] = η_kk + w_jk (W_i − w_ik) f_ε(x) / Z.

O(K) per pair, in a factored form with the source's vectors computed once per source,
h_xk = w_ik (f_k(x) − f_ε(x)) and g_xk = w_ik f_k(x) + (W_i − w_ik) f_ε(x), and τ_ij = 1/Z_ij:

    Z_ij = f_ε(x) W_i W_j + Σ_k w_jk h_xk,      U_jk += τ_ij w_jk g_xk   (receiver j),
    T_xk = Σ_{j: x_ij = x} τ_ij w_jk,  a_x = Σ_{j: x_ij = x} τ_ij W_j   (per source, one pass),

from which the sender's sums follow once per source: Σ_j η_kk = w_ik f_k(x) T_xk (into S_x), E_x =
n_x − Σ_k w_ik f_k(x) T_xk (n_x pairs of value x), and U_ik += Σ_x w_ik f_k(x) T_xk + w_ik (A − B_k)
with A = Σ_x f_ε(x) a_x, B_k = Σ_x f_ε(x) T_xk. Non-edges are every j that is not in the source's
sorted edge list, found by walking that list beside j; held-out pairs are skipped the same way.
Nothing per pair is stored.

Parallel over receivers: the nodes j are cut into ``n_chunks`` fixed contiguous chunks (a function
of the input only), and every chunk runs all the batch's sources over its own nodes. A node's
receiver row U_j is written by its chunk alone, sources in batch order, so it needs no buffer; the
sender sums (Σ_j η_kk, A, B_k) and E, ln Z are kept per chunk and source and added in chunk order by
one thread after the chunks. A chunk's w and U rows stay in cache while its sources pass over them,
and the result is the same for any number of threads, including builds without OpenMP.

The rows' weights come from P_ik = E ln π_ik inside the kernel (m_i = max_k P_ik, w_ik, W_i), one
parallel pass over the rows.

Outputs (added to): U (N, K) membership usage, S (2, K) Σ η_kk for x = 0 and x = 1, E (2,)
Σ (1 − Σ_k η_kk) for x = 0, 1; returns the sum of ln Z_ij (unscaled).
"""
from cython.parallel cimport prange
from libc.math cimport exp, log
import numpy as np


cdef inline double _digamma(double x) noexcept nogil:
    """ψ(x) for x > 0: ψ(x) = ψ(x + n) − Σ_{i<n} 1/(x + i) up to x + n ≥ 10 (the sum kept as one fraction p/q,
    one division), then the asymptotic series ln x − 1/(2x) − Σ_n B_2n / (2n x^2n) through x^-14 (its next
    term is below 5e-17 there). Own code rather than SciPy's C API, whose compiled signatures are not stable
    across SciPy releases."""
    cdef double shift = 0.0, p = 0.0, q = 1.0, inv, inv2
    if x < 1.0:
        shift = 1.0 / x
        x = x + 1.0
    while x < 10.0:
        p = p * x + q
        q = q * x
        x = x + 1.0
    shift = shift + p / q
    inv = 1.0 / x
    inv2 = inv * inv
    return log(x) - 0.5 * inv - shift - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 * (1.0 / 132 - inv2 * (691.0 / 32760 - inv2 / 12.0))))))


def expected_log_memberships(const double[:, ::1] theta, double[:, ::1] out, int n_threads):
    """out_ik = ψ(θ_ik) − ψ(Σ_m θ_im) for Dirichlet rows θ_i and the first out.shape[1] entries k, rows in
    parallel."""
    cdef Py_ssize_t i, k, N = theta.shape[0], M = theta.shape[1], K = out.shape[1]
    cdef double total
    cdef int nt = n_threads if n_threads > 0 else 1
    with nogil:
        for i in prange(N, schedule="static", num_threads=nt):
            total = 0.0
            for k in range(M):
                total = total + theta[i, k]
            total = _digamma(total)
            for k in range(K):
                out[i, k] = _digamma(theta[i, k]) - total


cdef inline Py_ssize_t _lower_bound(const int[::1] values, Py_ssize_t lo, Py_ssize_t hi, long key) noexcept nogil:
    """The first position p in lo:hi with values[p] >= key (values sorted), or hi."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef void _row_weights(const double[:, ::1] P, double[:, ::1] w, double[::1] scale, double[::1] wsum,
                       Py_ssize_t i) noexcept nogil:
    """m_i = max_k P_ik, w_ik = exp(P_ik − m_i), W_i = Σ_k w_ik."""
    cdef Py_ssize_t k, K = P.shape[1]
    cdef double m = P[i, 0], total = 0.0
    for k in range(1, K):
        if P[i, k] > m:
            m = P[i, k]
    for k in range(K):
        w[i, k] = exp(P[i, k] - m)
        total = total + w[i, k]
    scale[i] = m
    wsum[i] = total


cdef void _chunk(const double[:, ::1] w, const double[::1] scale, const double[::1] wsum,
                 const double[:, ::1] f, const double[::1] f_eps, long first, long lo, long hi,
                 const long[::1] indptr, const int[::1] indices,
                 const long[::1] held_indptr, const int[::1] held_indices,
                 double[:, ::1] U, double[:, :, ::1] T, double[:, ::1] a, double[:, ::1] n, double[::1] log_z,
                 double[:, ::1] work) noexcept nogil:
    """Every source of the batch against the nodes lo:hi: receiver rows into U; this chunk's T_x (n_src, 2, K),
    a_x and n_x (n_src, 2) per source, and its Σ ln Z (``log_z[0]``)."""
    cdef Py_ssize_t K = w.shape[1], n_src = indptr.shape[0] - 1
    cdef Py_ssize_t s, i, j, k, e, e_end, h, h_end
    cdef int x
    cdef double Wi, Wj, Z, z0, z1, z2, z3, tau, t, total = 0.0
    cdef double[:, ::1] hx = work[0:2]
    cdef double[:, ::1] gx = work[2:4]
    for s in range(n_src):
        i = first + s
        Wi = wsum[i]
        for x in range(2):
            for k in range(K):
                hx[x, k] = w[i, k] * (f[x, k] - f_eps[x])
                gx[x, k] = w[i, k] * f[x, k] + (Wi - w[i, k]) * f_eps[x]
        e_end = indptr[s + 1]
        e = _lower_bound(indices, indptr[s], e_end, lo)
        h_end = held_indptr[s + 1]
        h = _lower_bound(held_indices, held_indptr[s], h_end, lo)
        for j in range(lo, hi):
            if j == i:
                continue
            if h < h_end and held_indices[h] == j:
                h += 1
                if e < e_end and indices[e] == j:  # a held-out pair listed as an edge too: still left out
                    e += 1
                continue
            x = 0
            if e < e_end and indices[e] == j:
                x = 1
                e += 1
            Wj = wsum[j]
            z0 = 0.0  # four partial sums: the dot product's chain of additions is the pair's critical path
            z1 = 0.0
            z2 = 0.0
            z3 = 0.0
            for k in range(0, K - 3, 4):
                z0 = z0 + w[j, k] * hx[x, k]
                z1 = z1 + w[j, k + 1] * hx[x, k + 1]
                z2 = z2 + w[j, k + 2] * hx[x, k + 2]
                z3 = z3 + w[j, k + 3] * hx[x, k + 3]
            for k in range(K - K % 4, K):
                z0 = z0 + w[j, k] * hx[x, k]
            Z = f_eps[x] * Wi * Wj + ((z0 + z1) + (z2 + z3))
            if Z < 1e-300:
                Z = 1e-300
            tau = 1.0 / Z
            a[s, x] += tau * Wj
            n[s, x] += 1.0
            for k in range(K):
                t = tau * w[j, k]
                T[s, x, k] += t
                U[j, k] += t * gx[x, k]
            total = total + log(Z) + scale[i] + scale[j]
    log_z[0] = total


def pair_step(const double[:, ::1] P, const double[:, ::1] f, const double[::1] f_eps, long first,
              const long[::1] indptr, const int[::1] indices,
              const long[::1] held_indptr, const int[::1] held_indices,
              double[:, ::1] U, double[:, ::1] S, double[::1] E, int n_chunks, int n_threads):
    """Add the batch's summaries to U, S, E (module docstring); returns Σ ln Z_ij."""
    cdef Py_ssize_t N = P.shape[0], K = P.shape[1], n_src = indptr.shape[0] - 1
    cdef Py_ssize_t c, i, k, s
    cdef int x, nt = n_threads if n_threads > 0 else 1
    cdef double[:, ::1] w = np.empty((N, K))
    cdef double[::1] scale = np.empty(N)
    cdef double[::1] wsum = np.empty(N)
    cdef double[:, :, :, ::1] T = np.zeros((n_chunks, n_src, 2, K))
    cdef double[:, :, ::1] a = np.zeros((n_chunks, n_src, 2))
    cdef double[:, :, ::1] n = np.zeros((n_chunks, n_src, 2))
    cdef double[:, ::1] chunk_log_z = np.zeros((n_chunks, 1))
    cdef double[:, :, ::1] work = np.zeros((n_chunks, 4, K))
    cdef double log_z = 0.0, A, eta, Tx, nx, inside
    with nogil:
        for i in prange(N, schedule="static", num_threads=nt):
            _row_weights(P, w, scale, wsum, i)
        for c in prange(n_chunks, schedule="dynamic", num_threads=nt):
            _chunk(w, scale, wsum, f, f_eps, first, c * N // n_chunks, (c + 1) * N // n_chunks, indptr, indices,
                   held_indptr, held_indices, U, T[c], a[c], n[c], chunk_log_z[c], work[c])
        for s in range(n_src):
            i = first + s
            A = 0.0
            for x in range(2):
                nx = 0.0
                for c in range(n_chunks):
                    A = A + f_eps[x] * a[c, s, x]
                    nx = nx + n[c, s, x]
                inside = 0.0
                for k in range(K):
                    Tx = 0.0
                    for c in range(n_chunks):
                        Tx = Tx + T[c, s, x, k]
                    eta = w[i, k] * f[x, k] * Tx
                    inside = inside + eta
                    S[x, k] += eta
                    U[i, k] += eta - w[i, k] * f_eps[x] * Tx
                E[x] += nx - inside
            for k in range(K):
                U[i, k] += w[i, k] * A
        for c in range(n_chunks):
            log_z += chunk_log_z[c, 0]
    return log_z
