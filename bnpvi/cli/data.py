"""``bnpvi-data``: convert user data to a batch file, and describe batch files.

    bnpvi-data convert points.csv points.h5 --batches 10 --labels class --shuffle 0
    bnpvi-data convert counts.csv counts.h5 --weights count
    bnpvi-data convert corpus.ldac corpus.h5 --batches 5 --vocab vocab.txt --shuffle 0
    bnpvi-data convert steps.npz steps.h5 --sequences seq_range --labels state --batches 4
    bnpvi-data convert steps.csv steps.h5 --sequence-column subject --shuffle 0
    bnpvi-data convert corpus.ldac corpus.h5 --heldout 0.1 --heldout-seed 0 --shuffle 0
    bnpvi-data convert descriptions.txt corpus.h5 --text --min-df 5 --max-df 0.5
    bnpvi-data convert old_corpus.txt corpus.h5 --text --encoding latin-1 --stop-words none
    bnpvi-data convert reviews.csv reviews.h5 --text --text-column body --labels stars
    bnpvi-data convert seqs.csv seqs.h5 --sequence-column seq --columns a,b,c --labels-file states.txt
    bnpvi-data convert edges.csv graph.h5 --graph --undirected --heldout 0.1 --batches 20
    bnpvi-data info points.h5

Bad input is reported on one line (``bnpvi-data: error: ...``) with exit status
2, and no output file is left behind.
"""
from __future__ import annotations

import argparse
import sys

from bnpvi.cli.errors import run_reporting
from bnpvi.errors import BnpviError

