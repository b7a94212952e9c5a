"""Topic-model runs through the runner: vb, memo and sovb, their outputs, memo with one batch equals vb."""
import h5py
import numpy as np
import pandas as pd
import pytest

from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError
from bnpvi.learn import runner

from test_topic import corpus


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """300 short documents from 3 topics over 30 words, stored in one batch and in three."""
    from bnpvi.data.bow import write_documents
    from bnpvi.data.batch import WordCountBatch

    parts = [corpus(seed=s, n_docs=100) for s in range(3)]
    whole = WordCountBatch.concat(parts)
    paths = {}
    for n_batches in (1, 3):
        path = tmp_path_factory.mktemp("bow") / f"docs{n_batches}.h5"
        write_documents(path, whole.word_ids, whole.word_counts, whole.doc_range, whole.vocab_size,
                        n_batches=n_batches, batches_fixed=False)
        paths[n_batches] = path
    return paths


@pytest.mark.parametrize("alg", ["vb", "memo", "sovb"])
@pytest.mark.parametrize("model", ["hdp_topic", "lda"])
def test_runs_write_topics_and_document_proportions(compose_cfg, tmp_path, documents, alg, model):
    cfg = compose_cfg(f"model={model}", "obs=mult", "data=hdf5", f"data.path={documents[3]}", f"alg={alg}",
                      "init.K=4", "alg.n_laps=8", "alg.converge_thr=-1", "moves=[]")
    summary = runner.train(cfg, tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert np.all(np.isfinite(trace["elbo"])) and summary["K"] == 4
    if alg != "sovb":  # full and memoized VB: the whole-data bound, which rises here lap after lap
        assert np.all(np.diff(trace["elbo"]) > -1e-9 * np.abs(trace["elbo"].iloc[1:]))
    topics = pd.read_csv(tmp_path / "run" / "topics.csv")
    assert list(topics.columns) == ["topic", "rank", "word", "probability"]
    assert set(topics["topic"]) == set(summary["uids"]) and topics.groupby("topic")["rank"].max().eq(20).all()
    assert topics.groupby("topic")["probability"].apply(lambda p: np.all(np.diff(p.to_numpy()) <= 0)).all()
    lines = (tmp_path / "run" / "topics.txt").read_text().splitlines()
    assert len(lines) == 4 and all(line.startswith("topic ") for line in lines)
    with h5py.File(tmp_path / "run" / "doc_topics.h5") as f:
        props = f["proportions"][()]
    assert props.shape == (300, 4) and np.all(props > 0) and np.all(props.sum(axis=1) <= 1 + 1e-12)


def test_memo_with_one_batch_equals_full_vb(compose_cfg, tmp_path, documents):
    """Memoized VI over a single batch is full-data VB (Hughes 2016 thesis §3.5.3)."""
    common = ["model=hdp_topic", "obs=mult", "data=hdf5", f"data.path={documents[1]}", "init.K=4",
              "alg.n_laps=6", "alg.converge_thr=-1", "moves=[]", "seed=3"]
    runner.train(compose_cfg(*common, "alg=vb"), tmp_path / "vb")
    runner.train(compose_cfg(*common, "alg=memo"), tmp_path / "memo")
    vb = pd.read_csv(tmp_path / "vb" / "trace.csv")["elbo"].to_numpy()
    memo = pd.read_csv(tmp_path / "memo" / "trace.csv")["elbo"].to_numpy()
    np.testing.assert_allclose(memo, vb, rtol=1e-12)


def test_a_topic_model_given_points_is_a_one_line_error(compose_cfg, tmp_path):
    from bnpvi.data.points import write_points

    path = write_points(tmp_path / "points.h5", np.random.default_rng(0).normal(size=(50, 3)))
    cfg = compose_cfg("model=hdp_topic", "data=hdf5", f"data.path={path}", "init.K=3")
    with pytest.raises(BnpviError) as info:
        runner.train(cfg, tmp_path / "run")
    assert "\n" not in str(info.value) and "bag-of-words" in str(info.value), str(info.value)
    assert not (tmp_path / "run").exists()


def test_the_default_toy_set_of_a_topic_model_is_the_bars_corpus(compose_cfg, tmp_path):
    summary = runner.train(compose_cfg("model=hdp_topic", "init.K=10", "alg.n_laps=3"), tmp_path / "run")
    assert summary["D"] == 100 and summary["n_atoms"] == 1800  # 10 x 10 pixels; 10 % of 2,000 held out
    assert (tmp_path / "run" / "topics.txt").is_file()


def test_store_round_trip_of_the_fixture(documents):
    with BatchStore.open(documents[3]) as store:
        assert store.kind == "bow" and store.n_batches == 3 and store.n_atoms == 300
