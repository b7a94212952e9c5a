"""The built-in toy data sets, generated once and cached as batch files.

Points (:func:`make_toy`, :func:`ensure_toy`): 2-D points from 8 Gaussian
clusters. Seven clusters sit on a ring of radius 8 around an eighth near the
origin. Every cluster has its own elongated, rotated covariance (standard
deviations 0.5-1.2 along its axes) and its own weight (0.20 down to 0.07). The
clusters are well separated (a full-covariance Gaussian mixture with 8
components recovers the labels with ARI ~ 1), but a method must find 8 clusters
of unequal size and shape, not 8 equal round blobs. The geometry is fixed; the
seed only draws the points and their order.

Sequences (:func:`make_toy_sequences`, :func:`ensure_toy_sequences`): 2-D
sequences from a sticky 8-state hidden Markov model. The states emit unit-
covariance Gaussians with means far apart ((0, 20), (20, 0), (-30, -30), ...);
a state persists with probability 0.999 per step and otherwise moves on to the
next state (i + 1 mod 8). Sequence s starts in state s mod 8, so every state is
visited from the first step on; the seed draws the state paths and the noise.

Documents (:func:`ensure_toy_bars`): the bars corpus of :mod:`bnpvi.data.bars`, 10 bars on a
10 x 10 grid, 1-3 bars per document, with 10 % of the documents held out.

Auto-regressive sequences (:func:`make_toy_ar_sequences`, :func:`ensure_toy_sequences` with
``ar=True``): 2-D sequences from a sticky 8-state AR-HMM, x_t = A_k x_{t−1} + e_t with
e_t ~ N(0, σ_k² I). Each A_k is a damped rotation r_k R(θ_k) with its own radius and angle
(all |r_k| < 1, so every state is stable), e.g. a slow spiral, a fast spin, a sign flip; a
state persists with probability 0.99 per step and otherwise moves to one of the others at
random. The states differ only in their dynamics: every one has mean 0.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bnpvi.data.bars import bars_batch_file
from bnpvi.data.store import BatchStore, write_points, write_sequences
from bnpvi.errors import BnpviError

TOY_NAME = "toy8"
TOY_VERSION = 1  # bump when the generator changes, so cached files are rebuilt
TOY_SEQ_NAME = "toyseq8"
TOY_SEQ_VERSION = 1  # the same, for the sequences

# state means of the toy sequences, and the probability that a state persists for one more step
SEQ_MEANS = ((0.0, 20.0), (20.0, 0.0), (-30.0, -30.0), (30.0, -30.0), (-20.0, 0.0), (0.0, -20.0), (30.0, 30.0),
             (-30.0, 30.0))
SEQ_STAY = 0.999

TOY_BARS_NAME = "toybars10"
TOY_BARS_VERSION = 1
TOY_AR_NAME = "toyar8"
TOY_AR_VERSION = 3
# AR toy: radius r_k and angle θ_k (degrees) of each state's A_k = r_k R(θ_k), and its noise std σ_k
AR_DYNAMICS = ((0.99, 4.0, 0.5), (0.9, -50.0, 0.5), (0.7, 140.0, 1.0), (0.95, 180.0, 0.3),
               (0.8, 50.0, 0.8), (0.9, -120.0, 0.4), (0.5, 0.0, 2.0), (0.97, 95.0, 0.6))
AR_STAY = 0.99

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
    n_atoms = _positive(n_atoms, "n_atoms")
    rng = np.random.default_rng([TOY_VERSION, _as_int(seed, "seed")])
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


def toy_sequence_parameters() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true HMM behind :func:`make_toy_sequences` (start states aside).

    Returns
    -------
    trans : (8, 8) ndarray
        ``trans[i, i] = 0.999``, ``trans[i, (i + 1) % 8] = 0.001``.
    means : (8, 2) ndarray
    covs : (8, 2, 2) ndarray, identity matrices
    """
    K = len(SEQ_MEANS)
    trans = SEQ_STAY * np.eye(K) + (1.0 - SEQ_STAY) * np.roll(np.eye(K), 1, axis=1)
    return trans, np.array(SEQ_MEANS), np.tile(np.eye(2), (K, 1, 1))


