"""The HDF5 batch store: one file per data set, read one batch at a time.

Two kinds of data share one file format (``format = "bnpvi-batches"``,
``format_version = 1``); the root attribute ``kind`` says which.

``kind = "points"`` (one row per atom)::

    /X              (N, D) float64, stored whole, chunked by rows, uncompressed by default
    /batch_offsets  (B+1,) int64, 0 = o_0 < o_1 < ... < o_B = N; batch b is rows o_b:o_{b+1}
    /labels         (N,) int64, optional; true cluster labels, kept for evaluation only
    root attrs      format, format_version, kind, N, D, n_batches,
                    batches_fixed (True when the user asked for a batch count at convert time),
                    source (free text), created (ISO 8601 time, UTC)

``kind = "bow"`` (bag of words, one document per atom, CSR layout)::

    /word_ids       (nnz,) int32, word types in [0, V); unique within each document
    /word_counts    (nnz,) float64, positive whole numbers
    /doc_range      (N+1,) int64, 0 = r_0 < r_1 < ... < r_N = nnz; document d is entries r_d:r_{d+1}
    /batch_offsets  (B+1,) int64, in documents (a document is never split across batches)
    /labels         (N,) int64, optional
    /vocab          (V,) UTF-8 strings, optional
    root attrs      as for points with D = V (vocabulary size), plus nnz and tokens (sum of counts)

The bag-of-words datasets (batch_offsets aside) are chunked, about 1 MiB per
chunk. Every document holds at least one word and lists each word id once
(:func:`check_documents`); readers get :class:`~bnpvi.data.batch.WordCountBatch`
objects, one batch of whole documents at a time. Point files written before
this layout existed are unchanged and still read.

Files are written atomically (a temporary file in the destination directory,
then ``os.replace``), so a reader never sees a half-written file and a crash
never leaves one behind.

A :class:`BatchStore` keeps only the batch offsets in memory; X (or a batch's
slice of doc_range, word_ids and word_counts) is read one contiguous slice at a
time, so memory is O(batch), never O(N) (``labels()`` and ``vocab()`` are the
exceptions).
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.errors import BnpviError
from bnpvi.data.moments import DataMoments

FORMAT = "bnpvi-batches"
FORMAT_VERSION = 1
KINDS = ("points", "bow")

# Largest block (in float64 values) that one-pass scans (moments, validate) read at once.
_SCAN_VALUES = 2**22
# Bytes per chunk of the 1-D datasets of bag-of-words files.
_CHUNK_BYTES = 2**20
_INT32_MAX = int(np.iinfo(np.int32).max)


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


def check_labels(labels, N: int, where: str, atoms: str | None = None) -> np.ndarray:
    """Validate true labels: integers, shape (N,). Returns an int64 array.

    Integral floats (e.g. 3.0) are accepted; anything else raises BnpviError.
    ``atoms`` names what there are N of in the length message (default
    ``"X has N rows"``; e.g. ``"there are N documents"``).
    """
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise BnpviError(f"{where}: labels must be 1-D, got shape {lab.shape}")
    if lab.shape[0] != N:
        atoms = f"X has {N} rows" if atoms is None else atoms
        raise BnpviError(f"{where}: labels have {lab.shape[0]} entries but {atoms}")
    if lab.dtype.kind in "biu":
        return lab.astype(np.int64)
    if lab.dtype.kind == "f":
        ok = np.isfinite(lab) & (lab == np.round(lab))
        if ok.all():
            return lab.astype(np.int64)
        row = int(np.flatnonzero(~ok)[0])
        raise BnpviError(f"{where}: labels must be integers; row {row} has {lab[row].item()!r}")
    raise BnpviError(f"{where}: labels must be integers, got dtype {lab.dtype}")


def as_index_array(a, name: str, where: str) -> np.ndarray:
    """A 1-D array of whole numbers (ints, or floats with integral values) as int64."""
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise BnpviError(f"{where}: {name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise BnpviError(f"{where}: {name} has values too large for int64")
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f":
        ok = np.isfinite(arr) & (arr == np.round(arr)) & (np.abs(arr) < 2.0**62)
        if not ok.all():
            j = int(np.flatnonzero(~ok)[0])
            raise BnpviError(f"{where}: {name} must hold integers; entry {j} is {arr[j].item()!r}")
        return arr.astype(np.int64)
    raise BnpviError(f"{where}: {name} must hold integers, got dtype {arr.dtype}")


def _doc_of(doc_range: np.ndarray, entry: int) -> int:
    """The document holding CSR entry ``entry`` (doc_range strictly increasing)."""
    return int(np.searchsorted(doc_range, entry, side="right") - 1)


def check_vocab(vocab, V: int, where: str) -> list[str]:
    """Validate a vocabulary: V strings (one per word id). Returns a list of str."""
    if isinstance(vocab, (str, bytes)):
        raise BnpviError(f"{where}: vocab must be a sequence of V strings, not a single string")
    words = list(vocab)
    if len(words) != V:
        raise BnpviError(f"{where}: vocab has {len(words)} words but the vocabulary size is V={V}")
    out = []
    for i, w in enumerate(words):
        if isinstance(w, bytes):
            try:
                w = w.decode("utf-8")
            except UnicodeDecodeError:
                raise BnpviError(f"{where}: vocab word {i} is not valid UTF-8") from None
        elif isinstance(w, np.str_):
            w = str(w)
        if not isinstance(w, str):
            raise BnpviError(f"{where}: vocab word {i} is {w!r}, not a string")
        if "\x00" in w:
            raise BnpviError(f"{where}: vocab word {i} contains a NUL character")
        out.append(w)
    return out


def check_documents(word_ids, word_counts, doc_range, vocab_size, where: str, duplicates: str = "reject",
                    doc_name=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Validate a bag-of-words corpus in CSR form and return it in stored dtypes.

    Parameters
    ----------
    word_ids : array_like of int, shape (nnz,)
        Word types, each in [0, vocab_size).
    word_counts : array_like, shape (nnz,)
        Counts: finite, positive, whole numbers (any numeric dtype).
    doc_range : array_like of int, shape (N+1,)
        Document d is entries ``doc_range[d]:doc_range[d+1]``; starts at 0, ends
        at nnz, and every document holds at least one word (empty documents are
        rejected: they carry no information and would only skew per-document
        statistics).
    vocab_size : int
        V, between 1 and 2**31 - 1.
    where : str
        What to name in error messages (usually the file name).
    duplicates : {"reject", "sum"}
        What to do with a word id repeated within one document: reject it (the
        stored form), or add its counts into the first occurrence (converters).
        Entry order is otherwise kept.
    doc_name : callable, optional
        ``doc_name(d) -> str`` names document d in messages (default ``"document d"``).

    Returns
    -------
    word_ids : (nnz',) int32
    word_counts : (nnz',) float64
    doc_range : (N+1,) int64
    vocab_size : int

    Raises
    ------
    BnpviError
        One line naming ``where``, the problem and the first bad document (counted from 0).
    """
    if duplicates not in ("reject", "sum"):
        raise ValueError(f"duplicates must be 'reject' or 'sum', got {duplicates!r}")
    name = doc_name if doc_name is not None else (lambda d: f"document {d}")
    try:
        V = int(vocab_size)
    except (TypeError, ValueError):
        raise BnpviError(f"{where}: vocab_size must be an integer, got {vocab_size!r}") from None
    if isinstance(vocab_size, (float, np.floating)) and V != vocab_size:
        raise BnpviError(f"{where}: vocab_size must be an integer, got {vocab_size!r}")
    if not 1 <= V <= _INT32_MAX:
        raise BnpviError(f"{where}: vocab_size V={V} must be between 1 and {_INT32_MAX}")
    ids = as_index_array(word_ids, "word_ids", where)
    dr = as_index_array(doc_range, "doc_range", where)
    counts = np.asarray(word_counts)
    if counts.ndim != 1:
        raise BnpviError(f"{where}: word_counts must be 1-D, got shape {counts.shape}")
    if counts.dtype.kind not in "iuf":
        raise BnpviError(f"{where}: word_counts must hold numbers, got dtype {counts.dtype}")
    nnz = ids.shape[0]
    if counts.shape[0] != nnz:
        raise BnpviError(f"{where}: word_ids has {nnz} entries but word_counts has {counts.shape[0]}")
    if dr.shape[0] < 2:
        raise BnpviError(f"{where}: no documents (doc_range has {dr.shape[0]} entries; need N+1 >= 2)")
    if dr[0] != 0:
        raise BnpviError(f"{where}: doc_range must start at 0, got {dr[0]}")
    if dr[-1] != nnz:
        raise BnpviError(f"{where}: doc_range ends at {dr[-1]} but there are nnz={nnz} word entries")
    sizes = np.diff(dr)
    if (sizes < 0).any():
        d = int(np.flatnonzero(sizes < 0)[0])
        raise BnpviError(f"{where}: doc_range decreases at {name(d)} ({dr[d]} -> {dr[d + 1]})")
    if (sizes == 0).any():
        d = int(np.flatnonzero(sizes == 0)[0])
        raise BnpviError(f"{where}: {name(d)} has no words (documents counted from 0); "
                         "empty documents are not allowed - drop them")
    bad = (ids < 0) | (ids >= V)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise BnpviError(f"{where}: {name(_doc_of(dr, j))} has word id {ids[j]} outside the vocabulary "
                         f"(ids run from 0 to V-1 = {V - 1})")
    counts = counts.astype(np.float64, copy=False)
    bad = ~np.isfinite(counts)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise BnpviError(f"{where}: {name(_doc_of(dr, j))} has a count of {counts[j]} for word {ids[j]}")
    bad = counts <= 0
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise BnpviError(f"{where}: {name(_doc_of(dr, j))} has a count of {counts[j]:g} for word {ids[j]} "
                         "(counts must be positive)")
    bad = counts != np.round(counts)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise BnpviError(f"{where}: {name(_doc_of(dr, j))} has a non-integer count {counts[j].item()!r} "
                         f"for word {ids[j]}")
    ids, counts, dr = _merge_duplicates(ids, counts, dr, V, where, duplicates, name)
    return (np.ascontiguousarray(ids, dtype=np.int32), np.ascontiguousarray(counts, dtype=np.float64),
            np.ascontiguousarray(dr, dtype=np.int64), V)


