"""Stable cluster identities: every cluster keeps its id through sorting and moves."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class ClusterIds:
    """Ids of the K current clusters (position k has id ``uids[k]``) and the next free id.

    Ids are never reused within a run. A cluster edit (see ``SuffStats.remap``) maps
    new cluster i to old clusters ``sources[i]``: it keeps the id of its first source,
    and a new cluster (no source) gets a fresh id.
    """

    def __init__(self, uids, next_uid: int | None = None):
        self.uids = np.asarray(uids, dtype=np.int64).copy()
        self.next_uid = int(next_uid) if next_uid is not None else (int(self.uids.max()) + 1 if self.uids.size else 0)

    @classmethod
    def first(cls, K: int) -> "ClusterIds":
        return cls(np.arange(K, dtype=np.int64))

    def __len__(self) -> int:
        return self.uids.shape[0]

    def positions(self, uids) -> np.ndarray:
        """Current positions of the clusters with ids ``uids`` (KeyError for an unknown id)."""
        where = {int(u): k for k, u in enumerate(self.uids)}
        return np.array([where[int(u)] for u in np.atleast_1d(uids)], dtype=np.intp)

    def remap(self, sources: Sequence[Sequence[int]]) -> None:
        new = []
        for s in sources:
            if s:
                new.append(int(self.uids[s[0]]))
            else:
                new.append(self.next_uid)
                self.next_uid += 1
        self.uids = np.array(new, dtype=np.int64)

    def state(self) -> dict:
        return {"uids": self.uids.copy(), "next_uid": np.int64(self.next_uid)}

    @classmethod
    def from_state(cls, state: dict) -> "ClusterIds":
        return cls(np.asarray(state["uids"]).reshape(-1), int(state["next_uid"]))
