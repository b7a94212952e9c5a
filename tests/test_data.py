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

from bnpvi.cli.data import main
from bnpvi.data.batch import PointBatch
from bnpvi.data.convert import convert, read_table
from bnpvi.data.store import BatchStore, split_offsets, write_points
from bnpvi.data.toy import ensure_toy, make_toy, toy_path
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
        monkeypatch.setattr("bnpvi.data.store._SCAN_VALUES", scan_values)
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
        f["X"][60, 2] = np.nan
        f["X"][90, 0] = np.inf
    with BatchStore.open(path) as store:
        with pytest.raises(BnpviError, match=r"nan\.h5 has NaN in row 60 \(batch 2, column 2\)"):
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
    (lambda p: _h5(p, kind="graph"), "kind 'graph'"),
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
    ("nan.csv", "1,2\n3,nan\n5,6\n", None, "row 1"),
    ("blank.csv", "1,2\n3,\n5,6\n", None, "row 1"),
    ("inf.csv", "x,y\n1,2\n3,4\n5,inf\n", None, "inf in row 2"),
    ("empty.csv", "", None, "empty"),
    ("header_only.csv", "x,y\n", None, "no data rows"),
    ("text.csv", "x,y\n1,2\n3,four\n", None, "non-numeric value 'four' in row 1, column 'y'"),
    ("data.xlsx", "1,2\n", None, "unknown file type"),
    ("labels.csv", "x,y\n1,2\n3,4\n", "cls", "no column 'cls'"),
    ("one_d.npy", np.arange(5.0), None, "1-D"),
    ("three_d.npz", np.zeros((2, 2, 2)), None, "2-D"),
    ("nan.npz", np.array([[1.0, 2.0], [3.0, 4.0], [np.nan, 1.0]]), None, "NaN in row 2"),
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
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n3,nan\n")
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

    monkeypatch.setattr("bnpvi.data.store.os.replace", broken_replace)
    with pytest.raises(BnpviError, match=r"cannot write .*new\.h5: No space left"):
        write_points(tmp_path / "new.h5", X)
    with pytest.raises(BnpviError):
        write_points(old, X)
    assert [p.name for p in tmp_path.iterdir()] == ["d.h5"]
    with BatchStore.open(old) as store:  # the existing file is intact
        assert store.n_atoms == 5
