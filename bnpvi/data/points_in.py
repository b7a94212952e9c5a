"""Points in: a data matrix (one row per atom) from CSV, NPY or NPZ, for a ``"points"`` batch file.

The matrix is never held whole: an ``.npy`` file is memory-mapped, a CSV file is read in chunks of rows and
an ``.npz`` member a block at a time into a spool, each block checked on the way; a shuffle or a held-out
split reorders it by index arrays (:mod:`bnpvi.data.reorder`), and the writer reads it a block at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from bnpvi.data.checks import check_points_layout, check_weights
from bnpvi.data.labels import LabelCoder, appended_labels, one_source, row_labels
from bnpvi.data.mapped import JoinedRows, scratch_space
from bnpvi.data.points import HeldoutPoints, write_points
from bnpvi.data.reorder import take_units
from bnpvi.data.sources import (Reader, checked_rows, existing_file, map_npy, no_columns_in_arrays, nonempty,
                                read_npz_arrays, show_suffix, spool_csv_table)
from bnpvi.errors import BnpviError

POINT_SUFFIXES = (".csv", ".npz", ".npy")
SUFFIXES = (".csv", ".npz", ".npy", ".ldac")


@dataclass(frozen=True)
class Points:
    """A data matrix and its labels, as read by :func:`read_points`.

    Attributes
    ----------
    X : (N, D) array, finite
        In memory (float64), or read a block at a time: the source mapped or spooled
        (:class:`~bnpvi.data.mapped.MappedArray`), or a view of it in another order
        (:class:`~bnpvi.data.reorder.Reordered`).
    labels : (N,) int64 array (or view) or None
        Integers, or codes of ``label_names``.
    label_names : tuple of str or None
    weights : (N,) float64 array (or view) or None
        w_n ≥ 0 of every row (``--weights``); None: every row counts once.
    """

    X: object
    labels: object = None
    label_names: tuple[str, ...] | None = None
    weights: object = None

    unit: ClassVar[str] = "rows"
    count_name: ClassVar[str] = "N"
    holds: ClassVar[str] = "points"

    @property
    def n_units(self) -> int:
        """Number of rows."""
        return self.X.shape[0]

    def permuted(self, perm: np.ndarray) -> "Points":
        """The rows in the order ``perm`` (labels follow), as views: nothing is copied."""
        return Points(take_units(self.X, perm), None if self.labels is None else take_units(self.labels, perm),
                      self.label_names, None if self.weights is None else take_units(self.weights, perm))

    def in_memory(self) -> "Points":
        """The same points with every array read into memory."""
        return Points(self.X[:], None if self.labels is None else self.labels[:], self.label_names,
                      None if self.weights is None else self.weights[:])

    def after(self, store, where: str) -> "Points":
        """The rows of the points file ``store`` (named ``where``), then these (``convert(append_to=...)``): read a
        block at a time from the open file as they are written, so memory holds a block of them."""
        if store.D != self.X.shape[1]:
            raise BnpviError(f"{where} has D={store.D} columns, the new rows D={self.X.shape[1]}")
        labels, names = appended_labels(store, self.labels, self.label_names, where)
        weights = None  # a row without a weight (on either side) counts once
        if store.has_weights or self.weights is not None:
            old = store.read_weights() if store.has_weights else np.ones(store.n_atoms)
            weights = np.concatenate([old, np.ones(self.X.shape[0]) if self.weights is None else self.weights[:]])
        return Points(JoinedRows([store.dataset("X"), self.X]), labels, names, weights)

    def heldout_part(self, index: np.ndarray, train_index: np.ndarray, fraction: float, seed: int) -> HeldoutPoints:
        """These rows as the held-out part of a file whose training rows are ``train_index`` of the source (their
        weights are not kept: held-out points are scored one by one, each counting once)."""
        return HeldoutPoints(self.X, index, train_index, self.labels, fraction, seed)

    def write(self, dst, **options) -> Path:
        """Write a ``"points"`` batch file (``options``: those of ``write_points``)."""
        return write_points(dst, self.X, labels=self.labels, label_names=self.label_names, weights=self.weights,
                            **options)


def read_points(path, labels: str | None = None, labels_file=None, columns=None, scratch=None,
                encoding: str = "utf-8", weights: str | None = None) -> Points:
    """Read a data matrix (and optionally true labels) from a CSV, NPZ or NPY file.

    Parameters
    ----------
    path : str or Path
        ``.csv``: one row per atom, comma-separated. A first row without any
        numeric cell is taken as a header. Every data column must be numeric.
        ``.npz``: the data is the array ``X``.
        ``.npy``: the single array is the data.
    labels : str, optional
        CSV: the header name of a column to keep as labels and remove from X (for
        a file without a header, a column index such as ``0`` or ``-1``).
        NPZ: the name of the label array. Not supported for NPY.
        Integer labels are kept as they are; any other labels (e.g. strings) are
        replaced by their index in the sorted list of distinct values, which is kept as their names.
    labels_file : str or Path, optional
        A file with one label per line, one line per row (instead of ``labels``).
    columns : str or sequence, optional
        CSV only: the data columns (names or 0-based indices, ``"a,b,c"``); the others are left out.
    scratch : Path, optional
        A scratch directory (:func:`~bnpvi.data.mapped.scratch_space`): X is then read a block at a time
        and never held whole - an ``.npy`` file memory-mapped, a CSV (read in chunks of rows) or an ``.npz``
        member (decompressed a block at a time) spooled there - and stays on disk until the directory goes.
        Default: a temporary one, and X is returned in memory.
    encoding : str, default "utf-8"
        The text encoding of a CSV file and of ``labels_file`` (any codec Python knows).
    weights : str, optional
        CSV only: the header name (or index) of a column of per-row weights w_n ≥ 0, removed from X: a row
        of weight w counts w times in every summary and entropy of a run. Negative, missing (NaN) or
        non-numeric weights, or all of them 0, are one-line errors; weights that are all 1 are dropped.

    Returns
    -------
    Points

    Raises
    ------
    BnpviError
        One line naming the file and the problem: the first bad row (counted from 0) and column.
    """
    path, suffix = existing_file(path)
    if suffix not in SUFFIXES:
        raise BnpviError(f"{path}: unknown file type ({show_suffix(path)}); expected one of {', '.join(SUFFIXES)}")
    if suffix not in POINT_SUFFIXES:
        raise BnpviError(f"{path}: a {suffix} file holds bag-of-words documents, not a data matrix; "
                         "read it with read_documents")
    one_source(labels, labels_file)
    nonempty(path)
    if weights is not None and suffix != ".csv":
        raise BnpviError(f"{path}: --weights names a CSV column; a {suffix} file has none (write the weights as "
                         "a column of a CSV file, or pass sample_weight to fit)")
    if scratch is None:
        with scratch_space() as scratch:
            return read_points(path, labels, labels_file, columns, scratch, encoding, weights).in_memory()
    w = None
    if suffix == ".csv":
        coder, codes, parts = LabelCoder(), [], []
        X = spool_csv_table(path, {"labels": labels, "weights": weights}, columns, scratch,
                            {"labels": lambda values, first: codes.append(coder.add(values)),
                             "weights": lambda values, first: parts.append(_weights(values, first, path, weights))},
                            encoding)
        y = coder.labels(np.concatenate(codes), str(path)) if codes else None
        if parts:
            w = check_weights(np.concatenate(parts), X.shape[0], str(path), f"weights (column {weights!r})")
    else:
        no_columns_in_arrays(path, columns)
        if suffix == ".npz":
            arrays = read_npz_arrays(path, labels, scratch)
            X, y = arrays["X"], arrays.get("labels")
        elif labels is not None:
            raise BnpviError(f"{path}: a .npy file holds one array, so labels={labels!r} cannot be read from it; "
                             "use a .npz file with arrays X and labels, or --labels-file")
        else:
            X, y = map_npy(path), None
            check_points_layout(X, str(path))
            checked_rows(X, str(path))
    return Points(X, *row_labels(y, labels_file, X.shape[0], path, "rows", encoding), weights=w)


def _weights(values: np.ndarray, first: int, path: Path, column: str) -> np.ndarray:
    """A chunk of the weights column as float64; a one-line error naming the first cell that is not a number."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        for i, value in enumerate(values):
            try:
                float(value)
            except (TypeError, ValueError):
                raise BnpviError(f"{path}: weights column {column!r} has {value!r} in row {first + i}, "
                                 "not a number") from None
        raise


def read_table(path, labels: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(X, labels)`` of :func:`read_points` (labels as integers or codes; see there)."""
    points = read_points(path, labels)
    return points.X, points.labels


READER = Reader(holds="points", files=".csv, .npz and .npy files", suffixes=POINT_SUFFIXES,
                options=frozenset({"labels", "labels_file", "columns", "encoding", "weights"}),
                claims=lambda path, options: True, read=read_points)
