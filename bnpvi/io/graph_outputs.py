"""The files a graph model's run writes: memberships, communities, and two plots (Stephenson 2015 Fig. 10).

* ``memberships.h5``: ``memberships`` (N, K) E[π_i] over the model's communities, columns in the order
  of ``uids`` (the communities' stable ids), ``node_names``, and ``main`` (N,) the stable id of each
  node's largest membership (as communities.csv and ``predict`` name communities; its position is
  ``argmax`` of the node's row); the file's attrs say so;
* ``communities.csv``: uid, size (Σ_i E[π_ik], nodes' worth of membership), strength E[φ_k], and the
  names of the nodes with the largest memberships;
* ``adjacency.png``: the training adjacency matrix with the nodes ordered by main community, beside
  the model's edge-probability matrix ε + Σ_k E[π_ik] E[π_jk] (E[φ_k] − ε) in the same order, the
  axes labelled with the node names when at most ``MAX_NAMED`` nodes are drawn;
* ``precision_recall.png``: the held-out precision-recall curve of the last evaluation, with the first
  and a few in between faint (``FAINT_CURVES``), each labelled by its lap.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from bnpvi.data.writes import replacing, save_figure
from bnpvi.io.h5tree import write_atomic

TOP_NODES = 5
"""Names listed per community in communities.csv."""
MAX_DRAWN = 1000
"""At most this many nodes (evenly spaced in the plotted order) are drawn in adjacency.png."""
MAX_NAMED = 100
"""adjacency.png names the nodes on its axes when it draws at most this many."""
FAINT_CURVES = 4
"""precision_recall.png draws the last evaluation's curve and at most this many earlier ones, faint: the first
and others evenly spaced between."""


def write_memberships(path: Path, memberships: np.ndarray, names: list[str], uids: np.ndarray) -> None:
    """memberships.h5 (module docstring), written atomically."""
    uids = np.asarray(uids, dtype=np.int64)
    write_atomic(path, {"memberships": memberships, "node_names": np.array(names, dtype=object), "uids": uids,
                        "main": uids[np.argmax(memberships, axis=1)]},
                 attrs={"format": "bnpvi-memberships", "format_version": 2,
                        "memberships": "columns in the order of uids (stable community ids)",
                        "main": "stable id (uids, communities.csv uid) of each node's largest membership"})


def write_communities(path: Path, memberships: np.ndarray, strengths: np.ndarray, names: list[str],
                      uids: np.ndarray) -> None:
    """communities.csv (module docstring), written atomically."""
    with replacing(path) as tmp, open(tmp, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["uid", "size", "strength", "top_nodes"])
        for k, uid in enumerate(uids):
            top = np.argsort(-memberships[:, k], kind="stable")[:TOP_NODES]
            out.writerow([int(uid), f"{memberships[:, k].sum():.4f}", f"{strengths[k]:.6f}",
                          " ".join(names[i] for i in top)])


def node_order(memberships: np.ndarray) -> np.ndarray:
    """Nodes grouped by main community (largest community first), most devoted members first within each."""
    main = np.argmax(memberships, axis=1)
    size = np.bincount(main, minlength=memberships.shape[1])
    return np.lexsort((-memberships[np.arange(main.shape[0]), main], main, -size[main]))


def plot_adjacency(path: Path, batch, memberships: np.ndarray, strengths: np.ndarray, epsilon: float,
                   names: list[str] | None = None) -> None:
    """Adjacency matrix and edge-probability matrix side by side (module docstring); ``batch`` is the whole graph,
    ``names`` the node names (the axes name the nodes when at most ``MAX_NAMED`` are drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = node_order(memberships)
    if order.shape[0] > MAX_DRAWN:
        order = order[np.linspace(0, order.shape[0] - 1, MAX_DRAWN).astype(int)]
    rank = np.full(batch.n_nodes, -1)
    rank[order] = np.arange(order.shape[0])
    rows = np.repeat(np.arange(batch.n_nodes), np.diff(batch.indptr))
    adjacency = np.zeros((order.shape[0], order.shape[0]))
    keep = (rank[rows] >= 0) & (rank[batch.indices] >= 0)
    adjacency[rank[rows[keep]], rank[batch.indices[keep]]] = 1.0
    pi = memberships[order]
    probs = epsilon + (pi * (strengths - epsilon)) @ pi.T
    named = names is not None and order.shape[0] <= MAX_NAMED
    side = 5.0 if not named else max(5.0, 0.09 * order.shape[0] + 1.5)  # room for a name per row
    fig, (left, right) = plt.subplots(1, 2, figsize=(2 * side, side))
    left.imshow(adjacency, cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
    left.set_title("training edges (nodes by main community)")
    image = right.imshow(probs, cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
    right.set_title("model edge probability")
    fig.colorbar(image, ax=right, fraction=0.046)
    if named:
        labels = [names[i] for i in order]
        for ax in (left, right):
            ax.set_xticks(np.arange(order.shape[0]), labels, rotation=90, fontsize=6)
            ax.set_yticks(np.arange(order.shape[0]), labels, fontsize=6)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def drawn_curves(n: int) -> list[int]:
    """Which of ``n`` evaluations precision_recall.png draws: the first, up to ``FAINT_CURVES`` - 1 evenly spaced
    between, and the last; in order."""
    if n <= FAINT_CURVES + 1:
        return list(range(n))
    return sorted(set(np.linspace(0, n - 1, FAINT_CURVES + 1).round().astype(int).tolist()))


def plot_precision_recall(path: Path, curves: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
    """The precision-recall curve of the last evaluation (lap, precision, recall) in full, and of the earlier ones
    :func:`drawn_curves` picks faint, lighter the earlier; each labelled by its lap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    picked = drawn_curves(len(curves))
    for n in picked:
        lap, precision, recall = curves[n]
        if n == len(curves) - 1:
            ax.plot(recall, precision, color="tab:blue", linewidth=2.0, label=f"lap {lap} (last)")
        else:
            share = n / max(len(curves) - 1, 1)  # 0 for the first evaluation
            ax.plot(recall, precision, color=str(0.8 - 0.4 * share), linewidth=1.0, label=f"lap {lap}")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title("held-out precision-recall" + (f" ({len(curves)} evaluations, {len(picked)} drawn)"
                                                if len(picked) < len(curves) else ""), fontsize=9)
    ax.legend(loc="lower left")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
