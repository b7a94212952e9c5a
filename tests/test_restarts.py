"""Restarts that keep the best (alg.n_init, bnpvi.learn.restarts): each restart is the run of its seed to the
last bit, the run keeps the one of highest final ELBO, a resume ends where the uninterrupted restarts end, and
the report, the estimators and the Dask workers see them."""
import json
import signal

import numpy as np
import pandas as pd
import pytest

import bnpvi
from bnpvi.data.store import write_points
from bnpvi.errors import BnpviError
from bnpvi.learn import restarts, runner
from bnpvi.learn.memo import MemoizedVB
from bnpvi.report.runs import collect_runs

MOVES = "moves=[birth,merge,delete]"


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    """600 points of 4 overlapping 2-D groups in 3 batches: seeds from one cluster end at different ELBOs."""
    rng = np.random.default_rng(5)
    centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0], [3.0, 3.0]])
    X = np.vstack([rng.normal(c, 1.0, size=(150, 2)) for c in centers])[rng.permutation(600)]
    return write_points(tmp_path_factory.mktemp("points") / "points.h5", X, n_batches=3)


def config(compose, points, *extra):
    return compose("data=hdf5", f"data.path={points}", "init.K=1", MOVES, "alg.n_laps=12", "seed=4", *extra)


def summary_of(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def test_each_restart_is_its_seeds_run_and_the_best_is_kept(compose_cfg, points, tmp_path):
    summary = restarts.train(config(compose_cfg, points, "alg.n_init=3"), tmp_path / "run")
    table = pd.read_csv(tmp_path / "run" / restarts.TABLE)
    assert list(table.seed) == [4, 5, 6]
    for seed in (4, 5, 6):  # restart of seed s = the plain run of seed s, trace and all
        alone = runner.train(compose_cfg("data=hdf5", f"data.path={points}", "init.K=1", MOVES, "alg.n_laps=12",
                                         f"seed={seed}"), tmp_path / f"alone-{seed}")
        folder = tmp_path / "run" / "restarts" / f"seed-{seed}"
        assert summary_of(folder)["elbo"] == alone["elbo"]
        assert (folder / "trace.csv").read_text().splitlines()[1:] != []
        pd.testing.assert_frame_equal(pd.read_csv(folder / "trace.csv").drop(columns=["elapsed_s"]),
                                      pd.read_csv(tmp_path / f"alone-{seed}" / "trace.csv").drop(columns=["elapsed_s"]))
    best = int(table.elbo.values.argmax())
    assert list(table.kept) == [i == best for i in range(3)]
    assert summary["elbo"] == table.elbo[best] == max(table.elbo)
    assert summary["kept_seed"] == table.seed[best] and len(summary["restarts"]) == 3
    kept = tmp_path / "run" / "restarts" / f"seed-{table.seed[best]}"
    for name in ("model.h5", "trace.csv", "assignments.csv", "clusters.csv"):
        assert (tmp_path / "run" / name).read_bytes() == (kept / name).read_bytes()
    model, alone = bnpvi.load(tmp_path / "run"), bnpvi.load(kept)
    assert model.elbo_ == alone.elbo_ and np.array_equal(model.weights_, alone.weights_)
    # the report: the run and each restart
    records, _ = collect_runs([tmp_path / "run"])
    assert sorted(r.path.name for r in records) == ["run", "seed-4", "seed-5", "seed-6"]


def test_resume_ends_where_the_uninterrupted_restarts_end(compose_cfg, points, tmp_path, monkeypatch):
    cfg = config(compose_cfg, points, "alg.n_init=3", "checkpoint_every=2")
    whole = restarts.train(cfg, tmp_path / "whole")
    step, hits = MemoizedVB.step, []

    def step_then_signal(alg):  # Ctrl-C in lap 3 of the second restart, after its batch 1
        result = step(alg)
        if (alg.lap, alg.pos) == (3, 1):
            hits.append(1)
            if len(hits) == 2:
                signal.raise_signal(signal.SIGINT)
        return result
    monkeypatch.setattr(MemoizedVB, "step", step_then_signal)
    with pytest.raises(runner.Interrupted, match=r"restart 2 of 3 \(seed 5\).*resume="):
        restarts.train(cfg, tmp_path / "cut")
    assert not (tmp_path / "cut" / "restarts" / "seed-6").exists()
    monkeypatch.setattr(MemoizedVB, "step", step)
    resumed = runner.run_to_end(restarts.reopen(tmp_path / "cut", cfg))
    assert resumed["restarts"] == whole["restarts"] or \
        [r["elbo"] for r in resumed["restarts"]] == [r["elbo"] for r in whole["restarts"]]
    assert resumed["elbo"] == whole["elbo"] and resumed["kept_seed"] == whole["kept_seed"]
    for seed in (4, 5, 6):
        cut, ref = (tmp_path / name / "restarts" / f"seed-{seed}" / "trace.csv" for name in ("cut", "whole"))
        pd.testing.assert_frame_equal(pd.read_csv(cut).drop(columns=["elapsed_s"]),
                                      pd.read_csv(ref).drop(columns=["elapsed_s"]))


def test_a_run_of_restarts_is_not_started_over(compose_cfg, points, tmp_path):
    restarts.train(config(compose_cfg, points, "alg.n_init=2"), tmp_path / "run")
    with pytest.raises(BnpviError, match="already holds a run; use resume="):
        restarts.start(config(compose_cfg, points, "alg.n_init=2"), tmp_path / "run")


@pytest.mark.parametrize("extra, message", [
    (("alg.n_init=0",), "alg.n_init must be an integer >= 1"),
    (("alg=tfsvi", "alg.n_init=2"), "alg=tfsvi ends without a whole-data ELBO"),
])
def test_restarts_refused(compose_cfg, points, tmp_path, extra, message):
    cfg = compose_cfg("data=hdf5", f"data.path={points}", *extra)
    with pytest.raises(BnpviError, match=message):
        restarts.start(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "restarts").exists()


def test_the_runner_refuses_restarts(compose_cfg, points, tmp_path):
    with pytest.raises(BnpviError, match="bnpvi.learn.restarts"):
        runner.train(config(compose_cfg, points, "alg.n_init=2"), tmp_path / "run")


def test_estimator_keeps_the_best_of_its_restarts():
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(c, 1.0, size=(100, 2)) for c in ([0, 0], [3, 0], [0, 3])])
    options = dict(K=1, n_laps=10, moves=["birth", "merge", "delete"])
    best = bnpvi.DPMixture(n_init=3, random_state=7, **options).fit(X)
    alone = [bnpvi.DPMixture(random_state=seed, **options).fit(X).elbo_ for seed in (7, 8, 9)]
    assert best.elbo_ == max(alone)


