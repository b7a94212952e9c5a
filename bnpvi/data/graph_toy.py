"""Generated graphs from the assortative mixed-membership stochastic blockmodel (Stephenson 2015 §3, §4.4).

:func:`make_ammsb_graph` draws π_i ~ Dir(a, ..., a) per node, and for every ordered pair (i, j)
labels s ~ Cat(π_i), r ~ Cat(π_j); x_ij ~ Bern(φ_k) when s = r = k, else Bern(ε) (Eq. 2). Drawing
the labels pair by pair is O(N²); instead the edge probability of a pair given the memberships,
p_ij = ε + Σ_k π_ik π_jk (φ_k − ε), is the same law for x_ij, and is computed in blocks of rows.

Degree correction (for heavy-tailed degrees): with ``activity_exponent`` = a > 1 every node gets an
activity θ_i from a Pareto law of exponent a (density ∝ θ^{−a} on θ ≥ 1), and the probability of a
pair becomes min(1, p_ij θ_i θ_j / mean(θ)²), so the expected density is roughly unchanged while the
degrees follow the activities (Karrer & Newman 2011's degree-corrected blockmodel, applied to the
aMMSB). Undirected graphs draw each unordered pair once.

:func:`ensure_toy_graph` is ``data=toy`` for graph models: the source's toy setting (Stephenson 2015
§7.2): N = 200 nodes, 6 communities, Dir(0.05) memberships, 20 batches of 10 nodes, 10 % of the edges
and as many non-edges held out. φ and ε of the generator are not stated there; we use φ_k evenly
spaced in [0.5, 0.9] and ε = 1e-4 (undirected).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.data.graph import GraphStore, write_graph
from bnpvi.data.graph_in import split_heldout
from bnpvi.data.toy import default_cache_dir
from bnpvi.errors import BnpviError

TOY_GRAPH_NAME = "toygraph6"
TOY_GRAPH_VERSION = 1


def make_ammsb_graph(n_nodes: int, n_communities: int, concentration: float = 0.05, strengths=None,
                     epsilon: float = 1e-4, directed: bool = False, seed: int = 0,
                     activity_exponent: float | None = None, block: int = 512):
    """Draw a graph from the aMMSB (module docstring).

    Returns
    -------
    src, dst : (E,) int64
        The edges (i < j once per edge when undirected).
    memberships : (N, K) float64
        The true π_i.
    """
    rng = np.random.default_rng(seed)
    K = int(n_communities)
    phi = np.linspace(0.5, 0.9, K) if strengths is None else np.asarray(strengths, dtype=np.float64)
    pi = rng.dirichlet(np.full(K, float(concentration)), size=n_nodes)
    act = np.ones(n_nodes)
    if activity_exponent is not None:
        act = (1.0 - rng.random(n_nodes)) ** (-1.0 / (float(activity_exponent) - 1.0))  # Pareto, θ ≥ 1
        act /= act.mean()
    weighted = pi * (phi - epsilon)
    src, dst = [], []
    for lo in range(0, n_nodes, block):
        hi = min(n_nodes, lo + block)
        p = epsilon + weighted[lo:hi] @ pi.T
        p = np.minimum(1.0, p * act[lo:hi, None] * act[None, :])
        x = rng.random(p.shape) < p
        rows, cols = np.nonzero(x)
        rows = rows + lo
        keep = (rows < cols) if not directed else (rows != cols)
        src.append(rows[keep])
        dst.append(cols[keep])
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64), pi


def write_ammsb_graph(path, n_nodes: int, n_communities: int, n_batches: int, seed: int = 0,
                      heldout: float | None = 0.1, directed: bool = False, **options) -> Path:
    """Draw a graph (:func:`make_ammsb_graph`) and write it as a graph file with its true memberships and
    main communities (labels), holding out ``heldout`` of its edges and as many non-edges (seed ``seed``)."""
    src, dst, pi = make_ammsb_graph(n_nodes, n_communities, directed=directed, seed=seed, **options)
    if src.size < 2:
        raise BnpviError(f"the generated graph has {src.size} edge(s); raise the strengths or the node count")
    held = None
    if heldout:
        src, dst, held = split_heldout(src, dst, n_nodes, directed, heldout, seed)
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return write_graph(path, src, dst, n_nodes, [str(i) for i in range(n_nodes)], directed, n_batches=n_batches,
                       heldout=held, labels=np.argmax(pi, axis=1), memberships=pi,
                       source=f"aMMSB toy graph N={n_nodes} K={n_communities} seed={seed}", fraction=heldout,
                       seed=seed if heldout else None)


def ensure_toy_graph(n_nodes: int = 200, seed: int = 0, n_batches: int = 20, cache_dir=None) -> Path:
    """The cached toy graph file of ``data=toy`` for graph models (module docstring), written on first use."""
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"{TOY_GRAPH_NAME}_v{TOY_GRAPH_VERSION}_n{n_nodes}_s{seed}_b{n_batches}.h5"
    if path.exists():
        try:
            with GraphStore.open(path):
                return path
        except BnpviError:
            pass
    return write_ammsb_graph(path, n_nodes, 6, n_batches, seed=seed)
