"""Segmentations out of a run on sequence data, and their evaluation (bnpvi/io/segmentation.py).

Viterbi and marginal-MAP state paths, the expected transition matrix, the plot, and the
aligned Hamming distance (Hughes 2016 thesis §6.6; Stephenson 2015 §7.1).
"""
from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from bnpvi.data.store import write_sequences
from bnpvi.data.toy import sample_hmm
from bnpvi.errors import BnpviError
from bnpvi.io.checkpoint import load_checkpoint
from bnpvi.io.model_file import read_model
from bnpvi.io.segmentation import (MAX_PLOTTED, Segmentation, _bars, colour_codes, plot_segmentation, plot_title,
                                   write_segmentation_csv, write_transitions)
from bnpvi.learn import runner
from setups import compose

# 240 time steps of a 3-state HMM whose states overlap (so Viterbi and marginal-MAP paths
# differ), cut into 11 sequences, three of length 1
LENGTHS = [30, 1, 29, 1, 1, 28, 30, 30, 30, 30, 30]
K = 3
N_LAPS, EVAL_EVERY = 4, 2


def train_on(tmp_path, labelled: bool):
    trans = 0.8 * np.eye(K) + 0.1 * (1.0 - np.eye(K))
    means = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    X, _, labels = sample_hmm(8, 30, np.ones(K) / K, trans, means, np.tile(np.eye(2), (K, 1, 1)),
                              np.random.default_rng(0))
    seq_range = np.concatenate([[0], np.cumsum(LENGTHS)])
    path = tmp_path / "seqs.h5"
    write_sequences(path, X, seq_range, n_batches=3, labels=labels if labelled else None)
    cfg = compose("model=finite_hmm", f"init.K={K}", "data=hdf5", f"data.path={path}", f"alg.n_laps={N_LAPS}",
                  "alg.converge_thr=-1", f"eval_every={EVAL_EVERY}", "plots=true")
    run_dir = tmp_path / "run"
    runner.train(cfg, run_dir)
    return run_dir, cfg, seq_range, labels


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    return train_on(tmp_path_factory.mktemp("labelled"), labelled=True)


@pytest.fixture(scope="module")
def unlabelled(tmp_path_factory):
    return train_on(tmp_path_factory.mktemp("unlabelled"), labelled=False)


def read_h5(path):
    with h5py.File(path, "r") as f:
        return {key: f[key][()] for key in f}


# ------------------------------------------------------------------ a run's files
def test_segmentation_h5_has_every_path(labelled):
    run_dir, _, seq_range, labels = labelled
    seg = read_h5(run_dir / "segmentation.h5")
    T = int(seq_range[-1])
    assert set(seg) == {"viterbi", "marginal_map", "seq_range", "labels", "uids"}
    for key in ("viterbi", "marginal_map"):
        assert seg[key].shape == (T,) and seg[key].dtype == np.int64
        assert seg[key].min() >= 0 and seg[key].max() < K
    assert np.any(seg["viterbi"] != seg["marginal_map"]), "the paths must differ for the tests to tell them apart"
    np.testing.assert_array_equal(seg["seq_range"], seq_range)
    np.testing.assert_array_equal(seg["labels"], labels)
    # states are the final model's positions: the order of model.h5 and of the last lap in clusters.csv
    model = read_model(run_dir / "model.h5")
    np.testing.assert_array_equal(seg["uids"], model["uids"])
    clusters = pd.read_csv(run_dir / "clusters.csv")
    np.testing.assert_array_equal(clusters.loc[clusters["lap"] == N_LAPS, "uid"], model["uids"])


