"""ELBO monotonicity, batch additivity, the memo cache swap, and the stochastic step, for every Gaussian family.

The first three also with an L-sparse local step (L = 2 of K = 10; Hughes 2016 thesis §7.1.4: each
step is optimal among L-sparse responsibilities, so the ELBO still never decreases)."""
import numpy as np
import pytest
from omegaconf import OmegaConf

from bnpvi.alloc import DPMixAlloc
from bnpvi.data.batch import PointBatch
from bnpvi.data.store import BatchStore, write_points
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.sovb import StochasticVB
from bnpvi.learn.vb import FullVB
from bnpvi.learn.work import process_batch
from bnpvi.model import Model
from bnpvi.obs import make_obs
from bnpvi.stats import ClusterIds

from setups import run_laps

FAMILIES = ["gauss", "diag_gauss", "zm_gauss"]


def obs_cfg(name):
    return {"name": name, "sF": 0.5, "prior_cov": "diag", "nu": None, "kappa": 1e-4, "mean": None}


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(7)
    centers = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [-4.0, 3.0, 2.0], [1.0, -5.0, -3.0]])
    labels = rng.integers(0, 4, size=900)
    X = centers[labels] + rng.normal(size=(900, 3)) @ np.diag([1.0, 0.6, 1.4])
    path = tmp_path / "points.h5"
    write_points(path, X, n_batches=6, labels=labels)
    with BatchStore.open(path) as s:
        yield s


def setup(store, family, K=10, seed=0, sparse_L=None):
    """Model, initial globals, ids and generator, as the runner makes them (``sparse_L``: alg.sparse_L)."""
    obs = make_obs(obs_cfg(family), store.D, store.moments())
    model = Model(DPMixAlloc(2.0), obs)
    model.alloc.use_sparse(sparse_L)
    rng = np.random.default_rng(seed)
    init = OmegaConf.create({"name": "random", "K": K, "n_samples": 1000, "n_trials": None, "kmeans_iters": 0})
    stats = initial_stats(model, store, init, rng, K)
    return model, model.global_step(stats), ClusterIds.first(K), rng


def all_points(store):
    return PointBatch(np.concatenate([store.read_batch(b).X for b in range(store.n_batches)]))


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_full_vb_elbo_never_decreases(store, family, sparse_L):
    model, globals_, ids, rng = setup(store, family, sparse_L=sparse_L)
    elbos = run_laps(FullVB(model, store, {}, rng, globals_, ids), 25)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:])), np.diff(elbos).min()
    assert elbos[-1] > elbos[0]


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_memo_elbo_never_decreases_after_every_batch(store, family, sparse_L):
    model, globals_, ids, rng = setup(store, family, sparse_L=sparse_L)
    alg = MemoizedVB(model, store, {}, rng, globals_, ids)
    run_laps(alg, 1)
    values = []
    while alg.lap < 20:
        result = alg.step()
        values.append(result.elbo if result is not None else alg.elbo())
    values = np.array(values)
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:])), np.diff(values).min()
    assert alg.aggregate.allclose(alg.cache_total(), rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_memo_aggregate_equals_full_data_summaries_for_fixed_globals(store, family, sparse_L, monkeypatch):
    model, globals_, ids, rng = setup(store, family, sparse_L=sparse_L)
    alg = MemoizedVB(model, store, {}, rng, globals_, ids)
    run_laps(alg, 3)
    frozen = alg.globals
    expected = process_batch(model, frozen, all_points(store)).stats
    monkeypatch.setattr(model, "global_step", lambda stats, warm=None: frozen)  # freeze the globals for one lap
    run_laps(alg, 4)
    monkeypatch.undo()
    got = alg.aggregate
    for name in expected.fields:
        if name != "n_atoms":
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-9, atol=1e-8, err_msg=name)
    assert model.elbo(got, model.global_step(got)) == pytest.approx(
        model.elbo(expected, model.global_step(expected)), rel=1e-12)


