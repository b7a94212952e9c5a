"""SuffStats: the K-indexed bag of additive summary statistics (DESIGN.md).

Every quantity the global step and the ELBO need is a sum over atoms, so a
SuffStats of a batch can be added to or subtracted from the whole-data
aggregate (memoized VI, spec 01 §4.3), and the moves act on its rows (merge =
add two rows, delete = drop a row, birth = insert rows, sort = permute rows).

Fields (arrays whose leading axis is the cluster index k) always include

* ``N`` : (K,) expected counts N_k = Σ_n r_nk
* ``H`` : (K,) entropy summaries H_k = −Σ_n r_nk ln r_nk   (spec 01 Eq. 3.51)

plus the observation family's statistics (e.g. ``Sx`` (K, D), ``Sxx`` (K, D, D)).
Scalars are additive totals that are not indexed by cluster (``n_atoms``).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np


class SuffStats:
    """Additive per-cluster summaries; see the module docstring."""

    __slots__ = ("fields", "scalars")

    def __init__(self, fields: Mapping[str, np.ndarray], scalars: Mapping[str, float] | None = None):
        fields = {name: np.asarray(value, dtype=np.float64) for name, value in fields.items()}
        if "N" not in fields or "H" not in fields:
            raise ValueError("SuffStats needs at least the fields 'N' and 'H'")
        K = fields["N"].shape[0]
        for name, value in fields.items():
            if value.ndim == 0 or value.shape[0] != K:
                raise ValueError(f"SuffStats field {name!r} has shape {value.shape}, expected leading axis K={K}")
        self.fields = fields
        self.scalars = {name: float(value) for name, value in (scalars or {}).items()}

    # ------------------------------------------------------------------ basics
    @classmethod
    def zeros(cls, K: int, shapes: Mapping[str, tuple], scalar_names=("n_atoms",)) -> "SuffStats":
        """All-zero stats for K clusters; ``shapes`` maps obs field names to trailing shapes."""
        fields = {"N": np.zeros(K), "H": np.zeros(K)}
        fields.update({name: np.zeros((K, *shape)) for name, shape in shapes.items()})
        return cls(fields, {name: 0.0 for name in scalar_names})

    @property
    def K(self) -> int:
        return self.fields["N"].shape[0]

    @property
    def N(self) -> np.ndarray:
        return self.fields["N"]

    @property
    def H(self) -> np.ndarray:
        return self.fields["H"]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    def obs_fields(self) -> dict[str, np.ndarray]:
        """The observation family's fields (everything except N and H)."""
        return {name: value for name, value in self.fields.items() if name not in ("N", "H")}

    def copy(self) -> "SuffStats":
        return SuffStats({n: v.copy() for n, v in self.fields.items()}, dict(self.scalars))

    def _map(self, fn) -> "SuffStats":
        return SuffStats({n: fn(v) for n, v in self.fields.items()}, dict(self.scalars))

    def _check_compatible(self, other: "SuffStats") -> None:
        if self.fields.keys() != other.fields.keys():
            raise ValueError(f"SuffStats fields differ: {sorted(self.fields)} vs {sorted(other.fields)}")
        if self.K != other.K:
            raise ValueError(f"SuffStats have different K: {self.K} vs {other.K}")

    def __add__(self, other: "SuffStats") -> "SuffStats":
        self._check_compatible(other)
        scalars = {n: self.scalars.get(n, 0.0) + other.scalars.get(n, 0.0) for n in self.scalars.keys() | other.scalars.keys()}
        return SuffStats({n: v + other.fields[n] for n, v in self.fields.items()}, scalars)

    def __sub__(self, other: "SuffStats") -> "SuffStats":
        self._check_compatible(other)
        scalars = {n: self.scalars.get(n, 0.0) - other.scalars.get(n, 0.0) for n in self.scalars.keys() | other.scalars.keys()}
        return SuffStats({n: v - other.fields[n] for n, v in self.fields.items()}, scalars)

    def scaled(self, factor: float) -> "SuffStats":
        """Every field and scalar multiplied by ``factor`` (stochastic VI's N/N_b)."""
        out = self._map(lambda v: v * factor)
        out.scalars = {n: v * factor for n, v in self.scalars.items()}
        return out

    # ------------------------------------------------------------- row moves
    def reorder(self, order) -> "SuffStats":
        """Rows permuted so that new row j is old row ``order[j]``."""
        order = np.asarray(order, dtype=np.intp)
        if sorted(order.tolist()) != list(range(self.K)):
            raise ValueError("reorder needs a permutation of range(K)")
        return self._map(lambda v: v[order])

    def remove_rows(self, rows) -> "SuffStats":
        """Rows ``rows`` dropped; later rows shift down."""
        keep = np.setdiff1d(np.arange(self.K), np.asarray(rows, dtype=np.intp))
        return self._map(lambda v: v[keep])

    def insert_zero_rows(self, count: int) -> "SuffStats":
        """``count`` empty clusters appended at the end (births; lazy cache padding)."""
        return self._map(lambda v: np.concatenate([v, np.zeros((count, *v.shape[1:]))]))

    def pad_to(self, K: int) -> "SuffStats":
        """Zero rows appended until there are K rows (no-op if already K)."""
        if K < self.K:
            raise ValueError(f"cannot pad SuffStats with K={self.K} down to {K}")
        return self.insert_zero_rows(K - self.K) if K > self.K else self

    def merge_rows(self, kA: int, kB: int, merged_entropy: float) -> "SuffStats":
        """Clusters kA < kB merged into row kA (spec 01 Eq. 4.1-4.3), row kB dropped.

        Linear fields are added; the merged entropy −Σ_n (r_nA + r_nB) ln(r_nA + r_nB)
        cannot be derived from H_A and H_B, so the caller passes it.
        """
        if not 0 <= kA < kB < self.K:
            raise ValueError(f"merge_rows needs 0 <= kA < kB < K, got {kA}, {kB} with K={self.K}")
        fields = {}
        for name, value in self.fields.items():
            value = value.copy()
            value[kA] = merged_entropy if name == "H" else value[kA] + value[kB]
            fields[name] = np.delete(value, kB, axis=0)
        return SuffStats(fields, dict(self.scalars))

    # ------------------------------------------------------- serialisation
    def to_tree(self) -> dict:
        """Nested dict of arrays ({'fields': {...}, 'scalars': {...}}) for HDF5 checkpoints."""
        return {"fields": dict(self.fields), "scalars": {n: np.float64(v) for n, v in self.scalars.items()}}

    @classmethod
    def from_tree(cls, tree: Mapping) -> "SuffStats":
        return cls({n: np.asarray(v) for n, v in tree["fields"].items()},
                   {n: float(np.asarray(v)) for n, v in tree.get("scalars", {}).items()})

    def allclose(self, other: "SuffStats", rtol=1e-9, atol=1e-9) -> bool:
        if self.fields.keys() != other.fields.keys() or self.K != other.K:
            return False
        return all(np.allclose(v, other.fields[n], rtol=rtol, atol=atol) for n, v in self.fields.items())

    def __repr__(self) -> str:
        shapes = ", ".join(f"{n}{tuple(v.shape)}" for n, v in self.fields.items())
        return f"SuffStats(K={self.K}, {shapes}, scalars={self.scalars})"
