"""Whole-data moments, read in one pass over a batch file, for data-driven prior defaults."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DataMoments:
    """Whole-data moments used for data-driven prior defaults (one pass over batches).

    Attributes
    ----------
    n_atoms : int
    mean : (D,) ndarray
        Σ_n x_n / N.
    cov : (D, D) ndarray
        Σ_n (x_n − mean)(x_n − mean)ᵀ / N.
    diff_cov : (D, D) ndarray or None
        Sequences only: the covariance (1/count, centered) of the first differences
        x_t − x_{t−1} (x_t − Xprev_t when the file holds Xprev, else within each sequence),
        the default prior scale of the auto-regressive family (Stephenson 2015 App. D.3).
        None for other kinds, or when no step has a previous one.
    n_missing : int
        How many entries of the data are missing (NaN); the moments are then pairwise-complete: each entry
        over the rows that observe its columns.
    """

    n_atoms: int
    mean: np.ndarray
    cov: np.ndarray
    diff_cov: np.ndarray | None = None
    n_missing: int = 0
