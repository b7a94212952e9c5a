"""The files a graph model's run writes: memberships, communities, and two plots (Stephenson 2015 Fig. 10).

* ``memberships.h5``: ``memberships`` (N, K) E[π_i] over the active communities, ``node_names``,
  ``uids`` (the communities' stable ids), ``main`` (N,) the index of each node's largest membership;
* ``communities.csv``: uid, size (Σ_i E[π_ik], nodes' worth of membership), strength E[φ_k], and the
  names of the nodes with the largest memberships;
* ``adjacency.png``: the training adjacency matrix with the nodes ordered by main community, beside
  the model's edge-probability matrix ε + Σ_k E[π_ik] E[π_jk] (E[φ_k] − ε) in the same order;
* ``precision_recall.png``: the held-out precision-recall curves of the evaluations, red (early) to blue (late).
"""
from __future__ import annotations

import csv
from pathlib import Path

import h5py
import numpy as np

TOP_NODES = 5
"""Names listed per community in communities.csv."""
MAX_DRAWN = 1000
"""At most this many nodes (evenly spaced in the plotted order) are drawn in adjacency.png."""


def write_memberships(path: Path, memberships: np.ndarray, names: list[str], uids: np.ndarray) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("memberships", data=memberships)
        f.create_dataset("node_names", data=np.array(names, dtype=object), dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("uids", data=np.asarray(uids, dtype=np.int64))
        f.create_dataset("main", data=np.argmax(memberships, axis=1).astype(np.int64))


def write_communities(path: Path, memberships: np.ndarray, strengths: np.ndarray, names: list[str],
                      uids: np.ndarray) -> None:
    with open(path, "w", newline="") as fh:
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


def plot_adjacency(path: Path, batch, memberships: np.ndarray, strengths: np.ndarray, epsilon: float) -> None:
    """Adjacency matrix and edge-probability matrix side by side (module docstring); ``batch`` is the whole graph."""
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
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 5))
    left.imshow(adjacency, cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
    left.set_title("training edges (nodes by main community)")
    image = right.imshow(probs, cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
    right.set_title("model edge probability")
    fig.colorbar(image, ax=right, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_precision_recall(path: Path, curves: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
    """The precision-recall curve of every evaluation (lap, precision, recall), red (first) to blue (last)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for n, (lap, precision, recall) in enumerate(curves):
        share = n / max(len(curves) - 1, 1)
        ax.plot(recall, precision, color=(1.0 - share, 0.0, share), label=f"lap {lap}" if n in (0, len(curves) - 1)
                else None)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

