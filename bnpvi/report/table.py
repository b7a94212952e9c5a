"""The report's tables: one row per run (:func:`run_table`), and mean ± sd per group of runs
(:func:`group_table`), with the text printed around them."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bnpvi.errors import BnpviError
from bnpvi.report.runs import METRICS, STATUSES, RunRecord

RESULT_COLUMNS = ["elbo", "K", "laps", "seconds", "stop_reason"]
HYPERS = "hypers"
"""The column that numbers the distinct sets of model settings, when runs differ in them."""
FORMATS = {"elbo": "{:.4f}", "seconds": "{:.2f}", **{name: "{:.4f}" for name in METRICS}, "states_used": "{:.0f}"}
"""How the printed tables show the numeric columns (the CSV files keep every digit)."""


@dataclass
class RunTable:
    """The runs as a table.

    Attributes
    ----------
    frame : DataFrame
        One row per run: ``run`` (its directory, relative to ``root``), ``status``, the value of every key
        any run's command line set, ``hypers`` (when runs differ in model settings), the results and the
        metrics any run has, and ``path`` (its absolute directory).
    varying : list of str
        The keys set on some command line whose values differ between runs.
    constant : dict
        The other keys set on some command line -> their value in every run.
    hyper_sets : list of dict
        For ``hypers`` group i + 1: the model settings that differ between runs -> their values in the
        group; empty when every run has the same model settings.
    root : Path
        The folder the run names are relative to.
    """

    frame: pd.DataFrame
    varying: list[str]
    constant: dict
    hyper_sets: list[dict]
    root: Path

    @property
    def columns(self) -> list[str]:
        """The columns the report shows (the settings that are the same in every run left out)."""
        hidden = set(self.constant) | {"path"}
        return [column for column in self.frame.columns if column not in hidden]

    def swept_key(self) -> str | None:
        """The setting the plots colour the runs by: the first that differs between runs other than ``seed``
        (seeds repeat a setting), else ``seed``; None when no setting differs."""
        return next((key for key in self.varying if key != "seed"), self.varying[0] if self.varying else None)


def _distinct(values) -> set:
    return {value for value in values if value is not None and not pd.isna(value)}


def _hyper_sets(records: list[RunRecord]) -> tuple[list, list[dict]]:
    """Each run's ``hypers`` number (None for one without a config) and the differing model settings of each."""
    settings = [record.model_settings() for record in records]
    known = [s for s in settings if s is not None]
    keys = sorted({key for s in known for key in s})
    differing = [key for key in keys if len(_distinct(str(s.get(key)) for s in known)) > 1]
    if not differing:
        return [None] * len(records), []
    signatures: list[tuple] = []
    numbers = []
    for s in settings:
        if s is None:
            numbers.append(None)
            continue
        signature = tuple(s.get(key) for key in differing)
        if signature not in signatures:
            signatures.append(signature)
        numbers.append(signatures.index(signature) + 1)
    return numbers, [dict(zip(differing, signature)) for signature in signatures]


def _root(paths: list[Path]) -> Path:
    root = Path(os.path.commonpath([os.path.abspath(path) for path in paths]))
    return root.parent if any(Path(os.path.abspath(path)) == root for path in paths) else root


def run_table(records: list[RunRecord]) -> RunTable:
    """The table of ``records`` (at least one)."""
    keys = list(dict.fromkeys(key for record in records for key in record.overrides))
    values = {key: [record.setting(key) for record in records] for key in keys}
    varying = [key for key in keys if len(_distinct(values[key])) > 1]
    constant = {key: next(iter(_distinct(values[key])), None) for key in keys if key not in varying}
    hypers, hyper_sets = _hyper_sets(records)
    root = _root([record.path for record in records])
    metrics = [name for name in METRICS if any(name in record.results for record in records)]
    rows = []
    for i, record in enumerate(records):
        row = {"run": os.path.relpath(os.path.abspath(record.path), root), "status": record.status}
        row |= {key: values[key][i] for key in keys}
        row |= {HYPERS: hypers[i]} if hyper_sets else {}
        row |= {column: record.results.get(column) for column in RESULT_COLUMNS + metrics}
        rows.append(row | {"path": os.path.abspath(record.path)})
    frame = pd.DataFrame(rows)
    for key in keys:  # as the runs had them: 2 stays 2 beside a run without the setting
        frame[key] = pd.Series(values[key], dtype=object)
    for column in ("K", "laps", *([HYPERS] if hyper_sets else [])):
        frame[column] = pd.to_numeric(frame[column]).astype("Int64")
    return RunTable(frame, varying, constant, hyper_sets, root)


def _check_column(table: RunTable, column: str, option: str) -> None:
    if column not in table.frame.columns or column == "path":
        raise BnpviError(f"{option} {column}: no such column or setting (the columns: {', '.join(table.columns)}; "
                         f"or a setting the same in every run: {', '.join(table.constant) or 'none'})")


