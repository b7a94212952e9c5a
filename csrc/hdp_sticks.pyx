# cython: language_level=3
"""The HDP top-level stick optimiser (``bnpvi.alloc.hdp_top.optimize``): a damped Newton method on the surrogate
f(ρ, ω) of ``hdp_top`` in x = (logit ρ, ln ω), box-bounded, compiled and without the GIL.

Hessian (Hughes 2016 thesis Eq. 5.37, differentiated twice). With (a, b) = (ρω, (1−ρ)ω), A1 = P1 − a,
A0 = P0 − b, S = A1 + A0 and ψ1, ψ2 the tri- and tetragamma functions, the separable part g_k(a, b) of f has

    g_a = A1 ψ1(a) − S ψ1(ω),   g_b = A0 ψ1(b) − S ψ1(ω),
    g_ab = ψ1(ω) − S ψ2(ω),     g_aa = g_ab − ψ1(a) + A1 ψ2(a),   g_bb = g_ab − ψ1(b) + A0 ψ2(b),

carried to (ρ, ω) by a = ρω, b = (1−ρ)ω. The linear part Σ_ℓ β̂_ℓ T_ℓ is multilinear in ρ: no diagonal
second derivative, and ∂²/∂ρ_i∂ρ_j = −G_j / (1 − ρ_i) for i < j, G_j its ρ_j-derivative. In x that is
−ρ_i G̃_j with G̃_j = G_j ρ_j (1 − ρ_j): a diagonal-plus-semiseparable ρ block, 2 × 2 blocks with each ω_k.
Each step eliminates the ω's (their block is diagonal) and solves with the K × K Schur complement, still
diagonal plus semiseparable, by its Cholesky factor in O(K); the step is damped (Levenberg-Marquardt, λ times the diagonal) until the factor exists and f rises.
Variables at a bound whose gradient points outward are held (projected Newton).
"""
from libc.math cimport exp, log, lgamma, fabs, isfinite
import numpy as np


cdef inline double _digamma(double x) noexcept nogil:
    """ψ(x), x > 0: the recurrence up to x ≥ 10, then the asymptotic series through x^-14."""
    cdef double shift = 0.0, inv, inv2
    while x < 10.0:
        shift = shift + 1.0 / x
        x = x + 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    return log(x) - 0.5 * inv - shift - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 * (1.0 / 132 - inv2 * (691.0 / 32760 - inv2 / 12.0))))))


cdef inline double _trigamma(double x) noexcept nogil:
    """ψ1(x), x > 0: ψ1(x) = ψ1(x + n) + Σ_{i<n} 1/(x+i)², then 1/x + 1/(2x²) + Σ_k B_2k / x^(2k+1) through x^-15."""
    cdef double shift = 0.0, inv, inv2
    while x < 10.0:
        shift = shift + 1.0 / (x * x)
        x = x + 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    return shift + inv + 0.5 * inv2 + inv * inv2 * (1.0 / 6 - inv2 * (1.0 / 30 - inv2 * (1.0 / 42 - inv2 * (
        1.0 / 30 - inv2 * (5.0 / 66 - inv2 * (691.0 / 2730 - inv2 * 7.0 / 6))))))


cdef inline double _tetragamma(double x) noexcept nogil:
    """ψ2(x), x > 0: ψ2(x) = ψ2(x + n) − Σ_{i<n} 2/(x+i)³, then the derivative of :func:`_trigamma`'s series."""
    cdef double shift = 0.0, inv, inv2
    while x < 10.0:
        shift = shift + 2.0 / (x * x * x)
        x = x + 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    return -shift - inv2 - inv * inv2 - inv2 * inv2 * (0.5 - inv2 * (1.0 / 6 - inv2 * (1.0 / 6 - inv2 * (
        3.0 / 10 - inv2 * (5.0 / 6 - inv2 * (691.0 / 210 - inv2 * 35.0 / 2))))))


cdef double _value(const double[::1] x, Py_ssize_t K, const double[::1] P1, const double[::1] P0,
                   const double[::1] T, double prior_norm) noexcept nogil:
    """f at x = (logit ρ, ln ω) (``hdp_top.surrogate``); NaN or ±inf where it is not finite."""
    cdef Py_ssize_t k
    cdef double total = 0.0, rest = 1.0, rho, one_minus, omega, a, b, psi
    for k in range(K):
        rho = 1.0 / (1.0 + exp(-x[k]))
        one_minus = 1.0 / (1.0 + exp(x[k]))
        omega = exp(x[K + k])
        a = rho * omega
        b = one_minus * omega
        psi = _digamma(omega)
        total = total + prior_norm - (lgamma(omega) - lgamma(a) - lgamma(b)) \
            + (P1[k] - a) * (_digamma(a) - psi) + (P0[k] - b) * (_digamma(b) - psi)
        total = total + rho * rest * T[k]
        rest = rest * one_minus
    return total + rest * T[K]


