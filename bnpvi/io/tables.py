"""A table of per-atom columns written block by block to an HDF5 file and a CSV file beside it, atomically.

Each column is one dataset of the .h5, its rows the atoms (a column may carry a second axis,
as a (N, K) matrix of weights, which spreads over K columns of the CSV). Only one block is
held at a time. Both files are written to temporary files and renamed at the end, so an
error never leaves a partial file (a failed write: one line, :mod:`bnpvi.data.writes`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from bnpvi.data.writes import check_written, new_h5, replacing
from bnpvi.io.h5tree import write_tree

CHUNK_VALUES = 65536
"""Values per HDF5 chunk of a column."""
CSV_ROWS = 4096
"""Rows of a block formatted into the CSV at once (as Python objects, ~100 bytes a value)."""


@dataclass(frozen=True)
class Column:
    """One column of a table.

    Attributes
    ----------
    name : str
        Its dataset's name in the .h5.
    dtype : type
        Its dataset's dtype.
    fmt : str
        Its CSV format (``np.savetxt``), used for every CSV column it spreads over.
    width : int
        0 for a 1-D column; K for an (N, K) one.
    """

    name: str
    dtype: type
    fmt: str
    width: int = 0


def write_table(path: Path, columns: list[Column], header: list[str], blocks: Iterable[dict], extra: dict,
                attrs: dict) -> int:
    """``path`` (.h5) and the .csv beside it, from ``blocks`` of rows.

    Parameters
    ----------
    path : Path
        The .h5 file; the CSV is ``path`` with the suffix ``.csv``.
    columns : list of Column
    header : list of str
        The CSV's column names: one per 1-D column, ``width`` per wider one, in the order of ``columns``.
    blocks : iterable
        Objects whose attribute of every column's name holds the block's values: an (n,) or (n, width)
        array, the same n for all, or one value for every row (a held-out flag).
    extra : dict
        Further datasets of the .h5 (:func:`~bnpvi.io.h5tree.write_tree`).
    attrs : dict
        Attributes of the .h5's root.

    Returns
    -------
    int
        The number of rows written.
    """
    path = Path(path)
    n = 0
    # no chunk cache: HDF5's grew by about half the bytes written (2,000,000 rows of 3 columns: +25 MiB)
    with new_h5(path, rdcc_nbytes=0) as f, replacing(path.with_suffix(".csv")) as csv_tmp:
        with open(csv_tmp, "w") as csv:
            tails = {c.name: (c.width,) if c.width else () for c in columns}
            data = {c.name: f.create_dataset(c.name, shape=(0, *tails[c.name]), maxshape=(None, *tails[c.name]),
                                             dtype=c.dtype, chunks=(max(1, CHUNK_VALUES // max(c.width, 1)),
                                                                    *tails[c.name]))
                    for c in columns}
            write_tree(f, extra)
            f.attrs.update(attrs)
            csv.write(",".join(header) + "\n")
            fmt = [c.fmt for c in columns for _ in range(max(c.width, 1))]
            for block in blocks:
                m = np.shape(getattr(block, columns[0].name))[0]
                values = [np.broadcast_to(getattr(block, c.name), (m, *tails[c.name])) for c in columns]
                for c, value in zip(columns, values):
                    data[c.name].resize((n + m, *tails[c.name]))
                    data[c.name][n:] = value
                for lo in range(0, m, CSV_ROWS):  # mixed dtypes: rows as objects, a bounded number at a time
                    np.savetxt(csv, np.column_stack([value[lo:lo + CSV_ROWS].astype(object) for value in values]),
                               fmt=fmt, delimiter=",")
                n += m
                check_written(f)
    return n