def test_paths_equal_the_models_decode_and_marginals_batch_by_batch(labelled):
    run_dir, cfg, _, _ = labelled
    seg = read_h5(run_dir / "segmentation.h5")
    saved = runner.Run(cfg, run_dir, load_checkpoint(run_dir))
    try:
        model, globals_ = saved.model, saved.alg.globals
        for b in range(saved.store.n_batches):
            batch = saved.store.read_batch(b)
            rows = slice(batch.start, batch.start + batch.n_atoms)
            np.testing.assert_array_equal(seg["viterbi"][rows], model.decode(batch, globals_))
            _, local = model.local_step(batch, globals_)
            np.testing.assert_array_equal(seg["marginal_map"][rows], np.argmax(local.resp.values, axis=1))
    finally:
        saved.close()


def test_csv_rows_equal_the_h5(labelled):
    run_dir, _, seq_range, _ = labelled
    seg = read_h5(run_dir / "segmentation.h5")
    table = pd.read_csv(run_dir / "segmentation.csv")
    assert list(table.columns) == ["sequence", "t", "state"]
    assert len(table) == seq_range[-1]
    np.testing.assert_array_equal(table["state"], seg["uids"][seg["viterbi"]])  # stable ids, as clusters.csv
    for d, (t0, t1) in enumerate(zip(seq_range[:-1], seq_range[1:])):
        rows = table.iloc[t0:t1]
        assert (rows["sequence"] == d).all()
        np.testing.assert_array_equal(rows["t"], np.arange(t1 - t0))
    assert table.groupby("sequence").size().tolist() == LENGTHS  # length-1 sequences have one row, t = 0


