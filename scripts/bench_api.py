"""Benchmark the Python API (issue 22's targets): prediction speed of fitted estimators, and fit's overhead.

Every timing runs at each thread count of ``--threads`` (BLAS and OpenMP limited to it with
threadpoolctl; a child process gets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS); models are fitted
once, at the default threads. The last table gathers one line per target.

Section "predict": ``DPMixture.predict`` on ``--points`` (1,000,000) x 16 points drawn from 25
Gaussians, with K = 25 (``DPMixture(K=25, alg="vb", moves=[])`` fitted on the first ``--fit-points``),
in points per second (best of ``--repeats``), against scikit-learn's ``GaussianMixture`` and
``BayesianGaussianMixture`` (25 components, full covariances, fitted on the same points) ``predict``.
Target: at least 5 M points/s.

Section "hmm": ``HDPHMM(obs="ar_gauss")`` fitted on mocap6 (``--mocap6``, its six sequences from X;
the first step of each is only its regressor), then ``predict`` of the six sequences (Viterbi;
median of 20) against one lap's forward-backward: the local step of the same sequences under the
same globals (E ln p(x | φ) and forward-backward, median of 20). Target: at most 1.5 x.

Section "fit": ``DPMixture(n_batches=5).fit(X)`` on the toy points (the cached file of ``data=toy``)
against ``bnpvi-train`` with the same config on that file in a child process: the fit's whole wall
time (data file, training, loading, labels) over the CLI run's training seconds (its summary's
elapsed_s) and over its whole wall time (start-up included); the ELBOs must be equal. Target: at
most 1.1 x the training seconds.

Section "topics": ``HDPTopicModel(K=100, moves=["merge", "delete"], n_laps=20)`` fitted on the
training documents of debian/long (``--debian``, converted with 5 batches, ``--heldout 0.1
--heldout-seed 0``; ``--max-docs`` keeps the first ones), then ``transform`` of the held-out
documents in documents per second (best of ``--repeats``), and their held-out score (``score``:
document completion, nats per token). The peers gensim and tomotopy run through
``scripts/bench_topics.py``'s peer workers (trained on the same documents in child processes,
their own inference of the same held-out documents timed there, scored by its
``completion_score``); a peer that is not importable is skipped with the reason. Target: more
documents per second than both at an equal or better held-out score.

Section "startup": the wall time of commands in new processes (median of ``--startup-repeats``):
``import bnpvi``, ``bnpvi-train --help``, a refused start (a run directory that already holds a run),
a config error (an unknown key), ``bnpvi-data --help``, and ``import bnpvi`` plus the first
``DPMixture().fit`` of 150 x 4 points. Target: ``--help`` and the refused start under 1 s.

Usage::

    python scripts/bench_api.py                                # all sections, 1 and 2 threads
    python scripts/bench_api.py --quick                        # a smoke run: small sizes, few laps
    python scripts/bench_api.py --sections predict fit --threads 1
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import bench_topics  # scripts/bench_topics.py: its table printer, child runner and peer workers
from timing import best_of  # scripts/timing.py

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def median_of(fn, repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def per_thread(args, fn) -> list:
    """``fn()`` at every thread count of ``--threads``, BLAS and OpenMP limited to it."""
    out = []
    for n in args.threads:
        with threadpool_limits(n):
            out.append(fn())
    return out


def blobs(n: int, D: int, K: int, seed: int = 0) -> np.ndarray:
    """n points in D dimensions from K unit-covariance Gaussians with well separated means."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=6.0, size=(K, D))
    return means[rng.integers(0, K, n)] + rng.standard_normal((n, D))


