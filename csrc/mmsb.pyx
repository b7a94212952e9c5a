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

O(K) per pair. The sender sums over j are kept per source as Σ_j η_kk and A = Σ_j c_j W_j,
B_k = Σ_j c_j w_jk (c_j = f_ε(x_ij)/Z_ij), so the sender row costs O(K) once per source:
U_ik += Σ_j η_kk + w_ik (A − B_k). Non-edges are every j that is not in the source's sorted edge
list, found by walking that list beside j; held-out pairs are skipped the same way. Nothing per
pair is stored.

Determinism: the sources are cut into ``n_chunks`` fixed contiguous chunks (a function of the input
only); each chunk adds into its own buffers, which are then added in chunk order by one thread, so
the result is the same for any number of threads, including builds without OpenMP.

Outputs (added to): U (N, K) membership usage, S (2, K) Σ η_kk for x = 0 and x = 1, E (2,)
Σ (1 − Σ_k η_kk) for x = 0, 1; returns the sum of ln Z_ij (unscaled).
"""
from cython.parallel cimport prange
from libc.math cimport log
import numpy as np


cdef double _chunk(const double[:, ::1] w, const double[::1] scale, const double[::1] wsum,
                   const double[:, ::1] f, const double[::1] f_eps, long first, long s_lo, long s_hi,
                   const long[::1] indptr, const int[::1] indices,
                   const long[::1] held_indptr, const int[::1] held_indices,
                   double[:, ::1] U, double[:, ::1] S, double[::1] E, double[:, ::1] work) noexcept nogil:
    """Sources s_lo:s_hi into U, S, E (this chunk's buffers); returns their Σ ln Z."""
    cdef Py_ssize_t N = w.shape[0], K = w.shape[1]
    cdef Py_ssize_t s, i, j, k, e, e_end, h, h_end
    cdef int x
    cdef double Wi, Wj, sd, sf, Z, c, A, eta, tot, log_z = 0.0, fx
    cdef double[::1] d = work[0]
    cdef double[::1] B = work[1]
    cdef double[::1] acc0 = work[2]
    cdef double[::1] acc1 = work[3]
    cdef double[::1] rest = work[4]
    for s in range(s_lo, s_hi):
        i = first + s
        Wi = wsum[i]
        e, e_end = indptr[s], indptr[s + 1]
        h, h_end = held_indptr[s], held_indptr[s + 1]
        A = 0.0
        for k in range(K):
            B[k] = 0.0
            acc0[k] = 0.0
            acc1[k] = 0.0
            rest[k] = Wi - w[i, k]
        for j in range(N):
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
            for k in range(K):
                d[k] = w[i, k] * w[j, k]
            sd = 0.0
            sf = 0.0
            for k in range(K):
                sd = sd + d[k]
                sf = sf + d[k] * f[x, k]
            fx = f_eps[x]
            Z = sf + fx * (Wi * Wj - sd)
            if Z < 1e-300:
                Z = 1e-300
            tot = 1.0 / Z
            c = fx * tot
            A = A + c * Wj
            if x == 1:
                for k in range(K):
                    eta = d[k] * f[1, k] * tot
                    acc1[k] += eta
                    B[k] += c * w[j, k]
                    U[j, k] += eta + w[j, k] * rest[k] * c
            else:
                for k in range(K):
                    eta = d[k] * f[0, k] * tot
                    acc0[k] += eta
                    B[k] += c * w[j, k]
                    U[j, k] += eta + w[j, k] * rest[k] * c
            E[x] += 1.0 - sf * tot
            log_z = log_z + log(Z) + scale[i] + scale[j]
        for k in range(K):
            U[i, k] += acc0[k] + acc1[k] + w[i, k] * (A - B[k])
            S[0, k] += acc0[k]
            S[1, k] += acc1[k]
    return log_z


def pair_step(const double[:, ::1] w, const double[::1] scale, const double[::1] wsum,
              const double[:, ::1] f, const double[::1] f_eps, long first,
              const long[::1] indptr, const int[::1] indices,
              const long[::1] held_indptr, const int[::1] held_indices,
              double[:, ::1] U, double[:, ::1] S, double[::1] E, int n_chunks, int n_threads):
    """Add the batch's summaries to U, S, E (module docstring); returns Σ ln Z_ij."""
    cdef Py_ssize_t N = w.shape[0], K = w.shape[1], n_src = indptr.shape[0] - 1
    cdef Py_ssize_t c, i, k
    cdef int nt = n_threads if n_threads > 0 else 1
    if n_chunks == 1:  # no buffers to add up
        work = np.zeros((5, K))
        return _one(w, scale, wsum, f, f_eps, first, n_src, indptr, indices, held_indptr, held_indices, U, S, E,
                    work)
    cdef double[:, :, ::1] Uc = np.zeros((n_chunks, N, K))
    cdef double[:, :, ::1] Sc = np.zeros((n_chunks, 2, K))
    cdef double[:, ::1] Ec = np.zeros((n_chunks, 2))
    cdef double[::1] Lc = np.zeros(n_chunks)
    cdef double[:, :, ::1] Wc = np.zeros((n_chunks, 5, K))
    cdef double log_z = 0.0
    with nogil:
        for c in prange(n_chunks, schedule="dynamic", num_threads=nt):
            Lc[c] = _chunk(w, scale, wsum, f, f_eps, first, c * n_src // n_chunks, (c + 1) * n_src // n_chunks,
                           indptr, indices, held_indptr, held_indices, Uc[c], Sc[c], Ec[c], Wc[c])
        for c in range(n_chunks):
            for i in range(N):
                for k in range(K):
                    U[i, k] += Uc[c, i, k]
            for k in range(K):
                S[0, k] += Sc[c, 0, k]
                S[1, k] += Sc[c, 1, k]
            E[0] += Ec[c, 0]
            E[1] += Ec[c, 1]
            log_z += Lc[c]
    return log_z


cdef double _one(const double[:, ::1] w, const double[::1] scale, const double[::1] wsum,
                 const double[:, ::1] f, const double[::1] f_eps, long first, long n_src,
                 const long[::1] indptr, const int[::1] indices,
                 const long[::1] held_indptr, const int[::1] held_indices,
                 double[:, ::1] U, double[:, ::1] S, double[::1] E, double[:, ::1] work):
    with nogil:
        return _chunk(w, scale, wsum, f, f_eps, first, 0, n_src, indptr, indices, held_indptr, held_indices, U, S, E,
                      work)
