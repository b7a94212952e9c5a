"""Graph files (kind ``"graph"``): a binary directed graph on N nodes, one atom per node.

The relational data of a mixed-membership stochastic blockmodel (Stephenson 2015 §3):
x_ij ∈ {0, 1} for every ordered pair (i, j), i ≠ j. Non-edges are observed zeros and are
never stored; edges are stored sparse, by source node (CSR). An undirected graph is stored
as two directed edges per edge (Stephenson 2015 §3). A batch is a contiguous range of
*source* nodes with all their outgoing pairs (Stephenson 2015 §6.2)::

    /indptr          (N+1,) int64, 0 = p_0 <= p_1 <= ... <= p_N = n_edges; node i's edges are p_i:p_{i+1}
    /indices         (n_edges,) int32, the target of each edge; strictly increasing within a row, never i
    /node_names      (N,) UTF-8 strings, the names the nodes had in the source file
    /memberships     (N, K_true) float64, optional: the true membership vectors (toy graphs)
    /heldout_pairs   group, optional: pairs (edges and non-edges) kept apart for link prediction
        src, dst     (P,) int64, the held-out pairs (one per unordered pair of an undirected graph)
        value        (P,) int8, 1 for an edge, 0 for a non-edge
        indptr       (N+1,) int64, indices (n_held,) int32: the same pairs by source node (both directions
                     of an undirected pair), the pairs every sum of the model leaves out
        attrs        fraction, seed
    root attrs       N = D = number of nodes, directed, n_edges (stored directed training edges),
                     plus the common ones (``bnpvi.data.base``); batch_offsets count nodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.base import BatchStore, chunk_1d, plain_number, split_offsets, write_batch_file
from bnpvi.data.checks import check_n_batches
from bnpvi.errors import BnpviError


@dataclass(frozen=True)
class GraphBatch:
    """Source nodes ``first:first + n_src`` of a graph with all their outgoing pairs.

    Attributes
    ----------
    n_nodes : int
        N, nodes of the whole graph (every node is a receiver).
    first : int
        The first source node.
    indptr : (n_src+1,) int64
        Row pointers of the batch's edges, from 0.
    indices : (n_edges,) int32
        Targets of the edges, increasing within a row.
    held_indptr, held_indices : like ``indptr``, ``indices``
        The batch's held-out pairs (excluded from every sum).
    """

    n_nodes: int
    first: int
    indptr: np.ndarray
    indices: np.ndarray
    held_indptr: np.ndarray
    held_indices: np.ndarray

    @property
    def n_atoms(self) -> int:
        return self.indptr.shape[0] - 1

    @property
    def n_src(self) -> int:
        return self.indptr.shape[0] - 1

    @property
    def D(self) -> int:
        return self.n_nodes

    @property
    def n_pairs(self) -> int:
        """Ordered pairs the batch's sums run over: n_src (N − 1) minus the held-out ones."""
        return self.n_src * (self.n_nodes - 1) - int(self.held_indices.shape[0])


def csr_from_pairs(src: np.ndarray, dst: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices) of the pairs (src, dst), sorted by source then target (pairs assumed unique)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    order = np.lexsort((dst, src))
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_nodes), out=indptr[1:])
    return indptr, dst[order].astype(np.int32)


