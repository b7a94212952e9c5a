"""Applying a trained mixture: the run's assignments, bnpvi.load and bnpvi-apply (bnpvi/api, bnpvi/cli/apply.py)."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd
import pytest

import bnpvi
from bnpvi.data.convert import convert
from bnpvi.data.store import write_points, write_sequences
from bnpvi.io.model_file import read_model
from bnpvi.learn import runner
from setups import apply_cli, apply_command, assert_one_line_error, assert_reproduces, compose, moved_away, \
    one_line_error, read_h5

N, N_HELDOUT = 600, 60


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A DP mixture grown by births from K = 1 on 3 clusters of 2-D points, 10 % held out, rows shuffled."""
    tmp = tmp_path_factory.mktemp("apply")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(200, 2)) + centre for centre in ([0, 0], [6, 6], [6, -6])])
    np.savetxt(tmp / "points.csv", X, delimiter=",")
    data = convert(tmp / "points.csv", tmp / "points.h5", n_batches=3, heldout=N_HELDOUT / N, shuffle_seed=1)
    run_dir = tmp / "run"
    runner.train(compose("data=hdf5", f"data.path={data}", "alg.n_laps=15"), run_dir)
    with h5py.File(data, "r") as f:
        parts = {"X": f["X"][()], "X_heldout": f["heldout/X"][()]}
    return run_dir, data, parts


def final_clusters(run_dir) -> pd.DataFrame:
    clusters = pd.read_csv(run_dir / "clusters.csv")
    return clusters[clusters["lap"] == clusters["lap"].max()]


def test_assignments_have_one_row_per_data_row_and_the_stable_ids_of_clusters_csv(trained):
    run_dir, _, _ = trained
    table = pd.read_csv(run_dir / "assignments.csv", float_precision="round_trip")
    assert list(table.columns) == ["index", "cluster", "probability", "heldout"]
    np.testing.assert_array_equal(np.sort(table["index"]), np.arange(N))  # every source row once
    assert table["heldout"].sum() == N_HELDOUT
    final = final_clusters(run_dir)
    uids = final["uid"].to_numpy()
    assert not np.array_equal(np.sort(uids), np.arange(uids.shape[0])), "ids equal positions: the test cannot tell"
    assert set(table["cluster"]) <= set(uids)
    training = table[table["heldout"] == 0]
    sizes = training["cluster"].value_counts()
    for uid, count in zip(uids, final["count"]):  # hard counts follow the soft ones of the same id
        assert sizes.get(uid, 0) == pytest.approx(count, abs=0.01 * N)
    assert ((table["probability"] > 0.3) & (table["probability"] <= 1.0)).all()
    h5 = read_h5(run_dir / "assignments.h5")
    for column in ("index", "cluster", "probability", "heldout"):
        np.testing.assert_array_equal(h5[column], table[column], err_msg=column)
    np.testing.assert_array_equal(h5["uids"], read_model(run_dir / "model.h5")["uids"])


def test_loaded_model_predicts_the_runs_assignments(trained):
    run_dir, _, parts = trained
    table = pd.read_csv(run_dir / "assignments.csv", float_precision="round_trip")
    training, held = table[table["heldout"] == 0], table[table["heldout"] == 1]
    fitted = bnpvi.load(run_dir)
    np.testing.assert_array_equal(fitted.predict(parts["X"]), training["cluster"])
    proba = fitted.predict_proba(parts["X"])
    assert proba.shape == (N - N_HELDOUT, fitted.n_components_)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(proba.max(axis=1), training["probability"])
    np.testing.assert_array_equal(fitted.cluster_ids_[proba.argmax(axis=1)], training["cluster"])
    np.testing.assert_array_equal(fitted.predict(parts["X_heldout"]), held["cluster"])
    summary = json.loads((run_dir / "summary.json").read_text())
    np.testing.assert_array_equal(fitted.cluster_ids_, summary["uids"])
    assert fitted.elbo_ == summary["elbo"] and fitted.n_components_ == summary["K"]
    np.testing.assert_array_equal(fitted.weights_, read_model(run_dir / "model.h5")["weights"])
    # the held-out score of the run, per point, from the same code
    assert fitted.score(parts["X_heldout"]) == pytest.approx(summary["heldout_loglik"], rel=1e-12)
    assert fitted.score_samples(parts["X_heldout"]).shape == (N_HELDOUT,)


@pytest.mark.parametrize("X, problem", [(np.zeros((4, 3)), "D=3"), (np.zeros(4), "1-D"),
                                        (np.array([[0.0, np.inf]]), "inf"), (np.array([["a", "b"]]), "real")])
def test_predict_rejects_bad_input_on_one_line(trained, X, problem):
    fitted = bnpvi.load(trained[0])
    with one_line_error(problem):
        fitted.predict(X)


def test_bnpvi_apply_on_the_training_file_reproduces_the_run(trained, tmp_path):
    """The console command in a process (the other tests run it in this one)."""
    run_dir, data, _ = trained
    summary = json.loads((run_dir / "summary.json").read_text())
    proc = apply_command(run_dir, data, tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    assert_reproduces(tmp_path / "out.h5", run_dir / "assignments.h5")
    assert f"heldout_loglik {summary['heldout_loglik']:.6f}" in proc.stdout


def test_load_and_apply_work_without_the_training_file(trained, tmp_path):
    run_dir, data, parts = trained
    with moved_away(data, tmp_path / "elsewhere.h5") as moved:
        expected = pd.read_csv(run_dir / "assignments.csv", float_precision="round_trip")
        fitted = bnpvi.load(run_dir)
        np.testing.assert_array_equal(fitted.predict(parts["X"]), expected.loc[expected["heldout"] == 0, "cluster"])
        proc = apply_cli(run_dir, moved, tmp_path / "out.h5")
        assert proc.returncode == 0, proc.stderr
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out.csv", float_precision="round_trip"), expected)


def test_a_file_of_another_dimension_or_kind_fails_on_one_line_and_writes_nothing(trained, tmp_path):
    run_dir = trained[0]
    write_points(tmp_path / "wide.h5", np.zeros((5, 3)))
    write_sequences(tmp_path / "seqs.h5", np.zeros((6, 2)), np.array([0, 3, 6]))
    for data, fragment in ((tmp_path / "wide.h5", "D=3"), (tmp_path / "seqs.h5", "holds seq data")):
        assert_one_line_error(apply_cli(run_dir, data, tmp_path / "out.h5"), fragment)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["seqs.h5", "wide.h5"]  # no output, no temporary


def test_a_run_directory_without_a_model_fails_on_one_line(tmp_path):
    with pytest.raises(bnpvi.BnpviError, match="model.h5 not found"):
        bnpvi.load(tmp_path)
