"""``bnpvi-data``: convert user data to a batch file, and describe batch files.

    bnpvi-data convert points.csv points.h5 --batches 10 --labels class --shuffle 0
    bnpvi-data convert corpus.ldac corpus.h5 --batches 5 --vocab vocab.txt --shuffle 0
    bnpvi-data info points.h5

Bad input is reported on one line (``bnpvi-data: error: ...``) with exit status
2, and no output file is left behind.
"""
from __future__ import annotations

import argparse
import sys

from bnpvi.errors import BnpviError

PROG = "bnpvi-data"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Prepare data for bnpvi-train: convert CSV / NPZ / NPY files to HDF5 batch files, "
                    "and describe batch files.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    conv = sub.add_parser(
        "convert", help="convert a .csv, .npz, .npy or .ldac file to a batch file",
        description="Read SRC, check it, and write the HDF5 batch file DST atomically. "
                    "Points: CSV (a first row with no numeric cell is a header), NPY (the single array is the "
                    "data), NPZ with an array X. Bag of words: LDA-C text (.ldac, one document per line: "
                    "'n id:count id:count ...', ids from 0), or NPZ holding the CSR arrays word_id, word_count, "
                    "doc_range (optional vocab_size) or a scipy.sparse.save_npz matrix (documents x words). "
                    "A word id repeated within a document is summed; empty documents are an error.")
    conv.add_argument("src", metavar="SRC", help="input file (.csv, .npz, .npy or .ldac)")
    conv.add_argument("dst", metavar="DST", help="output batch file (.h5)")
    conv.add_argument("--batches", "-b", type=int, default=None, metavar="B",
                      help="split the rows (documents) into B contiguous, equal-size batches and fix that split "
                           "(default: one batch that bnpvi-train may re-split with alg.n_batches)")
    conv.add_argument("--labels", "-l", default=None, metavar="NAME",
                      help="true labels, kept for evaluation only: a CSV column (header name, or index "
                           "without a header), removed from the data; or an NPZ array name (one per row or document)")
    conv.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                      help="shuffle the rows or documents (labels follow) with this seed before batching")
    conv.add_argument("--vocab", default=None, metavar="FILE",
                      help="bag of words: vocabulary file, one word per line (word id i is line i+1); "
                           "V is its length; stored in DST")
    conv.add_argument("--vocab-size", type=int, default=None, metavar="V",
                      help="bag of words: vocabulary size V (default: from --vocab or the file, else largest id + 1)")
    conv.add_argument("--overwrite", action="store_true", help="replace DST if it exists")

    info = sub.add_parser("info", help="describe a batch file",
                          description="Print the format version, kind, N, D (or V, nnz and tokens for bag of "
                                      "words), batches and labels of a batch file.")
    info.add_argument("file", metavar="FILE", help="batch file written by `bnpvi-data convert`")
    info.add_argument("--check", action="store_true",
                      help="also read every value and fail on NaN or inf (bag of words: on bad ids or counts)")
    return parser


def _convert(args) -> None:
    from bnpvi.data.convert import convert
    from bnpvi.data.store import BatchStore

    path = convert(args.src, args.dst, n_batches=args.batches, labels=args.labels, shuffle_seed=args.shuffle,
                   overwrite=args.overwrite, vocab=args.vocab, vocab_size=args.vocab_size)
    with BatchStore.open(path) as store:
        fixed = "fixed" if store.batches_fixed else "re-splittable"
        if store.kind == "bow":
            size = f"kind=bow N={store.n_atoms} documents V={store.D} nnz={store.nnz} tokens={store.n_tokens()}"
        else:
            size = f"N={store.n_atoms} D={store.D}"
        print(f"wrote {path}: {size} batches={store.n_batches} ({fixed}) "
              f"labels={'yes' if store.has_labels else 'no'}")


def _info(args) -> None:
    from bnpvi.data.store import BatchStore

    with BatchStore.open(args.file) as store:
        if args.check:
            store.validate()
        info = store.info()
    lo, hi = info["batch_size_min"], info["batch_size_max"]
    sizes = f"{lo}" if lo == hi else f"{lo}..{hi}"
    bow = info["kind"] == "bow"
    rows = [
        ("file", info["path"]),
        ("format", f"{info['format']} version {info['format_version']}"),
        ("kind", "bow (bag of words)" if bow else info["kind"]),
    ]
    if bow:
        rows += [("N", f"{info['N']} documents"), ("V", info["V"]), ("nnz", info["nnz"]), ("tokens", info["tokens"]),
                 ("vocab", "yes" if info["vocab"] else "no")]
    else:
        rows += [("N", info["N"]), ("D", info["D"])]
    rows += [
        ("batches", f"{info['n_batches']} ({'fixed' if info['batches_fixed'] else 're-splittable'}), "
                    f"{'documents' if bow else 'rows'} per batch {sizes}"),
        ("labels", "yes" if info["labels"] else "no"),
        ("source", info["source"] or "-"),
        ("created", info["created"] or "-"),
    ]
    if args.check:
        rows.append(("check", "all ids and counts valid" if bow else "all values finite"))
    for key, value in rows:
        print(f"{key + ':':9s}{value}")


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
    try:
        if args.command == "convert":
            _convert(args)
        else:
            _info(args)
    except BnpviError as err:
        message = " ".join(str(err).split())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{PROG}: error: {err.strerror or err}" + (f": {err.filename}" if err.filename else ""),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