def test_memo_with_one_batch_reproduces_full_vb(tmp_path, store):
    path = tmp_path / "one.h5"
    write_points(path, all_points(store).X, n_batches=1)
    with BatchStore.open(path) as one:
        m1, g1, i1, r1 = setup(one, "gauss", seed=3)
        m2, g2, i2, r2 = setup(one, "gauss", seed=3)
        vb = run_laps(FullVB(m1, one, {}, r1, g1, i1), 8)
        memo = run_laps(MemoizedVB(m2, one, {}, r2, g2, i2), 8)
    np.testing.assert_allclose(memo, vb, rtol=1e-12)


def test_sovb_step_is_the_rescaled_interpolation_of_the_summaries(store):
    """eff_t = (1 − ξ_t) eff_{t−1} + ξ_t (N / N_b) S_b with ξ_t = (δ + t)^(−κ) (Hughes 2016 thesis Eq. 3.52)."""
    delay, exponent = 2.0, 0.7
    model, globals_, ids, rng = setup(store, "gauss")
    alg = StochasticVB(model, store, {"rate_delay": delay, "rate_exponent": exponent}, rng, globals_, ids)
    N = store.n_atoms
    for t in (1, 2, 3):  # three steps within the first lap (6 batches)
        before = alg.globals
        alg.step()
        batch = store.read_batch(int(alg.order[alg.pos - 1]))
        stats = process_batch(model, before, batch).stats
        xi = (delay + t) ** (-exponent)
        expected = {name: (1 - xi) * before.stats[name] + xi * (N / batch.n_atoms) * stats[name]
                    for name in stats.fields}
        for name, value in expected.items():
            np.testing.assert_allclose(alg.globals.stats[name], value, rtol=1e-12, atol=1e-12, err_msg=name)
        assert alg.rate() == pytest.approx((delay + t + 1) ** (-exponent))


def test_sovb_reports_the_exact_elbo_of_its_globals(store):
    model, globals_, ids, rng = setup(store, "gauss")
    alg = StochasticVB(model, store, {"rate_delay": 1.0, "rate_exponent": 0.6}, rng, globals_, ids)
    elbo = run_laps(alg, 3)[-1]
    total = process_batch(model, alg.globals, all_points(store)).stats
    assert elbo == pytest.approx(model.elbo(total, alg.globals), rel=1e-10)
    # the globals are not the optimum for these responsibilities: the general ELBO is below it
    optimum = model.global_step(total)
    assert elbo < model.elbo(total, optimum)
    assert model.elbo(total, optimum) == pytest.approx(model.elbo(total, model.global_step(total.copy())), rel=1e-12)


@pytest.mark.parametrize("n_samples", [225, 900])
def test_kmeans_initial_clusters_are_scaled_to_the_whole_data_set(store, n_samples):
    """Initial clusters made by k-means on a sample summarise the sample scaled by the data set's size over the
    sample's (900 / 225 = 4 here, 1 when the sample is everything); seeds alone (no k-means) are not scaled."""
    model = Model(DPMixAlloc(2.0), make_obs(obs_cfg("gauss"), store.D, store.moments()))
    K = 4

    def stats(kmeans_iters):
        init = OmegaConf.create({"name": "kmeanspp", "K": K, "n_samples": n_samples, "n_trials": None,
                                 "kmeans_iters": kmeans_iters})
        return initial_stats(model, store, init, np.random.default_rng(3), K)
    scaled, seeds = stats(3), stats(0)
    assert scaled.N.sum() == pytest.approx(900.0, rel=1e-12)
    assert seeds.N.sum() == pytest.approx(K, rel=1e-12)
    sample = 900 // n_samples
    # the scaled sums are whole multiples of the sample's: each k-means cluster holds whole atoms
    np.testing.assert_allclose(scaled.N / sample, np.round(scaled.N / sample), atol=1e-9)
