"""``bnpvi-report``: one table and plots over many runs.

    bnpvi-report outputs/multirun/2026-11-25/09-00-00            # a sweep
    bnpvi-report runs/a runs/b --sort elbo --descending           # run directories, or folders holding them
    bnpvi-report SWEEP --group-by model.gamma --out reports/gamma  # mean ± sd per value of model.gamma

Finds every run directory at or below each PATH (:mod:`bnpvi.report.runs`) and prints one row per run:
the settings that differ between runs, how it ended (``status``), its final ELBO, K, laps, seconds and
stop reason, and its own scores where it has them (ARI, held-out log-likelihood, Hamming distance,
coherence); then, with ``--group-by``, the mean ± sd of each result per value of a setting, over the
finished runs. A run that did not finish is a row with its status, and named on stderr with what to do
about it. The footer says which model settings differ: ELBOs compare only between runs with equal ones.
Writes report.csv (and report_by_KEY.csv), elbo_K_time.png and elbo_K_laps.png to ``--out`` (default:
``report/`` in the first PATH) and prints where. docs/report.md describes the columns.

Bad input (a path that does not exist, one with no runs, an unknown column) is reported on one line
(``bnpvi-report: error: ...``) with exit status 2, and nothing is written.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bnpvi.cli.errors import run_reporting
from bnpvi.errors import BnpviError
from bnpvi.report.plots import plot_traces
from bnpvi.report.runs import RunRecord, collect_runs
from bnpvi.report.table import (RunTable, footer, group_table, render_groups, render_runs, run_table,
                                 sort_runs)

PROG = "bnpvi-report"
DEFAULT_OUT = "report"
"""The folder of the first PATH that the report goes to without ``--out``."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="One table (printed, and written as CSV) and plots over the bnpvi-train runs at or below "
                    "each PATH:\na row per run with the settings that differ between runs, its status, final "
                    "ELBO, K,\nlaps, seconds, stop reason and scores. See docs/report.md.",
        epilog="status: finished | interrupted (Ctrl-C, SIGTERM; resumable) | incomplete (killed, crashed or\n"
               "still running) | failed (stopped before its first lap) | missing (a sweep job without a\n"
               "directory); every run that is not finished is also named on stderr.")
    parser.add_argument("paths", metavar="PATH", nargs="+", help="a run directory, a sweep directory, or any "
                                                                 "folder holding them (searched recursively)")
    parser.add_argument("--out", metavar="DIR", help=f"where to write the CSV and PNG files (default: "
                                                     f"{DEFAULT_OUT}/ in the first PATH)")
    parser.add_argument("--sort", metavar="COL", help="sort the runs by this column or setting")
    parser.add_argument("--descending", action="store_true", help="with --sort: largest first")
    parser.add_argument("--group-by", metavar="KEY", help="also print mean ± sd of each result per value of this "
                                                          "setting (or column), over the finished runs")
    return parser


def _plot(table: RunTable, records: list[RunRecord], out_dir: Path) -> list[Path]:
    """The plots of the runs' traces, in the table's order, coloured by the swept setting (or by run)."""
    by_path = {os.path.abspath(record.path): record for record in records}
    ordered = [by_path[path] for path in table.frame["path"]]
    key = table.swept_key()
    labels = table.frame[key if key is not None else "run"].tolist()
    return plot_traces([record.trace for record in ordered], labels, [r.status == "finished" for r in ordered],
                       key, out_dir)


def run(paths: list[str], out: str | None = None, sort: str | None = None, descending: bool = False,
        group_by: str | None = None) -> None:
    """Report on the runs at or below ``paths``: print the tables, name the runs that did not finish on
    stderr, and write the CSV and PNG files to ``out``."""
    if descending and sort is None:
        raise BnpviError("--descending orders the rows of --sort COL; give --sort too")
    records, warnings = collect_runs(paths)
    table = run_table(records)
    if sort is not None:
        sort_runs(table, sort, descending)
    groups = group_table(table, group_by) if group_by is not None else None
    out_dir = Path(out).expanduser() if out is not None else Path(paths[0]).expanduser() / DEFAULT_OUT
    out_dir.mkdir(parents=True, exist_ok=True)

    for line in warnings:
        print(f"{PROG}: {line}", file=sys.stderr)
    for record in records:
        if record.problem is not None:
            print(f"{PROG}: {record.status} run {record.path}: {record.problem}", file=sys.stderr)
    print(render_runs(table))
    written = [out_dir / "report.csv"]
    table.frame[table.columns + ["path"]].to_csv(written[0], index=False)
    if groups is not None:
        print(f"\nby {group_by}, over the finished runs:")
        print(render_groups(groups, group_by))
        written.append(out_dir / f"report_by_{group_by.replace('/', '_')}.csv")
        groups.to_csv(written[-1], index=False)
    written += _plot(table, records, out_dir)
    print()
    for line in footer(table):
        print(line)
    print(f"wrote {', '.join(path.name for path in written)} in {out_dir}")


def main(argv: list[str] | None = None) -> int:
    """Run ``bnpvi-report`` with ``argv`` (default: ``sys.argv[1:]``); 0 on success, 2 on bad input."""
    args = _parser().parse_args(argv)
    return run_reporting(PROG, lambda: run(args.paths, args.out, args.sort, args.descending, args.group_by))


if __name__ == "__main__":
    sys.exit(main())