# -------------------------------------------------------------------- sections
def section_predict(args, targets: list) -> None:
    """DPMixture.predict vs scikit-learn's GaussianMixture and BayesianGaussianMixture at K = 25."""
    from sklearn.mixture import BayesianGaussianMixture, GaussianMixture

    import bnpvi

    K, D = 25, 16
    X = blobs(args.points, D, K)
    train = X[:args.fit_points]
    models = {"bnpvi DPMixture": bnpvi.DPMixture(K=K, alg="vb", moves=[], n_laps=args.fit_laps, random_state=0),
              "sklearn GaussianMixture": GaussianMixture(K, random_state=0),
              "sklearn BayesianGaussianMixture": BayesianGaussianMixture(n_components=K, random_state=0)}
    print(f"## predict: {args.points} x {D} points from {K} Gaussians; models fitted on the first {args.fit_points}; "
          f"points/s, best of {args.repeats}")
    rows, rates = [], {}
    for name, model in models.items():
        model.fit(train)
        K_fit = getattr(model, "n_components_", K)
        rates[name] = per_thread(args, lambda: args.points / best_of(lambda: model.predict(X), args.repeats)[0])
        rows += [[name, K_fit, n, f"{rate / 1e6:.2f}"] for n, rate in zip(args.threads, rates[name])]
    bench_topics.print_table(["model", "K", "threads", "M points/s"], rows)
    ours = rates.pop("bnpvi DPMixture")
    for i, n in enumerate(args.threads):
        best_peer = max(rates, key=lambda name: rates[name][i])
        targets.append(["DPMixture.predict M points/s", n, f"{ours[i] / 1e6:.2f}",
                        f"{rates[best_peer][i] / 1e6:.2f} ({best_peer.split()[1]})",
                        f"{ours[i] / rates[best_peer][i]:.2f}", ">= 5 M/s"])


def section_hmm(args, targets: list) -> None:
    """HDPHMM.predict on mocap6 vs one lap's forward-backward under the same globals."""
    import bnpvi
    from bnpvi.data.batch import SeqBatch
    from bnpvi.data.seq import lag_sequences

    if not args.mocap6.is_file():
        print(f"## hmm: skipped ({args.mocap6} not found; pass --mocap6 PATH/dataset.npz)")
        return
    with np.load(args.mocap6) as z:
        X, seq_range = np.ascontiguousarray(z["X"], dtype=np.float64), np.asarray(z["doc_range"], dtype=np.int64)
    seqs = np.split(X, seq_range[1:-1])
    est = bnpvi.HDPHMM(obs="ar_gauss", n_laps=args.hmm_laps, random_state=0).fit(seqs)
    fitted = est.fitted_model_
    steps, previous, lagged_range = lag_sequences(X, seq_range)  # what predict regresses on, as the fit did
    lagged = SeqBatch(steps, lagged_range, previous)
    print(f"## hmm: mocap6, HDPHMM(obs='ar_gauss', n_laps={args.hmm_laps}) -> K={est.n_components_}; "
          f"{lagged.n_atoms} steps; median of 20 [ms]")
    rows = []
    for n, (predict, local) in zip(args.threads, per_thread(args, lambda: (
            median_of(lambda: est.predict(seqs), 20),
            median_of(lambda: fitted.model.local_step(lagged, fitted.globals_), 20)))):
        rows.append([n, f"{1e3 * predict:.2f}", f"{1e3 * local:.2f}", f"{predict / local:.2f}"])
        targets.append(["HDPHMM.predict / one lap's forward-backward", n, f"{1e3 * predict:.2f} ms",
                        f"{1e3 * local:.2f} ms", f"{predict / local:.2f}", "<= 1.5"])
    bench_topics.print_table(["threads", "predict ms", "forward-backward ms", "ratio"], rows)


def section_fit(args, targets: list) -> None:
    """DPMixture().fit(X) on the toy points vs the bnpvi-train run of the same config."""
    import bnpvi
    from bnpvi.data.store import BatchStore
    from bnpvi.data.toy import ensure_toy

    path = ensure_toy()
    with BatchStore.open(path) as store:
        X = np.concatenate([store.read_batch(b).X for b in range(store.n_batches)])
        n_batches = store.n_batches
    print(f"## fit: the toy points ({X.shape[0]} x {X.shape[1]}, {n_batches} batches), DPMixture(n_batches="
          f"{n_batches}) vs bnpvi-train data=hdf5 alg.n_batches={n_batches}; median of {args.fit_repeats} [s]")
    rows = []
    for n in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n),
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        cli = []
        for i in range(args.fit_repeats):
            run_dir = args.work / f"cli_{n}_{i}"
            cmd = [sys.executable, "-m", "bnpvi.cli.train", "data=hdf5", f"data.path={path}",
                   f"alg.n_batches={n_batches}", f"hydra.run.dir={run_dir}"]
            start = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=args.work)
            summary = json.loads((run_dir / "summary.json").read_text())
            cli.append((time.perf_counter() - start, summary["elapsed_s"], summary["elbo"]))
        with threadpool_limits(n):
            fits = []
            for _ in range(args.fit_repeats):
                start = time.perf_counter()
                est = bnpvi.DPMixture(n_batches=n_batches).fit(X)
                fits.append(time.perf_counter() - start)
        wall, train_s = np.median([c[0] for c in cli]), np.median([c[1] for c in cli])
        fit = float(np.median(fits))
        same = "yes" if est.elbo_ == cli[0][2] else f"no ({est.elbo_:.10g} vs {cli[0][2]:.10g})"
        rows.append([n, f"{fit:.3f}", f"{train_s:.3f}", f"{wall:.3f}", f"{fit / train_s:.2f}", same])
        targets.append(["DPMixture().fit / CLI training s", n, f"{fit:.3f} s", f"{train_s:.3f} s",
                        f"{fit / train_s:.2f}", "<= 1.10"])
    bench_topics.print_table(["threads", "fit wall s", "CLI training s", "CLI wall s", "fit / training",
                              "same ELBO"], rows)


