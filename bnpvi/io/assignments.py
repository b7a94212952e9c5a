"""assignments.h5 and assignments.csv: every atom's cluster, written block by block (:mod:`bnpvi.io.tables`).

Columns (datasets of the .h5, all of one length): ``index`` (int64, the atom's source index:
the row of the data file, or the source row recorded by its held-out split), ``cluster``
(int64, the stable cluster id: the ``uids`` of model.h5 and clusters.csv, not a position),
``probability`` (float64, the responsibility r_nk of that cluster, the largest of the atom),
and when the data file has a held-out part ``heldout`` (0 for training atoms, 1 for held-out
ones). The .h5 also holds ``uids``, the ids of the model's clusters in model.h5's order.
Both files are written to temporary files and renamed at the end, so an error never leaves
a partial file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from bnpvi.io.tables import Column, write_table

INDEX = Column("index", np.int64, "%d")
"""An atom's source index (also the first column of the topic weights, :mod:`bnpvi.io.topic_weights`)."""
HELDOUT = Column("heldout", np.int8, "%d")
"""1 for a held-out atom, 0 for a training one (only in tables of files with a held-out part)."""
COLUMNS = (INDEX, Column("cluster", np.int64, "%d"), Column("probability", np.float64, "%.17g"))


def write_assignments(path: Path, blocks: Iterable, uids: np.ndarray, heldout: bool) -> int:
    """``path`` (.h5) and the .csv beside it from :class:`~bnpvi.learn.assign.Assignments` blocks.

    Parameters
    ----------
    path : Path
        The .h5 file; the CSV is ``path`` with the suffix ``.csv``.
    blocks : iterable of Assignments
    uids : (K,) array_like of int
        The model's cluster ids, stored in the .h5.
    heldout : bool
        Whether to write the ``heldout`` column.

    Returns
    -------
    int
        The number of rows written.
    """
    columns = list(COLUMNS) + ([HELDOUT] if heldout else [])
    return write_table(path, columns, [c.name for c in columns], blocks, {"uids": np.asarray(uids, dtype=np.int64)},
                       {"format": "bnpvi-assignments", "format_version": 1,
                        "cluster": "stable cluster id (model.h5 uids, clusters.csv uid)"})
