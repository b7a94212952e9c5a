"""The topic weights of a data file's documents (``bnpvi-apply`` of a topic model): OUT.h5 and OUT.csv.

Datasets of the .h5: ``index`` (N,) int64, every document's source index (its position in the
file, or the source index its held-out split recorded); ``proportions`` (N, K) float64, E[π_dk]
of every document, columns in model.h5's topic order, as the run's ``doc_topics.h5``; ``uids``
(K,) int64, the stable ids of those topics; and when the file has a held-out part ``heldout``
(N,) int8 (1 for a held-out document). Training documents come first, in file order, then the
held-out ones.

The CSV is wide, one row per document: ``index``, then one column per topic named by its stable
id (the ``topic`` of topics.csv) holding E[π_dk], then ``heldout`` when present. Both files are
written block by block and renamed at the end (:mod:`bnpvi.io.tables`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from bnpvi.io.assignments import HELDOUT, INDEX
from bnpvi.io.tables import Column, write_table


def write_topic_weights(path: Path, blocks: Iterable, uids: np.ndarray, heldout: bool) -> int:
    """``path`` (.h5) and the .csv beside it from :class:`~bnpvi.learn.assign.TopicWeights` blocks.

    Parameters
    ----------
    path : Path
        The .h5 file; the CSV is ``path`` with the suffix ``.csv``.
    blocks : iterable of TopicWeights
    uids : (K,) array_like of int
        The model's topic ids, in the order of the columns of the proportions.
    heldout : bool
        Whether to write the ``heldout`` column.

    Returns
    -------
    int
        The number of documents written.
    """
    uids = np.asarray(uids, dtype=np.int64)
    columns = [INDEX, Column("proportions", np.float64, "%.17g", uids.shape[0])] + ([HELDOUT] if heldout else [])
    header = ["index", *map(str, uids)] + (["heldout"] if heldout else [])
    return write_table(path, columns, header, blocks, {"uids": uids},
                       {"format": "bnpvi-topic-weights", "format_version": 1,
                        "proportions": "E[pi_d] of every document; column k is topic uids[k]"})
