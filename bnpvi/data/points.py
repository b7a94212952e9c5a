"""Point files (kind ``"points"``): one row of a dense matrix X per atom.

:class:`RowStore` reads any file whose atoms are the rows of ``/X`` (points, and
sequences in :mod:`bnpvi.data.seq`): blocks of rows, the finite-value check and
the whole-data moments. :class:`PointStore` adds the batches of independent rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.base import (BatchStore, chunk_1d, chunk_rows, heldout_info, sized_offsets, split_offsets,
                             write_batch_file, write_blocks)
from bnpvi.data.batch import PointBatch
from bnpvi.data.checks import (EntryCheck, as_rows, check_label_names, check_labels, check_n_batches,
                               check_points_layout, check_weights, count_missing, first_nonfinite)
from bnpvi.data.moments import DataMoments
from bnpvi.errors import BnpviError


class RowStore(BatchStore):
    """A batch file whose atoms are the rows of the (N, D) float dataset X.

    ``iter_blocks`` yields ``(first_row, X_block)`` with X blocks of at most
    ``max(1, max_values // D)`` rows. Every value of X must be finite; the
    moments are those of the rows of X.
    """

    @classmethod
    def _read_layout(cls, f: h5py.File, attrs: dict, fail) -> dict:
        if not isinstance(f.get("X"), h5py.Dataset):
            raise fail("is missing the dataset 'X'")
        X = f["X"]
        if X.ndim != 2:
            raise fail(f"has a dataset X of shape {X.shape}; expected 2-D (N, D)")
        if X.dtype.kind not in "biuf":
            raise fail(f"has a dataset X of dtype {X.dtype}; expected float64")
        N, D = (int(s) for s in X.shape)
        if N == 0:
            raise fail("has no data rows (N=0)")
        if D == 0:
            raise fail("has no columns (D=0)")
        for key, actual in (("N", N), ("D", D)):
            if key in attrs and (not isinstance(attrs[key], int) or attrs[key] != actual):
                raise fail(f"is inconsistent: attribute {key}={attrs[key]} but X has shape {X.shape}")
        return {"n_atoms": N, "D": D, "n_units": N}

    def _read_rows(self, start: int, stop: int, name: str = "X") -> np.ndarray:
        return np.ascontiguousarray(self._handle()[name][start:stop], dtype=np.float64)

    def _blocks(self, limit: int, name: str = "X") -> Iterator[tuple[int, np.ndarray]]:
        rows = max(1, limit // self.D)
        for start in range(0, self.n_atoms, rows):
            yield start, self._read_rows(start, min(self.n_atoms, start + rows), name)

    @property
    def n_missing(self) -> int:
        """How many entries of X are missing (NaN), as recorded when the file was written (0 if not recorded)."""
        return int(self._handle()["X"].attrs.get("n_missing", 0))

    @property
    def n_missing_total(self) -> int:
        """How many entries of X and of the held-out part are missing, as recorded when the file was written."""
        held = self._handle().get("heldout/X")
        return self.n_missing + (0 if held is None else int(held.attrs.get("n_missing", 0)))

    def _scan(self, check: bool, moments: bool) -> DataMoments | None:
        """Every value of X finite or missing (NaN; ``check``); mean and covariance of the rows (``moments``),
        with the count of missing entries.

        Blocks are combined with Chan et al.'s parallel update of the centered
        sums, so the moments are accurate even for data far from the origin.
        """
        total = _MomentSum(self.D) if moments else None
        weighted = getattr(self, "has_weights", False)
        for start, X in self.iter_blocks():
            if check:
                self._check_finite("X", start, X)
            if total is not None:
                total.add(X, self.read_weights(start, start + X.shape[0]) if weighted else None)
        return None if total is None else total.moments(f"data file {self._path}")

    def _check_finite(self, name: str, start: int, block: np.ndarray) -> None:
        """BnpviError locating the first infinite value of a block of dataset ``name`` (the first NaN too, but in
        X and heldout/X, whose NaN are missing entries)."""
        bad = first_nonfinite(block, missing_ok=name in ("X", "heldout/X"))
        if bad is not None:
            row, col, what = bad
            raise BnpviError(f"data file {self._path} has {what} {self._locate(name, start + row, col)}")

    def _locate(self, name: str, row: int, col: int) -> str:
        """Where entry (row, col) of dataset ``name`` is, for an error message."""
        raise NotImplementedError


@dataclass(frozen=True)
class HeldoutPoints:
    """Points kept apart for evaluation, stored in the ``heldout`` group of a points file
    (``bnpvi-data convert --heldout F``).

    Attributes
    ----------
    X : (N_h, D) array
        The held-out points.
    index : (N_h,) int
        Index of each held-out point in the source.
    train_index : (N,) int
        Index of each training point in the source, in the order they are written.
    labels : (N_h,) int, optional
    fraction : float, optional
        The fraction F that was asked for (stored as an attribute).
    seed : int, optional
        The seed that chose the held-out points (stored as an attribute).
    """

    X: np.ndarray
    index: np.ndarray
    train_index: np.ndarray
    labels: np.ndarray | None = None
    fraction: float | None = None
    seed: int | None = None


class PointStore(RowStore, kind="points"):
    """Reader of a points file: batch b is rows ``offsets[b]:offsets[b+1]`` of X, as a PointBatch (with the rows'
    ``weights`` when the file has them); the held-out points, if any, in the group ``heldout`` (``X``,
    ``index``, ``train_index``, optional ``labels``), always unweighted: the held-out score is per point."""

    unit = "rows"

    @classmethod
    def _read_layout(cls, f: h5py.File, attrs: dict, fail) -> dict:
        layout = super()._read_layout(f, attrs, fail)
        layout["weighted"] = "weights" in f
        if layout["weighted"]:
            w = f["weights"]
            if not isinstance(w, h5py.Dataset) or w.shape != (layout["n_atoms"],) or w.dtype.kind != "f":
                raise fail(f"has a dataset 'weights' that is not ({layout['n_atoms']},) floats")
        layout["n_heldout"] = 0
        if "heldout" in f:
            g = f["heldout"]
            X = g.get("X") if isinstance(g, h5py.Group) else None
            if not isinstance(X, h5py.Dataset) or X.ndim != 2 or X.shape[1] != layout["D"] or X.shape[0] < 1:
                raise fail(f"has a 'heldout' group without an (N_h, D={layout['D']}) dataset X")
            layout["n_heldout"] = int(X.shape[0])
        return layout

    @property
    def has_weights(self) -> bool:
        """Whether the file holds per-row weights w_n (``/weights``; every summary and entropy is then weighted)."""
        return self._layout["weighted"]

    def read_weights(self, lo: int = 0, hi: int | None = None) -> np.ndarray | None:
        """Weights of rows ``lo:hi`` (all by default) as float64, or None for an unweighted file."""
        if not self.has_weights:
            return None
        hi = self.n_atoms if hi is None else int(hi)
        return np.ascontiguousarray(self._handle()["weights"][int(lo):hi], dtype=np.float64)

    def weight_total(self) -> float:
        """Σ_n w_n over the training rows (N for an unweighted file)."""
        if not self.has_weights:
            return float(self.n_atoms)
        return float(self._handle().attrs.get("weight_total", np.sum(self.read_weights())))

    def read_heldout(self, lo: int = 0, hi: int | None = None) -> PointBatch:
        """Held-out points ``lo:hi`` (all by default) as a PointBatch; every value checked finite."""
        if not self.has_heldout:
            raise BnpviError(f"{self._path} holds no held-out points (make them with "
                             "`bnpvi-data convert SRC DST --heldout F`)")
        hi = self.n_heldout if hi is None else int(hi)
        X = self._read_rows(int(lo), hi, "heldout/X")
        self._check_finite("heldout/X", int(lo), X)
        return PointBatch(X=X)

    def _info_extras(self) -> dict:
        out = {"weighted": self.has_weights, "missing": self.n_missing, **heldout_info(self)}
        if self.has_weights:
            out["weight_total"] = self.weight_total()
        return out

    def _read(self, lo: int, hi: int) -> PointBatch:
        return PointBatch(X=self._read_rows(lo, hi), start=lo, weights=self.read_weights(lo, hi))

    def _scan(self, check: bool, moments: bool) -> DataMoments | None:
        """As :meth:`RowStore._scan` (moments weighted by w_n), and every weight finite and >= 0 (``check``)."""
        if check and self.has_weights:
            rows = max(1, self._limit())
            for start in range(0, self.n_atoms, rows):
                w = self.read_weights(start, min(self.n_atoms, start + rows))
                bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
                if bad.size:
                    raise BnpviError(f"data file {self._path} has weight {w[bad[0]]!r} in row {start + int(bad[0])} "
                                     "(weights must be finite and >= 0)")
        return super()._scan(check, moments)

    def _locate(self, name: str, row: int, col: int) -> str:
        if name != "X":
            return f"in row {row} of {name} (column {col})"
        return f"in row {row} (batch {self._batch_of(row)}, column {col})"


class _MomentSum:
    """Running count, mean and centered sum of squares of rows, merged block by block (Chan et al. 1979).

    Rows with missing (NaN) entries switch it, from the first such block on, to pairwise-complete sums
    about a fixed shift c (the mean so far): per pair of columns (d, e) the weight n_de of the rows that
    observe both, Σ w z_d z_e and Σ w z_d o_e with z = x − c (0 where missing) and o the observed mask, so
    each mean and covariance entry is that of the rows observing it. Complete data never leave Chan's path.
    """

    def __init__(self, D: int):
        self.n = 0  # Σ w_n (the number of rows when unweighted)
        self.rows = 0
        self.missing = 0
        self.mean = np.zeros(D)
        self.M2 = np.zeros((D, D))
        self.pairs = None  # (shift c, n_de, Σ w z_d z_e, Σ w z_d o_e) once a block had a missing entry

    def add(self, X: np.ndarray, w: np.ndarray | None = None) -> None:
        """Add the rows of X, each counted w_n times when ``w`` is given (weighted mean and covariance)."""
        self.rows += X.shape[0]
        missing = count_missing(X)
        if missing or self.pairs is not None:
            self.missing += missing
            self._add_pairs(X, w)
            return
        if w is None:
            n_b = X.shape[0]
            mean_b = X.mean(axis=0)
            C = X - mean_b
            scatter = C.T @ C
        else:
            n_b = float(w.sum())
            if n_b <= 0:
                return
            mean_b = (w @ X) / n_b
            C = X - mean_b
            scatter = C.T @ (C * w[:, None])
        delta = mean_b - self.mean
        total = self.n + n_b
        self.mean = self.mean + delta * (n_b / total)
        self.M2 = self.M2 + scatter + np.outer(delta, delta) * (self.n * n_b / total)
        self.n = total

    def _add_pairs(self, X: np.ndarray, w: np.ndarray | None) -> None:
        if self.pairs is None:  # the rows so far observe every column: their sums about c = their mean
            D = self.mean.shape[0]
            self.pairs = (self.mean.copy(), np.full((D, D), float(self.n)), self.M2.copy(), np.zeros((D, D)))
        shift, count, zz, zo = self.pairs
        O = ~np.isnan(X)
        Z = np.where(O, X - shift, 0.0)
        Of = O.astype(np.float64)
        Zw, Ow = (Z, Of) if w is None else (Z * w[:, None], Of * w[:, None])
        count += Of.T @ Ow
        zz += Z.T @ Zw
        zo += Zw.T @ Of

    def moments(self, where: str = "the data") -> DataMoments:
        if self.pairs is None:
            cov = self.M2 / self.n
            return DataMoments(n_atoms=self.rows, mean=self.mean, cov=0.5 * (cov + cov.T))
        shift, count, zz, zo = self.pairs
        seen = np.diag(count)
        if np.any(seen <= 0):
            raise BnpviError(f"{where}: column {int(np.flatnonzero(seen <= 0)[0])} has no observed value "
                             "(every entry of it is missing)")
        both = np.where(count > 0, count, 1.0)
        means = zo / both  # (d, e): the mean of z_d over the rows observing d and e
        cov = np.where(count > 0, zz / both - means * means.T, 0.0)
        values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))  # pairwise-complete: made positive semi-definite
        floor = 1e-12 * max(float(values.max()), 1e-300)
        cov = (vectors * np.maximum(values, floor)) @ vectors.T
        return DataMoments(n_atoms=self.rows, mean=shift + np.diag(means), cov=0.5 * (cov + cov.T),
                           n_missing=self.missing)


def note_missing(dataset: h5py.Dataset, entries: EntryCheck) -> None:
    """Record on a written data matrix how many of its entries are missing (``n_missing``, when any)."""
    if entries.missing:
        dataset.attrs["n_missing"] = np.int64(entries.missing)


def write_points(path, X, n_batches: int = 1, labels=None, batches_fixed: bool = True, source: str = "",
                 compression: str | None = None, heldout: HeldoutPoints | None = None, label_names=None,
                 weights=None, batch_sizes=None) -> Path:
    """Write a point data set to a batch file, atomically.

    Parameters
    ----------
    path : str or Path
        Destination file; its directory must exist. An existing file is replaced.
    X : array_like, shape (N, D)
        Finite real data; N >= 1, D >= 1. An array in memory, or one read a block at a time
        (:class:`~bnpvi.data.mapped.MappedArray`, :class:`~bnpvi.data.reorder.Reordered`): X is written
        (and checked) block by block, so memory holds one block of it.
    n_batches : int, default 1
        Number of contiguous, as-equal-as-possible batches (1..N).
    labels : array_like of int, shape (N,), optional
        True cluster labels, stored for evaluation only.
    batches_fixed : bool, default True
        Whether the batch split is part of the data set (a reader may not re-split it).
    source : str, default ""
        Free-text provenance stored in the ``source`` attribute.
    compression : str, optional
        HDF5 compression filter for X (e.g. ``"gzip"``); none by default.
    heldout : HeldoutPoints, optional
        Points kept apart for evaluation (group ``heldout``); X above is then the training points only.
    label_names : sequence of str, optional
        The name of each label code (``labels`` and the held-out labels are then codes).
    weights : array_like of float, shape (N,), optional
        w_n ≥ 0 of every training row (not all 0), stored as ``/weights`` and read with each batch: a row of
        weight w counts w times in every summary and entropy. Weights that are all 1 are not stored.
    batch_sizes : sequence of int, optional
        The rows of every batch, in order (positive, summing to N), in place of ``n_batches`` equal ones: a
        run continued on more data (``partial_fit``) keeps its batches and adds new ones after them.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BnpviError
        Invalid X, labels or n_batches, or the file cannot be written. Nothing is
        left at ``path`` (nor a temporary file) on failure.
    """
    path = Path(path).expanduser()
    where = f"cannot write {path}"
    X = as_rows(X)
    check_points_layout(X, where)
    N, D = X.shape
    if labels is not None:
        labels = check_labels(labels[:], N, where)
    if label_names is not None:
        label_names = check_label_names(label_names, labels, where)
    offsets = split_offsets(N, check_n_batches(n_batches, N, where, f"N={N}")) if batch_sizes is None else \
        sized_offsets(batch_sizes, N, where)
    if weights is not None:
        weights = check_weights(weights[:], N, where)

    if heldout is not None:
        held = as_rows(heldout.X)
        check_points_layout(held, f"{where}: held-out points")
        if held.shape[1] != D:
            raise BnpviError(f"{where}: the held-out points have D={held.shape[1]}, the training points D={D}")
        held_labels = None if heldout.labels is None else check_labels(heldout.labels[:], held.shape[0], where)

    def datasets(f: h5py.File) -> None:
        entries = EntryCheck(where)
        note_missing(write_blocks(f, "X", X, np.float64, entries, chunks=(chunk_rows(N, D), D),
                                  compression=compression), entries)
        if weights is not None:
            f.create_dataset("weights", data=weights, chunks=(chunk_1d(N, 8),))
            f.attrs["weight_total"] = float(np.sum(weights))
        if heldout is not None:
            g = f.create_group("heldout")
            entries = EntryCheck(f"{where}: held-out points")
            note_missing(write_blocks(g, "X", held, np.float64, entries, compression=compression), entries)
            g.create_dataset("index", data=np.asarray(heldout.index, dtype=np.int64))
            g.create_dataset("train_index", data=np.asarray(heldout.train_index, dtype=np.int64))
            if held_labels is not None:
                g.create_dataset("labels", data=held_labels)
            for key in ("fraction", "seed"):
                if getattr(heldout, key) is not None:
                    g.attrs[key] = getattr(heldout, key)

    return write_batch_file(path, where, "points", N, D, offsets, labels, batches_fixed, source, datasets,
                            label_names=label_names)
