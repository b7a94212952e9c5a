"""Data in another order, read a block at a time: :class:`Reordered` views the leading axis of an array
through a map from new positions to old ones, so a shuffle or a held-out split is an index array, never a
copy of the data.

Units are rows (:func:`take_units`: a point, a label) or ranges of entries (:func:`take_ranges`: a document's
word entries, a sequence's time steps). Views nest (the held-out split, then the shuffle of the rest), and
whatever can be sliced and indexed by an integer array - a NumPy array, a
:class:`~bnpvi.data.mapped.MappedArray`, another view - can be viewed.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from bnpvi.data.mapped import RowReader


class Reordered(RowReader):
    """The array ``source`` with entry ``i`` (along the leading axis) read from ``source[positions(i)]``.

    ``view[lo:hi]`` and ``view[index]`` return new arrays; ``shape`` and ``dtype`` are those of the view.

    Parameters
    ----------
    source : array-like
        Sliceable and indexable by a 1-D integer array along its leading axis.
    positions : callable
        ``positions(index)`` -> the old positions of the new positions ``index`` (int64 arrays).
    length : int
        Entries of the view.
    """

    def __init__(self, source, positions: Callable[[np.ndarray], np.ndarray], length: int):
        self.source = source
        self.positions = positions
        self.shape = (int(length),) + tuple(source.shape[1:])
        self.dtype = source.dtype

    def _take(self, index: np.ndarray) -> np.ndarray:
        return np.asarray(self.source[self.positions(index)])


def take_units(source, order: np.ndarray) -> Reordered:
    """The rows ``order`` of ``source``, in that order (a permutation, or a subset)."""
    order = np.asarray(order, dtype=np.int64)
    return Reordered(source, lambda index: order[index], order.shape[0])


def permuted_ranges(ranges: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The boundaries of whole ranges (documents, sequences) taken in the order ``order``."""
    lengths = np.diff(np.asarray(ranges, dtype=np.int64))[np.asarray(order, dtype=np.int64)]
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def take_ranges(source, ranges: np.ndarray, order: np.ndarray) -> Reordered:
    """The entries of the ranges ``order`` of ``source`` (range r is entries ``ranges[r]:ranges[r+1]``), each
    range kept whole, in that order; its boundaries are :func:`permuted_ranges`."""
    ranges = np.asarray(ranges, dtype=np.int64)
    order = np.asarray(order, dtype=np.int64)
    new_ranges = permuted_ranges(ranges, order)

    def positions(index: np.ndarray) -> np.ndarray:
        unit = np.searchsorted(new_ranges, index, side="right") - 1
        return ranges[order[unit]] + (index - new_ranges[unit])

    return Reordered(source, positions, int(new_ranges[-1]))
