"""SuffStats: the K-indexed bag of additive summary statistics.

Every quantity the global step and the ELBO need is a sum over atoms, so the
SuffStats of a batch can be added to or subtracted from the whole-data aggregate
(memoized VI; Hughes 2016 thesis §3.5.3), and the moves act on its clusters
(merge = add two clusters, delete = drop one, birth = append new ones, sort =
permute them).

Each field declares, in a :class:`FieldSpec`, how it behaves under those edits:

* ``axes``: its cluster axes, always leading: ``()`` for a total that is not
  indexed by cluster (e.g. ``n_atoms``), ``(0,)`` for a per-cluster array
  (counts N_k, the family's statistics S_k, entropies H_k), ``(0, 1)`` for a
  K x K table (an HMM's transition counts M_jk). Every edit acts on every
  cluster axis.
* ``pad``: what a new, empty cluster holds: ``"zeros"``, or ``"none"`` for a
  field that has no value for a cluster the batch was never summarised under
  (e.g. the log-probability sums of an HDP topic model, Hughes 2016 thesis
  §5.5.3); padding such a field is an error.
* ``merge``: how two clusters combine: ``"sum"`` (linear statistics:
  rows, and for a table also columns, are added), or ``"tracked"`` for
  non-linear terms (entropies) whose merged value cannot be derived from the
  two clusters' values and must be supplied by whoever tracked it during the
  lap.

Every edit is one operation, :meth:`SuffStats.remap`: new cluster i collects the
old clusters ``sources[i]`` (summed; an empty list is a new, empty cluster).
Reorder, remove, insert, pad and merge are remaps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class FieldSpec:
    """How one summary field behaves under cluster edits (see the module docstring)."""

    axes: tuple[int, ...] = (0,)
    pad: str = "zeros"
    merge: str = "sum"

    def __post_init__(self):
        if self.axes not in ((), (0,), (0, 1)):
            raise ValueError(f"FieldSpec axes must be (), (0,) or (0, 1), got {self.axes}")
        if self.pad not in ("zeros", "none"):
            raise ValueError(f"FieldSpec pad must be 'zeros' or 'none', got {self.pad!r}")
        if self.merge not in ("sum", "tracked"):
            raise ValueError(f"FieldSpec merge must be 'sum' or 'tracked', got {self.merge!r}")


TOTAL = FieldSpec(axes=())
"""A total over atoms that no cluster edit changes (e.g. the number of atoms)."""
PER_CLUSTER = FieldSpec()
"""A linear per-cluster statistic: zero for a new cluster, summed by a merge."""
ENTROPY = FieldSpec(merge="tracked")
"""A per-cluster entropy term: zero for a new cluster, merged value tracked during the lap."""
TABLE = FieldSpec(axes=(0, 1))
"""A linear K x K table (transition counts): rows and columns summed by a merge."""
ENTROPY_TABLE = FieldSpec(axes=(0, 1), merge="tracked")
"""A K x K table of entropy terms: the merged row and column are tracked during the lap."""


def _spec_code(spec: FieldSpec) -> str:
    return f"{len(spec.axes)}:{spec.pad}:{spec.merge}"


def _spec_from_code(code: str) -> FieldSpec:
    n_axes, pad, merge = code.split(":")
    return FieldSpec(axes=tuple(range(int(n_axes))), pad=pad, merge=merge)


class SuffStats:
    """Additive summaries of some atoms' responsibilities over K clusters.

    Parameters
    ----------
    fields : mapping of str to array_like
        The summaries; cluster axes lead (see ``specs``). Converted to float64.
    specs : mapping of str to FieldSpec
        One spec per field. Every field with cluster axes must have length K on each of them.

    Notes
    -----
    ``N`` (the counts N_k = Σ_n r_nk) is always present: every model has it.
    """

    __slots__ = ("fields", "specs", "_K")

    def __init__(self, fields: Mapping[str, np.ndarray], specs: Mapping[str, FieldSpec]):
        if set(fields) != set(specs):
            raise ValueError(f"SuffStats fields {sorted(fields)} and specs {sorted(specs)} differ")
        if "N" not in fields or specs["N"].axes != (0,):
            raise ValueError("SuffStats needs a per-cluster field 'N'")
        # C-contiguous, as a checkpoint gives them back: NumPy adds up a reduction in an order that depends on
        # the memory layout, so a resumed run would otherwise differ in the last bits
        self.fields = {name: np.asarray(fields[name], dtype=np.float64, order="C") for name in specs}
        self.specs = dict(specs)
        K = self.fields["N"].shape[0]
        for name, value in self.fields.items():
            axes = self.specs[name].axes
            if value.ndim < len(axes) or any(value.shape[a] != K for a in axes):
                raise ValueError(f"SuffStats field {name!r} has shape {value.shape}, expected K={K} on axes {axes}")
        self._K = K

    # ------------------------------------------------------------------ basics
    @classmethod
    def zeros(cls, K: int, layout: Mapping[str, tuple[tuple, FieldSpec]]) -> "SuffStats":
        """All-zero summaries for K clusters; ``layout`` maps a name to (trailing shape, spec)."""
        fields = {name: np.zeros((K,) * len(spec.axes) + tuple(shape)) for name, (shape, spec) in layout.items()}
        return cls(fields, {name: spec for name, (_, spec) in layout.items()})

    @property
    def K(self) -> int:
        return self._K

    @property
    def N(self) -> np.ndarray:
        return self.fields["N"]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    def __contains__(self, name: str) -> bool:
        return name in self.fields

    def select(self, names) -> dict[str, np.ndarray]:
        """The fields ``names`` (those present) as a plain dict (no copies)."""
        return {name: self.fields[name] for name in names if name in self.fields}

    def copy(self) -> "SuffStats":
        return SuffStats({n: v.copy() for n, v in self.fields.items()}, self.specs)

    def _check_compatible(self, other: "SuffStats") -> None:
        if self.specs != other.specs:
            raise ValueError(f"SuffStats fields differ: {sorted(self.specs)} vs {sorted(other.specs)}")
        if self.K != other.K:
            raise ValueError(f"SuffStats have different K: {self.K} vs {other.K}")

    def __add__(self, other: "SuffStats") -> "SuffStats":
        self._check_compatible(other)
        return SuffStats({n: v + other.fields[n] for n, v in self.fields.items()}, self.specs)

    def __sub__(self, other: "SuffStats") -> "SuffStats":
        self._check_compatible(other)
        return SuffStats({n: v - other.fields[n] for n, v in self.fields.items()}, self.specs)

    def scaled(self, factor: float) -> "SuffStats":
        """Every field multiplied by ``factor`` (stochastic VI's N / N_b)."""
        return SuffStats({n: v * factor for n, v in self.fields.items()}, self.specs)

    def with_fields(self, **values) -> "SuffStats":
        """A copy with the given fields replaced (same specs and shapes)."""
        fields = dict(self.fields)
        for name, value in values.items():
            if name not in fields:
                raise KeyError(f"SuffStats has no field {name!r}")
            fields[name] = value
        return SuffStats(fields, self.specs)

    # ------------------------------------------------------------ cluster edits
    def remap(self, sources: Sequence[Sequence[int]], tracked: Mapping[str, Mapping[int, object]] | None = None
              ) -> "SuffStats":
        """New cluster i gathers the old clusters ``sources[i]``, on every cluster axis.

        Parameters
        ----------
        sources : sequence of sequences of int
            For each new cluster, the old clusters it is made of: one (kept, moved),
            several (merged: "sum" fields add), or none (a new, empty cluster: "zeros"
            fields are 0; "none" fields raise). An old cluster may appear at most once.
        tracked : mapping, optional
            Values of "tracked" fields for new clusters with several sources:
            ``tracked[name][i]`` is the merged value of cluster i; for a K x K field it
            is a pair ``(row, col)`` of length-K_new arrays, the merged cluster's row and
            column (``row[i] == col[i]`` is its diagonal entry).

        Returns
        -------
        SuffStats with ``len(sources)`` clusters.
        """
        K_old = self.K
        sources = [[int(k) for k in s] for s in sources]
        used = [k for s in sources for k in s]
        if any(not 0 <= k < K_old for k in used) or len(set(used)) != len(used):
            raise ValueError(f"remap sources must name distinct clusters in 0..{K_old - 1}, got {sources}")
        K_new = len(sources)
        first = np.array([s[0] if s else 0 for s in sources], dtype=np.intp)
        fresh = np.array([not s for s in sources], dtype=bool)
        extra = [(i, s[1:]) for i, s in enumerate(sources) if len(s) > 1]
        merged = [i for i, _ in extra]
        tracked = tracked or {}
        fields = {}
        for name, value in self.fields.items():
            spec = self.specs[name]
            if fresh.any() and spec.axes and spec.pad == "none":
                raise ValueError(f"SuffStats field {name!r} cannot be padded with new clusters (pad='none')")
            out = value
            for axis in spec.axes:
                out = _gather(out, axis, first, fresh, extra)
            if spec.merge == "tracked" and merged and spec.axes:
                values = tracked.get(name, {})
                missing = [i for i in merged if i not in values]
                if missing:
                    raise ValueError(f"merging clusters needs the tracked value of field {name!r} for new cluster(s) {missing}")
                out = out.copy() if out is value else out
                for i in merged:
                    if spec.axes == (0,):
                        out[i] = values[i]
                    else:
                        row, col = (np.asarray(v, dtype=np.float64) for v in values[i])
                        if row.shape[0] != K_new or col.shape[0] != K_new:
                            raise ValueError(f"tracked row/column of {name!r} must have length {K_new}")
                        out[i, :] = row
                        out[:, i] = col
            fields[name] = out
        return SuffStats(fields, self.specs)

    def reorder(self, order) -> "SuffStats":
        """Clusters permuted so that new cluster j is old cluster ``order[j]``."""
        order = np.asarray(order, dtype=np.intp)
        if sorted(order.tolist()) != list(range(self.K)):
            raise ValueError("reorder needs a permutation of range(K)")
        return self.remap([[k] for k in order])

    def remove(self, clusters) -> "SuffStats":
        """Clusters ``clusters`` dropped; later ones shift down."""
        drop = set(int(k) for k in np.atleast_1d(clusters))
        return self.remap([[k] for k in range(self.K) if k not in drop])

    def insert(self, count: int) -> "SuffStats":
        """``count`` new, empty clusters appended at the end (births; lazy cache padding)."""
        return self.remap([[k] for k in range(self.K)] + [[] for _ in range(int(count))])

    def pad_to(self, K: int) -> "SuffStats":
        """Empty clusters appended until there are K (the same object if there already are)."""
        if K < self.K:
            raise ValueError(f"cannot pad SuffStats with K={self.K} down to {K}")
        return self.insert(K - self.K) if K > self.K else self

    def merge(self, kA: int, kB: int, tracked: Mapping[str, object] | None = None) -> "SuffStats":
        """Clusters kA < kB merged into cluster kA (Hughes 2016 thesis Eq. 4.1-4.3); kB dropped.

        ``tracked[name]`` gives each "tracked" field's merged value (for a K x K field,
        its (row, col) pair in the merged indexing, see :meth:`remap`).
        """
        if not 0 <= kA < kB < self.K:
            raise ValueError(f"merge needs 0 <= kA < kB < K, got {kA}, {kB} with K={self.K}")
        sources = [[k] for k in range(self.K) if k != kB]
        sources[kA] = [kA, kB]
        return self.remap(sources, {name: {kA: value} for name, value in (tracked or {}).items()})

    def with_clusters(self, positions, rows: "SuffStats") -> "SuffStats":
        """A copy whose clusters ``positions`` hold the clusters of ``rows`` (per-cluster fields only).

        Totals are kept. Tables (K x K fields) cannot be replaced cluster by cluster.
        """
        positions = np.asarray(positions, dtype=np.intp).reshape(-1)
        if rows.specs != self.specs or rows.K != positions.size:
            raise ValueError(f"with_clusters needs {positions.size} clusters of the same fields, got {rows!r}")
        fields = {}
        for name, value in self.fields.items():
            axes = self.specs[name].axes
            if axes == (0, 1):
                raise ValueError(f"cannot replace clusters of the table field {name!r} one by one")
            if axes == (0,) and positions.size:
                value = value.copy()
                value[positions] = rows.fields[name]
            fields[name] = value
        return SuffStats(fields, self.specs)

    # ------------------------------------------------------- serialisation
    def to_tree(self) -> dict:
        """Nested dict of arrays for HDF5 checkpoints: field values and each field's spec."""
        return {"fields": dict(self.fields),
                "specs": "\n".join(f"{name}={_spec_code(spec)}" for name, spec in self.specs.items())}

    @classmethod
    def from_tree(cls, tree: Mapping) -> "SuffStats":
        specs = dict(line.split("=", 1) for line in str(tree["specs"]).split("\n") if line)
        return cls({n: np.asarray(v) for n, v in tree["fields"].items()},
                   {n: _spec_from_code(code) for n, code in specs.items()})

    def allclose(self, other: "SuffStats", rtol=1e-9, atol=1e-9) -> bool:
        if self.specs != other.specs or self.K != other.K:
            return False
        return all(np.allclose(v, other.fields[n], rtol=rtol, atol=atol) for n, v in self.fields.items())

    def __repr__(self) -> str:
        shapes = ", ".join(f"{n}{tuple(v.shape)}" for n, v in self.fields.items())
        return f"SuffStats(K={self.K}, {shapes})"


def _gather(value: np.ndarray, axis: int, first: np.ndarray, fresh: np.ndarray, extra) -> np.ndarray:
    """``value`` with axis ``axis`` remapped: take ``first``, zero the fresh entries, add the extra sources."""
    if first.size == value.shape[axis] and not fresh.any() and not extra and np.array_equal(first, np.arange(first.size)):
        return value
    out = np.take(value, first, axis=axis)
    if fresh.any():
        index = [slice(None)] * out.ndim
        index[axis] = fresh
        out[tuple(index)] = 0.0
    for i, more in extra:
        target = [slice(None)] * out.ndim
        target[axis] = i
        source = [slice(None)] * value.ndim
        source[axis] = more
        out[tuple(target)] += value[tuple(source)].sum(axis=axis)
    return out
