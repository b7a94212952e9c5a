"""Applying a trained topic model: bnpvi.load's transform, topics and score, and bnpvi-apply on bag-of-words
files (bnpvi/api/fitted_topics.py, bnpvi/cli/apply.py)."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import bnpvi
from bnpvi.data.bars import make_bars
from bnpvi.data.convert import convert
from bnpvi.data.store import write_documents, write_points, write_sequences
from bnpvi.data.toy import make_toy_sequences
from bnpvi.io.model_file import read_model
from bnpvi.learn import runner
from setups import apply_cli, assert_one_line_error, compose, moved_away, one_line_error, read_h5

N_DOCS, HELDOUT = 330, 0.1
V = 100


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An HDP topic model grown by births from K = 1 on a bars corpus with a vocabulary, 10 % held out."""
    tmp = tmp_path_factory.mktemp("apply_topics")
    docs = make_bars(N_DOCS, seed=3)[0].csr()
    sp.save_npz(tmp / "docs.npz", docs)
    vocab = [f"w{v:03d}" for v in range(V)]
    data = convert(tmp / "docs.npz", tmp / "docs.h5", n_batches=3, heldout=HELDOUT, vocab=vocab)
    run_dir = tmp / "run"
    runner.train(compose("model=hdp_topic", "data=hdf5", f"data.path={data}", "alg.n_laps=6"), run_dir)
    with h5py.File(data, "r") as f:
        train_docs = sp.csr_matrix((f["word_counts"][()], f["word_ids"][()], f["doc_range"][()]),
                                   shape=(f.attrs["N"], V))
        held = f["heldout"]
        held_docs = sp.csr_matrix((held["word_counts"][()], held["word_ids"][()], held["doc_range"][()]),
                                  shape=(held["doc_range"].shape[0] - 1, V))
    return run_dir, data, train_docs, held_docs, vocab


def test_load_reproduces_the_runs_doc_topics_and_heldout_score(trained):
    run_dir, _, train_docs, held_docs, vocab = trained
    fitted = bnpvi.load(run_dir)
    assert type(fitted).__name__ == "FittedTopicModel"
    summary = json.loads((run_dir / "summary.json").read_text())
    doc_topics = read_h5(run_dir / "doc_topics.h5")
    uids = doc_topics["uids"]
    assert not np.array_equal(uids, np.arange(uids.shape[0])), "ids equal positions: the test cannot tell"
    np.testing.assert_array_equal(fitted.cluster_ids_, uids)
    assert fitted.n_components_ == summary["K"] and fitted.elbo_ == summary["elbo"]
    np.testing.assert_array_equal(fitted.transform(train_docs), doc_topics["proportions"])
    np.testing.assert_array_equal(fitted.transform(train_docs.toarray()), doc_topics["proportions"])  # dense too
    assert fitted.score(held_docs) == pytest.approx(summary["heldout_loglik"], rel=1e-12)
    lam = read_model(run_dir / "model.h5")["posterior"]["lam"]
    np.testing.assert_allclose(fitted.topics_, lam / lam.sum(axis=1, keepdims=True), rtol=1e-15)
    assert fitted.vocabulary_ == vocab
    words = fitted.top_words(3)
    assert len(words) == fitted.n_components_ and all(len(row) == 3 for row in words)
    top = np.argsort(-fitted.topics_, axis=1, kind="stable")[:, 0]
    assert [row[0] for row in words] == [vocab[v] for v in top]
    topics_csv = pd.read_csv(run_dir / "topics.csv", float_precision="round_trip")
    first = topics_csv[topics_csv["rank"] == 1].set_index("topic")["word"]
    assert [first[u] for u in fitted.cluster_ids_] == [row[0] for row in words]


def test_transform_of_an_empty_document_is_the_prior(trained):
    fitted = bnpvi.load(trained[0])
    weights = fitted.transform(sp.csr_matrix((2, V)))
    np.testing.assert_array_equal(weights[0], weights[1])
    assert np.all(weights > 0) and weights.sum() < 2.0


@pytest.mark.parametrize("docs, problem", [
    (sp.csr_matrix((2, V + 1)), "V=101 columns"), (np.zeros(V), "count matrix"),
    (sp.csr_matrix(np.full((1, V), -1.0)), "count of -1.0"), (sp.csr_matrix(np.full((1, V), 0.5)), "count of 0.5"),
    (np.array([["a"] * V]), "count matrix")])
