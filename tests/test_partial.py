"""partial_fit: data that keeps arriving joins a run as new batches of its memoized caches
(bnpvi.learn.runner.grow), and the run goes on with its moves."""
import numpy as np
import pandas as pd
import pytest

import bnpvi
from bnpvi.api.keywords import compose_train
from bnpvi.data.store import write_points
from bnpvi.learn import runner
from setups import one_line_error

MEANS = np.random.default_rng(0).uniform(-10, 10, size=(6, 2))


def points(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return MEANS[rng.integers(6, size=n)] + rng.normal(size=(n, 2))


@pytest.fixture(scope="module")
def stream():
    return points(4000, 1)


def test_partial_fit_reaches_the_fit_of_all_the_data(stream):
    """Four calls of 1,000 points end at the K of one fit on all 4,000 and within 0.01 nats per point of its
    ELBO; each call's ELBO is the whole-data ELBO of the rows seen so far, and within a call it never
    decreases after the first lap over the new rows."""
    whole = bnpvi.DPMixture(random_state=0).fit(stream)
    est = bnpvi.DPMixture(random_state=0)
    laps = []
    for i in range(4):
        est.partial_fit(stream[1000 * i:1000 * (i + 1)])
        laps.append(est.n_iter_)
        assert est.labels_.shape == (1000,)
    assert est.n_components_ == whole.n_components_ == 6
    assert est.elbo_ / 4000 == pytest.approx(whole.elbo_ / 4000, abs=0.01)
    assert all(b - a <= 3 for a, b in zip(laps, laps[1:]))  # n_laps=3 a call at most
    trace = est.elbo_trace_
    for first, last in zip(laps, laps[1:]):
        grown = trace[first + 1:last]  # from the second lap of the call on: every new row is summarised
        assert np.all(np.diff(grown) >= -1e-9 * np.abs(grown[1:]))


def test_the_cluster_ids_stay(stream):
    est = bnpvi.DPMixture(random_state=0).partial_fit(stream[:2000])
    before = est.predict(stream[:2000])
    est.partial_fit(stream[2000:])
    assert np.mean(est.predict(stream[:2000]) == before) > 0.99


def test_a_grown_run_equals_a_resume_on_a_file_of_the_same_batches(tmp_path, stream):
    """runner.grow on a file of the run's batches and new ones is what the estimator does; the grown run's
    summary is that of its last lap, over all the rows."""
    write_points(tmp_path / "a.h5", stream[:2000], n_batches=2)
    cfg = compose_train(["model=dp_mix", "data=hdf5", f"data.path={tmp_path / 'a.h5'}", "plots=false"])
    first = runner.train(cfg, tmp_path / "run")
    write_points(tmp_path / "b.h5", stream, batch_sizes=[1000] * 4)
    grown = runner.grow(tmp_path / "run", tmp_path / "b.h5", 40)
    assert grown["n_atoms"] == 4000 and grown["laps"] > first["laps"]
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert len(trace) == grown["laps"] and trace["elbo"].iloc[-1] == grown["elbo"]
    assert grown["K"] == 6


def test_refusals_are_one_line(tmp_path, stream):
    write_points(tmp_path / "a.h5", stream[:2000], n_batches=2)
    cfg = compose_train(["model=dp_mix", "data=hdf5", f"data.path={tmp_path / 'a.h5'}", "plots=false"])
    runner.train(cfg, tmp_path / "run")
    write_points(tmp_path / "other.h5", stream, batch_sizes=[1500, 500, 2000])
    with one_line_error("does not continue the run's data: it must hold the run's 2 batches"):
        runner.grow(tmp_path / "run", tmp_path / "other.h5", 2)
    with one_line_error("does not continue the run's data"):
        runner.grow(tmp_path / "run", tmp_path / "a.h5", 2)  # no new batch
    with one_line_error("partial_fit continues memoized or full VB on more data \\(alg=memo or vb\\), not alg=sovb"):
        bnpvi.DPMixture(alg="sovb").partial_fit(stream[:100])
    with one_line_error("n_init=2 is for fit"):
        bnpvi.DPMixture(n_init=2).partial_fit(stream[:100])
    est = bnpvi.DPMixture(random_state=0, n_laps=3).partial_fit(stream[:100])
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(np.ones((10, 3)))
    est.fit(stream[:100])
    assert est.partial_run_ is None  # fit starts again: the next partial_fit fits its rows afresh


def test_an_hmm_takes_more_sequences():
    rng = np.random.default_rng(0)
    means = np.array([[0, 0], [5, 0], [0, 5]])
    seqs = [rng.normal(means[np.repeat(rng.choice(3, 6), 20)], 0.7) for _ in range(10)]
    hmm = bnpvi.HDPHMM(random_state=0, n_laps=15).partial_fit(seqs[:5]).partial_fit(seqs[5:])
    whole = bnpvi.HDPHMM(random_state=0, n_laps=15).fit(seqs)
    with bnpvi.data.store.BatchStore.open(hmm.partial_run_[1]) as store:
        assert store.n_seqs == 10
    assert hmm.n_components_ == whole.n_components_ == 3
    assert hmm.elbo_ == pytest.approx(whole.elbo_, abs=5.0)
    with pytest.raises(bnpvi.BnpviError, match="sequence 0 has D=3 columns; the model was trained on D=2"):
        hmm.partial_fit([np.ones((5, 3))])


def test_a_topic_model_takes_more_texts_counted_by_its_vocabulary():
    rng = np.random.default_rng(0)
    themes = ["goal match team score coach", "vote party law court senate", "star planet orbit moon comet"]
    texts = [" ".join(rng.choice(themes[t].split(), 10)) for t in rng.integers(3, size=200)]
    topics = bnpvi.HDPTopicModel(random_state=0).partial_fit(texts[:100])
    topics.partial_fit(texts[100:] + ["zebra quagga"])  # a text without a known word is dropped
    with bnpvi.data.store.BatchStore.open(topics.partial_run_[1]) as store:
        assert store.offsets[-1] == 200 and store.vocab() == topics.vocabulary_ and store.has_text
    assert topics.n_components_ == 3
    with pytest.raises(bnpvi.BnpviError, match="vocabulary= goes with the first call"):
        topics.partial_fit(texts[:2], vocabulary=["a"])
    with pytest.raises(bnpvi.BnpviError, match="no document holds a word of the run's vocabulary"):
        topics.partial_fit(["zebra quagga"])


def test_an_admixture_takes_more_groups():
    rng = np.random.default_rng(0)
    centres = rng.uniform(-10, 10, size=(4, 2))
    groups = [centres[rng.choice(rng.choice(4, 2, replace=False), 40)] + rng.normal(size=(40, 2)) for _ in range(30)]
    admixture = bnpvi.HDPTopicModel(obs="gauss", random_state=0).partial_fit(groups[:15]).partial_fit(groups[15:])
    with bnpvi.data.store.BatchStore.open(admixture.partial_run_[1]) as store:
        assert store.n_seqs == 30 and store.n_atoms == 1200
    assert admixture.n_components_ == 4


def test_the_command_line_continues_a_run_on_its_file_and_more(tmp_path, cache_dir):
    """bnpvi-data convert NEW DST --append-to RUN_DATA, then bnpvi-train resume=RUN data.path=DST: the run goes
    on on all the rows, as runner.grow does; a file that does not continue the run's is refused on one line and
    changes nothing; a later plain resume goes on on the grown file."""
    import json
    import shutil

    from bnpvi.cli import data as data_cli
    from setups import cli_env, train

    X = points(1200, 2)
    np.savetxt(tmp_path / "a.csv", X[:600], delimiter=",")
    np.savetxt(tmp_path / "b.csv", X[600:], delimiter=",")
    data_cli.main(["convert", str(tmp_path / "a.csv"), str(tmp_path / "a.h5"), "--batches", "3"])
    data_cli.main(["convert", str(tmp_path / "b.csv"), str(tmp_path / "ab.h5"), "--append-to", str(tmp_path / "a.h5")])
    with bnpvi.data.store.BatchStore.open(tmp_path / "ab.h5") as store:
        assert store.n_batches == 6 and np.array_equal(store.read_batch(3).X, X[600:800])
    env = cli_env(cache_dir)
    train(["data.path=a.h5", "hydra.run.dir=run", "plots=false"], tmp_path, env)
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    saved = (tmp_path / "run" / ".hydra" / "config.yaml").read_bytes()
    train(["resume=run", "data.path=a.h5", "alg.n_laps=200"], tmp_path, env)  # the run's own file: a plain resume
    assert (tmp_path / "run" / ".hydra" / "config.yaml").read_bytes() == saved
    data_cli.main(["convert", str(tmp_path / "b.csv"), str(tmp_path / "b.h5")])
    refused = train(["resume=run", "data.path=b.h5", "alg.n_laps=200"], tmp_path, env, check=False)
    assert refused.returncode == 2 and "does not continue the run's data" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert (tmp_path / "run" / ".hydra" / "config.yaml").read_bytes() == saved
    train(["resume=run", "data.path=ab.h5", "alg.n_laps=200"], tmp_path, env)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    first = json.loads((tmp_path / "copy" / "summary.json").read_text())
    expected = runner.grow(tmp_path / "copy", tmp_path / "ab.h5", 200 - first["laps"])
    assert summary["n_atoms"] == 1200 and summary["elbo"] == expected["elbo"] and summary["K"] == expected["K"]
    again = train(["resume=run", "alg.n_laps=300"], tmp_path, env)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["n_atoms"] == 1200, again.stderr


def test_append_to_keeps_the_files_batches_and_adds_the_new_units(tmp_path):
    """--append-to: sequences and documents too, labels where both have them, one-line refusals."""
    from bnpvi.data.convert import convert
    from bnpvi.data.store import BatchStore, write_documents, write_sequences

    rng = np.random.default_rng(0)
    write_sequences(tmp_path / "s.h5", rng.normal(size=(60, 2)), np.arange(0, 61, 10), n_batches=3)
    np.savez(tmp_path / "more.npz", X=rng.normal(size=(25, 2)), seq_range=np.array([0, 10, 25]))
    out = convert(tmp_path / "more.npz", tmp_path / "s2.h5", sequences="seq_range", append_to=tmp_path / "s.h5")
    with BatchStore.open(out) as store, BatchStore.open(tmp_path / "s.h5") as base:
        assert store.n_seqs == 8 and np.array_equal(np.diff(store.offsets)[:3], np.diff(base.offsets))
        assert np.array_equal(store.read_batch(1).X, base.read_batch(1).X)
        assert store.n_batches == 4 and store.read_batch(3).X.shape == (25, 2)
    write_documents(tmp_path / "d.h5", np.array([0, 1, 2]), np.array([1.0, 2.0, 1.0]), np.array([0, 2, 3]), 4,
                    vocab=["a", "b", "c", "d"])
    import scipy.sparse as sp
    sp.save_npz(tmp_path / "new.npz", sp.csr_matrix(np.array([[0, 0, 1, 3], [1, 0, 0, 0]])))
    out = convert(tmp_path / "new.npz", tmp_path / "d2.h5", append_to=tmp_path / "d.h5", n_batches=2)
    with BatchStore.open(out) as store:
        assert store.n_batches == 3 and store.vocab() == ["a", "b", "c", "d"] and store.offsets[-1] == 4
    with one_line_error("it holds bag-of-words documents, .*more.npz holds sequences"):
        convert(tmp_path / "more.npz", tmp_path / "x.h5", sequences="seq_range", append_to=tmp_path / "d.h5")
    write_points(tmp_path / "p.h5", rng.normal(size=(20, 3)), labels=np.zeros(20, dtype=int))
    np.save(tmp_path / "p.npy", rng.normal(size=(5, 3)))
    with one_line_error("the file has labels and the new data has none"):
        convert(tmp_path / "p.npy", tmp_path / "x.h5", append_to=tmp_path / "p.h5")
    with one_line_error("the number of new batches must be between 1 and 5, got 9"):
        convert(tmp_path / "p.npy", tmp_path / "x.h5", append_to=tmp_path / "p.h5", n_batches=9)
    assert not (tmp_path / "x.h5").exists()


def test_with_caches_on_disk_memory_stays_flat_as_the_data_grows(monkeypatch):
    """Each call rewrites the run's data file a block at a time from the open old file (the old rows are never
    all in memory) and memo keeps its caches in files: the peak of Python's allocations during a call does not
    grow with the rows seen, and the run is the one with caches in memory, to the last bit."""
    import tracemalloc

    monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", 40_000)  # blocks far smaller than the data
    centers = np.random.default_rng(0).uniform(-10, 10, size=(6, 16))
    rows = [centers[np.random.default_rng(c).integers(6, size=12_000)] + np.random.default_rng(c).normal(
        size=(12_000, 16)) for c in range(4)]
    elbos, peaks = {}, []
    for cache in ("memory", "disk"):
        est = bnpvi.DPMixture(cache=cache, random_state=0, K=6, moves=[])
        for call in range(4):
            tracemalloc.start()
            est.partial_fit(rows[call], n_laps=1)
            if cache == "disk":
                peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        elbos[cache] = est.elbo_
    assert elbos["disk"] == elbos["memory"]
    assert max(peaks[1:]) < 1.1 * peaks[1], [round(p / 1e6, 1) for p in peaks]  # 12,000 new rows: 1.5 MB a call
