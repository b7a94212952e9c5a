"""Read user data (CSV, NPZ, NPY), check it, and write a batch file.

Every problem with the input is a one-line :class:`~bnpvi.errors.BnpviError`
that names the file: missing file, unknown extension, empty file, non-numeric
values, NaN or inf (with the first bad row, counted from 0), a wrongly shaped
array, a missing or wrongly sized label array.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from bnpvi.data.store import check_labels, check_points, write_points
from bnpvi.errors import BnpviError

SUFFIXES = (".csv", ".npz", ".npy")


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
    path = Path(path).expanduser()
    if not path.exists():
        raise BnpviError(f"file not found: {path}")
    if path.is_dir():
        raise BnpviError(f"{path} is a directory, not a data file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        shown = repr(path.suffix) if path.suffix else "no extension"
        raise BnpviError(f"{path}: unknown file type ({shown}); expected one of {', '.join(SUFFIXES)}")
    if path.stat().st_size == 0:
        raise BnpviError(f"{path} is empty")
    if suffix == ".csv":
        X, y = _read_csv(path, labels)
    elif suffix == ".npz":
        X, y = _read_npz(path, labels)
    else:
        if labels is not None:
            raise BnpviError(f"{path}: a .npy file holds one array, so labels={labels!r} cannot be read from it; "
                             "use a .npz file with arrays X and labels")
        X, y = _load_npy(path), None
    X = check_points(X, str(path))
    if y is not None:
        y = check_labels(_as_int_labels(y, path), X.shape[0], str(path))
    return X, y


# ------------------------------------------------------------------ CSV
def _is_number(cell) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return True


def _read_csv(path: Path, labels: str | None) -> tuple[np.ndarray, np.ndarray | None]:
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

    y = None
    if labels is not None:
        column = _find_column(df, labels, has_header, path)
        y = df.pop(column).to_numpy()
        if pd.isna(y).any():
            row = int(np.flatnonzero(pd.isna(y))[0])
            raise BnpviError(f"{path}: labels column {labels!r} has a missing value in row {row}")
    if df.shape[1] == 0:
        raise BnpviError(f"{path}: no data columns left after taking column {labels!r} as labels")

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
    return X, y


def _find_column(df: pd.DataFrame, name: str, has_header: bool, path: Path):
    if has_header and name in df.columns:
        return name
    try:
        index = int(name)
    except (TypeError, ValueError):
        index = None
    if index is not None and -df.shape[1] <= index < df.shape[1]:
        return df.columns[index]
    if has_header:
        raise BnpviError(f"{path}: no column {name!r} for labels (columns: {', '.join(map(str, df.columns))})")
    raise BnpviError(f"{path}: no header row, so labels={name!r} must be a column index "
                     f"(0..{df.shape[1] - 1}, or -1 for the last)")


# ------------------------------------------------------------- NPZ / NPY
def _read_npz(path: Path, labels: str | None) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {_first_line(err)}") from None
    if isinstance(npz, np.ndarray):
        raise BnpviError(f"{path} holds a single .npy array, not an .npz archive; rename it to .npy")
    try:
        names = list(npz.files)
        if "X" not in names:
            raise BnpviError(f"{path}: no array 'X' (arrays: {', '.join(names) or 'none'})")
        X = npz["X"]
        y = None
        if labels is not None:
            if labels not in names:
                raise BnpviError(f"{path}: no label array {labels!r} (arrays: {', '.join(names)})")
            y = npz[labels]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {_first_line(err)}") from None
    finally:
        npz.close()
    return X, y


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


# -------------------------------------------------------------- convert
def convert(src, dst, n_batches: int | None = None, labels: str | None = None, shuffle_seed: int | None = None,
            overwrite: bool = False, batches_fixed: bool | None = None) -> Path:
    """Read ``src`` (CSV / NPZ / NPY), check it, and write the batch file ``dst``.

    Parameters
    ----------
    src : str or Path
        Input file, see :func:`read_table`.
    dst : str or Path
        Output batch file; written atomically, so a failure leaves nothing behind.
    n_batches : int, optional
        Number of contiguous, as-equal-as-possible batches. None means one batch
        that training may re-split (``alg.n_batches``).
    labels : str, optional
        Labels column / array name, see :func:`read_table`.
    shuffle_seed : int, optional
        Permute the rows (labels follow their rows) with this seed before batching.
    overwrite : bool, default False
        Replace an existing ``dst``; otherwise an existing ``dst`` is an error.
    batches_fixed : bool, optional
        Store the split as fixed (training may not re-split it). Default: fixed
        exactly when ``n_batches`` was given.

    Returns
    -------
    Path
        ``dst``.

    Raises
    ------
    BnpviError
        Bad input, ``dst`` exists (without ``overwrite``), or ``n_batches`` out of 1..N.
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
    X, y = read_table(src, labels=labels)
    N = X.shape[0]
    if count > N:
        raise BnpviError(f"{src} has N={N} rows; the number of batches must be between 1 and {N}, got {count}")
    source = str(src)
    if shuffle_seed is not None:
        perm = np.random.default_rng(int(shuffle_seed)).permutation(N)
        X = X[perm]
        if y is not None:
            y = y[perm]
        source += f" (rows shuffled, seed {int(shuffle_seed)})"
    return write_points(dst, X, n_batches=count, labels=y, batches_fixed=batches_fixed, source=source)
