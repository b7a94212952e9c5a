"""The built-in toy data set: 2-D points from 8 Gaussian clusters, cached as a batch file.

Seven clusters sit on a ring of radius 8 around an eighth near the origin.
Every cluster has its own elongated, rotated covariance (standard deviations
0.5-1.2 along its axes) and its own weight (0.20 down to 0.07). The clusters are
well separated (a full-covariance Gaussian mixture with 8 components recovers the
labels with ARI ~ 1), but a method must find 8 clusters of unequal size and
shape, not 8 equal round blobs. The geometry is fixed; the seed only draws the
points and their order.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bnpvi.data.store import BatchStore, write_points
from bnpvi.errors import BnpviError

TOY_NAME = "toy8"
TOY_VERSION = 1  # bump when the generator changes, so cached files are rebuilt

RING_RADIUS = 8.0
# weight, center angle on the ring in degrees (None = near the origin), axis std devs, axis rotation (degrees)
_CLUSTERS = (
    (0.20, None, (1.20, 0.60), 30.0),
    (0.16, 90.0, (1.10, 0.50), 0.0),
    (0.09, 141.4, (0.70, 0.50), 60.0),
    (0.12, 192.9, (1.20, 0.70), 120.0),
    (0.07, 244.3, (1.00, 0.60), 45.0),
    (0.14, 295.7, (0.90, 0.60), 150.0),
    (0.11, 347.1, (0.80, 0.50), 90.0),
    (0.11, 38.6, (1.00, 0.55), 10.0),
)
ORIGIN_CENTER = (0.6, -0.4)


def toy_parameters() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true mixture behind :func:`make_toy`.

    Returns
    -------
    weights : (8,) ndarray, summing to 1
    means : (8, 2) ndarray
    covs : (8, 2, 2) ndarray, symmetric positive definite
    """
    weights, means, covs = [], [], []
    for weight, angle, (s1, s2), rot in _CLUSTERS:
        if angle is None:
            mean = np.array(ORIGIN_CENTER)
        else:
            a = np.deg2rad(angle)
            mean = RING_RADIUS * np.array([np.cos(a), np.sin(a)])
        r = np.deg2rad(rot)
        R = np.array([[np.cos(r), -np.sin(r)], [np.sin(r), np.cos(r)]])
        weights.append(weight)
        means.append(mean)
        covs.append(R @ np.diag([s1**2, s2**2]) @ R.T)
    weights = np.array(weights)
    return weights / weights.sum(), np.array(means), np.array(covs)


def _cluster_sizes(n_atoms: int, weights: np.ndarray) -> np.ndarray:
    """Largest-remainder rounding of n_atoms * weights (sizes sum to n_atoms)."""
    raw = n_atoms * weights
    sizes = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - sizes), kind="stable")
    sizes[order[: n_atoms - int(sizes.sum())]] += 1
    return sizes