def test_transitions_csv_is_the_models_expected_transition_matrix(labelled):
    run_dir = labelled[0]
    table = pd.read_csv(run_dir / "transitions.csv", index_col="from", float_precision="round_trip")
    model = read_model(run_dir / "model.h5")
    assert table.index.tolist() == ["start", *map(str, model["uids"])]
    assert table.columns.tolist() == [str(u) for u in model["uids"]]
    np.testing.assert_allclose(table.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(table.loc["start"], model["start_probs"])
    np.testing.assert_array_equal(table.iloc[1:], model["trans_probs"])


def test_png_is_a_valid_image(labelled):
    image = imread(labelled[0] / "segmentation.png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image[..., :3].std() > 0.05  # not blank


def test_summary_and_trace_hold_every_hamming_distance_and_the_states(labelled):
    from bnpvi.metrics import hamming_distance, hamming_many_to_one

    run_dir, _, _, labels = labelled
    seg = read_h5(run_dir / "segmentation.h5")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["hamming"] == hamming_distance(labels, seg["viterbi"])
    assert summary["hamming_many_to_one"] == hamming_many_to_one(labels, seg["viterbi"])
    assert summary["hamming_marginal_map"] == hamming_distance(labels, seg["marginal_map"])
    assert summary["states_used"] == np.unique(seg["viterbi"]).size and summary["true_states"] == K
    trace = pd.read_csv(run_dir / "trace.csv")
    due = trace["lap"] % EVAL_EVERY == 0
    for column in ("hamming", "hamming_many_to_one", "states_used"):
        assert trace.loc[~due, column].isna().all() and trace.loc[due, column].notna().all()
        assert trace[column].iloc[-1] == pytest.approx(summary[column])


def test_the_last_line_shows_both_distances_and_the_states(tmp_path, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="bnpvi"):
        run_dir, *_ = train_on(tmp_path, labelled=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    (done,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("done:")]
    assert (f"hamming {summary['hamming']:.4f}  many-to-one {summary['hamming_many_to_one']:.4f}  "
            f"({summary['states_used']} states for {K} true)") in done
    laps = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"lap {EVAL_EVERY:4d}")]
    assert "many-to-one" in laps[0]


def test_data_without_labels(unlabelled):
    run_dir, _, seq_range, _ = unlabelled
    seg = read_h5(run_dir / "segmentation.h5")
    assert "labels" not in seg and seg["viterbi"].shape == (seq_range[-1],)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert not {"hamming", "hamming_many_to_one", "states_used", "hamming_marginal_map"} & set(summary)
    assert not {"hamming", "hamming_many_to_one"} & set(pd.read_csv(run_dir / "trace.csv").columns)
    assert imread(run_dir / "segmentation.png").ndim == 3


# ------------------------------------------------------------------ the writers
def test_transitions_of_a_nonparametric_model_get_an_other_column(tmp_path):
    rng = np.random.default_rng(0)
    trans, start = rng.dirichlet(np.ones(4), size=3), rng.dirichlet(np.ones(4))  # K = 3, one column beyond
    write_transitions(tmp_path / "t.csv", start, trans, [7, 2, 5])
    table = pd.read_csv(tmp_path / "t.csv", index_col="from", float_precision="round_trip")
    assert table.columns.tolist() == ["7", "2", "5", "other"]  # states by their stable ids
    assert table.index.tolist() == ["start", "7", "2", "5"]
    np.testing.assert_allclose(table.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(table.iloc[1:], trans)
    with pytest.raises(BnpviError, match=r"do not describe 3 states"):
        write_transitions(tmp_path / "bad.csv", start[:3], trans, [7, 2, 5])
    with pytest.raises(BnpviError, match=r"do not describe 3 states"):
        write_transitions(tmp_path / "bad.csv", start, trans, [7, 2])


def test_segmentation_csv_names_states_by_their_stable_ids(tmp_path):
    seg = Segmentation(viterbi=np.array([0, 2, 2, 1, 0]), marginal_map=np.zeros(5, dtype=np.int64),
                       seq_range=np.array([0, 3, 5]))
    write_segmentation_csv(tmp_path / "s.csv", seg, np.array([4, 9, 6]))
    table = pd.read_csv(tmp_path / "s.csv")
    assert table["state"].tolist() == [4, 6, 6, 9, 4]
    assert table["sequence"].tolist() == [0, 0, 0, 1, 1] and table["t"].tolist() == [0, 1, 2, 0, 1]


def test_colours_follow_the_alignment():
    # estimated 1 ~ true 0, 0 ~ true 1; as many states as true ones: one-to-one
    seg = Segmentation(viterbi=np.array([1, 1, 0, 0, 0, 1]), marginal_map=np.zeros(6, dtype=np.int64),
                       seq_range=np.array([0, 6]), labels=np.array([0, 0, 1, 1, -1, 0]))
    colouring = colour_codes(seg, uids=[7, 4], label_names=["walk", "run"])
    assert colouring.n_colours == 2 and not colouring.many_to_one
    np.testing.assert_array_equal(colouring.true, [0, 0, 1, 1, -1, 0])
    np.testing.assert_array_equal(colouring.estimated, [0, 0, 1, 1, 1, 0])
    assert colouring.names == ["walk: state 4", "run: state 7"]  # positions 1, 0 have the ids 4, 7
    colouring = colour_codes(Segmentation(seg.viterbi, seg.marginal_map, seg.seq_range), uids=[7, 4])
    assert colouring.true is None and colouring.names == ["state 7", "state 4"]
    np.testing.assert_array_equal(colouring.estimated, seg.viterbi)


def test_more_states_than_true_ones_are_coloured_many_to_one_with_a_legend():
    """The issue's case in small: two true states split into pure states, one of them split in three. Old code
    coloured the extra states as unmatched, so the estimated bar looked wrong where it was right."""
    labels = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    viterbi = np.array([0, 0, 2, 2, 3, 3, 1, 1, 1, 4])  # 0, 2, 3 inside true 0; 1 and 4 inside true 1
    seg = Segmentation(viterbi, viterbi, np.array([0, 10]), labels)
    colouring = colour_codes(seg, uids=[10, 11, 12, 13, 14], label_names=["rest", "walk"])
    assert colouring.many_to_one and colouring.n_colours == 2
    np.testing.assert_array_equal(colouring.estimated, labels)  # every step in its true state's colour
    assert colouring.names == ["rest: states 10, 12, 13", "walk: states 11, 14"]
    assert plot_title(seg, 1, colouring).startswith("Viterbi states: 5 states for 2 true ones")
    # a state that meets only unscored steps gets a colour of its own
    seg = Segmentation(viterbi, viterbi, np.array([0, 10]), np.where(viterbi == 4, -1, labels))
    colouring = colour_codes(seg, uids=[10, 11, 12, 13, 14])
    assert colouring.names == ["0: states 10, 12, 13", "1: state 11", "state 14 (no true state)"]
    assert colouring.estimated[-1] == 2


def test_plot_draws_at_most_the_first_sequences_and_says_so(tmp_path):
    n_seqs = MAX_PLOTTED + 5
    seq_range = np.arange(n_seqs + 1) * 3
    states = np.repeat(np.arange(n_seqs) % 4, 3)
    seg = Segmentation(states, states, seq_range, labels=states)
    colouring = colour_codes(seg)
    image, stride = _bars(seg, [colouring.true, colouring.estimated], MAX_PLOTTED)
    assert image.shape == (3 * MAX_PLOTTED, 3) and stride == 1  # true, estimated, blank per sequence
    assert plot_title(seg, MAX_PLOTTED, colouring).endswith(f"first {MAX_PLOTTED} of {n_seqs} sequences")
    assert "first" not in plot_title(seg, n_seqs, colouring)
    plot_segmentation(tmp_path / "s.png", seg)
    assert imread(tmp_path / "s.png").ndim == 3


# ------------------------------------------------------------------ evaluation
@pytest.mark.parametrize("true, est, expect", [
    ([0, 0, 1, 1], [0, 0, 1, 1], 0.0),
    ([0, 0, 1, 1], [0, 0, 1, 2], 0.25),  # an extra estimated state counts as an error
    ([0, 0, 1, 1], [1, 1, 0, 0], 0.0),
    ([-1, -1, 0, 1], [1, 2, 0, 1], 0.0),  # unlabelled steps take no part
])
def test_scores_of_the_worked_examples_under_any_relabelling(true, est, expect):
    est = np.array(est)
    relabelled = np.array([7, 3, 9, 4])[est]
    seg = Segmentation(est, relabelled, np.array([0, 4]), np.array(true))
    scores = seg.scores()
    assert scores["hamming"] == scores["hamming_marginal_map"] == expect
    assert scores["states_used"] == np.unique(est).size and scores["true_states"] == len(set(true) - {-1})
    assert Segmentation(est, relabelled, np.array([0, 4])).scores() == {}


def test_each_path_is_scored_on_its_own():
    seg = Segmentation(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2]), np.array([0, 4]), np.array([0, 0, 1, 1]))
    assert seg.scores() == {"hamming": 0.0, "hamming_many_to_one": 0.0, "states_used": 2, "true_states": 2,
                            "hamming_marginal_map": 0.25}


def test_many_to_one_scores_split_states_as_right():
    seg = Segmentation(np.array([0, 1, 2, 3]), np.zeros(4, dtype=np.int64), np.array([0, 4]), np.array([0, 0, 1, 1]))
    scores = seg.scores()
    assert scores["hamming"] == 0.5 and scores["hamming_many_to_one"] == 0.0
    assert (scores["states_used"], scores["true_states"]) == (4, 2)


def test_the_report_shows_both_distances_and_the_states(labelled, tmp_path, capsys):
    from bnpvi.cli.report import main

    run_dir = labelled[0]
    assert main([str(run_dir), "--out", str(tmp_path)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    row = pd.read_csv(tmp_path / "report.csv", float_precision="round_trip").iloc[0]
    for column in ("hamming", "hamming_many_to_one", "states_used", "hamming_marginal_map"):
        assert row[column] == summary[column], column
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header.index("hamming") < header.index("hamming_many_to_one") < header.index("states_used")