cdef void _derivatives(const double[::1] x, Py_ssize_t K, const double[::1] P1, const double[::1] P0,
                       const double[::1] T, double[::1] grad, double[::1] hxx, double[::1] hxy, double[::1] hyy,
                       double[::1] u, double[::1] v, double[::1] rest) noexcept nogil:
    """The gradient of f in x (2K) and its Hessian: diagonals hxx, hxy, hyy (K each) and the ρ-ρ coupling
    H_ij = u_i v_j (i < j), u_i = ρ_i, v_j = −G̃_j (module docstring); ``rest`` is K+1 workspace."""
    cdef Py_ssize_t k
    cdef double rho, one_minus, omega, a, b, ta, tb, tw, qa, qb, qw, A1, A0, S, ga, gb, gab, gaa, gbb
    cdef double after = 0.0, G, f_r, f_w, f_rr, f_rw, f_ww, d
    rest[0] = 1.0
    for k in range(K):
        rest[k + 1] = rest[k] / (1.0 + exp(x[k]))  # Π_{ℓ≤k}(1 − ρ_ℓ)
    after = rest[K] * T[K]  # Σ_{ℓ>k} β̂_ℓ T_ℓ, run backwards
    for k in range(K - 1, -1, -1):
        rho = 1.0 / (1.0 + exp(-x[k]))
        one_minus = 1.0 / (1.0 + exp(x[k]))
        omega = exp(x[K + k])
        a = rho * omega
        b = one_minus * omega
        ta, tb, tw = _trigamma(a), _trigamma(b), _trigamma(omega)
        qa, qb, qw = _tetragamma(a), _tetragamma(b), _tetragamma(omega)
        A1 = P1[k] - a
        A0 = P0[k] - b
        S = A1 + A0
        ga = A1 * ta - S * tw
        gb = A0 * tb - S * tw
        gab = tw - S * qw
        gaa = gab - ta + A1 * qa
        gbb = gab - tb + A0 * qb
        G = rest[k] * T[k] - after / one_minus
        after = after + rho * rest[k] * T[k]
        f_r = omega * (ga - gb) + G
        f_w = rho * ga + one_minus * gb
        f_rr = omega * omega * (gaa - 2.0 * gab + gbb)
        f_rw = omega * (rho * gaa + (one_minus - rho) * gab - one_minus * gbb) + (ga - gb)
        f_ww = rho * rho * gaa + 2.0 * rho * one_minus * gab + one_minus * one_minus * gbb
        d = rho * one_minus
        grad[k] = f_r * d
        grad[K + k] = f_w * omega
        hxx[k] = f_rr * d * d + f_r * d * (one_minus - rho)
        hxy[k] = f_rw * d * omega
        hyy[k] = f_ww * omega * omega + f_w * omega
        u[k] = rho
        v[k] = -G * d


cdef bint _semiseparable_solve(double[::1] d, const double[::1] p, const double[::1] q, double[::1] r,
                               double[::1] l, Py_ssize_t n) noexcept nogil:
    """Solve M y = r in O(n) for the symmetric M with M_ii = d_i and M_ij = p_i q_j (i < j); y replaces r, d is
    overwritten by the pivots. M = L D Lᵀ with L_ij = q_i l_j (i > j): D_j = d_j − q_j² σ_j and
    l_j = (p_j − q_j σ_j) / D_j, σ_j = Σ_{t<j} l_t² D_t (Cholesky, written for this structure). False when a pivot is
    not positive (M is not positive definite)."""
    cdef Py_ssize_t j
    cdef double sigma = 0.0, tau = 0.0
    for j in range(n):
        d[j] = d[j] - q[j] * q[j] * sigma
        if not d[j] > 0.0:
            return False
        l[j] = (p[j] - q[j] * sigma) / d[j]
        sigma = sigma + l[j] * l[j] * d[j]
    for j in range(n):  # L z = r
        r[j] = r[j] - q[j] * tau
        tau = tau + l[j] * r[j]
    tau = 0.0
    for j in range(n - 1, -1, -1):  # Lᵀ y = z / D
        r[j] = r[j] / d[j] - l[j] * tau
        tau = tau + q[j] * r[j]
    return True


def value_and_grad(const double[::1] x, const double[::1] P1, const double[::1] P0, const double[::1] T,
                   double prior_norm):
    """(f, ∂f/∂x) at x = (logit ρ, ln ω), 2K entries; for the tests against ``hdp_top.surrogate``'s NumPy."""
    cdef Py_ssize_t K = P1.shape[0]
    grad, diag = np.empty(2 * K), np.empty((5, K))
    rest = np.empty(K + 1)
    _derivatives(x, K, P1, P0, T, grad, diag[0], diag[1], diag[2], diag[3], diag[4], rest)
    return _value(x, K, P1, P0, T, prior_norm), grad