PROG = "bnpvi-data"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Prepare data for bnpvi-train: convert CSV / NPZ / NPY / LDA-C files and raw text to HDF5 "
                    "batch files, and describe batch files.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    conv = sub.add_parser(
        "convert", help="convert a .csv, .npz, .npy or .ldac file, or raw text (--text), to a batch file",
        description="Read SRC, check it, and write the HDF5 batch file DST atomically. "
                    "Points: CSV (a first row with no numeric cell is a header), NPY (the single array is the "
                    "data), NPZ with an array X. Bag of words: LDA-C text (.ldac, one document per line: "
                    "'n id:count id:count ...', ids from 0), or NPZ holding the CSR arrays word_id, word_count, "
                    "doc_range (optional vocab_size) or a scipy.sparse.save_npz matrix (documents x words). "
                    "A word id repeated within a document is summed; empty documents are an error. "
                    "Sequences (one row per time step): NPZ with X, optional Xprev (the previous observation of "
                    "each step) and the boundaries named by --sequences, or CSV with a sequence id column named by "
                    "--sequence-column. A missing entry of points or sequences (an empty CSV cell, NA, NaN; a NaN "
                    "in an array) is kept as NaN and counted (obs=diag_gauss and obs=bern leave it out of the "
                    "model exactly; docs/missing.md); an infinite value is an error. Raw text (--text): one document per line, or a column of a CSV/TSV file "
                    "(--text-column), tokenised by scikit-learn (lower-cased, tokens of 2+ word characters), English "
                    "stop words left out (--stop-words), with document-frequency limits; documents left without a "
                    "word are dropped (the count is printed). Text files (raw text, CSV, vocabulary, labels, "
                    "stop-word files, edge lists) are read as UTF-8 unless --encoding names another encoding. "
                    "With --heldout F (points, bag of words or sequences), a random fraction F of the rows "
                    "(documents, whole sequences) is kept apart for evaluation in DST and left out of the batches.")
    conv.add_argument("src", metavar="SRC", help="input file (.csv, .npz, .npy or .ldac; with --text any text file, "
                                                 "or .csv / .tsv with --text-column)")
    conv.add_argument("dst", metavar="DST", help="output batch file (a name ending in .h5)")
    conv.add_argument("--batches", "-b", type=int, default=None, metavar="B",
                      help="split the rows (documents, whole sequences) into B contiguous, equal-size batches and "
                           "fix that split (default: one batch that bnpvi-train may re-split with alg.n_batches)")
    conv.add_argument("--labels", "-l", default=None, metavar="NAME",
                      help="true labels, kept for evaluation only: a CSV column (header name, or index "
                           "without a header), removed from the data; or an NPZ array name (one per row, document "
                           "or time step). Labels that are not integers (strings) are stored as codes with their "
                           "names")
    conv.add_argument("--labels-file", default=None, metavar="FILE",
                      help="true labels from a file, one per line: one per row, time step or (source) document")
    conv.add_argument("--weights", "-w", default=None, metavar="NAME",
                      help="points from a CSV file: a column of per-row weights w >= 0 (header name, or index "
                           "without a header), removed from the data; a row of weight w counts w times in every "
                           "summary of a run (integer weights train as duplicated rows). Held-out points and the "
                           "run's outputs stay one per row")
    conv.add_argument("--columns", default=None, metavar="A,B,C",
                      help="points or sequences from a CSV file: the data columns (header names, or 0-based "
                           "indices), comma-separated; the other columns are left out")
    conv.add_argument("--encoding", default=None, metavar="NAME",
                      help="the text encoding of every text file read (raw text, CSV, vocabulary, labels and "
                           "stop-word files, edge lists): any codec name Python knows, e.g. latin-1, cp1252, "
                           "utf-16 (default: utf-8); stored with raw text's settings, so bnpvi-apply reads new text "
                           "the same way")
    conv.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                      help="shuffle the rows, documents or whole sequences (labels follow; the steps of a sequence "
                           "keep their order) with this seed before batching")
    conv.add_argument("--sequences", default=None, metavar="NAME",
                      help="sequences from an NPZ file: the array of sequence boundaries (n_seqs+1 increasing "
                           "integers from 0 to T; sequence s is rows NAME[s]:NAME[s+1] of X)")
    conv.add_argument("--sequence-column", default=None, metavar="NAME",
                      help="sequences from a CSV file: the column holding each row's sequence id (header name, or "
                           "index without a header), removed from the data; the rows of a sequence must be contiguous")
    conv.add_argument("--vocab", default=None, metavar="FILE",
                      help="bag of words: vocabulary file, one word per line (word id i is line i+1); "
                           "V is its length; stored in DST")
    conv.add_argument("--vocab-size", type=int, default=None, metavar="V",
                      help="bag of words: vocabulary size V (default: from --vocab or the file, else largest id + 1)")
    conv.add_argument("--heldout", default=None, metavar="F",
                      help="points, bag of words or sequences: keep a random fraction F (0 < F < 1) of the rows "
                           "(documents, whole sequences) apart for evaluation (round(F*N) of them, at least 1), stored "
                           "in DST's 'heldout' group with the source index of every one; the batches hold only the "
                           "remaining (training) ones. Held-out sequences are scored by topic models of grouped "
                           "vectors (model=hdp_topic or lda with obs=gauss, diag_gauss, zm_gauss or bern)")
    conv.add_argument("--heldout-seed", default=None, metavar="S",
                      help="seed of the --heldout choice (default 0): the held-out documents are the first "
                           "round(F*N) of numpy.random.default_rng(S).permutation(N)")
    graph = conv.add_argument_group("graphs (--graph)")
    graph.add_argument("--graph", action="store_true",
                       help="SRC is a graph: an edge list (one 'src dst [0|1]' per line, comma, tab or space "
                            "separated, '#' comments, any node names) or a scipy.sparse.save_npz adjacency matrix "
                            "(.npz); self-loops are dropped with a warning; --heldout F holds out F of the edges "
                            "and as many non-edges")
    graph.add_argument("--undirected", action="store_true",
                       help="graphs: every edge goes both ways (an edge listed in both directions is one edge)")
    text = conv.add_argument_group("raw text (--text)")
    text.add_argument("--text", action="store_true",
                      help="SRC is raw text: one document per line, or a .csv / .tsv file with --text-column; "
                           "the vocabulary is chosen and stored in DST")
    text.add_argument("--text-column", default=None, metavar="NAME",
                      help="the column of text of a .csv / .tsv file (header name, or 0-based index)")
    text.add_argument("--stop-words", default=None, metavar="LIST",
                      help="the stop words left out: 'english' (scikit-learn's list, the default, as in the "
                           "topic estimators), 'none' (keep every word) or a file with one per line")
    text.add_argument("--min-df", default=None, metavar="N|F",
                      help="keep words in at least N documents (an integer) or a fraction F of them (a decimal "
                           "from 0 to 1); default 1")
    text.add_argument("--max-df", default=None, metavar="N|F",
                      help="keep words in at most N documents (an integer) or a fraction F of them (a decimal "
                           "from 0 to 1, e.g. 0.5); default 1.0 (all)")
    text.add_argument("--max-vocab", type=int, default=None, metavar="V",
                      help="keep at most V words, those with the largest counts (default: no cap)")
    text.add_argument("--keep-case", action="store_true", help="do not lower-case the text")
    text.add_argument("--token-pattern", default=None, metavar="REGEX",
                      help="the regular expression of a token (default: scikit-learn's (?u)\\b\\w\\w+\\b, "
                           "runs of 2 or more word characters)")
    conv.add_argument("--append-to", default=None, metavar="BASE",
                      help="DST holds the batches of the batch file BASE (a run's data), unchanged, then SRC's "
                           "rows (sequences, documents) in new batches (--batches of them; default: about BASE's "
                           "batch size): continue the run on its data and more with `bnpvi-train resume=RUN_DIR "
                           "data.path=DST alg.n_laps=N` (points, sequences, bag of words)")
    conv.add_argument("--overwrite", action="store_true", help="replace DST if it exists")

    info = sub.add_parser("info", help="describe a batch file",
                          description="Print the format version, kind, N, D (or V, nnz, tokens and held-out "
                                      "documents for bag of words; sequences and their lengths for sequences), "
                                      "batches and labels of a batch file.")
    info.add_argument("file", metavar="FILE", help="batch file written by `bnpvi-data convert`")
    info.add_argument("--check", action="store_true",
                      help="also read every value and fail on inf (a NaN of points or sequences is a missing "
                           "entry; bag of words: on bad ids or counts; sequences: also on bad sequence boundaries)")
    return parser


