"""Benchmark the L-sparse mode of the compiled topic-model local step against the dense step.

Documents/s of :func:`bnpvi.kernels.topic.doc_topic_step` on the first ``--n-docs`` documents
of an LDA-C corpus (default ``../shared/data/wiki/train.ldac``: lines ``n id:count ...``),
dense (``sparse_L=None``) and L-sparse (Hughes 2016 thesis §7.3, Alg. 7.4 and Fig. 7.3;
Hughes & Sudderth 2016, fast and accurate local steps (sparse), §5 and Fig. 3), with the
thesis's settings: table mode, ``keep_resp=False``, 100 iterations, conv_thr 0.05, 5
sparse restarts, a cold start, α = 0.5 spread evenly (LDA, a_k = α / K). Each run is
timed once (time.perf_counter) after a warm-up call on a few documents.

The topics are made from the data, so that E ln φ looks like a trained model's: a few
rounds of hard k-means of all the corpus's documents under the multinomial likelihood
(each document to the topic of the largest Σ_v x_dv E ln φ_kv, seeded with K random
documents), then λ_kv = 0.1 + the counts of word v in the documents of topic k, and
C_vk = ψ(λ_kv) − ψ(Σ_v λ_kv), a (V, K) table; then ``--lda-rounds`` (6) rounds of dense
LDA VB on the timed documents (λ = 0.1 + their word-topic counts). Hard k-means topics
alone are harsher than trained ones: the sparse step then stops in other local optima
(about 3.6 topics per document where the dense step uses 1.6; total variation 0.34 at
K = 500, L = 8), which trained topics do not show (0.002).

Columns: docs/s, the ratio to the dense docs/s, the mean iterations, and the mean over
documents of the total-variation distance ½ Σ_k |N_dk / T_d − N'_dk / T_d| between the
normalised doc-topic counts of the sparse and the dense step (Hughes 2016 thesis
Fig. 7.3d).

Usage::

    python scripts/bench_sparse_topics.py                       # K ∈ {100, 500}, L ∈ {4, 8, 16}
    python scripts/bench_sparse_topics.py --ks 500 --ls 8 --n-docs 300
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.sparse
from scipy.special import digamma

from bnpvi.kernels import topic

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki" / "train.ldac"


def read_ldac(path: Path, vocab: int | None = None) -> scipy.sparse.csr_matrix:
    """The documents of an LDA-C file as a (D, V) CSR matrix of counts (V: the largest id + 1, or ``vocab``)."""
    rows, cols, vals = [], [], []
    with open(path) as f:
        for d, line in enumerate(f):
            for item in line.split()[1:]:
                v, c = item.split(":")
                rows.append(d)
                cols.append(int(v))
                vals.append(float(c))
    cols = np.asarray(cols)
    V = max(int(cols.max()) + 1, vocab or 0)
    X = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(d + 1, V))
    X.sum_duplicates()
    X.sort_indices()
    return X


def kmeans_table(X: scipy.sparse.csr_matrix, K: int, rng: np.random.Generator, rounds: int = 4) -> np.ndarray:
    """(V, K) table E ln φ from hard multinomial k-means of the documents (module docstring)."""
    D, V = X.shape
    z = np.full(D, -1)
    z[rng.choice(D, K, replace=False)] = np.arange(K)

    def elog_phi(z):
        docs = np.flatnonzero(z >= 0)
        lam = 0.1 + (scipy.sparse.csr_matrix((np.ones(docs.size), (z[docs], docs)), shape=(K, D)) @ X).toarray()
        return digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))

    for _ in range(rounds):
        z = np.asarray((X @ elog_phi(z).T).argmax(axis=1)).ravel()
    return np.ascontiguousarray(elog_phi(z).T)


def bench(corpus: Path = DEFAULT_CORPUS, n_docs: int = 1000, ks=(100, 500), ls=(4, 8, 16), threads: int = 2,
          alpha: float = 0.5, seed: int = 0, lda_rounds: int = 6) -> list[dict]:
    """Time the dense and the L-sparse step on the first ``n_docs`` documents; print and return the table."""
    rng = np.random.default_rng(seed)
    X = read_ldac(corpus)
    B = X[:n_docs]
    word_ids = B.indices.astype(np.int64)
    counts = B.data.astype(np.float64)
    doc_range = B.indptr.astype(np.int64)
    tokens = np.asarray(B.sum(axis=1)).ravel()
    settings = dict(word_ids=word_ids, keep_resp=False, max_iters=100, conv_thr=0.05, n_restarts=5, n_threads=threads)
    rows = []
    print(f"{B.shape[0]} documents, {word_ids.size} (document, word type) rows, {int(counts.sum())} tokens, "
          f"V = {X.shape[1]}, {threads} threads")
    print(f"{'K':>5} {'L':>6} {'docs/s':>9} {'ratio':>7} {'iters':>7} {'TV(N_d)':>9}")
    for K in ks:
        table = kmeans_table(X, K, rng)
        prior = np.full(K, alpha / K)
        for _ in range(lda_rounds):  # dense LDA VB on the timed documents
            fit = topic.doc_topic_step(table, counts, doc_range, prior, 0.0, **settings)
            lam = 0.1 + fit.word_topic.T
            table = np.ascontiguousarray((digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))).T)
        dense = None
        for L in (None, *ls):
            warm = doc_range[:11]
            topic.doc_topic_step(table, counts[:warm[-1]], warm, prior, 0.0, sparse_L=L,
                                 **{**settings, "word_ids": word_ids[:warm[-1]]})
            t0 = time.perf_counter()
            res = topic.doc_topic_step(table, counts, doc_range, prior, 0.0, sparse_L=L, **settings)
            rate = B.shape[0] / (time.perf_counter() - t0)
            if dense is None:
                dense, dense_rate = res, rate
            tv = 0.5 * np.mean(np.abs(res.doc_counts - dense.doc_counts).sum(axis=1) / tokens)
            row = dict(K=K, L=L or K, docs_per_s=rate, ratio=rate / dense_rate, iters=float(res.iters.mean()), tv=tv)
            rows.append(row)
            print(f"{K:>5} {'dense' if L is None else L:>6} {rate:>9.1f} {row['ratio']:>7.2f} {row['iters']:>7.1f} "
                  f"{tv:>9.4f}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--n-docs", type=int, default=1000)
    ap.add_argument("--ks", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--ls", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lda-rounds", type=int, default=6, help="dense LDA VB rounds that train the k-means topics")
    args = ap.parse_args(argv)
    bench(args.corpus, args.n_docs, args.ks, args.ls, args.threads, seed=args.seed, lda_rounds=args.lda_rounds)


if __name__ == "__main__":
    main()
