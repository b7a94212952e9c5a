"""``bnpvi-apply``: apply a trained model to a data file.

    bnpvi-apply RUN_DIR DATA.h5 OUT.h5
    bnpvi-apply RUN_DIR NEW.txt OUT.h5 [--text-column NAME] [--encoding NAME]    (topic models: raw text)

Runs the local step of the model in RUN_DIR (its model.h5; the training file is not
needed) under its saved globals, with no global step, over every atom of DATA.h5 (a file
written by ``bnpvi-data convert`` of the kind the model was trained on), and writes OUT.h5
and OUT.csv beside it:

* mixtures (points): each point's cluster, as the run's assignments (``index,cluster,probability``,
  and ``heldout`` when the file has a held-out part; :mod:`bnpvi.io.assignments`);
* topic models (bag-of-words documents): each document's topic weights E[π_d], as the run's
  doc_topics.h5 with the documents' source ``index`` (and ``heldout``); the CSV is wide: ``index``,
  one column per topic named by its stable id, (``heldout``) (:mod:`bnpvi.io.topic_weights`);
* hidden Markov models (sequences): the Viterbi path of every sequence, as the run's
  segmentation.h5 and segmentation.csv (``sequence,t,state``, stable state ids;
  :mod:`bnpvi.io.segmentation`);
* graph models (a graph on the nodes the model was trained on): the link probability of every
  held-out pair (``src,dst,probability,value``; of every edge when the file holds no held-out pair),
  with the held-out AUC and average precision (:mod:`bnpvi.api.fitted_graph`).

A topic model with a vocabulary also takes raw text (any file not ending in .h5: one document
per line, or the column ``--text-column`` of a .csv / .tsv), tokenised as its training corpus was
(``bnpvi-data convert --text``), and read in the encoding the training corpus was read in unless
``--encoding`` names another; words outside the vocabulary are dropped and counted.

It prints the held-out score as a run reports it when DATA.h5 has a held-out part (points:
nats per point; documents: nats per token by document completion), and the aligned Hamming
distance when a sequence file has true labels.

Bad input (a data file whose kind, dimension or vocabulary does not match the model, a run
directory without model.h5, ...) is reported on one line (``bnpvi-apply: error: ...``) with
exit status 2, and no output file is left behind.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bnpvi.api import load
from bnpvi.cli.errors import run_reporting
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError

PROG = "bnpvi-apply"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Apply the trained model of a run directory to a data file of the kind it was trained on:\n"
                    "the local step under the saved globals, no global step. Writes OUT.h5 and OUT.csv.",
        epilog="what OUT.h5 / OUT.csv hold, by model:\n"
               "  mixtures      index, cluster (stable id), probability (+ heldout), as assignments.csv\n"
               "  topic models  index, E[pi_d] per topic (+ heldout), as doc_topics.h5; the CSV has one\n"
               "                column per topic, named by its stable id\n"
               "  HMMs          Viterbi paths as segmentation.h5; the CSV is sequence,t,state (stable ids)\n"
               "  graph models  link probabilities of the held-out pairs (or edges): src,dst,probability,value\n"
               "Prints the held-out score when DATA.h5 has a held-out part (and the Hamming distance when a\n"
               "sequence file has labels).")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a finished bnpvi-train run directory (holding model.h5)")
    parser.add_argument("data", metavar="DATA.h5", help="a data file written by `bnpvi-data convert`, or (topic "
                                                        "models) raw text, one document per line")
    parser.add_argument("out", metavar="OUT.h5", help="output file; OUT.csv is written beside it")
    parser.add_argument("--text-column", metavar="NAME", help="raw text: the column of a .csv / .tsv file that "
                                                              "holds the documents")
    parser.add_argument("--encoding", metavar="NAME", help="raw text: its text encoding, any codec name Python "
                                                           "knows (default: the one the training corpus was "
                                                           "converted with, bnpvi-data convert --encoding)")
    return parser


def run(run_dir: str, data: str, out: str, text_column: str | None = None, encoding: str | None = None) -> None:
    """Apply the model of ``run_dir`` to ``data`` (a batch file, or raw text for a topic model, read in
    ``encoding``, by default the training corpus's), write ``out`` and its CSV, and print what was done."""
    out = Path(out).expanduser()
    if out.suffix.lower() != ".h5":
        raise BnpviError(f"output file {out} must end in .h5 (OUT.csv is written beside it)")
    fitted = load(run_dir)
    if Path(data).suffix.lower() != ".h5":
        if not hasattr(fitted, "apply_text"):
            raise BnpviError(f"{data} is not a .h5 data file; raw text applies to topic models only (convert "
                             f"the data with bnpvi-data convert first)")
        result = fitted.apply_text(data, out, text_column, encoding)
    elif text_column is not None or encoding is not None:
        flag = "--text-column" if text_column is not None else "--encoding"
        raise BnpviError(f"{flag} applies to raw text, not to a .h5 data file")
    else:
        with BatchStore.open(data) as store:
            result = fitted.apply(store, out)
    print(f"wrote {out} and {out.with_suffix('.csv')}: {result['written']}")
    for name, (value, unit) in result["scores"].items():
        print(f"{name} {value:.6f} {unit}")


def main(argv: list[str] | None = None) -> int:
    """Run ``bnpvi-apply`` with ``argv`` (default: ``sys.argv[1:]``); 0 on success, 2 on bad input."""
    args = _parser().parse_args(argv)
    return run_reporting(PROG, lambda: run(args.run_dir, args.data, args.out, args.text_column, args.encoding))


if __name__ == "__main__":
    sys.exit(main())
