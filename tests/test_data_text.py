"""Raw text in (bnpvi-data convert --text): tokenising, stop words, frequency limits, chunks, tables, new text."""
import re

import h5py
import numpy as np
import pytest

from bnpvi.cli.data import main
from bnpvi.data.convert import convert
from bnpvi.data.store import BatchStore
from bnpvi.data.text_in import VocabularyLimits, count_text_file, read_text, text_documents
from bnpvi.data.tokens import TextSettings, count_texts
from bnpvi.errors import BnpviError

LINES = [
    "The cat sat on the mat.",
    "The dog ate the cat's food!",
    "",
    "A bird, a cat and a dog.",
    "the the the",
    "Dogs and cats: friends? The CAT agrees.",
]
# After lower-casing, tokens of 2+ word characters and English stop words ("the", "on", "a", "and"):
#   0: cat sat mat   1: dog ate cat food   2: -   3: bird cat dog   4: -   5: dogs cats friends cat agrees
# so "cat" is in 4 documents, "dog" in 2, every other word in 1.
LABELS = ["pets", "pets", "none", "birds", "none", "pets"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("\n".join(LINES) + "\n")
    (tmp_path / "labels.txt").write_text("\n".join(LABELS) + "\n\n")  # blank lines at the end are no labels
    return path


def stored(path):
    with BatchStore.open(path) as store:
        batch = store.read_batch(0)
        return (store.vocab(), batch.csr().toarray(), store.labels(), store.label_names(), store.text_origin(),
                store.info())


def test_stop_words_and_document_frequency_limits(corpus, tmp_path):
    """min_df=2 keeps words in at least 2 documents (cat, dog); max_df=0.7 keeps those in at most 4.2 of the 6
    (cat, in 4, stays); the two documents left without a word are dropped, their labels with them."""
    dst = convert(corpus, tmp_path / "d.h5", text=True, stop_words="english", min_df=2, max_df=0.7,
                  labels_file=tmp_path / "labels.txt")
    vocab, counts, labels, names, origin, info = stored(dst)
    assert vocab == ["cat", "dog"]
    np.testing.assert_array_equal(counts, [[1, 0], [1, 1], [1, 1], [1, 0]])
    assert names == ["birds", "none", "pets"] and [names[c] for c in labels] == ["pets", "pets", "birds", "pets"]
    assert origin.dropped.tolist() == [2, 4] and origin.n_source == 6
    assert (origin.min_df, origin.max_df, origin.max_vocab) == (2, 0.7, None)
    assert origin.settings == TextSettings.make("english")
    assert info["text_dropped"] == 2 and "stop words english (318)" in info["text"]
    with h5py.File(dst) as f:  # the options, as attributes apply can read
        assert bool(f["text"].attrs["lowercase"]) and f["text"].attrs["token_pattern"] == r"(?u)\b\w\w+\b"
        assert f["text"].attrs["stop_words"] == "english" and "the" in list(f["text/stop_words"].asstr()[()])
    # max_df=0.5 (at most 3 of 6 documents) removes "cat"
    dst = convert(corpus, tmp_path / "e.h5", text=True, stop_words="english", min_df=2, max_df=0.5)
    vocab, counts, labels, _, origin, _ = stored(dst)
    assert vocab == ["dog"] and counts.tolist() == [[1], [1]] and labels is None
    assert origin.dropped.tolist() == [0, 2, 4, 5]


def test_max_vocab_keeps_the_most_frequent_words(corpus, tmp_path):
    """Without stop words: "the" 8 tokens, "cat" 4, then "and" and "dog" 2 each (ties go to the first)."""
    dst = convert(corpus, tmp_path / "d.h5", text=True, stop_words="none", max_vocab=3)
    vocab, counts, _, _, origin, _ = stored(dst)
    assert vocab == ["and", "cat", "the"]
    np.testing.assert_array_equal(counts, [[0, 1, 2], [0, 1, 2], [1, 1, 0], [0, 0, 3], [1, 1, 1]])
    assert origin.dropped.tolist() == [2] and origin.settings.stop_words == ()


def test_reading_in_chunks_changes_nothing(corpus, tmp_path, monkeypatch):
    whole = read_text(corpus, stop_words="english")
    monkeypatch.setattr("bnpvi.data.text_in._CHUNK_DOCS", 2)
    monkeypatch.setattr("bnpvi.data.labels._CHUNK_LINES", 4)
    chunked = read_text(corpus, stop_words="english")
    for name in ("word_ids", "word_counts", "doc_range"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name))
    assert chunked.vocab == whole.vocab and chunked.text.dropped.tolist() == whole.text.dropped.tolist() == [2, 4]
    in_memory = text_documents(lambda: [(LINES[:3], None), (LINES[3:], None)], TextSettings.make("english"),
                               VocabularyLimits.make(), "the lines")
    for name in ("word_ids", "word_counts", "doc_range"):
        np.testing.assert_array_equal(getattr(in_memory, name), getattr(whole, name))


def test_new_text_under_a_given_vocabulary(corpus, tmp_path):
    """count_texts counts known words and reports how many tokens were not in the vocabulary."""
    dst = convert(corpus, tmp_path / "d.h5", text=True, stop_words="english", min_df=2)
    with BatchStore.open(dst) as store:
        vocab, settings = store.vocab(), store.text_origin().settings
    counts, unknown = count_texts(["A cat and a zebra; the dog, the DOG!", "nothing here", "Unicorns"], vocab,
                                  settings)
    np.testing.assert_array_equal(counts.toarray(), [[1, 2], [0, 0], [0, 0]])  # "nothing", "here": stop words
    assert unknown == 2  # zebra, unicorns
    counts, unknown = count_text_file(corpus, vocab, settings)  # every line, none dropped
    assert counts.shape == (6, 2) and counts.toarray()[:, 0].tolist() == [1, 1, 0, 1, 0, 1]
    assert unknown == 2 + 2 + 1 + 4  # sat mat | ate food | bird | dogs cats friends agrees
    with pytest.raises(BnpviError, match="lists 'cat' more than once"):
        count_texts(["cat"], ["cat", "cat"], settings)


