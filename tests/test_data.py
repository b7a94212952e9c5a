"""Data layer: batch store, converters, toy generator, and the bnpvi-data CLI."""
import os
import pickle
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

import scipy.sparse as sp

from bnpvi.cli.data import main
from bnpvi.data.batch import PointBatch, SeqBatch, WordCountBatch
from bnpvi.data.convert import convert, read_documents, read_ldac, read_sequences, read_table, read_vocab
from bnpvi.data.store import (BatchStore, BowStore, PointStore, SeqStore, split_offsets, write_documents,
                              write_points, write_sequences)
from bnpvi.data.toy import (ensure_toy, ensure_toy_sequences, make_toy, make_toy_sequences, toy_path,
                            toy_sequences_path)
from bnpvi.errors import BnpviError

REPO = Path(__file__).resolve().parents[1]


def read_all(store):
    batches = [store.read_batch(b) for b in range(store.n_batches)]
    for b, batch in enumerate(batches):
        assert isinstance(batch, PointBatch)
        assert batch.X.dtype == np.float64 and batch.X.flags.c_contiguous
        assert batch.start == store.offsets[b]
    return np.concatenate([batch.X for batch in batches])


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(103, 3)) * [1.0, 5.0, 0.1] + [2.0, -1.0, 10.0]
    y = rng.integers(0, 4, size=103)
    return X, y


# ------------------------------------------------------------------ store
def test_write_and_read_back(tmp_path, data):
    X, y = data
    path = write_points(tmp_path / "d.h5", X, n_batches=4, labels=y, source="unit test")
    assert not [p for p in tmp_path.iterdir() if p.name != "d.h5"], "temporary file left behind"
    with BatchStore.open(path) as store:
        assert (store.kind, store.n_atoms, store.D, store.n_batches) == ("points", 103, 3, 4)
        assert store.batches_fixed and store.has_labels
        assert store.batch_sizes().tolist() == [26, 26, 26, 25]
        assert store.offsets.tolist() == [0, 26, 52, 78, 103]
        np.testing.assert_array_equal(read_all(store), X)
        np.testing.assert_array_equal(store.labels(), y)
        store.validate()
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "bnpvi-batches" and f.attrs["format_version"] == 1
        assert f.attrs["source"] == "unit test" and f.attrs["created"]
        assert f["X"].chunks == (103, 3) and f["X"].compression is None
        assert f["batch_offsets"].dtype == np.int64 and f["labels"].dtype == np.int64


def test_read_batch_returns_only_its_rows(tmp_path):
    X = np.arange(2000.0).reshape(1000, 2)
    with BatchStore.open(write_points(tmp_path / "d.h5", X, n_batches=7)) as store:
        for b, size in enumerate(store.batch_sizes()):
            batch = store.read_batch(b)
            assert batch.X.shape == (size, 2)
            assert batch.X[0, 0] == 2 * batch.start
        with pytest.raises(IndexError):
            store.read_batch(7)


def test_moments_match_numpy(tmp_path, data, monkeypatch):
    X, _ = data
    X = X + 1e6  # far from the origin: a naive sum of squares would lose the variance
    path = write_points(tmp_path / "d.h5", X, n_batches=5)
    for scan_values in (2**22, 7):  # one block, then 52 blocks of 2 rows combined pairwise
        monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", scan_values)
        with BatchStore.open(path) as store:
            m = store.moments()
        assert m.n_atoms == 103
        np.testing.assert_allclose(m.mean, X.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(m.cov, np.cov(X.T, bias=True), rtol=1e-8, atol=1e-12)
        assert np.array_equal(m.cov, m.cov.T)


def test_scan_blocks_are_bounded(tmp_path, data):
    X, _ = data
    with BatchStore.open(write_points(tmp_path / "d.h5", X, n_batches=1)) as store:
        blocks = list(store.iter_blocks(max_values=7))
    assert [b.shape for _, b in blocks] == [(2, 3)] * 51 + [(1, 3)]
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), X)


def test_split_offsets_are_array_split_sizes():
    for N, B in [(1, 1), (10, 3), (10, 10), (1001, 7)]:
        sizes = np.diff(split_offsets(N, B))
        assert sizes.tolist() == [len(a) for a in np.array_split(np.arange(N), B)]


def test_n_batches_override(tmp_path, data):
    X, _ = data
    fixed = write_points(tmp_path / "fixed.h5", X, n_batches=10)
    free = write_points(tmp_path / "free.h5", X, n_batches=1, batches_fixed=False)
    with pytest.raises(BnpviError, match=r"fixed\.h5 has 10 fixed batches; alg\.n_batches=4 conflicts"):
        BatchStore.open(fixed, n_batches=4)
    with BatchStore.open(fixed, n_batches=10) as store:
        assert store.n_batches == 10
    with BatchStore.open(free, n_batches=4) as store:
        assert store.n_batches == 4 and not store.batches_fixed
        assert store.batch_sizes().tolist() == [26, 26, 26, 25]
        np.testing.assert_array_equal(read_all(store), X)
    with h5py.File(free, "r") as f:  # the file itself is untouched
        assert f["batch_offsets"][()].tolist() == [0, 103]
    for path in (fixed, free):
        with pytest.raises(BnpviError, match=path.name):
            BatchStore.open(path, n_batches=104)
    with pytest.raises(BnpviError):
        BatchStore.open(free, n_batches=0)


def test_store_pickles_and_reopens(tmp_path, data):
    X, _ = data
    with BatchStore.open(write_points(tmp_path / "d.h5", X, n_batches=3)) as store:
        clone = pickle.loads(pickle.dumps(store))
        np.testing.assert_array_equal(clone.read_batch(2).X, store.read_batch(2).X)
        clone.close()
    with pytest.raises(ValueError):
        store.read_batch(0)


