"""What the readers of every kind of source share: files, CSV tables, NPZ arrays, lines in chunks, and
the :class:`Reader` record by which :mod:`bnpvi.data.convert` picks a reader.

Every problem is a one-line :class:`~bnpvi.errors.BnpviError` that names the file; rows are counted
from 0 after any header, lines from 1.
"""
from __future__ import annotations

import codecs
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from bnpvi.data.base import block_rows, block_values
from bnpvi.data.checks import check_finite, check_points_layout
from bnpvi.data.mapped import MappedArray, Spool
from bnpvi.data.progress import meter
from bnpvi.errors import BnpviError

if TYPE_CHECKING:  # pandas is imported where it is used (0.4 s): bnpvi-apply and most readers go without it
    import pandas as pd

#: Arrays of the CSR-triplet layout of a bag-of-words ``.npz``.
TRIPLET = ("word_id", "word_count", "doc_range")
#: Arrays every ``scipy.sparse.save_npz`` file holds.
SCIPY_KEYS = ("data", "shape", "format")
#: Bytes of a text file decoded at once (:func:`line_chunks`), and the size a chunk of raw text is held to.
TEXT_BLOCK = 2**20


@dataclass(frozen=True)
class Reader:
    """One kind of source that :func:`bnpvi.data.convert.convert` can read.

    Attributes
    ----------
    holds : str
        What such a source holds, in messages (``"points"``, ``"bag-of-words documents"``).
    files : str
        Which files it reads, in messages (``".ldac and sparse .npz files"``).
    suffixes : tuple of str
        The file suffixes it reads (empty: any file).
    options : frozenset of str
        The read options it takes (keywords of ``read``).
    claims : callable
        ``claims(path, options) -> bool``: whether this reader reads the source.
    read : callable
        ``read(path, **options)`` -> the data (``Points``, ``Documents``, ``Sequences``).
    """

    holds: str
    files: str
    suffixes: tuple[str, ...]
    options: frozenset[str]
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


def check_output(src: Path, dst: Path, overwrite: bool) -> None:
    """What a converter's output file ``dst`` must be before ``src`` is read: a name ending in ``.h5`` (a batch
    file is HDF5, and bnpvi-train reads only such a name as one), not there yet unless ``overwrite``, not the
    input itself, in a directory that exists."""
    if dst.suffix.lower() != ".h5":
        raise BnpviError(f"output file {dst} must end in .h5 (a batch file is HDF5), e.g. {dst.with_suffix('.h5')}")
    if dst.exists() and not overwrite:
        raise BnpviError(f"{dst} already exists (pass --overwrite to replace it)")
    if dst.exists() and src.exists() and dst.resolve() == src.resolve():
        raise BnpviError(f"{dst}: the output would replace the input file")
    if not dst.parent.is_dir():
        raise BnpviError(f"cannot write {dst}: directory {dst.parent} does not exist")


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


def text_encoding(name) -> str:
    """The canonical name of the text encoding ``name`` (any codec Python knows: ``"utf-8"``, ``"latin-1"``,
    ``"cp1252"``, ``"utf-16"``, ...); a one-line BnpviError for an unknown name or a codec that does not
    decode bytes to text (``"base64"``)."""
    try:
        info = codecs.lookup(str(name))
    except LookupError:
        raise BnpviError(f"--encoding {name!r} is not an encoding Python knows (e.g. utf-8, latin-1, cp1252, "
                         "utf-16)") from None
    if not getattr(info, "_is_text_encoding", True):
        raise BnpviError(f"--encoding {name!r} is not a text encoding (e.g. utf-8, latin-1, cp1252, utf-16)")
    return info.name


def undecodable(path: Path, line: int, encoding: str) -> BnpviError:
    """The error for bytes that are not text in ``encoding`` on (1-based) ``line`` of ``path``."""
    return BnpviError(f"{path}, line {line}: not valid {encoding} text; name the file's encoding with --encoding "
                      "(e.g. --encoding latin-1)")


