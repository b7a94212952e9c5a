"""The annealed Dirichlet prior of obs=mult: its schedule, runs under it, and the model a run saves."""
from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest

import bnpvi
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.obs import Mult
from setups import TOPICS, assert_resume_is_exact


def test_schedule_is_geometric_from_lam_start_to_lam():
    fam = Mult(0.1, 20, lam_start=0.5, anneal_laps=4)
    lams = [fam.annealed(t).lam for t in range(6)]
    assert lams[:4] == pytest.approx([0.5 ** (1 - t / 4) * 0.1 ** (t / 4) for t in range(4)], rel=1e-15)
    assert fam.annealed(4) is fam and fam.annealed(5) is fam and lams[4] == 0.1
    assert fam.annealed(1) is fam.annealed(1)  # one family per lap: the model of a lap keeps its identity
    assert all(fam.annealed(t).anneal_laps == 0 for t in range(4))
    settled = fam.without_annealing()
    assert settled.lam == 0.1 and settled.anneal_laps == 0 and settled.annealed(0) is settled


@pytest.mark.parametrize("start, laps", [(None, 5), (0.1, 5), (0.05, 5), (0.5, 0)])
def test_no_annealing_unless_the_start_is_above_lam(start, laps):
    fam = Mult(0.1, 20, lam_start=start, anneal_laps=laps)
    assert fam.anneal_laps == 0 and fam.annealed(0) is fam


@pytest.mark.parametrize("start, laps, key", [(-1.0, 3, "obs.lam_start"), (0.5, -2, "obs.anneal_laps"),
                                              (0.5, 2.5, "obs.anneal_laps")])
def test_bad_annealing_keys_name_the_key(start, laps, key):
    with pytest.raises(BnpviError, match=key.replace(".", r"\.")):
        Mult(0.1, 20, lam_start=start, anneal_laps=laps)


def test_run_records_the_prior_of_every_lap_and_rises_once_it_is_settled(compose_cfg, tmp_path):
    summary = runner.train(compose_cfg(*TOPICS, "alg.n_laps=9", "obs.anneal_laps=4"), tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    fam = Mult(0.1, 1, lam_start=0.5, anneal_laps=4)
    assert trace["prior_lam"].to_numpy() == pytest.approx([fam.annealed(t).lam for t in range(9)], rel=1e-12)
    settled = trace["elbo"].to_numpy()[4:]  # laps 5-9: the configured prior
    assert np.all(np.diff(settled) > -1e-9 * np.abs(settled[1:]))
    fitted = bnpvi.load(tmp_path / "run")  # the saved model is the configured one, at the trace's last ELBO
    assert fitted.model.obs.lam == 0.1
    assert fitted.model.elbo(fitted.globals_.stats, fitted.globals_) == pytest.approx(summary["elbo"], rel=1e-12)


def test_a_run_that_stops_while_annealed_saves_the_configured_model(compose_cfg, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="bnpvi"):
        summary = runner.train(compose_cfg(*TOPICS, "alg.n_laps=2", "obs.anneal_laps=5"), tmp_path / "run")
    assert "annealed model" in caplog.text
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    fitted = bnpvi.load(tmp_path / "run")
    at_configured = fitted.model.elbo(fitted.globals_.stats, fitted.globals_)
    assert summary["elbo"] == pytest.approx(at_configured, rel=1e-12)
    assert abs(summary["elbo"] - trace["elbo"].iloc[-1]) > 1.0  # the last lap's ELBO was under λ 0.5 → 0.1
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["elbo"] == summary["elbo"]


def test_warm_start_is_not_annealed(compose_cfg, tmp_path):
    runner.train(compose_cfg(*TOPICS, "alg.n_laps=3", "obs.anneal_laps=0"), tmp_path / "saved")
    runner.train(compose_cfg(*TOPICS[:2], "moves=[]", "alg.n_laps=2", "init=from_run",
                             f"init.path={tmp_path / 'saved'}"), tmp_path / "warm")
    assert "prior_lam" not in pd.read_csv(tmp_path / "warm" / "trace.csv").columns


def test_the_prior_stands_still_in_laps_that_accept_a_birth(compose_cfg, tmp_path):
    """From one topic with births: a lap that accepts a birth while the prior is annealed does not advance
    the schedule (the next lap has the same λ), at most anneal_laps times; the ELBO rises once the prior
    is settled, and a run cut while the clock stands still resumes exactly."""
    laps, anneal = 12, 4
    cfg = compose_cfg("model=hdp_topic", "data.n_docs=300", "init.K=1", "alg.converge_thr=-1", f"alg.n_laps={laps}",
                      f"obs.anneal_laps={anneal}", "checkpoint_every=1", "seed=3")
    _, trace = assert_resume_is_exact(cfg, tmp_path, lap=3)
    births = trace["birth_accepted"].fillna(0).to_numpy() > 0
    fam = Mult(0.1, 1, lam_start=0.5, anneal_laps=anneal)
    step, paused, expected = 0, 0, []
    for lap in range(laps):
        expected.append(fam.annealed(step).lam)
        if births[lap] and step < anneal and paused < anneal:
            paused += 1
        else:
            step += 1
    assert paused > 0, "no birth was accepted while the prior was annealed"
    assert trace["prior_lam"].to_numpy() == pytest.approx(expected, rel=1e-12)
    settled = trace["elbo"].to_numpy()[anneal + paused:]
    assert settled.size > 2 and np.all(np.diff(settled) > -1e-9 * np.abs(settled[1:]))
