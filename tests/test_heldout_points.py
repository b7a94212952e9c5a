"""Held-out points: `bnpvi-data convert --heldout F` for point files, and the per-point score of mixtures.

The score of a held-out point is ln Σ_k exp(E ln π_k + E ln p(x | φ_k)), the optimum of its own
dense local step (Hughes 2016 thesis Eq. 3.46), averaged over the held-out points.
"""
import json

import h5py
import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from bnpvi.data.batch import PointBatch
from bnpvi.data.convert import convert
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.learn.heldout import points_loglik


@pytest.fixture
def points_file(tmp_path):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, size=600)
    X = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])[labels] + rng.normal(size=(600, 2))
    np.savez(tmp_path / "p.npz", X=X, y=labels)
    path = convert(tmp_path / "p.npz", tmp_path / "p.h5", n_batches=3, labels="y", heldout=0.1, heldout_seed=5)
    return path, X, labels


def test_convert_holds_out_a_seeded_fraction_of_the_points(points_file):
    path, X, labels = points_file
    with BatchStore.open(path) as store:
        assert (store.n_heldout, store.n_atoms, store.n_batches) == (60, 540, 3)
        assert store.info()["heldout"] == 60 and store.info()["heldout_seed"] == 5
        train = np.concatenate([store.read_batch(b).X for b in range(store.n_batches)])
        held = store.read_heldout().X
        np.testing.assert_array_equal(store.read_heldout(10, 20).X, held[10:20])
    with h5py.File(path) as f:
        index, train_index = f["heldout/index"][()], f["heldout/train_index"][()]
        np.testing.assert_array_equal(f["heldout/labels"][()], labels[index])
    assert np.array_equal(np.sort(np.concatenate([index, train_index])), np.arange(600))
    np.testing.assert_array_equal(held, X[index])
    np.testing.assert_array_equal(train, X[train_index])


def test_sequences_are_held_out_whole(tmp_path):
    """--heldout on sequences keeps whole sequences apart, with the source index of every one."""
    lengths = np.arange(3, 13)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    X = np.arange(2.0 * bounds[-1]).reshape(-1, 2)
    np.savez(tmp_path / "s.npz", X=X, seq_range=bounds)
    path = convert(tmp_path / "s.npz", tmp_path / "s.h5", sequences="seq_range", heldout=0.3, heldout_seed=1)
    with BatchStore.open(path) as store:
        check_held_out_sequences(store, X, bounds, path)


def check_held_out_sequences(store, X, bounds, path):
    assert store.n_heldout == 3 and store.n_seqs == 7 and store.info()["heldout_fraction"] == 0.3
    with h5py.File(path) as f:
        index, train_index = f["heldout/index"][()], f["heldout/train_index"][()]
    assert np.array_equal(np.sort(np.concatenate([index, train_index])), np.arange(10))
    held = store.read_heldout()
    for s, source in enumerate(index):
        np.testing.assert_array_equal(held.X[held.seq_range[s]:held.seq_range[s + 1]],
                                      X[bounds[source]:bounds[source + 1]])
    train = np.vstack([store.read_batch(b).X for b in range(store.n_batches)])
    np.testing.assert_array_equal(train, np.vstack([X[bounds[s]:bounds[s + 1]] for s in train_index]))


@pytest.mark.parametrize("sparse", [[], ["alg.sparse_L=1"]], ids=["dense", "L=1"])
def test_a_mixture_run_scores_its_heldout_points_densely(compose_cfg, tmp_path, points_file, sparse):
    """Every lap's score is that of its globals; with an L-sparse local step the score is still the dense one."""
    path = points_file[0]
    cfg = compose_cfg("data=hdf5", f"data.path={path}", "alg=vb", "init.K=5", "alg.n_laps=6",
                      "alg.converge_thr=-1", *sparse)
    (tmp_path / "run").mkdir()
    run = runner.Run(cfg, tmp_path / "run")
    try:
        run.train()
        model, globals_ = run.model, run.alg.globals
        with BatchStore.open(path) as store:
            direct = points_loglik(model, globals_, store, block=7)
            X = store.read_heldout().X
        weights = model.obs.expected_log_lik(globals_.obs, PointBatch(X)) + model.alloc.expected_log_pi(globals_.alloc)
    finally:
        run.close()
    brute = float(np.mean(logsumexp(weights, axis=1)))
    assert direct["n_points"] == 60 and direct["loglik_per_point"] == pytest.approx(brute, rel=1e-12)
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert trace["heldout_loglik"].notna().all() and trace["heldout_loglik"].iloc[-1] == direct["loglik_per_point"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["heldout_points"] == 60 and summary["heldout_loglik"] == direct["loglik_per_point"]
