"""The HDF5 batch store: one file per data set, read one batch at a time.

File format (``format = "bnpvi-batches"``, ``format_version = 1``, ``kind = "points"``)::

    /X              (N, D) float64, stored whole, chunked by rows, uncompressed by default
    /batch_offsets  (B+1,) int64, 0 = o_0 < o_1 < ... < o_B = N; batch b is rows o_b:o_{b+1}
    /labels         (N,) int64, optional; true cluster labels, kept for evaluation only
    root attrs      format, format_version, kind, N, D, n_batches,
                    batches_fixed (True when the user asked for a batch count at convert time),
                    source (free text), created (ISO 8601 time, UTC)

Files are written atomically (a temporary file in the destination directory,
then ``os.replace``), so a reader never sees a half-written file and a crash
never leaves one behind.

A :class:`BatchStore` keeps only the batch offsets in memory; X is read one
contiguous slice at a time, so memory is O(batch), never O(N) (``labels()``,
which returns N integers for evaluation, is the one exception).
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.batch import PointBatch
from bnpvi.errors import BnpviError
from bnpvi.obs.base import DataMoments

FORMAT = "bnpvi-batches"
FORMAT_VERSION = 1
KINDS = ("points",)

# Largest block (in float64 values) that one-pass scans (moments, validate) read at once.
_SCAN_VALUES = 2**22


# ------------------------------------------------------------------ helpers
def chunk_rows(N: int, D: int) -> int:
    """Rows per HDF5 chunk of X: about 1 MiB per chunk, at most N.

    Parameters
    ----------
    N, D : int
        Shape of X.

    Returns
    -------
    int
        ``min(N, max(1, 2**20 // (8 * D)))``.
    """
    return int(min(N, max(1, 2**20 // (8 * D))))


def split_offsets(N: int, n_batches: int) -> np.ndarray:
    """Offsets of ``n_batches`` contiguous, as-equal-as-possible ranges of N rows.

    The sizes are those of ``np.array_split`` (the first ``N % B`` batches hold
    one row more).

    Parameters
    ----------
    N : int
        Number of rows, at least 1.
    n_batches : int
        Number of batches, 1..N.

    Returns
    -------
    offsets : (n_batches + 1,) int64 ndarray
        ``offsets[0] = 0``, ``offsets[-1] = N``, strictly increasing.
    """
    N, n_batches = int(N), int(n_batches)
    if not 1 <= n_batches <= N:
        raise ValueError(f"n_batches={n_batches} must be between 1 and N={N}")
    base, extra = divmod(N, n_batches)
    sizes = np.full(n_batches, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def first_nonfinite(X: np.ndarray) -> tuple[int, int, str] | None:
    """Locate the first non-finite entry of a 2-D float array.

    Returns
    -------
    (row, column, what) or None
        ``what`` is ``"NaN"``, ``"inf"`` or ``"-inf"``; None when all entries are finite.
    """
    bad = ~np.isfinite(X)
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad.any(axis=1))[0])
    col = int(np.flatnonzero(bad[row])[0])
    value = X[row, col]
    what = "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return row, col, what


def check_points(X, where: str) -> np.ndarray:
    """Validate a data matrix and return it as a C-contiguous float64 array.

    Parameters
    ----------
    X : array_like
        Candidate data, shape (N, D) with N >= 1, D >= 1, all values finite real numbers.
    where : str
        What to name in error messages (usually the file name).

    Returns
    -------
    ndarray of shape (N, D), float64, C-contiguous

    Raises
    ------
    BnpviError
        One line naming ``where`` and the problem (shape, type, first bad row).
    """
    arr = np.asarray(X)
    if arr.dtype.kind not in "biuf":
        raise BnpviError(f"{where}: X must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim == 1:
        raise BnpviError(f"{where}: X is 1-D (shape {arr.shape}); expected a 2-D array (N, D) "
                         f"- reshape it to (N, 1) for a single feature")
    if arr.ndim != 2:
        raise BnpviError(f"{where}: X must be 2-D (N, D), got shape {arr.shape}")
    N, D = arr.shape
    if N < 1:
        raise BnpviError(f"{where}: X has no rows (N=0)")
    if D < 1:
        raise BnpviError(f"{where}: X has no columns (D=0)")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = first_nonfinite(arr)
    if bad is not None:
        row, col, what = bad
        raise BnpviError(f"{where}: X has {what} in row {row}, column {col} (rows counted from 0)")
    return arr


def check_labels(labels, N: int, where: str) -> np.ndarray:
    """Validate true labels: integers, shape (N,). Returns an int64 array.

    Integral floats (e.g. 3.0) are accepted; anything else raises BnpviError.
    """
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise BnpviError(f"{where}: labels must be 1-D, got shape {lab.shape}")
    if lab.shape[0] != N:
        raise BnpviError(f"{where}: labels have {lab.shape[0]} entries but X has {N} rows")
    if lab.dtype.kind in "biu":
        return lab.astype(np.int64)
    if lab.dtype.kind == "f":
        ok = np.isfinite(lab) & (lab == np.round(lab))
        if ok.all():
            return lab.astype(np.int64)
        row = int(np.flatnonzero(~ok)[0])
        raise BnpviError(f"{where}: labels must be integers; row {row} has {lab[row]!r}")
    raise BnpviError(f"{where}: labels must be integers, got dtype {lab.dtype}")


# -------------------------------------------------------------------- write
def write_points(path, X, n_batches: int = 1, labels=None, batches_fixed: bool = True, source: str = "",
                 compression: str | None = None) -> Path:
    """Write a point data set to a batch file, atomically.

    Parameters
    ----------
    path : str or Path
        Destination file; its directory must exist. An existing file is replaced.
    X : array_like, shape (N, D)
        Finite real data; N >= 1, D >= 1.
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
    X = check_points(X, where)
    N, D = X.shape
    if labels is not None:
        labels = check_labels(labels, N, where)
    try:
        n_batches = int(n_batches)
    except (TypeError, ValueError):
        raise BnpviError(f"{where}: n_batches must be an integer, got {n_batches!r}") from None
    if not 1 <= n_batches <= N:
        raise BnpviError(f"{where}: n_batches={n_batches} must be between 1 and N={N}")
    parent = path.parent
    if not parent.is_dir():
        raise BnpviError(f"{where}: directory {parent} does not exist")
    if path.is_dir():
        raise BnpviError(f"{where}: it is a directory")
    offsets = split_offsets(N, n_batches)

    tmp = parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with h5py.File(tmp, "x") as f:
            f.create_dataset("X", data=X, chunks=(chunk_rows(N, D), D), compression=compression)
            f.create_dataset("batch_offsets", data=offsets)
            if labels is not None:
                f.create_dataset("labels", data=labels)
            f.attrs["format"] = FORMAT
            f.attrs["format_version"] = np.int64(FORMAT_VERSION)
            f.attrs["kind"] = "points"
            f.attrs["N"] = np.int64(N)
            f.attrs["D"] = np.int64(D)
            f.attrs["n_batches"] = np.int64(n_batches)
            f.attrs["batches_fixed"] = bool(batches_fixed)
            f.attrs["source"] = str(source)
            f.attrs["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        raise BnpviError(f"{where}: {err.strerror or err}") from None
    finally:
        if tmp.exists():
            try:
                tmp.unlink()
            except OSError:
                pass
    return path


# --------------------------------------------------------------------- read
class BatchStore:
    """Read-only access to a batch file, one batch at a time.

    Open with :meth:`open`; usable as a context manager. Only the batch offsets
    live in memory. The store pickles (path and split only) and reopens the file
    lazily in the receiving process, so worker processes can read their own batches.

    Attributes
    ----------
    path : Path
        The file, as given to :meth:`open`.
    kind : str
        ``"points"``.
    n_atoms, D : int
        Shape of X.
    n_batches : int
        Number of batches in the current split (the stored one or the override).
    batches_fixed : bool
        The file's ``batches_fixed`` attribute.
    has_labels : bool
        Whether the file holds true labels.
    """

    def __init__(self, path: Path, kind: str, n_atoms: int, D: int, offsets: np.ndarray, batches_fixed: bool,
                 has_labels: bool, attrs: dict, handle: h5py.File | None = None):
        self._path = Path(path)
        self._kind = kind
        self._n_atoms = int(n_atoms)
        self._D = int(D)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._offsets.setflags(write=False)
        self._batches_fixed = bool(batches_fixed)
        self._has_labels = bool(has_labels)
        self._attrs = dict(attrs)
        self._file = handle
        self._pid = os.getpid()
        self._closed = False

    # ------------------------------------------------------------ opening
    @classmethod
    def open(cls, path, n_batches: int | None = None) -> "BatchStore":
        """Open a batch file, check its structure, and fix the batch split.

        Parameters
        ----------
        path : str or Path
            A file written by :func:`write_points` (``bnpvi-data convert``).
        n_batches : int, optional
            Batch count to use instead of the stored one. Allowed when the file's
            batches are not fixed (the rows are then split into ``n_batches``
            contiguous, as-equal-as-possible ranges in memory; the file is not
            touched), or when it equals the stored count.

        Returns
        -------
        BatchStore

        Raises
        ------
        BnpviError
            One line naming the file: not found, not HDF5, not a bnpvi batch file,
            unsupported format version, missing datasets, inconsistent offsets, N=0,
            or an ``n_batches`` that conflicts with fixed batches or exceeds N.
        """
        path = Path(path).expanduser()
        if not path.exists():
            raise BnpviError(f"data file not found: {path}")
        if path.is_dir():
            raise BnpviError(f"data file {path} is a directory, not a file")
        try:
            f = h5py.File(path, "r")
        except OSError as err:
            if not h5py.is_hdf5(path):
                raise BnpviError(f"data file {path} is not an HDF5 file") from None
            raise BnpviError(f"data file {path} cannot be opened: {str(err).splitlines()[0]}") from None
        try:
            store = cls._from_handle(path, f, n_batches)
        except BaseException:
            f.close()
            raise
        return store

    @classmethod
    def _from_handle(cls, path: Path, f: h5py.File, n_batches: int | None) -> "BatchStore":
        def fail(problem: str) -> BnpviError:
            return BnpviError(f"data file {path} {problem}")

        attrs = {key: _plain(value) for key, value in f.attrs.items()}
        if not isinstance(attrs.get("format"), str) or attrs["format"] != FORMAT:
            raise fail("is not a bnpvi batch file (no format='bnpvi-batches' attribute; "
                       "write one with `bnpvi-data convert`)")
        version = attrs.get("format_version")
        if not isinstance(version, (int, float)) or version != FORMAT_VERSION:
            raise fail(f"has unsupported format_version {version!r} (this bnpvi reads version {FORMAT_VERSION})")
        kind = attrs.get("kind", "points")
        if kind not in KINDS:
            raise fail(f"holds data of kind {kind!r}; this bnpvi reads only {', '.join(map(repr, KINDS))}")
        for name in ("X", "batch_offsets"):
            if not isinstance(f.get(name), h5py.Dataset):
                raise fail(f"is missing the dataset '{name}'")
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
        off = f["batch_offsets"]
        if off.ndim != 1 or off.dtype.kind not in "iu" or off.shape[0] < 2:
            raise fail(f"has invalid batch_offsets (shape {off.shape}, dtype {off.dtype}); "
                       "expected B+1 integers")
        offsets = np.asarray(off[()], dtype=np.int64)
        if offsets[0] != 0 or offsets[-1] != N or np.any(np.diff(offsets) <= 0):
            raise fail(f"has inconsistent batch_offsets (need 0 = o_0 < o_1 < ... < o_B = N={N}; "
                       f"got first {offsets[0]}, last {offsets[-1]}, {int(np.sum(np.diff(offsets) <= 0))} "
                       "non-increasing step(s))")
        stored_batches = offsets.shape[0] - 1
        stored_attr = attrs.get("n_batches", stored_batches)
        if not isinstance(stored_attr, int) or stored_attr != stored_batches:
            raise fail(f"is inconsistent: attribute n_batches={attrs['n_batches']} but batch_offsets "
                       f"describe {stored_batches} batches")
        has_labels = "labels" in f
        if has_labels:
            lab = f["labels"]
            if not isinstance(lab, h5py.Dataset) or lab.shape != (N,) or lab.dtype.kind not in "iu":
                raise fail(f"has an invalid labels dataset (expected ({N},) integers)")
        fixed = bool(attrs.get("batches_fixed", True))

        if n_batches is not None:
            try:
                requested = int(n_batches)
            except (TypeError, ValueError):
                raise BnpviError(f"alg.n_batches must be an integer, got {n_batches!r}") from None
            if requested < 1:
                raise BnpviError(f"alg.n_batches={requested} must be at least 1")
            if requested > N:
                raise fail(f"has only N={N} atoms; alg.n_batches={requested} would leave empty batches")
            if requested != stored_batches:
                if fixed:
                    raise fail(f"has {stored_batches} fixed batches; alg.n_batches={requested} conflicts with them "
                               "(drop alg.n_batches, or convert the data again without --batches)")
                offsets = split_offsets(N, requested)
        return cls(path, kind, N, D, offsets, fixed, has_labels, attrs, handle=f)

    # --------------------------------------------------------- properties
    @property
    def path(self) -> Path:
        return self._path

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def n_atoms(self) -> int:
        return self._n_atoms

    @property
    def D(self) -> int:
        return self._D

    @property
    def n_batches(self) -> int:
        return int(self._offsets.shape[0] - 1)

    @property
    def batches_fixed(self) -> bool:
        return self._batches_fixed

    @property
    def has_labels(self) -> bool:
        return self._has_labels

    @property
    def offsets(self) -> np.ndarray:
        """(B+1,) int64 read-only array of batch offsets of the current split."""
        return self._offsets

    @property
    def attrs(self) -> dict:
        """The file's root attributes as plain Python values (format, source, created, ...)."""
        return dict(self._attrs)

    # ---------------------------------------------------------------- I/O
    def _handle(self) -> h5py.File:
        if self._closed:
            raise ValueError(f"batch store {self._path} is closed")
        if self._file is None or self._pid != os.getpid():
            # first use in this process (unpickled or forked): open our own handle
            try:
                f = h5py.File(self._path, "r")
            except (OSError, FileNotFoundError):
                raise BnpviError(f"data file {self._path} cannot be reopened (moved or deleted?)") from None
            X = f.get("X")
            if not isinstance(X, h5py.Dataset) or X.shape != (self._n_atoms, self._D):
                f.close()
                raise BnpviError(f"data file {self._path} has changed since it was opened")
            self._file, self._pid = f, os.getpid()
        return self._file

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        X = self._handle()["X"][start:stop]
        return np.ascontiguousarray(X, dtype=np.float64)

    def read_batch(self, b: int) -> PointBatch:
        """Read batch ``b`` (rows ``offsets[b]:offsets[b+1]``) from the file.

        Parameters
        ----------
        b : int
            Batch index, 0 <= b < n_batches.

        Returns
        -------
        PointBatch
            X float64 C-contiguous of shape (size_b, D); ``start = offsets[b]``.
        """
        b = int(b)
        if not 0 <= b < self.n_batches:
            raise IndexError(f"batch {b} out of range 0..{self.n_batches - 1} in {self._path}")
        start, stop = int(self._offsets[b]), int(self._offsets[b + 1])
        return PointBatch(X=self._read_rows(start, stop), start=start)

    def batch_sizes(self) -> np.ndarray:
        """(B,) int64 array: rows in each batch of the current split."""
        return np.diff(self._offsets)

    def labels(self) -> np.ndarray | None:
        """(N,) int64 true labels, or None when the file holds none."""
        if not self._has_labels:
            return None
        return np.asarray(self._handle()["labels"][()], dtype=np.int64)

    def iter_blocks(self, max_values: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(start, X_block)`` over all rows in file order, in blocks of bounded size.

        Blocks hold at most ``max(1, max_values // D)`` rows (default ``max_values``
        2**22, i.e. 32 MiB) whatever the batch split, so one-pass scans use bounded
        memory even for a single huge batch.
        """
        rows = max(1, int(_SCAN_VALUES if max_values is None else max_values) // self._D)
        for start in range(0, self._n_atoms, rows):
            stop = min(self._n_atoms, start + rows)
            yield start, self._read_rows(start, stop)

    def moments(self) -> DataMoments:
        """Whole-data mean and (biased, 1/N) covariance in one pass over the file.

        Blocks are combined with Chan et al.'s parallel update of the centered
        sums, so the result is accurate even for data far from the origin.

        Returns
        -------
        DataMoments
        """
        D = self._D
        n = 0
        mean = np.zeros(D)
        M2 = np.zeros((D, D))
        for _, X in self.iter_blocks():
            n_b = X.shape[0]
            mean_b = X.mean(axis=0)
            C = X - mean_b
            M2_b = C.T @ C
            delta = mean_b - mean
            total = n + n_b
            mean = mean + delta * (n_b / total)
            M2 = M2 + M2_b + np.outer(delta, delta) * (n * n_b / total)
            n = total
        cov = M2 / n
        cov = 0.5 * (cov + cov.T)
        return DataMoments(n_atoms=n, mean=mean, cov=cov)

    def validate(self) -> None:
        """Check that every value is finite.

        Raises
        ------
        BnpviError
            Naming the file, the first bad row (counted from 0), its batch and column.
        """
        for start, X in self.iter_blocks():
            bad = first_nonfinite(X)
            if bad is not None:
                row, col, what = bad
                row += start
                batch = int(np.searchsorted(self._offsets, row, side="right") - 1)
                raise BnpviError(f"data file {self._path} has {what} in row {row} (batch {batch}, column {col})")

    def info(self) -> dict:
        """Summary of the file for display: path, format, kind, N, D, batches, labels, source, created."""
        sizes = self.batch_sizes()
        return {"path": str(self._path), "format": self._attrs.get("format"),
                "format_version": self._attrs.get("format_version"), "kind": self._kind, "N": self._n_atoms,
                "D": self._D, "n_batches": self.n_batches, "batches_fixed": self._batches_fixed,
                "batch_size_min": int(sizes.min()), "batch_size_max": int(sizes.max()),
                "labels": self._has_labels, "source": self._attrs.get("source", ""),
                "created": self._attrs.get("created", "")}

    # ------------------------------------------------------------ closing
    def close(self) -> None:
        """Close the file handle (idempotent). Reading afterwards raises ValueError."""
        if self._file is not None and self._pid == os.getpid():
            try:
                self._file.close()
            except Exception:  # pragma: no cover - h5py teardown quirks
                pass
        self._file = None
        self._closed = True

    def __enter__(self) -> "BatchStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_file"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._offsets.setflags(write=False)

    def __repr__(self) -> str:
        return (f"BatchStore({str(self._path)!r}, kind={self._kind!r}, N={self._n_atoms}, D={self._D}, "
                f"n_batches={self.n_batches}, batches_fixed={self._batches_fixed}, labels={self._has_labels})")


def _plain(value):
    """HDF5 attribute value -> plain Python value (str, int, float, bool)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
