"""Sequences in: time steps from NPZ (with sequence boundaries) or CSV (with a sequence-id column), for a
``"seq"`` batch file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from bnpvi.data.checks import check_seq_range
from bnpvi.data.labels import LabelCoder, appended_labels, one_source, row_labels
from bnpvi.data.mapped import JoinedRows, scratch_space
from bnpvi.data.reorder import permuted_ranges, take_ranges
from bnpvi.data.seq import HeldoutSequences, write_sequences
from bnpvi.data.sources import (Reader, existing_file, no_columns_in_arrays, nonempty, read_npz_arrays, show_suffix,
                                spool_csv_table)
from bnpvi.errors import BnpviError

SEQ_SUFFIXES = (".csv", ".npz")


@dataclass(frozen=True)
class Sequences:
    """Sequences of observations, as read by :func:`read_sequences`.

    Attributes
    ----------
    X : (T, D) array, finite
        Every time step, sequences one after another: in memory (float64), or read a block at a time (a
        spool, or a view of it in another order, as for :class:`~bnpvi.data.points_in.Points`).
    seq_range : (n_seqs + 1,) int64
        Sequence s is rows ``seq_range[s]:seq_range[s+1]``; from 0 to T, strictly increasing.
    Xprev : (T, D) array or None
        The observation before each step.
    labels : (T,) int64 array (or view) or None
        One label per time step: integers, or codes of ``label_names``.
    label_names : tuple of str or None
    """

    X: object
    seq_range: np.ndarray
    Xprev: object = None
    labels: object = None
    label_names: tuple[str, ...] | None = None

    unit: ClassVar[str] = "sequences"
    count_name: ClassVar[str] = "n_seqs"
    holds: ClassVar[str] = "sequences"

    @property
    def n_units(self) -> int:
        """Number of sequences."""
        return self.seq_range.shape[0] - 1

    def permuted(self, perm: np.ndarray) -> "Sequences":
        """The sequences in the order ``perm``, each kept whole (Xprev and labels follow their steps), as
        views: nothing is copied."""
        def steps(rows):
            return None if rows is None else take_ranges(rows, self.seq_range, perm)

        return Sequences(steps(self.X), permuted_ranges(self.seq_range, perm), steps(self.Xprev), steps(self.labels),
                         self.label_names)

    def in_memory(self) -> "Sequences":
        """The same sequences with every array read into memory."""
        def whole(rows):
            return None if rows is None else rows[:]

        return Sequences(whole(self.X), self.seq_range, whole(self.Xprev), whole(self.labels), self.label_names)

    def after(self, store, where: str) -> "Sequences":
        """The sequences of the sequence file ``store`` (named ``where``), then these
        (``convert(append_to=...)``); Xprev where both have it. The steps are read a block at a time from the
        open file as they are written."""
        if store.D != self.X.shape[1]:
            raise BnpviError(f"{where} has D={store.D} columns, the new sequences D={self.X.shape[1]}")
        if store.has_xprev != (self.Xprev is not None):
            raise BnpviError(f"{where}: {'the file' if store.has_xprev else 'the new data'} has Xprev and the other "
                             "has none; give both or neither")
        labels, names = appended_labels(store, self.labels, self.label_names, where)
        X = JoinedRows([store.dataset("X"), self.X])
        seq_range = np.concatenate([store.dataset("seq_range")[()], store.dataset("X").shape[0] + self.seq_range[1:]])
        Xprev = None if self.Xprev is None else JoinedRows([store.dataset("Xprev"), self.Xprev])
        return Sequences(X, seq_range, Xprev, labels, names)

    def heldout_part(self, index: np.ndarray, train_index: np.ndarray, fraction: float,
                     seed: int) -> HeldoutSequences:
        """These sequences as the held-out part of a file whose training sequences are ``train_index`` of the
        source (their Xprev and labels are not kept: held-out groups are scored by group completion)."""
        return HeldoutSequences(self.X, self.seq_range, index, train_index, fraction, seed)

    def write(self, dst, **options) -> Path:
        """Write a ``"seq"`` batch file (``options``: those of ``write_sequences``)."""
        return write_sequences(dst, self.X, self.seq_range, Xprev=self.Xprev, labels=self.labels,
                               label_names=self.label_names, **options)


def read_sequences(path, sequences: str | None = None, sequence_column: str | None = None,
                   labels: str | None = None, labels_file=None, columns=None, scratch=None,
                   encoding: str = "utf-8") -> Sequences:
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
    scratch : Path, optional
        A scratch directory: X and Xprev are then spooled there a block at a time and never held whole (as
        :func:`~bnpvi.data.points_in.read_points`). Default: a temporary one, and they are returned in memory.
    encoding : str, default "utf-8"
        The text encoding of a CSV file and of ``labels_file`` (any codec Python knows).

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
    if scratch is None:
        with scratch_space() as scratch:
            return read_sequences(path, sequences, sequence_column, labels, labels_file, columns, scratch,
                                  encoding).in_memory()
    if suffix == ".csv":
        coder, codes, runs = LabelCoder(), [], _SequenceRuns(path)
        X = spool_csv_table(path, {"labels": labels, "sequence ids": sequence_column}, columns, scratch,
                            {"labels": lambda values, first: codes.append(coder.add(values)), "sequence ids": runs.add},
                            encoding)
        y = coder.labels(np.concatenate(codes), str(path)) if codes else None
        seq_range, Xprev = runs.ranges(X.shape[0]), None
    else:
        no_columns_in_arrays(path, columns)
        arrays = read_npz_arrays(path, labels, scratch, sequences)
        X, y, seq_range, Xprev = arrays["X"], arrays.get("labels"), arrays["seq_range"], arrays.get("Xprev")
    y, names = row_labels(y, labels_file, X.shape[0], path, "rows (time steps)", encoding)
    seq_range = check_seq_range(seq_range, X.shape[0], str(path), name=sequences or "seq_range")
    if Xprev is not None and Xprev.shape != X.shape:
        raise BnpviError(f"{path}: Xprev has shape {Xprev.shape} but X has shape {X.shape}")
    return Sequences(X, seq_range, Xprev, y, names)


class _SequenceRuns:
    """The sequences of a column of sequence ids met a chunk at a time: where each run of equal ids starts;
    BnpviError naming the row where an id comes back after another one."""

    def __init__(self, path: Path):
        self.path = path
        self.seen: set = set()
        self.starts: list[int] = []
        self.last = None

    def add(self, ids: np.ndarray, first: int) -> None:
        """The ids of rows ``first, first + 1, ...``."""
        import pandas as pd  # here, not with the module: bnpvi-apply imports the readers and needs no pandas

        codes, uniq = pd.factorize(ids)  # ids numbered in order of first appearance within the chunk
        for start in np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]):
            value = uniq[codes[start]]
            if start == 0 and self.starts and value == self.last:
                continue  # the sequence of the chunk before goes on
            if value in self.seen:
                shown = value.item() if isinstance(value, np.generic) else value
                raise BnpviError(f"{self.path}: sequence id {shown!r} in row {first + int(start)} reappears after "
                                 "other sequences; the rows of one sequence must be contiguous (rows counted from 0, "
                                 "after any header)")
            self.seen.add(value)
            self.starts.append(first + int(start))
        self.last = uniq[codes[-1]] if codes.size else self.last

    def ranges(self, n_rows: int) -> np.ndarray:
        """seq_range of the runs, from 0 to ``n_rows``."""
        return np.array(self.starts + [n_rows], dtype=np.int64)


READER = Reader(holds="sequences", files=".csv and .npz files of sequences",
                suffixes=SEQ_SUFFIXES,
                options=frozenset({"sequences", "sequence_column", "labels", "labels_file", "columns", "encoding"}),
                claims=lambda path, options: options.get("sequences") is not None
                or options.get("sequence_column") is not None,
                read=read_sequences)
