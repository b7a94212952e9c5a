"""Checks of in-memory data before it is written: each returns the data in its stored dtype or raises.

Every problem is a one-line :class:`~bnpvi.errors.BnpviError` that starts with
``where`` (usually the file name) and names the first bad row, document or
sequence, counted from 0.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bnpvi.errors import BnpviError

_INT32_MAX = int(np.iinfo(np.int32).max)


def first_nonfinite(X: np.ndarray, missing_ok: bool = False) -> tuple[int, int, str] | None:
    """Locate the first non-finite entry of a 2-D float array (the first infinite one when ``missing_ok``: a
    NaN is then a missing entry, not an error).

    Returns
    -------
    (row, column, what) or None
        ``what`` is ``"NaN"``, ``"inf"`` or ``"-inf"``; None when all entries are finite (or NaN).
    """
    if np.isfinite(np.sum(X)):  # a NaN or an infinity anywhere makes the sum NaN or infinite (one cheap pass)
        return None
    bad = np.isinf(X) if missing_ok else ~np.isfinite(X)
    if not bad.any():  # finite entries whose sum overflowed, or only missing ones
        return None
    row = int(np.flatnonzero(bad.any(axis=1))[0])
    col = int(np.flatnonzero(bad[row])[0])
    value = X[row, col]
    what = "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return row, col, what


def count_missing(X: np.ndarray) -> int:
    """How many entries of ``X`` are NaN (missing); 0 after one cheap pass when none is."""
    if np.isfinite(np.sum(X)):
        return 0
    return int(np.count_nonzero(np.isnan(X)))


def check_points_layout(X, where: str, name: str = "X") -> None:
    """Validate the shape and dtype of a data matrix without reading its values.

    Parameters
    ----------
    X : ndarray or array-like with ``shape`` and ``dtype`` (a mapped or reordered array)
        Candidate data, shape (N, D) with N >= 1, D >= 1, of real numbers.
    where : str
        What to name in error messages (usually the file name).
    name : str, default "X"
        The matrix's name in error messages (e.g. ``"Xprev"``).

    Raises
    ------
    BnpviError
        One line naming ``where`` and the problem.
    """
    if np.dtype(X.dtype).kind not in "biuf":
        raise BnpviError(f"{where}: {name} must hold real numbers, got dtype {X.dtype}")
    if len(X.shape) == 1:
        raise BnpviError(f"{where}: {name} is 1-D (shape {tuple(X.shape)}); expected a 2-D array (N, D) "
                         f"- reshape it to (N, 1) for a single feature")
    if len(X.shape) != 2:
        raise BnpviError(f"{where}: {name} must be 2-D (N, D), got shape {tuple(X.shape)}")
    N, D = X.shape
    if N < 1:
        raise BnpviError(f"{where}: {name} has no rows (N=0)")
    if D < 1:
        raise BnpviError(f"{where}: {name} has no columns (D=0)")


def as_rows(X):
    """``X`` itself when it is array-like enough to be read a block at a time (it has ``shape`` and ``dtype``:
    an ndarray, a mapped or reordered array), else ``np.asarray(X)``."""
    return X if hasattr(X, "shape") and hasattr(X, "dtype") else np.asarray(X)


def check_finite(block: np.ndarray, where: str, name: str = "X", first: int = 0, missing_ok: bool = False) -> None:
    """BnpviError naming the first non-finite value of rows ``first, first + 1, ...`` of a matrix (a block
    of it), counted from 0 in the whole matrix; with ``missing_ok`` only an infinite value (NaN is missing)."""
    bad = first_nonfinite(block, missing_ok)
    if bad is not None:
        row, col, what = bad
        raise BnpviError(f"{where}: {name} has {what} in row {first + row}, column {col} (rows counted from 0)")


class EntryCheck:
    """``check(block, first)`` of :func:`~bnpvi.data.base.write_blocks` for a data matrix whose entries may be
    missing: every entry finite or NaN (:func:`check_finite` with ``missing_ok``), the NaN counted in
    ``missing``."""

    def __init__(self, where: str, name: str = "X"):
        self.where, self.name = where, name
        self.missing = 0

    def __call__(self, block: np.ndarray, first: int) -> None:
        check_finite(block, self.where, self.name, first, missing_ok=True)
        self.missing += count_missing(block)


def check_points(X, where: str, name: str = "X", missing_ok: bool = False) -> np.ndarray:
    """Validate a data matrix in memory and return it as a C-contiguous float64 array.

    Parameters
    ----------
    X : array_like
        Candidate data, shape (N, D) with N >= 1, D >= 1, all values finite real numbers.
    where : str
        What to name in error messages (usually the file name).
    name : str, default "X"
        The matrix's name in error messages (e.g. ``"Xprev"``).
    missing_ok : bool, default False
        NaN entries are missing values, not errors (an infinite value still is one).

    Returns
    -------
    ndarray of shape (N, D), float64, C-contiguous

    Raises
    ------
    BnpviError
        One line naming ``where`` and the problem (shape, type, first bad row).
    """
    arr = np.asarray(X)
    check_points_layout(arr, where, name)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    check_finite(arr, where, name, missing_ok=missing_ok)
    return arr


def check_seq_range(seq_range, T: int, where: str, name: str = "seq_range") -> np.ndarray:
    """Validate sequence boundaries: sequence s is time steps ``seq_range[s]:seq_range[s+1]``.

    Parameters
    ----------
    seq_range : array_like of int, shape (n_seqs + 1,)
        Starts at 0, ends at T, strictly increasing (no empty sequence).
    T : int
        Number of time steps (rows of X).
    where : str
        What to name in error messages (usually the file name).
    name : str, default "seq_range"
        The array's name in error messages.

    Returns
    -------
    (n_seqs + 1,) int64 ndarray

    Raises
    ------
    BnpviError
        One line naming ``where``, the problem and the first bad sequence (counted from 0).
    """
    sr = as_index_array(seq_range, name, where)
    if sr.shape[0] < 2:
        raise BnpviError(f"{where}: no sequences ({name} has {sr.shape[0]} entries; need n_seqs+1 >= 2)")
    if sr[0] != 0:
        raise BnpviError(f"{where}: {name} must start at 0, got {sr[0]}")
    if sr[-1] != T:
        raise BnpviError(f"{where}: {name} ends at {sr[-1]} but X has T={T} rows (time steps)")
    lengths = np.diff(sr)
    if (lengths <= 0).any():
        s = int(np.flatnonzero(lengths <= 0)[0])
        if lengths[s] == 0:
            raise BnpviError(f"{where}: sequence {s} is empty ({name}[{s}] = {name}[{s + 1}] = {sr[s]}); "
                             "empty sequences are not allowed")
        raise BnpviError(f"{where}: {name} decreases at sequence {s} ({sr[s]} -> {sr[s + 1]})")
    return np.ascontiguousarray(sr)


def positive_int(value, what: str) -> int:
    """``value`` as an int of at least 1; a one-line BnpviError naming ``what`` otherwise."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BnpviError(f"{what} must be an integer, got {value!r}") from None
    if number < 1:
        raise BnpviError(f"{what} must be at least 1, got {number}")
    return number