def sort_rows(frame: pd.DataFrame, column: str, descending: bool = False) -> pd.DataFrame:
    """``frame`` sorted by ``column`` (stable; empty values last; numbers and text in one column as text)."""
    order = {"ascending": not descending, "na_position": "last", "kind": "stable"}
    try:
        return frame.sort_values(column, **order)
    except TypeError:
        return frame.sort_values(column, key=lambda values: values.astype(str), **order)


def sort_runs(table: RunTable, column: str, descending: bool = False) -> None:
    """Sort ``table``'s runs by ``column``: any column of the table or setting of :attr:`RunTable.frame`."""
    _check_column(table, column, "--sort")
    table.frame = sort_rows(table.frame, column, descending).reset_index(drop=True)


def group_table(table: RunTable, key: str) -> pd.DataFrame:
    """Per value of ``key`` (a column or setting): how many runs finished (``runs``) and how many did not
    (``not_finished``), the ``hypers`` groups of its runs (when runs differ in model settings), and the mean
    and standard deviation (``_mean``, ``_sd``) of every numeric result over the finished ones."""
    _check_column(table, key, "--group-by")
    frame = table.frame
    numeric = [column for column in table.columns if column in RESULT_COLUMNS + list(METRICS)
               and column != "stop_reason"]
    rows = []
    by = frame[key]
    for value in dict.fromkeys(None if pd.isna(value) else value for value in by):  # kept as they are
        group = frame[by.isna() if value is None else by == value]
        finished = group[group["status"] == "finished"]
        row = {key: value, "runs": len(finished), "not_finished": len(group) - len(finished)}
        if HYPERS in frame and key != HYPERS:  # which model settings the group's runs have
            row[HYPERS] = ",".join(map(str, sorted(group[HYPERS].dropna().unique())))
        for column in numeric:
            values = pd.to_numeric(finished[column], errors="coerce").astype(float)
            row |= {f"{column}_mean": values.mean(), f"{column}_sd": values.std()}
        rows.append(row)
    groups = pd.DataFrame(rows)
    groups[key] = pd.Series([row[key] for row in rows], dtype=object)
    return sort_rows(groups, key).reset_index(drop=True)


def _cell(value, fmt: str = "{}") -> str:
    return "-" if value is None or pd.isna(value) else fmt.format(value)


def render_runs(table: RunTable) -> str:
    """The table of runs as printed: the columns of :attr:`RunTable.columns`, numbers rounded."""
    frame = table.frame[table.columns]
    shown = pd.DataFrame({column: [_cell(value, FORMATS.get(column, "{}")) for value in frame[column]]
                          for column in frame})
    return shown.to_string(index=False)


def render_groups(groups: pd.DataFrame, key: str) -> str:
    """The table of groups as printed: each result as ``mean ± sd`` (the mean alone for one run)."""
    counts = [column for column in (key, "runs", "not_finished", HYPERS) if column in groups]
    shown = pd.DataFrame({column: [_cell(value) for value in groups[column]] for column in counts})
    for column in [c.removesuffix("_mean") for c in groups.columns if c.endswith("_mean")]:
        fmt = FORMATS.get(column, "{:.2f}")
        shown[column] = [_cell(mean, fmt) + ("" if pd.isna(sd) else f" ± {_cell(sd, fmt)}")
                         for mean, sd in zip(groups[f"{column}_mean"], groups[f"{column}_sd"])]
    return shown.to_string(index=False)


def footer(table: RunTable) -> list[str]:
    """The lines printed below the table: the runs by status, the settings that differ and those that do
    not, and whether the runs' ELBOs compare."""
    frame = table.frame
    counts = frame["status"].value_counts()
    lines = [f"{len(frame)} run{'s' if len(frame) != 1 else ''} under {table.root}: "
             + ", ".join(f"{counts[status]} {status}" for status in STATUSES if status in counts)]
    if table.varying:
        lines.append(f"settings that differ between runs: {', '.join(table.varying)}")
    if table.constant:
        lines.append("the same in every run: " + " ".join(f"{key}={value}" for key, value in table.constant.items()))
    if table.hyper_sets:
        keys = ", ".join(table.hyper_sets[0])
        sets = "; ".join(f"{i + 1}: " + " ".join(f"{key}={value}" for key, value in settings.items())
                         for i, settings in enumerate(table.hyper_sets))
        lines.append(f"model settings differ between runs ({keys}): an ELBO is a bound on the evidence of its own "
                     f"model and data, so ELBOs compare only within a `{HYPERS}` group ({sets})")
    else:
        lines.append("every run has the same model, observation and data settings: their ELBOs compare")
    return lines
