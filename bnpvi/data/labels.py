"""True labels as batch files store them: integers, or integer codes with their names.

Integer labels (and floats with integral values, and strings that all read as integers, such as
the lines ``3``, ``1``, ``3`` of a labels file) are kept as the integers they are. Any other labels
(e.g. strings) become codes 0..L-1, the index of each label in the sorted list of its distinct
values, and that list is kept as their names: ``names[code]`` gives the label back. A batch file
stores the codes as ``labels`` and the names as ``label_names``
(:func:`~bnpvi.data.base.write_batch_file`).

Labels come from a column or array of the source (``--labels NAME``) or from a labels file
(``--labels-file FILE``: one label per line, per point, time step or document), read in chunks.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.data.checks import check_labels
from bnpvi.data.sources import listed_lines
from bnpvi.errors import BnpviError

# Lines of a labels file read at once.
_CHUNK_LINES = 2**16


def encode_labels(values, where: str) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Labels as integers, or as codes with their names.

    Parameters
    ----------
    values : array_like, shape (N,)
        Integers, floats, strings or other objects (shown by ``str``).
    where : str
        What to name in error messages (usually the file name).

    Returns
    -------
    labels : (N,) int64
        The integers themselves, or codes into ``names``.
    names : tuple of str or None
        The sorted distinct labels (``names[labels]`` is the input), or None for integer labels.

    Raises
    ------
    BnpviError
        Not 1-D, or a missing or non-finite number (naming its row, counted from 0).
    """
    y = np.asarray(values)
    if y.ndim != 1:
        raise BnpviError(f"{where}: labels must be 1-D, got shape {y.shape}")
    if y.dtype.kind in "biu":
        return y.astype(np.int64), None
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            row = int(np.flatnonzero(~np.isfinite(y))[0])
            raise BnpviError(f"{where}: labels have a missing or non-finite value in row {row}")
        if np.all(y == np.round(y)):
            return y.astype(np.int64), None
        uniq, codes = np.unique(y, return_inverse=True)
        return codes.astype(np.int64).reshape(-1), tuple(repr(float(v)) for v in uniq)
    import pandas as pd  # here, not with the module: bnpvi-apply imports this module and needs no pandas

    text = pd.Series(y, dtype=object).astype(str)
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    if text.size and np.all(np.isfinite(numbers)) and np.all(numbers == np.round(numbers)):
        return numbers.astype(np.int64), None
    codes, uniq = pd.factorize(text, sort=True)
    return codes.astype(np.int64), tuple(str(name) for name in uniq)


class LabelCoder:
    """Labels met chunk by chunk: each chunk's labels get provisional codes (in order of first
    appearance), and :meth:`labels` turns all of them into the codes :func:`encode_labels` would give
    the whole column (its distinct values are encoded together: integers stay integers, numbers are
    sorted as numbers, anything else as text)."""

    def __init__(self) -> None:
        self._codes: dict = {}

    def add(self, values) -> np.ndarray:
        """Provisional codes of one chunk of labels (strings, or numbers as a table column holds them)."""
        import pandas as pd

        inverse, uniq = pd.factorize(np.asarray(values, dtype=object))
        codes = np.array([self._codes.setdefault(name, len(self._codes)) for name in uniq], dtype=np.int64)
        return codes[inverse]

    def labels(self, codes: np.ndarray, where: str) -> tuple[np.ndarray, tuple[str, ...] | None]:
        """The final ``(labels, names)`` of the provisional ``codes`` of every chunk."""
        final, names = encode_labels(np.array(list(self._codes)), where)
        return final[np.asarray(codes, dtype=np.int64)], names


def read_labels_file(path, encoding: str = "utf-8") -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Read a labels file: one label per line (text in ``encoding``; surrounding whitespace removed), read in
    chunks.

    Blank lines at the end are ignored; a blank line before the last label is an error
    (it would shift every later label).

    Returns
    -------
    labels, names
        As :func:`encode_labels`.

    Raises
    ------
    BnpviError
        Missing or empty file, bytes that are not text in ``encoding``, or a blank line (naming file and line).
    """
    parts = []
    coder = LabelCoder()
    for items in listed_lines(path, "labels", "one label per line", _CHUNK_LINES, encoding):
        parts.append(coder.add(items))
    if not parts:
        raise BnpviError(f"{Path(path).expanduser()} holds no labels")
    return coder.labels(np.concatenate(parts), str(path))


def source_labels(values, labels_file, n: int, where: str, atoms: str,
                  encoding: str = "utf-8") -> tuple[np.ndarray | None, tuple[str, ...] | None]:
    """The labels of a source: from its own column or array (``values``), or from ``labels_file``.

    Parameters
    ----------
    values : array_like or None
        The labels read from the source itself.
    labels_file : str or Path or None
        A labels file (:func:`read_labels_file`); not together with ``values``.
    n : int
        How many labels there must be (one per row, time step or document).
    where : str
        The source, in messages.
    atoms : str
        What there are ``n`` of, in messages (e.g. ``"41 rows (time steps)"``).
    encoding : str, default "utf-8"
        The text encoding of ``labels_file``.

    Returns
    -------
    labels : (n,) int64 or None
    names : tuple of str or None
    """
    if values is None and labels_file is None:
        return None, None
    if labels_file is None:
        return encode_labels(values, where)
    labels, names = read_labels_file(labels_file, encoding)
    if labels.shape[0] != n:
        raise BnpviError(f"{Path(labels_file).expanduser()} has {labels.shape[0]} labels (one per line) but "
                         f"{where} has {atoms}")
    return labels, names


def row_labels(y, labels_file, n: int, path: Path, rows: str,
               encoding: str = "utf-8") -> tuple[np.ndarray | None, tuple[str, ...] | None]:
    """The labels of the ``n`` rows of a source, as integers or codes with their names (or ``(None, None)``).

    ``y`` holds the source's own labels: raw values, or ``(codes, names)`` already encoded (a
    :class:`LabelCoder`'s); else they come from ``labels_file``. ``rows`` names the rows in messages
    (``"rows"``, ``"rows (time steps)"``); ``encoding`` is the labels file's.
    """
    y, names = y if isinstance(y, tuple) else source_labels(y, labels_file, n, str(path), f"{n} {rows}", encoding)
    if y is not None:
        y = check_labels(y, n, str(path))
    return y, names


def one_source(labels, labels_file) -> None:
    """Labels come from the source (``--labels``) or from a file (``--labels-file``), not both."""
    if labels is not None and labels_file is not None:
        raise BnpviError("give the labels either as --labels NAME (a column or array of the source) or as "
                         "--labels-file FILE (one per line), not both")


def appended_labels(store, labels, label_names, where: str) -> tuple[np.ndarray | None, tuple[str, ...] | None]:
    """The labels of a batch file ``store`` followed by ``labels`` (with their ``label_names``): kept where both
    have them, coded alike; (None, None) where neither has; a one-line BnpviError where one of them has."""
    theirs = store.labels()
    if theirs is None and labels is None:
        return None, None
    if theirs is None or labels is None:
        raise BnpviError(f"{where}: {'the file' if labels is None else 'the new data'} has labels and "
                         f"{'the new data' if labels is None else 'the file'} has none; give both or neither")
    names = store.label_names()
    names = None if names is None else tuple(names)
    if names != (None if label_names is None else tuple(label_names)):
        raise BnpviError(f"{where}: the file's labels and the new data's are not coded alike (their names differ)")
    return np.concatenate([theirs, np.asarray(labels[:], dtype=np.int64)]), names
