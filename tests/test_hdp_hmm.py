"""The sticky HDP-HMM: top-level surrogate bounds and gradient, the global step, monotone VB and memoized VB."""
import numpy as np
import pytest
from omegaconf import OmegaConf

from bnpvi.alloc import HDPHMMAlloc
from bnpvi.alloc import hdp_top
from bnpvi.alloc.hmm import expected_log_probs
from bnpvi.errors import BnpviError
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.vb import FullVB
from bnpvi.metrics import hamming_distance
from bnpvi.model import Globals
from bnpvi.special import c_dir

import setups
from setups import run_laps, toy_sequence_file


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    return toy_sequence_file(tmp_path_factory, seed=3)


def setup(path, K=8, seed=0, sticky_kappa=50.0):
    return setups.setup(path, HDPHMMAlloc(gamma=10.0, alpha=0.5, start_alpha=5.0, sticky_kappa=sticky_kappa),
                           K=K, seed=seed)


# ------------------------------------------------------------------ surrogate bounds
def test_surrogate_bounds_lie_below_the_exact_cumulants():
    """c_Dir(αβ) ≥ K ln α + Σ ln β_m and c_Dir(αβ + κ e_k) ≥ the sticky bound (thesis Eq. 5.23, 6.30-6.32)."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        K = int(rng.integers(1, 30))
        beta = rng.dirichlet(np.full(K + 1, rng.uniform(0.1, 3.0)))
        beta = np.maximum(beta, 1e-300)
        alpha, kappa = rng.uniform(0.05, 20.0), rng.uniform(0.1, 500.0)
        assert c_dir(alpha * beta) >= K * np.log(alpha) + np.log(beta).sum() - 1e-9
        k = int(rng.integers(K))
        exact = c_dir(alpha * beta + kappa * np.eye(K + 1)[k])
        bound = (K * np.log(alpha) - np.log(alpha + kappa) + np.log(kappa)
                 + (np.log(alpha + kappa) - np.log(kappa)) * beta[k] + np.log(np.delete(beta, k)).sum())
        assert exact >= bound - 1e-9


@pytest.mark.parametrize("sticky_kappa", [0.0, 300.0])
def test_row_bounds_sum_to_the_stick_form(sticky_kappa):
    """Σ over the start row and the K rows of the per-row bounds (β form) equals C_K + Σ_m c_m ln β_m
    + (ln(α+κ) − ln κ) Σ_k β_k, and in stick form Σ_k (c_k ln u_k + Σ_{m>k} c_m ln(1 − u_k)): this is
    where the thesis's sticky coefficient misses its "+1"."""
    alloc = HDPHMMAlloc(gamma=3.0, alpha=0.7, start_alpha=4.0, sticky_kappa=sticky_kappa)
    rng = np.random.default_rng(1)
    K = 6
    u = rng.uniform(0.05, 0.9, size=K)
    beta = hdp_top.stick_means(u)  # a point mass on u: E ln β = ln β
    a, a0, kappa = alloc.alpha, alloc.start_alpha, sticky_kappa
    rows = K * np.log(a0) + np.log(beta).sum()
    for k in range(K):
        if kappa > 0:
            rows += (K * np.log(a) - np.log(a + kappa) + np.log(kappa) + (np.log(a + kappa) - np.log(kappa)) * beta[k]
                     + np.log(np.delete(beta, k)).sum())
        else:
            rows += K * np.log(a) + np.log(beta).sum()
    c = alloc._row_weights(K)
    beta_form = alloc._constant(K) + c @ np.log(beta) + alloc._sticky_gain() * beta[:K].sum()
    assert beta_form == pytest.approx(rows, rel=1e-12)
    after = np.cumsum(c[::-1])[::-1][1:]
    stick_form = alloc._constant(K) + c[:K] @ np.log(u) + after @ np.log1p(-u) + alloc._sticky_gain() * beta[:K].sum()
    assert stick_form == pytest.approx(rows, rel=1e-12)
    if kappa > 0:
        assert after[0] == K * K + 1  # A0_1's constant part: K(K+1−1) + 1


