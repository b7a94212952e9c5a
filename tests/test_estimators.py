"""The scikit-learn estimators DPMixture and FiniteMixture (bnpvi/api/estimators.py): scikit-learn's own
checks, composition with its tools, and equality with the bnpvi-train run of the same config."""
from __future__ import annotations

import logging

import h5py
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import bnpvi
from bnpvi.api.estimators import DATA_FILE, DPMixture, FiniteMixture
from bnpvi.data.store import write_points
from bnpvi.errors import BnpviError
from bnpvi.learn import runner

SAMPLE_WEIGHT_IDS = ("integer weights are repeated rows in every summary and entropy (tests/test_weights.py), but "
                     "the k-means++ start draws its seeds from the rows, so weighted rows and their repetitions "
                     "start from other seeds: on the check's data they reach the same clusters under other ids")
EXPECTED_FAILED_CHECKS = {
    DPMixture: {"check_clustering": "labels are stable cluster ids (cluster_ids_), not 0..K-1: once births, "
                                    "merges and deletes have run, the ids of a DP mixture's clusters have gaps",
                "check_sample_weight_equivalence_on_dense_data": SAMPLE_WEIGHT_IDS},
    FiniteMixture: {"check_clustering": "labels are the ids of the K clusters: where the check's 3 groups leave one "
                                        "of the 8 (the default K) without atoms, its id is unused",
                    "check_sample_weight_equivalence_on_dense_data": SAMPLE_WEIGHT_IDS},
}


def expected_failed_checks(estimator) -> dict:
    return EXPECTED_FAILED_CHECKS[type(estimator)]


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(size=(80, 2)) + centre for centre in ([0, 0], [6, 6], [6, -6])])[
        rng.permutation(240)]


@parametrize_with_checks([DPMixture(n_laps=3), FiniteMixture(n_laps=3), DPMixture(obs="diag_gauss", n_laps=3)],
                         expected_failed_checks=expected_failed_checks)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def test_fit_equals_the_bnpvi_train_run_of_the_same_config_and_batches(X, tmp_path, compose_cfg):
    est = DPMixture(gamma=5.0, temperature=1.0, n_laps=8, n_batches=3, birth_max_per_lap=2, random_state=3).fit(X)
    data = write_points(tmp_path / "points.h5", X, n_batches=3)
    cfg = compose_cfg("data=hdf5", f"data.path={data}", "model.gamma=5", "model.temperature=1", "alg.n_laps=8",
                      "alg.n_batches=3",
                      "moves.birth.max_per_lap=2", "seed=3", "plots=true")  # (bnpvi-train's default)
    composed = est.train_config()
    composed.data.path = str(data)
    assert OmegaConf.to_container(composed) == OmegaConf.to_container(cfg)
    summary = runner.train(cfg, tmp_path / "run")
    assert summary["K"] > 1, "births did not run: the test cannot tell"
    assert est.elbo_ == est.lower_bound_ == summary["elbo"]
    assert est.n_components_ == summary["K"]
    assert (est.n_iter_, est.converged_) == (summary["laps"], summary["converged"])
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert est.elbo_trace_.shape == (summary["laps"],) and est.elbo_trace_[-1] == summary["elbo"]
    np.testing.assert_allclose(est.elbo_trace_, trace["elbo"], rtol=1e-12)
    np.testing.assert_array_equal(est.cluster_ids_, summary["uids"])
    with h5py.File(tmp_path / "run" / "assignments.h5", "r") as f:
        np.testing.assert_array_equal(f["index"][()], np.arange(X.shape[0]))
        np.testing.assert_array_equal(est.labels_, f["cluster"][()])
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    np.testing.assert_array_equal(est.fit_predict(X), est.labels_)


def test_fitted_attributes(X):
    est = FiniteMixture(n_components=3, alg="vb", n_laps=30, random_state=0).fit(X)
    K, D = 3, X.shape[1]
    assert est.n_components_ == K and est.n_features_in_ == D
    assert est.weights_.shape == (K,) and est.weights_.sum() == pytest.approx(1.0)
    assert est.means_.shape == (K, D) and est.covariances_.shape == (K, D, D)
    order = np.argsort(est.means_[:, 1])
    np.testing.assert_allclose(est.means_[order], [[6, -6], [0, 0], [6, 6]], atol=0.5)
    np.testing.assert_allclose(est.covariances_, np.broadcast_to(np.eye(D), (K, D, D)), atol=0.5)
    proba = est.predict_proba(X)
    assert proba.shape == (X.shape[0], K)
    np.testing.assert_array_equal(est.cluster_ids_[proba.argmax(axis=1)], est.labels_)
    assert est.score(X) == pytest.approx(est.score_samples(X).mean())
    diag = FiniteMixture(n_components=3, obs="diag_gauss", alg="vb", n_laps=30).fit(X)
    assert np.count_nonzero(diag.covariances_ - np.eye(D) * diag.covariances_) == 0  # diagonal matrices


def test_clone_pipeline_and_grid_search(X):
    est = DPMixture(gamma=2.0, n_laps=4, n_batches=2)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    pipe = Pipeline([("scale", StandardScaler()), ("mix", DPMixture(n_laps=4))]).fit(X)
    assert pipe.predict(X).shape == (X.shape[0],)
    search = GridSearchCV(DPMixture(n_laps=4), {"gamma": [0.5, 5.0]}, cv=2).fit(X)
    assert search.best_params_["gamma"] in (0.5, 5.0)
    assert np.isfinite(search.best_score_)
    assert DPMixture().set_params(birth_max_per_lap=1).birth_max_per_lap == 1


