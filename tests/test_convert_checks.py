"""Checks of bnpvi-data convert and the estimators' input (issue 47, items 11, 19 and 20): a .h5 output name, a
vocabulary without repeats, one stop-word default, an empty corpus, a closed stdout, memory flat in the corpus."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import bnpvi
from bnpvi.cli import apply as apply_cli, report as report_cli
from bnpvi.cli.data import main
from bnpvi.cli.errors import CLOSED_PIPE_STATUS
from bnpvi.data.convert import convert
from bnpvi.data.store import BatchStore, write_documents
from bnpvi.data.tokens import DEFAULT_STOP_WORDS
from bnpvi.errors import BnpviError


def one_line_error(capsys, *fragments: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines
    return lines[0]


# ---------------------------------------------------------------- item 19 (a)
@pytest.mark.parametrize("graph", [False, True])
def test_the_output_must_be_named_h5(tmp_path, capsys, graph):
    src = tmp_path / "a.csv"
    src.write_text("0,1\n1,2\n2,0\n")
    assert main(["convert", str(src), str(tmp_path / "a.txt"), *(["--graph"] if graph else [])]) == 2
    one_line_error(capsys, f"output file {tmp_path / 'a.txt'} must end in .h5", f"e.g. {tmp_path / 'a.h5'}")
    assert not (tmp_path / "a.txt").exists()
    assert main(["convert", str(src), str(tmp_path / "a.H5"), *(["--graph"] if graph else [])]) == 0


# ---------------------------------------------------------------- item 19 (b)
def test_a_vocabulary_file_with_a_repeated_word_is_refused_naming_both_lines(tmp_path, capsys):
    (tmp_path / "c.ldac").write_text("2 0:1 1:2\n1 2:1\n")
    (tmp_path / "v.txt").write_text("cat\ndog\n cat \n")
    assert main(["convert", str(tmp_path / "c.ldac"), str(tmp_path / "c.h5"), "--vocab", str(tmp_path / "v.txt")]) == 2
    one_line_error(capsys, "v.txt: the word 'cat' is on line 1 and again on line 3")
    with pytest.raises(BnpviError, match="vocab words 0 and 2 are both 'cat'"):
        write_documents(tmp_path / "d.h5", np.array([0, 1, 2]), np.ones(3), np.array([0, 2, 3]), 3,
                        vocab=["cat", "dog", "cat"])


# ---------------------------------------------------------------- item 19 (c)
@pytest.mark.parametrize("name, what", [("DPMixture", "X is empty: no rows"), ("FiniteMixture", "X is empty"),
                                        ("HDPTopicModel", "docs is empty: no documents"), ("LDA", "docs is empty"),
                                        ("HDPHMM", "seqs holds no sequence"), ("FiniteHMM", "seqs holds no sequence"),
                                        ("HDPMMSB", "A is empty: no nodes"), ("FiniteMMSB", "A is empty")])
@pytest.mark.parametrize("empty", [[], (), np.array([])], ids=["list", "tuple", "array"])
def test_fit_on_nothing_says_so_on_one_line(name, what, empty):
    if "HMM" in name and isinstance(empty, np.ndarray):
        empty = []  # an HMM takes a list of sequences; an array is refused as not a list
    with pytest.raises(BnpviError, match=f"^fit: {what}") as info:
        getattr(bnpvi, name)().fit(empty)
    assert "\n" not in str(info.value)


def test_an_empty_matrix_is_still_refused_as_scikit_learn_refuses_it():
    with pytest.raises(ValueError, match="0 sample"):
        bnpvi.DPMixture().fit(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="0 sample"):
        bnpvi.HDPTopicModel().fit(sp.csr_matrix((0, 5)))


# ---------------------------------------------------------------- item 19 (d)
class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone (``| head`` after its lines)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture
def points_file(tmp_path):
    src = tmp_path / "p.csv"
    src.write_text("1,2\n3,4\n5,6\n")
    return convert(src, tmp_path / "p.h5")


@pytest.mark.parametrize("command", ["data", "report", "apply"])
def test_a_closed_stdout_ends_every_command_quietly(points_file, tmp_path, capsys, monkeypatch, command):
    if command == "data":
        run = lambda: main(["info", str(points_file)])  # noqa: E731
    elif command == "report":
        monkeypatch.setattr(report_cli, "run", lambda *args: print("a table"))
        run = lambda: report_cli.main([str(tmp_path)])  # noqa: E731
    else:
        monkeypatch.setattr(apply_cli, "run", lambda *args: print("wrote it"))
        run = lambda: apply_cli.main(["run", "d.h5", "o.h5"])  # noqa: E731
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert run() == CLOSED_PIPE_STATUS == 141
    assert capsys.readouterr().err == ""


def test_a_real_closed_pipe_prints_nothing(points_file):
    """The reader closed before a byte is written; the interpreter's last flush must not complain either."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "bnpvi.cli.data", "info", str(points_file)], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (CLOSED_PIPE_STATUS, "")


# ---------------------------------------------------------------------- item 11
def test_one_stop_word_default_for_convert_and_the_topic_estimators(tmp_path):
    rng = np.random.default_rng(0)
    words = "the goal of a match and the team with its coach or a vote in the court".split()
    texts = [" ".join(rng.choice(words, 12)) for _ in range(40)]
    (tmp_path / "t.txt").write_text("\n".join(texts) + "\n")
    with BatchStore.open(convert(tmp_path / "t.txt", tmp_path / "t.h5", text=True)) as store:
        converted, settings = store.vocab(), store.text_origin().settings
    assert bnpvi.HDPTopicModel().stop_words == bnpvi.LDA().stop_words == DEFAULT_STOP_WORDS == "english"
    fitted = bnpvi.HDPTopicModel(n_laps=1).fit(texts)
    assert fitted.vocabulary_ == converted and "the" not in converted and "goal" in converted
    assert settings.stop_words_name == "english"


# ---------------------------------------------------------------------- item 20
def _peak_of_converting(path, dst) -> int:
    """Peak bytes traced by converting raw text ``path``, above what was held before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        convert(path, dst, text=True)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_raw_text_conversion_memory_does_not_grow_with_the_corpus(tmp_path, monkeypatch):
    """10x the documents (the same 300 words) peak within 1.5x: chunks of text and written blocks are bounded
    (here shrunk, to keep the corpora small); with whole-corpus chunks the peak grows about 10x."""
    monkeypatch.setattr("bnpvi.data.sources.TEXT_BLOCK", 2**14)
    monkeypatch.setattr("bnpvi.data.text_in.TEXT_BLOCK", 2**14)
    monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", 2**12)
    rng = np.random.default_rng(0)
    words = np.array([f"word{i}" for i in range(300)], dtype=object)
    for n_docs in (60, 600):
        docs = words[rng.integers(0, 300, size=(n_docs, 200))]
        docs[0, :] = words[:200]  # every word in the small corpus too: the vocabulary is the same
        docs[1, :100] = words[200:]
        (tmp_path / f"t{n_docs}.txt").write_text("\n".join(" ".join(doc) for doc in docs) + "\n")
    convert(tmp_path / "t60.txt", tmp_path / "warm.h5", text=True)  # imports and caches before measuring
    small, large = (_peak_of_converting(tmp_path / f"t{n}.txt", tmp_path / f"t{n}.h5") for n in (60, 600))
    assert large < 1.5 * small, (small, large)