def section_startup(args, targets: list) -> None:
    """Commands' wall time from a new process (Python's start-up included)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               BNPVI_CACHE=str(args.work / "cache"))
    train = [sys.executable, "-m", "bnpvi.cli.train"]
    held = args.work / "held"
    subprocess.run([*train, "data.n_atoms=300", "alg.n_laps=2", f"hydra.run.dir={held}"], env=env, check=True,
                   capture_output=True, cwd=args.work)
    fit = ("import numpy as np, bnpvi; X = np.random.default_rng(0).normal(size=(150, 4)); "
           "bnpvi.DPMixture(random_state=0).fit(X)")
    cases = [("import bnpvi", [sys.executable, "-c", "import bnpvi"], 0, None),
             ("bnpvi-train --help", [*train, "--help"], 0, 1.0),
             ("bnpvi-train, a refused start", [*train, "data.n_atoms=300", f"hydra.run.dir={held}"], 2, 1.0),
             ("bnpvi-train, an unknown key", [*train, "alg.no_such_key=1"], 2, None),
             ("bnpvi-data --help", [sys.executable, "-m", "bnpvi.cli.data", "--help"], 0, None),
             ("import bnpvi + first DPMixture().fit (150 x 4)", [sys.executable, "-c", fit], 0, None)]
    print(f"## startup: wall time of a new process, median of {args.startup_repeats} [s]")
    rows = []
    for name, cmd, status, goal in cases:
        times = []
        for _ in range(args.startup_repeats):
            start = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, cwd=args.work)
            times.append(time.perf_counter() - start)
            if proc.returncode != status:
                raise SystemExit(f"{name}: exit {proc.returncode}, expected {status}: {proc.stderr.decode()[-500:]}")
        wall = float(np.median(times))
        rows.append([name, f"{wall:.3f}"])
        if goal is not None:
            targets.append([name, 1, f"{wall:.3f} s", "", "", f"< {goal:g} s"])
    bench_topics.print_table(["command", "wall s"], rows)


def topic_file(args) -> Path:
    """debian/long converted as the targets ask (5 batches, 10 % held out with seed 0), made once in the work
    directory."""
    from bnpvi.data.convert import convert

    path = args.work / "long.h5"
    if not path.exists():
        convert(args.debian, path, n_batches=5, heldout=0.1, heldout_seed=0,
                vocab=args.debian.with_name(args.debian.stem + "_vocab.txt"))
    return path


def section_topics(args, targets: list) -> None:
    """HDPTopicModel.transform of debian/long's held-out documents vs gensim's and tomotopy's inference."""
    import scipy.sparse as sp

    import bnpvi
    from bnpvi.data.store import BatchStore

    if not args.debian.is_file():
        print(f"## topics: skipped ({args.debian} not found; pass --debian PATH/long.npz)")
        return
    path = topic_file(args)
    ids, counts, dr, V = bench_topics.training_docs(path, args.max_docs)
    train = sp.csr_matrix((counts.astype(np.float64), ids, dr), shape=(dr.shape[0] - 1, V))
    held = bench_topics.heldout_docs(path)
    est = bnpvi.HDPTopicModel(K=100, moves=["merge", "delete"], n_laps=args.laps, n_batches=5, random_state=0)
    start = time.perf_counter()
    est.fit(train)
    fit_s = time.perf_counter() - start
    score = est.score(held)
    ours = per_thread(args, lambda: held.shape[0] / best_of(lambda: est.transform(held), args.repeats)[0])
    print(f"## topics: debian/long, {train.shape[0]} training documents, {held.shape[0]} held-out; "
          f"HDPTopicModel(K=100, moves=[merge, delete], n_laps={args.laps}) -> K={est.n_components_} in "
          f"{fit_s:.1f} s; transform docs/s, best of {args.repeats}")
    rows = [[f"bnpvi HDPTopicModel ({args.laps} laps)", est.n_components_, f"{score:.4f}", n, f"{rate:.0f}"]
            for n, rate in zip(args.threads, ours)]
    peers = argparse.Namespace(work=args.work, data=path, seed=0, peer_iters=args.peer_iters, peer_workers=0,
                               infer_threads=args.threads, max_docs=args.max_docs, tomotopy_opts=None)
    notes = []
    with BatchStore.open(path) as store:
        for name in bench_topics.WORKERS:
            peer = bench_topics.run_peer(peers, name, store)
            if peer is None:
                continue
            notes.extend(peer["notes"])
            for i, n in enumerate(args.threads):
                rate = float(peer["infer_docs"]) / float(peer["infer_seconds"][i])
                rows.append([peer["label"], peer["K"], f"{peer['score']:.4f}", n, f"{rate:.0f}"])
                targets.append([f"HDPTopicModel.transform docs/s vs {name}", n, f"{ours[i]:.0f} ({score:.3f} nats)",
                                f"{rate:.0f} ({peer['score']:.3f} nats)", f"{ours[i] / rate:.2f}",
                                "> 1 at >= peer's score"])
    bench_topics.print_table(["model", "K", "held-out nats/token", "threads", "docs/s"], rows, notes)


