"""Read user data, check it, and write a batch file.

Points (kind ``"points"``): CSV, NPY, and NPZ with an array ``X``
(:func:`read_table`). Bag of words (kind ``"bow"``): LDA-C text (``.ldac``) and
sparse NPZ - the CSR triplet ``word_id``/``word_count``/``doc_range`` or a
``scipy.sparse.save_npz`` matrix (:func:`read_documents`). Sequences (kind
``"seq"``, :func:`read_sequences`): NPZ with ``X``, optional ``Xprev`` and a
named array of sequence boundaries, or CSV with a column of sequence ids.
:func:`convert` picks the reader from the options (sequences), the extension
and, for ``.npz``, the arrays inside; each reader's result (:class:`Points`,
:class:`Documents`, :class:`Sequences`) knows its batch unit, how to reorder
whole units and how to write itself.

Every problem with the input is a one-line :class:`~bnpvi.errors.BnpviError`
that names the file: missing file, unknown extension, empty file, non-numeric
values, NaN or inf (with the first bad row, counted from 0), a wrongly shaped
array, a missing or wrongly sized label array; for ``.ldac`` the line (counted
from 1) and what is wrong with it; for sparse NPZ the document (counted from 0);
for sequences the first bad sequence, or the CSV row whose sequence id
reappears after another one.

Bag-of-words decisions: a word id repeated within one document is summed into
its first occurrence (in every input format); empty documents are rejected
(they carry no information); zero counts are rejected in ``.ldac`` and in the
CSR triplet, but stored zeros of a scipy matrix are simply dropped. A CSR-triplet
``.npz`` may also hold ``true_topics`` (K, V), the generating topics of a
synthetic corpus (as the bnpy bars data sets do); it is kept in the batch file.
With ``heldout=F`` a bag-of-words corpus (or a point set) keeps a random fraction F
of its documents (points) apart for evaluation (:mod:`bnpvi.data.heldout`), in the
file's ``heldout`` group; the batches hold only the training documents (points).
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import scipy.sparse as sp

from bnpvi.data.bow import HeldoutDocuments
from bnpvi.data.heldout import check_fraction, check_seed, choose_heldout
from bnpvi.data.points import HeldoutPoints
from bnpvi.data.store import (as_index_array, check_documents, check_labels, check_points, check_seq_range,
                              check_vocab, write_documents, write_points, write_sequences)
from bnpvi.errors import BnpviError

POINT_SUFFIXES = (".csv", ".npz", ".npy")
BOW_SUFFIXES = (".ldac", ".npz")
SEQ_SUFFIXES = (".csv", ".npz")
SUFFIXES = (".csv", ".npz", ".npy", ".ldac")


def _existing_file(path) -> tuple[Path, str]:
    """The path (user-expanded) and its lower-case suffix; BnpviError if it is missing or a folder."""
    path = Path(path).expanduser()
    if not path.exists():
        raise BnpviError(f"file not found: {path}")
    if path.is_dir():
        raise BnpviError(f"{path} is a directory, not a data file")
    return path, path.suffix.lower()


def _nonempty(path: Path) -> None:
    if path.stat().st_size == 0:
        raise BnpviError(f"{path} is empty")


def read_table(path, labels: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Read a data matrix (and optionally true labels) from a CSV, NPZ or NPY file.

    Parameters
    ----------
    path : str or Path
        ``.csv``: one row per atom, comma-separated. A first row without any
        numeric cell is taken as a header. Every column except the labels column
        must be numeric.
        ``.npz``: the data is the array ``X``.
        ``.npy``: the single array is the data.
    labels : str, optional
        CSV: the header name of a column to keep as labels and remove from X (for
        a file without a header, a column index such as ``0`` or ``-1``).
        NPZ: the name of the label array. Not supported for NPY.
        Integer labels are kept as they are; any other labels (e.g. strings) are
        replaced by their index in the sorted list of distinct values.

    Returns
    -------
    X : ndarray of shape (N, D), float64, C-contiguous, all finite
    labels : (N,) int64 ndarray or None

    Raises
    ------
    BnpviError
        One line naming the file and the problem.
    """
    path, suffix = _existing_file(path)
    if suffix not in SUFFIXES:
        shown = repr(path.suffix) if path.suffix else "no extension"
        raise BnpviError(f"{path}: unknown file type ({shown}); expected one of {', '.join(SUFFIXES)}")
    if suffix not in POINT_SUFFIXES:
        raise BnpviError(f"{path}: a {suffix} file holds bag-of-words documents, not a data matrix; "
                         "read it with read_documents")
    _nonempty(path)
    if suffix == ".csv":
        X, y, _ = _read_csv(path, labels)
    elif suffix == ".npz":
        arrays = _read_npz(path, labels)
        X, y = arrays["X"], arrays.get("labels")
    else:
        if labels is not None:
            raise BnpviError(f"{path}: a .npy file holds one array, so labels={labels!r} cannot be read from it; "
                             "use a .npz file with arrays X and labels")
        X, y = _load_npy(path), None
    return _checked_rows(X, y, path)