class GraphStore(BatchStore, kind="graph"):
    """Reader of a graph file: batch b is source nodes ``offsets[b]:offsets[b+1]`` as a :class:`GraphBatch`.

    Attributes
    ----------
    directed : bool
    n_edges : int
        Stored directed training edges (an undirected edge counts twice).
    has_heldout : bool
    n_heldout : int
        Held-out pairs scored by link prediction (unordered for an undirected graph).
    """

    unit = "nodes"
    unit_count = "N"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._groups: tuple = (None, {})  # (file handle, {group: (row pointers, indices dataset)}), looked up once

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_groups"] = (None, {})  # h5py objects of this process's file
        return state

    @classmethod
    def _read_layout(cls, f: h5py.File, attrs: dict, fail) -> dict:
        N = attrs.get("N")
        if not isinstance(N, int) or N < 1:
            raise fail(f"has an invalid number of nodes N={N!r}")
        for name in ("indptr", "indices", "node_names"):
            if not isinstance(f.get(name), h5py.Dataset):
                raise fail(f"is missing the dataset {name!r}")
        if f["indptr"].shape != (N + 1,) or f["indptr"].dtype.kind not in "iu":
            raise fail(f"has an invalid indptr (expected ({N + 1},) integers)")
        n_edges = int(f["indices"].shape[0])
        if f["indices"].ndim != 1 or int(f["indptr"][N]) != n_edges or int(f["indptr"][0]) != 0:
            raise fail(f"has inconsistent indptr and indices ({n_edges} edges)")
        if f["node_names"].shape != (N,):
            raise fail(f"has {f['node_names'].shape[0]} node names for N={N} nodes")
        held = f.get("heldout_pairs")
        n_held = 0 if held is None else int(held["src"].shape[0])
        return {"n_atoms": N, "D": N, "n_units": N, "n_edges": n_edges, "n_heldout": n_held,
                "directed": bool(attrs.get("directed", True))}

    # --------------------------------------------------------------- sizes
    @property
    def directed(self) -> bool:
        return self._layout["directed"]

    @property
    def n_edges(self) -> int:
        return self._layout["n_edges"]

    # ----------------------------------------------------------------- I/O
    def _rows(self, group: str, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows lo:hi of the CSR group ``group`` ("" for the training edges); its row pointers (N+1 integers) and
        its indices dataset are looked up once per open file (an h5py lookup costs more than a small read)."""
        f = self._handle()
        if self._groups[0] is not f:
            self._groups = (f, {})
        found = self._groups[1].get(group)
        if found is None:
            node = f[group] if group else f
            found = self._groups[1][group] = (np.asarray(node["indptr"][()], dtype=np.int64), node["indices"])
        pointers, dataset = found
        ptr = pointers[lo:hi + 1]
        idx = np.asarray(dataset[int(ptr[0]):int(ptr[-1])], dtype=np.int32)
        return ptr - ptr[0], idx

    def _read(self, lo: int, hi: int) -> GraphBatch:
        indptr, indices = self._rows("", lo, hi)
        if self.has_heldout:
            held_ptr, held_idx = self._rows("heldout_pairs", lo, hi)
        else:
            held_ptr, held_idx = np.zeros(hi - lo + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return GraphBatch(self.n_atoms, lo, indptr, indices, held_ptr, held_idx)

    def read_all(self) -> GraphBatch:
        """Every node as one batch."""
        return self._read(0, self.n_atoms)

    def heldout_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, value) of the held-out pairs (empty arrays when there are none)."""
        if not self.has_heldout:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0, dtype=np.int8)
        g = self._handle()["heldout_pairs"]
        return (np.asarray(g["src"][()], dtype=np.int64), np.asarray(g["dst"][()], dtype=np.int64),
                np.asarray(g["value"][()], dtype=np.int8))

    def node_names(self) -> list[str]:
        return [str(name) for name in self._handle()["node_names"].asstr()[()]]

    def memberships(self) -> np.ndarray | None:
        """The true (N, K_true) membership vectors of a generated graph, or None."""
        f = self._handle()
        return np.asarray(f["memberships"][()]) if "memberships" in f else None

    def _blocks(self, limit: int) -> Iterator[tuple[int, GraphBatch]]:
        ptr = np.asarray(self._handle()["indptr"][()], dtype=np.int64)
        lo = 0
        while lo < self.n_atoms:
            hi = int(np.searchsorted(ptr, ptr[lo] + limit, side="right")) - 1
            hi = min(self.n_atoms, max(hi, lo + 1))
            yield lo, self._read(lo, hi)
            lo = hi

    def _scan(self, check: bool, moments: bool) -> None:
        """Every row's targets in range, increasing (no duplicate) and not the source itself (``check``).
        Graphs have no moments: returns None."""
        if check:
            for lo, batch in self.iter_blocks():
                for name, ptr, idx in (("edge", batch.indptr, batch.indices),
                                       ("held-out pair", batch.held_indptr, batch.held_indices)):
                    self._check_rows(lo, name, ptr, idx)
        return None

    def _check_rows(self, lo: int, name: str, ptr: np.ndarray, idx: np.ndarray) -> None:
        rows = np.repeat(np.arange(lo, lo + ptr.shape[0] - 1), np.diff(ptr))
        bad = (idx < 0) | (idx >= self.n_atoms) | (idx == rows)
        inner = np.ones(idx.shape[0], dtype=bool)
        inner[ptr[:-1][np.diff(ptr) > 0]] = False  # the first entry of each row
        bad[1:] |= inner[1:] & (np.diff(idx.astype(np.int64)) <= 0)
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise BnpviError(f"data file {self._path} has a bad {name} {int(rows[e])} -> {int(idx[e])} "
                             "(out of range, a self-loop, or not increasing within its row)")

    def _info_extras(self) -> dict:
        out = {"directed": self.directed, "edges": self.n_edges if self.directed else self.n_edges // 2,
               "heldout": self.n_heldout, "heldout_fraction": None, "heldout_seed": None}
        if self.has_heldout:
            attrs = self._handle()["heldout_pairs"].attrs
            out["heldout_fraction"] = plain_number(attrs.get("fraction"))
            out["heldout_seed"] = plain_number(attrs.get("seed"))
            out["heldout_edges"] = int(np.sum(self._handle()["heldout_pairs"]["value"][()]))
        return out

    def _describe(self) -> str:
        return f"N={self.n_atoms} nodes, {self.n_edges} directed edges"


