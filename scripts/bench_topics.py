"""Benchmark the HDP topic model on the wiki corpus against gensim and tomotopy.

Every number of ours comes from ``bnpvi-train`` run as a child process (its trace.csv
and model.h5), so the script depends only on the command line and the files a run
writes, plus :class:`~bnpvi.data.store.BowStore`,
:func:`~bnpvi.data.heldout.completion_split` and
:func:`~bnpvi.kernels.topic.doc_topic_step`. Peak memory is the maximum resident set
size of each child (``os.wait4`` in a small launcher process), so it covers the whole
process (Python, data, model).

Section "local": seconds per lap of our local step at several K
(``--local-ks``, default 50 100 200): ``bnpvi-train model=hdp_topic alg=vb init=random
init.K=K moves=[] alg.n_laps=2``. Lap 2 of full VB is the local step and summaries of
every batch under fixed globals (those made at the end of lap 1 from random documents),
then one global step; lap 1 also holds first-touch costs, so lap 2 is reported
(``--local-alg memo`` times memoized VI's lap 2 instead, globals updated after every
batch). Documents/s and tokens/s are the training set's over lap 2's seconds.

Section "memo": the run users make, ``bnpvi-train model=hdp_topic obs=mult alg=memo
init.K=100 moves=[merge,delete] alg.n_laps=20`` (``--K``, ``--laps``; default
convergence test on, ``--full-laps`` turns it off): final K (and topics with more than
1 % of the tokens), ELBO, held-out log-likelihood per token (the trace's
heldout_loglik, document completion), training seconds of the trace and wall seconds
of the whole command (start-up, held-out scoring at every lap, outputs), peak memory.

Section "peers": gensim's ``HdpModel`` (defaults; online variational, one pass over the
corpus; random_state fixed) and tomotopy's ``HDPModel`` (collapsed Gibbs sampling,
defaults unless ``--tomotopy-opts``, ``--peer-iters`` sweeps, 1000 by default as in
tomotopy's examples, all cores) trained on exactly our training documents (all batches of
the file; ``--max-docs`` keeps the first ones, for trials), each in its own child
process ("train s": gensim's constructor, which trains; tomotopy from its corpus loaded
to the last sweep), then scored by our metric:
document completion on the file's held-out documents (Hughes, Kim & Sudderth 2015 §6,
Eq. 22) through :func:`completion_score`, which takes any model as topic-word weights
(K, V) and a document prior (K,). Our own model (the run of section "memo", made here
if that section did not run) goes through the same function, and the script checks
that the number equals the trace's heldout_loglik. Every model also infers the topic
weights of the whole held-out documents, timed at each thread count of ``--infer-threads``
("infer docs/s"): ours by ``bnpvi.load(RUN_DIR).transform`` (the compiled document step),
gensim by ``HdpModel.inference``, tomotopy by ``infer`` (``workers`` = the thread count).
How the peers' topics and priors are read:

* gensim: ``lda_alpha`` and ``lda_beta`` (what ``hdp_to_lda()`` returns at the end of
  training): α times the expected corpus-level stick weights of its T = 150 topics, and
  (λ + η) / (Σ λ + V η); K>1% counts the topics with more than 1 % of Σ α.
* tomotopy: φ_kv ∝ n_kv + η over the whole vocabulary (n_kv counted from the sampled
  topics of the tokens), and the Chinese-restaurant-franchise predictive prior
  α m_k / (m. + γ) (remainder α γ / (m. + γ)), with tomotopy's α and γ (re-fitted every
  10 sweeps by default). Tables per topic m_k are not exposed: m. (``num_tables``) is
  shared in proportion to the number of documents using each topic (one table per topic
  and document; the score with β_k ∝ tokens instead is printed beside it). K>1% counts
  topics with more than 1 % of the tokens.

The data file is made when missing and ``--source`` (and ``--vocab``) are given::

    bnpvi-data convert SOURCE.ldac DATA.h5 --vocab VOCAB.txt --batches 5 --heldout 0.1

Usage::

    python scripts/bench_topics.py                                   # all sections, /tmp/wiki.h5
    python scripts/bench_topics.py --sections local --local-ks 50 100
    python scripts/bench_topics.py --sections memo --laps 20 --K 100
    python scripts/bench_topics.py --sections memo --K 200 --train-opts alg.sparse_L=8
    python scripts/bench_topics.py --sections peers --max-docs 500 --peer-iters 50 --laps 2   # a quick trial
    python scripts/bench_topics.py --sections peers --no-ours --peers tomotopy \\
        --tomotopy-opts initial_k=100 alpha=0.5 gamma=10 eta=0.1 optim_interval=0   # tomotopy as our HDP
    python scripts/bench_topics.py --data /tmp/wiki.h5 --source ../shared/data/wiki/train.ldac \\
        --vocab ../shared/data/wiki/vocab.txt --keep runs/
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki"

ANCHORS = [
    "anchors (measured elsewhere on this kind of 2-core machine, 10 % document split, one scorer):",
    "  bnpy memo+merge from K=50: 20 laps 360 s, 1.75 GB, held-out -7.87 nats/token (K=44)",
    "  tomotopy HDP: held-out -7.94 nats/token;  gensim HdpModel: held-out -8.16 nats/token",
    "  targets for bnpvi: 20 laps in under 36 s, under 300 MB, held-out at least bnpy's (-7.87)",
]


# ------------------------------------------------------------------ helpers
def mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.0f}"


def print_table(head: list[str], rows: list[list], notes: list[str] = ()) -> None:
    """A markdown table with columns padded to their widest cell."""
    cells = [[str(c) for c in head]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(r):
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"

    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print(line(r))
    for note in notes:
        print(note)
    sys.stdout.flush()


# Runs a command and writes "peak-RSS-in-kB exit-status" of it to argv[1]. A child's ru_maxrss includes the memory
# of the process it was forked from up to its exec (Linux keeps the old mm's high-water mark; Python forks with
# vfork), so the benchmark's own memory would leak into every measurement: this small launcher stands in between.
LAUNCHER = """import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
code = os.waitstatus_to_exitcode(status)
open(sys.argv[1], "w").write(f"{usage.ru_maxrss} {code}")
sys.exit(code if code >= 0 else 1)
"""


def run_child(cmd: list[str], log_path: Path) -> tuple[int, float, int]:
    """Run ``cmd`` with its output in ``log_path``; (exit status, wall seconds, peak RSS in bytes of ``cmd``)."""
    usage_path = log_path.with_suffix(".rusage")
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(usage_path), *cmd], stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    wall = time.perf_counter() - start
    try:
        max_kb, rc = (int(x) for x in usage_path.read_text().split())
    except (OSError, ValueError):
        max_kb = 0
    return rc, wall, max_kb * 1024  # Linux: ru_maxrss in kilobytes


def failed(what: str, rc: int, log_path: Path) -> None:
    tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
    print(f"{what}: failed (exit status {rc}); last lines of {log_path}:")
    for text in tail:
        print(f"    {text}")


def code_state() -> str:
    """The commit and the files under bnpvi/ and csrc/ that differ from it (the package may change between runs)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--", "bnpvi", "csrc"], cwd=root,
                                 capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "code: not a git checkout"
    files = [line[3:] for line in changed if line.strip()]
    return f"code: {head}" + (f" with local changes to {', '.join(files)}" if files else " (clean)")


