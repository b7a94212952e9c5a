"""What the readers of every kind of source share: files, CSV tables, NPZ arrays, lines in chunks, and
the :class:`Reader` record by which :mod:`bnpvi.data.convert` picks a reader.

Every problem is a one-line :class:`~bnpvi.errors.BnpviError` that names the file; rows are counted
from 0 after any header, lines from 1.
"""
from __future__ import annotations

import itertools
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from bnpvi.errors import BnpviError

#: Arrays of the CSR-triplet layout of a bag-of-words ``.npz``.
TRIPLET = ("word_id", "word_count", "doc_range")
#: Arrays every ``scipy.sparse.save_npz`` file holds.
SCIPY_KEYS = ("data", "shape", "format")


@dataclass(frozen=True)
class Reader:
    """One kind of source that :func:`bnpvi.data.convert.convert` can read.

    Attributes
    ----------
    holds : str
        What such a source holds, in messages (``"points"``, ``"bag-of-words documents"``).
    kind_name : str
        Its kind in the message about ``--heldout`` (``"points"``, ``"bag-of-words"``).
    files : str
        Which files it reads, in messages (``".ldac and sparse .npz files"``).
    suffixes : tuple of str
        The file suffixes it reads (empty: any file).
    options : frozenset of str
        The read options it takes (keywords of ``read``).
    heldout : bool
        Whether a part of the source can be held out (``convert(..., heldout=F)``).
    claims : callable
        ``claims(path, options) -> bool``: whether this reader reads the source.
    read : callable
        ``read(path, **options)`` -> the data (``Points``, ``Documents``, ``Sequences``).
    """

    holds: str
    kind_name: str
    files: str
    suffixes: tuple[str, ...]
    options: frozenset[str]
    heldout: bool
    claims: Callable[[Path, dict], bool]
    read: Callable


# ------------------------------------------------------------------ files
def existing_file(path) -> tuple[Path, str]:
    """The path (user-expanded) and its lower-case suffix; BnpviError if it is missing or a folder."""
    path = Path(path).expanduser()
    if not path.exists():
        raise BnpviError(f"file not found: {path}")
    if path.is_dir():
        raise BnpviError(f"{path} is a directory, not a data file")
    return path, path.suffix.lower()


def nonempty(path: Path) -> None:
    """BnpviError when the file holds no bytes."""
    if path.stat().st_size == 0:
        raise BnpviError(f"{path} is empty")


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def show_suffix(path: Path) -> str:
    """A file's suffix as shown in messages (``'.xlsx'`` or ``no extension``)."""
    return repr(path.suffix) if path.suffix else "no extension"


def line_chunks(path: Path, n_lines: int) -> Iterator[list[str]]:
    """Yield the lines of a UTF-8 text file in lists of at most ``n_lines`` (line ends removed).

    Line i of the file (counted from 0) is item i of the concatenated lists; ``\\r\\n``
    ends are accepted; a file that does not end with a newline has a last line all the same.

    Raises
    ------
    BnpviError
        ``"FILE, line L: not valid UTF-8"`` (lines counted from 1), or the file cannot be read.
    """
    try:
        fh = open(path, "rb")
    except OSError as err:
        raise BnpviError(f"{path}: cannot read: {err.strerror or err}") from None
    first = 0
    with fh:
        while True:
            raw = list(itertools.islice(fh, n_lines))
            if not raw:
                return
            data = b"".join(raw)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as err:
                line = first + data.count(b"\n", 0, err.start)
                raise BnpviError(f"{path}, line {line + 1}: not valid UTF-8") from None
            if text.endswith("\n"):
                text = text[:-1]
            yield text.replace("\r\n", "\n").split("\n")
            first += len(raw)