def line_chunks(path: Path, n_lines: int, encoding: str = "utf-8") -> Iterator[list[str]]:
    """Yield the lines of a text file in ``encoding`` (line ends removed), in lists of at most ``n_lines`` lines
    and about :data:`TEXT_BLOCK` bytes (a longer line comes whole).

    The file is decoded a block of :data:`TEXT_BLOCK` bytes at a time, so any encoding reads, also those whose
    line ends are not the byte ``\\n`` (UTF-16, EBCDIC). Line i of the file (counted from 0) is item i of the
    concatenated lists; a line ends at ``\\n``, and a ``\\r`` before it is removed; a file that does not end
    with a newline has a last line all the same.

    Raises
    ------
    BnpviError
        ``"FILE, line L: not valid ENCODING text; name the file's encoding with --encoding ..."`` (lines
        counted from 1), an unknown encoding, or the file cannot be read.
    """
    encoding = text_encoding(encoding)
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        fh = open(path, "rb")
    except OSError as err:
        raise BnpviError(f"{path}: cannot read: {err.strerror or err}") from None
    done, parts = 0, []  # lines yielded; the pieces of a line not yet ended
    with fh:
        while True:
            data = fh.read(TEXT_BLOCK)
            state = decoder.getstate()
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as err:
                raise undecodable(path, done + _lines_before(err, encoding, state) + 1, encoding) from None
            except UnicodeError as err:  # a codec that cannot decode at all (idna with a file's bytes)
                raise BnpviError(f"{path}: cannot decode as {encoding}: {first_line(err)}") from None
            if "\n" in text or not data:
                lines = ("".join(parts) + text).split("\n")
                parts = [lines.pop()]
                if not data and parts[0]:
                    lines.append(parts.pop())
                for lo in range(0, len(lines), n_lines):
                    yield [line[:-1] if line.endswith("\r") else line for line in lines[lo:lo + n_lines]]
                done += len(lines)
            else:
                parts.append(text)
            if not data:
                return


