"""Clustering agreement scores used to evaluate runs against known labels."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment


def adjusted_rand_index(labels_true, labels_pred) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985): scikit-learn's ``adjusted_rand_score``.

    Raises
    ------
    ValueError
        The label arrays differ in length or are not 1-D.
    """
    from sklearn.metrics import adjusted_rand_score  # imported here: training does not need scikit-learn

    return float(adjusted_rand_score(labels_true, labels_pred))


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
