"""Benchmark the compiled document-level local step of the HDP topic model (Hughes 2016 thesis, Alg. 5.1).

Documents per second of ``bnpvi.kernels.topic.doc_topic_step`` (1 thread and the
default threads) against the NumPy reference ``bnpvi.kernels.reference.doc_topic_step``
at several numbers of topics K, on a synthetic corpus: K topics φ_k ~ Dir(0.05) over a
vocabulary of V word types; each document mixes 2-5 topics and draws its tokens from
them, keeping ~100 distinct types; C_uk = E ln φ_{k,v_u} = ψ(λ_kv) − ψ(Σ_v λ_kv) under a
topic posterior λ_k = 0.1 + 2000 φ_k, a (V, K) table read at the word type of every
row; the document prior is α β̂ with α = 0.5 and β̂ ~ Dir(1) over K + 1 entries. Settings
of the thesis: ``--max-iters`` 100, ``--conv-thr`` 0.05, cold start (from the
likelihood); ``--restarts`` adds sparse restarts (Hughes, Kim & Sudderth 2015 (AISTATS),
sparse restarts). Times are the best of ``--repeats`` runs (time.perf_counter). The
reference is slow, so it runs on as many of the corpus's documents as fit in about
``--ref-seconds`` (its rate in documents/s is what is compared).

"dense" is the call with the (nnz, K) matrix C = table[word_ids] and the (nnz, K)
responsibilities returned; "table" the call with the table, ``word_ids`` and
``keep_resp=False``, which returns the entropies and word-topic counts instead. The
peak memory columns are the most bytes NumPy held at once (tracemalloc) over the call,
counting a dense call's gathering of C, and the outputs.

With an HDF5 bag-of-words file (``--wiki``, default /tmp/wiki.h5 when it exists; datasets
``word_ids``, ``word_counts``, ``doc_range``, ``batch_offsets``), the last table gives
documents/s on its first batch at K ∈ ``--wiki-ks`` with a made-up table (ln of
Dir(0.1) topics, floored at −700), thesis settings (100 iterations, conv_thr 0.05,
5 restarts of 2 iterations), from a cold start and warm-started from the cold run's
N_d: "dense + numpy" is the dense call plus the summaries computed from resp in NumPy
(entropy, word-topic counts, ``--pairs`` merged-pair entropies) as a caller had to,
"table" the table call that returns all of them.

Usage::

    python scripts/bench_topic.py                 # 1000 documents, V = 5000, K ∈ {10, 100, 500}
    python scripts/bench_topic.py --quick         # 200 documents, K ∈ {10, 100}
    python scripts/bench_topic.py --ks 20 200 --n-docs 5000 --restarts 5
"""
from __future__ import annotations

import argparse
import os
import platform
import tracemalloc

import numpy as np
import scipy.sparse
from scipy.special import digamma, entr

from bnpvi.kernels import reference, topic
from timing import best_of  # scripts/timing.py

WIKI = "/tmp/wiki.h5"
MB = 2.0**20


# ---------------------------------------------------------------------- inputs
def make_corpus(K: int, n_docs: int, vocab: int, types: int, seed: int = 0):
    """(table, word_ids, counts, doc_range, prior, prior_rest) of a synthetic corpus (module docstring)."""
    rng = np.random.default_rng([seed, K, n_docs, vocab])
    phi = rng.dirichlet(np.full(vocab, 0.05), size=K)
    lam = 0.1 + 2000.0 * phi
    e_log_phi = digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))
    rows, counts, lengths = [], [], []
    for _ in range(n_docs):
        used = rng.choice(K, size=min(K, int(rng.integers(2, 6))), replace=False)
        p = rng.dirichlet(np.ones(used.size)) @ phi[used]
        n_tokens = int(types * 1.6)
        while True:  # more tokens until the document has ~types distinct types
            c = rng.multinomial(n_tokens, p)
            v = np.flatnonzero(c)
            if v.size >= types or n_tokens > 50 * types:
                break
            n_tokens = int(n_tokens * 1.3)
        if v.size > types:
            v = np.sort(rng.choice(v, size=types, replace=False))
        rows.append(v)
        counts.append(c[v].astype(np.float64))
        lengths.append(v.size)
    doc_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    beta = rng.dirichlet(np.ones(K + 1))
    alpha = 0.5
    return (np.ascontiguousarray(e_log_phi.T), np.concatenate(rows).astype(np.int64), np.concatenate(counts),
            doc_range, alpha * beta[:K], float(alpha * beta[K]))


