"""--columns and --labels-file for every kind of source; string labels stored as codes with their names."""
import re

import numpy as np
import pandas as pd
import pytest

from bnpvi.cli.data import main
from bnpvi.data.convert import convert
from bnpvi.data.labels import encode_labels, read_labels_file
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError


def points_csv(path, n=12):
    """A CSV with a time column, two data columns and a string label column."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"t": np.arange(n), "a": rng.normal(size=n), "b": rng.normal(size=n),
                       "kind": np.where(np.arange(n) % 3 == 0, "setosa", "virginica")})
    df.to_csv(path, index=False, float_format="%.17g")
    return df


def contents(path):
    with BatchStore.open(path) as store:
        X = np.concatenate([store.read_batch(b).X for b in range(store.n_batches)])
        return X, store.labels(), store.label_names(), store.info()


@pytest.mark.parametrize("columns", ["a,b", "1,2", ["a", "b"], " a , b "])
def test_columns_choose_the_data_of_points(tmp_path, columns):
    df = points_csv(tmp_path / "p.csv")
    X, labels, names, info = contents(convert(tmp_path / "p.csv", tmp_path / "p.h5", columns=columns, labels="kind"))
    np.testing.assert_array_equal(X, df[["a", "b"]].to_numpy())
    assert info["D"] == 2 and names == ["setosa", "virginica"]
    assert [names[c] for c in labels] == df["kind"].tolist()  # the code -> name mapping round-trips


def test_columns_drop_the_time_step_column_of_sequences(tmp_path):
    """The issue's case: a CSV of sequences keeps its time-step column as a feature unless --columns leaves it
    out; the labels of every time step come from a labels file, as names."""
    steps = pd.DataFrame({"seq": np.repeat(["s1", "s2", "s3"], [4, 3, 5]), "t": np.r_[0:4, 0:3, 0:5],
                          "x": np.arange(12.0), "y": -np.arange(12.0)})
    steps.to_csv(tmp_path / "s.csv", index=False)
    states = ["walk", "walk", "run", "run", "jump", "walk", "walk", "run", "run", "run", "jump", "jump"]
    (tmp_path / "states.txt").write_text("\n".join(states) + "\n")
    with BatchStore.open(convert(tmp_path / "s.csv", tmp_path / "all.h5", sequence_column="seq")) as store:
        assert store.D == 3  # t, x, y
    dst = convert(tmp_path / "s.csv", tmp_path / "s.h5", sequence_column="seq", columns="x,y",
                  labels_file=tmp_path / "states.txt")
    with BatchStore.open(dst) as store:
        batch = store.read_batch(0)
        assert store.D == 2 and batch.seq_range.tolist() == [0, 4, 7, 12]
        np.testing.assert_array_equal(batch.X, steps[["x", "y"]].to_numpy())
        names = store.label_names()
        assert names == ["jump", "run", "walk"] and [names[c] for c in store.labels()] == states


def test_labels_file_for_points_and_documents(tmp_path):
    np.save(tmp_path / "p.npy", np.arange(8.0).reshape(4, 2))
    (tmp_path / "p.txt").write_text("3\n1\n3\n0\n")  # integers stay integers
    X, labels, names, _ = contents(convert(tmp_path / "p.npy", tmp_path / "p.h5", labels_file=tmp_path / "p.txt"))
    assert labels.tolist() == [3, 1, 3, 0] and names is None
    (tmp_path / "c.ldac").write_text("1 0:1\n2 3:2 1:1\n1 2:5\n")
    (tmp_path / "c.txt").write_text("sports\r\n politics \r\nsports\r\n")
    with BatchStore.open(convert(tmp_path / "c.ldac", tmp_path / "c.h5", labels_file=tmp_path / "c.txt",
                                 heldout=0.34, heldout_seed=0)) as store:
        names = store.label_names()
        train, held = store.heldout_indices()
        got = dict(zip(train, (names[c] for c in store.labels()))) | \
            dict(zip(held, (names[c] for c in store.heldout_labels())))
        assert names == ["politics", "sports"] and got == {0: "sports", 1: "politics", 2: "sports"}


def test_string_labels_of_an_npz_and_encode_labels():
    labels, names = encode_labels(np.array(["b", "a", "b", "c"]), "x")
    assert labels.tolist() == [1, 0, 1, 2] and names == ("a", "b", "c")
    assert encode_labels(np.array(["10", "9", "10"]), "x")[0].tolist() == [10, 9, 10]
    assert encode_labels(np.array([0.5, 1.5, 0.5]), "x") == (pytest.approx([0, 1, 0]), ("0.5", "1.5"))
    with pytest.raises(BnpviError, match="missing or non-finite value in row 1"):
        encode_labels(np.array([1.0, np.nan]), "x")


@pytest.mark.parametrize("text, fragment", [
    ("a\n\nb\n", "lab.txt, line 2: blank line (one label per line)"),
    ("a\n \n\n", None),  # blank lines at the end are no labels
    ("", "lab.txt holds no labels"),
    ("\n\n", "lab.txt holds no labels"),
])
def test_labels_file_lines(tmp_path, monkeypatch, text, fragment):
    monkeypatch.setattr("bnpvi.data.labels._CHUNK_LINES", 1)  # a blank run across chunks is still seen
    (tmp_path / "lab.txt").write_text(text)
    if fragment is None:
        assert read_labels_file(tmp_path / "lab.txt") == ([0], ("a",))
        return
    with pytest.raises(BnpviError, match=re.escape(fragment)):
        read_labels_file(tmp_path / "lab.txt")


def test_label_names_shown_by_info(tmp_path, capsys):
    points_csv(tmp_path / "p.csv")
    assert main(["convert", str(tmp_path / "p.csv"), str(tmp_path / "p.h5"), "--labels", "kind", "--columns",
                 "a,b"]) == 0
    out = capsys.readouterr().out
    assert "D=2" in out and "labels=yes (2 names: setosa, virginica)" in out, out
    assert main(["info", str(tmp_path / "p.h5")]) == 0
    assert "labels:  yes (2 names: setosa, virginica)" in capsys.readouterr().out


@pytest.mark.parametrize("args, fragment", [
    (["{tmp}/p.csv", "--columns", "a,z"], "p.csv: no column 'z' for --columns (columns: t, a, b, kind)"),
    (["{tmp}/p.csv", "--columns", "a,a"], "column 'a' is listed twice in --columns"),
    (["{tmp}/p.csv", "--columns", "a,kind", "--labels", "kind"], "column 'kind' is both a data column (--columns)"),
    (["{tmp}/p.csv", "--columns", "a,9"], "no column '9' for --columns"),
    (["{tmp}/p.csv", "--columns", "a,,b"], "--columns must list column names or indices"),
    (["{tmp}/p.npy", "--columns", "0"], "--columns picks the data columns of a CSV file"),
    (["{tmp}/p.csv", "--labels-file", "{tmp}/three.txt", "--columns", "a"],
     "three.txt has 3 labels (one per line) but"),
    (["{tmp}/p.npy", "--labels-file", "{tmp}/nope.txt"], "labels file not found"),
    (["{tmp}/p.csv", "--labels", "kind", "--labels-file", "{tmp}/three.txt"], "not both"),
    (["{tmp}/c.ldac", "--columns", "a"], "c.ldac holds bag-of-words documents, not points or sequences; "
                                          "--columns applies only to points and sequences"),
])
def test_cli_column_and_label_errors_are_one_line(tmp_path, capsys, args, fragment):
    points_csv(tmp_path / "p.csv")
    np.save(tmp_path / "p.npy", np.zeros((4, 2)))
    (tmp_path / "three.txt").write_text("x\ny\nz\n")
    (tmp_path / "c.ldac").write_text("1 0:1\n")
    args = [a.format(tmp=tmp_path) for a in args]
    assert main(["convert", args[0], str(tmp_path / "out.h5"), *args[1:]]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: ") and fragment in lines[0], lines
    assert captured.out == "" and not (tmp_path / "out.h5").exists()