def listed_lines(path, noun: str, layout: str, n_lines: int) -> Iterator[list[str]]:
    """The items of a file that lists one per line (a vocabulary, labels), in chunks of at most ``n_lines``.

    Surrounding whitespace of each item is removed. Blank lines at the end are ignored; a blank line
    before the last item is an error (it would shift every later item).

    Parameters
    ----------
    path : str or Path
    noun : str
        What the file is, in messages (``"vocabulary"``, ``"labels"``).
    layout : str
        How the file is laid out, in the blank-line message (``"one label per line"``).
    n_lines : int

    Raises
    ------
    BnpviError
        Missing file, a directory, invalid UTF-8, or a blank line (naming file and line).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise BnpviError(f"{noun} file not found: {path}")
    if path.is_dir():
        raise BnpviError(f"{path} is a directory, not a {noun} file")
    first, blank_from = 0, None  # lines read so far; first line of the blank run that ends them
    for lines in line_chunks(path, n_lines):
        items = [line.strip() for line in lines]
        filled = np.flatnonzero([bool(item) for item in items])
        if filled.size:
            last = int(filled[-1])
            if blank_from is not None or filled.size <= last:
                early = np.setdiff1d(np.arange(last), filled, assume_unique=True)
                line = blank_from if blank_from is not None else first + int(early[0])
                raise BnpviError(f"{path}, line {line + 1}: blank line ({layout})")
            yield items[:last + 1]
            blank_from = first + last + 1 if last + 1 < len(items) else None
        elif blank_from is None:
            blank_from = first
        first += len(lines)


def permuted_ranges(ranges: np.ndarray, perm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reorder whole ranges (documents, sequences): the new boundaries, and the old index of every new entry."""
    perm = np.asarray(perm, dtype=np.int64)
    lengths = np.diff(ranges)[perm]
    new_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return new_range, np.repeat(ranges[perm] - new_range[:-1], lengths) + np.arange(new_range[-1])


# -------------------------------------------------------------------- CSV
def _is_number(cell) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return True


def read_csv_frame(path: Path, sep: str = ",", header: bool | None = None, **options) -> tuple[pd.DataFrame, bool]:
    """A CSV file as a DataFrame, and whether its first row is a header.

    ``header=None`` guesses: a first row without any numeric cell is a header. ``options`` go to
    ``pandas.read_csv`` (e.g. ``chunksize``, which returns a reader of DataFrames instead).
    """
    def parse(**kwargs):
        try:
            return pd.read_csv(path, sep=sep, **kwargs)
        except pd.errors.EmptyDataError:
            raise BnpviError(f"{path} is empty (no rows)") from None
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
            raise BnpviError(f"{path}: cannot parse as CSV: {first_line(err)}") from None

    if header is None:
        first = parse(header=None, nrows=1, dtype=str, keep_default_na=False)
        header = not any(_is_number(cell) for cell in first.iloc[0])
    return parse(header=0 if header else None, **options), header


def find_column(columns: pd.Index, name, has_header: bool, path: Path, role: str):
    """The column ``name`` (a header name, or an index) among ``columns``; ``role`` says what it is for."""
    name = str(name)
    if has_header and name in columns:
        return name
    try:
        index = int(name)
    except (TypeError, ValueError):
        index = None
    if index is not None and -len(columns) <= index < len(columns):
        return columns[index]
    if has_header:
        raise BnpviError(f"{path}: no column {name!r} for {role} (columns: {', '.join(map(str, columns))})")
    raise BnpviError(f"{path}: no header row, so the {role} column {name!r} must be a column index "
                     f"(0..{len(columns) - 1}, or -1 for the last)")


def column_list(columns) -> list[str]:
    """``--columns``: ``"a,b,c"`` or a sequence of names / indices, as a list of strings."""
    items = columns.split(",") if isinstance(columns, str) else [str(c) for c in columns]
    items = [item.strip() for item in items]
    if not items or any(not item for item in items):
        raise BnpviError(f"--columns must list column names or indices separated by commas, got {columns!r}")
    return items


