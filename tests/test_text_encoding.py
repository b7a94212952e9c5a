"""Text in any encoding (issue 47, item 5): ``--encoding`` for every text reader of ``bnpvi-data convert``, kept
with the tokeniser settings so that ``bnpvi-apply`` reads new text the same way."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

import bnpvi
from bnpvi.cli import apply as apply_cli
from bnpvi.cli.data import main
from bnpvi.data.convert import convert
from bnpvi.data.graph_in import convert_graph
from bnpvi.data.sources import line_chunks
from bnpvi.data.store import BatchStore
from bnpvi.data.tokens import TextSettings
from bnpvi.errors import BnpviError
from bnpvi.io.model_file import text_settings_of
from bnpvi.learn import runner
from setups import compose

WORDS = ["café", "crème", "brûlée", "élève", "naïve", "garçon", "déjà", "façade", "noël", "über"]


def documents(n: int, seed: int = 0) -> list[str]:
    """Lines of accented words; the first 40 are plain ASCII, so a decoding error comes at line 41 as in the issue."""
    rng = np.random.default_rng(seed)
    plain = ["table chair lamp", "river stone bridge", "paper ink pen"]
    return [plain[i % 3] if i < 40 else " ".join(rng.choice(WORDS, 6)) for i in range(n)]


def one_line_error(capsys, *fragments: str, prog: str = "bnpvi-data") -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines
    return lines[0]


def stored_vocab_and_counts(path):
    with BatchStore.open(path) as store:
        return store.vocab(), store.read_batch(0).csr().toarray(), store.text_origin()


@pytest.fixture(scope="module")
def latin1_run(tmp_path_factory):
    """A Latin-1 corpus and its UTF-8 twin, both converted, and a topic model trained on the Latin-1 one."""
    tmp = tmp_path_factory.mktemp("latin1")
    text = "\n".join(documents(120)) + "\n"
    (tmp / "latin1.txt").write_bytes(text.encode("latin-1"))
    (tmp / "utf8.txt").write_bytes(text.encode("utf-8"))
    data = convert(tmp / "latin1.txt", tmp / "latin1.h5", text=True, encoding="latin-1", n_batches=2)
    convert(tmp / "utf8.txt", tmp / "utf8.h5", text=True, n_batches=2)
    runner.train(compose("model=hdp_topic", "data=hdf5", f"data.path={data}", "alg.n_laps=2"), tmp / "run")
    return tmp


def test_a_latin1_corpus_converts_with_its_encoding_to_the_tokens_of_its_utf8_twin(latin1_run):
    latin, utf8 = (stored_vocab_and_counts(latin1_run / name) for name in ("latin1.h5", "utf8.h5"))
    assert latin[0] == utf8[0] and "café" in latin[0]
    np.testing.assert_array_equal(latin[1], utf8[1])
    assert latin[2].settings.encoding == "iso8859-1" and utf8[2].settings.encoding == "utf-8"
    with h5py.File(latin1_run / "latin1.h5") as f:
        assert f["text"].attrs["encoding"] == "iso8859-1"


def test_without_its_encoding_a_latin1_corpus_fails_on_one_line_naming_file_line_and_encoding(latin1_run, tmp_path,
                                                                                              capsys):
    src = latin1_run / "latin1.txt"
    assert main(["convert", str(src), str(tmp_path / "x.h5"), "--text"]) == 2
    one_line_error(capsys, f"{src}, line 41: not valid utf-8 text", "--encoding")
    assert not (tmp_path / "x.h5").exists()
    assert main(["convert", str(src), str(tmp_path / "x.h5"), "--text", "--encoding", "latin-1"]) == 0


def test_bnpvi_apply_reads_new_text_in_the_training_encoding(latin1_run, tmp_path, capsys):
    run = latin1_run / "run"
    fitted = bnpvi.load(run)
    assert fitted.text_settings_.encoding == "iso8859-1"
    new = documents(50, seed=1)
    (tmp_path / "new.txt").write_bytes(("\n".join(new) + "\n").encode("latin-1"))
    assert apply_cli.main([str(run), str(tmp_path / "new.txt"), str(tmp_path / "out.h5")]) == 0
    assert "50 documents; 0 of " in capsys.readouterr().out  # every accented word known: decoded as in training
    with h5py.File(tmp_path / "out.h5") as f:
        np.testing.assert_array_equal(f["proportions"][()], fitted.transform(new))
    (tmp_path / "new8.txt").write_bytes(("\n".join(new) + "\n").encode("utf-8"))  # another encoding: say so
    assert apply_cli.main([str(run), str(tmp_path / "new8.txt"), str(tmp_path / "out8.h5"), "--encoding",
                           "utf-8"]) == 0
    with h5py.File(tmp_path / "out8.h5") as f:
        np.testing.assert_array_equal(f["proportions"][()], fitted.transform(new))
    assert apply_cli.main([str(run), str(tmp_path / "new8.txt"), str(tmp_path / "o.h5"), "--encoding", "x"]) == 2
    one_line_error(capsys, "--encoding 'x' is not an encoding Python knows", prog="bnpvi-apply")


def test_a_model_file_without_an_encoding_reads_as_utf8():
    """Files written before the encoding was stored (bow files and model.h5 alike) were read as UTF-8."""
    old = {"lowercase": True, "token_pattern": r"(?u)\b\w\w+\b", "stop_words": "none"}
    assert TextSettings.from_attrs(old, []).encoding == "utf-8"
    assert text_settings_of({"data": {"text": {**old, "stop_word_list": np.array([], dtype=object)}}}).encoding \
        == "utf-8"


@pytest.mark.parametrize("name, problem", [("nope", "is not an encoding Python knows"),
                                           ("base64", "is not a text encoding")])
def test_an_unknown_or_non_text_codec_is_one_line(tmp_path, capsys, name, problem):
    (tmp_path / "a.txt").write_text("some words here\n")
    assert main(["convert", str(tmp_path / "a.txt"), str(tmp_path / "a.h5"), "--text", "--encoding", name]) == 2
    one_line_error(capsys, f"--encoding {name!r} {problem}")


@pytest.mark.parametrize("encoding", ["utf-16", "cp037", "utf-8-sig"])
def test_encodings_whose_line_ends_are_not_the_newline_byte(tmp_path, encoding, monkeypatch):
    """UTF-16 and EBCDIC lines are found in the decoded text, also when blocks cut characters in two."""
    monkeypatch.setattr("bnpvi.data.sources.TEXT_BLOCK", 7)
    lines = documents(45) + ["", "über\r", "last line without a newline"]
    (tmp_path / "a.txt").write_bytes("\n".join(lines).encode(encoding))
    got = [line for chunk in line_chunks(tmp_path / "a.txt", 4, encoding) for line in chunk]
    assert got == [line.rstrip("\r") for line in lines]


@pytest.mark.parametrize("encoding, bad", [("utf-8", b"\xff"), ("utf-16-le", b"\x00\xdc"), ("ascii", b"\xe9")])
def test_the_bad_line_is_found_in_any_block(tmp_path, encoding, bad, monkeypatch):
    monkeypatch.setattr("bnpvi.data.sources.TEXT_BLOCK", 16)
    good = "".join(f"line {i} with words\n" for i in range(30)).encode(encoding)
    (tmp_path / "a.txt").write_bytes(good + "and then ".encode(encoding) + bad + "\nmore\n".encode(encoding))
    with pytest.raises(BnpviError, match=f"a.txt, line 31: not valid {encoding} text; name the file's encoding "
                                         "with --encoding"):
        list(line_chunks(tmp_path / "a.txt", 4, encoding))


def test_every_text_reader_of_convert_takes_the_encoding(tmp_path, capsys):
    """A vocabulary, a labels file, a stop-word file, a CSV of points, a CSV of text and an edge list in Latin-1:
    refused on one line naming the line without --encoding, read with it."""
    def write(name: str, text: str):
        (tmp_path / name).write_bytes(text.encode("latin-1"))
        return str(tmp_path / name)

    ldac, vocab = write("c.ldac", "2 0:1 1:2\n1 2:1\n"), write("v.txt", "café\nnoël\nthé\n")
    labels = write("y.txt", "été\nhiver\n")
    points, stop = write("p.csv", "x,y,saison\n1,2,été\n3,4,hiver\n"), write("stop.txt", "café\n")
    table, text = write("t.csv", "id,body\n1,café crème\n2,noël garçon\n"), write("t.txt", "café crème\nnoël\n")
    edges = write("e.txt", "Zoë André\nAndré Chloé\n")
    cases = [([ldac, "--vocab", vocab], "v.txt, line 1"), ([ldac, "--labels-file", labels], "y.txt, line 1"),
             ([points, "--labels", "saison"], "p.csv, line 2"), ([table, "--text", "--text-column", "body"],
                                                                 "t.csv, line 2"),
             ([text, "--text", "--stop-words", stop], "stop.txt, line 1"), ([edges, "--graph"], "e.txt, line 1")]
    for i, (args, where) in enumerate(cases):
        dst = str(tmp_path / f"out{i}.h5")
        assert main(["convert", args[0], dst, *args[1:]]) == 2, args
        one_line_error(capsys, where, "not valid utf-8 text", "--encoding")
        assert main(["convert", args[0], dst, *args[1:], "--encoding", "latin-1"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    with BatchStore.open(tmp_path / "out0.h5") as store:
        assert store.vocab() == ["café", "noël", "thé"]
    with BatchStore.open(tmp_path / "out2.h5") as store:
        assert store.label_names() == ["hiver", "été"]
    with BatchStore.open(tmp_path / "out4.h5") as store:
        assert store.vocab() == ["crème", "noël"] and store.text_origin().settings.stop_words == ("café",)
    with BatchStore.open(tmp_path / "out5.h5") as store:
        assert store.node_names() == ["Zoë", "André", "Chloé"]


def test_the_graph_converter_refuses_bad_bytes_on_one_line(tmp_path):
    (tmp_path / "e.txt").write_bytes("a b\nb c\n".encode() + b"c \xff\n")
    with pytest.raises(BnpviError, match="e.txt, line 3: not valid utf-8 text"):
        convert_graph(tmp_path / "e.txt", tmp_path / "g.h5")


def test_the_topic_estimators_read_a_stop_word_file_in_their_encoding(tmp_path):
    (tmp_path / "stop.txt").write_bytes("café\n".encode("latin-1"))
    texts = documents(60)
    with pytest.raises(BnpviError, match="stop.txt, line 1: not valid utf-8 text"):
        bnpvi.HDPTopicModel(stop_words=str(tmp_path / "stop.txt"), n_laps=1).fit(texts)
    model = bnpvi.HDPTopicModel(stop_words=str(tmp_path / "stop.txt"), encoding="latin-1", n_laps=1).fit(texts)
    assert "café" not in model.vocabulary_ and "crème" in model.vocabulary_
    assert model.fitted_model_.text_settings_.encoding == "iso8859-1"