def write_graph(path, src: np.ndarray, dst: np.ndarray, n_nodes: int, node_names, directed: bool,
                n_batches: int | None = None, heldout: tuple | None = None, labels=None, memberships=None,
                source: str = "", fraction: float | None = None, seed: int | None = None) -> Path:
    """Write a graph file atomically from its training edges (both directions of an undirected edge given).

    Parameters
    ----------
    src, dst : (E,) int
        Training edges, unique, no self-loop.
    heldout : (h_src, h_dst, h_value) or None
        Held-out pairs (one per unordered pair when undirected).
    labels : (N,) int, optional
        True main community of every node.
    memberships : (N, K_true) float, optional
    """
    path = Path(path)
    fixed = n_batches is not None
    B = check_n_batches(1 if n_batches is None else n_batches, n_nodes, f"cannot write {path}", f"N={n_nodes}")
    offsets = split_offsets(n_nodes, B)
    indptr, indices = csr_from_pairs(src, dst, n_nodes)

    def datasets(f: h5py.File) -> dict:
        f.create_dataset("indptr", data=indptr)
        f.create_dataset("indices", data=indices, chunks=(chunk_1d(max(1, indices.shape[0]), 4),), maxshape=(None,))
        f.create_dataset("node_names", data=np.array([str(n) for n in node_names], dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        if memberships is not None:
            f.create_dataset("memberships", data=np.asarray(memberships, dtype=np.float64))
        if heldout is not None and len(heldout[0]):
            h_src, h_dst, h_val = (np.asarray(a) for a in heldout)
            g = f.create_group("heldout_pairs")
            g.create_dataset("src", data=h_src.astype(np.int64))
            g.create_dataset("dst", data=h_dst.astype(np.int64))
            g.create_dataset("value", data=h_val.astype(np.int8))
            both_src = h_src if directed else np.concatenate([h_src, h_dst])
            both_dst = h_dst if directed else np.concatenate([h_dst, h_src])
            h_ptr, h_idx = csr_from_pairs(both_src, both_dst, n_nodes)
            g.create_dataset("indptr", data=h_ptr)
            g.create_dataset("indices", data=h_idx)
            if fraction is not None:
                g.attrs["fraction"] = float(fraction)
            if seed is not None:
                g.attrs["seed"] = np.int64(seed)
        return {}

    return write_batch_file(path, f"cannot write {path}", "graph", n_nodes, n_nodes, offsets,
                            None if labels is None else np.asarray(labels, dtype=np.int64), fixed, source, datasets,
                            attrs={"directed": bool(directed), "n_edges": np.int64(indices.shape[0])})