@pytest.mark.parametrize("K", [1, 3, 12])
@pytest.mark.parametrize("sticky", [False, True])
def test_surrogate_gradient_equals_finite_differences(K, sticky):
    rng = np.random.default_rng(K + 10 * sticky)
    c = np.append(np.full(K, float(K)), K + 1.0) if sticky else np.full(K + 1, K + 1.0)
    T = rng.normal(scale=20.0, size=K + 1)
    rho, omega = rng.uniform(0.05, 0.9, size=K), rng.uniform(1.0, 80.0, size=K)
    d_rho, d_omega = hdp_top.surrogate_grad(rho, omega, c, T, 2.5)
    h = 1e-6
    for k in range(K):
        e = np.eye(K)[k]
        fd_rho = (hdp_top.surrogate(rho + h * e, omega, c, T, 2.5) - hdp_top.surrogate(rho - h * e, omega, c, T, 2.5)) / (2 * h)
        fd_omega = (hdp_top.surrogate(rho, omega + h * e, c, T, 2.5)
                    - hdp_top.surrogate(rho, omega - h * e, c, T, 2.5)) / (2 * h)
        assert d_rho[k] == pytest.approx(fd_rho, rel=1e-6, abs=1e-6)
        assert d_omega[k] == pytest.approx(fd_omega, rel=1e-6, abs=1e-6)


def test_stick_means_round_trip_and_optimizer_never_worsens():
    rng = np.random.default_rng(4)
    rho = rng.uniform(0.01, 0.9, size=7)
    beta = hdp_top.stick_means(rho)
    assert beta.sum() == pytest.approx(1.0)
    assert np.allclose(hdp_top.sticks_from_means(beta[:-1]), rho)
    c, T = np.full(8, 8.0), rng.normal(scale=5.0, size=8)
    omega = np.full(7, 11.0)
    new_rho, new_omega = hdp_top.optimize(c, T, 10.0, rho, omega)
    before, after = hdp_top.surrogate(rho, omega, c, T, 10.0), hdp_top.surrogate(new_rho, new_omega, c, T, 10.0)
    assert after > before
    d_rho, d_omega = hdp_top.surrogate_grad(new_rho, new_omega, c, T, 10.0)  # a stationary point
    assert np.max(np.abs(np.concatenate([d_rho * new_rho * (1 - new_rho), d_omega * new_omega]))) < 1e-3 * (1 + abs(after))
    again = hdp_top.optimize(c, T, 10.0, new_rho, new_omega)
    assert hdp_top.surrogate(*again, c, T, 10.0) >= after


# ------------------------------------------------------------------ ELBO and global step
@pytest.mark.parametrize("sticky_kappa", [0.0, 50.0])
def test_elbo_equals_log_normalizers_plus_global_terms(sequences, sticky_kappa):
    """Right after a local step, L = Σ_d ln Z_d − KL(q(φ) ‖ p(φ)) + Σ_j [−c_Dir(θ_j) + Σ_ℓ (α_j β̂_ℓ + κ[ℓ=j] − θ_jℓ) P_jℓ]
    + C_K + f(ρ, ω) − β̂·Σ_j α_j P_j (thesis §6.3.3, Eq. 6.26-6.33): the counts M enter only through ln Z_d."""
    store, model, globals_, _, _ = setup(sequences, sticky_kappa=sticky_kappa)
    alloc = model.alloc
    batch = store.read_batch(1)
    log_lik, local = model.local_step(batch, globals_)
    stats = model.summarize(batch, local)
    K = globals_.K
    prior_obs = model.obs.posterior(np.zeros(K), {n: np.zeros_like(v) for n, v in stats.select(model.obs_fields).items()})
    kl_obs = np.sum(model.obs.kl(globals_.obs, prior_obs))
    p = globals_.alloc
    beta = hdp_top.stick_means(p["rho"])
    P0, P = expected_log_probs(p["theta_start"]), expected_log_probs(p["theta_trans"])
    prior0 = alloc.start_alpha * beta
    prior = alloc.alpha * beta + np.hstack([sticky_kappa * np.eye(K), np.zeros((K, 1))])
    rows = (-c_dir(p["theta_start"]) + (prior0 - p["theta_start"]) @ P0
            + np.sum(-c_dir(p["theta_trans"]) + np.sum((prior - p["theta_trans"]) * P, axis=1)))
    c = alloc._row_weights(K)
    T = alloc._linear(P0, P)
    top = hdp_top.surrogate(p["rho"], p["omega"], c, T, alloc.gamma) - beta @ (alloc.start_alpha * P0 + alloc.alpha * P.sum(0))
    expected = local.tables["log_norm"].sum() - kl_obs + rows + alloc._constant(K) + top
    assert model.elbo(stats, globals_) == pytest.approx(expected, rel=1e-10)
    store.close()


