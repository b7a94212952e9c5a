# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled local step of the assortative mixed-membership stochastic blockmodel.

Never call this directly: ``bnpvi.kernels.mmsb`` checks dtypes, shapes and contiguity and
allocates the outputs. Every argument is assumed valid and C-contiguous.

Math (Stephenson 2015 Eq. 27, App. C Eq. 49-50). For an ordered pair (i, j) with value x,
scaled weights w_ik = exp(E ln π_ik − m_i) (m_i: the row's largest E ln π_ik), W_i = Σ_{k≤K} w_ik,
f_k(x) = exp(x E ln φ_k + (1−x) E ln(1−φ_k)) and f_ε(x) = ε^x (1−ε)^{1−x}:

    d_k = w_ik w_jk,  Z = Σ_k d_k f_k(x) + f_ε(x) (W_i W_j − Σ_k d_k),
    η_kk = d_k f_k(x) / Z,
    E[s_ij = k] = η_kk + w_ik (W_j − w_jk) f_ε(x) / Z,  E[r_ij = k] = η_kk + w_jk (W_i − w_ik) f_ε(x) / Z.

O(K) per pair. The sender sums over j are kept per source as Σ_j η_kk and the two scalars/vectors
A = Σ_j c_j W_j, B_k = Σ_j c_j w_jk (c_j = f_ε(x_ij)/Z_ij), so the sender row costs O(K) once per
source: U_ik += Σ_j η_kk + w_ik (A − B_k). Non-edges are every j that is not in the source's sorted
edge list, found by walking that list beside j; held-out pairs are skipped the same way. Nothing
per pair is stored.

Outputs (added to, in a fixed order: the result does not depend on anything but the input):
U (N, K) memberships usage, S (2, K) Σ η_kk for x = 0 and x = 1, E (2,) Σ (1 − Σ_k η_kk) for
x = 0, 1, and the sum of ln Z_ij (unscaled) as the return value.
"""
from libc.math cimport log


def pair_step(const double[:, ::1] w, const double[::1] scale, const double[::1] wsum,
              const double[:, ::1] f, const double[::1] f_eps, long first,
              const long[::1] indptr, const int[::1] indices,
              const long[::1] held_indptr, const int[::1] held_indices,
              double[:, ::1] U, double[:, ::1] S, double[::1] E, double[::1] work):
    """Accumulate the batch's summaries (module docstring); returns Σ ln Z_ij.

    ``work`` is scratch of length 4 K.
    """
    cdef Py_ssize_t N = w.shape[0], K = w.shape[1], n_src = indptr.shape[0] - 1
    cdef Py_ssize_t s, i, j, k, e, e_end, h, h_end
    cdef int x
    cdef double Wi, Wj, sd, sf, Z, c, A, eta, tot, log_z = 0.0, eta_sum
    cdef double[::1] d = work[0:K]
    cdef double[::1] B = work[K:2 * K]
    cdef double[::1] acc0 = work[2 * K:3 * K]
    cdef double[::1] acc1 = work[3 * K:4 * K]
    with nogil:
        for s in range(n_src):
            i = first + s
            Wi = wsum[i]
            e, e_end = indptr[s], indptr[s + 1]
            h, h_end = held_indptr[s], held_indptr[s + 1]
            A = 0.0
            for k in range(K):
                B[k] = 0.0
                acc0[k] = 0.0
                acc1[k] = 0.0
            for j in range(N):
                if j == i:
                    continue
                if h < h_end and held_indices[h] == j:
                    h += 1
                    if e < e_end and indices[e] == j:  # a held-out edge is not stored, but be safe
                        e += 1
                    continue
                x = 0
                if e < e_end and indices[e] == j:
                    x = 1
                    e += 1
                Wj = wsum[j]
                sd = 0.0
                sf = 0.0
                for k in range(K):
                    d[k] = w[i, k] * w[j, k]
                    sd = sd + d[k]
                    sf = sf + d[k] * f[x, k]
                Z = sf + f_eps[x] * (Wi * Wj - sd)
                if Z < 1e-300:
                    Z = 1e-300
                tot = 1.0 / Z
                c = f_eps[x] * tot
                A = A + c * Wj
                eta_sum = 0.0
                if x == 1:
                    for k in range(K):
                        eta = d[k] * f[1, k] * tot
                        acc1[k] += eta
                        eta_sum = eta_sum + eta
                        B[k] += c * w[j, k]
                        U[j, k] += eta + w[j, k] * (Wi - w[i, k]) * c
                else:
                    for k in range(K):
                        eta = d[k] * f[0, k] * tot
                        acc0[k] += eta
                        eta_sum = eta_sum + eta
                        B[k] += c * w[j, k]
                        U[j, k] += eta + w[j, k] * (Wi - w[i, k]) * c
                E[x] += 1.0 - eta_sum
                log_z = log_z + log(Z) + scale[i] + scale[j]
            for k in range(K):
                U[i, k] += acc0[k] + acc1[k] + w[i, k] * (A - B[k])
                S[0, k] += acc0[k]
                S[1, k] += acc1[k]
    return log_z