def _merge_duplicates(ids, counts, dr, V, where, duplicates, name):
    """Reject, or sum into the first occurrence, word ids repeated within a document."""
    N = dr.shape[0] - 1
    if ids.shape[0] < 2:
        return ids, counts, dr
    doc = np.repeat(np.arange(N, dtype=np.int64), np.diff(dr))
    if N * V < 2**62:
        key = doc * V + ids
    else:  # pragma: no cover - astronomically large N * V
        key = np.unique(np.stack([doc, ids], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if uniq.shape[0] == key.shape[0]:
        return ids, counts, dr
    if duplicates == "reject":
        dup = np.ones(key.shape[0], dtype=bool)
        dup[first] = False
        j = int(np.flatnonzero(dup)[0])
        raise BnpviError(f"{where}: {name(int(doc[j]))} lists word {ids[j]} more than once "
                         "(sum its counts into one entry)")
    inverse = inverse.reshape(-1)
    summed = np.bincount(inverse, weights=counts, minlength=uniq.shape[0])
    keep = np.sort(first)
    new_doc = doc[keep]
    new_dr = np.concatenate([[0], np.cumsum(np.bincount(new_doc, minlength=N))]).astype(np.int64)
    return ids[keep], summed[inverse[keep]], new_dr


def chunk_1d(n: int, itemsize: int) -> int:
    """Entries per HDF5 chunk of a 1-D dataset: about 1 MiB per chunk, at least 1, at most n."""
    return int(max(1, min(n, _CHUNK_BYTES // max(1, int(itemsize)))))


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
    _check_destination(path, where)
    offsets = split_offsets(N, n_batches)

    def fill(f: h5py.File) -> None:
        f.create_dataset("X", data=X, chunks=(chunk_rows(N, D), D), compression=compression)
        f.create_dataset("batch_offsets", data=offsets)
        if labels is not None:
            f.create_dataset("labels", data=labels)
        _common_attrs(f, "points", N, D, n_batches, batches_fixed, source)

    _atomic_write(path, where, fill)
    return path


def write_documents(path, word_ids, word_counts, doc_range, vocab_size: int, n_batches: int = 1, labels=None,
                    vocab=None, batches_fixed: bool = True, source: str = "", compression: str | None = None) -> Path:
    """Write a bag-of-words corpus (CSR arrays) to a batch file of kind ``"bow"``, atomically.

    Parameters
    ----------
    path : str or Path
        Destination file; its directory must exist. An existing file is replaced.
    word_ids : array_like of int, shape (nnz,)
        Word types in [0, vocab_size), each at most once per document.
    word_counts : array_like, shape (nnz,)
        Positive whole-number counts.
    doc_range : array_like of int, shape (N+1,)
        Document d is entries ``doc_range[d]:doc_range[d+1]``; 0 first, nnz last,
        and no empty documents.
    vocab_size : int
        V (stored as the attribute D).
    n_batches : int, default 1
        Number of batches of whole documents, as equal in document count as possible (1..N).
    labels : array_like of int, shape (N,), optional
        True labels of the documents, stored for evaluation only.
    vocab : sequence of str, length V, optional
        The word of each id.
    batches_fixed : bool, default True
        Whether the batch split is part of the data set (a reader may not re-split it).
    source : str, default ""
        Free-text provenance stored in the ``source`` attribute.
    compression : str, optional
        HDF5 compression filter for word_ids and word_counts; none by default.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BnpviError
        One line naming ``path``: invalid arrays (see :func:`check_documents`;
        repeated ids within a document are an error here - converters sum them),
        labels, vocab or n_batches, or the file cannot be written. Nothing is left
        at ``path`` (nor a temporary file) on failure.
    """
    path = Path(path).expanduser()
    where = f"cannot write {path}"
    ids, counts, dr, V = check_documents(word_ids, word_counts, doc_range, vocab_size, where)
    N, nnz = dr.shape[0] - 1, ids.shape[0]
    if labels is not None:
        labels = check_labels(labels, N, where, atoms=f"there are {N} documents")
    if vocab is not None:
        vocab = check_vocab(vocab, V, where)
    try:
        n_batches = int(n_batches)
    except (TypeError, ValueError):
        raise BnpviError(f"{where}: n_batches must be an integer, got {n_batches!r}") from None
    if not 1 <= n_batches <= N:
        raise BnpviError(f"{where}: n_batches={n_batches} must be between 1 and N={N} (documents)")
    _check_destination(path, where)
    offsets = split_offsets(N, n_batches)
    tokens = float(counts.sum())

    def fill(f: h5py.File) -> None:
        f.create_dataset("word_ids", data=ids, chunks=(chunk_1d(nnz, 4),), compression=compression)
        f.create_dataset("word_counts", data=counts, chunks=(chunk_1d(nnz, 8),), compression=compression)
        f.create_dataset("doc_range", data=dr, chunks=(chunk_1d(N + 1, 8),))
        f.create_dataset("batch_offsets", data=offsets)
        if labels is not None:
            f.create_dataset("labels", data=labels, chunks=(chunk_1d(N, 8),))
        if vocab is not None:
            f.create_dataset("vocab", data=np.array(vocab, dtype=object), dtype=h5py.string_dtype("utf-8"),
                             chunks=(chunk_1d(V, 64),))
        _common_attrs(f, "bow", N, V, n_batches, batches_fixed, source)
        f.attrs["nnz"] = np.int64(nnz)
        f.attrs["tokens"] = np.int64(tokens) if tokens < 2**63 else tokens

    _atomic_write(path, where, fill)
    return path


def _check_destination(path: Path, where: str) -> None:
    if not path.parent.is_dir():
        raise BnpviError(f"{where}: directory {path.parent} does not exist")
    if path.is_dir():
        raise BnpviError(f"{where}: it is a directory")


def _common_attrs(f: h5py.File, kind: str, N: int, D: int, n_batches: int, batches_fixed: bool, source: str) -> None:
    f.attrs["format"] = FORMAT
    f.attrs["format_version"] = np.int64(FORMAT_VERSION)
    f.attrs["kind"] = kind
    f.attrs["N"] = np.int64(N)
    f.attrs["D"] = np.int64(D)
    f.attrs["n_batches"] = np.int64(n_batches)
    f.attrs["batches_fixed"] = bool(batches_fixed)
    f.attrs["source"] = str(source)
    f.attrs["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")


def _atomic_write(path: Path, where: str, fill) -> None:
    """Create a temporary HDF5 file beside ``path``, ``fill(file)``, fsync, and rename it to ``path``."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with h5py.File(tmp, "x") as f:
            fill(f)
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
        ``"points"`` or ``"bow"`` (bag of words).
    n_atoms : int
        N: rows of X, or documents.
    D : int
        Columns of X, or the vocabulary size V.
    nnz : int or None
        Bag of words: number of stored (document, word) entries; None for points.
    n_batches : int
        Number of batches in the current split (the stored one or the override).
    batches_fixed : bool
        The file's ``batches_fixed`` attribute.
    has_labels : bool
        Whether the file holds true labels.
    has_vocab : bool
        Whether the file holds a vocabulary (bag of words only).
    """

    def __init__(self, path: Path, kind: str, n_atoms: int, D: int, offsets: np.ndarray, batches_fixed: bool,
                 has_labels: bool, attrs: dict, handle: h5py.File | None = None, nnz: int | None = None,
                 has_vocab: bool = False):
        self._path = Path(path)
        self._kind = kind
        self._n_atoms = int(n_atoms)
        self._D = int(D)
        self._nnz = None if nnz is None else int(nnz)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._offsets.setflags(write=False)
        self._batches_fixed = bool(batches_fixed)
        self._has_labels = bool(has_labels)
        self._has_vocab = bool(has_vocab)
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
            A file written by :func:`write_points` or :func:`write_documents`
            (``bnpvi-data convert``).
        n_batches : int, optional
            Batch count to use instead of the stored one. Allowed when the file's
            batches are not fixed (the rows or documents are then split into
            ``n_batches`` contiguous ranges, as equal in count as possible, in
            memory; the file is not touched), or when it equals the stored count.

        Returns
        -------
        BatchStore

        Raises
        ------
        BnpviError
            One line naming the file: not found, not HDF5, not a bnpvi batch file,
            unsupported format version or kind, missing or misshapen datasets,
            inconsistent offsets or attributes, N=0, or an ``n_batches`` that
            conflicts with fixed batches or exceeds N.
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
        if kind == "points":
            N, D, nnz = _check_points_file(f, attrs, fail)
            has_vocab = False
        else:
            N, D, nnz = _check_bow_file(f, attrs, fail)
            has_vocab = "vocab" in f
            if has_vocab:
                voc = f["vocab"]
                if not isinstance(voc, h5py.Dataset) or voc.shape != (D,) or h5py.check_string_dtype(voc.dtype) is None:
                    raise fail(f"has an invalid vocab dataset (expected ({D},) strings)")
        if not isinstance(f.get("batch_offsets"), h5py.Dataset):
            raise fail("is missing the dataset 'batch_offsets'")
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
                atoms = "documents" if kind == "bow" else "atoms"
                raise fail(f"has only N={N} {atoms}; alg.n_batches={requested} would leave empty batches")
            if requested != stored_batches:
                if fixed:
                    raise fail(f"has {stored_batches} fixed batches; alg.n_batches={requested} conflicts with them "
                               "(drop alg.n_batches, or convert the data again without --batches)")
                offsets = split_offsets(N, requested)
        return cls(path, kind, N, D, offsets, fixed, has_labels, attrs, handle=f, nnz=nnz, has_vocab=has_vocab)

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
    def vocab_size(self) -> int | None:
        """V for a bag-of-words file (same as D), None for points."""
        return self._D if self._kind == "bow" else None

    @property
    def nnz(self) -> int | None:
        """Bag of words: stored (document, word) entries; None for points."""
        return self._nnz

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
    def has_vocab(self) -> bool:
        return self._has_vocab

    @property
    def offsets(self) -> np.ndarray:
        """(B+1,) int64 read-only array of batch offsets of the current split (rows or documents)."""
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
            if self._kind == "points":
                X = f.get("X")
                same = isinstance(X, h5py.Dataset) and X.shape == (self._n_atoms, self._D)
            else:
                ids, dr = f.get("word_ids"), f.get("doc_range")
                same = (isinstance(ids, h5py.Dataset) and isinstance(dr, h5py.Dataset)
                        and ids.shape == (self._nnz,) and dr.shape == (self._n_atoms + 1,)
                        and _plain(f.attrs.get("D")) == self._D)
            if not same:
                f.close()
                raise BnpviError(f"data file {self._path} has changed since it was opened")
            self._file, self._pid = f, os.getpid()
        return self._file

    def _read_rows(self, start: int, stop: int) -> np.ndarray:
        X = self._handle()["X"][start:stop]
        return np.ascontiguousarray(X, dtype=np.float64)

    def _read_docs(self, start: int, stop: int) -> WordCountBatch:
        """Documents ``start:stop`` as one WordCountBatch (doc_range rebased to 0)."""
        f = self._handle()
        dr = np.asarray(f["doc_range"][start:stop + 1], dtype=np.int64)
        lo, hi = int(dr[0]), int(dr[-1])
        ids = np.ascontiguousarray(f["word_ids"][lo:hi], dtype=np.int32)
        counts = np.ascontiguousarray(f["word_counts"][lo:hi], dtype=np.float64)
        return WordCountBatch(word_ids=ids, word_counts=counts, doc_range=dr - lo, vocab_size=self._D, start=start)

    def read_batch(self, b: int) -> PointBatch | WordCountBatch:
        """Read batch ``b`` (rows or documents ``offsets[b]:offsets[b+1]``) from the file.

        Parameters
        ----------
        b : int
            Batch index, 0 <= b < n_batches.

        Returns
        -------
        PointBatch or WordCountBatch
            Points: X float64 C-contiguous of shape (size_b, D). Bag of words: the
            batch's documents in CSR form (word_ids int32, word_counts float64,
            doc_range int64 starting at 0, vocab_size V), read as one slice of
            each dataset. Either way ``start = offsets[b]``.
        """
        b = int(b)
        if not 0 <= b < self.n_batches:
            raise IndexError(f"batch {b} out of range 0..{self.n_batches - 1} in {self._path}")
        start, stop = int(self._offsets[b]), int(self._offsets[b + 1])
        if self._kind == "bow":
            return self._read_docs(start, stop)
        return PointBatch(X=self._read_rows(start, stop), start=start)

    def batch_sizes(self) -> np.ndarray:
        """(B,) int64 array: rows (points) or documents (bag of words) in each batch of the current split."""
        return np.diff(self._offsets)

    def labels(self) -> np.ndarray | None:
        """(N,) int64 true labels, or None when the file holds none."""
        if not self._has_labels:
            return None
        return np.asarray(self._handle()["labels"][()], dtype=np.int64)

    def vocab(self) -> list[str] | None:
        """The V words of a bag-of-words file (word id -> word), or None when it holds none."""
        if not self._has_vocab:
            return None
        return [str(w) for w in self._handle()["vocab"].asstr()[()]]

    def iter_blocks(self, max_values: int | None = None) -> Iterator[tuple[int, np.ndarray | WordCountBatch]]:
        """Yield ``(start, block)`` over all atoms in file order, in blocks of bounded size.

        Points: blocks are X arrays of at most ``max(1, max_values // D)`` rows.
        Bag of words: blocks are WordCountBatch objects of whole documents holding at
        most ``max_values`` entries (a longer document comes alone). The default
        ``max_values`` is 2**22 (32 MiB of float64), whatever the batch split, so
        one-pass scans use bounded memory even for a single huge batch.
        """
        limit = max(1, int(_SCAN_VALUES if max_values is None else max_values))
        if self._kind == "bow":
            for start, dr in self._doc_range_pieces(limit):
                for lo, hi in _group_docs(dr, limit):
                    yield start + lo, self._read_docs(start + lo, start + hi)
            return
        rows = max(1, limit // self._D)
        for start in range(0, self._n_atoms, rows):
            stop = min(self._n_atoms, start + rows)
            yield start, self._read_rows(start, stop)

    def _doc_range_pieces(self, limit: int) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first_doc, doc_range[first_doc:last_doc + 1])`` for pieces of at most ``limit`` documents."""
        dataset = self._handle()["doc_range"]
        for start in range(0, self._n_atoms, limit):
            stop = min(self._n_atoms, start + limit)
            yield start, np.asarray(dataset[start:stop + 1], dtype=np.int64)

    def moments(self) -> DataMoments | None:
        """Whole-data mean and (biased, 1/N) covariance in one pass over the file.

        Blocks are combined with Chan et al.'s parallel update of the centered
        sums, so the result is accurate even for data far from the origin.

        Returns
        -------
        DataMoments or None
            None for a bag-of-words file (a V x V covariance of counts is neither
            cheap nor used by the discrete observation families).
        """
        if self._kind == "bow":
            return None
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
        """Check every stored value.

        Points: every value is finite. Bag of words: doc_range strictly increasing
        (no empty documents), word ids in [0, V) and not repeated within a document,
        counts finite positive whole numbers, and the ``tokens`` attribute equal to
        the sum of the counts.

        Raises
        ------
        BnpviError
            Naming the file, the first bad row or document (counted from 0), its batch
            and the problem.
        """
        if self._kind == "bow":
            self._validate_documents()
            return
        for start, X in self.iter_blocks():
            bad = first_nonfinite(X)
            if bad is not None:
                row, col, what = bad
                row += start
                batch = int(np.searchsorted(self._offsets, row, side="right") - 1)
                raise BnpviError(f"data file {self._path} has {what} in row {row} (batch {batch}, column {col})")

    def _batch_of(self, atom: int) -> int:
        return int(np.searchsorted(self._offsets, atom, side="right") - 1)

    def _doc_namer(self, first_doc: int):
        def name(d: int) -> str:
            d = first_doc + int(d)
            return f"document {d} (batch {self._batch_of(d)})"
        return name

    def _validate_documents(self) -> None:
        limit = max(1, int(_SCAN_VALUES))
        tokens = 0.0
        for start, dr in self._doc_range_pieces(limit):
            sizes = np.diff(dr)
            if (sizes <= 0).any():
                d = start + int(np.flatnonzero(sizes <= 0)[0])
                problem = "has no words" if sizes[d - start] == 0 else "has a decreasing doc_range"
                raise BnpviError(f"data file {self._path}: document {d} {problem} (batch {self._batch_of(d)})")
            for lo, hi in _group_docs(dr, limit):
                batch = self._read_docs(start + lo, start + hi)
                check_documents(batch.word_ids, batch.word_counts, batch.doc_range, self._D,
                                f"data file {self._path}", doc_name=self._doc_namer(batch.start))
                tokens += float(batch.word_counts.sum())
        stored = self._attrs.get("tokens")
        if stored is not None and stored != tokens:
            raise BnpviError(f"data file {self._path} is inconsistent: attribute tokens={stored} but the counts "
                             f"sum to {tokens:.0f}")

    def n_tokens(self) -> int:
        """Bag of words: the sum of all counts (from the ``tokens`` attribute, else one pass). Points: N*D."""
        if self._kind != "bow":
            return self._n_atoms * self._D
        stored = self._attrs.get("tokens")
        if isinstance(stored, (int, float)):
            return int(stored)
        dataset = self._handle()["word_counts"]
        total = 0.0
        for lo in range(0, self._nnz, _SCAN_VALUES):
            total += float(np.sum(dataset[lo:lo + _SCAN_VALUES]))
        return int(total)

    def info(self) -> dict:
        """Summary of the file for display.

        Keys: path, format, format_version, kind, N, D, n_batches, batches_fixed,
        batch_size_min, batch_size_max, labels, source, created; for bag of words
        also V, nnz, tokens and vocab (bool).
        """
        sizes = self.batch_sizes()
        out = {"path": str(self._path), "format": self._attrs.get("format"),
               "format_version": self._attrs.get("format_version"), "kind": self._kind, "N": self._n_atoms,
               "D": self._D, "n_batches": self.n_batches, "batches_fixed": self._batches_fixed,
               "batch_size_min": int(sizes.min()), "batch_size_max": int(sizes.max()),
               "labels": self._has_labels, "source": self._attrs.get("source", ""),
               "created": self._attrs.get("created", "")}
        if self._kind == "bow":
            out.update(V=self._D, nnz=self._nnz, tokens=self.n_tokens(), vocab=self._has_vocab)
        return out

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
        state.setdefault("_nnz", None)
        state.setdefault("_has_vocab", False)
        self.__dict__.update(state)
        self._offsets.setflags(write=False)

    def __repr__(self) -> str:
        size = f"D={self._D}" if self._kind == "points" else f"V={self._D}, nnz={self._nnz}"
        return (f"BatchStore({str(self._path)!r}, kind={self._kind!r}, N={self._n_atoms}, {size}, "
                f"n_batches={self.n_batches}, batches_fixed={self._batches_fixed}, labels={self._has_labels})")


def _check_points_file(f: h5py.File, attrs: dict, fail) -> tuple[int, int, None]:
    """Structure checks of a points file; returns (N, D, None)."""
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
    return N, D, None


def _check_bow_file(f: h5py.File, attrs: dict, fail) -> tuple[int, int, int]:
    """Structure checks of a bag-of-words file (shapes, dtypes, attributes, ends of doc_range); returns (N, V, nnz)."""
    for name in ("word_ids", "word_counts", "doc_range"):
        if not isinstance(f.get(name), h5py.Dataset):
            raise fail(f"is missing the dataset '{name}'")
    ids, counts, dr = f["word_ids"], f["word_counts"], f["doc_range"]
    for name, ds, kinds in (("word_ids", ids, "iu"), ("word_counts", counts, "iuf"), ("doc_range", dr, "iu")):
        if ds.ndim != 1 or ds.dtype.kind not in kinds:
            raise fail(f"has a dataset {name} of shape {ds.shape} and dtype {ds.dtype}; expected 1-D "
                       f"{'numbers' if kinds == 'iuf' else 'integers'}")
    nnz = int(ids.shape[0])
    if counts.shape[0] != nnz:
        raise fail(f"is inconsistent: word_ids has {nnz} entries but word_counts has {counts.shape[0]}")
    N = int(dr.shape[0]) - 1
    if N < 1:
        raise fail("has no documents (N=0)")
    V = attrs.get("D")
    if not isinstance(V, int) or isinstance(V, bool) or V < 1:
        raise fail(f"has no valid vocabulary size (attribute D={V!r}; expected a positive integer)")
    for key, actual in (("N", N), ("nnz", nnz)):
        if key in attrs and (not isinstance(attrs[key], int) or attrs[key] != actual):
            raise fail(f"is inconsistent: attribute {key}={attrs[key]} but the datasets hold {actual}")
    first, last = int(dr[0]), int(dr[N])
    if first != 0 or last != nnz:
        raise fail(f"has an inconsistent doc_range (need doc_range[0] = 0 and doc_range[N] = nnz={nnz}; "
                   f"got {first} and {last})")
    return N, V, nnz


def _group_docs(dr: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """Split documents ``0..len(dr)-2`` (doc_range ``dr``, non-decreasing) into consecutive groups.

    Each group ``(lo, hi)`` holds at most ``limit`` entries, except a single
    document longer than ``limit``, which forms a group of its own.
    """
    n_docs = dr.shape[0] - 1
    lo = 0
    while lo < n_docs:
        hi = int(np.searchsorted(dr, dr[lo] + limit, side="right")) - 1
        hi = min(n_docs, max(hi, lo + 1))
        yield lo, hi
        lo = hi


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