def test_theta_is_the_exact_maximiser_and_the_global_step_never_lowers_the_elbo(sequences):
    store, model, globals_, _, _ = setup(sequences)
    batch = store.read_batch(0)
    stats = model.summarize(batch, model.local_step(batch, globals_)[1])
    new = model.global_step(stats, globals_.alloc)
    best = model.elbo(stats, new)
    rng = np.random.default_rng(0)
    for name in ("theta_start", "theta_trans"):
        for _ in range(5):
            alloc = dict(new.alloc)
            alloc[name] = alloc[name] * np.exp(rng.normal(scale=0.05, size=alloc[name].shape))
            assert model.elbo(stats, Globals(stats, alloc, new.obs)) < best
    again = model.global_step(stats, new.alloc)
    assert model.elbo(stats, again) >= best - 1e-9 * abs(best)
    store.close()


@pytest.mark.parametrize("sticky_kappa", [0.0, 50.0])
def test_initial_globals_are_near_uniform_sticks_and_unit_pseudo_counts(sequences, sticky_kappa):
    """The global step of the initial globals (no warm start, no sequence summarised) gives every state the same
    top-level weight and θ from one pseudo-count per entry (the reference's start): β̂_k = 0.95 / K for K ≥ 20."""
    store, model, _, _, _ = setup(sequences, K=20, sticky_kappa=sticky_kappa)
    alloc = model.alloc.global_step(model.empty_stats(20))
    beta = hdp_top.stick_means(alloc["rho"])
    np.testing.assert_allclose(beta, np.append(np.full(20, 0.95 / 20), 0.05), rtol=1e-12)
    np.testing.assert_allclose(alloc["theta_start"], np.append(np.ones(20), 0.0) + model.alloc.start_alpha * beta,
                               rtol=1e-12)
    want = np.hstack([np.ones((20, 20)), np.zeros((20, 1))]) + model.alloc.alpha * beta + sticky_kappa * np.eye(20, 21)
    np.testing.assert_allclose(alloc["theta_trans"], want, rtol=1e-12)
    store.close()


def test_an_empty_state_lowers_the_elbo(sequences):
    """Unlike a DP mixture's, the HDP-HMM's bound penalises an appended empty state (Hughes 2016 thesis Fig. 5.3)."""
    store, model, globals_, ids, rng = setup(sequences)
    alg = MemoizedVB(model, store, OmegaConf.create({"n_laps": 3, "converge_thr": 0.0}), rng, globals_, ids)
    run_laps(alg, 3)
    stats = alg.globals.stats
    padded = stats.remap([[k] for k in range(stats.K)] + [[]])
    elbo, _ = model.evaluate(padded, model.alloc.warm_start(alg.globals.alloc, [[k] for k in range(stats.K)] + [[]]))
    assert elbo < alg.elbo()
    store.close()


@pytest.mark.parametrize("alg_cls", [FullVB, MemoizedVB])
@pytest.mark.parametrize("sticky_kappa", [0.0, 50.0])
def test_elbo_never_decreases(sequences, alg_cls, sticky_kappa):
    store, model, globals_, ids, rng = setup(sequences, K=12, sticky_kappa=sticky_kappa)
    alg = alg_cls(model, store, OmegaConf.create({"n_laps": 8, "converge_thr": 0.0}), rng, globals_, ids)
    elbos = run_laps(alg, 8)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:]))
    store.close()


def test_memo_elbo_never_decreases_after_any_batch(sequences):
    store, model, globals_, ids, rng = setup(sequences, K=12)
    alg = MemoizedVB(model, store, OmegaConf.create({"n_laps": 5, "converge_thr": 0.0}), rng, globals_, ids)
    run_laps(alg, 1)
    values = []
    while alg.lap < 5:
        alg.step()
        values.append(alg.elbo())
    values = np.array(values)
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    store.close()


def test_memo_recovers_the_eight_states(sequences):
    store, model, globals_, ids, rng = setup(sequences, K=8)
    alg = MemoizedVB(model, store, OmegaConf.create({"n_laps": 10, "converge_thr": 0.0}), rng, globals_, ids)
    run_laps(alg, 10)
    z = np.concatenate([model.decode(store.read_batch(b), alg.globals) for b in range(store.n_batches)])
    assert hamming_distance(store.labels(), z) < 0.02
    store.close()


def test_bad_hyperparameters_are_one_line_errors():
    for kwargs, name in (({"gamma": 0.0}, "model.gamma"), ({"alpha": -1.0}, "model.alpha"),
                         ({"start_alpha": float("nan")}, "model.start_alpha"), ({"sticky_kappa": -1.0}, "model.sticky_kappa")):
        with pytest.raises(BnpviError, match=name):
            HDPHMMAlloc(**kwargs)
