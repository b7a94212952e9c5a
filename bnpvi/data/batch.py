"""Batches: the unit of data every local step works on."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PointBatch:
    """A batch of independent data atoms (one row each).

    Attributes
    ----------
    X : ndarray of shape (N, D), float64, C-contiguous
        The observations x_n.
    start : int
        Index of the first row in the whole data set (rows are contiguous).
    """

    X: np.ndarray
    start: int = 0

    @property
    def n_atoms(self) -> int:
        return self.X.shape[0]

    @property
    def D(self) -> int:
        return self.X.shape[1]