def test_write_points_rejects_bad_input(tmp_path):
    good = np.zeros((5, 2))
    cases = [
        (dict(X=np.zeros(5)), "1-D"),
        (dict(X=np.zeros((0, 2))), "N=0"),
        (dict(X=np.zeros((5, 0))), "D=0"),
        (dict(X=np.array([[1.0, 2.0], [np.inf, 0.0]])), "inf in row 1"),
        (dict(X=good, labels=np.zeros(4, dtype=int)), "4 entries"),
        (dict(X=good, labels=np.full(5, 0.5)), "integers"),
        (dict(X=good, n_batches=6), "n_batches=6"),
        (dict(X=good, n_batches=0), "n_batches=0"),
    ]
    for kwargs, fragment in cases:
        with pytest.raises(BnpviError, match=fragment) as info:
            write_points(tmp_path / "bad.h5", **kwargs)
        assert "bad.h5" in str(info.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(BnpviError, match="does not exist"):
        write_points(tmp_path / "nowhere" / "x.h5", good)


def test_write_replaces_atomically(tmp_path, data):
    X, _ = data
    path = write_points(tmp_path / "d.h5", X, n_batches=2)
    reader = BatchStore.open(path)
    write_points(path, X[:10] + 1, n_batches=1)
    # the open reader still sees the old file; a new one sees the new file
    np.testing.assert_array_equal(reader.read_batch(0).X, X[:52])
    reader.close()
    with BatchStore.open(path) as store:
        assert store.n_atoms == 10


def test_validate_names_file_and_row(tmp_path, data):
    X, _ = data
    path = write_points(tmp_path / "nan.h5", X, n_batches=4)
    with h5py.File(path, "r+") as f:
        f["X"][50, 1] = np.nan  # a missing entry, not an error
        f["X"][60, 2] = -np.inf
        f["X"][90, 0] = np.inf
    with BatchStore.open(path) as store:
        with pytest.raises(BnpviError, match=r"nan\.h5 has -inf in row 60 \(batch 2, column 2\)"):
            store.validate()


def _h5(path, **attrs):
    with h5py.File(path, "w") as f:
        f.create_dataset("X", data=np.zeros((4, 2)))
        f.create_dataset("batch_offsets", data=np.array([0, 2, 4]))
        f.attrs.update({"format": "bnpvi-batches", "format_version": 1, "kind": "points", **attrs})
    return path


@pytest.mark.parametrize("mutate, fragment", [
    (lambda p: p.write_text("hello"), "not an HDF5 file"),
    (lambda p: h5py.File(p, "w").close(), "not a bnpvi batch file"),
    (lambda p: _h5(p, format_version=2), "unsupported format_version 2"),
    (lambda p: _h5(p, kind="tensor"), "kind 'tensor'"),
    (lambda p: (_h5(p), _drop(p, "batch_offsets")), "missing the dataset 'batch_offsets'"),
    (lambda p: (_h5(p), _set(p, "batch_offsets", [0, 3, 2, 4])), "inconsistent batch_offsets"),
    (lambda p: (_h5(p), _set(p, "batch_offsets", [0, 2, 5])), "inconsistent batch_offsets"),
    (lambda p: (_h5(p), _set(p, "X", np.zeros((0, 2)), offsets=[0])), "batch_offsets|N=0"),
])
def test_open_rejects_bad_files(tmp_path, mutate, fragment):
    path = tmp_path / "weird.h5"
    mutate(path)
    with pytest.raises(BnpviError, match=fragment) as info:
        BatchStore.open(path)
    assert "weird.h5" in str(info.value) and "\n" not in str(info.value)


def test_open_rejects_empty_data(tmp_path):
    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("X", shape=(0, 2), dtype="f8")
        f.create_dataset("batch_offsets", data=np.array([0, 0]))
        f.attrs.update({"format": "bnpvi-batches", "format_version": 1, "kind": "points"})
    with pytest.raises(BnpviError, match=r"empty\.h5 has no data rows \(N=0\)"):
        BatchStore.open(path)


def test_open_missing_file(tmp_path):
    with pytest.raises(BnpviError, match="data file not found: .*nope.h5"):
        BatchStore.open(tmp_path / "nope.h5")


def _drop(path, name):
    with h5py.File(path, "a") as f:
        del f[name]


def _set(path, name, value, offsets=None):
    with h5py.File(path, "a") as f:
        del f[name]
        f.create_dataset(name, data=np.asarray(value))
        if offsets is not None:
            del f["batch_offsets"]
            f.create_dataset("batch_offsets", data=np.asarray(offsets))


# ----------------------------------------------------------------- convert
def test_csv_round_trip_without_header(tmp_path, data):
    X, _ = data
    src = tmp_path / "plain.csv"
    np.savetxt(src, X, delimiter=",", fmt="%.17g")
    dst = convert(src, tmp_path / "plain.h5", n_batches=3)
    with BatchStore.open(dst) as store:
        assert store.n_batches == 3 and store.batches_fixed and not store.has_labels
        np.testing.assert_array_equal(read_all(store), X)


def test_csv_round_trip_with_header_and_labels(tmp_path, data):
    X, y = data
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df.insert(1, "cls", y)
    src = tmp_path / "labelled.csv"
    df.to_csv(src, index=False, float_format="%.17g")
    dst = convert(src, tmp_path / "labelled.h5", labels="cls")
    with BatchStore.open(dst) as store:
        assert store.n_batches == 1 and not store.batches_fixed
        np.testing.assert_array_equal(read_all(store), X)
        np.testing.assert_array_equal(store.labels(), y)
    X2, _ = read_table(src)  # without --labels the column is data
    assert X2.shape == (103, 4)


def test_csv_string_labels_and_column_index(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text("1.5,2,setosa\n3,4,virginica\n5,6,setosa\n")
    X, y = read_table(src, labels="-1")
    np.testing.assert_array_equal(X, [[1.5, 2], [3, 4], [5, 6]])
    assert y.tolist() == [0, 1, 0]


def test_npz_and_npy_round_trip(tmp_path, data):
    X, y = data
    np.savez(tmp_path / "d.npz", X=X, truth=y)
    np.save(tmp_path / "d.npy", X)
    Xz, yz = read_table(tmp_path / "d.npz", labels="truth")
    np.testing.assert_array_equal(Xz, X)
    np.testing.assert_array_equal(yz, y)
    dst = convert(tmp_path / "d.npy", tmp_path / "d.h5", n_batches=103)
    with BatchStore.open(dst) as store:
        assert store.batch_sizes().tolist() == [1] * 103
        np.testing.assert_array_equal(read_all(store), X)


def test_shuffle_keeps_rows_and_labels_paired(tmp_path, data):
    X, y = data
    X = np.column_stack([np.arange(103.0), X])  # first column = original row index
    np.savez(tmp_path / "d.npz", X=X, y=y)
    dst = convert(tmp_path / "d.npz", tmp_path / "d.h5", n_batches=2, labels="y", shuffle_seed=5)
    with BatchStore.open(dst) as store:
        Xs, ys = read_all(store), store.labels()
    order = Xs[:, 0].astype(int)
    assert not np.array_equal(order, np.arange(103))
    assert sorted(order) == list(range(103))
    np.testing.assert_array_equal(Xs, X[order])
    np.testing.assert_array_equal(ys, y[order])


def test_convert_refuses_to_overwrite(tmp_path, data):
    X, _ = data
    np.save(tmp_path / "d.npy", X)
    dst = convert(tmp_path / "d.npy", tmp_path / "d.h5")
    with pytest.raises(BnpviError, match="already exists"):
        convert(tmp_path / "d.npy", dst)
    convert(tmp_path / "d.npy", dst, n_batches=2, overwrite=True)
    with BatchStore.open(dst) as store:
        assert store.n_batches == 2


def _write(path, content):
    if isinstance(content, np.ndarray):
        np.save(path, content) if path.suffix == ".npy" else np.savez(path, X=content)
    elif isinstance(content, dict):
        np.savez(path, **content)
    else:
        path.write_text(content)


BAD_INPUTS = [
    ("missing.csv", None, None, "not found"),
    ("nan.csv", "1,2\n3,nan\n5,-inf\n", None, "-inf in row 2"),
    ("blank.csv", "1,2\n3,\n5,x\n", None, "non-numeric value 'x' in row 2"),
    ("inf.csv", "x,y\n1,2\n3,4\n5,inf\n", None, "inf in row 2"),
    ("empty.csv", "", None, "empty"),
    ("header_only.csv", "x,y\n", None, "no data rows"),
    ("text.csv", "x,y\n1,2\n3,four\n", None, "non-numeric value 'four' in row 1, column 'y'"),
    ("data.xlsx", "1,2\n", None, "unknown file type"),
    ("labels.csv", "x,y\n1,2\n3,4\n", "cls", "no column 'cls'"),
    ("one_d.npy", np.arange(5.0), None, "1-D"),
    ("three_d.npz", np.zeros((2, 2, 2)), None, "2-D"),
    ("nan.npz", np.array([[1.0, 2.0], [np.nan, 4.0], [np.inf, 1.0]]), None, "inf in row 2"),
    ("inf.npy", np.array([[1.0], [-np.inf]]), None, "-inf in row 1"),
    ("zero_rows.npy", np.zeros((0, 3)), None, "no rows"),
    ("strings.npy", np.array([["a", "b"]]), None, "real numbers"),
    ("short_labels.npz", {"X": np.zeros((4, 2)), "y": np.arange(3)}, "y", "3 entries but X has 4 rows"),
    ("no_labels.npz", {"X": np.zeros((4, 2))}, "y", "no label array 'y'"),
    ("no_x.npz", {"data": np.zeros((4, 2))}, None, "no array 'X'"),
    ("broken.npz", "not a zip file", None, "cannot read"),
]


@pytest.mark.parametrize("name, content, labels, fragment", BAD_INPUTS)
def test_bad_input_names_file(tmp_path, name, content, labels, fragment):
    src = tmp_path / name
    if content is not None:
        _write(src, content)
    with pytest.raises(BnpviError, match=fragment) as info:
        read_table(src, labels=labels)
    message = str(info.value)
    assert name in message and "\n" not in message
    with pytest.raises(BnpviError):
        convert(src, tmp_path / "out.h5", labels=labels)
    assert not (tmp_path / "out.h5").exists()


# --------------------------------------------------------------------- CLI
def test_cli_convert_and_info(tmp_path, data, capsys):
    X, y = data
    np.savez(tmp_path / "d.npz", X=X, y=y)
    assert main(["convert", str(tmp_path / "d.npz"), str(tmp_path / "d.h5"), "--batches", "4",
                 "--labels", "y", "--shuffle", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "N=103" in out[0] and "D=3" in out[0] and "batches=4" in out[0]
    assert main(["info", str(tmp_path / "d.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    for fragment in ("kind:    points", "N:       103", "D:       3", "batches: 4 (fixed)", "labels:  yes",
                     "bnpvi-batches version 1"):
        assert fragment in out, out


@pytest.mark.parametrize("args, fragment", [
    (["convert", "{tmp}/bad.csv", "{tmp}/out.h5"], "row 1"),
    (["convert", "{tmp}/good.csv", "{tmp}/out.h5", "--batches", "9"], "between 1 and 3"),
    (["convert", "{tmp}/good.csv", "{tmp}/out.h5", "--labels", "z"], "no column 'z'"),
    (["info", "{tmp}/nope.h5"], "data file not found"),
    (["info", "{tmp}/good.csv"], "not an HDF5 file"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, fragment):
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n3,inf\n")
    (tmp_path / "good.csv").write_text("x,y\n1,2\n3,4\n5,6\n")
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: ") and fragment in lines[0], lines
    assert captured.out == ""
    assert not (tmp_path / "out.h5").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "good.csv"]


def test_cli_subprocess_exit_status(tmp_path):
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n3,oops\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "bnpvi.cli.data", "convert", "bad.csv", "out.h5"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: bad.csv: non-numeric value 'oops'")
    assert not (tmp_path / "out.h5").exists()


# --------------------------------------------------------------------- toy
def test_toy_is_deterministic_with_8_labels():
    X, y = make_toy(2000, seed=3)
    X2, y2 = make_toy(2000, seed=3)
    X3, _ = make_toy(2000, seed=4)
    assert X.shape == (2000, 2) and X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(X, X3)
    counts = np.bincount(y)
    assert len(counts) == 8 and counts.min() > 0 and len(set(counts)) > 4  # unequal weights
    # shuffled: every contiguous batch sees many clusters
    assert len(np.unique(y[:200])) == 8


def test_toy_recovered_by_full_covariance_gmm():
    sklearn_mixture = pytest.importorskip("sklearn.mixture")
    from bnpvi.metrics import adjusted_rand_index

    X, y = make_toy(5000, seed=0)
    gmm = sklearn_mixture.GaussianMixture(8, covariance_type="full", n_init=3, random_state=0).fit(X)
    assert adjusted_rand_index(y, gmm.predict(X)) > 0.95


def test_ensure_toy_writes_once(tmp_path, monkeypatch):
    path = ensure_toy(n_atoms=500, seed=1, n_batches=5, cache_dir=tmp_path)
    assert path == toy_path(500, 1, 5, cache_dir=tmp_path) == tmp_path / "toy8_n500_s1_b5.h5"
    with BatchStore.open(path) as store:
        X = read_all(store)
        assert store.n_batches == 5 and store.has_labels
        np.testing.assert_array_equal(X, make_toy(500, seed=1)[0])
        np.testing.assert_array_equal(store.labels(), make_toy(500, seed=1)[1])
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert ensure_toy(n_atoms=500, seed=1, n_batches=5, cache_dir=tmp_path) == path
    assert path.stat().st_mtime_ns == 1_000_000_000  # reused, not rewritten
    path.write_bytes(b"broken")  # a broken cache file is rebuilt
    ensure_toy(n_atoms=500, seed=1, n_batches=5, cache_dir=tmp_path)
    with BatchStore.open(path) as store:
        assert store.n_atoms == 500
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy8_n500_s1_b5.h5"]
    monkeypatch.setenv("BNPVI_CACHE", str(tmp_path / "env-cache"))
    assert toy_path(10, 0, 2) == tmp_path / "env-cache" / "toy8_n10_s0_b2.h5"
    with pytest.raises(BnpviError, match="n_batches=11"):
        ensure_toy(n_atoms=10, seed=0, n_batches=11, cache_dir=tmp_path)


def test_failed_write_leaves_nothing(tmp_path, data, monkeypatch):
    X, _ = data
    old = write_points(tmp_path / "d.h5", X[:5])

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("bnpvi.data.base.os.replace", broken_replace)
    with pytest.raises(BnpviError, match=r"cannot write .*new\.h5: no space left"):
        write_points(tmp_path / "new.h5", X)
    with pytest.raises(BnpviError):
        write_points(old, X)
    assert [p.name for p in tmp_path.iterdir()] == ["d.h5"]
    with BatchStore.open(old) as store:  # the existing file is intact
        assert store.n_atoms == 5



# =========================================================== bag of words
def make_corpus(seed=0, N=57, V=40, max_len=9):
    """A random corpus in CSR form: distinct ids per document, counts 1..5, no empty document."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, size=N)
    ids = np.concatenate([rng.choice(V, size=L, replace=False) for L in lengths]).astype(np.int32)
    counts = rng.integers(1, 6, size=ids.size).astype(np.float64)
    return ids, counts, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def ldac_text(ids, counts, dr, sep=" ", eol="\n"):
    lines = []
    for d in range(len(dr) - 1):
        pairs = [f"{i}:{int(c)}" for i, c in zip(ids[dr[d]:dr[d + 1]], counts[dr[d]:dr[d + 1]])]
        lines.append(sep.join([str(len(pairs))] + pairs))
    return eol.join(lines) + eol


def read_all_docs(store):
    """Concatenate every batch of a bow store back into (ids, counts, doc_range), checking each batch."""
    ids, counts, lengths = [], [], []
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        assert isinstance(batch, WordCountBatch)
        assert batch.word_ids.dtype == np.int32 and batch.word_counts.dtype == np.float64
        assert batch.doc_range.dtype == np.int64 and batch.doc_range[0] == 0
        assert batch.doc_range[-1] == batch.word_ids.shape[0] == batch.word_counts.shape[0]
        assert batch.start == store.offsets[b] and batch.n_atoms == store.batch_sizes()[b]
        assert batch.vocab_size == store.D
        ids.append(batch.word_ids)
        counts.append(batch.word_counts)
        lengths.append(np.diff(batch.doc_range))
    lengths = np.concatenate(lengths)
    return np.concatenate(ids), np.concatenate(counts), np.concatenate([[0], np.cumsum(lengths)])


def by_word_id(ids, counts, dr):
    """Each document's entries sorted by word id (how converters store them: canonical CSR)."""
    ids, counts, dr = np.asarray(ids), np.asarray(counts), np.asarray(dr)
    order = np.lexsort((ids, np.repeat(np.arange(len(dr) - 1), np.diff(dr))))
    return ids[order], counts[order], dr


def assert_same_corpus(got, want):
    """The same documents, each with the same (word id, count) entries (converters store them sorted by id)."""
    for g, w in zip(by_word_id(*got), by_word_id(*want)):
        np.testing.assert_array_equal(g, w)


def test_write_documents_round_trip(tmp_path):
    ids, counts, dr = make_corpus()
    y = np.arange(57) % 5
    vocab = [f"w{i}" for i in range(39)] + ["naïve"]
    path = write_documents(tmp_path / "c.h5", ids, counts, dr, 40, n_batches=4, labels=y, vocab=vocab,
                           source="unit")
    assert [p.name for p in tmp_path.iterdir()] == ["c.h5"]
    with BatchStore.open(path) as store:
        assert (store.kind, store.n_atoms, store.D, store.nnz, store.n_batches) == ("bow", 57, 40, ids.size, 4)
        assert store.vocab_size == 40 and store.has_vocab and store.has_labels and store.batches_fixed
        assert store.batch_sizes().tolist() == [15, 14, 14, 14]  # documents, not words
        assert_same_corpus(read_all_docs(store), (ids, counts, dr))
        np.testing.assert_array_equal(store.labels(), y)
        assert store.vocab() == vocab
        assert store.moments() is None
        assert store.n_tokens() == counts.sum()
        store.validate()
        info = store.info()
        assert (info["kind"], info["N"], info["V"], info["nnz"], info["tokens"]) == ("bow", 57, 40, ids.size,
                                                                                      counts.sum())
        # each batch holds whole documents, exactly the original ones
        for b in range(4):
            batch = store.read_batch(b)
            lo, hi = store.offsets[b], store.offsets[b + 1]
            np.testing.assert_array_equal(batch.doc_range, dr[lo:hi + 1] - dr[lo])
            np.testing.assert_array_equal(batch.word_ids, ids[dr[lo]:dr[hi]])
            np.testing.assert_array_equal(batch.csr().toarray(),
                                          sp.csr_matrix((counts, ids, dr), shape=(57, 40)).toarray()[lo:hi])
    with h5py.File(path, "r") as f:
        assert f.attrs["kind"] == "bow" and f.attrs["format_version"] == 1 and f.attrs["D"] == 40
        assert (f.attrs["N"], f.attrs["nnz"], f.attrs["n_batches"]) == (57, ids.size, 4)
        assert f.attrs["source"] == "unit" and f.attrs["created"]
        for name, dtype in (("word_ids", np.int32), ("word_counts", np.float64), ("doc_range", np.int64),
                            ("batch_offsets", np.int64), ("labels", np.int64)):
            assert f[name].dtype == dtype and f[name].ndim == 1, name
        for name in ("word_ids", "word_counts", "doc_range", "labels", "vocab"):
            assert f[name].chunks is not None, name
        assert f["batch_offsets"][()].tolist() == [0, 15, 29, 43, 57]


def test_bow_resplit_pickle_and_blocks(tmp_path):
    ids, counts, dr = make_corpus(1, N=30)
    fixed = write_documents(tmp_path / "fixed.h5", ids, counts, dr, 40, n_batches=3)
    free = write_documents(tmp_path / "free.h5", ids, counts, dr, 40, batches_fixed=False)
    with pytest.raises(BnpviError, match=r"fixed\.h5 has 3 fixed batches"):
        BatchStore.open(fixed, n_batches=4)
    with pytest.raises(BnpviError, match=r"only N=30 documents"):
        BatchStore.open(free, n_batches=31)
    with BatchStore.open(free, n_batches=7) as store:
        assert store.batch_sizes().tolist() == [5, 5, 4, 4, 4, 4, 4]
        assert_same_corpus(read_all_docs(store), (ids, counts, dr))
        clone = pickle.loads(pickle.dumps(store))
        np.testing.assert_array_equal(clone.read_batch(6).word_ids, store.read_batch(6).word_ids)
        assert clone.read_batch(6).start == 26
        clone.close()
        blocks = list(store.iter_blocks(max_values=12))
        assert all(b.word_ids.size <= 12 or b.n_atoms == 1 for _, b in blocks)
        assert [s for s, _ in blocks] == list(np.cumsum([0] + [b.n_atoms for _, b in blocks[:-1]]))
        np.testing.assert_array_equal(np.concatenate([b.word_ids for _, b in blocks]), ids)


BAD_DOCS = [
    (dict(word_ids=[0, 40, 1]), "document 1 has word id 40 outside the vocabulary"),
    (dict(word_ids=[0, -1, 1]), "document 1 has word id -1"),
    (dict(word_counts=[1.0, 2.0, -1.0]), "document 2 has a count of -1"),
    (dict(word_counts=[1.0, 0.0, 1.0]), "document 1 has a count of 0"),
    (dict(word_counts=[1.0, 2.5, 1.0]), "document 1 has a non-integer count 2.5"),
    (dict(word_counts=[np.nan, 1.0, 1.0]), "document 0 has a count of nan"),
    (dict(doc_range=[1, 1, 2, 3]), "must start at 0"),
    (dict(doc_range=[0, 1, 2, 4]), "ends at 4 but there are nnz=3"),
    (dict(doc_range=[0, 2, 1, 3]), "decreases at document 1"),
    (dict(doc_range=[0, 1, 1, 2, 3]), "document 1 has no words"),
    (dict(word_ids=[0, 5, 5], doc_range=[0, 1, 3]), "document 1 lists word 5 more than once"),
    (dict(word_ids=[0.5, 1, 2]), "word_ids must hold integers"),
    (dict(labels=[0, 1]), "labels have 2 entries but there are 3 documents"),
    (dict(vocab=["a", "b"]), "vocab has 2 words but the vocabulary size is V=40"),
    (dict(n_batches=4), "n_batches=4 must be between 1 and N=3"),
    (dict(vocab_size=0), "vocab_size V=0"),
]


@pytest.mark.parametrize("change, fragment", BAD_DOCS)
def test_write_documents_rejects_bad_input(tmp_path, change, fragment):
    args = dict(word_ids=[0, 1, 2], word_counts=[1.0, 2.0, 3.0], doc_range=[0, 1, 2, 3], vocab_size=40)
    args.update(change)
    with pytest.raises(BnpviError, match=fragment) as info:
        write_documents(tmp_path / "bad.h5", **args)
    assert "bad.h5" in str(info.value) and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dataset, index, value, fragment", [
    ("word_ids", 17, 40, r"document \d+ \(batch \d\) has word id 40 outside"),
    ("word_counts", 30, -2.0, r"document \d+ \(batch \d\) has a count of -2"),
    ("word_counts", 30, 1.5, r"non-integer count 1\.5"),
    ("doc_range", 20, None, r"document 19 (has no words|has a decreasing doc_range) \(batch 1\)"),
])
def test_bow_validate_names_document_and_batch(tmp_path, dataset, index, value, fragment):
    ids, counts, dr = make_corpus(2)
    path = write_documents(tmp_path / "c.h5", ids, counts, dr, 40, n_batches=3)
    with h5py.File(path, "r+") as f:
        if value is None:
            f["doc_range"][index] = f["doc_range"][index - 1]
        else:
            f[dataset][index] = value
    expected_doc = int(np.searchsorted(dr, index, side="right") - 1)
    with BatchStore.open(path) as store:
        with pytest.raises(BnpviError, match=fragment) as info:
            store.validate()
    assert "c.h5" in str(info.value)
    if value is not None:
        assert f"document {expected_doc} (batch {int(np.searchsorted([0, 19, 38, 57], expected_doc, 'right') - 1)})" \
            in str(info.value)


def test_bow_validate_checks_tokens(tmp_path):
    ids, counts, dr = make_corpus(3)
    path = write_documents(tmp_path / "c.h5", ids, counts, dr, 40)
    with h5py.File(path, "r+") as f:
        f.attrs["tokens"] = np.int64(1)
    with BatchStore.open(path) as store, pytest.raises(BnpviError, match="attribute tokens=1"):
        store.validate()


def _bow_mutation(name):
    def mutate(path):
        with h5py.File(path, "a") as f:
            if name == "drop_counts":
                del f["word_counts"]
            elif name == "short_range":
                del f["doc_range"]
                f.create_dataset("doc_range", data=np.array([0, 1, 2]))
            elif name == "nnz":
                f.attrs["nnz"] = np.int64(3)
            elif name == "no_D":
                del f.attrs["D"]
            elif name == "vocab":
                f.create_dataset("vocab", data=np.array(["a", "b"], dtype=object), dtype=h5py.string_dtype())
    return mutate


@pytest.mark.parametrize("mutation, fragment", [
    ("drop_counts", "missing the dataset 'word_counts'"),
    ("short_range", r"inconsistent doc_range|attribute N="),
    ("nnz", "attribute nnz=3"),
    ("no_D", "no valid vocabulary size"),
    ("vocab", "invalid vocab dataset"),
])
def test_open_rejects_bad_bow_files(tmp_path, mutation, fragment):
    ids, counts, dr = make_corpus(4, N=10)
    path = write_documents(tmp_path / "weird.h5", ids, counts, dr, 40)
    _bow_mutation(mutation)(path)
    with pytest.raises(BnpviError, match=fragment) as info:
        BatchStore.open(path)
    assert "weird.h5" in str(info.value) and "\n" not in str(info.value)


# ------------------------------------------------------------------ LDA-C
@pytest.mark.parametrize("sep, eol, tail", [(" ", "\n", ""), ("\t", "\r\n", "\n\n"), ("  ", "\n", "   \n")])
@pytest.mark.parametrize("block", [None, 5, 64])
def test_ldac_round_trip(tmp_path, monkeypatch, sep, eol, tail, block):
    if block is not None:  # tiny parse blocks: lines straddle block boundaries
        monkeypatch.setattr("bnpvi.data.ldac._LDAC_BLOCK", block)
    ids, counts, dr = make_corpus(5)
    src = tmp_path / "c.ldac"
    src.write_text(ldac_text(ids, counts, dr, sep, eol) + tail, newline="")
    got_ids, got_counts, got_dr, V = read_ldac(src)
    assert V == ids.max() + 1
    assert_same_corpus((got_ids, got_counts, got_dr), (ids, counts, dr))
    dst = convert(src, tmp_path / "c.h5", n_batches=5)
    with BatchStore.open(dst) as store:
        assert (store.kind, store.n_atoms, store.D, store.n_batches) == ("bow", 57, ids.max() + 1, 5)
        assert store.vocab() is None and not store.has_labels
        assert_same_corpus(read_all_docs(store), (ids, counts, dr))


def test_ldac_with_vocab_file(tmp_path):
    ids, counts, dr = make_corpus(6, V=29)  # ids < 29, vocabulary of 40: V must come from the vocabulary
    src, voc = tmp_path / "c.ldac", tmp_path / "vocab.txt"
    src.write_text(ldac_text(ids, counts, dr))
    words = [f"word{i}" for i in range(40)]
    voc.write_text("\r\n".join(words) + "\r\n\n")
    assert read_vocab(voc) == words
    dst = convert(src, tmp_path / "c.h5", n_batches=2, vocab=voc)
    with BatchStore.open(dst) as store:
        assert store.D == 40 and store.vocab() == words
        assert_same_corpus(read_all_docs(store), (ids, counts, dr))
    docs = read_documents(src, vocab_size=40)
    assert docs.vocab_size == 40 and docs.vocab is None
    with pytest.raises(BnpviError, match="conflicting vocabulary sizes"):
        read_documents(src, vocab=voc, vocab_size=41)
    with pytest.raises(BnpviError, match=r"c\.ldac, line \d+: word id 2\d outside the vocabulary \(V=20"):
        read_documents(src, vocab_size=20)
    voc.write_text("a\n\nb\n")
    with pytest.raises(BnpviError, match=r"vocab\.txt, line 2: blank line"):
        read_vocab(voc)


def test_ldac_repeated_ids_are_summed(tmp_path):
    src = tmp_path / "dup.ldac"
    src.write_text("3 4:1 2:5 4:2\n2 4:1 2:5 4:2\n1 0:1\n")  # n counts the pairs, or the distinct ids
    ids, counts, dr, V = read_ldac(src)
    assert ids.tolist() == [2, 4, 2, 4, 0] and counts.tolist() == [5, 3, 5, 3, 1] and dr.tolist() == [0, 2, 4, 5]
    assert V == 5


GOOD = "2 0:1 3:2\n1 4:7\n"
BAD_LDAC = [
    ("negative.ldac", GOOD + "2 0:1 1:-2\n", 3, "negative count in '1:-2'"),
    ("fraction.ldac", GOOD + "1 3:1.5\n", 3, "non-integer count in '3:1.5'"),
    ("zero.ldac", GOOD + "1 3:0\n", 3, "zero count"),
    ("too_big_id.ldac", GOOD + "1 9:1\n", 3, "word id 9 outside the vocabulary (V=9"),
    ("negative_id.ldac", GOOD + "1 -1:1\n", 3, "negative word id"),
    ("semicolon.ldac", GOOD + "2 0:1 1;2\n", 3, "malformed"),
    ("two_colons.ldac", GOOD + "1 0:1:2\n", 3, "malformed token '0:1:2'"),
    ("two_colons_odd.ldac", GOOD + "2 0:1:2 3\n", 3, "malformed token '0:1:2'"),
    ("bare_id.ldac", GOOD + "2 5 2:3 4\n", 3, "malformed token '5'"),
    ("spaced.ldac", GOOD + "1 0 : 2\n", 3, "malformed"),
    ("no_count.ldac", GOOD + "1 0:\n", 3, "malformed token '0:'"),
    ("word.ldac", "1 0:1\nhello world\n", 2, "n must be a non-negative integer, got 'hello'"),
    ("no_n.ldac", GOOD + "0:1 3:1\n", 3, "expected the number of distinct words n first"),
    ("mismatch.ldac", GOOD + GOOD + "3 0:1 1:1\n", 5, "n=3 but the line has 2 id:count pairs"),
    ("no_words.ldac", GOOD + "0\n", 3, "document has no words"),
    ("blank.ldac", "1 0:1\n\n1 0:1\n", 2, "empty line"),
    ("huge.ldac", GOOD + "1 0:1234567890123456789012\n", 3, "too large"),
]


@pytest.mark.parametrize("name, text, line, fragment", BAD_LDAC)
@pytest.mark.parametrize("block", [None, 4])
def test_ldac_bad_input_names_file_and_line(tmp_path, monkeypatch, name, text, line, fragment, block):
    if block is not None:
        monkeypatch.setattr("bnpvi.data.ldac._LDAC_BLOCK", block)
    src = tmp_path / name
    src.write_text(text)
    with pytest.raises(BnpviError) as info:
        read_documents(src, vocab_size=9)
    message = str(info.value)
    assert message.startswith(f"{src}, line {line}: ") and fragment in message and "\n" not in message, message
    with pytest.raises(BnpviError):
        convert(src, tmp_path / "out.h5", vocab_size=9)
    assert not (tmp_path / "out.h5").exists()


def test_ldac_fast_parser_agrees_with_line_grammar(tmp_path, monkeypatch):
    """Randomly damaged lines: the vectorized parser must flag exactly the first line the
    reference grammar rejects, and otherwise return what a plain per-line parse gives."""
    from bnpvi.data.ldac import _ldac_line_problem

    monkeypatch.setattr("bnpvi.data.ldac._LDAC_BLOCK", 16)
    rng = np.random.default_rng(11)
    alphabet = list("0123456789:: -.\tx")
    src = tmp_path / "fuzz.ldac"
    n_bad = 0
    for trial in range(300):
        lines = []
        for _ in range(rng.integers(1, 5)):
            pairs = [f"{rng.integers(0, 12)}:{rng.integers(1, 30)}" for _ in range(rng.integers(1, 4))]
            line = " ".join([str(len(pairs))] + pairs)
            for _ in range(rng.integers(0, 3) if rng.random() < 0.5 else 0):
                chars, pos = list(line), int(rng.integers(0, len(line) + 1))
                op = rng.integers(0, 3)
                if op == 0:
                    chars.insert(pos, str(rng.choice(alphabet)))
                elif pos < len(chars):
                    if op == 1:
                        del chars[pos]
                    else:
                        chars[pos] = str(rng.choice(alphabet))
                line = "".join(chars)
            if line.strip():
                lines.append(line)
        if not lines:
            continue
        src.write_text("\n".join(lines) + "\n")
        problems = [_ldac_line_problem(line.encode(), None) for line in lines]
        first_bad = next((i for i, p in enumerate(problems) if p is not None), None)
        if first_bad is not None:
            n_bad += 1
            with pytest.raises(BnpviError) as info:
                read_ldac(src)
            assert str(info.value) == f"{src}, line {first_bad + 1}: {problems[first_bad]}", (lines, first_bad)
            continue
        ids, counts, dr, _ = read_ldac(src)
        for d, line in enumerate(lines):
            want = {}
            for tok in line.split()[1:]:
                word, count = tok.split(":")
                want[int(word)] = want.get(int(word), 0) + int(count)
            got = dict(zip(ids[dr[d]:dr[d + 1]].tolist(), counts[dr[d]:dr[d + 1]].tolist()))
            assert got == want, (line, got)
    assert 50 < n_bad < 250  # both branches exercised


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_ldac_empty_file(tmp_path, text):
    src = tmp_path / "empty.ldac"
    src.write_text(text)
    with pytest.raises(BnpviError, match=r"empty\.ldac is empty"):
        read_documents(src)


# ------------------------------------------------------------ sparse NPZ
def test_npz_triplet_round_trip_with_labels(tmp_path):
    ids, counts, dr = make_corpus(7)
    y = np.arange(57) % 3
    np.savez(tmp_path / "t.npz", word_id=ids, word_count=counts, doc_range=dr.astype(np.int32),
             vocab_size=np.int64(50), truth=y)
    dst = convert(tmp_path / "t.npz", tmp_path / "t.h5", n_batches=3, labels="truth")
    with BatchStore.open(dst) as store:
        assert (store.kind, store.n_atoms, store.D) == ("bow", 57, 50)  # vocab_size, not max id + 1
        assert_same_corpus(read_all_docs(store), (ids, counts, dr))
        np.testing.assert_array_equal(store.labels(), y)
    np.savez(tmp_path / "u.npz", word_id=ids, word_count=counts.astype(np.int64), doc_range=dr)
    assert read_documents(tmp_path / "u.npz").vocab_size == ids.max() + 1
    with pytest.raises(BnpviError, match="conflicting vocabulary sizes"):
        read_documents(tmp_path / "t.npz", vocab_size=60)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_npz_scipy_round_trip(tmp_path, fmt):
    ids, counts, dr = make_corpus(8)
    X = sp.csr_matrix((counts, ids, dr), shape=(57, 45))
    X.sort_indices()
    stored = X.asformat(fmt).copy()
    if fmt == "coo":  # an explicit zero is an absent word
        stored = sp.coo_matrix((np.r_[stored.data, 0.0], (np.r_[stored.row, 3], np.r_[stored.col, 44])),
                               shape=X.shape)
    sp.save_npz(tmp_path / "m.npz", stored, compressed=False)
    dst = convert(tmp_path / "m.npz", tmp_path / "m.h5", n_batches=4)
    with BatchStore.open(dst) as store:
        assert (store.kind, store.n_atoms, store.D) == ("bow", 57, 45)
        got_ids, got_counts, got_dr = read_all_docs(store)
        got = sp.csr_matrix((got_counts, got_ids, got_dr), shape=(57, 45))
        assert (got != X).nnz == 0 and got.nnz == X.nnz


BAD_NPZ = [
    ("neg.npz", dict(word_count=[1.0, -2.0, 1.0]), "document 1 has a count of -2"),
    ("frac.npz", dict(word_count=[1.0, 1.0, 0.5]), "document 2 has a non-integer count 0.5"),
    ("big_id.npz", dict(word_id=[0, 7, 1], vocab_size=5), "document 1 has word id 7 outside"),
    ("empty_doc.npz", dict(doc_range=[0, 1, 1, 3]), "document 1 has no words"),
    ("bad_range.npz", dict(doc_range=[0, 1, 2, 4]), "ends at 4"),
    ("labels.npz", dict(truth=[0, 1]), "labels have 2 entries but there are 3 documents"),
]


@pytest.mark.parametrize("name, change, fragment", BAD_NPZ)
def test_npz_bow_bad_input_names_file(tmp_path, name, change, fragment):
    arrays = dict(word_id=[0, 1, 2], word_count=[1.0, 2.0, 3.0], doc_range=[0, 1, 2, 3], truth=[0, 1, 1])
    arrays.update(change)
    np.savez(tmp_path / name, **{k: np.asarray(v) for k, v in arrays.items()})
    with pytest.raises(BnpviError, match=fragment) as info:
        convert(tmp_path / name, tmp_path / "out.h5", labels="truth")
    assert name in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "out.h5").exists()


def test_npz_scipy_negative_count(tmp_path):
    sp.save_npz(tmp_path / "neg.npz", sp.csr_matrix(np.array([[1.0, 0.0], [0.0, -3.0]])))
    with pytest.raises(BnpviError, match=r"neg\.npz: document 1 has a count of -3"):
        read_documents(tmp_path / "neg.npz")


def test_shuffle_keeps_documents_and_labels_paired(tmp_path):
    N = 40
    rng = np.random.default_rng(9)
    docs = [np.r_[d, rng.choice(np.arange(N, N + 20), size=rng.integers(0, 5), replace=False)] for d in range(N)]
    ids = np.concatenate(docs)  # word d marks document d
    counts = rng.integers(1, 9, size=ids.size).astype(float)
    dr = np.r_[0, np.cumsum([len(d) for d in docs])]
    y = rng.integers(0, 4, size=N)
    np.savez(tmp_path / "s.npz", word_id=ids, word_count=counts, doc_range=dr, y=y)
    dst = convert(tmp_path / "s.npz", tmp_path / "s.h5", n_batches=3, labels="y", shuffle_seed=2)
    with BatchStore.open(dst) as store:
        got_ids, got_counts, got_dr = read_all_docs(store)
        labels = store.labels()
        assert "documents shuffled, seed 2" in store.attrs["source"]
    order = [int(got_ids[got_dr[i]]) for i in range(N)]
    assert sorted(order) == list(range(N)) and order != list(range(N))
    np.testing.assert_array_equal(labels, y[order])
    for i, d in enumerate(order):
        order_in_doc = np.argsort(ids[dr[d]:dr[d + 1]])  # converters store entries sorted by word id
        np.testing.assert_array_equal(got_ids[got_dr[i]:got_dr[i + 1]], ids[dr[d]:dr[d + 1]][order_in_doc])
        np.testing.assert_array_equal(got_counts[got_dr[i]:got_dr[i + 1]], counts[dr[d]:dr[d + 1]][order_in_doc])


# -------------------------------------------------------------- bow CLI
def test_cli_convert_and_info_ldac(tmp_path, capsys):
    ids, counts, dr = make_corpus(10)
    (tmp_path / "c.ldac").write_text(ldac_text(ids, counts, dr))
    (tmp_path / "v.txt").write_text("\n".join(f"w{i}" for i in range(40)) + "\n")
    assert main(["convert", str(tmp_path / "c.ldac"), str(tmp_path / "c.h5"), "--batches", "5",
                 "--vocab", str(tmp_path / "v.txt"), "--shuffle", "0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "kind=bow N=57 documents V=40" in out[0] and "batches=5" in out[0], out
    assert main(["info", str(tmp_path / "c.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    for fragment in ("kind:    bow", "N:       57 documents", "V:       40", f"nnz:     {ids.size}",
                     f"tokens:  {int(counts.sum())}", "vocab:   yes", "batches: 5 (fixed), documents per batch"):
        assert fragment in out, out


@pytest.mark.parametrize("args, fragment", [
    (["convert", "{tmp}/bad.ldac", "{tmp}/out.h5"], "bad.ldac, line 2: negative count"),
    (["convert", "{tmp}/good.ldac", "{tmp}/out.h5", "--batches", "3"], "has N=2 documents"),
    (["convert", "{tmp}/good.ldac", "{tmp}/out.h5", "--labels", "y"], "holds no labels"),
    (["convert", "{tmp}/good.ldac", "{tmp}/out.h5", "--vocab-size", "3"], "word id 3 outside"),
    (["convert", "{tmp}/good.ldac", "{tmp}/out.h5", "--vocab", "{tmp}/nope.txt"], "vocabulary file not found"),
    (["convert", "{tmp}/good.csv", "{tmp}/out.h5", "--vocab-size", "3"], "--vocab-size applies only"),
])
def test_cli_bow_errors_are_one_line(tmp_path, capsys, args, fragment):
    (tmp_path / "bad.ldac").write_text("1 0:1\n1 2:-1\n")
    (tmp_path / "good.ldac").write_text("1 0:1\n2 3:2 1:1\n")
    (tmp_path / "good.csv").write_text("1,2\n3,4\n")
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: ") and fragment in lines[0], lines
    assert captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.ldac", "good.csv", "good.ldac"]


# ------------------------------------------------------ reference corpora
@pytest.mark.shared_data
def test_shared_bag_of_words_corpora(shared_data, tmp_path):
    bars = shared_data / "bars_one_per_doc" / "dataset.npz"
    with np.load(bars) as npz:
        want = (npz["word_id"], npz["word_count"], npz["doc_range"])
    dst = convert(bars, tmp_path / "bars.h5", n_batches=4)
    with BatchStore.open(dst) as store:
        assert (store.kind, store.n_atoms, store.D, store.nnz) == ("bow", 2000, 144, want[0].size)
        assert_same_corpus(read_all_docs(store), want)
        store.validate()

    wiki = shared_data / "wiki"
    dst = convert(wiki / "train.ldac", tmp_path / "wiki.h5", n_batches=5, vocab=wiki / "vocab.txt")
    with BatchStore.open(dst) as store:
        assert (store.n_atoms, store.D, store.n_tokens()) == (7961, 6130, 2_844_630)
        assert store.vocab()[:3] == ["align", "math", "language"] and len(store.vocab()) == 6130
        ids, counts, dr = read_all_docs(store)
        assert counts.sum() == 2_844_630 and dr[-1] == store.nnz == ids.size
        assert dr.size == 7962 and np.diff(dr).min() >= 1
        store.validate()


# ============================================================== sequences
def make_sequences(seed=0, lengths=(5, 1, 12, 7, 3, 9, 4), D=2):
    """Sequences whose first column is the global step index (so order can be checked) and Xprev = that - 0.5."""
    rng = np.random.default_rng(seed)
    T = sum(lengths)
    X = np.column_stack([np.arange(T, dtype=float), rng.normal(size=(T, D - 1)) + 3.0])
    seq_range = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    labels = rng.integers(0, 3, size=T)
    return X, seq_range, X - 0.5, labels


def read_all_seqs(store):
    """Concatenate every batch of a seq store, checking each batch against the store's split."""
    X, Xprev, lengths = [], [], []
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        assert isinstance(batch, SeqBatch)
        assert batch.X.dtype == np.float64 and batch.X.flags.c_contiguous
        assert batch.seq_range.dtype == np.int64 and batch.seq_range[0] == 0 and batch.seq_range[-1] == batch.n_atoms
        assert batch.first_seq == store.offsets[b] and batch.n_seqs == store.offsets[b + 1] - store.offsets[b]
        assert batch.start == sum(len(x) for x in X) and batch.n_atoms == store.batch_sizes()[b]
        X.append(batch.X)
        lengths.append(np.diff(batch.seq_range))
        if batch.Xprev is not None:
            Xprev.append(batch.Xprev)
    Xprev = np.concatenate(Xprev) if Xprev else None
    return np.concatenate(X), np.r_[0, np.cumsum(np.concatenate(lengths))], Xprev


def test_write_sequences_round_trip(tmp_path):
    X, seq_range, Xprev, y = make_sequences()
    path = write_sequences(tmp_path / "s.h5", X, seq_range, Xprev=Xprev, n_batches=3, labels=y, source="unit")
    assert [p.name for p in tmp_path.iterdir()] == ["s.h5"]
    with BatchStore.open(path) as store:
        assert isinstance(store, SeqStore) and store.kind == "seq"
        assert (store.n_atoms, store.D, store.n_seqs, store.n_batches) == (41, 2, 7, 3)
        assert store.has_xprev and store.has_labels and store.batches_fixed
        assert store.offsets.tolist() == [0, 3, 5, 7]  # whole sequences per batch
        assert store.batch_sizes().tolist() == [18, 10, 13]  # time steps per batch
        got_X, got_range, got_prev = read_all_seqs(store)
        np.testing.assert_array_equal(got_X, X)
        np.testing.assert_array_equal(got_range, seq_range)
        np.testing.assert_array_equal(got_prev, Xprev)
        np.testing.assert_array_equal(store.labels(), y)
        batch = store.read_batch(1)
        assert (batch.start, batch.first_seq, batch.seq_range.tolist()) == (18, 3, [0, 7, 10])
        np.testing.assert_array_equal(batch.X, X[18:28])
        info = store.info()
        assert (info["kind"], info["N"], info["n_seqs"], info["seq_length_min"], info["seq_length_max"],
                info["xprev"], info["batch_unit"], info["batch_size_max"]) == ("seq", 41, 7, 1, 12, True,
                                                                               "sequences", 3)
        assert repr(store).startswith("SeqStore(") and "n_seqs=7" in repr(store)
        clone = pickle.loads(pickle.dumps(store))
        np.testing.assert_array_equal(clone.read_batch(2).Xprev, Xprev[28:])
        clone.close()
    with h5py.File(path, "r") as f:
        assert (f.attrs["kind"], f.attrs["N"], f.attrs["D"], f.attrs["n_seqs"]) == ("seq", 41, 2, 7)
        assert f["batch_offsets"][()].tolist() == [0, 3, 5, 7] and f["seq_range"].dtype == np.int64
    path = write_sequences(tmp_path / "plain.h5", X, seq_range)
    with BatchStore.open(path) as store:
        assert not store.has_xprev and store.labels() is None and store.read_batch(0).Xprev is None


def test_open_returns_the_reader_of_the_kind(tmp_path):
    X, seq_range, _, _ = make_sequences()
    ids, counts, dr = make_corpus(0, N=5)
    paths = {PointStore: write_points(tmp_path / "p.h5", X), BowStore: write_documents(tmp_path / "b.h5", ids, counts,
                                                                                       dr, 40),
             SeqStore: write_sequences(tmp_path / "s.h5", X, seq_range)}
    for cls, path in paths.items():
        with BatchStore.open(path) as store, cls.open(path) as same:
            assert type(store) is cls and type(same) is cls
    with pytest.raises(BnpviError, match=r"b\.h5 holds data of kind 'bow', which PointStore does not read"):
        PointStore.open(paths[BowStore])


def test_seq_resplit_keeps_sequences_whole(tmp_path):
    X, seq_range, _, y = make_sequences(1)
    fixed = write_sequences(tmp_path / "fixed.h5", X, seq_range, n_batches=2, labels=y)
    free = write_sequences(tmp_path / "free.h5", X, seq_range, batches_fixed=False)
    with pytest.raises(BnpviError, match=r"fixed\.h5 has 2 fixed batches; alg\.n_batches=3 conflicts"):
        BatchStore.open(fixed, n_batches=3)
    with pytest.raises(BnpviError, match=r"free\.h5 has only n_seqs=7 sequences; alg\.n_batches=8"):
        BatchStore.open(free, n_batches=8)
    with BatchStore.open(free, n_batches=4) as store:
        assert store.offsets.tolist() == [0, 2, 4, 6, 7] and store.batch_sizes().tolist() == [6, 19, 12, 4]
        got_X, got_range, _ = read_all_seqs(store)
        np.testing.assert_array_equal(got_X, X)
        np.testing.assert_array_equal(got_range, seq_range)
    with h5py.File(free, "r") as f:  # the file itself is untouched
        assert f["batch_offsets"][()].tolist() == [0, 7]


BAD_SEQS = [
    (dict(seq_range=[1, 5, 41]), "seq_range must start at 0"),
    (dict(seq_range=[0, 5, 40]), "seq_range ends at 40 but X has T=41 rows"),
    (dict(seq_range=[0, 5, 5, 41]), "sequence 1 is empty"),
    (dict(seq_range=[0, 9, 5, 41]), "seq_range decreases at sequence 1"),
    (dict(seq_range=[0.0, 2.5, 41.0]), "seq_range must hold integers"),
    (dict(seq_range=[0]), "no sequences"),
    (dict(X="inf"), "X has inf in row 7, column 1"),
    (dict(Xprev="nan"), "Xprev has NaN in row 7, column 1"),
    (dict(Xprev="inf"), "Xprev has inf in row 7, column 1"),
    (dict(Xprev=np.zeros((41, 3))), r"Xprev has shape \(41, 3\) but X has shape \(41, 2\)"),
    (dict(labels=np.zeros(40, dtype=int)), "labels have 40 entries but X has 41 rows"),
    (dict(n_batches=8), "n_batches=8 must be between 1 and n_seqs=7"),
    (dict(n_batches=0), "n_batches=0 must be between 1 and n_seqs=7"),
]


@pytest.mark.parametrize("change, fragment", BAD_SEQS)
def test_write_sequences_rejects_bad_input(tmp_path, change, fragment):
    X, seq_range, Xprev, y = make_sequences()
    args = dict(X=X, seq_range=seq_range, Xprev=Xprev, labels=y)
    for name in ("X", "Xprev"):
        if isinstance(change.get(name), str):
            bad = args[name].copy()
            bad[7, 1] = np.nan if change[name] == "nan" else np.inf
            change = {**change, name: bad}
    args.update(change)
    with pytest.raises(BnpviError, match=fragment) as info:
        write_sequences(tmp_path / "bad.h5", **args)
    assert "bad.h5" in str(info.value) and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dataset, fragment", [
    ("X", r"s\.h5 has inf in X at time step 20 \(sequence 3, batch 1, column 1\)"),
    ("Xprev", r"s\.h5 has NaN in Xprev at time step 20 \(sequence 3, batch 1, column 1\)"),
    ("seq_range", r"s\.h5: sequence 4 is empty \(batch 1\)"),
])
@pytest.mark.parametrize("scan_values", [2**22, 5])
def test_seq_scan_names_step_sequence_and_batch(tmp_path, monkeypatch, dataset, fragment, scan_values):
    monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", scan_values)
    X, seq_range, Xprev, _ = make_sequences()
    path = write_sequences(tmp_path / "s.h5", X, seq_range, Xprev=Xprev, n_batches=3)
    with h5py.File(path, "r+") as f:
        if dataset == "seq_range":
            f["seq_range"][5] = f["seq_range"][4]
        else:
            if dataset == "X":
                f["X"][19, 0] = np.nan  # a missing entry, not an error
            f[dataset][20, 1] = np.inf if dataset == "X" else np.nan
    with BatchStore.open(path) as store:
        for check in (store.scan, store.validate):
            with pytest.raises(BnpviError, match=fragment):
                check()


def _corrupt(kind, path):
    with h5py.File(path, "r+") as f:
        if kind == "bow":
            f["word_counts"][3] = -1.0
        else:
            f["X"][4, 0] = np.inf


@pytest.mark.parametrize("kind", ["points", "bow", "seq"])
def test_scan_is_moments_plus_validate(tmp_path, monkeypatch, kind):
    X, seq_range, Xprev, _ = make_sequences(2)
    X = X + 1e6
    ids, counts, dr = make_corpus(5)
    path = {"points": lambda p: write_points(p, X, n_batches=3),
            "bow": lambda p: write_documents(p, ids, counts, dr, 40, n_batches=3),
            "seq": lambda p: write_sequences(p, X, seq_range, Xprev=Xprev, n_batches=3)}[kind](tmp_path / "d.h5")
    for scan_values in (2**22, 7):  # one block, then many
        monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", scan_values)
        with BatchStore.open(path) as store:
            scanned, moments = store.scan(), store.moments()
        if kind == "bow":
            assert scanned is None and moments is None
            continue
        assert scanned.n_atoms == moments.n_atoms == 41
        np.testing.assert_array_equal(scanned.mean, moments.mean)
        np.testing.assert_array_equal(scanned.cov, moments.cov)
        np.testing.assert_allclose(scanned.mean, X.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(scanned.cov, np.cov(X.T, bias=True), rtol=1e-8, atol=1e-10)
    _corrupt(kind, path)
    with BatchStore.open(path) as store:
        with pytest.raises(BnpviError, match="d.h5"):
            store.scan()
        with pytest.raises(BnpviError, match="d.h5"):
            store.validate()


@pytest.mark.parametrize("mutation, fragment", [
    ("drop_range", "missing the dataset 'seq_range'"),
    ("range_end", r"inconsistent seq_range \(need seq_range\[0\] = 0 and seq_range\[n_seqs\] = T=41"),
    ("n_seqs", "attribute n_seqs=9 but seq_range describes 7 sequences"),
    ("xprev", r"invalid Xprev dataset \(expected \(41, 2\)"),
    ("offsets", r"inconsistent batch_offsets \(need 0 = o_0 < o_1 < \.\.\. < o_B = n_seqs=7"),
    ("interior", r"inconsistent seq_range \(batch 0 would hold time steps 0\.\.0\)"),
])
def test_open_rejects_bad_seq_files(tmp_path, mutation, fragment):
    X, seq_range, _, _ = make_sequences()
    path = write_sequences(tmp_path / "weird.h5", X, seq_range, n_batches=2)
    with h5py.File(path, "a") as f:
        if mutation == "drop_range":
            del f["seq_range"]
        elif mutation == "range_end":
            f["seq_range"][7] = 40
        elif mutation == "n_seqs":
            f.attrs["n_seqs"] = np.int64(9)
        elif mutation == "xprev":
            f.create_dataset("Xprev", data=np.zeros((41, 3)))
        elif mutation == "offsets":
            del f["batch_offsets"]
            f.create_dataset("batch_offsets", data=np.array([0, 3, 41]))
        else:
            f["seq_range"][4] = 0
    with pytest.raises(BnpviError, match=fragment) as info:
        BatchStore.open(path)
    assert "weird.h5" in str(info.value) and "\n" not in str(info.value)


# ----------------------------------------------------- sequence converters
def test_convert_npz_sequences_with_labels_and_xprev(tmp_path):
    X, seq_range, Xprev, y = make_sequences(3)
    np.savez(tmp_path / "s.npz", X=X, Xprev=Xprev, bounds=seq_range.astype(np.int32), state=y)
    dst = convert(tmp_path / "s.npz", tmp_path / "s.h5", n_batches=2, labels="state", sequences="bounds")
    with BatchStore.open(dst) as store:
        assert (store.kind, store.n_seqs, store.n_batches, store.batches_fixed) == ("seq", 7, 2, True)
        got_X, got_range, got_prev = read_all_seqs(store)
        np.testing.assert_array_equal(got_X, X)
        np.testing.assert_array_equal(got_range, seq_range)
        np.testing.assert_array_equal(got_prev, Xprev)
        np.testing.assert_array_equal(store.labels(), y)
    np.savez(tmp_path / "plain.npz", X=X, bounds=seq_range)  # no Xprev: none is made up
    with BatchStore.open(convert(tmp_path / "plain.npz", tmp_path / "plain.h5", sequences="bounds")) as store:
        assert not store.has_xprev and not store.batches_fixed and store.n_batches == 1


@pytest.mark.parametrize("arrays, options, fragment", [
    (dict(bounds=[0, 5, 5, 41]), {}, r"s\.npz: sequence 1 is empty"),
    (dict(bounds=[0, 5, 40]), {}, "bounds ends at 40 but X has T=41"),
    (dict(), dict(sequences="nope"), "no sequence range array 'nope'"),
    (dict(Xprev=np.zeros((41, 1))), {}, "Xprev has shape"),
    (dict(state=np.zeros(7)), dict(labels="state"), "labels have 7 entries but X has 41 rows"),
    (dict(), dict(sequence_column="bounds"), "use|name it with --sequences"),
    (dict(), dict(n_batches=8), "has n_seqs=7 sequences; the number of batches must be between 1 and 7"),
    (dict(), dict(vocab_size=3), "holds sequences, not bag-of-words documents"),
])
def test_convert_npz_sequences_bad_input(tmp_path, arrays, options, fragment):
    X, seq_range, _, _ = make_sequences()
    np.savez(tmp_path / "s.npz", **{"X": X, "bounds": seq_range, **arrays})
    options = {"sequences": "bounds", **options} if "sequence_column" not in options else options
    with pytest.raises(BnpviError, match=fragment) as info:
        convert(tmp_path / "s.npz", tmp_path / "out.h5", **options)
    assert "s.npz" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "out.h5").exists()


def test_convert_csv_sequences(tmp_path):
    X, seq_range, _, y = make_sequences(4)
    ids = np.repeat([f"subject{s}" for s in (3, 1, 4, 0, 5, 9, 2)], np.diff(seq_range))
    df = pd.DataFrame(X, columns=["a", "b"])
    df.insert(1, "who", ids)
    df["state"] = y
    df.to_csv(tmp_path / "s.csv", index=False, float_format="%.17g")
    dst = convert(tmp_path / "s.csv", tmp_path / "s.h5", n_batches=3, labels="state", sequence_column="who")
    with BatchStore.open(dst) as store:
        assert (store.kind, store.D, store.n_seqs) == ("seq", 2, 7)  # the id and label columns are not data
        got_X, got_range, got_prev = read_all_seqs(store)
        np.testing.assert_array_equal(got_X, X)
        np.testing.assert_array_equal(got_range, seq_range)
        assert got_prev is None
        np.testing.assert_array_equal(store.labels(), y)
    ids[30] = "subject1"  # sequence 1 comes back inside sequence 5
    df["who"] = ids
    df.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(BnpviError, match=r"s\.csv: sequence id 'subject1' in row 30 reappears after other "
                                         r"sequences; the rows of one sequence must be contiguous") as info:
        read_sequences(tmp_path / "s.csv", sequence_column="who")
    assert "\n" not in str(info.value)
    with pytest.raises(BnpviError, match="name it with --sequence-column"):
        read_sequences(tmp_path / "s.csv", sequences="who")
    with pytest.raises(BnpviError, match="no column 'whom' for sequence ids"):
        read_sequences(tmp_path / "s.csv", sequence_column="whom")


def test_shuffle_keeps_sequences_whole(tmp_path):
    X, seq_range, Xprev, y = make_sequences(5)
    np.savez(tmp_path / "s.npz", X=X, Xprev=Xprev, seq_range=seq_range, y=y)
    dst = convert(tmp_path / "s.npz", tmp_path / "s.h5", n_batches=2, labels="y", sequences="seq_range",
                  shuffle_seed=3)
    with BatchStore.open(dst) as store:
        got_X, got_range, got_prev = read_all_seqs(store)
        labels = store.labels()
        assert "sequences shuffled, seed 3" in store.attrs["source"]
    order = []
    for s in range(7):
        steps = got_X[got_range[s]:got_range[s + 1], 0].astype(int)  # column 0 = original step index
        original = int(np.searchsorted(seq_range, steps[0], side="right") - 1)
        np.testing.assert_array_equal(steps, np.arange(seq_range[original], seq_range[original + 1]))
        order.append(original)
    assert sorted(order) == list(range(7)) and order != list(range(7))
    steps = got_X[:, 0].astype(int)
    np.testing.assert_array_equal(got_X, X[steps])
    np.testing.assert_array_equal(got_prev, Xprev[steps])
    np.testing.assert_array_equal(labels, y[steps])


def test_cli_convert_and_info_sequences(tmp_path, capsys):
    X, seq_range, Xprev, y = make_sequences(6)
    np.savez(tmp_path / "s.npz", X=X, Xprev=Xprev, seq_range=seq_range, z=y)
    assert main(["convert", str(tmp_path / "s.npz"), str(tmp_path / "s.h5"), "--sequences", "seq_range",
                 "--labels", "z", "--batches", "3", "--shuffle", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "kind=seq N=41 time steps D=2 sequences=7 batches=3 (fixed) labels=yes" in out[0], out
    assert main(["info", str(tmp_path / "s.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    for fragment in ("kind:      seq (sequences)", "N:         41 time steps", "D:         2",
                     "sequences: 7, length 1..12", "Xprev:     yes", "batches:   3 (fixed), sequences per batch 2..3",
                     "labels:    yes", "check:     all values finite"):
        assert fragment in out, out
    (tmp_path / "bad.csv").write_text("id,x\na,1\nb,2\na,3\n")
    assert main(["convert", str(tmp_path / "bad.csv"), str(tmp_path / "bad.h5"), "--sequence-column", "id"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sequence id 'a' in row 2 reappears" in err[0], err
    assert not (tmp_path / "bad.h5").exists()


# ------------------------------------------------------------ toy sequences
def test_toy_sequences_are_deterministic_sticky_and_start_in_turn():
    X, seq_range, y = make_toy_sequences(n_seqs=20, length=500, seed=4)
    X2, _, y2 = make_toy_sequences(n_seqs=20, length=500, seed=4)
    X3, _, _ = make_toy_sequences(n_seqs=20, length=500, seed=5)
    assert X.shape == (10000, 2) and X.dtype == np.float64 and y.dtype == np.int64
    assert seq_range.tolist() == list(range(0, 10001, 500))
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(X, X3)
    paths = y.reshape(20, 500)
    assert paths[:, 0].tolist() == [s % 8 for s in range(20)]
    assert set(np.unique(y)) == set(range(8))
    changes = np.diff(paths, axis=1)
    assert 0.0003 < np.mean(changes != 0) < 0.003  # a state persists with probability 0.999
    assert np.all((changes[changes != 0] % 8) == 1)  # and then moves on to the next state
    means = np.array([X[y == k].mean(axis=0) for k in range(8)])
    np.testing.assert_allclose(means[:3], [[0, 20], [20, 0], [-30, -30]], atol=0.2)
    np.testing.assert_allclose(np.cov(X[y == 0].T), np.eye(2), atol=0.15)


def test_ensure_toy_sequences_writes_once(tmp_path, monkeypatch):
    monkeypatch.setenv("BNPVI_CACHE", str(tmp_path))
    path = ensure_toy_sequences(n_seqs=10, length=50, seed=1, n_batches=4)
    assert path == toy_sequences_path(10, 50, 1, 4) == tmp_path / "toyseq8_n10_t50_s1_b4.h5"
    X, seq_range, y = make_toy_sequences(n_seqs=10, length=50, seed=1)
    with BatchStore.open(path) as store:
        assert (store.kind, store.n_seqs, store.n_batches, store.batches_fixed) == ("seq", 10, 4, False)
        got_X, got_range, _ = read_all_seqs(store)
        np.testing.assert_array_equal(got_X, X)
        np.testing.assert_array_equal(got_range, seq_range)
        np.testing.assert_array_equal(store.labels(), y)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert ensure_toy_sequences(n_seqs=10, length=50, seed=1, n_batches=4) == path
    assert path.stat().st_mtime_ns == 1_000_000_000  # reused, not rewritten
    path.write_bytes(b"broken")  # a broken cache file is rebuilt
    ensure_toy_sequences(n_seqs=10, length=50, seed=1, n_batches=4)
    with BatchStore.open(path) as store:
        assert store.n_atoms == 500
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toyseq8_n10_t50_s1_b4.h5"]
    for kwargs, fragment in [(dict(n_batches=11), "n_batches=11 must be between 1 and n_seqs=10"),
                             (dict(length=0), "length must be at least 1"),
                             (dict(n_seqs=2.5), "n_seqs must be an integer")]:
        with pytest.raises(BnpviError, match=fragment):
            ensure_toy_sequences(**{"n_seqs": 10, "length": 50, **kwargs})



def test_joined_rows_read_across_their_parts_by_slices_and_by_index(tmp_path):
    from bnpvi.data.mapped import JoinedRows

    first, second = np.arange(12.0).reshape(6, 2), -np.arange(8.0).reshape(4, 2)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["X"] = first
    with h5py.File(tmp_path / "a.h5", "r") as f:
        joined = JoinedRows([f["X"], second])
        whole = np.vstack([first, second])
        assert joined.shape == (10, 2) and joined.dtype == np.float64
        for lo, hi in ((0, 10), (4, 8), (6, 9), (0, 3), (7, 7)):
            np.testing.assert_array_equal(joined[lo:hi], whole[lo:hi])
        index = np.array([9, 0, 5, 6, 5, 2])
        np.testing.assert_array_equal(joined[index], whole[index])
