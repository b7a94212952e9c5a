"""Read a graph (an edge list, or a scipy sparse adjacency matrix) and write a graph file
(:mod:`bnpvi.data.graph`); ``bnpvi-data convert SRC DST --graph``.

Edge lists: text (UTF-8 unless ``encoding`` names another) with one edge ``src dst`` per line,
separated by a comma, a tab or spaces; lines starting with ``#`` (and blank lines) are skipped, so a
header must be commented out. Node names are any strings (integers are names too); nodes are
numbered in order of first appearance and the names are kept in the file. An optional third
column is a weight, which must be 0 (the line is no edge) or 1: the model is binary (a 0 line
names its nodes but adds no edge).

Sparse matrices (``.npz`` written by ``scipy.sparse.save_npz``): a square N x N adjacency matrix
whose stored values are all 1 (0 entries are dropped); nodes are named ``0 .. N-1``.

Choices (one-line ``BnpviError`` for each refusal): a self-loop is dropped with a warning (the
model has no pair (i, i)); a repeated edge is refused (directed: the same ordered pair twice;
undirected: the same line twice; an undirected edge listed in both directions, as in SNAP's
files, is one edge); an empty graph, a line with one name, and weights other than 0/1 are refused;
a graph needs at least 2 nodes.

Held-out pairs (``heldout=F``): a random fraction F of the edges (unordered pairs when undirected)
and as many non-edges drawn uniformly among the pairs that are no edge, with
``numpy.random.default_rng(seed)``; the evaluation protocol of Stephenson 2015 §7.2.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

from bnpvi.data.graph import write_graph
from bnpvi.data.heldout import check_fraction, check_seed
from bnpvi.data.sources import check_output, line_chunks
from bnpvi.errors import BnpviError

_log = logging.getLogger("bnpvi.data")
_SPLIT = re.compile(r"[,\t ]+")
# Lines of an edge list read at once.
_CHUNK_LINES = 2**16


def read_edge_list(path: Path, encoding: str = "utf-8") -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(src, dst, names) of an edge-list file in ``encoding``, nodes numbered by first appearance (module
    docstring)."""
    ids: dict[str, int] = {}
    src, dst = [], []
    line_no = 0
    for lines in line_chunks(path, _CHUNK_LINES, encoding):
        for line in lines:
            line_no += 1
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = _SPLIT.split(line)
            if len(fields) < 2:
                raise BnpviError(f"{path}: line {line_no} holds one node name {fields[0]!r}; an edge needs two "
                                 "(src dst)")
            if len(fields) > 3:
                raise BnpviError(f"{path}: line {line_no} has {len(fields)} fields; expected src dst [weight]")
            pair = [ids.setdefault(name, len(ids)) for name in fields[:2]]  # a node of a 0 line is a node
            if len(fields) == 3:
                weight = fields[2]
                if weight not in ("0", "1", "0.0", "1.0"):
                    raise BnpviError(f"{path}: line {line_no} has weight {weight!r}; the model is binary, "
                                     "weights must be 0 or 1")
                if float(weight) == 0.0:
                    continue
            src.append(pair[0])
            dst.append(pair[1])
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), list(ids)


