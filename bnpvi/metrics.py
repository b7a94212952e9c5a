"""Clustering agreement scores used to evaluate runs against known labels."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
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


def _label_array(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of integer labels, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iub":
        raise ValueError(f"{name} must hold integer labels, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def align_labels(true, est) -> np.ndarray:
    """``est`` relabelled to agree best with ``true`` (for the Hamming distance).

    The estimated labels are matched one-to-one to the true labels so that the
    total overlap (number of steps where the matched labels coincide) is largest
    (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``, on the
    contingency table); every estimated label then takes its matched true label.
    Estimated labels left without a match (more estimated than true states, or no
    overlap at all) become new labels larger than every true label, so they never
    count as agreeing. Steps whose true label is negative (unlabelled) take no part
    in the matching (Hughes 2016 thesis §6.6; Stephenson 2015).

    Parameters
    ----------
    true : (T,) array_like of int
        Reference labels; negative values mark steps that are not scored.
    est : (T,) array_like of int
        Estimated labels (e.g. Viterbi states), any integers.

    Returns
    -------
    aligned : (T,) ndarray of int64
        ``est`` under the matching, at every step (also the unscored ones).

    Raises
    ------
    ValueError
        The arrays differ in length, are not 1-D, or do not hold integers.
    """
    true = _label_array(true, "true")
    est = _label_array(est, "est")
    if true.shape != est.shape:
        raise ValueError(f"true and est differ in length: {true.shape[0]} vs {est.shape[0]}")
    scored = true >= 0
    true_ids, t = np.unique(true[scored], return_inverse=True)
    est_ids, e_all = np.unique(est, return_inverse=True)
    table = np.zeros((true_ids.size, est_ids.size), dtype=np.int64)
    np.add.at(table, (t, e_all[scored]), 1)
    target = np.full(est_ids.size, -1, dtype=np.int64)
    rows, cols = linear_sum_assignment(table, maximize=True)
    keep = table[rows, cols] > 0  # a match without overlap is no match
    target[cols[keep]] = true_ids[rows[keep]]
    unmatched = np.flatnonzero(target < 0)
    first_new = int(true.max()) + 1 if true.size else 0
    target[unmatched] = max(first_new, 0) + np.arange(unmatched.size)
    return target[e_all]


def hamming_distance(true, est) -> float:
    """Fraction of scored steps whose aligned estimated label differs from the true one.

    The estimated labels are first matched to the true ones by :func:`align_labels`
    (the one-to-one matching of largest overlap), so the distance does not depend on
    how the estimated states are numbered; 0 is a perfect segmentation. Steps whose
    true label is negative are left out of both the matching and the count (Hughes
    2016 thesis §6.6; Stephenson 2015).

    Parameters
    ----------
    true : (T,) array_like of int
        Reference labels; negative values mark steps that are not scored.
    est : (T,) array_like of int
        Estimated labels.

    Returns
    -------
    float
        In [0, 1]; NaN when no step is scored (every true label negative, or T = 0).

    Raises
    ------
    ValueError
        The arrays differ in length, are not 1-D, or do not hold integers.
    """
    aligned = align_labels(true, est)
    true = _label_array(true, "true")
    scored = true >= 0
    n = int(scored.sum())
    if n == 0:
        return float("nan")
    return float(np.count_nonzero(aligned[scored] != true[scored]) / n)
