"""The bars corpus: a synthetic bag-of-words data set whose true topics can be seen (Griffiths & Steyvers 2004).

The vocabulary is the V = side² pixels of a side x side image (word id
``row * side + column``). Topic 2i is the horizontal bar in row i and topic
2i + 1 the vertical bar in column i, each uniform over its ``side`` pixels;
``noise`` adds mass spread evenly over all V words (then renormalised). A
document mixes a few bars with Dirichlet(1) proportions, so a topic model that
recovers the bars shows them as lines when its topics are drawn as images (the
set used in Hughes, Kim & Sudderth 2015 (AISTATS) and Hughes 2016 thesis Ch. 5).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from bnpvi.data.batch import WordCountBatch
from bnpvi.data.bow import write_documents
from bnpvi.data.heldout import hold_out
from bnpvi.errors import BnpviError, check_int


def _noise(noise) -> float:
    try:
        value = float(noise)
    except (TypeError, ValueError):
        raise BnpviError(f"bars: noise must be a number >= 0, got {noise!r}") from None
    if not (math.isfinite(value) and value >= 0.0):
        raise BnpviError(f"bars: noise must be a number >= 0, got {noise!r}")
    return value


def _n_bars(side: int, n_bars) -> int:
    if n_bars is None:
        return 2 * side
    n_bars = check_int(n_bars, "bars: n_bars", 1)
    if n_bars > 2 * side:
        raise BnpviError(f"bars: n_bars={n_bars} exceeds the {2 * side} bars of a {side} x {side} grid")
    return n_bars


def bar_pixels(side: int = 10, n_bars: int | None = None) -> np.ndarray:
    """(K, side) int64: the word ids of each bar's pixels (bar 2i: row i; bar 2i + 1: column i)."""
    side = check_int(side, "bars: side", 2)
    K = _n_bars(side, n_bars)
    k = np.arange(K)[:, None]
    line, along = k // 2, np.arange(side)[None, :]
    return np.where(k % 2 == 0, line * side + along, along * side + line).astype(np.int64)


def bar_topics(side: int = 10, n_bars: int | None = None, noise: float = 0.0) -> np.ndarray:
    """The bars topics (Griffiths & Steyvers 2004).

    Parameters
    ----------
    side : int, default 10
        The grid is side x side pixels (at least 2); V = side².
    n_bars : int, optional
        K, how many bars to keep (default 2 * side, all of them); the first K of
        the order row 0, column 0, row 1, column 1, ...
    noise : float, default 0.0
        Mass added evenly over all V words before renormalising: topic k is
        ``(uniform on bar k + noise * uniform on all V words) / (1 + noise)``.

    Returns
    -------
    (K, V) float64
        Rows sum to 1.
    """
    pixels = bar_pixels(side, n_bars)
    K, V = pixels.shape[0], int(side) ** 2
    topics = np.zeros((K, V))
    np.put_along_axis(topics, pixels, 1.0 / int(side), axis=1)
    noise = _noise(noise)
    return (topics + noise / V) / (1.0 + noise)


def make_bars(n_docs: int, side: int = 10, n_bars: int | None = None, bars_per_doc=(1, 3),
              tokens_per_doc: int = 100, noise: float = 0.0,
              seed: int = 0) -> tuple[WordCountBatch, np.ndarray, np.ndarray]:
    """Generate a bars corpus (Griffiths & Steyvers 2004).

    Each document draws a number of bars m uniformly from ``bars_per_doc``, m
    distinct bars uniformly, proportions from a symmetric Dirichlet(1) over
    them, then ``tokens_per_doc`` tokens: each token picks a bar from the
    proportions and a word from that bar's topic (:func:`bar_topics`). All
    documents are drawn at once (no loop over documents or tokens). The same
    seed gives the same corpus; the seed's draws do not depend on ``noise``,
    so corpora with and without noise share their bars and proportions.

    Parameters
    ----------
    n_docs : int
        Number of documents (at least 1).
    side, n_bars, noise
        As :func:`bar_topics`.
    bars_per_doc : int or (int, int), default (1, 3)
        Bars per document: a number, or an inclusive range ``(lo, hi)`` with
        1 <= lo <= hi <= K.
    tokens_per_doc : int, default 100
        Tokens per document (at least 1).
    seed : int, default 0

    Returns
    -------
    X : WordCountBatch
        All documents (``start = 0``, V = side²); word ids ascending within a
        document; every document holds ``tokens_per_doc`` tokens.
    true_topics : (K, V) float64
        Rows sum to 1.
    doc_topics : (n_docs, K) float64
        Each document's bar proportions (zero outside its bars; rows sum to 1).

    Raises
    ------
    BnpviError
        A bad size, range, noise or seed (one line).
    """
    n_docs = check_int(n_docs, "bars: n_docs", 1)
    side = check_int(side, "bars: side", 2)
    tokens = check_int(tokens_per_doc, "bars: tokens_per_doc", 1)
    topics = bar_topics(side, n_bars, noise)
    noise = _noise(noise)
    pixels = bar_pixels(side, n_bars)
    K, V = topics.shape
    lo, hi = _range(bars_per_doc, K)
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):
        raise BnpviError(f"bars: seed must be a non-negative integer, got {seed!r}") from None

    # bars and proportions: m_d bars without replacement (the m_d smallest of K uniform keys), Dirichlet(1)
    m = rng.integers(lo, hi + 1, size=n_docs)
    rank = np.argsort(np.argsort(rng.random((n_docs, K)), axis=1), axis=1)
    chosen = rank < m[:, None]
    weights = np.where(chosen, rng.standard_exponential((n_docs, K)), 0.0)
    weights[chosen & (weights == 0.0)] = np.finfo(float).tiny  # keep every chosen bar (a zero draw is ~impossible)
    doc_topics = weights / weights.sum(axis=1, keepdims=True)

    # tokens: a bar from the proportions (inverse CDF, all documents in one sorted array), then a word
    cdf = np.cumsum(doc_topics, axis=1)
    last = K - 1 - np.argmax(chosen[:, ::-1], axis=1)
    cdf[np.arange(K)[None, :] >= last[:, None]] = 1.0  # exact 1 from the last chosen bar on
    tok_doc = np.repeat(np.arange(n_docs, dtype=np.int64), tokens)
    u = rng.random(tok_doc.shape[0])
    offsets = 2.0 * np.arange(n_docs)[:, None]  # documents' CDFs in disjoint intervals [2d, 2d + 1]
    tok_bar = np.searchsorted((cdf + offsets).ravel(), 2.0 * tok_doc + u, side="right") - K * tok_doc
    pixel = rng.integers(0, side, size=tok_doc.shape[0])
    is_noise = rng.random(tok_doc.shape[0]) < noise / (1.0 + noise)
    noise_word = rng.integers(0, V, size=tok_doc.shape[0])
    word = np.where(is_noise, noise_word, pixels[tok_bar, pixel])

    pairs, counts = np.unique(tok_doc * V + word, return_counts=True)
    docs, words = np.divmod(pairs, V)
    doc_range = np.concatenate([[0], np.cumsum(np.bincount(docs, minlength=n_docs))]).astype(np.int64)
    X = WordCountBatch(words.astype(np.int32), counts.astype(np.float64), doc_range, V, 0)
    return X, topics, doc_topics


