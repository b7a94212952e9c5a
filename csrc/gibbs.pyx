# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Compiled collapsed Gibbs sweeps of truncation-free stochastic VI (Wang & Blei 2012, Alg. 2).

Never call these directly: ``bnpvi.kernels.gibbs`` checks dtypes, shapes and contiguity and
keeps the state arrays. Every function assumes valid, C-contiguous input and mutates the state
it is given in place. Randomness comes only from the pre-drawn uniforms in (0, 1) passed in,
one per decision, so a sweep is a deterministic function of its inputs (the NumPy reference in
``bnpvi.kernels.gibbs_reference`` draws the same samples from the same uniforms).

A categorical draw from unnormalised weights w_0..w_{J-1} with a uniform U picks the first j
with Σ_{i≤j} w_i > U Σ_i w_i (the last j if rounding leaves none).

Words of a minibatch are numbered locally (0..U-1 over the minibatch's distinct word types), so
the (components x U) tables never span the whole vocabulary.
"""
from libc.math cimport exp, lgamma, log, pow

import numpy as np


cdef inline Py_ssize_t _pick(double[::1] w, Py_ssize_t J, double total, double u) noexcept nogil:
    cdef double target = u * total, acc = 0.0
    cdef Py_ssize_t j
    for j in range(J):
        acc += w[j]
        if acc > target:
            return j
    return J - 1


cdef inline Py_ssize_t _pick_log(double[::1] w, Py_ssize_t J, double mx, double u) noexcept nogil:
    """:func:`_pick` from log weights w[:J] whose largest is mx (w is overwritten by exp(w − mx))."""
    cdef double total = 0.0
    cdef Py_ssize_t k
    for k in range(J):
        w[k] = exp(w[k] - mx)
        total += w[k]
    return _pick(w, J, total, u)


def dp_doc_sweep(const long[::1] word_loc, const double[::1] counts, const long[::1] doc_range,
                 const double[:, ::1] lam, const double[::1] lam_total,
                 double[:, ::1] table, double[::1] table_total, double[::1] docs_in,
                 const double[::1] stick_u, const double[::1] stick_v,
                 long[::1] z, const double[::1] uniforms, long T, long K_global,
                 double eta, double V_eta, double log_new_factor):
    """One sweep over the documents of a minibatch of the DP mixture of multinomials (Wang & Blei 2012
    §2.3 with the minibatch collapsed, spec'd in ``bnpvi.kernels.gibbs.dp_doc_sweep``).

    State (in place): table (Kcap, U) n_kw, table_total (Kcap,) n_k, docs_in (Kcap,) c_k, z (documents,)
    (−1: not yet placed). Components 0..K_global−1 are the global ones (λ from q(θ), sticks (u, v));
    K_global..T−1 were made in this minibatch (λ = η, sticks (1, a): rows of lam / stick_u / stick_v
    hold those values). Returns the new T.
    """
    cdef Py_ssize_t n_docs = doc_range.shape[0] - 1
    cdef Py_ssize_t Kcap = table.shape[0]
    cdef Py_ssize_t i, k, e, lo, hi, last, j, J
    cdef long w, k_old, k_new
    cdef double L, c, x, tot, s, log_rest, a_k, b_k, run, total, mx, pred_new
    weights_arr = np.empty(Kcap + 1)
    after_arr = np.empty(Kcap + 1)
    cdef double[::1] weights = weights_arr
    cdef double[::1] after = after_arr
    with nogil:
        for i in range(n_docs):
            lo = doc_range[i]
            hi = doc_range[i + 1]
            L = 0.0
            for e in range(lo, hi):
                L += counts[e]
            k_old = z[i]
            if k_old >= 0:  # take the document out
                for e in range(lo, hi):
                    table[k_old, word_loc[e]] -= counts[e]
                table_total[k_old] -= L
                docs_in[k_old] -= 1.0
                if k_old >= K_global and docs_in[k_old] <= 0.0:  # an emptied new component disappears
                    last = T - 1
                    if k_old != last:
                        for w in range(table.shape[1]):
                            table[k_old, w] = table[last, w]
                        table_total[k_old] = table_total[last]
                        docs_in[k_old] = docs_in[last]
                        for j in range(n_docs):
                            if z[j] == last:
                                z[j] = k_old
                    for w in range(table.shape[1]):
                        table[last, w] = 0.0
                    table_total[last] = 0.0
                    docs_in[last] = 0.0
                    T -= 1
                z[i] = -1
            run = 0.0  # c_>k
            for k in range(T - 1, -1, -1):
                after[k] = run
                run += docs_in[k]
            log_rest = 0.0
            mx = -1e308
            for k in range(T):
                a_k = stick_u[k] + docs_in[k]
                b_k = stick_v[k] + after[k]
                s = log_rest + log(a_k / (a_k + b_k))
                log_rest += log(b_k / (a_k + b_k))
                for e in range(lo, hi):
                    w = word_loc[e]
                    x = lam[k, w] + table[k, w]
                    s += lgamma(x + counts[e]) - lgamma(x)
                tot = lam_total[k] + table_total[k]
                s -= lgamma(tot + L) - lgamma(tot)
                weights[k] = s
                if s > mx:
                    mx = s
            J = T
            if T < Kcap:
                pred_new = 0.0
                for e in range(lo, hi):
                    pred_new += lgamma(eta + counts[e]) - lgamma(eta)
                pred_new -= lgamma(V_eta + L) - lgamma(V_eta)
                weights[T] = log_rest + log_new_factor + pred_new
                if weights[T] > mx:
                    mx = weights[T]
                J = T + 1
            k_new = _pick_log(weights, J, mx, uniforms[i])
            if k_new == T:
                T += 1
            for e in range(lo, hi):
                table[k_new, word_loc[e]] += counts[e]
            table_total[k_new] += L
            docs_in[k_new] += 1.0
            z[i] = k_new
    return T


def hdp_token_sweep(const long[::1] tok_word, const long[::1] tok_doc, long[::1] z,
                    double[:, ::1] doc_topic, double[:, ::1] topic_word, double[::1] topic_total,
                    const double[:, ::1] lam, const double[::1] lam_total, double[::1] pi, double pi_rest,
                    const double[::1] u_choice, const double[::1] u_stick, long T,
                    double b, double a, double inv_V):
    """One sweep over the tokens of a minibatch of the HDP topic model (Wang & Blei 2012 supplement S.2.2):

        p(z = k) ∝ (n_dk + b π_k)(n_kw + λ_kw)/(n_k + Σ_w λ_kw)  (k < T),   p(z = new) ∝ b π_> / V,

    with minibatch counts that leave the token out. A new topic's stick is drawn from Beta(1, a) by
    inversion, π̄ = 1 − U^(1/a) (U = u_stick of the token): π_T = π̄ π_>, π_> ← (1 − π̄) π_>.

    State (in place): z (tokens,) (−1: not yet placed), doc_topic (documents, Kcap), topic_word
    (Kcap, U), topic_total (Kcap,), pi (Kcap,). Returns (T, π_>).
    """
    cdef Py_ssize_t n_tok = tok_word.shape[0]
    cdef Py_ssize_t Kcap = topic_word.shape[0]
    cdef Py_ssize_t t, k, J
    cdef long w, d, k_old, k_new
    cdef double total, p, bar
    weights_arr = np.empty(Kcap + 1)
    cdef double[::1] weights = weights_arr
    with nogil:
        for t in range(n_tok):
            w = tok_word[t]
            d = tok_doc[t]
            k_old = z[t]
            if k_old >= 0:
                doc_topic[d, k_old] -= 1.0
                topic_word[k_old, w] -= 1.0
                topic_total[k_old] -= 1.0
            total = 0.0
            for k in range(T):
                p = (doc_topic[d, k] + b * pi[k]) * (topic_word[k, w] + lam[k, w]) / (topic_total[k] + lam_total[k])
                weights[k] = p
                total += p
            J = T
            if T < Kcap:
                weights[T] = b * pi_rest * inv_V
                total += weights[T]
                J = T + 1
            k_new = _pick(weights, J, total, u_choice[t])
            if k_new == T:
                bar = 1.0 - pow(u_stick[t], 1.0 / a)
                pi[T] = bar * pi_rest
                pi_rest = (1.0 - bar) * pi_rest
                T += 1
            doc_topic[d, k_new] += 1.0
            topic_word[k_new, w] += 1.0
            topic_total[k_new] += 1.0
            z[t] = k_new
    return T, pi_rest


def antoniak_tables(const double[:, ::1] doc_topic, const double[::1] pi, double b, const double[::1] uniforms,
                    long T, double[::1] tables):
    """Table counts s_dk = Σ_{i=1}^{n_dk} 1[U_i < b π_k / (b π_k + i − 1)] (Antoniak; Wang & Blei 2012
    supplement S.2, Eq. 3), summed over documents into ``tables`` (T,). Uniforms are used in order: document
    by document, topic by topic, one per token."""
    cdef Py_ssize_t n_docs = doc_topic.shape[0]
    cdef Py_ssize_t d, k, idx = 0
    cdef long i, n
    cdef double bp
    with nogil:
        for k in range(T):
            tables[k] = 0.0
        for d in range(n_docs):
            for k in range(T):
                n = <long>(doc_topic[d, k] + 0.5)
                bp = b * pi[k]
                for i in range(n):
                    if uniforms[idx] * (bp + i) < bp:
                        tables[k] += 1.0
                    idx += 1


# ----------------------------------------------------------------------------- mixtures of points
# Families: 0 bern (Beta-Bernoulli), 1 diag_gauss (Normal-Gamma per dimension), 2 zm_gauss (Wishart),
# 3 gauss (Normal-Wishart). A component's statistics (relative to the prior mean for 1 and 3):
# N, Sx (D,) (bern: the ones per dimension), Sxx (D, D) (diag_gauss: its diagonal only).

cdef int BERN = 0, DIAG = 1, ZERO_MEAN = 2, FULL = 3


cdef void _refresh(int family, Py_ssize_t k, Py_ssize_t D, double[::1] N, double[:, ::1] Sx, double[:, :, ::1] Sxx,
                   double kappa0, double nu0, const double[:, ::1] B0, double lam1, double lam0,
                   double[:, ::1] mean, double[:, :, ::1] chol, double[::1] const_, double[::1] coef,
                   double[::1] power) noexcept nogil:
    """The predictive's parameters of component k from its statistics (see ``point_log_pred``)."""
    cdef Py_ssize_t d, e, f
    cdef double kappa, nu, total, s, logdet, c
    cdef double half_log_pi = 0.5723649429247001  # ½ ln π
    if family == BERN:
        total = log(lam1 + lam0 + N[k])
        for d in range(D):
            chol[k, 0, d] = log(lam1 + Sx[k, d]) - total
            chol[k, 1, d] = log(lam0 + N[k] - Sx[k, d]) - total
        return
    nu = nu0 + N[k]
    if family == ZERO_MEAN:
        kappa = 0.0
        c = 1.0
    else:
        kappa = kappa0 + N[k]
        c = kappa / (kappa + 1.0)
    for d in range(D):
        mean[k, d] = Sx[k, d] / kappa if family != ZERO_MEAN else 0.0
    coef[k] = c
    power[k] = 0.5 * (nu + 1.0)
    if family == DIAG:
        logdet = 0.0
        for d in range(D):
            s = B0[d, d] + Sxx[k, d, d] - Sx[k, d] * mean[k, d]
            if s < 1e-12 * B0[d, d]:
                s = 1e-12 * B0[d, d]
            chol[k, d, d] = s
            logdet += log(s)
        const_[k] = D * (lgamma(0.5 * (nu + 1.0)) - lgamma(0.5 * nu) - half_log_pi + 0.5 * log(c)) - 0.5 * logdet
        return
    # full: B̂ = B̄ + Sxx − κ̂ μ μᵀ (zero mean: B̄ + Sxx), then its lower Cholesky factor in chol[k]
    for d in range(D):
        for e in range(d + 1):
            s = B0[d, e] + Sxx[k, d, e]
            if family == FULL:
                s -= kappa * mean[k, d] * mean[k, e]
            for f in range(e):
                s -= chol[k, d, f] * chol[k, e, f]
            if d == e:
                chol[k, d, d] = s ** 0.5
            else:
                chol[k, d, e] = s / chol[k, e, e]
    logdet = 0.0
    for d in range(D):
        logdet += 2.0 * log(chol[k, d, d])
    const_[k] = lgamma(0.5 * (nu + 1.0)) - lgamma(0.5 * (nu + 1.0 - D)) - D * half_log_pi - 0.5 * logdet
    if family == FULL:
        const_[k] += 0.5 * D * log(c)


cdef double _log_pred(int family, Py_ssize_t k, Py_ssize_t D, const double[:, ::1] Y, Py_ssize_t i,
                      double[:, ::1] mean, double[:, :, ::1] chol, double[::1] const_, double[::1] coef,
                      double[::1] power, double[::1] work) noexcept nogil:
    """ln p(y_i | component k's statistics): the posterior predictive (Student-t; Beta-Bernoulli)."""
    cdef Py_ssize_t d, e
    cdef double out, r, q, s
    if family == BERN:
        out = 0.0
        for d in range(D):
            out += chol[k, 0, d] if Y[i, d] > 0.5 else chol[k, 1, d]
        return out
    if family == DIAG:
        out = const_[k]
        for d in range(D):
            r = Y[i, d] - mean[k, d]
            out -= power[k] * log(1.0 + coef[k] * r * r / chol[k, d, d])
        return out
    q = 0.0  # ‖L⁻¹ (y − μ)‖² by forward substitution
    for d in range(D):
        s = Y[i, d] - mean[k, d]
        for e in range(d):
            s -= chol[k, d, e] * work[e]
        work[d] = s / chol[k, d, d]
        q += work[d] * work[d]
    return const_[k] - power[k] * log(1.0 + coef[k] * q)


cdef void _move(int family, Py_ssize_t k, Py_ssize_t D, const double[:, ::1] Y, Py_ssize_t i, double sign,
                double[::1] N, double[:, ::1] Sx, double[:, :, ::1] Sxx) noexcept nogil:
    """Point i added to (sign 1) or taken from (sign −1) component k's statistics."""
    cdef Py_ssize_t d, e
    N[k] += sign
    for d in range(D):
        Sx[k, d] += sign * Y[i, d]
        if family == DIAG:
            Sxx[k, d, d] += sign * Y[i, d] * Y[i, d]
        elif family != BERN:
            for e in range(d + 1):
                Sxx[k, d, e] += sign * Y[i, d] * Y[i, e]


cdef void _copy_row(Py_ssize_t src, Py_ssize_t dst, Py_ssize_t D, double[::1] N, double[:, ::1] Sx,
                    double[:, :, ::1] Sxx) noexcept nogil:
    cdef Py_ssize_t d, e
    N[dst] = N[src]
    for d in range(D):
        Sx[dst, d] = Sx[src, d]
        for e in range(D):
            Sxx[dst, d, e] = Sxx[src, d, e]


def dp_point_sweep(int family, const double[:, ::1] Y, double[::1] N, double[:, ::1] Sx, double[:, :, ::1] Sxx,
                   double kappa0, double nu0, const double[:, ::1] B0, double lam1, double lam0,
                   double[::1] docs_in, const double[::1] stick_u, const double[::1] stick_v,
                   long[::1] z, const double[::1] uniforms, long T, long K_global, double log_new_factor):
    """One collapsed Gibbs sweep over the points of a DP-mixture minibatch (Wang & Blei 2012 §2.2): point i goes
    to component k with probability ∝ E[π_k | c] · p(y_i | statistics of k without i), the family's
    posterior predictive; rows 0..K_global−1 hold the global effective statistics plus the minibatch's,
    rows K_global..T−1 components made in this minibatch, row Kcap (the last) stays empty: the prior.
    Sxx is filled in its lower triangle only. Returns the new T."""
    cdef Py_ssize_t n = Y.shape[0], D = Y.shape[1]
    cdef Py_ssize_t Kcap = N.shape[0] - 1
    cdef Py_ssize_t i, k, j, J, last
    cdef long k_old, k_new
    cdef double run, log_rest, a_k, b_k, s, mx, total
    mean_arr = np.zeros((Kcap + 1, D))
    chol_arr = np.zeros((Kcap + 1, max(D, 2), D))
    const_arr = np.zeros(Kcap + 1)
    coef_arr = np.zeros(Kcap + 1)
    power_arr = np.zeros(Kcap + 1)
    cdef double[:, ::1] mean = mean_arr
    cdef double[:, :, ::1] chol = chol_arr
    cdef double[::1] const_ = const_arr, coef = coef_arr, power = power_arr
    cdef double[::1] work = np.zeros(D)
    cdef double[::1] weights = np.empty(Kcap + 1)
    cdef double[::1] after = np.empty(Kcap + 1)
    with nogil:
        for k in range(T):
            _refresh(family, k, D, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0, mean, chol, const_, coef, power)
        _refresh(family, Kcap, D, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0, mean, chol, const_, coef, power)
        for i in range(n):
            k_old = z[i]
            if k_old >= 0:
                _move(family, k_old, D, Y, i, -1.0, N, Sx, Sxx)
                docs_in[k_old] -= 1.0
                if k_old >= K_global and docs_in[k_old] <= 0.0:  # an emptied new component disappears
                    last = T - 1
                    if k_old != last:
                        _copy_row(last, k_old, D, N, Sx, Sxx)
                        docs_in[k_old] = docs_in[last]
                        for j in range(n):
                            if z[j] == last:
                                z[j] = k_old
                        _refresh(family, k_old, D, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0, mean, chol, const_,
                                 coef, power)
                    _copy_row(Kcap, last, D, N, Sx, Sxx)
                    docs_in[last] = 0.0
                    T -= 1
                else:
                    _refresh(family, k_old, D, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0, mean, chol, const_, coef,
                             power)
                z[i] = -1
            run = 0.0
            for k in range(T - 1, -1, -1):
                after[k] = run
                run += docs_in[k]
            log_rest = 0.0
            mx = -1e308
            for k in range(T):
                a_k = stick_u[k] + docs_in[k]
                b_k = stick_v[k] + after[k]
                s = log_rest + log(a_k / (a_k + b_k)) + _log_pred(family, k, D, Y, i, mean, chol, const_, coef,
                                                                  power, work)
                log_rest += log(b_k / (a_k + b_k))
                weights[k] = s
                if s > mx:
                    mx = s
            J = T
            if T < Kcap:
                weights[T] = log_rest + log_new_factor + _log_pred(family, Kcap, D, Y, i, mean, chol, const_,
                                                                   coef, power, work)
                if weights[T] > mx:
                    mx = weights[T]
                J = T + 1
            k_new = _pick_log(weights, J, mx, uniforms[i])
            if k_new == T:
                T += 1
            _move(family, k_new, D, Y, i, 1.0, N, Sx, Sxx)
            docs_in[k_new] += 1.0
            z[i] = k_new
            _refresh(family, k_new, D, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0, mean, chol, const_, coef, power)
    return T
