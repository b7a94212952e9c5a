"""Scores of a run: agreement of clusters with known labels, and the coherence of topics."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import scipy.sparse as sp


def adjusted_rand_index(labels_true, labels_pred) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985), bit for bit scikit-learn's ``adjusted_rand_score``: the same
    integer pair counts of the contingency table and the same formula, without importing scikit-learn (1.5 s,
    which every run with labels would pay at its end).

    Raises
    ------
    ValueError
        The label arrays differ in length or are not 1-D.
    """
    true, pred = np.asarray(labels_true), np.asarray(labels_pred)
    for a, name in ((true, "labels_true"), (pred, "labels_pred")):
        if a.ndim != 1:
            raise ValueError(f"{name} must be 1-D: shape is {a.shape}")
    if true.shape != pred.shape:
        raise ValueError(f"labels_true and labels_pred differ in length: {true.shape[0]} vs {pred.shape[0]}")
    n = np.int64(true.shape[0])
    _, t = np.unique(true, return_inverse=True)
    k_ids, k = np.unique(pred, return_inverse=True)
    n_c, n_k = np.bincount(t.ravel()), np.bincount(k.ravel())
    cells, cell_counts = np.unique(t.ravel().astype(np.int64) * k_ids.size + k.ravel(), return_counts=True)
    rows, cols = cells // max(k_ids.size, 1), cells % max(k_ids.size, 1)
    return _ari_of_cells(n, cell_counts.astype(np.int64), n_c[rows], n_k[cols])


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
    true_ids, table, e_all, first_new = _contingency(true, est)
    target = np.full(table.shape[1], -1, dtype=np.int64)
    from scipy.optimize import linear_sum_assignment  # here: every command imports this module

    rows, cols = linear_sum_assignment(table, maximize=True)
    keep = table[rows, cols] > 0  # a match without overlap is no match
    target[cols[keep]] = true_ids[rows[keep]]
    return _with_new_labels(target, first_new)[e_all]


def _contingency(true, est) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The distinct scored true labels (C,), the (C, E) table of steps per (true, estimated) label over the
    scored steps, each step's estimated label as an index 0..E-1, and the first label above every true one.

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
    return true_ids, table, e_all, max(int(true.max()) + 1 if true.size else 0, 0)


def _with_new_labels(target: np.ndarray, first_new: int) -> np.ndarray:
    """``target`` with its entries of -1 (estimated labels without a match) numbered ``first_new``, ``first_new``
    + 1, ..., so that they never agree with a true label."""
    unmatched = np.flatnonzero(target < 0)
    target[unmatched] = first_new + np.arange(unmatched.size)
    return target


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
    return hamming_of_counts(_contingency(true, est)[1])


def many_to_one_labels(true, est) -> np.ndarray:
    """``est`` relabelled many-to-one: every estimated label takes the true label it overlaps most.

    For estimated label e, its target is argmax_c |{t : est_t = e, true_t = c}| over the scored steps
    (true label c ≥ 0; ties go to the smaller c), so several estimated labels may share one true label:
    a true state split into many pure estimated states is a perfect segmentation under this map. An
    estimated label that overlaps no scored step becomes a new label larger than every true label, so it
    never counts as agreeing. Unlike :func:`align_labels` (one-to-one), the map favours more estimated
    labels (each step its own label scores 0), so read it with their number.

    Parameters
    ----------
    true : (T,) array_like of int
        Reference labels; negative values mark steps that are not scored.
    est : (T,) array_like of int
        Estimated labels, any integers.

    Returns
    -------
    mapped : (T,) ndarray of int64
        ``est`` under the map, at every step (also the unscored ones).

    Raises
    ------
    ValueError
        The arrays differ in length, are not 1-D, or do not hold integers.
    """
    true_ids, table, e_all, first_new = _contingency(true, est)
    target = np.full(table.shape[1], -1, dtype=np.int64)
    if true_ids.size:
        overlaps = table.max(axis=0) > 0
        target[overlaps] = true_ids[np.argmax(table, axis=0)[overlaps]]
    return _with_new_labels(target, first_new)[e_all]


def hamming_many_to_one(true, est) -> float:
    """Fraction of scored steps whose estimated label, mapped many-to-one (:func:`many_to_one_labels`: each
    estimated label to the true label it overlaps most), differs from the true one.

    H_m2o = (1 / T_s) Σ_{t scored} [m(est_t) ≠ true_t], m(e) = argmax_c |{t : est_t = e, true_t = c}|,
    with T_s the scored steps (true label ≥ 0). It is at most the one-to-one :func:`hamming_distance`,
    and equal to it when no two estimated labels overlap the same true label most; it does not
    penalise a true state split into several estimated ones, so it is 0 when every step has a label of
    its own: report it with the number of estimated labels.

    Returns
    -------
    float
        In [0, 1]; NaN when no step is scored.

    Raises
    ------
    ValueError
        The arrays differ in length, are not 1-D, or do not hold integers.
    """
    return hamming_many_to_one_of_counts(_contingency(true, est)[1])