def make_toy(n_atoms: int = 5000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw the toy data set.

    Cluster sizes are ``n_atoms * weight`` rounded (so they do not depend on the
    seed); the rows are in random order.

    Parameters
    ----------
    n_atoms : int, default 5000
        Number of points, at least 1.
    seed : int, default 0
        Seed of the points and their order; the same seed gives the same data.

    Returns
    -------
    X : (n_atoms, 2) float64 ndarray
    labels : (n_atoms,) int64 ndarray with values in 0..7
    """
    n_atoms = _as_int(n_atoms, "n_atoms")
    if n_atoms < 1:
        raise BnpviError(f"toy data: n_atoms must be at least 1, got {n_atoms}")
    seed = _as_int(seed, "seed")
    rng = np.random.default_rng([TOY_VERSION, seed])
    weights, means, covs = toy_parameters()
    sizes = _cluster_sizes(n_atoms, weights)
    X = np.empty((n_atoms, 2))
    labels = np.empty(n_atoms, dtype=np.int64)
    start = 0
    for k, size in enumerate(sizes):
        chol = np.linalg.cholesky(covs[k])
        X[start:start + size] = means[k] + rng.standard_normal((size, 2)) @ chol.T
        labels[start:start + size] = k
        start += size
    perm = rng.permutation(n_atoms)
    return np.ascontiguousarray(X[perm]), labels[perm]


def default_cache_dir() -> Path:
    """``$BNPVI_CACHE`` if set, else ``$XDG_CACHE_HOME/bnpvi``, else ``~/.cache/bnpvi``."""
    if os.environ.get("BNPVI_CACHE"):
        return Path(os.environ["BNPVI_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "bnpvi"
    return Path.home() / ".cache" / "bnpvi"


def toy_path(n_atoms: int, seed: int, n_batches: int, cache_dir=None) -> Path:
    """Where the toy set with these parameters is cached.

    Parameters
    ----------
    n_atoms, seed, n_batches : int
    cache_dir : str or Path, optional
        Defaults to :func:`default_cache_dir`.

    Returns
    -------
    Path
        ``CACHE/toy8_n{n_atoms}_s{seed}_b{n_batches}.h5``.
    """
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    n_atoms, seed, n_batches = (_as_int(v, name) for v, name in
                                ((n_atoms, "n_atoms"), (seed, "seed"), (n_batches, "n_batches")))
    return base / f"{TOY_NAME}_n{n_atoms}_s{seed}_b{n_batches}.h5"


def _source(n_atoms: int, seed: int) -> str:
    return f"{TOY_NAME} v{TOY_VERSION} n_atoms={n_atoms} seed={seed}"


def _is_current(path: Path, n_atoms: int, seed: int, n_batches: int) -> bool:
    """True when ``path`` is a readable toy file made by this generator with these parameters."""
    if not path.is_file():
        return False
    try:
        with BatchStore.open(path) as store:
            return (store.n_atoms == n_atoms and store.D == 2 and store.n_batches == n_batches
                    and store.has_labels and store.attrs.get("source") == _source(n_atoms, seed))
    except (BnpviError, OSError):
        return False


def ensure_toy(n_atoms: int = 5000, seed: int = 0, n_batches: int = 5, cache_dir=None) -> Path:
    """Path of the cached toy batch file, writing it first if needed.

    An existing valid file is reused as it is; a missing, stale or broken one is
    (re)written atomically, so concurrent callers are safe (the last rename wins
    and all writers produce identical data).

    Parameters
    ----------
    n_atoms : int, default 5000
    seed : int, default 0
    n_batches : int, default 5
        Stored batch count (1..n_atoms); the split is not fixed.
    cache_dir : str or Path, optional
        Defaults to :func:`default_cache_dir`.

    Returns
    -------
    Path
    """
    n_atoms, seed, n_batches = (_as_int(v, name) for v, name in
                                ((n_atoms, "n_atoms"), (seed, "seed"), (n_batches, "n_batches")))
    if n_atoms < 1:
        raise BnpviError(f"toy data: n_atoms must be at least 1, got {n_atoms}")
    if not 1 <= n_batches <= n_atoms:
        raise BnpviError(f"toy data: n_batches={n_batches} must be between 1 and n_atoms={n_atoms}")
    path = toy_path(n_atoms, seed, n_batches, cache_dir)
    if _is_current(path, n_atoms, seed, n_batches):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BnpviError(f"cannot create the cache directory {path.parent}: {err.strerror or err}") from None
    X, labels = make_toy(n_atoms, seed)
    write_points(path, X, n_batches=n_batches, labels=labels, batches_fixed=False, source=_source(n_atoms, seed))
    return path


def _as_int(value, name: str) -> int:
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise BnpviError(f"toy data: {name} must be an integer, got {value!r}") from None
    if as_int != value:
        raise BnpviError(f"toy data: {name} must be an integer, got {value!r}")
    return as_int