def _range(bars_per_doc, K: int) -> tuple[int, int]:
    if isinstance(bars_per_doc, (tuple, list)):
        if len(bars_per_doc) != 2:
            raise BnpviError(f"bars: bars_per_doc must be a number or a range (lo, hi), got {bars_per_doc!r}")
        lo, hi = (check_int(v, "bars: bars_per_doc", 1) for v in bars_per_doc)
    else:
        lo = hi = check_int(bars_per_doc, "bars: bars_per_doc", 1)
    if not 1 <= lo <= hi <= K:
        raise BnpviError(f"bars: bars_per_doc={bars_per_doc!r} must satisfy 1 <= lo <= hi <= K={K}")
    return lo, hi


def bars_batch_file(path, n_docs: int, side: int = 10, n_bars: int | None = None, bars_per_doc=(1, 3),
                    tokens_per_doc: int = 100, noise: float = 0.0, seed: int = 0, n_batches: int | None = None,
                    heldout: float | None = None, heldout_seed: int = 0, source: str | None = None) -> Path:
    """Generate a bars corpus (:func:`make_bars`) and write it as a bag-of-words batch file.

    The file holds the generating topics (``true_topics``, read with
    ``BowStore.read_true_topics()``); when every document uses exactly one bar
    (``bars_per_doc=1``) it also holds that bar as each document's label.

    Parameters
    ----------
    path : str or Path
        Destination; written atomically.
    n_docs, side, n_bars, bars_per_doc, tokens_per_doc, noise, seed
        As :func:`make_bars`.
    n_batches : int, optional
        Fixed number of batches (of training documents); default one batch that
        training may re-split.
    heldout : float, optional
        Keep this fraction of the documents apart for evaluation, as
        ``bnpvi-data convert --heldout`` does (:func:`~bnpvi.data.heldout.hold_out`).
    heldout_seed : int, default 0
        Seed of the held-out choice.
    source : str, optional
        The file's ``source`` attribute; by default one that lists these parameters.

    Returns
    -------
    Path
        ``path``.
    """
    X, topics, doc_topics = make_bars(n_docs, side, n_bars, bars_per_doc, tokens_per_doc, noise, seed)
    one_bar = bool((np.count_nonzero(doc_topics, axis=1) == 1).all())
    labels = np.argmax(doc_topics, axis=1).astype(np.int64) if one_bar else None
    described = (f"bars corpus: n_docs={X.n_atoms} side={side} K={topics.shape[0]} bars_per_doc={bars_per_doc} "
              f"tokens_per_doc={tokens_per_doc} noise={noise:g} seed={seed}")
    held = None
    if heldout is not None:
        X, labels, held = hold_out(X, heldout, heldout_seed, labels)
        described += f" ({held.n_docs} documents held out, seed {heldout_seed})"
    return write_documents(path, X.word_ids, X.word_counts, X.doc_range, X.vocab_size,
                           n_batches=1 if n_batches is None else n_batches, labels=labels,
                           batches_fixed=n_batches is not None, source=source or described, heldout=held,
                           true_topics=topics)
