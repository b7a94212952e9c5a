"""Benchmark the compiled document-level local step of the HDP topic model (Hughes 2016 thesis, Alg. 5.1).

Documents per second of ``bnpvi.kernels.topic.doc_topic_step`` (1 thread and the
default threads) against the NumPy reference ``bnpvi.kernels.reference.doc_topic_step``
at several numbers of topics K, on a synthetic corpus: K topics φ_k ~ Dir(0.05) over a
vocabulary of V word types; each document mixes 2-5 topics and draws its tokens from
them, keeping ~100 distinct types; C_uk = E ln φ_{k,v_u} = ψ(λ_kv) − ψ(Σ_v λ_kv) under a
topic posterior λ_k = 0.1 + 2000 φ_k, gathered for the rows of every document; the
document prior is α β̂ with α = 0.5 and β̂ ~ Dir(1) over K + 1 entries. Settings of the
thesis: ``--max-iters`` 100, ``--conv-thr`` 0.05, cold start (from the likelihood);
``--restarts`` adds sparse restarts (Hughes, Kim & Sudderth 2015 (AISTATS), sparse
restarts). Times are the best of ``--repeats`` runs (time.perf_counter). The reference
is slow, so it runs on as many of the corpus's documents as fit in about
``--ref-seconds`` (its rate in documents/s is what is compared); the last columns are
the mean iterations per document and the largest |Δ N_dk| between the two on those.

Usage::

    python scripts/bench_topic.py                 # 1000 documents, V = 5000, K ∈ {10, 100, 500}
    python scripts/bench_topic.py --quick         # 200 documents, K ∈ {10, 100}
    python scripts/bench_topic.py --ks 20 200 --n-docs 5000 --restarts 5
"""
from __future__ import annotations

import argparse
import platform

import numpy as np
from scipy.special import digamma

from bnpvi.kernels import reference, topic
from timing import best_of  # scripts/timing.py


# ---------------------------------------------------------------------- inputs
def make_corpus(K: int, n_docs: int, vocab: int, types: int, seed: int = 0):
    """(log_lik, counts, doc_range, prior, prior_rest) of a synthetic corpus (module docstring)."""
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
    v_all = np.concatenate(rows)
    log_lik = np.ascontiguousarray(e_log_phi[:, v_all].T)
    doc_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    beta = rng.dirichlet(np.ones(K + 1))
    alpha = 0.5
    return log_lik, np.concatenate(counts), doc_range, alpha * beta[:K], float(alpha * beta[K])


def subset(corpus, n: int):
    """The first n documents of a corpus."""
    log_lik, counts, doc_range, prior, prior_rest = corpus
    stop = int(doc_range[n])
    return np.ascontiguousarray(log_lik[:stop]), counts[:stop].copy(), doc_range[: n + 1].copy(), prior, prior_rest


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="200 documents, K in {10, 100}")
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
    args = p.parse_args(argv)
    args.ks = args.ks or ([10, 100] if args.quick else [10, 100, 500])
    args.n_docs = args.n_docs or (200 if args.quick else 1000)
    kw = dict(max_iters=args.max_iters, conv_thr=args.conv_thr, n_restarts=args.restarts)

    print(f"OpenMP threads {topic._ext.max_threads()}; numpy {np.__version__}; "
          f"{platform.processor() or platform.machine()}")
    print(f"HDP topic local step, {args.n_docs} documents x ~{args.types} types, V = {args.vocab}, "
          f"max_iters {args.max_iters}, conv_thr {args.conv_thr:g}, restarts {args.restarts}, best of "
          f"{args.repeats} [documents/s]: compiled 1 thread, compiled default threads, NumPy reference, and ratios")
    head = (f"{'K':>4} {'rows':>7} | {'c 1thr':>9} {'compiled':>9} {'numpy':>9} (docs) | "
            f"{'c/numpy':>7} {'1thr/np':>7} {'thr gain':>8} | {'iters':>6} {'max|dN|':>8}")
    print(head)
    print("-" * len(head))
    for K in args.ks:
        corpus = make_corpus(K, args.n_docs, args.vocab, args.types)
        D = len(corpus[2]) - 1
        topic.doc_topic_step(*corpus, **kw)  # warm-up (page faults, thread pool)
        t1, _ = best_of(lambda: topic.doc_topic_step(*corpus, **kw, n_threads=1), args.repeats)
        tc, ours = best_of(lambda: topic.doc_topic_step(*corpus, **kw), args.repeats)
        # the reference on as many documents as fit in about --ref-seconds
        n_probe = min(5, D)
        probe = subset(corpus, n_probe)
        tp, _ = best_of(lambda: reference.doc_topic_step(*probe, **kw), 1)
        n_ref = int(np.clip(args.ref_seconds / max(tp / n_probe, 1e-9), 1, D))
        small = subset(corpus, n_ref)
        tr, ref = best_of(lambda: reference.doc_topic_step(*small, **kw), max(1, min(args.repeats, 2)))
        err = float(np.max(np.abs(ours.doc_counts[:n_ref] - ref[1])))
        docs_ref = n_ref / tr
        print(f"{K:>4} {corpus[0].shape[0]:>7} | {D / t1:9.3g} {D / tc:9.3g} {docs_ref:9.3g} ({n_ref:>4}) | "
              f"{D / tc / docs_ref:7.1f} {D / t1 / docs_ref:7.1f} {t1 / tc:8.2f} | "
              f"{ours.iters.mean():6.1f} {err:8.1e}", flush=True)


if __name__ == "__main__":
    main()