def _lines_before(err: UnicodeDecodeError, encoding: str, state: tuple) -> int:
    """Line ends before the bytes ``err`` is about, in the block a decoder in ``state`` was given (``err.object``:
    the bytes it held back from the block before, then the block)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        decoder.setstate((b"", state[1]))
        return decoder.decode(err.object[:err.start]).count("\n")
    except (UnicodeError, TypeError, ValueError):  # a decoder whose state cannot be set: count the byte
        return err.object[:err.start].count(b"\n")


def listed_lines(path, noun: str, layout: str, n_lines: int, encoding: str = "utf-8") -> Iterator[list[str]]:
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
    encoding : str, default "utf-8"
        The file's text encoding (:func:`line_chunks`).

    Raises
    ------
    BnpviError
        Missing file, a directory, bytes that are not text in ``encoding``, or a blank line (naming file and
        line).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise BnpviError(f"{noun} file not found: {path}")
    if path.is_dir():
        raise BnpviError(f"{path} is a directory, not a {noun} file")
    first, blank_from = 0, None  # lines read so far; first line of the blank run that ends them
    for lines in line_chunks(path, n_lines, encoding):
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


# -------------------------------------------------------------------- CSV
def _is_number(cell) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return True


def not_text(path: Path, encoding: str) -> BnpviError:
    """The error for a file that a parser (pandas) found not to be text in ``encoding``: it names the first line
    that is not (found by reading the file with :func:`line_chunks`)."""
    for _ in line_chunks(path, 2**16, encoding):
        pass
    return BnpviError(f"{path}: not valid {encoding} text; name the file's encoding with --encoding "
                      "(e.g. --encoding latin-1)")


def read_csv_chunks(path: Path, sep: str = ",", header: bool | None = None, encoding: str = "utf-8",
                    **options) -> tuple[Iterator[pd.DataFrame], bool]:
    """The rows of a CSV file as DataFrames of about :func:`~bnpvi.data.base.block_values` cells each, and
    whether its first row is a header.

    ``header=None`` guesses: a first row without any numeric cell is a header. The file is text in
    ``encoding`` (:func:`text_encoding`; bytes that are not are reported with their line). ``options`` go to
    ``pandas.read_csv``. A file with a header and no rows gives one empty frame.
    """
    import pandas as pd

    encoding = text_encoding(encoding)

    def parse(**kwargs):
        try:
            return pd.read_csv(path, sep=sep, encoding=encoding, **kwargs)
        except pd.errors.EmptyDataError:
            raise BnpviError(f"{path} is empty (no rows)") from None
        except UnicodeDecodeError:
            raise not_text(path, encoding) from None
        except (pd.errors.ParserError, ValueError) as err:
            raise BnpviError(f"{path}: cannot parse as CSV: {first_line(err)}") from None

    first = parse(header=None, nrows=1, dtype=str, keep_default_na=False)
    if header is None:
        header = not any(_is_number(cell) for cell in first.iloc[0])
    reader = parse(header=0 if header else None, chunksize=max(1, block_values() // first.shape[1]),
                   float_precision="round_trip", **options)  # every number as written (pandas 3's default is not)

    def chunks() -> Iterator[pd.DataFrame]:
        with reader:
            try:
                yield from reader
            except UnicodeDecodeError:
                raise not_text(path, encoding) from None
            except (pd.errors.ParserError, ValueError) as err:
                raise BnpviError(f"{path}: cannot parse as CSV: {first_line(err)}") from None

    return chunks(), header


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


def spool_csv_table(path: Path, roles: dict[str, str | None], columns, scratch: Path,
                    take: dict[str, Callable[[np.ndarray, int], None]], encoding: str = "utf-8") -> MappedArray:
    """A numeric data matrix from a CSV file, read in chunks of rows into a spool; the columns that play other
    roles go, chunk by chunk, to ``take``.

    Parameters
    ----------
    path : Path
    roles : dict
        Role (e.g. ``"labels"``, ``"sequence ids"``) -> column name or index, or None; each named
        column is taken out of the data (no missing values allowed).
    columns : str or sequence, optional
        The data columns (``--columns``: names or 0-based indices); default every column not
        taken by a role.
    scratch : Path
        The directory of the spool (:func:`~bnpvi.data.mapped.scratch_space`).
    take : dict
        Role -> ``take(values, first_row)``, called with each chunk's values of the role's column.
    encoding : str, default "utf-8"
        The file's text encoding.

    Returns
    -------
    MappedArray
        X, (N, D) float64, every value finite or NaN (a missing cell); non-numeric and infinite cells are errors.
    """
    import pandas as pd

    chunks, has_header = read_csv_chunks(path, encoding=encoding, skipinitialspace=True)
    named = {role: name for role, name in roles.items() if name is not None}
    spool, first = None, 0
    with meter("reading", None) as advance:
        for df in chunks:
            if spool is None:
                found, data_columns = _table_columns(df.columns, named, columns, has_header, path)
                spool = Spool(scratch, np.float64, len(data_columns))
            for role, column in found.items():
                values = df[column].to_numpy()
                if pd.isna(values).any():
                    row = first + int(np.flatnonzero(pd.isna(values))[0])
                    raise BnpviError(f"{path}: {role} column {named[role]!r} has a missing value in row {row}")
                take[role](values, first)
            block = _numeric(df[data_columns], has_header, path, first)
            check_finite(block, str(path), "X", first, missing_ok=True)
            spool.append(block)
            first += len(df)
            advance(len(df))
    if first == 0:
        raise BnpviError(f"{path} has no data rows" + (" (only a header)" if has_header else ""))
    return spool.mapped()


def _table_columns(columns: pd.Index, named: dict, wanted, has_header: bool, path: Path) -> tuple[dict, list]:
    """The column of each role, and the data columns (``--columns``, or every other one)."""
    found = {role: find_column(columns, name, has_header, path, role) for role, name in named.items()}
    roles_found = list(found)
    for i, role in enumerate(roles_found):
        for other in roles_found[i + 1:]:
            if found[role] == found[other]:
                raise BnpviError(f"{path}: the {role} and the {other} must be different columns "
                                 f"(both {named[role]!r})")
    if wanted is not None:
        return found, _feature_columns(columns, wanted, has_header, path, found, named)
    data = [column for column in columns if column not in set(found.values())]
    if not data:
        what = " and ".join(f"the {role} column {name!r}" for role, name in named.items())
        raise BnpviError(f"{path}: no data columns left after taking out {what}")
    return found, data


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


def _numeric(df: pd.DataFrame, has_header: bool, path: Path, first: int = 0) -> np.ndarray:
    """The frame (rows ``first, first + 1, ...`` of the file) as a float64 matrix, an empty cell (or ``NA``,
    ``NaN``: pandas' missing markers) as NaN; BnpviError naming the first non-numeric cell."""
    import pandas as pd

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
            raise BnpviError(f"{path}: non-numeric value {str(col.iloc[row])!r} in row {first + row}, column {shown} "
                             "(rows counted from 0, after any header)")
        df[name] = numeric
    return df.to_numpy(dtype=np.float64)


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


class NpyStream:
    """An array in ``.npy`` format read from a binary stream (a file, or a member of an ``.npz`` archive): its
    header on opening, then its rows a block at a time (:meth:`blocks`).

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy dtype
    fortran_order : bool
    offset : int
        Where the data starts in the stream.
    """

    def __init__(self, fh, where: str):
        self._fh, self._where = fh, where
        try:
            version = np.lib.format.read_magic(fh)
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
            self.shape, self.fortran_order, self.dtype = read(fh)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise BnpviError(f"{where}: {first_line(err)}") from None
        if self.dtype.hasobject:
            raise BnpviError(f"{where}: Object arrays cannot be loaded when allow_pickle=False")
        self.offset = fh.tell()

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first_row, rows)`` in order, about :func:`~bnpvi.data.base.block_values` values each
        (an array stored column by column comes whole: its rows are not contiguous)."""
        if self.fortran_order and len(self.shape) > 1:
            yield 0, self._read(self.nbytes).reshape(self.shape, order="F")
            return
        step = block_rows(self.shape)
        for lo in range(0, self.shape[0], step):
            yield lo, self.take(min(step, self.shape[0] - lo))

    def take(self, rows: int) -> np.ndarray:
        """The next ``rows`` rows (of an array stored row by row)."""
        row_bytes = self.nbytes // max(1, self.shape[0])
        return self._read(rows * row_bytes).reshape((rows,) + tuple(self.shape[1:]))

    def _read(self, nbytes: int) -> np.ndarray:
        try:
            data = self._fh.read(nbytes)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise BnpviError(f"{self._where}: {first_line(err)}") from None
        if len(data) < nbytes:
            raise BnpviError(f"{self._where}: the data ends before the {self.shape} values its header announces")
        return np.frombuffer(data, dtype=self.dtype)


def map_npy(path: Path) -> MappedArray:
    """The single array of an .npy file, memory-mapped (:class:`~bnpvi.data.mapped.MappedArray`)."""
    where = f"{path}: cannot read as .npy"
    try:
        fh = open(path, "rb")
    except OSError as err:
        raise BnpviError(f"{where}: {err.strerror or err}") from None
    with fh:
        stream = NpyStream(fh, where)
    if path.stat().st_size < stream.offset + stream.nbytes:
        raise BnpviError(f"{where}: the file ends before the {stream.shape} values its header announces")
    return MappedArray(path, stream.offset, stream.dtype, stream.shape, stream.fortran_order)


def checked_rows(X, where: str, name: str = "X"):
    """``X`` (an array read a block at a time) after one pass that checks every value finite or missing (NaN;
    BnpviError naming the first infinite value's row, counted from 0, and its column)."""
    step = block_rows(X.shape)
    with meter(f"checking {name}", X.shape[0]) as advance:
        for first in range(0, X.shape[0], step):
            check_finite(X[first:first + step], where, name, first, missing_ok=True)
            advance(min(step, X.shape[0] - first))
    return X


def spool_rows(stream: NpyStream, scratch: Path, check: Callable[[np.ndarray, int], None]) -> MappedArray:
    """The rows of an array stream, each block ``check``-ed and copied as float64 into a spool in ``scratch``."""
    spool = Spool(scratch, np.float64, stream.shape[1])
    with meter("reading", stream.shape[0]) as advance:
        for first, block in stream.blocks():
            check(block, first)
            spool.append(block)
            advance(block.shape[0])
    return spool.mapped()


def read_npz_arrays(path: Path, labels: str | None, scratch: Path, sequences: str | None = None) -> dict:
    """The arrays of a points or sequences .npz: ``X``; ``labels`` and ``seq_range`` read from the arrays
    named by ``labels`` and ``sequences`` when given; and ``Xprev`` when ``sequences`` is given and the
    file holds it.

    X and Xprev are checked (2-D, finite real numbers, X's NaN missing entries) and spooled into ``scratch`` a block at a time
    (:class:`~bnpvi.data.mapped.MappedArray`); the labels and boundaries are read whole.
    """
    where = f"{path}: cannot read as .npz"
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{where}: {first_line(err)}") from None
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
        arrays = {}
        for name in ("X", "Xprev") if sequences is not None and "Xprev" in names else ("X",):
            with npz.zip.open(f"{name}.npy") as fh:
                stream = NpyStream(fh, where)
                check_points_layout(stream, str(path), name)
                arrays[name] = spool_rows(stream, scratch, lambda block, first, name=name: check_finite(
                    block, str(path), name, first, missing_ok=name == "X"))
        for key, what, name in (("labels", "label", labels), ("seq_range", "sequence range", sequences)):
            if name is None:
                continue
            if name not in names:
                raise BnpviError(f"{path}: no {what} array {name!r} (arrays: {', '.join(names)})")
            arrays[key] = npz[name]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{where}: {first_line(err)}") from None
    finally:
        npz.close()
    return arrays


def no_columns_in_arrays(path: Path, columns) -> None:
    """``--columns`` picks CSV columns; an .npz or .npy file has none to pick."""
    if columns is not None:
        raise BnpviError(f"{path}: --columns picks the data columns of a CSV file; an {path.suffix.lower()} file "
                         "holds the array X - select its columns before saving it")
