"""Applying a trained HMM: bnpvi.load's Viterbi paths, marginals and score, and bnpvi-apply on sequence files
(bnpvi/api/fitted_hmm.py, bnpvi/cli/apply.py)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import bnpvi
from bnpvi.data.convert import convert
from bnpvi.data.store import write_points, write_sequences
from bnpvi.data.toy import make_toy_ar_sequences, make_toy_sequences
from bnpvi.io.model_file import read_model
from bnpvi.learn import runner
from setups import apply_cli, assert_one_line_error, assert_reproduces, compose, moved_away, one_line_error, read_h5

N_SEQS, LENGTH = 8, 150


def train_on_npz(tmp, X, seq_range, labels, *overrides):
    """Convert sequences from an NPZ (3 batches) and train on them; the run directory, the file, the sequences."""
    np.savez(tmp / "seqs.npz", X=X, doc_range=seq_range, TrueZ=labels)
    data = convert(tmp / "seqs.npz", tmp / "seqs.h5", n_batches=3, sequences="doc_range", labels="TrueZ")
    runner.train(compose("data=hdf5", f"data.path={data}", *overrides), tmp / "run")
    return tmp / "run", data, np.split(X, seq_range[1:-1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A sticky HDP-HMM grown from one state by births on the toy sequences (with their true states)."""
    X, seq_range, labels = make_toy_sequences(N_SEQS, LENGTH, seed=2)
    return train_on_npz(tmp_path_factory.mktemp("apply_hmm"), X, seq_range, labels, "model=hdp_hmm", "alg.n_laps=6")


def per_sequence(table: pd.DataFrame) -> list[np.ndarray]:
    return [group["state"].to_numpy() for _, group in table.groupby("sequence", sort=True)]


def test_load_reproduces_the_runs_segmentation(trained):
    run_dir, _, seqs = trained
    fitted = bnpvi.load(run_dir)
    assert type(fitted).__name__ == "FittedHMM"
    seg, table = read_h5(run_dir / "segmentation.h5"), pd.read_csv(run_dir / "segmentation.csv", float_precision="round_trip")
    uids = seg["uids"]
    assert not np.array_equal(uids, np.arange(uids.shape[0])), "ids equal positions: the test cannot tell"
    np.testing.assert_array_equal(fitted.cluster_ids_, uids)
    paths = fitted.predict(seqs)
    assert [p.shape[0] for p in paths] == [LENGTH] * N_SEQS
    for ours, runs in zip(paths, per_sequence(table)):
        np.testing.assert_array_equal(ours, runs)
    np.testing.assert_array_equal(np.concatenate(paths), uids[seg["viterbi"]])
    marginals = fitted.predict_proba(seqs)
    assert all(m.shape == (LENGTH, fitted.n_components_) for m in marginals)
    np.testing.assert_allclose(np.concatenate(marginals).sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(np.concatenate(marginals).argmax(axis=1), seg["marginal_map"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert fitted.n_components_ == summary["K"] and fitted.elbo_ == summary["elbo"]
    model = read_model(run_dir / "model.h5")
    np.testing.assert_array_equal(fitted.transmat_, model["trans_probs"][:, :fitted.n_components_])
    np.testing.assert_array_equal(fitted.startprob_, model["start_probs"][:fitted.n_components_])
    assert np.isfinite(fitted.score(seqs)) and fitted.score(seqs) > fitted.score([s + 5.0 for s in seqs])


@pytest.mark.parametrize("seqs, problem", [(np.zeros((5, 2)), "list of"), ([], "no sequence"),
                                           ([np.zeros((4, 2)), np.zeros((3, 3))], "sequence 1 has D=3"),
                                           ([np.array([[0.0, np.nan]])], "NaN")])
def test_predict_rejects_bad_sequences_on_one_line(trained, seqs, problem):
    fitted = bnpvi.load(trained[0])
    with one_line_error(problem):
        fitted.predict(seqs)


def test_bnpvi_apply_reproduces_the_runs_segmentation(trained, tmp_path):
    run_dir, data, _ = trained
    summary = json.loads((run_dir / "summary.json").read_text())
    proc = apply_cli(run_dir, data, tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    assert_reproduces(tmp_path / "out.h5", run_dir / "segmentation.h5")
    assert f"hamming {summary['hamming']:.6f}" in proc.stdout


def test_load_and_apply_work_without_the_training_file(trained, tmp_path):
    run_dir, data, seqs = trained
    with moved_away(data, tmp_path / "elsewhere.h5") as moved:
        expected = pd.read_csv(run_dir / "segmentation.csv", float_precision="round_trip")
        np.testing.assert_array_equal(np.concatenate(bnpvi.load(run_dir).predict(seqs)), expected["state"])
        proc = apply_cli(run_dir, moved, tmp_path / "out.h5")
        assert proc.returncode == 0, proc.stderr
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out.csv", float_precision="round_trip"), expected)


def test_a_file_of_another_dimension_or_kind_fails_on_one_line_and_writes_nothing(trained, tmp_path):
    run_dir = trained[0]
    write_sequences(tmp_path / "wide.h5", np.zeros((6, 3)), np.array([0, 3, 6]))
    write_points(tmp_path / "points.h5", np.zeros((5, 2)))
    for name, fragment in (("wide.h5", "D=3"), ("points.h5", "holds points data")):
        assert_one_line_error(apply_cli(run_dir, tmp_path / name, tmp_path / "out.h5"), fragment)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["points.h5", "wide.h5"]  # no output, no temporary


def test_an_autoregressive_model_segments_every_step_but_the_first(tmp_path):
    """obs=ar_gauss on a file without Xprev: the run reads it lagged, and so do load and bnpvi-apply."""
    X, seq_range, labels, _ = make_toy_ar_sequences(4, 60, seed=1)
    run_dir, data, seqs = train_on_npz(tmp_path, X, seq_range, labels, "model=finite_hmm", "obs=ar_gauss",
                                       "init.K=4", "alg.n_laps=3")
    table = pd.read_csv(run_dir / "segmentation.csv", float_precision="round_trip")
    paths = bnpvi.load(run_dir).predict(seqs)
    assert [p.shape[0] for p in paths] == [59] * 4
    for ours, runs in zip(paths, per_sequence(table)):
        np.testing.assert_array_equal(ours, runs)
    with pytest.raises(bnpvi.BnpviError, match="sequence 1 has 1 step"):
        bnpvi.load(run_dir).predict([X[:5], X[:1]])
    proc = apply_cli(run_dir, data, tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.csv").read_text() == (run_dir / "segmentation.csv").read_text()