def subset(corpus, n: int):
    """The first n documents of a corpus."""
    table, word_ids, counts, doc_range, prior, prior_rest = corpus
    stop = int(doc_range[n])
    return table, word_ids[:stop].copy(), counts[:stop].copy(), doc_range[: n + 1].copy(), prior, prior_rest


def dense(corpus):
    """The dense arguments (C = table[word_ids], counts, doc_range, prior, prior_rest)."""
    table, word_ids, counts, doc_range, prior, prior_rest = corpus
    return np.ascontiguousarray(table[word_ids]), counts, doc_range, prior, prior_rest


def peak_mb(fn) -> float:
    """The most memory NumPy held at once while ``fn`` ran, in MiB (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / MB


# ------------------------------------------------------------------ synthetic
def synthetic(args) -> None:
    kw = dict(max_iters=args.max_iters, conv_thr=args.conv_thr, n_restarts=args.restarts)
    print(f"HDP topic local step, {args.n_docs} documents x ~{args.types} types, V = {args.vocab}, "
          f"max_iters {args.max_iters}, conv_thr {args.conv_thr:g}, restarts {args.restarts}, best of "
          f"{args.repeats} [documents/s]: compiled dense 1 thread, dense default threads, table default "
          "threads, NumPy reference, ratios; peak memory [MiB] of a dense and a table call")
    head = (f"{'K':>4} {'rows':>7} | {'dense 1t':>9} {'dense':>9} {'table':>9} {'numpy':>9} (docs) | "
            f"{'c/numpy':>7} {'thr gain':>8} {'tab/den':>7} | {'MiB den':>8} {'MiB tab':>8} | "
            f"{'iters':>6} {'max|dN|':>8}")
    print(head)
    print("-" * len(head))
    for K in args.ks:
        corpus = make_corpus(K, args.n_docs, args.vocab, args.types)
        table, word_ids = corpus[0], corpus[1]
        D = len(corpus[3]) - 1
        args_d = dense(corpus)
        lean = dict(kw, word_ids=word_ids, keep_resp=False)
        topic.doc_topic_step(*args_d, **kw)  # warm-up (page faults, thread pool)
        t1, _ = best_of(lambda: topic.doc_topic_step(*args_d, **kw, n_threads=1), args.repeats)
        tc, ours = best_of(lambda: topic.doc_topic_step(*args_d, **kw), args.repeats)
        tt, _ = best_of(lambda: topic.doc_topic_step(table, *corpus[2:], **lean), args.repeats)
        mem_d = peak_mb(lambda: topic.doc_topic_step(*dense(corpus), **kw))
        mem_t = peak_mb(lambda: topic.doc_topic_step(table, *corpus[2:], **lean))
        # the reference on as many documents as fit in about --ref-seconds
        n_probe = min(5, D)
        tp, _ = best_of(lambda: reference.doc_topic_step(*dense(subset(corpus, n_probe)), **kw), 1)
        n_ref = int(np.clip(args.ref_seconds / max(tp / n_probe, 1e-9), 1, D))
        small = dense(subset(corpus, n_ref))
        tr, ref = best_of(lambda: reference.doc_topic_step(*small, **kw), max(1, min(args.repeats, 2)))
        err = float(np.max(np.abs(ours.doc_counts[:n_ref] - ref[1])))
        docs_ref = n_ref / tr
        print(f"{K:>4} {args_d[0].shape[0]:>7} | {D / t1:9.3g} {D / tc:9.3g} {D / tt:9.3g} {docs_ref:9.3g} "
              f"({n_ref:>4}) | {D / tc / docs_ref:7.1f} {t1 / tc:8.2f} {tc / tt:7.2f} | {mem_d:8.1f} {mem_t:8.1f} | "
              f"{ours.iters.mean():6.1f} {err:8.1e}", flush=True)


# ----------------------------------------------------------------------- wiki
def read_batch(path: str):
    """word_ids, counts, doc_range and V of the first batch of a bnpvi bag-of-words file."""
    import h5py

    with h5py.File(path, "r") as f:
        n_docs = int(f["batch_offsets"][1])
        doc_range = f["doc_range"][: n_docs + 1].astype(np.int64)
        stop = int(doc_range[-1])
        return (f["word_ids"][:stop].astype(np.int64), f["word_counts"][:stop].astype(np.float64), doc_range,
                int(f.attrs["D"]))


def numpy_summaries(res, word_ids, counts, V, pairs, block=16):
    """What a caller computed from the dense resp: H_k, word-topic counts, merged-pair entropies."""
    r = res.resp
    X = scipy.sparse.csr_matrix((counts, (np.arange(counts.size), word_ids)), shape=(counts.size, V))
    H = counts @ entr(r)
    pair_h = np.concatenate([counts @ entr(r[:, pairs[lo:lo + block, 0]] + r[:, pairs[lo:lo + block, 1]])
                             for lo in range(0, pairs.shape[0], block)])
    return H, X.T @ r, pair_h


def wiki(args) -> None:
    word_ids, counts, doc_range, V = read_batch(args.wiki)
    D = doc_range.shape[0] - 1
    kw = dict(max_iters=100, conv_thr=0.05, n_restarts=5, restart_iters=2)
    print(f"\n{os.path.basename(args.wiki)}, first batch: {D} documents, {counts.size} rows, V = {V}; made-up "
          f"table, {args.pairs} pairs, thesis settings, default threads, best of {args.wiki_repeats} "
          "[documents/s]; cold start, then warm from the cold N_d; peak memory [MiB] of the cold call")
    head = f"{'K':>4} {'mode':>14} | {'cold':>7} {'iters':>6} | {'warm':>7} {'iters':>6} | {'MiB':>7}"
    print(head)
    print("-" * len(head))
    for K in args.wiki_ks:
        rng = np.random.default_rng(K)
        phi = rng.dirichlet(np.full(V, 0.1), size=K)
        table = np.ascontiguousarray(np.maximum(np.log(phi.T + 1e-300), -700.0))
        beta = rng.dirichlet(np.ones(K + 1))
        prior, rest = 0.5 * beta[:K], float(0.5 * beta[K])
        a, b = np.triu_indices(K, 1)
        pick = rng.choice(a.size, size=min(args.pairs, a.size), replace=False)
        pairs = np.ascontiguousarray(np.stack([a[pick], b[pick]], axis=1).astype(np.int64))

        def old(init=None):
            res = topic.doc_topic_step(np.ascontiguousarray(table[word_ids]), counts, doc_range, prior, rest,
                                       init_counts=init, **kw)
            numpy_summaries(res, word_ids, counts, V, pairs)
            return res

        def new(init=None):
            return topic.doc_topic_step(table, counts, doc_range, prior, rest, word_ids=word_ids, keep_resp=False,
                                        pairs=pairs, init_counts=init, **kw)

        for name, fn in (("dense + numpy", old), ("table", new)):
            tc, cold = best_of(fn, args.wiki_repeats)
            tw, warm = best_of(lambda: fn(cold.doc_counts), args.wiki_repeats)
            mem = peak_mb(fn)
            print(f"{K:>4} {name:>14} | {D / tc:7.0f} {cold.iters.mean():6.1f} | {D / tw:7.0f} "
                  f"{warm.iters.mean():6.1f} | {mem:7.0f}", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="200 documents, K in {10, 100}; wiki K in {50, 100}")
    p.add_argument("--ks", type=int, nargs="+", default=None, help="numbers of topics (default 10 100 500)")
    p.add_argument("--n-docs", type=int, default=None, help="documents (default 1000)")
    p.add_argument("--vocab", type=int, default=5000, help="vocabulary size V (default 5000)")
    p.add_argument("--types", type=int, default=100, help="distinct word types per document (default 100)")
    p.add_argument("--max-iters", type=int, default=100, help="iterations per document (default 100)")
    p.add_argument("--conv-thr", type=float, default=0.05, help="convergence threshold on N_dk (default 0.05)")
    p.add_argument("--restarts", type=int, default=0, help="sparse restarts per document (default 0)")
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs (default 3)")
    p.add_argument("--ref-seconds", type=float, default=2.0,
                   help="about this long per run of the NumPy reference (default 2)")
    p.add_argument("--wiki", default=WIKI if os.path.exists(WIKI) else None,
                   help=f"bag-of-words HDF5 file for the last table (default {WIKI} when it exists)")
    p.add_argument("--wiki-ks", type=int, nargs="+", default=None, help="numbers of topics there (default 50 100 200)")
    p.add_argument("--wiki-repeats", type=int, default=2, help="best of this many runs there (default 2)")
    p.add_argument("--pairs", type=int, default=100,
                   help="merge pairs whose entropies are computed there (default 100)")
    args = p.parse_args(argv)
    args.ks = args.ks or ([10, 100] if args.quick else [10, 100, 500])
    args.n_docs = args.n_docs or (200 if args.quick else 1000)
    args.wiki_ks = args.wiki_ks or ([50, 100] if args.quick else [50, 100, 200])

    print(f"OpenMP threads {topic._dense.max_threads()}; numpy {np.__version__}; "
          f"{platform.processor() or platform.machine()}")
    synthetic(args)
    if args.wiki:
        wiki(args)


if __name__ == "__main__":
    main()
