"""Sequences in: time steps from NPZ (with sequence boundaries) or CSV (with a sequence-id column), for a
``"seq"`` batch file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from bnpvi.data.checks import check_points, check_seq_range
from bnpvi.data.labels import one_source, rows_with_labels
from bnpvi.data.seq import write_sequences
from bnpvi.data.sources import (Reader, existing_file, no_columns_in_arrays, nonempty, permuted_ranges,
                                read_csv_table, read_npz_arrays, show_suffix)
from bnpvi.errors import BnpviError

SEQ_SUFFIXES = (".csv", ".npz")


@dataclass(frozen=True)
class Sequences:
    """Sequences of observations, as read by :func:`read_sequences`.

    Attributes
    ----------
    X : (T, D) float64, finite
        Every time step, sequences one after another.
    seq_range : (n_seqs + 1,) int64
        Sequence s is rows ``seq_range[s]:seq_range[s+1]``; from 0 to T, strictly increasing.
    Xprev : (T, D) float64 or None
        The observation before each step.
    labels : (T,) int64 or None
        One label per time step: integers, or codes of ``label_names``.
    label_names : tuple of str or None
    """

    X: np.ndarray
    seq_range: np.ndarray
    Xprev: np.ndarray | None = None
    labels: np.ndarray | None = None
    label_names: tuple[str, ...] | None = None

    unit: ClassVar[str] = "sequences"
    count_name: ClassVar[str] = "n_seqs"

    @property
    def n_units(self) -> int:
        """Number of sequences."""
        return self.seq_range.shape[0] - 1

    def permuted(self, perm: np.ndarray) -> "Sequences":
        """The sequences in the order ``perm``, each kept whole (Xprev and labels follow their steps)."""
        seq_range, steps = permuted_ranges(self.seq_range, perm)
        Xprev = None if self.Xprev is None else self.Xprev[steps]
        labels = None if self.labels is None else self.labels[steps]
        return Sequences(self.X[steps], seq_range, Xprev, labels, self.label_names)

    def write(self, dst, **options) -> Path:
        """Write a ``"seq"`` batch file (``options``: those of ``write_sequences``)."""
        return write_sequences(dst, self.X, self.seq_range, Xprev=self.Xprev, labels=self.labels,
                               label_names=self.label_names, **options)


def read_sequences(path, sequences: str | None = None, sequence_column: str | None = None,
                   labels: str | None = None, labels_file=None, columns=None) -> Sequences:
    """Read sequences from an NPZ or CSV file.

    Parameters
    ----------
    path : str or Path
        ``.npz``: the steps are the array ``X`` (T, D); the optional array
        ``Xprev`` (T, D) is kept as the previous observation of each step (it is
        never made up when absent).
        ``.csv``: one row per time step, as for :func:`~bnpvi.data.points_in.read_points`, with one
        column of sequence ids.
    sequences : str, optional
        NPZ only (required there): the name of the array of sequence boundaries,
        n_seqs + 1 strictly increasing integers from 0 to T.
    sequence_column : str, optional
        CSV only (required there): the column holding each row's sequence id
        (header name, or index without a header); removed from the data. The rows
        of one sequence must be contiguous.
    labels : str, optional
        Labels, one per time step: an NPZ array name or a CSV column, as for points.
    labels_file : str or Path, optional
        A file with one label per line, one line per time step (instead of ``labels``).
    columns : str or sequence, optional
        CSV only: the data columns (names or 0-based indices, ``"a,b,c"``); the others (a time-step
        column, say) are left out.

    Returns
    -------
    Sequences

    Raises
    ------
    BnpviError
        One line naming the file and the problem (the first bad sequence, or the
        row whose sequence id reappears after another sequence).
    """
    path, suffix = existing_file(path)
    if suffix not in SEQ_SUFFIXES:
        raise BnpviError(f"{path}: sequences are read from .npz files (with --sequences NAME) or .csv files "
                         f"(with --sequence-column NAME), not {show_suffix(path)} files")
    if suffix == ".npz" and sequences is None:
        raise BnpviError(f"{path}: an .npz file gives its sequence boundaries as an array: name it with "
                         "--sequences NAME (not --sequence-column)")
    if suffix == ".csv" and sequence_column is None:
        raise BnpviError(f"{path}: a CSV file gives each row's sequence id in a column: name it with "
                         "--sequence-column NAME (not --sequences)")
    one_source(labels, labels_file)
    nonempty(path)
    if suffix == ".csv":
        X, taken = read_csv_table(path, {"labels": labels, "sequence ids": sequence_column}, columns)
        y, seq_range, Xprev = taken.get("labels"), _ranges_from_ids(taken["sequence ids"], path), None
    else:
        no_columns_in_arrays(path, columns)
        arrays = read_npz_arrays(path, labels, sequences)
        X, y, seq_range, Xprev = arrays["X"], arrays.get("labels"), arrays["seq_range"], arrays.get("Xprev")
    X, y, names = rows_with_labels(X, y, labels_file, path, "rows (time steps)")
    seq_range = check_seq_range(seq_range, X.shape[0], str(path), name=sequences or "seq_range")
    if Xprev is not None:
        Xprev = check_points(Xprev, str(path), name="Xprev")
        if Xprev.shape != X.shape:
            raise BnpviError(f"{path}: Xprev has shape {Xprev.shape} but X has shape {X.shape}")
    return Sequences(X, seq_range, Xprev, y, names)


def _ranges_from_ids(ids: np.ndarray, path: Path) -> np.ndarray:
    """seq_range of the runs of equal ids; BnpviError naming the row where an id comes back after another."""
    codes = pd.factorize(ids)[0]  # ids numbered in order of first appearance
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    returns = codes[starts] != np.arange(starts.shape[0])  # a run whose id was seen before
    if returns.any():
        row = int(starts[np.argmax(returns)])
        shown = ids[row].item() if isinstance(ids[row], np.generic) else ids[row]
        raise BnpviError(f"{path}: sequence id {shown!r} in row {row} reappears after other sequences; the rows of "
                         "one sequence must be contiguous (rows counted from 0, after any header)")
    return np.r_[starts, codes.shape[0]].astype(np.int64)


READER = Reader(holds="sequences", kind_name="sequences", files=".csv and .npz files of sequences",
                suffixes=SEQ_SUFFIXES,
                options=frozenset({"sequences", "sequence_column", "labels", "labels_file", "columns"}), heldout=False,
                claims=lambda path, options: options.get("sequences") is not None
                or options.get("sequence_column") is not None,
                read=read_sequences)