# ------------------------------------------------------------ topic coherence
def npmi_coherence(topics, documents, top_n: int = 10) -> np.ndarray:
    """Coherence of each topic: the mean normalised pointwise mutual information (NPMI) of the pairs of
    its top words, from their co-occurrence in documents.

    For words i and j, with N documents of which N_i hold i, N_j hold j and N_ij hold both,
    p_i = N_i / N and p_ij = N_ij / N, and (Bouma 2009)

        NPMI(i, j) = ln(p_ij / (p_i p_j)) / (−ln p_ij),

    which runs from −1 (never together) through 0 (independent) to 1 (always together). A topic's
    coherence is the mean over the n(n−1)/2 pairs of its n top words (Lau, Newman & Baldwin 2014;
    Röder, Both & Hinneburg 2015's C_NPMI with whole documents as the co-occurrence window, as
    Aletras & Stevenson 2013). No smoothing is added: a pair that never co-occurs (N_ij = 0) scores
    −1, the limit of NPMI as p_ij → 0, and a pair that co-occurs in every document (p_ij = 1, where
    the formula is 0/0) scores 1, complete co-occurrence.

    Document frequencies and co-occurrences are counted with sparse matrix products over the
    columns of the top words only (B^T B for the binary document x top-word matrix B, one block of
    documents at a time), so the documents may stream in blocks and nothing grows with V.

    Parameters
    ----------
    topics : (K, V) array of float, or (K, n) array of int
        Topic-word probabilities (each topic's ``top_n`` most probable words are taken, ties to the
        smaller id), or the ids of each topic's top words, most probable first.
    documents : scipy.sparse matrix (N, V), or an iterable of such blocks
        Word counts (any positive value marks a word as present); typically the training documents.
    top_n : int, default 10
        Top words per topic (at most V; with probabilities) or the first ``top_n`` given ids.

    Returns
    -------
    (K,) ndarray of float64
        NaN for a topic with fewer than two top words.
    """
    topics = np.asarray(topics)
    if topics.ndim != 2:
        raise ValueError(f"topics must be 2-D (K, V) probabilities or (K, n) word ids, got shape {topics.shape}")
    if topics.dtype.kind == "f":
        top = np.argsort(-topics, axis=1, kind="stable")[:, :top_n]
    else:
        top = topics[:, :top_n].astype(np.int64)
    K, n = top.shape
    if n < 2:
        return np.full(K, np.nan)
    words, inverse = np.unique(top, return_inverse=True)
    inverse = inverse.reshape(K, n)
    df, together, n_docs = _cooccurrence(words, [documents] if sp.issparse(documents) else documents)
    i, j = np.triu_indices(n, k=1)
    a, b = inverse[:, i], inverse[:, j]  # (K, n(n-1)/2) positions in ``words``
    n_ij = np.asarray(together[a.ravel(), b.ravel()], dtype=np.float64).reshape(a.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        npmi = np.log(n_ij * n_docs / (df[a] * df[b])) / -np.log(n_ij / n_docs)
    npmi = np.where(n_ij == 0, -1.0, np.where(n_ij == n_docs, 1.0, npmi))
    return npmi.mean(axis=1)


def _cooccurrence(words: np.ndarray, blocks: Iterable) -> tuple[np.ndarray, sp.csr_matrix, int]:
    """Document frequency of each of ``words`` (W,), the documents holding each pair (sparse W x W), and N."""
    df = np.zeros(words.shape[0])
    together = sp.csr_matrix((words.shape[0], words.shape[0]))
    n_docs = 0
    for block in blocks:
        present = sp.csr_matrix(block)[:, words]
        present.data = (present.data > 0).astype(np.float64)
        present.eliminate_zeros()
        df += np.asarray(present.sum(axis=0)).ravel()
        together = together + (present.T @ present).tocsr()
        n_docs += present.shape[0]
    if n_docs == 0:
        raise ValueError("npmi_coherence needs at least one document")
    return df, together, n_docs


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float | None:
    """The ``weights``-weighted mean of the finite ``values`` (e.g. the token-weighted coherence of topics), or
    None when no value is finite or the weights of the finite ones sum to 0."""
    values, weights = np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    finite = np.isfinite(values)
    total = float(weights[finite].sum())
    return float(np.dot(values[finite], weights[finite]) / total) if total > 0 else None


def precision_recall(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision and recall of "score ≥ t" for every distinct score t, highest first (Stephenson 2015 Eq. 30):
    precision = true positives / predicted positives, recall = true positives / positives.

    Returns
    -------
    precision, recall, thresholds : (T,) ndarrays, recall increasing
    """
    labels, scores = np.asarray(labels, dtype=bool), np.asarray(scores, dtype=np.float64)
    if labels.sum() == 0:
        raise ValueError("precision_recall needs at least one positive")
    order = np.argsort(-scores, kind="stable")
    sorted_scores, hits = scores[order], np.cumsum(labels[order])
    last = np.append(np.flatnonzero(np.diff(sorted_scores) != 0), scores.shape[0] - 1)  # end of each tie group
    predicted = last + 1.0
    return hits[last] / predicted, hits[last] / labels.sum(), sorted_scores[last]


def average_precision(labels, scores) -> float:
    """Σ_t (R_t − R_{t−1}) P_t over the thresholds of :func:`precision_recall` (scikit-learn's
    ``average_precision_score``)."""
    precision, recall, _ = precision_recall(labels, scores)
    return float(np.sum(np.diff(np.concatenate([[0.0], recall])) * precision))


def roc_auc(labels, scores) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random negative, ties
    counting one half (the Mann-Whitney statistic, from average ranks)."""
    from scipy.stats import rankdata

    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("roc_auc needs positives and negatives")
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def normalized_mutual_info(labels_true, labels_pred) -> float:
    """Normalised mutual information I(T; P) / √(H(T) H(P)) of two labellings (1 for identical partitions, 0
    for independent ones; 1 when both are a single cluster)."""
    true, pred = _label_array(labels_true, "labels_true"), _label_array(labels_pred, "labels_pred")
    _, t = np.unique(true, return_inverse=True)
    _, p = np.unique(pred, return_inverse=True)
    joint = np.zeros((t.max() + 1, p.max() + 1))
    np.add.at(joint, (t, p), 1.0)
    joint /= joint.sum()
    pt, pp = joint.sum(axis=1), joint.sum(axis=0)
    nz = joint > 0
    mi = float(np.sum(joint[nz] * np.log(joint[nz] / np.outer(pt, pp)[nz])))
    ht, hp = -float(np.sum(pt * np.log(pt))), -float(np.sum(pp * np.log(pp)))
    if ht == 0.0 or hp == 0.0:
        return 1.0 if ht == hp else 0.0
    return mi / np.sqrt(ht * hp)


# ------------------------------------------- agreement from a contingency table
# (counted a batch at a time, so that no score needs every atom's label at once)
def _ari_of_cells(n, cell_counts: np.ndarray, row_sums: np.ndarray, col_sums: np.ndarray) -> float:
    """The adjusted Rand index from the nonzero cells of a contingency table of ``n`` atoms: each cell's count,
    and the sums of its row (true label) and column (estimated label), as integers."""
    sum_squares = (cell_counts ** 2).sum()
    # the pair confusion matrix [[tn, fp], [fn, tp]] (scikit-learn's pair_confusion_matrix)
    tp = int(sum_squares - n)
    fp = int((cell_counts * col_sums).sum() - sum_squares)
    fn = int((cell_counts * row_sums).sum() - sum_squares)
    tn = int(n ** 2 - fp - fn - sum_squares)
    if fn == 0 and fp == 0:  # empty data or full agreement
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


def adjusted_rand_index_of_counts(table) -> float:
    """:func:`adjusted_rand_index` of the labelling whose (true label, estimated label) contingency table is
    ``table`` (C, E) of atom counts: the same value, bit for bit."""
    table = np.asarray(table, dtype=np.int64)
    rows, cols = np.nonzero(table)
    return _ari_of_cells(np.int64(table.sum()), table[rows, cols], table.sum(axis=1)[rows],
                         table.sum(axis=0)[cols])


def hamming_of_counts(table) -> float:
    """:func:`hamming_distance` from the (C, E) contingency table of the scored steps (true label ≥ 0, one row
    each; estimated labels in columns): 1 − (the overlap of the one-to-one matching of largest overlap) / T_s.
    NaN when the table counts no step."""
    from scipy.optimize import linear_sum_assignment  # here: every command imports this module

    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    if n == 0:
        return float("nan")
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float((n - int(table[rows, cols].sum())) / n)


def hamming_many_to_one_of_counts(table) -> float:
    """:func:`hamming_many_to_one` from the (C, E) contingency table of the scored steps: 1 − Σ_e max_c
    table[c, e] / T_s (each estimated label to the true label it overlaps most). NaN when it counts no step."""
    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    if n == 0:
        return float("nan")
    return float((n - int(table.max(axis=0).sum())) / n)