def sample_hmm(n_seqs: int, length: int, start_prob, trans, means, covs,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n_seqs`` sequences of ``length`` steps from a Gaussian hidden Markov model.

    The state paths are drawn one time step at a time for all sequences at once,
    then every emission in one go.

    Parameters
    ----------
    n_seqs, length : int
        At least 1 each.
    start_prob : array_like, shape (K,) or (n_seqs, K)
        Distribution of the first state, shared or one row per sequence.
    trans : array_like, shape (K, K)
        ``trans[i, j]`` = P(next state j | state i); rows sum to 1.
    means : array_like, shape (K, D)
    covs : array_like, shape (K, D, D)
        Symmetric positive definite emission covariances.
    rng : numpy.random.Generator

    Returns
    -------
    X : (n_seqs * length, D) float64 ndarray
        Sequence s is rows ``s * length:(s + 1) * length``.
    seq_range : (n_seqs + 1,) int64 ndarray
        ``0, length, 2 * length, ...``.
    labels : (n_seqs * length,) int64 ndarray
        The state of every step.
    """
    n_seqs, length = _positive(n_seqs, "n_seqs"), _positive(length, "length")
    trans, means, covs = np.asarray(trans, float), np.asarray(means, float), np.asarray(covs, float)
    K, D = means.shape
    if trans.shape != (K, K) or covs.shape != (K, D, D):
        raise BnpviError(f"toy data: inconsistent HMM parameters (trans {trans.shape}, means {means.shape}, "
                         f"covs {covs.shape})")
    labels = _state_paths(n_seqs, length, start_prob, trans, rng).reshape(-1)
    noise = rng.standard_normal((labels.shape[0], D))
    X = np.empty_like(noise)
    for k, chol in enumerate(np.linalg.cholesky(covs)):
        rows = labels == k
        X[rows] = means[k] + noise[rows] @ chol.T
    return X, np.arange(0, n_seqs * length + 1, length, dtype=np.int64), labels


def sample_ar_hmm(n_seqs: int, length: int, start_prob, trans, A, covs,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n_seqs`` sequences of ``length`` steps from a first-order auto-regressive HMM.

    x_t = A_{z_t} x_{t−1} + e_t, e_t ~ N(0, covs[z_t]) (Hughes 2016 thesis Eq. 6.3), from x_0 ~ N(0, I)
    before each sequence's first step. The state paths are drawn as in :func:`sample_hmm`, then
    x_0 and the noise; the recursion runs over time for all sequences at once.

    Parameters
    ----------
    n_seqs, length, start_prob, trans, rng
        As for :func:`sample_hmm`.
    A : array_like, shape (K, D, D)
        Regression matrix of each state.
    covs : array_like, shape (K, D, D)
        Symmetric positive definite noise covariances.

    Returns
    -------
    X : (n_seqs * length, D) float64 ndarray
        Sequence s is rows ``s * length:(s + 1) * length``.
    seq_range : (n_seqs + 1,) int64 ndarray
    labels : (n_seqs * length,) int64 ndarray
        The state of every step.
    Xprev : (n_seqs * length, D) float64 ndarray
        x_{t−1} of every step (x_0 for the first step of a sequence).
    """
    n_seqs, length = _positive(n_seqs, "n_seqs"), _positive(length, "length")
    trans, A, covs = np.asarray(trans, float), np.asarray(A, float), np.asarray(covs, float)
    K, D = A.shape[:2]
    if trans.shape != (K, K) or A.shape != (K, D, D) or covs.shape != (K, D, D):
        raise BnpviError(f"toy data: inconsistent AR-HMM parameters (trans {trans.shape}, A {A.shape}, "
                         f"covs {covs.shape})")
    z = _state_paths(n_seqs, length, start_prob, trans, rng)
    chols = np.linalg.cholesky(covs)
    path = np.empty((n_seqs, length + 1, D))
    path[:, 0] = rng.standard_normal((n_seqs, D))
    noise = rng.standard_normal((n_seqs, length, D))
    for t in range(length):
        k = z[:, t]
        path[:, t + 1] = np.einsum("sde,se->sd", A[k], path[:, t]) + np.einsum("sde,se->sd", chols[k], noise[:, t])
    seq_range = np.arange(0, n_seqs * length + 1, length, dtype=np.int64)
    return path[:, 1:].reshape(-1, D), seq_range, z.reshape(-1), path[:, :-1].reshape(-1, D)


def _state_paths(n_seqs: int, length: int, start_prob, trans: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n_seqs, length) state paths of a Markov chain, drawn one time step at a time for all sequences at once."""
    start = np.broadcast_to(np.asarray(start_prob, float), (n_seqs, trans.shape[0]))
    start_cdf, trans_cdf = np.cumsum(start, axis=1), np.cumsum(trans, axis=1)
    z = np.empty((n_seqs, length), dtype=np.int64)
    z[:, 0] = _draw(start_cdf, rng)
    for t in range(1, length):
        z[:, t] = _draw(trans_cdf[z[:, t - 1]], rng)
    return z


def _draw(cdf: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One category per row of the cumulative probabilities ``cdf`` (n, K)."""
    u = rng.random(cdf.shape[0])
    return np.minimum((u[:, None] >= cdf).sum(axis=1), cdf.shape[1] - 1)


def make_toy_sequences(n_seqs: int = 32, length: int = 1000,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw the toy sequences (module docstring): sequence s starts in state s mod 8.

    Parameters
    ----------
    n_seqs : int, default 32
    length : int, default 1000
        Time steps per sequence.
    seed : int, default 0
        The same seed gives the same data.

    Returns
    -------
    X : (n_seqs * length, 2) float64 ndarray
    seq_range : (n_seqs + 1,) int64 ndarray
    labels : (n_seqs * length,) int64 ndarray with values in 0..7
    """
    n_seqs = _positive(n_seqs, "n_seqs")
    rng = np.random.default_rng([TOY_SEQ_VERSION, _as_int(seed, "seed")])
    trans, means, covs = toy_sequence_parameters()
    start = np.eye(len(means))[np.arange(n_seqs) % len(means)]
    return sample_hmm(n_seqs, length, start, trans, means, covs, rng)


def toy_ar_parameters() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true AR-HMM behind :func:`make_toy_ar_sequences` (start states aside).

    Returns
    -------
    trans : (8, 8) ndarray
        ``trans[i, i] = 0.99``, the rest of each row spread evenly over the other states.
    A : (8, 2, 2) ndarray
        ``A[k] = r_k R(θ_k)``, spectral radius r_k < 1.
    covs : (8, 2, 2) ndarray
        σ_k² I.
    """
    K = len(AR_DYNAMICS)
    trans = AR_STAY * np.eye(K) + (1.0 - AR_STAY) / (K - 1) * (1.0 - np.eye(K))
    A, covs = [], []
    for radius, angle, std in AR_DYNAMICS:
        a = np.deg2rad(angle)
        A.append(radius * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]))
        covs.append(std**2 * np.eye(2))
    return trans, np.array(A), np.array(covs)