def check_n_batches(n_batches, n_units: int, where: str, count: str) -> int:
    """The batch count as an int in 1..n_units; ``count`` names n_units in the message (e.g. ``"N=103"``)."""
    try:
        as_int = int(n_batches)
    except (TypeError, ValueError):
        raise BnpviError(f"{where}: n_batches must be an integer, got {n_batches!r}") from None
    if not 1 <= as_int <= n_units:
        raise BnpviError(f"{where}: n_batches={as_int} must be between 1 and {count}")
    return as_int


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


def check_weights(weights, N: int, where: str, name: str = "weights") -> np.ndarray | None:
    """Validate per-atom weights w_n: (N,) finite reals ≥ 0, not all 0. Returns them as a C-contiguous float64
    array, or None when every weight is 1 (a weighted file of unit weights is the unweighted file, so its runs
    are the same to the last bit). One-line BnpviError naming the first bad row otherwise."""
    try:
        w = np.ascontiguousarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise BnpviError(f"{where}: {name} must be numbers") from None
    if w.ndim != 1:
        raise BnpviError(f"{where}: {name} must be 1-D, got shape {w.shape}")
    if w.shape[0] != N:
        raise BnpviError(f"{where}: {name} have {w.shape[0]} entries but there are {N} rows")
    bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
    if bad.size:
        row = int(bad[0])
        what = "NaN" if np.isnan(w[row]) else repr(float(w[row]))
        raise BnpviError(f"{where}: {name} must be finite and >= 0; row {row} has {what} (rows counted from 0)")
    if not w.any():
        raise BnpviError(f"{where}: every one of the {N} {name} is 0; nothing would be fitted")
    return None if np.all(w == 1.0) else w


def check_label_names(names, labels: np.ndarray | None, where: str) -> list[str]:
    """Validate the names of label codes: distinct strings without NUL, one for every code in ``labels``."""
    if labels is None:
        raise BnpviError(f"{where}: label names are given without labels")
    names = [str(name) for name in names]
    if len(set(names)) != len(names):
        raise BnpviError(f"{where}: label names must be distinct")
    if any("\x00" in name for name in names):
        raise BnpviError(f"{where}: a label name contains a NUL character")
    if labels.size and (labels.min() < 0 or labels.max() >= len(names)):
        raise BnpviError(f"{where}: label codes must lie in 0..{len(names) - 1} (one name each), got "
                         f"{labels.min()}..{labels.max()}")
    return names


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