def _convert(args) -> None:
    from bnpvi.data.convert import convert
    from bnpvi.data.progress import is_terminal, shown_on
    from bnpvi.data.store import BatchStore

    if args.heldout is None and args.heldout_seed is not None:
        raise BnpviError("--heldout-seed applies only with --heldout F")
    if args.append_to is not None and args.graph:
        raise BnpviError("--append-to applies to points, sequences and bag of words, not --graph")
    if args.undirected and not args.graph:
        raise BnpviError("--undirected applies only with --graph")
    if args.graph:
        _convert_graph(args)
        return
    with shown_on(sys.stderr if is_terminal(sys.stderr) else None):  # a bar per pass, on a terminal only
        path = convert(args.src, args.dst, n_batches=args.batches, shuffle_seed=args.shuffle,
                       overwrite=args.overwrite, heldout=args.heldout,
                       heldout_seed=0 if args.heldout_seed is None else args.heldout_seed, labels=args.labels,
                       labels_file=args.labels_file, columns=args.columns, vocab=args.vocab,
                       vocab_size=args.vocab_size, sequences=args.sequences, sequence_column=args.sequence_column,
                       text=args.text or None, text_column=args.text_column, stop_words=args.stop_words,
                       min_df=args.min_df, max_df=args.max_df, max_vocab=args.max_vocab,
                       lowercase=False if args.keep_case else None, token_pattern=args.token_pattern,
                       encoding=args.encoding, weights=args.weights, append_to=args.append_to)
    with BatchStore.open(path) as store:
        info = store.info()
    if info["kind"] == "bow":
        size = f"kind=bow N={info['N']} documents V={info['V']} nnz={info['nnz']} tokens={info['tokens']}"
        if info["heldout"]:
            size += f" heldout={info['heldout']} documents"
    elif info["kind"] == "seq":
        size = f"kind=seq N={info['N']} time steps D={info['D']} sequences={info['n_seqs']}" + (
            f" heldout={info['heldout']} sequences" if info["heldout"] else "")
    else:
        size = f"N={info['N']} D={info['D']}" + (f" heldout={info['heldout']} points" if info["heldout"] else "")
        size += f" weighted (total weight {info['weight_total']:g})" if info.get("weighted") else ""
    if info.get("missing"):
        size += f" missing={_missing(info)}"
    print(f"wrote {path}: {size} batches={info['n_batches']} ({_split(info)}) "
          f"labels={_labels(info)}")
    if info.get("text_dropped"):
        print(f"dropped {info['text_dropped']} documents left without a word of the vocabulary (their source "
              "indices are in text/dropped)")


def _convert_graph(args) -> None:
    from bnpvi.data.graph_in import convert_graph
    from bnpvi.data.store import BatchStore

    path = convert_graph(args.src, args.dst, n_batches=args.batches, undirected=args.undirected,
                         heldout=args.heldout, heldout_seed=0 if args.heldout_seed is None else args.heldout_seed,
                         overwrite=args.overwrite, encoding=args.encoding or "utf-8")
    with BatchStore.open(path) as store:
        info = store.info()
    print(f"wrote {path}: {_graph_size(info)} batches={info['n_batches']} ({_split(info)})")


def _graph_size(info: dict) -> str:
    """Nodes, edges, direction and held-out pairs of a graph file."""
    size = (f"kind=graph N={info['N']} nodes, {info['edges']} {'directed' if info['directed'] else 'undirected'} "
            "edges")
    if info["heldout"]:
        size += f", {info['heldout']} held-out pairs ({info['heldout_edges']} edges)"
    return size