def newton(double[::1] x, const double[::1] lo, const double[::1] hi, const double[::1] P1, const double[::1] P0,
           const double[::1] T, double prior_norm, double scale, int max_iter, double gtol):
    """Maximise f from x (in place, 2K entries within [lo, hi]) by the damped projected Newton method of the module
    docstring; steps are taken only where f rises. Stops when the largest projected gradient of scale · f is at
    most ``gtol``, when a step gains less than 1e-15 of |scale · f| (rounding), when no damping finds a rising
    step, or after ``max_iter`` steps. Returns the number of steps taken, −1 when f is not finite at the start."""
    cdef Py_ssize_t K = P1.shape[0], n = 2 * K, i, j, k, nf, it, steps = 0
    cdef double f, fn, lam = 0.0, worst, dyy, gain
    cdef bint rising
    grad_a, xn_a, p_a = np.empty(n), np.empty(n), np.empty(n)
    diag_a = np.empty((10, K))
    rest_a = np.empty(K + 1)
    idx_a = np.empty(K, dtype=np.intp)
    cdef double[::1] grad = grad_a, xn = xn_a, p = p_a, rest = rest_a
    cdef double[::1] hxx = diag_a[0], hxy = diag_a[1], hyy = diag_a[2], u = diag_a[3], v = diag_a[4]
    cdef double[::1] rhs = diag_a[5], piv = diag_a[6], pf = diag_a[7], qf = diag_a[8], lf = diag_a[9]
    cdef Py_ssize_t[::1] idx = idx_a
    with nogil:
        f = _value(x, K, P1, P0, T, prior_norm)
        if not isfinite(f):
            steps = -1
            max_iter = 0
        for it in range(max_iter):
            _derivatives(x, K, P1, P0, T, grad, hxx, hxy, hyy, u, v, rest)
            worst = 0.0
            for i in range(n):  # scaled, projected on the free variables (p marks them: 1 free, 0 held)
                grad[i] = grad[i] * scale
                p[i] = 0.0 if (x[i] <= lo[i] and grad[i] < 0.0) or (x[i] >= hi[i] and grad[i] > 0.0) else 1.0
                if p[i] == 0.0:
                    grad[i] = 0.0
                worst = max(worst, fabs(grad[i]))
            if worst <= gtol:
                break
            nf = 0
            for k in range(K):  # the negative scaled Hessian; hxy only between two free variables
                hxx[k] = -hxx[k] * scale
                hyy[k] = -hyy[k] * scale
                hxy[k] = -hxy[k] * scale if p[k] == 1.0 and p[K + k] == 1.0 else 0.0
                if p[k] == 1.0:
                    idx[nf] = k
                    nf = nf + 1
            rising = False
            while lam <= 1e12:
                for k in range(K):  # ω_k eliminated: xn holds 1 / (N_yy + λ|N_yy|) of the free ω's
                    dyy = hyy[k] + lam * fabs(hyy[k])
                    xn[K + k] = 1.0 / dyy if p[K + k] == 1.0 and dyy > 0.0 else 0.0
                    if p[K + k] == 1.0 and not dyy > 0.0:
                        break
                else:
                    for i in range(nf):  # the Schur complement of the free ρ's: diagonal plus semiseparable
                        j = idx[i]
                        piv[i] = hxx[j] + lam * fabs(hxx[j]) - hxy[j] * hxy[j] * xn[K + j]
                        pf[i] = -scale * u[j]
                        qf[i] = v[j]
                        rhs[i] = grad[j] - hxy[j] * grad[K + j] * xn[K + j]
                    if _semiseparable_solve(piv, pf, qf, rhs, lf, nf):
                        for k in range(K):
                            xn[k] = x[k]
                        for i in range(nf):
                            xn[idx[i]] = x[idx[i]] + rhs[i]
                        for k in range(K):
                            xn[K + k] = x[K + k] + (grad[K + k] - hxy[k] * (xn[k] - x[k])) * xn[K + k]
                        for i in range(n):
                            xn[i] = min(max(xn[i], lo[i]), hi[i])
                        fn = _value(xn, K, P1, P0, T, prior_norm)
                        if isfinite(fn) and fn > f:
                            rising = True
                            break
                lam = 1e-3 if lam == 0.0 else 10.0 * lam
            if not rising:
                break
            gain = (fn - f) * scale
            f = fn
            steps = steps + 1
            for i in range(n):
                x[i] = xn[i]
            lam = 0.0 if lam < 1e-6 else 0.1 * lam
            if gain <= 1e-15 * max(1.0, fabs(f) * scale):
                break
    return steps
