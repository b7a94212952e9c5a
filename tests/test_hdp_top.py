"""The HDP top-level stick optimiser: the compiled Newton solver against SciPy's L-BFGS-B (the solver it replaced,
kept here as the reference), its value and gradient against the NumPy surrogate, KKT at the bounds."""
import numpy as np
import pytest
from scipy.optimize import minimize

from bnpvi.alloc import hdp_top
from bnpvi.kernels import sticks
from bnpvi.special import c_beta


def lbfgs_reference(c, T, gamma, rho, omega):
    """The optimiser before issue 49: L-BFGS-B on (logit ρ, ln ω), ftol 1e-11, the NumPy value and gradient."""
    K = rho.shape[0]
    scale = 1.0 / (float(np.sum(c)) + K + 1.0)

    def objective(x):
        r, w = 1.0 / (1.0 + np.exp(-x[:K])), np.exp(x[K:])
        if not (np.all(r > 0) and np.all(r < 1)):
            return np.inf, np.zeros_like(x)
        d_rho, d_omega = hdp_top.surrogate_grad(r, w, c, T, gamma)
        grad = np.concatenate([d_rho * r * (1.0 - r), d_omega * w])
        value = hdp_top.surrogate(r, w, c, T, gamma)
        if not (np.isfinite(value) and np.all(np.isfinite(grad))):
            return np.inf, np.zeros_like(x)
        return -scale * value, -scale * grad

    start = np.concatenate([np.log(rho) - np.log1p(-rho), np.log(omega)])
    bounds = [(-hdp_top.LOGIT_MAX, hdp_top.LOGIT_MAX)] * K + [tuple(np.log(hdp_top.OMEGA_BOUNDS))] * K
    result = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds,
                      options={"maxiter": 200, "ftol": 1e-11, "gtol": 1e-8})
    if not np.isfinite(result.fun) or result.fun > objective(start)[0]:
        return rho, omega
    return np.clip(1.0 / (1.0 + np.exp(-result.x[:K])), hdp_top.RHO_MIN, 1.0 - hdp_top.RHO_MIN), np.exp(result.x[K:])


def problem(rng, K):
    """Random (c, T, γ, ρ, ω) of the three families' shapes: a topic model (c = D), a plain or sticky HMM, and an
    MMSB-like weight; T from expected log-probabilities scaled by the row counts; a start off the optimum."""
    kind = rng.integers(3)
    D = float(rng.integers(5, 5000))
    c = {0: np.full(K + 1, D), 1: np.full(K + 1, K + 1.0), 2: np.append(np.full(K, float(K)), K + 1.0)}[kind]
    T = -c[0] * rng.uniform(0.5, 8.0, size=K + 1) * rng.uniform(0.2, 1.0)
    gamma = float(rng.uniform(0.5, 20.0))
    rho = rng.uniform(0.02, 0.6, size=K)
    omega = np.exp(rng.uniform(0.0, np.log(10.0 * D), size=K))
    return c, T, gamma, rho, omega


@pytest.mark.parametrize("K", [1, 2, 5, 30, 200])
def test_newton_reaches_lbfgs_optimum_or_better_and_never_worse_than_start(K):
    rng = np.random.default_rng(K)
    for _ in range(3 if K < 200 else 1):
        c, T, gamma, rho, omega = problem(rng, K)
        new = hdp_top.optimize(c, T, gamma, rho, omega)
        ref = lbfgs_reference(c, T, gamma, rho, omega)
        f_new, f_ref, f_start = (hdp_top.surrogate(*p, c, T, gamma) for p in (new, ref, (rho, omega)))
        assert f_new >= f_start
        assert f_new >= f_ref - 1e-12 * abs(f_ref)  # at least L-BFGS-B's optimum, to rounding
        d_rho, d_omega = hdp_top.surrogate_grad(*new, c, T, gamma)
        r, w = new
        x_grad = np.concatenate([d_rho * r * (1 - r), d_omega * w]) / (c.sum() + K + 1)
        assert np.max(np.abs(x_grad)) < 1e-7  # an interior stationary point


def test_bounds_hold_with_the_kkt_sign():
    """A stick whose mass is worth nothing (a huge negative T beyond it) goes to ρ's upper bound; at a bound the
    gradient points outward, elsewhere it vanishes."""
    K, gamma = 4, 1.0
    c = np.full(K + 1, 50.0)
    T = np.array([-10.0, -10.0, -10.0, -10.0, -1e13])
    rho, omega = hdp_top.optimize(c, T, gamma, np.full(K, 0.3), np.full(K, 10.0))
    d_rho, _ = hdp_top.surrogate_grad(rho, omega, c, T, gamma)
    at_top = rho >= 1.0 - 1e-9
    assert at_top.any()
    assert np.all(d_rho[at_top] >= 0)
    assert hdp_top.surrogate(rho, omega, c, T, gamma) >= hdp_top.surrogate(np.full(K, 0.3), np.full(K, 10.0), c, T, gamma)


def test_an_optimal_warm_start_stays_where_it_is():
    """From its own optimum the solver moves at most by rounding and never lowers f."""
    rng = np.random.default_rng(7)
    c, T, gamma, rho, omega = problem(rng, 12)
    best = hdp_top.optimize(c, T, gamma, rho, omega)
    again = hdp_top.optimize(c, T, gamma, *best)
    assert np.allclose(again[0], best[0], rtol=1e-8) and np.allclose(again[1], best[1], rtol=1e-8)
    assert hdp_top.surrogate(*again, c, T, gamma) >= hdp_top.surrogate(*best, c, T, gamma)


def test_a_start_where_f_is_not_finite_is_returned():
    c, T = np.full(3, 5.0), np.array([-1.0, np.nan, -1.0])
    rho, omega = np.array([0.3, 0.4]), np.array([4.0, 5.0])
    new = hdp_top.optimize(c, T, 1.0, rho, omega)
    assert np.array_equal(new[0], rho) and np.array_equal(new[1], omega)


@pytest.mark.parametrize("K", [1, 3, 12, 60])
def test_compiled_value_and_gradient_equal_the_numpy_surrogate(K):
    rng = np.random.default_rng(K)
    c, T, gamma, rho, omega = problem(rng, K)
    rho = rng.uniform(1e-6, 0.99, size=K)
    omega = np.exp(rng.uniform(-3.0, 12.0, size=K))
    P1, P0 = hdp_top._coefficients(c, gamma)
    x = np.concatenate([np.log(rho) - np.log1p(-rho), np.log(omega)])
    value, grad = sticks.value_and_grad(x, P1, P0, T, float(c_beta(1.0, gamma)))
    d_rho, d_omega = hdp_top.surrogate_grad(rho, omega, c, T, gamma)
    expected = np.concatenate([d_rho * rho * (1 - rho), d_omega * omega])
    assert value == pytest.approx(hdp_top.surrogate(rho, omega, c, T, gamma), rel=1e-12)
    assert np.allclose(grad, expected, rtol=1e-9, atol=1e-9 * np.max(np.abs(expected)))
