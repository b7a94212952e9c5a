"""Whole runs of the discrete families: bag-of-words (mult) and binary vectors (bern), with moves."""
import numpy as np
import pandas as pd
import pytest

from bnpvi.data.convert import convert
from bnpvi.data.store import write_documents, write_points
from bnpvi.learn import runner
from setups import block_corpus


@pytest.fixture
def train(tmp_path, compose_cfg):
    def run(*overrides):
        out = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
        return runner.train(compose_cfg(*overrides), out), out
    return run


def test_mult_from_one_cluster_finds_the_topics(tmp_path, train):
    ids, counts, doc_range, V, labels = block_corpus()
    write_documents(tmp_path / "docs.h5", ids, counts, doc_range, V, n_batches=3, labels=labels)
    summary, out = train("obs=mult", "data=hdf5", f"data.path={tmp_path / 'docs.h5'}", "init.K=1",
                         "moves=[birth,merge,delete]")
    assert summary["K"] == 4
    assert summary["ari"] > 0.95
    trace = pd.read_csv(out / "trace.csv")
    settled = trace["elbo"][trace["prior_lam"] == 0.1].to_numpy()  # after the annealed prior's laps
    assert settled.size >= 2 and np.all(np.diff(settled) >= -1e-9 * np.abs(settled[1:]))


def test_bern_from_one_cluster_finds_the_clusters(tmp_path, train):
    rng = np.random.default_rng(1)
    protos = rng.random((3, 25)) < 0.5
    labels = rng.integers(0, 3, 900)
    flips = rng.random((900, 25)) < 0.05
    X = (protos[labels] ^ flips).astype(np.float64)
    write_points(tmp_path / "bits.h5", X, n_batches=3, labels=labels)
    summary, _ = train("obs=bern", "data=hdf5", f"data.path={tmp_path / 'bits.h5'}", "init.K=1",
                       "moves=[birth,merge,delete]")
    assert summary["K"] == 3
    assert summary["ari"] > 0.95


@pytest.mark.shared_data
def test_bars_corpus_topics(tmp_path, train, shared_data):
    src = shared_data / "bars_one_per_doc" / "dataset.npz"
    convert(src, tmp_path / "bars.h5", n_batches=4, shuffle_seed=0)
    summary, _ = train("obs=mult", "data=hdf5", f"data.path={tmp_path / 'bars.h5'}", "init.K=1",
                       "moves=[birth,merge,delete]")
    counts = np.asarray(summary["counts"])
    assert int(np.sum(counts > 0.01 * counts.sum())) == 6
