"""Rejection history, so that stuck proposals back off instead of retrying forever."""
from __future__ import annotations

import numpy as np


class FailureLog:
    """Rejections per key (a cluster id, or a pair of ids) with the sizes seen at the last one.

    A key is *blocked* once it has failed ``max_fails`` times, until one of its
    clusters' sizes moves by more than ``retry_change`` (relative) from the sizes
    at the last failure (Hughes 2016 thesis §4.2.4, §4.3.4).
    """

    def __init__(self):
        self.entries: dict[tuple, tuple[int, tuple]] = {}

    @staticmethod
    def _key(key) -> tuple:
        return tuple(int(k) for k in np.atleast_1d(key))

    def record(self, key, accepted: bool, sizes) -> None:
        key = self._key(key)
        if accepted:
            self.entries.pop(key, None)
        else:
            count = self.entries.get(key, (0, ()))[0]
            self.entries[key] = (count + 1, tuple(float(s) for s in sizes))

    def blocked(self, key, sizes, max_fails: int, retry_change: float) -> bool:
        entry = self.entries.get(self._key(key))
        if entry is None:
            return False
        count, last = entry
        changed = any(abs(s - l) > retry_change * max(l, 1.0) for s, l in zip(sizes, last))
        return count >= max_fails and not changed

    def failures(self, key) -> int:
        return self.entries.get(self._key(key), (0, ()))[0]

    def to_tree(self) -> dict:
        keys = list(self.entries)
        width = max((len(k) for k in keys), default=1)
        pad = lambda t, fill: list(t) + [fill] * (width - len(t))  # noqa: E731
        return {"keys": np.array([pad(k, -1) for k in keys], dtype=np.int64).reshape(len(keys), width),
                "counts": np.array([self.entries[k][0] for k in keys], dtype=np.int64),
                "sizes": np.array([pad(self.entries[k][1], np.nan) for k in keys]).reshape(len(keys), width)}

    @classmethod
    def from_tree(cls, tree: dict) -> "FailureLog":
        log = cls()
        for key, count, sizes in zip(tree["keys"], tree["counts"], tree["sizes"]):
            key = tuple(int(k) for k in key if k >= 0)
            log.entries[key] = (int(count), tuple(float(s) for s in sizes[: len(key)]))
        return log