def first_repeat(words: list[str]) -> tuple[int, int] | None:
    """``(i, j)``, i < j, of the first word that comes again (``words[i] == words[j]``, j smallest), or None."""
    seen: dict[str, int] = {}
    for j, word in enumerate(words):
        i = seen.setdefault(word, j)
        if i != j:
            return i, j
    return None


def check_vocab(vocab, V: int, where: str) -> list[str]:
    """Validate a vocabulary: V distinct strings (one per word id). Returns a list of str."""
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
    repeat = first_repeat(out)
    if repeat is not None:
        i, j = repeat
        raise BnpviError(f"{where}: vocab words {i} and {j} are both {out[i]!r}; a vocabulary lists each word once")
    return out


def check_vocab_size(vocab_size, where: str) -> int:
    """The vocabulary size V as an int between 1 and 2**31 - 1; one-line BnpviError otherwise."""
    try:
        V = int(vocab_size)
    except (TypeError, ValueError):
        raise BnpviError(f"{where}: vocab_size must be an integer, got {vocab_size!r}") from None
    if isinstance(vocab_size, (float, np.floating)) and V != vocab_size:
        raise BnpviError(f"{where}: vocab_size must be an integer, got {vocab_size!r}")
    if not 1 <= V <= _INT32_MAX:
        raise BnpviError(f"{where}: vocab_size V={V} must be between 1 and {_INT32_MAX}")
    return V


def check_doc_range(doc_range, nnz: int, where: str, doc_name=None) -> np.ndarray:
    """Validate the document boundaries of ``nnz`` CSR entries: from 0 to nnz, no document empty or
    decreasing (``doc_name(d)`` names document d, default ``"document d"``). Returns them as int64."""
    name = doc_name if doc_name is not None else (lambda d: f"document {d}")
    dr = as_index_array(doc_range, "doc_range", where)
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
    return dr


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
        stored form; entry order is kept), or add up its counts (converters; the
        entries of each document then come sorted by word id, the canonical CSR form
        that sparse-matrix code can use without sorting again).
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
    V = check_vocab_size(vocab_size, where)
    ids = as_index_array(word_ids, "word_ids", where)
    counts = np.asarray(word_counts)
    if counts.ndim != 1:
        raise BnpviError(f"{where}: word_counts must be 1-D, got shape {counts.shape}")
    if counts.dtype.kind not in "iuf":
        raise BnpviError(f"{where}: word_counts must hold numbers, got dtype {counts.dtype}")
    nnz = ids.shape[0]
    if counts.shape[0] != nnz:
        raise BnpviError(f"{where}: word_ids has {nnz} entries but word_counts has {counts.shape[0]}")
    dr = check_doc_range(doc_range, nnz, where, name)
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


def sum_duplicate_words(word_ids, word_counts, doc_range, V: int) -> sp.csr_matrix:
    """The (N, V) count matrix of a corpus in CSR form, each word id repeated within a document summed into one
    entry and every document's entries sorted by word id (scipy's canonical CSR, ``sum_duplicates``).

    ``doc_range`` must run from 0 to nnz without decreasing and the ids lie in [0, V).
    """
    X = sp.csr_matrix((np.asarray(word_counts), np.asarray(word_ids), np.asarray(doc_range)),
                      shape=(np.asarray(doc_range).shape[0] - 1, int(V)), copy=True)  # the inputs stay as they are
    X.sum_duplicates()
    return X


def _merge_duplicates(ids, counts, dr, V, where, duplicates, name):
    """Reject word ids repeated within a document, or sum them and sort each document's entries by id."""
    if duplicates == "sum":
        X = sum_duplicate_words(ids, counts, dr, V)
        return X.indices, X.data, X.indptr
    X = sp.csr_matrix((counts, ids, dr), shape=(dr.shape[0] - 1, V))
    if X.has_canonical_format:
        return ids, counts, dr
    X = X.sorted_indices()
    repeated = np.flatnonzero(np.diff(X.indices) == 0) + 1
    repeated = repeated[~np.isin(repeated, dr)]  # not the first entry of a document
    if repeated.size == 0:
        return ids, counts, dr
    j = int(repeated[0])
    raise BnpviError(f"{where}: {name(_doc_of(dr, j))} lists word {X.indices[j]} more than once "
                     "(sum its counts into one entry)")