def read_sparse(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(src, dst, names) of a scipy sparse adjacency matrix saved with ``save_npz``."""
    import scipy.sparse as sp

    try:
        A = sp.load_npz(path).tocoo()
    except (ValueError, OSError, KeyError) as err:
        raise BnpviError(f"{path} is not a scipy sparse matrix (scipy.sparse.save_npz): {err}") from None
    if A.shape[0] != A.shape[1]:
        raise BnpviError(f"{path}: an adjacency matrix must be square, got shape {A.shape}")
    A.sum_duplicates()
    values = np.asarray(A.data, dtype=np.float64)
    keep = values != 0
    if np.any(values[keep] != 1.0):
        bad = int(np.flatnonzero(keep & (values != 1.0))[0])
        raise BnpviError(f"{path}: entry ({int(A.row[bad])}, {int(A.col[bad])}) is {values[bad]!r}; the model is "
                         "binary, entries must be 0 or 1")
    return (A.row[keep].astype(np.int64), A.col[keep].astype(np.int64), [str(i) for i in range(A.shape[0])])


def clean_edges(src: np.ndarray, dst: np.ndarray, names: list[str], directed: bool, where: str) -> tuple:
    """The edges as pairs (i < j once per edge when undirected), self-loops dropped, repeats refused."""
    n_nodes = len(names)
    loops = src == dst
    if loops.any():
        _log.warning("%s: dropped %d self-loop(s) (the model has no pair (i, i)), e.g. node %s", where,
                     int(loops.sum()), names[int(src[loops][0])])
        src, dst = src[~loops], dst[~loops]
    if n_nodes < 2:
        raise BnpviError(f"{where}: the graph has {n_nodes} node(s); need at least 2")
    if src.size == 0:
        raise BnpviError(f"{where}: the graph has no edge")
    key = src * n_nodes + dst
    uniq, counts = np.unique(key, return_counts=True)
    if np.any(counts > 1):
        k = int(uniq[np.flatnonzero(counts > 1)[0]])
        raise BnpviError(f"{where}: the edge {names[k // n_nodes]} -> {names[k % n_nodes]} appears more than once")
    if not directed:
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        pairs = np.unique(lo * n_nodes + hi)
        src, dst = pairs // n_nodes, pairs % n_nodes
    return src, dst


def split_heldout(src: np.ndarray, dst: np.ndarray, n_nodes: int, directed: bool, fraction: float,
                  seed: int) -> tuple:
    """Training edges and held-out pairs: round(F E) of the E edges (at least 1, at most E − 1) and as many
    non-edges drawn uniformly (unordered pairs when undirected). Returns (src, dst, (h_src, h_dst, h_value))."""
    rng = np.random.default_rng(seed)
    E = src.shape[0]
    n_held = min(max(1, int(round(fraction * E))), E - 1)
    if n_held < 1:
        raise BnpviError("--heldout needs a graph with at least 2 edges")
    chosen = rng.permutation(E)[:n_held]
    mask = np.zeros(E, dtype=bool)
    mask[chosen] = True
    edge_keys = set((src * n_nodes + dst).tolist())
    n_pairs = n_nodes * (n_nodes - 1) // (1 if directed else 2)
    if n_pairs - E < n_held:
        raise BnpviError(f"--heldout {fraction}: the graph has only {n_pairs - E} non-edges to hold out beside "
                         f"{n_held} edges")
    found: dict[int, None] = {}
    while len(found) < n_held:
        a = rng.integers(0, n_nodes, size=2 * (n_held - len(found)) + 8)
        b = rng.integers(0, n_nodes, size=a.shape[0])
        if not directed:
            a, b = np.minimum(a, b), np.maximum(a, b)
        for k in (a * n_nodes + b)[a != b].tolist():
            if k not in edge_keys and k not in found and len(found) < n_held:
                found[k] = None
    non = np.fromiter(found, dtype=np.int64)
    h_src = np.concatenate([src[mask], non // n_nodes])
    h_dst = np.concatenate([dst[mask], non % n_nodes])
    h_val = np.concatenate([np.ones(n_held, dtype=np.int8), np.zeros(n_held, dtype=np.int8)])
    return src[~mask], dst[~mask], (h_src, h_dst, h_val)


def convert_graph(src, dst, n_batches: int | None = None, undirected: bool = False, heldout=None,
                  heldout_seed: int = 0, overwrite: bool = False, encoding: str = "utf-8") -> Path:
    """Read the edge list (text in ``encoding``) or sparse matrix ``src`` and write the graph file ``dst``, a name
    ending in ``.h5`` (module docstring)."""
    src, dst = Path(src).expanduser(), Path(dst).expanduser()
    check_output(src, dst, overwrite)
    if not src.is_file():
        raise BnpviError(f"input file not found: {src}")
    if heldout is not None:
        heldout = check_fraction(heldout)
        heldout_seed = check_seed(heldout_seed, "the held-out seed")
    e_src, e_dst, names = read_sparse(src) if src.suffix.lower() == ".npz" else read_edge_list(src, encoding)
    directed = not undirected
    e_src, e_dst = clean_edges(e_src, e_dst, names, directed, str(src))
    held = None
    if heldout is not None:
        e_src, e_dst, held = split_heldout(e_src, e_dst, len(names), directed, heldout, heldout_seed)
    if not directed:
        e_src, e_dst = np.concatenate([e_src, e_dst]), np.concatenate([e_dst, e_src])
    return write_graph(dst, e_src, e_dst, len(names), names, directed, n_batches=n_batches, heldout=held,
                       source=str(src), fraction=heldout, seed=heldout_seed if heldout is not None else None)