def test_cli_restarts_and_their_resume(bnpvi_train, tmp_path, points):
    status, out, err = bnpvi_train("data=hdf5", f"data.path={points}", "init.K=1", "alg.n_init=2", "alg.n_laps=4",
                                   "hydra.run.dir=run")
    assert status == 0, err
    assert (tmp_path / "run" / "restarts" / "seed-0" / ".hydra" / "overrides.yaml").read_text().count("seed=0") == 1
    status, out, err = bnpvi_train(f"resume={tmp_path / 'run'}", "alg.n_laps=6")
    assert status == 0, err
    assert [row["laps"] <= 6 for row in summary_of(tmp_path / "run")["restarts"]] == [True, True]
    status, out, err = bnpvi_train("data=hdf5", f"data.path={points}", "alg.n_init=2", "hydra.run.dir=run")
    assert status == 2 and "already holds a run" in err


def test_restarts_on_dask_workers_equal_those_in_turn(compose_cfg, points, tmp_path):
    pytest.importorskip("distributed")
    in_turn = restarts.train(config(compose_cfg, points, "alg.n_init=2"), tmp_path / "in-turn")
    on_workers = restarts.train(config(compose_cfg, points, "alg.n_init=2", "alg.workers=2"), tmp_path / "workers")
    assert [r["elbo"] for r in on_workers["restarts"]] == [r["elbo"] for r in in_turn["restarts"]]
    assert on_workers["kept_seed"] == in_turn["kept_seed"]


def test_bad_data_leaves_no_run_of_restarts(bnpvi_train, tmp_path):
    (tmp_path / "points.csv").write_text("x,y\n1,2\n3,4\n")
    status, out, err = bnpvi_train("data.path=points.csv", "alg.n_init=2", "hydra.run.dir=run")
    assert status == 2 and err.count("\n") == 1 and "bnpvi-data convert" in err
    assert not (tmp_path / "run").exists()