@pytest.mark.parametrize("suffix, sep", [(".csv", ","), (".tsv", "\t")])
def test_a_column_of_a_table(tmp_path, suffix, sep):
    body = '"Great phone, great battery"' if sep == "," else "Great phone, great battery"
    rows = [("id", "body", "stars"), ("1", body, "five"), ("2", "Bad battery; bad screen", "one"), ("3", "", "one"),
            ("4", "Screen is great", "five")]
    src = tmp_path / f"r{suffix}"
    src.write_text("\n".join(sep.join(row) for row in rows) + "\n")
    for column in ("body", "1"):
        dst = convert(src, tmp_path / f"r{column}.h5", text=True, text_column=column, labels="stars",
                      stop_words="english")
        vocab, counts, labels, names, origin, _ = stored(dst)
        assert vocab == ["bad", "battery", "great", "phone", "screen"]
        np.testing.assert_array_equal(counts, [[0, 1, 2, 1, 0], [2, 1, 0, 0, 1], [0, 0, 1, 0, 1]])
        assert names == ["five", "one"] and labels.tolist() == [0, 1, 0] and origin.dropped.tolist() == [2]


def test_held_out_documents_of_a_text_corpus(corpus, tmp_path):
    dst = convert(corpus, tmp_path / "d.h5", text=True, stop_words="none", heldout=0.5, heldout_seed=0,
                  n_batches=2, labels_file=tmp_path / "labels.txt")
    with BatchStore.open(dst) as store:
        train, held = store.heldout_indices()
        assert store.n_atoms + store.n_heldout == 5 and sorted(np.r_[train, held]) == list(range(5))
        names = store.label_names()
        assert [names[c] for c in store.heldout_labels()] == [["pets", "pets", "birds", "none", "pets"][i]
                                                              for i in held]


def test_cli_text_conversion_and_info(corpus, tmp_path, capsys):
    assert main(["convert", str(corpus), str(tmp_path / "d.h5"), "--text", "--stop-words", "english", "--min-df", "2",
                 "--max-df", "0.7", "--labels-file", str(tmp_path / "labels.txt")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith(f"wrote {tmp_path / 'd.h5'}: kind=bow N=4 documents V=2 nnz=6 tokens=6") and \
        out[0].endswith("labels=yes (3 names: birds, none, pets)"), out
    assert out[1].startswith("dropped 2 documents left without a word"), out
    assert main(["info", str(tmp_path / "d.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    assert "labels:  yes (3 names: birds, none, pets)" in out and "2 of 6 documents dropped" in out, out
    assert "words in at least 2 documents and at most 70 % of the documents" in out, out


@pytest.mark.parametrize("args, fragment", [
    (["--text", "--min-df", "5"], "d.txt: empty vocabulary after filtering: none of its 11 words is in at least 5"),
    (["--text", "--labels-file", "{tmp}/short.txt"], "short.txt has 2 labels (one per line) but"),
    (["--text", "--labels-file", "{tmp}/short.txt"], "d.txt has 6 documents"),
    (["--text", "--text-column", "body"], "--text-column names a column of a .csv or .tsv file"),
    (["--min-df", "2"], "d.txt: --stop-words applies only to text read with --text"),
    (["--text", "--max-df", "1.5"], "--max-df must be a number of documents"),
    (["--text", "--max-vocab", "0"], "--max-vocab must be at least 1, got 0"),
    (["--text", "--stop-words", "{tmp}/nope.txt"], "stop-word file not found"),
    (["--text", "--token-pattern", "(a)(b)"], "has 2 capturing groups"),
])
def test_cli_text_errors_are_one_line(corpus, tmp_path, capsys, args, fragment):
    (tmp_path / "short.txt").write_text("a\nb\n")
    args = [a.format(tmp=tmp_path) for a in args]
    assert main(["convert", str(corpus), str(tmp_path / "out.h5"), "--stop-words", "english", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: ") and fragment in lines[0], lines
    assert captured.out == "" and not (tmp_path / "out.h5").exists()


@pytest.mark.parametrize("name, text, options, fragment", [
    ("stop.txt", "the a an\nof the\n", {}, "no words in any of its 2 documents"),
    ("bad.txt", "fine\n\xff\n", {}, "bad.txt, line 2: not valid utf-8 text; name the file's encoding with --encoding"),
    ("t.csv", "id,body\n1,a cat\n", {"text_column": "text"}, "no column 'text' for the text (columns: id, body)"),
    ("t.csv", "id,body\n1,a cat\n", {}, "name the column that holds the text with --text-column"),
    ("h.csv", "id,body\n", {"text_column": "body"}, "holds no documents (only a header row)"),
    ("l.csv", "id,body,y\n1,a cat,x\n2,a dog,\n", {"text_column": "body", "labels": "y"},
     "labels column 'y' has a missing value in row 1"),
])
def test_bad_text_sources(tmp_path, name, text, options, fragment):
    src = tmp_path / name
    src.write_bytes(text.encode("latin-1"))
    with pytest.raises(BnpviError, match=re.escape(fragment)) as info:
        convert(src, tmp_path / "out.h5", text=True, stop_words="english", **options)
    assert "\n" not in str(info.value) and not (tmp_path / "out.h5").exists()
