"""Deterministic annealing of mixtures (model.temperature): the tempered family, the schedule, the local
step's optimum at T, and runs under it (move gains at T are checked by brute force in test_moves)."""
from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

import bnpvi
from bnpvi.alloc import DPMixAlloc, FiniteMixAlloc
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.model import Model
from bnpvi.obs.tempered import Tempered
from bnpvi.stats import Responsibilities
from setups import FAMILIES, assert_resume_is_exact, brute_stats, dense_resp, fitted

T = 3.0
TOY = ["model=dp_mix", "obs=gauss", "data=toy", "data.n_atoms=2000", "alg=memo", "data.n_batches=4",
       "alg.converge_thr=-1", "checkpoint_every=1", "seed=2"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tempered_family_divides_every_data_term_by_T_and_keeps_the_posterior(family):
    model, batch, globals_, _, local, stats = fitted(family)
    base, hot = model.obs, Tempered(model.obs, T)
    N, fields = stats.N, stats.select(model.obs_fields)
    post = base.posterior(N, fields)
    for name, value in post.items():
        np.testing.assert_array_equal(hot.posterior(N, fields)[name], value)
    np.testing.assert_allclose(hot.log_marginal(N, fields), base.log_marginal(N, fields) / T, rtol=1e-14)
    pairs = np.array([[0, 1], [2, 5], [1, 4]])
    np.testing.assert_allclose(hot.merged_log_marginal(N, fields, pairs), base.merged_log_marginal(N, fields, pairs) / T,
                               rtol=1e-14)
    other = base.posterior(N + 1.0, fields)
    np.testing.assert_allclose(hot.kl(other, post), base.kl(other, post) / T, rtol=1e-14)
    assert hot.elbo_data(N, fields, other) == pytest.approx(base.elbo_data(N, fields, other) / T, rel=1e-13)
    log_lik = base.expected_log_lik(post, batch)
    np.testing.assert_allclose(hot.expected_log_lik(post, batch), log_lik / T, rtol=1e-14)
    weights = model.alloc.expected_log_pi(globals_.alloc)
    np.testing.assert_array_equal(hot.argmax_clusters(post, batch, weights), np.argmax(log_lik / T + weights, axis=1))
    if base.has_reassign_gains:
        r = dense_resp(local.resp)
        np.testing.assert_allclose(hot.reassign_gains(N, fields, batch, r), base.reassign_gains(N, fields, batch, r) / T,
                                   rtol=1e-12, atol=1e-12)
    assert hot.temperature == T and base.temperature == 1.0 and hot.name == base.name
    tempered = Model(model.alloc, hot)  # L_T = Σ_k L_data,k / T + allocation and entropy terms
    assert tempered.elbo(stats, tempered.global_step(stats)) == pytest.approx(
        float(np.sum(model.data_terms(stats))) / T + model.alloc_value(stats), rel=1e-12)


def test_a_tempered_family_travels_to_workers_whole():
    """The model of a lap is sent to Dask workers by pickling: the copy scores as the original."""
    model, batch, globals_, *_ = fitted("gauss")
    hot = pickle.loads(pickle.dumps(Tempered(model.obs, T)))
    assert hot.temperature == T and hot.name == "gauss"
    np.testing.assert_array_equal(hot.expected_log_lik(globals_.obs, batch),
                                  Tempered(model.obs, T).expected_log_lik(globals_.obs, batch))


@pytest.mark.parametrize("family", ["gauss", "mult"])
def test_the_local_step_at_T_is_the_optimum_of_the_tempered_elbo(family):
    """r_nk ∝ exp(E ln π_k + E ln p(x_n | φ_k) / T); at fixed globals no other responsibilities score higher."""
    model, batch, globals_, _, _, _ = fitted(family, temperature=T)
    log_lik, local = model.local_step(batch, globals_)
    r = dense_resp(local.resp)
    base_log_lik = model.obs.base.expected_log_lik(globals_.obs, batch)
    expected = softmax(base_log_lik / T + model.alloc.expected_log_pi(globals_.alloc), axis=1)
    np.testing.assert_allclose(r, expected, rtol=1e-10, atol=1e-12)
    best = model.elbo(brute_stats(model, batch, r), globals_)
    rng = np.random.default_rng(0)
    for scale in (0.01, 0.3):
        other = r * np.exp(scale * rng.normal(size=r.shape))
        other /= other.sum(axis=1, keepdims=True)
        assert model.elbo(brute_stats(model, batch, other), globals_) < best
    # and the untempered step is a different optimum: at T the atoms are shared more evenly
    untempered = Responsibilities.from_weights(base_log_lik, model.alloc.expected_log_pi(globals_.alloc)).values
    assert brute_stats(model, batch, r)["H"].sum() > brute_stats(model, batch, untempered)["H"].sum()


@pytest.mark.parametrize("alloc", [DPMixAlloc, FiniteMixAlloc])
def test_the_temperature_falls_geometrically_to_one(alloc):
    model = alloc(2.0, temperature=30.0, temperature_laps=4)
    assert [model.temperature_at(t) for t in range(6)] == pytest.approx(
        [30.0 ** (1 - t / 4) for t in range(4)] + [1.0, 1.0], rel=1e-15)
    assert alloc(2.0, temperature=1.0, temperature_laps=4).temperature_laps == 0
    settled = model.without_annealing()
    assert settled.temperature_laps == 0 and settled.temperature_at(0) == 1.0 and model.temperature_laps == 4


def test_the_model_of_a_tempered_lap_is_tempered_once_and_kept():
    model, *_ = fitted("gauss")
    configured = Model(DPMixAlloc(2.0, temperature=8.0, temperature_laps=3), model.obs)
    assert configured.anneal_laps == 3 and configured.temperature == 1.0
    assert [configured.at_lap(t).temperature for t in range(4)] == pytest.approx([8.0, 4.0, 2.0, 1.0], rel=1e-14)
    assert configured.at_lap(1) is configured.at_lap(1) and configured.at_lap(3) is configured
    assert configured.without_annealing().at_lap(0).temperature == 1.0


@pytest.mark.parametrize("value, laps, key", [(0.5, 3, "model.temperature"), ("hot", 3, "model.temperature"),
                                              (10.0, -1, "model.temperature_laps"), (10.0, 2.5, "model.temperature_laps")])
def test_bad_temperature_keys_name_the_key(value, laps, key):
    with pytest.raises(BnpviError, match=key.replace(".", r"\.")):
        DPMixAlloc(2.0, temperature=value, temperature_laps=laps)


def test_a_tempered_run_records_T_rises_once_settled_saves_the_model_at_T_1_and_resumes_exactly(compose_cfg, tmp_path):
    laps, anneal = 13, 4  # a run anneals over at most a third of its laps: (13 − 1) // 3 = 4
    cfg = compose_cfg(*TOY, "init.K=1", f"alg.n_laps={laps}", "model.temperature=20",
                      f"model.temperature_laps={anneal}")
    summary, trace = assert_resume_is_exact(cfg, tmp_path, lap=2)
    births = trace["birth_accepted"].fillna(0).to_numpy() > 0
    schedule = DPMixAlloc(1.0, temperature=20.0, temperature_laps=anneal)
    step, paused, expected = 0, 0, []
    for lap in range(laps):
        expected.append(schedule.temperature_at(step))
        if births[lap] and step < anneal and paused < anneal:
            paused += 1  # a lap that accepts a birth holds the temperature (as it holds obs=mult's prior)
        else:
            step += 1
    assert trace["temperature"].to_numpy() == pytest.approx(expected, rel=1e-12)
    assert expected[0] == 20.0 and expected[-1] == 1.0
    settled = trace["elbo"].to_numpy()[anneal + paused:]
    assert settled.size > 2 and np.all(np.diff(settled) > -1e-9 * np.abs(settled[1:]))
    fitted_run = bnpvi.load(tmp_path / "ref")
    assert fitted_run.model.temperature == 1.0
    assert fitted_run.model.elbo(fitted_run.globals_.stats, fitted_run.globals_) == pytest.approx(summary["elbo"],
                                                                                                  rel=1e-12)
    assert summary["K"] > 1


def test_a_short_run_anneals_within_its_laps_and_keeps_its_schedule_when_resumed_with_more(compose_cfg, tmp_path):
    cfg = compose_cfg(*TOY, "init.K=1", "alg.n_laps=7")  # the family's T0 = 30 over 10 laps, fitted to (7 - 1) // 3
    summary = runner.train(cfg, tmp_path / "run")
    short = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert short["temperature"].iloc[0] == 30.0 and short["temperature"].iloc[-1] == 1.0
    assert summary["K"] > 1  # over all 10 laps it would still be hot, and at K = 1
    cfg.alg.n_laps = 16  # a new run of 16 laps would anneal over 5: laps 7-9 were hot again
    runner.resume(tmp_path / "run", cfg)
    longer = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert len(longer) == 16 and (longer["temperature"].iloc[len(short):] == 1.0).all()  # T never rises again
    pd.testing.assert_series_equal(longer["temperature"].iloc[:len(short)], short["temperature"])


def test_warm_start_is_not_tempered(compose_cfg, tmp_path):
    runner.train(compose_cfg(*TOY, "init.K=4", "moves=[]", "alg.n_laps=2"), tmp_path / "saved")
    runner.train(compose_cfg(*TOY, "moves=[]", "alg.n_laps=2", "model.temperature=20", "init=from_run",
                             f"init.path={tmp_path / 'saved'}"), tmp_path / "warm")
    assert "temperature" not in pd.read_csv(tmp_path / "warm" / "trace.csv").columns


@pytest.mark.parametrize("overrides, T0", [
    ([], 30.0),  # memo's default moves include births
    (["obs=diag_gauss"], 30.0),
    (["obs=zm_gauss"], 1.0),
    (["moves=[merge,delete]"], 1.0),  # without births nothing splits what the heat joined
    (["alg=vb", "moves=[]"], 1.0),
    (["model=finite_mix", "init.K=4", "moves=[]"], 1.0),
    (["model.temperature=5"], 5.0),
    (["obs=diag_gauss", "model.temperature=1"], 1.0),
], ids=["gauss", "diag_gauss", "zm_gauss", "no_births", "vb", "finite_mix", "set", "set_off"])
def test_a_dp_mixture_with_births_takes_its_family_temperature_unless_one_is_set(compose_cfg, tmp_path, overrides,
                                                                               T0):
    cfg = compose_cfg("data=toy", "data.n_atoms=500", *overrides)
    assert "model.temperature" in " ".join(overrides) or cfg.model.get("temperature", 1.0) in (None, 1.0)
    (tmp_path / "run").mkdir()
    run = runner.Run(cfg, tmp_path / "run")
    try:
        alloc = run.model.alloc
        assert run.model.temperature == 1.0 and alloc.temperature_at(0) == T0
        assert alloc.temperature_laps == (cfg.model.temperature_laps if T0 > 1.0 else 0)
    finally:
        run.close()
