"""Held-out link prediction for graph models (Stephenson 2015 §7.2 "Methods", Eq. 29-30).

The predictive probability of an edge from i to j is

    E_q[x_ij] = E[π_i]ᵀ E[Φ] E[π_j] = ε + Σ_{k≤K} E[π_ik] E[π_jk] (E[φ_k] − ε),

with E[Φ] = diag(E[φ_k]) + ε off the diagonal, E[φ_k] = τ_k1 / (τ_k1 + τ_k0), and the HDP's mass
beyond K treated as non-assortative (it meets nothing but ε). The held-out pairs of a graph file
(its edges and as many non-edges, ``bnpvi-data convert --graph --heldout F``) are scored by the
area under the ROC curve, the average precision, and the precision-recall curve of Eq. 30.
Deterministic; it draws nothing from the run's generator.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.io.graph_outputs import plot_adjacency, plot_precision_recall, write_communities, write_memberships
from bnpvi.metrics import average_precision, normalized_mutual_info, precision_recall, roc_auc

CURVE_POINTS = 200
"""At most this many points of each precision-recall curve are kept (evenly spaced in the thresholds)."""


def community_strengths(globals_) -> np.ndarray:
    """E[φ_k] (K,) of the community-strength family's posterior."""
    lam1, lam0 = globals_.obs["lam1"][:, 0], globals_.obs["lam0"][:, 0]
    return lam1 / (lam1 + lam0)


def link_probabilities(model, globals_, src, dst) -> np.ndarray:
    """E_q[x_ij] of the pairs (src, dst) (module docstring)."""
    pi = model.alloc.memberships(globals_.alloc)
    eps = model.alloc.epsilon
    weights = community_strengths(globals_) - eps
    src, dst = np.asarray(src, dtype=np.intp), np.asarray(dst, dtype=np.intp)
    return eps + np.einsum("pk,pk,k->p", pi[src], pi[dst], weights)


def evaluate_links(model, globals_, store) -> dict:
    """AUC, average precision and the precision-recall curve of the held-out pairs of ``store``.

    Returns
    -------
    dict
        ``heldout_auc``, ``heldout_ap``, ``heldout_pairs``, and ``precision``, ``recall`` (at most
        ``CURVE_POINTS`` points each).
    """
    src, dst, value = store.heldout_pairs()
    scores = link_probabilities(model, globals_, src, dst)
    precision, recall, _ = precision_recall(value, scores)
    keep = np.unique(np.linspace(0, precision.shape[0] - 1, min(CURVE_POINTS, precision.shape[0])).astype(int))
    return {"heldout_auc": roc_auc(value, scores), "heldout_ap": average_precision(value, scores),
            "heldout_pairs": int(value.shape[0]), "precision": precision[keep], "recall": recall[keep]}


def write_graph_outputs(run_dir: Path, model, globals_, store, uids: np.ndarray, pr_curves, plots: bool) -> dict:
    """Every file of the module docstring for the final globals; returns what summary.json adds: the
    held-out AUC and average precision (when the file has held-out pairs) and the NMI of the main community
    against the true labels (when it has them)."""
    run_dir = Path(run_dir)
    memberships = model.alloc.memberships(globals_.alloc)
    strengths = community_strengths(globals_)
    names = store.node_names()
    write_memberships(run_dir / "memberships.h5", memberships, names, uids)
    write_communities(run_dir / "communities.csv", memberships, strengths, names, uids)
    out = {}
    labels = store.labels()
    if labels is not None:
        out["nmi"] = normalized_mutual_info(labels, np.argmax(memberships, axis=1))
    if pr_curves is not None:
        links = evaluate_links(model, globals_, store)
        out.update({key: links[key] for key in ("heldout_auc", "heldout_ap", "heldout_pairs")})
    if plots:
        plot_adjacency(run_dir / "adjacency.png", store.read_all(), memberships, strengths, model.alloc.epsilon,
                       names)
        if pr_curves:
            plot_precision_recall(run_dir / "precision_recall.png", pr_curves)
    return out