def test_transform_rejects_bad_documents_on_one_line(trained, docs, problem):
    fitted = bnpvi.load(trained[0])
    with one_line_error(problem):
        fitted.transform(docs)


def test_bnpvi_apply_reproduces_doc_topics_and_the_heldout_score(trained, tmp_path):
    run_dir, data, _, held_docs, _ = trained
    summary = json.loads((run_dir / "summary.json").read_text())
    proc = apply_cli(run_dir, data, tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    out, doc_topics = read_h5(tmp_path / "out.h5"), read_h5(run_dir / "doc_topics.h5")
    training = out["heldout"] == 0
    np.testing.assert_array_equal(out["proportions"][training], doc_topics["proportions"])
    np.testing.assert_array_equal(out["uids"], doc_topics["uids"])
    with h5py.File(data, "r") as f:
        np.testing.assert_array_equal(out["index"][training], f["heldout/train_doc_index"][()])
        np.testing.assert_array_equal(out["index"][~training], f["heldout/doc_index"][()])
    np.testing.assert_array_equal(out["proportions"][~training], bnpvi.load(run_dir).transform(held_docs))
    table = pd.read_csv(tmp_path / "out.csv", float_precision="round_trip")
    assert list(table.columns) == ["index", *map(str, doc_topics["uids"]), "heldout"]
    np.testing.assert_array_equal(table.iloc[:, 1:-1].to_numpy(), out["proportions"])  # %.17g: exact
    np.testing.assert_array_equal(table["heldout"], out["heldout"])
    assert f"heldout_loglik {summary['heldout_loglik']:.6f} nats per token" in proc.stdout


def test_load_and_apply_work_without_the_training_file(trained, tmp_path):
    run_dir, data, train_docs, _, _ = trained
    with moved_away(data, tmp_path / "elsewhere.h5") as moved:
        expected = read_h5(run_dir / "doc_topics.h5")["proportions"]
        np.testing.assert_array_equal(bnpvi.load(run_dir).transform(train_docs), expected)
        proc = apply_cli(run_dir, moved, tmp_path / "out.h5")
        assert proc.returncode == 0, proc.stderr
        out = read_h5(tmp_path / "out.h5")
        np.testing.assert_array_equal(out["proportions"][out["heldout"] == 0], expected)


def test_a_file_of_another_vocabulary_or_kind_fails_on_one_line_and_writes_nothing(trained, tmp_path):
    run_dir, _, train_docs, _, vocab = trained
    ids, counts, dr = train_docs.indices, train_docs.data, train_docs.indptr
    write_documents(tmp_path / "wide.h5", ids, counts, dr, V + 5)
    write_documents(tmp_path / "words.h5", ids, counts, dr, V, vocab=vocab[:-1] + ["other"])
    write_points(tmp_path / "points.h5", np.zeros((5, V)))
    inputs = sorted(p.name for p in tmp_path.iterdir())
    for name, fragment in (("wide.h5", "V=105"), ("words.h5", "another vocabulary than the model (word id 99"),
                           ("points.h5", "holds points data")):
        assert_one_line_error(apply_cli(run_dir, tmp_path / name, tmp_path / "out.h5"), fragment)
        assert sorted(p.name for p in tmp_path.iterdir()) == inputs  # no output, no temporary


def test_a_topic_model_of_grouped_vectors_weighs_every_sequence(tmp_path):
    """Documents of vectors (a sequence file, obs=zm_gauss): bnpvi-apply names each document by its sequence."""
    X, seq_range, _ = make_toy_sequences(9, 40, seed=1)
    data = write_sequences(tmp_path / "groups.h5", X, seq_range, n_batches=3)
    run_dir = tmp_path / "run"
    runner.train(compose("model=hdp_topic", "obs=zm_gauss", "init.K=3", "moves=[]", "alg.n_laps=2", "data=hdf5",
                         f"data.path={data}"), run_dir)
    fitted = bnpvi.load(run_dir)
    assert fitted.topics_ is None
    with one_line_error("transform takes groups of vectors"):
        fitted.transform(sp.csr_matrix((1, 2)))
    proc = apply_cli(run_dir, data, tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    out = read_h5(tmp_path / "out.h5")
    np.testing.assert_array_equal(out["index"], np.arange(9))
    np.testing.assert_array_equal(out["proportions"], read_h5(run_dir / "doc_topics.h5")["proportions"])
