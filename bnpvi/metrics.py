"""Clustering agreement scores used to evaluate runs against known labels."""
from __future__ import annotations

import numpy as np
from scipy.special import comb


def adjusted_rand_index(labels_true, labels_pred) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985) from the contingency table."""
    labels_true = np.asarray(labels_true)
    labels_pred = np.asarray(labels_pred)
    if labels_true.shape != labels_pred.shape:
        raise ValueError("label arrays differ in length")
    _, t = np.unique(labels_true, return_inverse=True)
    _, p = np.unique(labels_pred, return_inverse=True)
    table = np.zeros((t.max() + 1, p.max() + 1), dtype=np.int64)
    np.add.at(table, (t, p), 1)
    sum_cells = comb(table, 2).sum()
    sum_rows = comb(table.sum(axis=1), 2).sum()
    sum_cols = comb(table.sum(axis=0), 2).sum()
    expected = sum_rows * sum_cols / comb(labels_true.size, 2)
    maximum = (sum_rows + sum_cols) / 2.0
    if maximum == expected:
        return 1.0
    return float((sum_cells - expected) / (maximum - expected))