def bnpvi_train() -> str:
    """The bnpvi-train of this interpreter's environment (else the one on PATH)."""
    here = Path(sys.executable).parent / "bnpvi-train"
    return str(here) if here.exists() else (shutil.which("bnpvi-train") or "bnpvi-train")


def read_trace(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return [{k: float(v) if v not in ("", None) else float("nan") for k, v in row.items()}
                for row in csv.DictReader(fh)]


def train_run(args, name: str, overrides: list[str]) -> dict | None:
    """``bnpvi-train model=hdp_topic data=hdf5 data.path=DATA ...`` in its own run directory; trace, wall, RSS."""
    run_dir = args.work / name
    cmd = [bnpvi_train(), "model=hdp_topic", "obs=mult", "data=hdf5", f"data.path={args.data}", *overrides,
           f"hydra.run.dir={run_dir}"]
    log_path = args.work / f"{name}.log"
    print(f"  running: {' '.join(cmd[1:])}", flush=True)
    rc, wall, rss = run_child(cmd, log_path)
    if rc != 0 or not (run_dir / "trace.csv").exists():
        failed(f"bnpvi-train ({name})", rc, log_path)
        return None
    return {"dir": run_dir, "trace": read_trace(run_dir / "trace.csv"), "wall": wall, "rss": rss}


def read_our_model(run_dir: Path) -> dict:
    """Topic-word weights λ̂ (K, V), the document prior α β̂ (K,) and remainder, and counts from model.h5."""
    import h5py
    import yaml

    with h5py.File(run_dir / "model.h5", "r") as f:
        lam = np.asarray(f["posterior"]["lam"][()], dtype=np.float64)
        top = np.asarray(f["top_probs"][()], dtype=np.float64)
        counts = np.asarray(f["counts"][()], dtype=np.float64)
        config = f["config"].asstr()[()]
    alpha = float(yaml.safe_load(config)["model"]["alpha"])
    return {"weights": lam, "prior": alpha * top[:-1], "prior_rest": float(alpha * top[-1]), "mass": counts}


def big_topics(mass) -> int:
    """Topics holding more than 1 % of the mass."""
    mass = np.asarray(mass, dtype=np.float64)
    return int(np.sum(mass > 0.01 * mass.sum()))


# ------------------------------------------------------------------ the metric
def completion_score(store, weights, prior, prior_rest: float = 0.0, seed: int = 0, mode: str = "halves",
                     max_iters: int = 100, conv_thr: float = 0.01, block_docs: int = 5000) -> tuple[float, int]:
    """Held-out log-likelihood per target token by document completion, for any topic model.

    Hughes, Kim & Sudderth 2015 (AISTATS) §6, Eq. 22, as ``bnpvi.learn.heldout.completion_loglik``
    computes it for ours: φ̂_k = weights_k / Σ_v weights_kv; every held-out document of ``store``
    is split by ``completion_split(block, seed, mode)``; θ_d is fitted to the observed part by
    ``doc_topic_step`` with C_uk = ln φ̂_{k, v_u}, the document prior ``prior`` (α β̂_k, all > 0)
    and no restarts; π̂_d = θ_d / Σ_k θ_dk over the K topics (the remainder dropped); and the score
    is Σ_target ln Σ_k π̂_dk φ̂_kv over the number of target tokens.

    Returns
    -------
    (nats per target token, number of target tokens)
    """
    from bnpvi.data.heldout import completion_split
    from bnpvi.kernels.topic import doc_topic_step

    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape[1] != store.D:
        raise ValueError(f"topic-word weights of shape {weights.shape}; the data has V = {store.D}")
    phi_T = np.ascontiguousarray((weights / weights.sum(axis=1, keepdims=True)).T)  # (V, K)
    with np.errstate(divide="ignore"):
        log_phi_T = np.log(phi_T)
    prior = np.ascontiguousarray(prior, dtype=np.float64)
    K = prior.shape[0]
    total, n_tokens = 0.0, 0
    for lo in range(0, store.n_heldout, block_docs):
        observed, target = completion_split(store.read_heldout(lo, min(store.n_heldout, lo + block_docs)), seed, mode)
        n_docs = observed.doc_range.shape[0] - 1
        C = np.ascontiguousarray(log_phi_T[np.asarray(observed.word_ids, dtype=np.intp)])
        fit = doc_topic_step(C, np.ascontiguousarray(observed.word_counts, dtype=np.float64),
                             np.ascontiguousarray(observed.doc_range, dtype=np.int64), prior, float(prior_rest),
                             max_iters=max_iters, conv_thr=conv_thr, n_restarts=0)
        theta = fit.doc_counts + prior
        pi = theta / theta.sum(axis=1, keepdims=True)
        t_ids = np.asarray(target.word_ids, dtype=np.intp)
        t_counts = np.asarray(target.word_counts, dtype=np.float64)
        t_doc = np.repeat(np.arange(n_docs, dtype=np.intp), np.diff(target.doc_range))
        prob = np.zeros(t_ids.shape[0])
        for k in range(K):  # topic by topic: each entry's sum in the same order as completion_loglik
            prob += pi[t_doc, k] * phi_T[t_ids, k]
        doc_ll = np.bincount(t_doc, weights=t_counts * np.log(prob), minlength=n_docs)
        total = float(np.cumsum(np.concatenate([[total], doc_ll]))[-1])
        n_tokens += int(t_counts.sum())
    return total / n_tokens, n_tokens


# ------------------------------------------------------------------ data
def ensure_data(args) -> None:
    if args.data.exists():
        return
    if args.source is None:
        sys.exit(f"bench_topics: {args.data} not found; make it with `bnpvi-data convert "
                 f"{SHARED / 'train.ldac'} {args.data} --vocab {SHARED / 'vocab.txt'} --batches 5 --heldout 0.1` "
                 "or pass --source (and --vocab)")
    here = Path(sys.executable).parent / "bnpvi-data"
    cmd = [str(here) if here.exists() else "bnpvi-data", "convert", str(args.source), str(args.data),
           "--batches", "5", "--heldout", "0.1"] + (["--vocab", str(args.vocab)] if args.vocab else [])
    print(f"making {args.data}: {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True)


def training_docs(path: Path, max_docs: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(word_ids, counts as int64, doc_range, V) of the training documents, all batches in order (the first
    ``max_docs`` of them when given)."""
    from bnpvi.data.store import BatchStore

    with BatchStore.open(path) as store:
        batches = [store.read_batch(b) for b in range(store.n_batches)]
        V = store.D
    ids = np.concatenate([b.word_ids for b in batches]).astype(np.int64)
    counts = np.concatenate([b.word_counts for b in batches]).astype(np.int64)
    dr = np.concatenate([[0]] + [b.doc_range[1:] + off for b, off in
                                 zip(batches, np.cumsum([0] + [b.doc_range[-1] for b in batches[:-1]]))])
    if max_docs is not None and max_docs < dr.shape[0] - 1:
        dr = dr[:max_docs + 1]
        ids, counts = ids[:dr[-1]], counts[:dr[-1]]
    return ids, counts, dr.astype(np.int64), V


def heldout_docs(path: Path):
    """The file's held-out documents, whole (as inference sees them), as a (N, V) CSR count matrix."""
    from bnpvi.data.store import BatchStore

    with BatchStore.open(path) as store:
        return store.read_heldout().csr()


def timed_inference(args, n_docs: int, infer) -> dict:
    """Seconds of ``infer(threads)`` (the topic weights of the ``n_docs`` held-out documents) at every thread
    count of ``--infer-threads``, BLAS and OpenMP limited to it."""
    from threadpoolctl import threadpool_limits

    seconds = []
    for n in args.infer_threads:
        with threadpool_limits(n):
            start = time.perf_counter()
            infer(n)
            seconds.append(time.perf_counter() - start)
    return {"infer_threads": np.array(args.infer_threads), "infer_seconds": np.array(seconds), "infer_docs": n_docs}


# ------------------------------------------------------------------ peer workers (child processes)
class StreamedBow:
    """A gensim corpus streamed from CSR arrays: len() documents, each a list of (word id, count)."""

    def __init__(self, ids, counts, doc_range):
        self.ids, self.counts, self.doc_range = ids, counts, doc_range

    def __len__(self) -> int:
        return self.doc_range.shape[0] - 1

    def __iter__(self):
        for lo, hi in zip(self.doc_range[:-1].tolist(), self.doc_range[1:].tolist()):
            yield list(zip(self.ids[lo:hi].tolist(), self.counts[lo:hi].tolist()))


def worker_gensim(args, ids, counts, dr, V) -> dict:
    import logging

    from gensim.models import HdpModel

    logging.basicConfig(level=logging.WARNING)
    corpus = StreamedBow(ids, counts, dr)
    start = time.perf_counter()
    model = HdpModel(corpus, id2word={v: str(v) for v in range(V)}, random_state=args.seed,
                     **parse_opts(getattr(args, "gensim_opts", None)))
    seconds = time.perf_counter() - start
    alpha, beta = np.asarray(model.lda_alpha, dtype=np.float64), np.asarray(model.lda_beta, dtype=np.float64)
    print(f"gensim HdpModel: T={beta.shape[0]}, sum alpha {alpha.sum():.4g}, {seconds:.1f} s", flush=True)
    docs = heldout_docs(args.data)
    held = list(StreamedBow(docs.indices, docs.data.astype(np.int64), docs.indptr))
    return {"weights": beta, "prior": alpha, "prior_rest": 0.0, "mass": alpha, "seconds": seconds,
            "K": int(beta.shape[0]), **timed_inference(args, len(held), lambda n: model.inference(held)),
            "docs_processed": int(model.m_num_docs_processed),
            "info": f"online, chunksize {model.chunksize}, T={model.m_T}, alpha={model.m_alpha:g}, gamma={model.m_gamma:g}, "
                    f"eta={model.m_eta:g}; inference: HdpModel.inference (lda_e_step per document)"}


def worker_tomotopy(args, ids, counts, dr, V) -> dict:
    import tomotopy as tp

    opts = parse_opts(args.tomotopy_opts)
    optim = opts.pop("optim_interval", None)
    model = tp.HDPModel(tw=tp.TermWeight.ONE, seed=args.seed, **opts)
    if optim is not None:
        model.optim_interval = int(optim)
    for lo, hi in zip(dr[:-1], dr[1:]):
        model.add_doc([str(v) for v in np.repeat(ids[lo:hi], counts[lo:hi])])
    start = time.perf_counter()  # from the corpus in tomotopy: its initialisation and the sweeps
    model.train(0, workers=args.peer_workers)
    step = 10
    for done in range(0, args.peer_iters, step):
        model.train(min(step, args.peer_iters - done), workers=args.peer_workers)
        if (done + step) % 100 == 0 or done + step >= args.peer_iters:
            print(f"tomotopy: {min(done + step, args.peer_iters)} sweeps, live K {model.live_k}, ll/word "
                  f"{model.ll_per_word:.4f}, {time.perf_counter() - start:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    vocab = np.array([int(w) for w in model.vocabs], dtype=np.int64)  # tomotopy word id -> our word id
    K = model.k
    n_kv = np.zeros((K, V))
    n_dk = np.zeros((len(model.docs), K))
    for d, doc in enumerate(model.docs):
        z, w = np.asarray(doc.topics, dtype=np.intp), vocab[np.asarray(doc.words, dtype=np.intp)]
        np.add.at(n_kv, (z, w), 1.0)
        n_dk[d] = np.bincount(z, minlength=K)
    live = np.array([model.is_live_topic(k) for k in range(K)], dtype=bool) & (n_kv.sum(axis=1) > 0)
    n_kv, n_dk = n_kv[live], n_dk[:, live]
    eta, alpha, gamma, tables = float(model.eta), float(model.alpha), float(model.gamma), float(model.num_tables)
    doc_use = (n_dk > 0).sum(axis=0).astype(np.float64)
    m_k = tables * doc_use / doc_use.sum()  # tables per topic, estimated (one per document using it)
    tokens = n_kv.sum(axis=1)
    share = tables / (tables + gamma)
    print(f"tomotopy HDPModel: live K {int(live.sum())}, alpha {alpha:.4g}, gamma {gamma:.4g}, eta {eta:.4g}, "
          f"tables {tables:.0f} (documents x topics in use {doc_use.sum():.0f}), {seconds:.1f} s", flush=True)
    docs = heldout_docs(args.data)
    held = [model.make_doc([str(v) for v in np.repeat(docs.indices[lo:hi], docs.data[lo:hi].astype(np.int64))])
            for lo, hi in zip(docs.indptr[:-1], docs.indptr[1:])]
    inference = timed_inference(args, len(held), lambda n: model.infer(held, workers=n))
    return {"weights": n_kv + eta, "prior": alpha * share * m_k / tables, "prior_rest": alpha * (1 - share),
            "prior_tokens": alpha * share * tokens / tokens.sum(), "mass": tokens, "seconds": seconds, **inference,
            "K": int(live.sum()), "info": f"{args.peer_iters} Gibbs sweeps, workers={args.peer_workers or 'all'}, "
                                           f"options {opts_text(args.tomotopy_opts)}; optim_interval "
                                           f"{model.optim_interval}, final alpha={alpha:.4g}, gamma={gamma:.4g}, "
                                           f"eta={eta:.3g}, ll/word {model.ll_per_word:.4f}; inference: "
                                           "infer (Gibbs, 100 iterations, the default)"}


WORKERS = {"gensim": worker_gensim, "tomotopy": worker_tomotopy}


def parse_opts(items) -> dict:
    """KEY=VALUE strings -> {KEY: int or float}."""
    out = {}
    for item in items or []:
        key, _, value = item.partition("=")
        out[key] = int(value) if value.lstrip("-").isdigit() else float(value)
    return out


def opts_text(items) -> str:
    return " ".join(items) if items else "defaults"


def peer_worker(args) -> None:
    ids, counts, dr, V = training_docs(args.data, args.max_docs)
    out = WORKERS[args.peer_worker](args, ids, counts, dr, V)
    info = out.pop("info")
    np.savez(args.peer_out, info=np.array(info), **{k: np.asarray(v) for k, v in out.items()})


# ------------------------------------------------------------------ sections
def section_local(args) -> None:
    """Seconds per lap of our local step at several K (lap 2 of a 2-lap run, moves off)."""
    from bnpvi.data.store import BatchStore

    with BatchStore.open(args.data) as store:
        n_docs, tokens = store.n_atoms, store.n_tokens()
    print(f"## local: {n_docs} training documents, {tokens} tokens; alg={args.local_alg} init=random moves=[], "
          f"lap 2 of 2 (trace elapsed_s)")
    rows = []
    for K in args.local_ks:
        run = train_run(args, f"local_{args.local_alg}_K{K}", [f"alg={args.local_alg}", "init=random",
                                                                f"init.K={K}", "moves=[]", "alg.n_laps=2",
                                                                "alg.converge_thr=-1", "eval_every=1000"])
        if run is None:
            continue
        trace = run["trace"]
        if len(trace) < 2:
            print(f"  K={K}: the run stopped after {len(trace)} lap(s)")
            continue
        lap1, lap2 = trace[0]["elapsed_s"], trace[1]["elapsed_s"] - trace[0]["elapsed_s"]
        rows.append([K, int(trace[-1]["K"]), f"{lap1:.2f}", f"{lap2:.2f}", f"{n_docs / lap2:.0f}",
                     f"{tokens / lap2 / 1e6:.2f}", f"{run['wall']:.1f}", mib(run["rss"])])
    print_table(["K", "K end", "lap 1 s", "s/lap (lap 2)", "docs/s", "Mtokens/s", "wall s", "peak MiB"], rows)


def memo_run(args) -> dict | None:
    """The memo run of section "memo" (made once per invocation)."""
    if getattr(args, "memo", None) is None:
        overrides = ["alg=memo", f"init.K={args.K}", "moves=[merge,delete]", f"alg.n_laps={args.laps}"]
        if args.full_laps:
            overrides.append("alg.converge_thr=-1")
        overrides += args.train_opts or []
        args.memo = train_run(args, f"memo_K{args.K}", overrides) or {}
    return args.memo or None


def section_memo(args) -> None:
    """Memoized VI with merges and deletes from K = --K for --laps laps: K, ELBO, held-out, seconds, memory."""
    from bnpvi.data.store import BatchStore

    with BatchStore.open(args.data) as store:
        tokens = store.n_tokens()
    print(f"## memo: alg=memo init.K={args.K} moves=[merge,delete] alg.n_laps={args.laps}"
          f"{' alg.converge_thr=-1' if args.full_laps else ''} {' '.join(args.train_opts or [])}"
          " (kmeans++ init, seed 0, held-out every lap)")
    run = memo_run(args)
    if run is None:
        return
    last = run["trace"][-1]
    ours = read_our_model(run["dir"])
    rows = [[f"bnpvi memo+merge+delete K={args.K}", int(last["lap"]), int(last["K"]), big_topics(ours["mass"]),
             f"{last['elbo']:.6g}", f"{last['elbo'] / tokens:.4f}", f"{last['heldout_loglik']:.4f}",
             f"{last['elapsed_s']:.1f}", f"{run['wall']:.1f}", mib(run["rss"])]]
    print_table(["run", "laps", "K", "K>1%", "ELBO", "ELBO/token", "held-out nats/token", "train s", "wall s",
                 "peak MiB"], rows, ANCHORS)
    held = [f"{r['heldout_loglik']:.3f}" for r in run["trace"] if np.isfinite(r.get("heldout_loglik", np.nan))]
    print(f"held-out by lap: {' '.join(held)}")
    print(f"K by lap: {' '.join(str(int(r['K'])) for r in run['trace'])}")


def section_peers(args) -> None:
    """gensim and tomotopy HDPs on our training documents, scored by our document completion, beside ours."""
    import bnpvi
    from bnpvi.data.store import BatchStore

    docs = "all" if args.max_docs is None else f"the first {args.max_docs}"
    print(f"## peers: {docs} training documents; every model scored by completion_score (halves, seed 0) on the "
          "file's held-out documents")
    rows, notes = [], []
    with BatchStore.open(args.data) as store:
        run = None if args.no_ours else memo_run(args)
        if run is not None:
            last = run["trace"][-1]
            ours = read_our_model(run["dir"])
            start = time.perf_counter()
            score, n_tok = completion_score(store, ours["weights"], ours["prior"], ours["prior_rest"])
            took = time.perf_counter() - start
            fitted = bnpvi.load(run["dir"])
            held = heldout_docs(args.data)
            infer = timed_inference(args, held.shape[0], lambda n: fitted.transform(held))
            rows.append([f"bnpvi memo+merge+delete K={args.K} ({int(last['lap'])} laps)", int(last["K"]),
                         big_topics(ours["mass"]), f"{score:.4f}", f"{last['elapsed_s']:.1f}", f"{run['wall']:.1f}",
                         mib(run["rss"]), docs_per_s(infer)])
            same = "equal" if score == last["heldout_loglik"] else f"differ by {score - last['heldout_loglik']:.2e}"
            notes.append(f"check: bnpvi scored here {score:.12f}, trace heldout_loglik {last['heldout_loglik']:.12f} "
                         f"({same}); {n_tok} target tokens; scoring took {took:.1f} s")
        for name in args.peers:
            peer = run_peer(args, name, store)
            if peer is None:
                continue
            rows.append([peer["label"], peer["K"], peer["K>1%"], f"{peer['score']:.4f}", f"{peer['train_s']:.1f}",
                         f"{peer['wall']:.1f}", mib(peer["rss"]), docs_per_s(peer)])
            notes.extend(peer["notes"])
    print_table(["model", "K", "K>1%", "held-out nats/token", "train s", "wall s", "peak MiB",
                 f"infer docs/s ({args.infer_threads[0]} thr)"], rows, notes + ANCHORS)


def docs_per_s(timed: dict, i: int = 0) -> str:
    """Documents per second of the ``i``-th inference timing of :func:`timed_inference`."""
    return f"{float(timed['infer_docs']) / float(timed['infer_seconds'][i]):.0f}"


def run_peer(args, name: str, store) -> dict | None:
    """Train peer ``name`` on the training documents of ``args.data`` in its own child process (its worker), time its
    inference on the held-out documents (``--infer-threads``), and score it by :func:`completion_score`.

    Returns
    -------
    dict or None
        ``label``, ``K``, ``K>1%``, ``score``, ``train_s``, ``wall``, ``rss``, ``notes`` (lines to print) and the
        worker's ``infer_threads``, ``infer_seconds``, ``infer_docs``; None (with a printed reason) when the peer
        is not importable or its child failed.
    """
    try:
        __import__(name)
    except ImportError:
        print(f"{name}: skipped (not importable; `pip install {name}` into this environment to add it)")
        return None
    out_path = args.work / f"peer_{name}.npz"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--peer-worker", name, "--peer-out", str(out_path),
           "--data", str(args.data), "--seed", str(args.seed), "--peer-iters", str(args.peer_iters),
           "--peer-workers", str(args.peer_workers), "--infer-threads", *map(str, args.infer_threads)] + \
        (["--max-docs", str(args.max_docs)] if args.max_docs is not None else []) + \
        (["--tomotopy-opts", *args.tomotopy_opts] if args.tomotopy_opts else []) + \
        (["--gensim-opts", *args.gensim_opts] if getattr(args, "gensim_opts", None) else [])
    log_path = args.work / f"peer_{name}.log"
    print(f"  running: {name} (log {log_path})", flush=True)
    rc, wall, rss = run_child(cmd, log_path)
    if rc != 0 or not out_path.exists():
        failed(name, rc, log_path)
        return None
    with np.load(out_path) as z:
        peer = {k: z[k] for k in z.files}
    notes = []
    keep = peer["prior"] > 0
    if not keep.all():
        notes.append(f"{name}: {int((~keep).sum())} topics with a zero prior weight left out")
    score, _ = completion_score(store, peer["weights"][keep], peer["prior"][keep], float(peer["prior_rest"]))
    notes.append(f"{name}: {peer['info']}")
    if "prior_tokens" in peer:
        alt, _ = completion_score(store, peer["weights"][keep], peer["prior_tokens"][keep], float(peer["prior_rest"]))
        notes.append(f"{name}: with the prior beta_k proportional to tokens instead of tables: {alt:.4f}")
    label = {"gensim": f"gensim HdpModel ({opts_text(getattr(args, 'gensim_opts', None))})",
             "tomotopy": f"tomotopy HDPModel ({args.peer_iters} sweeps, {opts_text(args.tomotopy_opts)})"}[name]
    return {"label": label, "K": int(peer["K"]), "K>1%": big_topics(peer["mass"]), "score": score,
            "train_s": float(peer["seconds"]), "wall": wall, "rss": rss, "notes": notes,
            **{key: peer[key] for key in ("infer_threads", "infer_seconds", "infer_docs", "docs_processed") if key in peer}}


SECTIONS = {"local": section_local, "memo": section_memo, "peers": section_peers}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=Path("/tmp/wiki.h5"), help="the bag-of-words batch file with "
                   "held-out documents (default /tmp/wiki.h5)")
    p.add_argument("--source", type=Path, default=None, help="LDA-C corpus to convert when --data is missing")
    p.add_argument("--vocab", type=Path, default=None, help="its vocabulary file (one word per line)")
    p.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS),
                   help="which sections to run (default all)")
    p.add_argument("--local-ks", type=int, nargs="+", default=[50, 100, 200], help="K of section local")
    p.add_argument("--local-alg", choices=["vb", "memo"], default="vb", help="algorithm of section local (vb)")
    p.add_argument("--K", type=int, default=100, help="initial K of the memo run (default 100)")
    p.add_argument("--laps", type=int, default=20, help="lap limit of the memo run (default 20)")
    p.add_argument("--full-laps", action="store_true", help="run all --laps laps (alg.converge_thr=-1)")
    p.add_argument("--train-opts", nargs="+", default=None, metavar="KEY=VALUE",
                   help="more bnpvi-train options of the memo run, e.g. alg.sparse_L=8")
    p.add_argument("--max-docs", type=int, default=None, help="peers train on the first N training documents only")
    p.add_argument("--peer-iters", type=int, default=1000, help="tomotopy Gibbs sweeps (default 1000)")
    p.add_argument("--peer-workers", type=int, default=0, help="tomotopy worker threads (default 0: all cores)")
    p.add_argument("--infer-threads", type=int, nargs="+", default=[os.cpu_count() or 1],
                   help="thread counts at which every model's inference of the held-out documents is timed "
                        "(default: all cores)")
    p.add_argument("--gensim-opts", nargs="+", default=None, metavar="KEY=VALUE",
                   help="HdpModel keyword arguments (e.g. T=300 chunksize=100 max_time=60)")
    p.add_argument("--tomotopy-opts", nargs="+", default=None, metavar="KEY=VALUE",
                   help="tomotopy HDPModel options instead of its defaults (initial_k, alpha, gamma, eta, "
                        "optim_interval; e.g. initial_k=100 alpha=0.5 gamma=10 eta=0.1 optim_interval=0)")
    p.add_argument("--peers", nargs="+", default=list(WORKERS), choices=list(WORKERS),
                   help="which peers to run (default gensim tomotopy)")
    p.add_argument("--no-ours", action="store_true", help="section peers without our run (peers only)")
    p.add_argument("--seed", type=int, default=0, help="seed of the peers (default 0)")
    p.add_argument("--keep", type=Path, default=None, help="keep run directories and logs here (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--peer-worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--peer-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.peer_worker:
        peer_worker(args)
        return
    ensure_data(args)
    from bnpvi.data.store import BatchStore
    from bnpvi.kernels import topic

    with BatchStore.open(args.data) as store:
        info = (f"{args.data}: {store.n_atoms} training documents in {store.n_batches} batches, "
                f"{store.n_tokens()} tokens, V={store.D}, {store.n_heldout} held-out documents")
        if not store.has_heldout:
            sys.exit(f"bench_topics: {args.data} holds no held-out documents (convert it with --heldout 0.1)")
    try:
        threads = topic._dense.max_threads()
    except AttributeError:
        threads = "?"
    print(f"OpenMP threads {threads}; numpy {np.__version__}; "
          f"{platform.processor() or platform.machine()}; {os.cpu_count()} cores")
    print(info)
    print(code_state(), flush=True)
    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_topics_")
        args.work = Path(tmp.name)
    else:
        args.work = args.keep.resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        args.work = args.work / stamp
        args.work.mkdir()
    args.memo = None
    try:
        for name in args.sections:
            print()
            SECTIONS[name](args)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(json.dumps({"sections": args.sections, "K": args.K, "laps": args.laps, "max_docs": args.max_docs,
                      "peer_iters": args.peer_iters}))


if __name__ == "__main__":
    main()