def _info(args) -> None:
    from bnpvi.data.store import BatchStore

    with BatchStore.open(args.file) as store:
        if args.check:
            store.validate()
        info = store.info()
    kind = info["kind"]
    rows = [
        ("file", info["path"]),
        ("format", f"{info['format']} version {info['format_version']}"),
        ("kind", {"bow": "bow (bag of words)", "seq": "seq (sequences)"}.get(kind, kind)),
    ]
    if kind == "bow":
        rows += [("N", f"{info['N']} documents"), ("V", info["V"]), ("nnz", info["nnz"]), ("tokens", info["tokens"]),
                 ("vocab", _yes(info["vocab"])), ("heldout", _heldout(info))]
        if info["text"]:
            rows.append(("text", info["text"]))
        if info["true_topics"]:
            rows.append(("topics", f"{info['true_topics']} true topics"))
    elif kind == "graph":
        rows += [("N", f"{info['N']} nodes"), ("edges", info["edges"]), ("directed", _yes(info["directed"])),
                 ("heldout", _heldout(info, "pairs") + (f", {info['heldout_edges']} of them edges"
                                                        if info["heldout"] else ""))]
    elif kind == "seq":
        rows += [("N", f"{info['N']} time steps"), ("D", info["D"]),
                 ("sequences", f"{info['n_seqs']}, length {_span(info['seq_length_min'], info['seq_length_max'])}"),
                 ("Xprev", _yes(info["xprev"])), ("missing", _missing(info)), ("heldout", _heldout(info, "sequences"))]
    else:
        rows += [("N", info["N"]), ("D", info["D"]), ("missing", _missing(info)), ("heldout", _heldout(info, "points")),
                 ("weights", f"yes, total {info['weight_total']:g} (every row counts its weight)"
                  if info.get("weighted") else "no")]
    rows += [
        ("batches", (f"{info['n_batches']} ({_split(info)}), {info['batch_unit']} per batch "
                     f"{_span(info['batch_size_min'], info['batch_size_max'])}")),
        ("labels", _labels(info)),
        ("source", info["source"] or "-"),
        ("created", info["created"] or "-"),
    ]
    if args.check:
        bow_check = "all ids and counts valid" + (", held-out documents too" if info.get("heldout") else "")
        rows.append(("check", {"bow": bow_check, "graph": "every edge and held-out pair valid",
                               "seq": "all values finite or missing, sequence boundaries valid"}.get(
                                   kind, "all values finite or missing" + (", weights >= 0" if info.get("weighted")
                                                                           else ""))))
    width = max(len(key) for key, _ in rows) + 2
    for key, value in rows:
        print(f"{key + ':':{width}s}{value}")


def _heldout(info: dict, unit: str = "documents") -> str:
    """The held-out documents (points) of a file: how many, and the fraction and seed that chose them."""
    if not info["heldout"]:
        return "no"
    how = [f"fraction {info['heldout_fraction']:g}" if info["heldout_fraction"] is not None else "",
           f"seed {info['heldout_seed']}" if info["heldout_seed"] is not None else ""]
    how = ", ".join(part for part in how if part)
    return f"{info['heldout']} {unit}" + (f" ({how})" if how else "")


def _missing(info: dict) -> str:
    """How many entries of a points or sequences file are missing (NaN), and their share."""
    if not info["missing"]:
        return "none"
    return f"{info['missing']:,} entries ({100.0 * info['missing'] / (info['N'] * info['D']):.3g} %)"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _labels(info: dict, shown: int = 10) -> str:
    """``yes``, ``no``, or ``yes`` with the label names (the first ``shown`` of them)."""
    names = info["label_names"]
    if not info["labels"] or not names:
        return _yes(info["labels"])
    more = f", ... ({len(names)} in all)" if len(names) > shown else ""
    return f"yes ({len(names)} names: {', '.join(names[:shown])}{more})"


def _split(info: dict) -> str:
    return "fixed" if info["batches_fixed"] else "re-splittable"


def _span(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}..{hi}"


def main(argv: list[str] | None = None) -> int:
    """Run ``bnpvi-data`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    Parameters
    ----------
    argv : list of str, optional

    Returns
    -------
    int
        0 on success, 2 on bad input (message on one stderr line).
    """
    args = _parser().parse_args(argv)
    return run_reporting(PROG, lambda: _convert(args) if args.command == "convert" else _info(args))


if __name__ == "__main__":
    sys.exit(main())