def make_toy_ar_sequences(n_seqs: int = 32, length: int = 1000,
                          seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw the toy auto-regressive sequences (module docstring): sequence s starts in state s mod 8.

    Parameters
    ----------
    n_seqs : int, default 32
    length : int, default 1000
        Time steps per sequence.
    seed : int, default 0
        The same seed gives the same data.

    Returns
    -------
    X : (n_seqs * length, 2) float64 ndarray
    seq_range : (n_seqs + 1,) int64 ndarray
    labels : (n_seqs * length,) int64 ndarray with values in 0..7
    Xprev : (n_seqs * length, 2) float64 ndarray
        x_{t−1} of every step (a draw of N(0, I) before each sequence's first step).
    """
    n_seqs = _positive(n_seqs, "n_seqs")
    rng = np.random.default_rng([TOY_AR_VERSION, _as_int(seed, "seed")])
    trans, A, covs = toy_ar_parameters()
    start = np.eye(len(A))[np.arange(n_seqs) % len(A)]
    return sample_ar_hmm(n_seqs, length, start, trans, A, covs, rng)


def default_cache_dir() -> Path:
    """``$BNPVI_CACHE`` if set, else ``$XDG_CACHE_HOME/bnpvi``, else ``~/.cache/bnpvi``."""
    if os.environ.get("BNPVI_CACHE"):
        return Path(os.environ["BNPVI_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "bnpvi"
    return Path.home() / ".cache" / "bnpvi"


def _cache_base(cache_dir) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()


def toy_path(n_atoms: int, seed: int, n_batches: int, cache_dir=None) -> Path:
    """Where the toy points with these parameters are cached.

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
    n_atoms, seed, n_batches = _as_int(n_atoms, "n_atoms"), _as_int(seed, "seed"), _as_int(n_batches, "n_batches")
    return _cache_base(cache_dir) / f"{TOY_NAME}_n{n_atoms}_s{seed}_b{n_batches}.h5"


def toy_sequences_path(n_seqs: int, length: int, seed: int, n_batches: int, cache_dir=None, ar: bool = False) -> Path:
    """Where the toy sequences (auto-regressive ones if ``ar``) with these parameters are cached.

    Returns
    -------
    Path
        ``CACHE/toyseq8_n{n_seqs}_t{length}_s{seed}_b{n_batches}.h5`` (``toyar8_...`` if ``ar``).
    """
    n_seqs, length = _as_int(n_seqs, "n_seqs"), _as_int(length, "length")
    seed, n_batches = _as_int(seed, "seed"), _as_int(n_batches, "n_batches")
    name = TOY_AR_NAME if ar else TOY_SEQ_NAME
    return _cache_base(cache_dir) / f"{name}_n{n_seqs}_t{length}_s{seed}_b{n_batches}.h5"


def ensure_toy(n_atoms: int = 5000, seed: int = 0, n_batches: int = 5, cache_dir=None) -> Path:
    """Path of the cached toy points, writing them first if needed.

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
    n_atoms, seed = _positive(n_atoms, "n_atoms"), _as_int(seed, "seed")
    n_batches = _batch_count(n_batches, n_atoms, "n_atoms")
    source = f"{TOY_NAME} v{TOY_VERSION} n_atoms={n_atoms} seed={seed}"

    def write(path: Path) -> None:
        X, labels = make_toy(n_atoms, seed)
        write_points(path, X, n_batches=n_batches, labels=labels, batches_fixed=False, source=source)

    return _ensure_cached(toy_path(n_atoms, seed, n_batches, cache_dir), "points", source, n_atoms, n_batches, write)


def ensure_toy_sequences(n_seqs: int = 32, length: int = 1000, seed: int = 0, n_batches: int = 8,
                         cache_dir=None, ar: bool = False) -> Path:
    """Path of the cached toy sequences (with their true states as labels), writing them first if needed.

    Cached exactly like :func:`ensure_toy`. With ``ar`` the auto-regressive toy sequences,
    stored with their Xprev.

    Parameters
    ----------
    n_seqs : int, default 32
    length : int, default 1000
        Time steps per sequence.
    seed : int, default 0
    n_batches : int, default 8
        Stored batch count (1..n_seqs, whole sequences per batch); the split is not fixed.
    cache_dir : str or Path, optional
        Defaults to :func:`default_cache_dir`.
    ar : bool, default False
        The auto-regressive toy sequences instead.

    Returns
    -------
    Path
    """
    n_seqs, length, seed = _positive(n_seqs, "n_seqs"), _positive(length, "length"), _as_int(seed, "seed")
    n_batches = _batch_count(n_batches, n_seqs, "n_seqs")
    name, version = (TOY_AR_NAME, TOY_AR_VERSION) if ar else (TOY_SEQ_NAME, TOY_SEQ_VERSION)
    source = f"{name} v{version} n_seqs={n_seqs} length={length} seed={seed}"

    def write(path: Path) -> None:
        if ar:
            X, seq_range, labels, Xprev = make_toy_ar_sequences(n_seqs, length, seed)
        else:
            (X, seq_range, labels), Xprev = make_toy_sequences(n_seqs, length, seed), None
        write_sequences(path, X, seq_range, n_batches=n_batches, labels=labels, batches_fixed=False, source=source,
                        Xprev=Xprev)

    path = toy_sequences_path(n_seqs, length, seed, n_batches, cache_dir, ar)
    return _ensure_cached(path, "seq", source, n_seqs * length, n_batches, write)


def ensure_toy_bars(n_docs: int = 2000, seed: int = 0, n_batches: int = 4, cache_dir=None) -> Path:
    """Path of the cached toy bag-of-words corpus, writing it first if needed (cached like :func:`ensure_toy`).

    The bars corpus of :func:`bnpvi.data.bars.bars_batch_file` (Griffiths & Steyvers 2004): 10 bars
    (5 rows, 5 columns) on a 10 x 10 pixel grid as topics, 1-3 bars per document, 100 tokens
    each; 10 % of the documents are held out for evaluation; the true topics are stored.

    Parameters
    ----------
    n_docs : int, default 2000
        Documents generated (training and held out).
    seed : int, default 0
    n_batches : int, default 4
        Batches of the training documents (fixed).
    cache_dir : str or Path, optional
        Defaults to :func:`default_cache_dir`.
    """
    n_docs, seed = _positive(n_docs, "n_docs"), _as_int(seed, "seed")
    n_train = n_docs - max(1, min(n_docs - 1, int(np.floor(0.1 * n_docs + 0.5))))
    n_batches = _batch_count(n_batches, n_train, "training documents")
    path = _cache_base(cache_dir) / f"{TOY_BARS_NAME}_n{n_docs}_s{seed}_b{n_batches}.h5"
    source = f"{TOY_BARS_NAME} v{TOY_BARS_VERSION} n_docs={n_docs} seed={seed}"

    def write(target: Path) -> None:
        bars_batch_file(target, n_docs, side=10, n_bars=10, bars_per_doc=(1, 3), tokens_per_doc=100,
                        seed=seed, n_batches=n_batches, heldout=0.1, heldout_seed=seed, source=source)

    return _ensure_cached(path, "bow", source, None, n_batches, write, D=100, labelled=False)


def _ensure_cached(path: Path, kind: str, source: str, n_atoms, n_batches: int, write, D: int = 2,
                   labelled: bool = True) -> Path:
    """``path`` if it holds the toy set made from ``source``, else ``write(path)`` first."""
    if _is_current(path, kind, source, n_atoms, n_batches, D, labelled):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BnpviError(f"cannot create the cache directory {path.parent}: {err.strerror or err}") from None
    write(path)
    return path


def _is_current(path: Path, kind: str, source: str, n_atoms, n_batches: int, D: int = 2,
                labelled: bool = True) -> bool:
    """True when ``path`` is a readable toy file made by this generator with these parameters
    (``n_atoms`` None: any number of atoms)."""
    if not path.is_file():
        return False
    try:
        with BatchStore.open(path) as store:
            return (store.kind == kind and n_atoms in (None, store.n_atoms) and store.D == D
                    and store.n_batches == n_batches and (store.has_labels or not labelled)
                    and store.attrs.get("source") == source)
    except (BnpviError, OSError):
        return False


def _batch_count(n_batches, n_units: int, name: str) -> int:
    n_batches = _as_int(n_batches, "n_batches")
    if not 1 <= n_batches <= n_units:
        raise BnpviError(f"toy data: n_batches={n_batches} must be between 1 and {name}={n_units}")
    return n_batches


def _positive(value, name: str) -> int:
    as_int = _as_int(value, name)
    if as_int < 1:
        raise BnpviError(f"toy data: {name} must be at least 1, got {as_int}")
    return as_int


def _as_int(value, name: str) -> int:
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise BnpviError(f"toy data: {name} must be an integer, got {value!r}") from None
    if as_int != value:
        raise BnpviError(f"toy data: {name} must be an integer, got {value!r}")
    return as_int
