"""Generated data sets that reproduce what real data do to birth moves.

``gaussian_clusters``: a few thousand points in several dozen dimensions from a
dozen full-covariance Gaussians (like a small real feature set with about ten
natural groups), where a birth proposing many fresh clusters pays for all of them.
``topic_documents``: thousands of short documents (a dozen tokens each), one
topic per document, over a large vocabulary, where one birth must split the
whole corpus at once.
"""
from __future__ import annotations

import numpy as np


def gaussian_clusters(n_clusters: int = 12, D: int = 48, sizes: tuple[int, int] = (100, 300), spread: float = 1.5,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points from ``n_clusters`` full-covariance Gaussians with random sizes in ``sizes``.

    Means are N(0, spread² I); each covariance is A Aᵀ / D with A standard normal scaled
    by U(0.5, 1.5), so clusters are elongated, rotated and of unequal spread.

    Returns
    -------
    X : (N, D) float64, rows in random order
    labels : (N,) int64
    """
    rng = np.random.default_rng(seed)
    counts = rng.integers(sizes[0], sizes[1] + 1, size=n_clusters)
    labels = np.repeat(np.arange(n_clusters), counts)
    means = rng.normal(scale=spread, size=(n_clusters, D))
    X = np.empty((labels.size, D))
    for k in range(n_clusters):  # a loop over clusters, not atoms
        A = rng.normal(size=(D, D)) * rng.uniform(0.5, 1.5) / np.sqrt(D)
        rows = labels == k
        X[rows] = means[k] + rng.normal(size=(int(counts[k]), D)) @ A.T
    order = rng.permutation(labels.size)
    return np.ascontiguousarray(X[order]), labels[order]


def topic_documents(n_docs: int = 6000, n_topics: int = 10, vocab_size: int = 3000,
                    lengths: tuple[int, int] = (6, 16), words_per_topic: int = 300, background: float = 0.3,
                    seed: int = 0):
    """Short documents, each drawn from one of ``n_topics`` well-separated topics.

    Topic k puts Dirichlet(0.5) mass on its own ``words_per_topic`` words (disjoint
    blocks of the vocabulary) and the fraction ``background`` spread evenly over the
    whole vocabulary.

    Returns
    -------
    word_ids : (nnz,) int32, word_counts : (nnz,) float64, doc_range : (n_docs + 1,) int64
        The documents in CSR form (word ids sorted within a document).
    labels : (n_docs,) int64
        The topic of each document.
    """
    if n_topics * words_per_topic > vocab_size:
        raise ValueError("n_topics * words_per_topic must not exceed vocab_size")
    rng = np.random.default_rng(seed)
    topics = np.full((n_topics, vocab_size), background / vocab_size)
    for k in range(n_topics):
        block = slice(k * words_per_topic, (k + 1) * words_per_topic)
        topics[k, block] += (1.0 - background) * rng.dirichlet(np.full(words_per_topic, 0.5))
    topics /= topics.sum(axis=1, keepdims=True)
    labels = rng.integers(0, n_topics, size=n_docs)
    lengths_ = rng.integers(lengths[0], lengths[1] + 1, size=n_docs)
    token_doc = np.repeat(np.arange(n_docs), lengths_)
    token_topic = labels[token_doc]
    cdf = np.cumsum(topics, axis=1)
    u = rng.random(token_doc.size) * cdf[token_topic, -1]
    token_word = np.empty(token_doc.size, dtype=np.int64)
    for k in range(n_topics):  # a loop over topics, not tokens
        rows = token_topic == k
        token_word[rows] = np.minimum(np.searchsorted(cdf[k], u[rows], side="right"), vocab_size - 1)
    pairs, counts = np.unique(token_doc * vocab_size + token_word, return_counts=True)
    docs, words = np.divmod(pairs, vocab_size)
    doc_range = np.concatenate([[0], np.cumsum(np.bincount(docs, minlength=n_docs))]).astype(np.int64)
    return words.astype(np.int32), counts.astype(np.float64), doc_range, labels.astype(np.int64)