SECTIONS = {"predict": section_predict, "hmm": section_hmm, "fit": section_fit, "topics": section_topics,
            "startup": section_startup}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS),
                   help="which sections to run (default all)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default 1 2)")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 100,000 points, 5 mocap6 laps, 1 fit repeat, 2 topic laps on 3,000 documents, "
                        "50 tomotopy sweeps")
    p.add_argument("--points", type=int, default=None, help="points predicted (default 1,000,000)")
    p.add_argument("--fit-points", type=int, default=20000, help="points the mixtures are fitted on (default 20000)")
    p.add_argument("--fit-laps", type=int, default=20, help="laps of the DPMixture fitted there (default 20)")
    p.add_argument("--repeats", type=int, default=3, help="best of this many calls (default 3)")
    p.add_argument("--mocap6", type=Path, default=SHARED / "mocap6" / "dataset.npz", help="the mocap6 NPZ file")
    p.add_argument("--hmm-laps", type=int, default=None, help="lap limit of the mocap6 fit (default 100)")
    p.add_argument("--fit-repeats", type=int, default=None, help="fits and CLI runs per thread count (default 3)")
    p.add_argument("--startup-repeats", type=int, default=5, help="runs of each start-up command (default 5)")
    p.add_argument("--debian", type=Path, default=SHARED / "debian" / "long.npz", help="debian/long.npz")
    p.add_argument("--laps", type=int, default=None, help="laps of the topic model (default 20)")
    p.add_argument("--max-docs", type=int, default=None, help="train the topic models on the first N documents only")
    p.add_argument("--peer-iters", type=int, default=None, help="tomotopy Gibbs sweeps (default 1000)")
    args = p.parse_args(argv)
    quick = args.quick
    args.points = args.points or (100_000 if quick else 1_000_000)
    args.hmm_laps = args.hmm_laps or (5 if quick else 100)
    args.fit_repeats = args.fit_repeats or (1 if quick else 3)
    args.laps = args.laps or (2 if quick else 20)
    args.max_docs = args.max_docs or (3000 if quick else None)
    args.peer_iters = args.peer_iters or (50 if quick else 1000)

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; numpy {np.__version__}; "
          f"{bench_topics.code_state()}")
    targets = []
    with tempfile.TemporaryDirectory(prefix="bench_api_") as work:
        args.work = Path(work)
        for name in args.sections:
            print()
            SECTIONS[name](args, targets)
    print()
    print("## targets")
    bench_topics.print_table(["target", "threads", "ours", "peer / reference", "ratio", "goal"], targets)


if __name__ == "__main__":
    main()
