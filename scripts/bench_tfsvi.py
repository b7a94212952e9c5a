"""Benchmark truncation-free SVI (``alg=tfsvi``) against online HDP (gensim's ``HdpModel``) and ``alg=sovb``.

The experiment of Wang & Blei 2012 §3 (Fig. 4) on corpora we have: the HDP topic model with the paper's
hyperparameters (η = 0.01, a = γ = 1, b = α = 1), minibatch sizes S ∈ ``--sizes`` (default 10 100 500)
documents, every method given the same wall-clock budget (``--budget`` seconds of training):

* ``alg=tfsvi alg.batch_docs=S`` from 0 topics;
* ``alg=sovb`` at a fixed truncation K = ``--K`` (300), the file re-cut into batches of S documents
  (``alg.n_batches``), rate (1 + t)^-0.6 (the paper's mean-field baseline, κ = 0.6, τ0 = 1);
* gensim's ``HdpModel`` (online HDP, Wang, Paisley & Blei 2011) with T = ``--K``, chunksize S,
  κ = 0.6, τ = 1, ``max_time`` = the budget (its runner in ``scripts/bench_topics.py``);
* once, beside them: ``alg=memo`` with births, merges and deletes (its defaults) on the same budget.

Our runs are ``bnpvi-train`` child processes with a lap limit they never reach; each is sent SIGINT when
the budget has passed since its start (wall clock, start-up included), finishes its batch and writes its
model where it stopped (the runner's Ctrl-C path). Every model is scored by the same document completion
on the file's held-out documents (``completion_score`` of ``scripts/bench_topics.py``, Hughes, Kim &
Sudderth 2015 §6, Eq. 22), in nats per held-out token. Throughput is training documents per second of training (one core: every run is given
one thread), for tfsvi the documents its minibatches sampled, for gensim the documents it processed.

Data: each corpus converted with ``--heldout 0.1 --heldout-seed 0`` (made here when missing)::

    bnpvi-data convert ../shared/data/wiki/train.ldac /tmp/wiki_ho.h5 --vocab ../shared/data/wiki/vocab.txt \\
        --heldout 0.1 --heldout-seed 0
    bnpvi-data convert ../shared/data/debian/long.npz /tmp/debian_long_ho.h5 --heldout 0.1 --heldout-seed 0

Usage::

    python scripts/bench_tfsvi.py                                  # wiki and debian/long, 600 s each
    python scripts/bench_tfsvi.py --corpora wiki --sizes 100 --budget 20 --no-memo   # a quick trial
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_topics import (bnpvi_train, code_state, completion_score, print_table, read_our_model,  # noqa: E402
                          run_peer)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "wiki": (SHARED / "wiki" / "train.ldac", ["--vocab", str(SHARED / "wiki" / "vocab.txt")]),
    "debian_long": (SHARED / "debian" / "long.npz", []),
}
PAPER = ["model.alpha=1", "model.gamma=1", "obs.lam=0.01"]  # Wang & Blei 2012 §3: η = 0.01, a = b = 1
ONE_CORE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def ensure_corpus(name: str, work: Path) -> Path:
    path = work / f"{name}_ho.h5"
    if not path.exists():
        src, extra = CORPORA[name]
        here = Path(sys.executable).parent / "bnpvi-data"
        cmd = [str(here) if here.exists() else "bnpvi-data", "convert", str(src), str(path), *extra,
               "--heldout", "0.1", "--heldout-seed", "0"]
        print(f"making {path}: {' '.join(cmd[1:])}", flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def budgeted_run(data: Path, work: Path, name: str, overrides: list[str], budget: float) -> dict | None:
    """``bnpvi-train`` on ``data`` stopped by SIGINT ``budget`` wall seconds after its start (start-up included)."""
    run_dir = work / name
    cmd = [bnpvi_train(), "model=hdp_topic", "obs=mult", "data=hdf5", f"data.path={data}", *PAPER, *overrides,
           "alg.n_laps=100000", "alg.converge_thr=-1", "eval_every=100000", "checkpoint_every=100000",
           "plots=false", f"hydra.run.dir={run_dir}"]
    print(f"  running: {' '.join(cmd[1:])}", flush=True)
    log = open(work / f"{name}.log", "w")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **ONE_CORE})
    while proc.poll() is None:
        time.sleep(0.5)
        if time.perf_counter() - start >= budget:
            proc.send_signal(signal.SIGINT)
            break
    proc.wait()
    log.close()
    if not (run_dir / "model.h5").exists():
        print(f"  {name}: no model written (log {work / (name + '.log')})")
        return None
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"dir": run_dir, "summary": summary, "train_s": float(summary["elapsed_s"])}


def score_ours(store, run: dict, docs: float) -> dict:
    model = read_our_model(run["dir"])
    score, _ = completion_score(store, model["weights"], model["prior"], model["prior_rest"])
    mass = model["mass"]
    return {"K": len(mass), "K>1%": int(np.sum(mass > 0.01 * mass.sum())), "score": score,
            "train_s": run["train_s"], "docs_per_s": docs / max(run["train_s"], 1e-9)}


def tfsvi_docs(run_dir: Path) -> int:
    """Documents the tfsvi run sampled (its checkpoint's count, written when it stopped)."""
    from bnpvi.io.checkpoint import load_checkpoint

    return int(load_checkpoint(run_dir)["alg"]["seen"])


def corpus_rows(args, name: str) -> list[list]:
    from bnpvi.data.store import BatchStore

    data = ensure_corpus(name, args.work)
    store = BatchStore.open(data)
    D = store.n_atoms
    rows = []
    for S in args.sizes:
        tf = budgeted_run(data, args.work, f"{name}_tfsvi_S{S}", ["alg=tfsvi", f"alg.batch_docs={S}"], args.budget)
        if tf is not None:
            out = score_ours(store, tf, tfsvi_docs(tf["dir"]))
            rows.append([name, S, "tfsvi (from 0)", out["K"], out["K>1%"], f"{out['score']:.4f}",
                         f"{out['train_s']:.0f}", f"{out['docs_per_s']:.0f}"])
        so = budgeted_run(data, args.work, f"{name}_sovb_S{S}",
                          ["alg=sovb", f"init.K={args.K}", "moves=[]", f"alg.n_batches={max(1, D // S)}",
                           "alg.rate_delay=1", "alg.rate_exponent=0.6"], args.budget)
        if so is not None:
            out = score_ours(store, so, 1.0)
            rows.append([name, S, f"sovb K={args.K}", out["K"], out["K>1%"], f"{out['score']:.4f}",
                         f"{out['train_s']:.0f}", ""])
        peer_args = SimpleNamespace(work=args.work, data=data, seed=0, peer_iters=0, peer_workers=1,
                                    infer_threads=[1], max_docs=None, tomotopy_opts=None,
                                    gensim_opts=[f"T={args.K}", f"chunksize={S}", "kappa=0.6", "tau=1",
                                                 f"max_time={int(args.budget)}"])
        peer = run_peer(peer_args, "gensim", store)
        if peer is not None:
            rate = float(peer.get("docs_processed", 0)) / max(peer["train_s"], 1e-9)
            rows.append([name, S, f"gensim HdpModel T={args.K}", peer["K"], peer["K>1%"], f"{peer['score']:.4f}",
                         f"{peer['train_s']:.0f}", f"{rate:.0f}"])
    if args.memo:
        memo = budgeted_run(data, args.work, f"{name}_memo", ["alg=memo", "moves=[birth,merge,delete]"], args.budget)
        if memo is not None:
            out = score_ours(store, memo, 1.0)
            rows.append([name, "batches", "memo + moves", out["K"], out["K>1%"], f"{out['score']:.4f}",
                         f"{out['train_s']:.0f}", ""])
    store.close()
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500], help="minibatch sizes S (documents)")
    p.add_argument("--budget", type=float, default=600.0, help="training seconds of every run (default 600)")
    p.add_argument("--K", type=int, default=300, help="truncation of sovb and gensim (default 300)")
    p.add_argument("--no-memo", dest="memo", action="store_false", help="skip the memo-with-moves row")
    p.add_argument("--work", type=Path, default=None, help="data files, run directories and logs (default: temp)")
    args = p.parse_args(argv)
    args.work = Path(tempfile.mkdtemp(prefix="bench_tfsvi_")) if args.work is None else args.work
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.corpora:
        rows += corpus_rows(args, name)
    print()
    print_table(["corpus", "S", "method", "K", "K>1%", "heldout nats/token", "train s", "train docs/s"], rows,
                [f"budget {args.budget:g} s of training per run, one thread each; {code_state()}; "
                 f"work dir {args.work}",
                 "heldout: document completion on the file's held-out documents (10 %, seed 0), halves split"])


if __name__ == "__main__":
    main()
