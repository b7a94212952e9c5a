"""``bnpvi-apply``: apply a trained model to a data file.

    bnpvi-apply RUN_DIR DATA.h5 OUT.h5

Runs the local step of the model in RUN_DIR (its model.h5; the training file is not
needed) under its saved globals, with no global step, over every atom of DATA.h5 (a file
written by ``bnpvi-data convert``), and writes OUT.h5 and OUT.csv beside it with the
columns of a run's assignments (``index,cluster,probability``, and ``heldout`` when the
file has a held-out part; :mod:`bnpvi.io.assignments`). When DATA.h5 holds held-out points,
it prints their score as a run reports it. Mixtures only, so far.

Bad input (a data file whose kind or dimension does not match the model, a run directory
without model.h5, ...) is reported on one line (``bnpvi-apply: error: ...``) with exit
status 2, and no output file is left behind.
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
        prog=PROG, description="Apply the trained model of a run directory to a data file: the local step under "
                               "the saved globals, no global step. Writes OUT.h5 and OUT.csv (columns index, "
                               "cluster (stable id), probability, and heldout when the file has held-out rows).")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a finished bnpvi-train run directory (holding model.h5)")
    parser.add_argument("data", metavar="DATA.h5", help="a data file written by `bnpvi-data convert`")
    parser.add_argument("out", metavar="OUT.h5", help="output file; OUT.csv is written beside it")
    return parser


def run(run_dir: str, data: str, out: str) -> None:
    """Apply the model of ``run_dir`` to ``data``, write ``out`` and its CSV, and print what was done."""
    out = Path(out).expanduser()
    if out.suffix.lower() != ".h5":
        raise BnpviError(f"output file {out} must end in .h5 (OUT.csv is written beside it)")
    fitted = load(run_dir)
    with BatchStore.open(data) as store:
        result = fitted.apply(store, out)
    print(f"wrote {out} and {out.with_suffix('.csv')}: {result['rows']} rows")
    if "heldout_loglik" in result:
        print(f"heldout_loglik {result['heldout_loglik']:.6f} nats per point ({result['heldout_points']} "
              "held-out points)")


def main(argv: list[str] | None = None) -> int:
    """Run ``bnpvi-apply`` with ``argv`` (default: ``sys.argv[1:]``); 0 on success, 2 on bad input."""
    args = _parser().parse_args(argv)
    return run_reporting(PROG, lambda: run(args.run_dir, args.data, args.out))


if __name__ == "__main__":
    sys.exit(main())