def _checked_rows(X, y, path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """X checked (finite, 2-D) and the labels as integers, one per row."""
    X = check_points(X, str(path))
    if y is not None:
        y = check_labels(_as_int_labels(y, path), X.shape[0], str(path))
    return X, y


@dataclass(frozen=True)
class Points:
    """A data matrix and its labels, as read by :func:`read_table`."""

    X: np.ndarray
    labels: np.ndarray | None = None

    unit: ClassVar[str] = "rows"
    count_name: ClassVar[str] = "N"

    @property
    def n_units(self) -> int:
        """Number of rows."""
        return self.X.shape[0]

    def permuted(self, perm: np.ndarray) -> "Points":
        """The rows in the order ``perm`` (labels follow)."""
        return Points(self.X[perm], None if self.labels is None else self.labels[perm])

    def write(self, dst, **options) -> Path:
        """Write a ``"points"`` batch file (``options``: those of ``write_points``)."""
        return write_points(dst, self.X, labels=self.labels, **options)


# ------------------------------------------------------------------ CSV
def _is_number(cell) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return True


def _read_csv(path: Path, labels: str | None,
              sequence_column: str | None = None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(X, labels column or None, sequence id column or None); the named columns are removed from X."""
    try:
        first = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise BnpviError(f"{path} is empty (no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
        raise BnpviError(f"{path}: cannot parse as CSV: {_first_line(err)}") from None
    has_header = not any(_is_number(cell) for cell in first.iloc[0])
    try:
        df = pd.read_csv(path, header=0 if has_header else None, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise BnpviError(f"{path} is empty (no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
        raise BnpviError(f"{path}: cannot parse as CSV: {_first_line(err)}") from None
    if len(df) == 0:
        raise BnpviError(f"{path} has no data rows" + (" (only a header)" if has_header else ""))

    taken = {role: name for role, name in (("labels", labels), ("sequence ids", sequence_column)) if name is not None}
    columns = {}
    for role, name in taken.items():
        values = df.pop(_find_column(df, name, has_header, path, role)).to_numpy()
        if pd.isna(values).any():
            row = int(np.flatnonzero(pd.isna(values))[0])
            raise BnpviError(f"{path}: {role} column {name!r} has a missing value in row {row}")
        columns[role] = values
    if df.shape[1] == 0:
        what = " and ".join(f"the {role} column {name!r}" for role, name in taken.items())
        raise BnpviError(f"{path}: no data columns left after taking out {what}")

    for name in df.columns:
        col = df[name]
        if col.dtype.kind in "biuf":
            continue
        numeric = pd.to_numeric(col, errors="coerce")
        bad = numeric.isna() & col.notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            shown = f"{name!r}" if has_header else f"{name}"
            raise BnpviError(f"{path}: non-numeric value {str(col.iloc[row])!r} in row {row}, column {shown} "
                             "(rows counted from 0, after any header)")
        df[name] = numeric
    X = df.to_numpy(dtype=np.float64)
    missing = np.isnan(X)
    if missing.any():
        row = int(np.flatnonzero(missing.any(axis=1))[0])
        col = df.columns[int(np.flatnonzero(missing[row])[0])]
        shown = f"{col!r}" if has_header else f"{col}"
        raise BnpviError(f"{path}: missing value or NaN in row {row}, column {shown} "
                         "(rows counted from 0, after any header)")
    return X, columns.get("labels"), columns.get("sequence ids")


def _find_column(df: pd.DataFrame, name: str, has_header: bool, path: Path, role: str):
    """The column ``name`` (a header name, or an index) of ``df``; ``role`` says what it is for in messages."""
    if has_header and name in df.columns:
        return name
    try:
        index = int(name)
    except (TypeError, ValueError):
        index = None
    if index is not None and -df.shape[1] <= index < df.shape[1]:
        return df.columns[index]
    if has_header:
        raise BnpviError(f"{path}: no column {name!r} for {role} (columns: {', '.join(map(str, df.columns))})")
    raise BnpviError(f"{path}: no header row, so the {role} column {name!r} must be a column index "
                     f"(0..{df.shape[1] - 1}, or -1 for the last)")


# ------------------------------------------------------------- NPZ / NPY
def _read_npz(path: Path, labels: str | None, sequences: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of a points or sequences .npz: ``X``; ``labels`` and ``seq_range`` read from the arrays
    named by ``labels`` and ``sequences`` when given; and ``Xprev`` when ``sequences`` is given and the
    file holds it."""
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {_first_line(err)}") from None
    if isinstance(npz, np.ndarray):
        raise BnpviError(f"{path} holds a single .npy array, not an .npz archive; rename it to .npy")
    try:
        names = list(npz.files)
        if "X" not in names:
            if set(TRIPLET) <= set(names) or set(SCIPY_KEYS) <= set(names):
                raise BnpviError(f"{path}: no array 'X'; it holds bag-of-words documents - read it with "
                                 "read_documents")
            raise BnpviError(f"{path}: no array 'X' (arrays: {', '.join(names) or 'none'}); expected X (points), "
                             f"{'/'.join(TRIPLET)} (bag of words) or a scipy.sparse.save_npz matrix")
        arrays = {"X": npz["X"]}
        for key, what, name in (("labels", "label", labels), ("seq_range", "sequence range", sequences)):
            if name is None:
                continue
            if name not in names:
                raise BnpviError(f"{path}: no {what} array {name!r} (arrays: {', '.join(names)})")
            arrays[key] = npz[name]
        if sequences is not None and "Xprev" in names:
            arrays["Xprev"] = npz["Xprev"]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {_first_line(err)}") from None
    finally:
        npz.close()
    return arrays


def _load_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise BnpviError(f"{path}: cannot read as .npy: {_first_line(err)}") from None
    if not isinstance(arr, np.ndarray):
        raise BnpviError(f"{path} is not an .npy array file")
    return arr


# --------------------------------------------------------------- labels
def _as_int_labels(y: np.ndarray, path: Path) -> np.ndarray:
    """Integer labels stay; strings and other values become indices of their sorted distinct values."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise BnpviError(f"{path}: labels must be 1-D, got shape {y.shape}")
    if y.dtype.kind in "biu":
        return y.astype(np.int64)
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise BnpviError(f"{path}: labels have a missing or non-finite value in row {row}")
    try:
        _, codes = np.unique(y.astype(str) if y.dtype.kind == "O" else y, return_inverse=True)
    except TypeError as err:
        raise BnpviError(f"{path}: cannot use the labels: {_first_line(err)}") from None
    return codes.astype(np.int64).reshape(-1)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# ----------------------------------------------------------- sequences
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
        One label per time step.
    """

    X: np.ndarray
    seq_range: np.ndarray
    Xprev: np.ndarray | None = None
    labels: np.ndarray | None = None

    unit: ClassVar[str] = "sequences"
    count_name: ClassVar[str] = "n_seqs"

    @property
    def n_units(self) -> int:
        """Number of sequences."""
        return self.seq_range.shape[0] - 1

    def permuted(self, perm: np.ndarray) -> "Sequences":
        """The sequences in the order ``perm``, each kept whole (Xprev and labels follow their steps)."""
        seq_range, steps = _permuted_ranges(self.seq_range, perm)
        Xprev = None if self.Xprev is None else self.Xprev[steps]
        labels = None if self.labels is None else self.labels[steps]
        return Sequences(self.X[steps], seq_range, Xprev, labels)

    def write(self, dst, **options) -> Path:
        """Write a ``"seq"`` batch file (``options``: those of ``write_sequences``)."""
        return write_sequences(dst, self.X, self.seq_range, Xprev=self.Xprev, labels=self.labels, **options)


def read_sequences(path, sequences: str | None = None, sequence_column: str | None = None,
                   labels: str | None = None) -> Sequences:
    """Read sequences from an NPZ or CSV file.

    Parameters
    ----------
    path : str or Path
        ``.npz``: the steps are the array ``X`` (T, D); the optional array
        ``Xprev`` (T, D) is kept as the previous observation of each step (it is
        never made up when absent).
        ``.csv``: one row per time step, as for :func:`read_table`, with one
        column of sequence ids.
    sequences : str, optional
        NPZ only (required there): the name of the array of sequence boundaries,
        n_seqs + 1 strictly increasing integers from 0 to T.
    sequence_column : str, optional
        CSV only (required there): the column holding each row's sequence id
        (header name, or index without a header); removed from the data. The rows
        of one sequence must be contiguous.
    labels : str, optional
        Labels, one per time step: an NPZ array name or a CSV column, as for
        :func:`read_table`.

    Returns
    -------
    Sequences

    Raises
    ------
    BnpviError
        One line naming the file and the problem (the first bad sequence, or the
        row whose sequence id reappears after another sequence).
    """
    path, suffix = _existing_file(path)
    if suffix not in SEQ_SUFFIXES:
        shown = repr(path.suffix) if path.suffix else "no extension"
        raise BnpviError(f"{path}: sequences are read from .npz files (with --sequences NAME) or .csv files "
                         f"(with --sequence-column NAME), not {shown} files")
    if suffix == ".npz" and sequences is None:
        raise BnpviError(f"{path}: an .npz file gives its sequence boundaries as an array: name it with "
                         "--sequences NAME (not --sequence-column)")
    if suffix == ".csv" and sequence_column is None:
        raise BnpviError(f"{path}: a CSV file gives each row's sequence id in a column: name it with "
                         "--sequence-column NAME (not --sequences)")
    _nonempty(path)
    if suffix == ".csv":
        if labels is not None and str(labels) == str(sequence_column):
            raise BnpviError(f"{path}: the labels and the sequence ids must be different columns (both {labels!r})")
        X, y, ids = _read_csv(path, labels, sequence_column)
        seq_range, Xprev = _ranges_from_ids(ids, path), None
    else:
        arrays = _read_npz(path, labels, sequences)
        X, y, seq_range, Xprev = arrays["X"], arrays.get("labels"), arrays["seq_range"], arrays.get("Xprev")
    X, y = _checked_rows(X, y, path)
    seq_range = check_seq_range(seq_range, X.shape[0], str(path), name=sequences or "seq_range")
    if Xprev is not None:
        Xprev = check_points(Xprev, str(path), name="Xprev")
        if Xprev.shape != X.shape:
            raise BnpviError(f"{path}: Xprev has shape {Xprev.shape} but X has shape {X.shape}")
    return Sequences(X, seq_range, Xprev, y)


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


def _permuted_ranges(ranges: np.ndarray, perm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reorder whole ranges (documents, sequences): the new boundaries, and the old index of every new entry."""
    perm = np.asarray(perm, dtype=np.int64)
    lengths = np.diff(ranges)[perm]
    new_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return new_range, np.repeat(ranges[perm] - new_range[:-1], lengths) + np.arange(new_range[-1])


# -------------------------------------------------------------- convert
def input_kind(path) -> str:
    """``"bow"`` for ``.ldac`` and sparse ``.npz`` files, else ``"points"`` (unreadable files: by extension)."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if suffix == ".ldac":
        return "bow"
    if suffix == ".npz" and path.is_file() and npz_layout(path) in ("triplet", "scipy"):
        return "bow"
    return "points"


def convert(src, dst, n_batches: int | None = None, labels: str | None = None, shuffle_seed: int | None = None,
            overwrite: bool = False, batches_fixed: bool | None = None, vocab=None, vocab_size: int | None = None,
            sequences: str | None = None, sequence_column: str | None = None, heldout=None,
            heldout_seed: int = 0) -> Path:
    """Read ``src``, check it, and write the batch file ``dst``.

    Points (CSV / NPY / NPZ with X, see :func:`read_table`) become a ``"points"``
    file; bag-of-words corpora (LDA-C ``.ldac``, sparse NPZ, see
    :func:`read_documents`) a ``"bow"`` file; with ``sequences`` or
    ``sequence_column``, sequences (see :func:`read_sequences`) a ``"seq"`` file.

    Parameters
    ----------
    src : str or Path
        Input file.
    dst : str or Path
        Output batch file; written atomically, so a failure leaves nothing behind.
    n_batches : int, optional
        Number of contiguous batches, as equal in rows (documents, sequences) as
        possible; a batch always holds whole documents and sequences. None means
        one batch that training may re-split (``alg.n_batches``).
    labels : str, optional
        Labels column / array name, see :func:`read_table`, :func:`read_documents`
        and :func:`read_sequences`.
    shuffle_seed : int, optional
        Permute the rows, documents or whole sequences (labels follow) with this
        seed before batching; the steps within a sequence keep their order.
    overwrite : bool, default False
        Replace an existing ``dst``; otherwise an existing ``dst`` is an error.
    batches_fixed : bool, optional
        Store the split as fixed (training may not re-split it). Default: fixed
        exactly when ``n_batches`` was given.
    vocab : str, Path or sequence of str, optional
        Bag of words only: vocabulary file (one word per line) or the words; stored in ``dst``.
    vocab_size : int, optional
        Bag of words only: V, see :func:`read_documents`.
    sequences : str, optional
        Sequences from an NPZ file: the name of its array of sequence boundaries.
    sequence_column : str, optional
        Sequences from a CSV file: the column of sequence ids.
    heldout : float, optional
        Bag of words and points: keep a random fraction F (0 < F < 1) of the documents (points)
        apart for evaluation - round(F N) of them, at least 1 and at most N - 1,
        chosen by :func:`~bnpvi.data.heldout.choose_heldout` in source order
        before any shuffle. They are stored (in source order, with labels) in
        the ``heldout`` group of ``dst`` with the source index of every training
        and held-out document; the batches hold only the training documents, and
        ``n_batches`` counts only those.
    heldout_seed : int, default 0
        Seed of the held-out choice (non-negative).

    Returns
    -------
    Path
        ``dst``.

    Raises
    ------
    BnpviError
        Bad input, ``dst`` exists (without ``overwrite``), ``n_batches`` out of
        1..N (1..n_seqs for sequences; the training documents with ``heldout``),
        a vocabulary given for points or sequences, a bad held-out fraction or
        seed, or ``heldout`` for a source that is not bag of words.
    """
    src, dst = Path(src).expanduser(), Path(dst).expanduser()
    if dst.exists() and not overwrite:
        raise BnpviError(f"{dst} already exists (pass --overwrite to replace it)")
    if dst.exists() and src.exists() and dst.resolve() == src.resolve():
        raise BnpviError(f"{dst}: the output would replace the input file")
    if not dst.parent.is_dir():
        raise BnpviError(f"cannot write {dst}: directory {dst.parent} does not exist")
    if batches_fixed is None:
        batches_fixed = n_batches is not None
    count = 1 if n_batches is None else n_batches
    try:
        count = int(count)
    except (TypeError, ValueError):
        raise BnpviError(f"the number of batches must be an integer, got {n_batches!r}") from None
    if count < 1:
        raise BnpviError(f"the number of batches must be at least 1, got {count}")
    if shuffle_seed is not None:
        shuffle_seed = check_seed(shuffle_seed, "the shuffle seed")
    if heldout is not None:
        heldout = check_fraction(heldout)
        heldout_seed = check_seed(heldout_seed, "the held-out seed")
    kind = "seq" if sequences is not None or sequence_column is not None else input_kind(src)
    if kind == "seq" and heldout is not None:
        raise BnpviError(f"{src}: --heldout applies only to points and bag-of-words sources; this one holds "
                         "sequences")
    if kind != "bow" and (vocab is not None or vocab_size is not None):
        option = "--vocab" if vocab is not None else "--vocab-size"
        if src.exists() and src.suffix.lower() in POINT_SUFFIXES:
            held = "sequences" if kind == "seq" else "points"
            raise BnpviError(f"{src} holds {held}, not bag-of-words documents; {option} applies only to "
                             f".ldac and sparse .npz files")
    if kind == "seq":
        data = read_sequences(src, sequences=sequences, sequence_column=sequence_column, labels=labels)
    elif kind == "bow":
        data = read_documents(src, labels=labels, vocab=vocab, vocab_size=vocab_size)
    else:
        data = Points(*read_table(src, labels=labels))
    n = data.n_units
    source = str(src)
    options = {}
    if heldout is not None:
        if n < 2:
            raise BnpviError(f"{src} has N={n} {data.unit[:-1]}; --heldout needs at least 2")
        train_index, heldout_index = choose_heldout(n, heldout, heldout_seed)
        held, data = data.permuted(heldout_index), data.permuted(train_index)
        source += (f" ({heldout_index.shape[0]} of {n} {data.unit} held out: fraction {heldout:g}, "
                   f"seed {heldout_seed})")
        if count > data.n_units:
            raise BnpviError(f"{src} has N={n} {data.unit}, {data.n_units} of them for training after holding out "
                             f"{heldout_index.shape[0]}; the number of batches must be between 1 and "
                             f"{data.n_units}, got {count}")
    elif count > n:
        raise BnpviError(f"{src} has {data.count_name}={n} {data.unit}; the number of batches must be between 1 "
                         f"and {n}, got {count}")
    if shuffle_seed is not None:
        perm = np.random.default_rng(shuffle_seed).permutation(data.n_units)
        data = data.permuted(perm)
        if heldout is not None:
            train_index = train_index[perm]
        source += f" ({data.unit} shuffled, seed {shuffle_seed})"
    if heldout is not None and kind == "bow":
        options["heldout"] = HeldoutDocuments(held.word_ids, held.word_counts, held.doc_range, heldout_index,
                                              train_index, held.labels, heldout, heldout_seed)
    elif heldout is not None:
        options["heldout"] = HeldoutPoints(held.X, heldout_index, train_index, held.labels, heldout, heldout_seed)
    return data.write(dst, n_batches=count, batches_fixed=batches_fixed, source=source, **options)


# ======================================================= bag of words
@dataclass(frozen=True)
class Documents:
    """A bag-of-words corpus in CSR form, as read by :func:`read_documents`.

    Attributes
    ----------
    word_ids : (nnz,) int32
    word_counts : (nnz,) float64, positive whole numbers
    doc_range : (N+1,) int64, from 0 to nnz, strictly increasing (no empty documents)
    vocab_size : int
        V.
    labels : (N,) int64 or None
    vocab : list of V str, or None
    true_topics : (K, V) float64 or None
        Generating topics of a synthetic corpus (from a CSR-triplet ``.npz``).
    """

    word_ids: np.ndarray
    word_counts: np.ndarray
    doc_range: np.ndarray
    vocab_size: int
    labels: np.ndarray | None = None
    vocab: list[str] | None = None
    true_topics: np.ndarray | None = None

    unit: ClassVar[str] = "documents"
    count_name: ClassVar[str] = "N"

    @property
    def n_docs(self) -> int:
        return self.doc_range.shape[0] - 1

    @property
    def n_units(self) -> int:
        """Number of documents (as n_docs)."""
        return self.n_docs

    def permuted(self, perm: np.ndarray) -> "Documents":
        """The documents ``perm`` in that order: a permutation, or a subset (labels follow their documents)."""
        doc_range, entries = _permuted_ranges(self.doc_range, perm)
        labels = None if self.labels is None else self.labels[np.asarray(perm, dtype=np.int64)]
        return Documents(self.word_ids[entries], self.word_counts[entries], doc_range, self.vocab_size,
                         labels, self.vocab, self.true_topics)

    def write(self, dst, **options) -> Path:
        """Write a ``"bow"`` batch file (``options``: those of ``write_documents``)."""
        return write_documents(dst, self.word_ids, self.word_counts, self.doc_range, self.vocab_size,
                               labels=self.labels, vocab=self.vocab, true_topics=self.true_topics, **options)


def read_vocab(path) -> list[str]:
    """Read a vocabulary file: one word per line (UTF-8); word id i is line i+1.

    Surrounding whitespace of each word is removed. Blank lines at the end are
    ignored; a blank line before the last word is an error (it would shift every
    later id).

    Raises
    ------
    BnpviError
        Missing or empty file, invalid UTF-8, or a blank line (naming file and line).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise BnpviError(f"vocabulary file not found: {path}")
    if path.is_dir():
        raise BnpviError(f"{path} is a directory, not a vocabulary file")
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    words = []
    for i, line in enumerate(lines):
        try:
            words.append(line.decode("utf-8").strip())
        except UnicodeDecodeError:
            raise BnpviError(f"{path}, line {i + 1}: not valid UTF-8") from None
    while words and not words[-1]:
        words.pop()
    if not words:
        raise BnpviError(f"{path} is empty (no words)")
    blank = [i for i, w in enumerate(words) if not w]
    if blank:
        raise BnpviError(f"{path}, line {blank[0] + 1}: blank line (one word per line; word id i is line i+1)")
    return words


# ---------------------------------------------------------------- LDA-C
# Bytes per block of an .ldac file parsed at once (a block always ends at a line end).
_LDAC_BLOCK = 2**22
_MAX_DIGITS = 18  # numbers of up to 18 digits fit int64
_SPACE = b" \t\r\x0b\x0c"
_INT32_MAX = int(np.iinfo(np.int32).max)
_DIGIT, _COLON, _SPACE_CLASS, _NEWLINE, _OTHER = range(5)
_BYTE_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_BYTE_CLASS[ord("0"):ord("9") + 1] = _DIGIT
_BYTE_CLASS[ord(":")] = _COLON
_BYTE_CLASS[list(_SPACE)] = _SPACE_CLASS
_BYTE_CLASS[ord("\n")] = _NEWLINE


def _ldac_line_problem(line: bytes, V: int | None) -> str | None:
    """What is wrong with one LDA-C line (``n id:count id:count ...``), or None.

    This is the reference grammar: the vectorized parser only flags candidate
    lines, and this function says what is wrong with the first one.
    """
    toks = line.translate(None, b"\n").replace(b"\t", b" ").replace(b"\r", b" ").replace(b"\x0b", b" ") \
        .replace(b"\x0c", b" ").split(b" ")
    toks = [t for t in toks if t]
    if not toks:
        return "empty line (expected 'n id:count id:count ...'; blank lines are allowed only at the end)"

    def show(tok: bytes) -> str:
        return repr(tok.decode("utf-8", "replace"))

    first = toks[0]
    if b":" in first:
        return f"starts with {show(first)}; expected the number of distinct words n first"
    if not first.isdigit():
        return f"n must be a non-negative integer, got {show(first)}"
    if len(first) > _MAX_DIGITS:
        return f"n {show(first)} is too large"
    n = int(first)
    ids = []
    for tok in toks[1:]:
        id_s, sep, count_s = tok.partition(b":")
        if not sep or not id_s or not count_s or b":" in count_s:
            return f"malformed token {show(tok)} (expected id:count)"
        if not id_s.isdigit():
            if id_s[:1] == b"-" and id_s[1:].isdigit():
                return f"negative word id in {show(tok)}"
            return f"malformed word id in {show(tok)} (expected a non-negative integer)"
        if not count_s.isdigit():
            if count_s[:1] == b"-" and count_s[1:].replace(b".", b"", 1).isdigit():
                return f"negative count in {show(tok)}"
            try:
                value = float(count_s)
            except ValueError:
                return f"malformed count in {show(tok)} (expected a positive integer)"
            return f"non-integer count in {show(tok)} (counts must be positive integers written as digits)" \
                if value == value else f"malformed count in {show(tok)}"
        if len(id_s) > _MAX_DIGITS or len(count_s) > _MAX_DIGITS:
            return f"number too large in {show(tok)}"
        word, count = int(id_s), int(count_s)
        if count == 0:
            return f"zero count in {show(tok)} (counts must be positive; leave the word out instead)"
        if V is not None and word >= V:
            return f"word id {word} outside the vocabulary (V={V}; ids run from 0 to {V - 1})"
        if word > _INT32_MAX - 1:
            return f"word id {word} is too large (at most {_INT32_MAX - 1})"
        ids.append(word)
    if not ids:
        return f"document has no words (n={n}); empty documents are not allowed - drop the line"
    if n != len(ids) and n != len(set(ids)):
        return f"n={n} but the line has {len(ids)} id:count pairs"
    return None


class _LdacBlock:
    """Vectorized parse of a block of whole LDA-C lines (no per-token Python objects).

    Attributes after construction: ``ids``, ``counts`` (int64 per pair), ``lengths``
    (pairs per line that has tokens), ``token_lines`` (block line of each such
    line), ``n_lines`` (lines in the block), ``bad_line`` (first line of the block
    that breaks the grammar or a limit, or None).
    """

    def __init__(self, data: bytes, V: int | None):
        buf = np.frombuffer(data, dtype=np.uint8)
        size = buf.shape[0]
        cls = _BYTE_CLASS[buf]
        nl_pos = np.flatnonzero(cls == _NEWLINE)
        self.n_lines = nl_pos.shape[0] + (1 if size and buf[-1] != 10 else 0)
        candidates = []

        def line_of(pos):
            return np.searchsorted(nl_pos, pos)

        other = cls == _OTHER
        if other.any():
            candidates.append(int(line_of(int(np.argmax(other)))))
        is_digit = cls == _DIGIT
        colons = np.flatnonzero(cls == _COLON)
        if colons.size:
            left_ok = (colons > 0) & is_digit[np.maximum(colons - 1, 0)]
            right_ok = (colons < size - 1) & is_digit[np.minimum(colons + 1, size - 1)]
            bad = ~(left_ok & right_ok)
            if bad.any():
                candidates.append(int(line_of(colons[np.argmax(bad)])))

        edges = np.diff(is_digit.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        del edges, is_digit, cls
        if starts.size == 0:
            self.ids = self.counts = self.lengths = self.token_lines = np.zeros(0, dtype=np.int64)
            self.bad_line = min(candidates) if candidates else None
            return
        widths = ends - starts
        long_runs = widths > _MAX_DIGITS
        if long_runs.any():
            candidates.append(int(line_of(starts[np.argmax(long_runs)])))
        # value of each digit run, one digit position at a time (numbers are short)
        values = (buf[starts] - np.uint8(48)).astype(np.int64)
        for j in range(1, min(int(widths.max()), _MAX_DIGITS)):
            more = np.flatnonzero(widths > j)
            values[more] = values[more] * 10 + (buf[starts[more] + j] - np.uint8(48))

        tok_line = line_of(starts)
        n_tok = starts.shape[0]
        prev = np.where(starts > 0, buf[np.maximum(starts - 1, 0)], 10)
        nxt = np.where(ends < size, buf[np.minimum(ends, size - 1)], 10)
        before_colon, after_colon = nxt == 58, prev == 58
        line_start = np.empty(n_tok, dtype=bool)
        line_start[0] = True
        np.not_equal(tok_line[1:], tok_line[:-1], out=line_start[1:])
        index = np.arange(n_tok)
        k = index - np.maximum.accumulate(np.where(line_start, index, 0))
        is_id = (k % 2) == 1
        is_count = (k > 0) & ~is_id
        ok = np.where(k == 0, ~before_colon & ~after_colon,
                      np.where(is_id, before_colon & ~after_colon, after_colon & ~before_colon))
        if not ok.all():
            candidates.append(int(tok_line[np.argmax(~ok)]))
        line_first = np.flatnonzero(line_start)
        line_tokens = np.diff(np.r_[line_first, n_tok])
        lines = tok_line[line_first]
        bad = (line_tokens % 2) == 0  # implied by ok + the colon rule; a cheap guard
        if bad.any():
            candidates.append(int(lines[np.argmax(bad)]))
        # blank lines before the last line with words
        blank_before = np.setdiff1d(np.arange(int(lines[-1])), lines, assume_unique=True)
        if blank_before.size:
            candidates.append(int(blank_before[0]))

        ids, counts = values[is_id], values[is_count]
        n_pairs = (line_tokens - 1) // 2
        if len(ids) == len(counts):
            bad = (counts <= 0) | (ids >= (_INT32_MAX if V is None else V))
            if bad.any():
                candidates.append(int(np.repeat(lines, n_pairs)[np.argmax(bad)]))
            n_stated = values[line_start]
            mismatch = np.flatnonzero((n_stated != n_pairs) | (n_pairs == 0))
            if mismatch.size:
                pair_start = np.r_[0, np.cumsum(n_pairs)]
                for i in mismatch:  # rare: a repeated id (n may count distinct ids) or an error
                    if n_pairs[i] == 0 or n_stated[i] != np.unique(ids[pair_start[i]:pair_start[i + 1]]).size:
                        candidates.append(int(lines[i]))
                        break
        self.ids, self.counts, self.lengths, self.token_lines = ids, counts, n_pairs, lines
        self.bad_line = min(candidates) if candidates else None


def _ldac_blocks(fh, block_bytes: int):
    """Yield blocks of whole lines (each ends with a newline, except possibly the last)."""
    rest = b""
    while True:
        chunk = fh.read(block_bytes)
        if not chunk:
            if rest:
                yield rest
            return
        data = rest + chunk if rest else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[:cut + 1]
        rest = data[cut + 1:]


def read_ldac(path, vocab_size: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Read an LDA-C corpus: one document per line, ``n id:count id:count ...``.

    ``n`` is the number of id:count pairs that follow; ids count from 0, counts
    are positive integers. A word id repeated within a line is allowed (its
    counts are added up; n may then count either the pairs or the distinct ids).
    Tabs, ``\\r\\n`` line ends, repeated spaces and blank lines at the end of the
    file are accepted. The file is parsed in blocks with NumPy, so memory is a
    small multiple of the block size plus the output arrays.

    Parameters
    ----------
    path : str or Path
    vocab_size : int, optional
        V. Every id must be below it. Default: the largest id + 1.

    Returns
    -------
    word_ids : (nnz,) int32
    word_counts : (nnz,) float64
    doc_range : (N+1,) int64
    vocab_size : int

    Raises
    ------
    BnpviError
        ``"FILE, line L: problem"`` (lines counted from 1) for the first bad line:
        malformed tokens, negative, zero or non-integer counts, an id outside the
        vocabulary, n that does not match the pairs, a document without words, a
        blank line before the end; or an empty file.
    """
    path = Path(path).expanduser()
    V = None if vocab_size is None else int(vocab_size)
    id_parts, count_parts, length_parts = [], [], []
    line0 = 0  # lines before the current block
    pending_blank = None  # first blank line after the last line with words so far (0-based, whole file)
    try:
        fh = open(path, "rb")
    except OSError as err:
        raise BnpviError(f"{path}: cannot read: {err.strerror or err}") from None
    with fh:
        for data in _ldac_blocks(fh, _LDAC_BLOCK):
            block = _LdacBlock(data, V)
            if block.token_lines.size and pending_blank is not None:
                _raise_ldac_line(path, pending_blank, None, V, blank=True)
            if block.bad_line is not None:
                _raise_ldac_line(path, line0 + block.bad_line, data, V, first_line=line0)
            if block.token_lines.size:
                last = int(block.token_lines[-1])
                pending_blank = line0 + last + 1 if last + 1 < block.n_lines else None
            elif pending_blank is None and block.n_lines:
                pending_blank = line0
            id_parts.append(block.ids)
            count_parts.append(block.counts)
            length_parts.append(block.lengths)
            line0 += data.count(b"\n")
    lengths = np.concatenate(length_parts) if length_parts else np.zeros(0, dtype=np.int64)
    if lengths.size == 0:
        raise BnpviError(f"{path} is empty (no documents)")
    ids = np.concatenate(id_parts)
    counts = np.concatenate(count_parts).astype(np.float64)
    doc_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if V is None:
        V = int(ids.max()) + 1
    ids, counts, doc_range, V = check_documents(ids, counts, doc_range, V, str(path), duplicates="sum")
    return ids, counts, doc_range, V


def _raise_ldac_line(path: Path, line: int, data: bytes | None, V, first_line: int = 0, blank: bool = False):
    """Raise the BnpviError for 0-based file line ``line``.

    Its text is taken from ``data``, a block of whole lines starting at file line ``first_line``.
    """
    if blank:
        problem = "empty line (expected 'n id:count id:count ...'; blank lines are allowed only at the end)"
    else:
        lines = data.split(b"\n")
        problem = _ldac_line_problem(lines[line - first_line], V) or "malformed line"
    raise BnpviError(f"{path}, line {line + 1}: {problem}")


# ------------------------------------------------------- sparse NPZ
TRIPLET = ("word_id", "word_count", "doc_range")
SCIPY_KEYS = ("data", "shape", "format")


def npz_layout(path) -> str | None:
    """Which layout an .npz file holds: ``"points"`` (array X), ``"triplet"``
    (word_id / word_count / doc_range), ``"scipy"`` (``scipy.sparse.save_npz``),
    or None when it is none of these or cannot be read.

    X wins when a file holds several layouts (so existing point files keep their meaning).
    """
    try:
        with np.load(Path(path).expanduser(), allow_pickle=False) as npz:
            names = set(npz.files)
    except Exception:  # unreadable: the reader reports the problem
        return None
    if "X" in names:
        return "points"
    if set(TRIPLET) <= names:
        return "triplet"
    if set(SCIPY_KEYS) <= names and ("indices" in names or {"row", "col"} <= names or "offsets" in names):
        return "scipy"
    return None


def _read_npz_documents(path: Path, labels: str | None):
    """(word_ids, word_counts, doc_range, (V, origin) or None, labels array or None, true_topics or None)
    from a sparse .npz (true topics: the triplet's optional array ``true_topics``)."""
    layout = npz_layout(path)
    if layout not in ("triplet", "scipy"):
        raise BnpviError(f"{path}: not a bag-of-words .npz (expected arrays {', '.join(TRIPLET)} "
                         "or a scipy.sparse.save_npz matrix)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = list(npz.files)
            y = None
            if labels is not None:
                if labels not in names:
                    raise BnpviError(f"{path}: no label array {labels!r} (arrays: {', '.join(names)})")
                y = npz[labels]
            if layout == "triplet":
                ids, counts, dr = (npz[name] for name in TRIPLET)
                V = None
                if "vocab_size" in names:
                    stored = np.asarray(npz["vocab_size"])
                    if stored.size != 1 or stored.dtype.kind not in "iuf" or stored.reshape(-1)[0] != \
                            np.round(stored.reshape(-1)[0]) or stored.reshape(-1)[0] < 1:
                        raise BnpviError(f"{path}: vocab_size must be a positive integer, got {stored.tolist()!r}")
                    V = (int(stored.reshape(-1)[0]), f"the file's vocab_size is {int(stored.reshape(-1)[0])}")
                topics = npz["true_topics"] if "true_topics" in names else None
                return ids, counts, dr, V, y, topics
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {_first_line(err)}") from None
    try:
        X = sp.load_npz(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as a scipy.sparse .npz: {_first_line(err)}") from None
    if X.ndim != 2:
        raise BnpviError(f"{path}: the sparse matrix must be 2-D (documents x vocabulary), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise BnpviError(f"{path}: the sparse matrix must hold counts, got dtype {X.dtype}")
    X = sp.csr_matrix(X)
    if X.shape[0] < 1:
        raise BnpviError(f"{path}: the sparse matrix has no rows (documents)")
    if X.shape[1] < 1:
        raise BnpviError(f"{path}: the sparse matrix has no columns (vocabulary size 0)")
    X.eliminate_zeros()  # stored zeros are absent words
    return X.indices, X.data, X.indptr, (int(X.shape[1]), f"the matrix has {X.shape[1]} columns"), y, None


def read_documents(path, labels: str | None = None, vocab=None, vocab_size: int | None = None) -> Documents:
    """Read a bag-of-words corpus from an ``.ldac`` file or a sparse ``.npz`` file.

    Parameters
    ----------
    path : str or Path
        ``.ldac``: LDA-C text, see :func:`read_ldac`.
        ``.npz``: either the CSR triplet ``word_id`` (int), ``word_count``,
        ``doc_range`` (N+1, from 0) with an optional scalar ``vocab_size`` and
        optional generating topics ``true_topics`` (K, V) of a synthetic corpus, or a
        matrix saved by ``scipy.sparse.save_npz`` (documents x vocabulary; its
        column count is V; stored zeros are dropped).
    labels : str, optional
        NPZ only: the name of an array of N document labels.
    vocab : str, Path or sequence of str, optional
        A vocabulary file (one word per line) or the words themselves; V is its length.
    vocab_size : int, optional
        V. Default: from ``vocab``, the file (npz ``vocab_size`` / matrix shape), else
        the largest id + 1. All the sizes given must agree.

    Returns
    -------
    Documents
        Repeated ids within a document summed into their first occurrence;
        entry order otherwise as in the file.

    Raises
    ------
    BnpviError
        One line naming the file (and the line for ``.ldac``, the document for ``.npz``).
    """
    path, suffix = _existing_file(path)
    if suffix not in BOW_SUFFIXES:
        raise BnpviError(f"{path}: not a bag-of-words file (expected one of {', '.join(BOW_SUFFIXES)})")
    if path.stat().st_size == 0:
        raise BnpviError(f"{path} is empty")
    words = None
    sizes = []  # (V, where it comes from)
    if vocab is not None:
        if isinstance(vocab, (str, Path)):
            words = read_vocab(vocab)
            sizes.append((len(words), f"vocabulary file {Path(vocab).expanduser()} has {len(words)} words"))
        else:
            words = list(vocab)
            sizes.append((len(words), f"the vocabulary has {len(words)} words"))
    if vocab_size is not None:
        try:
            given = int(vocab_size)
        except (TypeError, ValueError):
            raise BnpviError(f"the vocabulary size must be an integer, got {vocab_size!r}") from None
        if given < 1:
            raise BnpviError(f"the vocabulary size must be at least 1, got {given}")
        sizes.append((given, f"the given vocabulary size is {given}"))
    _agree(sizes, path)
    V = sizes[0][0] if sizes else None
    y = topics = None
    if suffix == ".ldac":
        if labels is not None:
            raise BnpviError(f"{path}: an .ldac file holds no labels, so labels={labels!r} cannot be read from it; "
                             "use a .npz file with word_id, word_count, doc_range and a label array")
        ids, counts, dr, V = read_ldac(path, vocab_size=V)
    else:
        ids, counts, dr, stored, y, topics = _read_npz_documents(path, labels)
        if stored is not None:
            sizes.append(stored)
            _agree(sizes, path)
            V = stored[0]
        ids = as_index_array(ids, "word_id", str(path))
        if V is None:
            V = max(1, int(ids.max()) + 1) if ids.size else 1
        ids, counts, dr, V = check_documents(ids, counts, dr, V, str(path), duplicates="sum")
    if words is not None:
        words = check_vocab(words, V, str(path))
    if y is not None:
        y = check_labels(_as_int_labels(y, path), dr.shape[0] - 1, str(path),
                         atoms=f"there are {dr.shape[0] - 1} documents")
    if topics is not None:
        topics = np.asarray(topics)
        if topics.dtype.kind not in "biuf" or topics.ndim != 2 or topics.shape[0] < 1 or topics.shape[1] != V:
            raise BnpviError(f"{path}: true_topics has shape {topics.shape} and dtype {topics.dtype}; expected "
                             f"(K, V={V}) numbers")
        topics = topics.astype(np.float64)
        if not np.all(np.isfinite(topics)) or (topics < 0).any():
            raise BnpviError(f"{path}: true_topics must be finite and non-negative")
    return Documents(ids, counts, dr, V, y, words, topics)


def _agree(sizes: list[tuple[int, str]], path: Path) -> None:
    if len({v for v, _ in sizes}) > 1:
        raise BnpviError(f"{path}: conflicting vocabulary sizes: {'; '.join(text for _, text in sizes)}")
