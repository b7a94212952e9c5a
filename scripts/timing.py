"""Timing helper shared by the benchmark scripts (run them as ``python scripts/bench_*.py``)."""
from __future__ import annotations

import time

import numpy as np


def best_of(fn, repeats: int):
    """The best wall time of ``repeats`` calls of ``fn`` (time.perf_counter), and the last call's result."""
    best, result = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result
