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
    """

    n_atoms: int
    mean: np.ndarray
    cov: np.ndarray