def test_bad_keywords_are_type_errors_naming_them(X):
    with pytest.raises(TypeError, match="'n_lapz'"):
        DPMixture(n_lapz=3)
    with pytest.raises(TypeError, match="'birth_Kmax'"):
        FiniteMixture(birth_Kmax=3)  # a finite mixture has no moves
    with pytest.raises(TypeError, match="lam1 sets obs.lam1, which obs=gauss does not have"):
        DPMixture(lam1=1.0).fit(X)
    with pytest.raises(TypeError, match="birth_Kmax sets moves.birth.Kmax, but the birth move is off"):
        DPMixture(alg="vb", birth_Kmax=10).fit(X)
    with pytest.raises(ValueError, match="gamma='many'"):
        DPMixture(gamma="many").fit(X)
    with pytest.raises(ValueError, match="obs='link' is not one of"):
        DPMixture(obs="link").fit(X)
    with pytest.raises(BnpviError, match="fit: document 0 has a count of .* must be non-negative whole numbers"):
        DPMixture(obs="mult").fit(X)  # a mixture of documents takes counts
    with pytest.raises(ValueError, match="X has 3 features"):
        DPMixture(n_laps=2).fit(X).predict(np.ones((2, 3)))
    with pytest.raises(BnpviError, match=r"^model.gamma must be a number > 0, got -1.0$"):
        DPMixture(gamma=-1.0).fit(X)  # the model's own message, not Hydra's wrapper around it


def test_output_dir_is_a_resumable_run_directory(X, tmp_path, caplog):
    out = tmp_path / "fit"
    with caplog.at_level(logging.INFO, logger="bnpvi"):
        est = DPMixture(n_laps=3, output_dir=out).fit(X)
    assert not caplog.records, "a quiet fit logged"
    assert (out / DATA_FILE).is_file() and (out / ".hydra" / "config.yaml").is_file()
    loaded = bnpvi.load(out)
    np.testing.assert_array_equal(loaded.predict(X), est.labels_)
    saved = OmegaConf.load(out / ".hydra" / "config.yaml")
    saved.alg.n_laps = 5
    assert runner.resume(out, saved)["laps"] > 3
    with pytest.raises(bnpvi.BnpviError, match="already holds a fit"):
        clone(est).fit(X)


def test_verbose_logs_every_lap(X, caplog):
    with caplog.at_level(logging.INFO, logger="bnpvi"):
        DPMixture(n_laps=2, verbose=True).fit(X)
        assert logging.getLogger("bnpvi").level == logging.INFO  # restored
    assert any(record.getMessage().startswith("lap") for record in caplog.records)


def test_fit_inside_a_hydra_app_leaves_its_hydra_in_place(X):
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        app = GlobalHydra.instance().hydra
        FiniteMixture(n_components=2, alg="vb", n_laps=2).fit(X)
        assert GlobalHydra.instance().hydra is app


def test_lazy_exports():
    assert bnpvi.DPMixture is DPMixture and bnpvi.FiniteMixture is FiniteMixture


def test_models_of_fixed_K_take_n_components():
    """scikit-learn's and hmmlearn's name for a fixed number of clusters; the DP mixture's K is where it starts."""
    for cls in (bnpvi.FiniteMixture, bnpvi.LDA, bnpvi.FiniteHMM):
        params = cls().get_params()
        assert "n_components" in params and "K" not in params, cls
        assert cls.config_keys["n_components"] == "init.K"
    assert "K" in bnpvi.DPMixture().get_params() and "n_components" not in bnpvi.DPMixture().get_params()
    X = np.random.default_rng(0).normal(size=(200, 2))
    assert bnpvi.FiniteMixture(n_components=4, alg="vb", n_laps=3, random_state=0).fit(X).n_components_total_ == 4


def test_random_state_none_is_fresh_randomness_as_in_scikit_learn():
    """None draws the run's seed from NumPy's global RandomState (so np.random.seed makes it repeatable), a
    RandomState or Generator gives one drawn from it, an int is the seed; the run records it."""
    np.random.seed(3)
    first = bnpvi.DPMixture().train_config().seed
    np.random.seed(3)
    assert bnpvi.DPMixture().train_config().seed == first
    assert bnpvi.DPMixture().train_config().seed != first  # the global state moved on
    assert bnpvi.DPMixture(random_state=5).train_config().seed == 5
    assert bnpvi.DPMixture(random_state=np.random.RandomState(1)).train_config().seed == \
        np.random.RandomState(1).randint(2**31 - 1)
    assert bnpvi.DPMixture(random_state=np.random.default_rng(1)).train_config().seed == \
        np.random.default_rng(1).integers(2**31 - 1)


def test_sample_draws_from_the_fitted_mixture_and_dir_lists_the_api():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 1.0, (300, 2)) for c in ([0, 0], [6, 0], [0, 6])])
    mix = bnpvi.DPMixture(random_state=0).fit(X)
    drawn, labels = mix.sample(6000, random_state=0)
    for uid, mean, cov in zip(mix.cluster_ids_, mix.means_, mix.covariances_):
        rows = drawn[labels == uid]
        np.testing.assert_allclose(rows.mean(axis=0), mean, atol=0.1)
        np.testing.assert_allclose(np.cov(rows.T), cov, atol=0.15)
    np.testing.assert_array_equal(mix.sample(10, random_state=1)[0], mix.sample(10, random_state=1)[0])
    binary = bnpvi.DPMixture(obs="bern", n_laps=5, random_state=0).fit((rng.random((300, 6)) < 0.3).astype(float))
    assert set(np.unique(binary.sample(50, random_state=0)[0])) <= {0.0, 1.0}
    assert {"DPMixture", "HDPHMM", "load", "BnpviError"} <= set(dir(bnpvi))
