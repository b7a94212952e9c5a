"""assignments.h5 and assignments.csv: every atom's cluster, written block by block.

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

import h5py
import numpy as np

from bnpvi.io.h5tree import replacing

COLUMNS = ("index", "cluster", "probability")
DTYPES = {"index": np.int64, "cluster": np.int64, "probability": np.float64, "heldout": np.int8}
FORMATS = {"index": "%d", "cluster": "%d", "probability": "%.17g", "heldout": "%d"}


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
    path = Path(path)
    columns = COLUMNS + (("heldout",) if heldout else ())
    n = 0
    with replacing(path) as h5_tmp, replacing(path.with_suffix(".csv")) as csv_tmp:
        with h5py.File(h5_tmp, "w") as f, open(csv_tmp, "w") as csv:
            data = {name: f.create_dataset(name, shape=(0,), maxshape=(None,), dtype=DTYPES[name], chunks=(65536,))
                    for name in columns}
            f.create_dataset("uids", data=np.asarray(uids, dtype=np.int64))
            f.attrs.update({"format": "bnpvi-assignments", "format_version": 1,
                            "cluster": "stable cluster id (model.h5 uids, clusters.csv uid)"})
            csv.write(",".join(columns) + "\n")
            for block in blocks:
                values = {"index": block.index, "cluster": block.cluster, "probability": block.probability,
                          "heldout": np.full(block.index.shape[0], int(block.heldout))}
                m = block.index.shape[0]
                for name in columns:
                    data[name].resize((n + m,))
                    data[name][n:] = values[name]
                np.savetxt(csv, np.column_stack([values[name].astype(object) for name in columns]),
                           fmt=[FORMATS[name] for name in columns], delimiter=",")
                n += m
    return n