def read_csv_table(path: Path, roles: dict[str, str | None],
                   columns=None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A numeric data matrix from a CSV file, and the columns that play other roles.

    Parameters
    ----------
    path : Path
    roles : dict
        Role (e.g. ``"labels"``, ``"sequence ids"``) -> column name or index, or None; each named
        column is taken out of the data and returned as it is (no missing values allowed).
    columns : str or sequence, optional
        The data columns (``--columns``: names or 0-based indices); default every column not
        taken by a role.

    Returns
    -------
    X : (N, D) float64
    taken : dict
        Role -> (N,) values of its column.
    """
    df, has_header = read_csv_frame(path, skipinitialspace=True)
    if len(df) == 0:
        raise BnpviError(f"{path} has no data rows" + (" (only a header)" if has_header else ""))
    named = {role: name for role, name in roles.items() if name is not None}
    found = {role: find_column(df.columns, name, has_header, path, role) for role, name in named.items()}
    roles_found = list(found)
    for i, role in enumerate(roles_found):
        for other in roles_found[i + 1:]:
            if found[role] == found[other]:
                raise BnpviError(f"{path}: the {role} and the {other} must be different columns "
                                 f"(both {named[role]!r})")
    taken = {}
    for role, column in found.items():
        values = df[column].to_numpy()
        if pd.isna(values).any():
            row = int(np.flatnonzero(pd.isna(values))[0])
            raise BnpviError(f"{path}: {role} column {named[role]!r} has a missing value in row {row}")
        taken[role] = values
    if columns is None:
        data = df.drop(columns=list(found.values()))
        if data.shape[1] == 0:
            what = " and ".join(f"the {role} column {name!r}" for role, name in named.items())
            raise BnpviError(f"{path}: no data columns left after taking out {what}")
    else:
        data = df[_feature_columns(df.columns, columns, has_header, path, found, named)]
    return _numeric(data, has_header, path), taken


def _feature_columns(columns: pd.Index, wanted, has_header: bool, path: Path, found: dict, named: dict) -> list:
    """The columns listed by ``--columns``: each once, and none that plays another role."""
    chosen = []
    for name in column_list(wanted):
        column = find_column(columns, name, has_header, path, "--columns")
        if column in chosen:
            raise BnpviError(f"{path}: column {name!r} is listed twice in --columns")
        for role, other in found.items():
            if other == column:
                raise BnpviError(f"{path}: column {name!r} is both a data column (--columns) and the {role} "
                                 f"column {named[role]!r}")
        chosen.append(column)
    return chosen


def _numeric(df: pd.DataFrame, has_header: bool, path: Path) -> np.ndarray:
    """The frame as a float64 matrix; BnpviError naming the first non-numeric or missing cell."""
    df = df.copy()
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
    return X


# ------------------------------------------------------------- NPZ / NPY
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


def read_npz_arrays(path: Path, labels: str | None, sequences: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of a points or sequences .npz: ``X``; ``labels`` and ``seq_range`` read from the arrays
    named by ``labels`` and ``sequences`` when given; and ``Xprev`` when ``sequences`` is given and the
    file holds it."""
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {first_line(err)}") from None
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
        raise BnpviError(f"{path}: cannot read as .npz: {first_line(err)}") from None
    finally:
        npz.close()
    return arrays


def load_npy(path: Path) -> np.ndarray:
    """The single array of an .npy file."""
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise BnpviError(f"{path}: cannot read as .npy: {first_line(err)}") from None
    if not isinstance(arr, np.ndarray):
        raise BnpviError(f"{path} is not an .npy array file")
    return arr


def no_columns_in_arrays(path: Path, columns) -> None:
    """``--columns`` picks CSV columns; an .npz or .npy file has none to pick."""
    if columns is not None:
        raise BnpviError(f"{path}: --columns picks the data columns of a CSV file; an {path.suffix.lower()} file "
                         "holds the array X - select its columns before saving it")
