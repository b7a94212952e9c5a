"""Regression benchmark: the cases whose speed or quality a change must not lose, beside recorded figures.

Each case is the plain command a user runs (``bnpvi-train`` in a child process, one thread, from the data
files of ../shared/data converted here with ``bnpvi-data convert``), or, for ``points32``, the estimator
call. Per case it prints the wall seconds of the command, the training seconds of the trace, laps, K, the
final ELBO, the case's quality figure and, for wiki, the peak resident memory of the child; then the figures
recorded below (``RECORDED``: measured on this kind of 2-core machine, with the commit they were measured on)
and the targets of the issue that set them. A case whose data set is missing is skipped with a message.

Cases (``--cases``):

* ``bars``: ``bnpvi-train model=hdp_topic init.K=1 'moves=[birth,merge,delete]' data.path=bars.h5 seed=1``,
  bars_one_per_doc in 4 batches; quality: K, the topics found (the data holds 6 bars).
* ``wiki``: ``bnpvi-train model=hdp_topic init.K=100 'moves=[merge,delete]' alg.n_laps=20 data.path=wiki.h5``,
  the wiki corpus in 5 batches with 10 % of the documents held out; quality: held-out log-likelihood per
  token (document completion, the trace's ``heldout_loglik``).
* ``mocap6``: ``bnpvi-train model=hdp_hmm obs=ar_gauss init.K=1 data.path=mocap6.h5 seed=1``; quality: the
  normalized Hamming distance to the labels (``summary.json``); whether it converged before the lap limit.
* ``toy``: ``bnpvi-train`` (the README's first command); quality: ARI.
* ``points32``: ``bnpvi.DPMixture(random_state=0).fit(X)`` on 100,000 × 32 points of 16 full-covariance
  Gaussians (means uniform in [−10, 10]^32, covariances A Aᵀ, A ~ N(0, 1/D)), against scikit-learn's
  ``GaussianMixture(16)`` on the same points, timed in the same run; quality: NMI to the true labels.

Usage::

    python scripts/bench_regress.py                       # every case (about 5 minutes today)
    python scripts/bench_regress.py --cases bars toy
    python scripts/bench_regress.py --data ../shared/data --keep /tmp/regress
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

RECORDED = {
    # case: [(commit, seconds, laps, K, quality, note)]; seconds are the command's training seconds (trace)
    "bars": [("(issue 21 era)", 2.2, None, 6, None, "fast: 1.6-2.2 s"),
             ("c199991", 34.0, None, 6, None, "issue 49's measure"),
             ("e01c663", 50.3, 56, 6, None, "alone; 04232ab the same, A/B in one session"),
             ("764279b", 27.9, 55, 6, None, "alone; the compiled Newton stick solver")],
    "wiki": [("76badd5", 36.3, 20, None, -7.830, "254 MiB"),
             ("c199991", 106.0, 20, None, -7.800, "287 MB"),
             ("e01c663", 133.3, 20, 41, -7.8002, "260 MiB"),
             ("764279b", 116.7, 20, 41, -7.8005, "249 MiB; the Newton stick solver")],
    "mocap6": [("f79a3d0^", 3.1, None, None, 0.43, "Hamming"),
               ("c199991", 51.7, 100, None, 0.34, "stopped at the lap limit"),
               ("e01c663", 66.7, 100, 13, 0.3367, "stopped at the lap limit"),
               ("764279b", 39.1, 100, 13, 0.3367, "the Newton stick solver; still at the lap limit")],
    "toy": [("(earlier)", None, 33, 8, 0.9997, "ARI"),
            ("c199991", None, 42, 8, 0.9997, "ARI"),
            ("e01c663", 4.4, 42, 8, 0.9997, "ARI"),
            ("764279b", 1.3, 13, 8, 0.9997, "ARI; moves=[split,merge,delete], not the default")],
    "points32": [("c199991", 54.5, None, 16, 1.0, "NMI; GaussianMixture(16) 3.2 s"),
                 ("e01c663", 91.5, None, 16, 1.0, "NMI; GaussianMixture(16) 4.0 s, both on 1 thread"),
                 ("764279b", 11.3, 15, 16, 1.0, "NMI; moves=[split,merge,delete] (not the default: 90.9 s), "
                  "GaussianMixture(16) 3.9 s: 2.9×")],
}

TARGETS = {
    "bars": "≤ 2.2 s, 6 topics on every seed",
    "wiki": "≤ 36 s and ≤ 260 MB for 20 laps, held-out ≥ −7.80",
    "mocap6": "≤ 5 s converged (not at the lap limit), median Hamming ≤ 0.36 over 10 seeds",
    "toy": "≤ 33 laps, K 8",
    "points32": "within 3× GaussianMixture(16)'s seconds",
}


def run_train(args: list[str], cwd: Path) -> tuple[float, float, dict, list[dict]]:
    """``bnpvi-train args`` in a child process on one thread: (wall s, peak MiB, summary.json, trace rows)."""
    run = cwd / f"run{len(list(cwd.glob('run*')))}"
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bnpvi.cli.train", *args, f"hydra.run.dir={run}", "plots=false"],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"bench_regress: bnpvi-train {' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    summary = json.loads((run / "summary.json").read_text())
    with open(run / "trace.csv") as fh:
        trace = list(csv.DictReader(fh))
    return wall, usage.ru_maxrss / 1024, summary, trace


def convert(source: Path, dest: Path, *options: str) -> Path:
    if not dest.exists():
        subprocess.run([sys.executable, "-m", "bnpvi.cli.data", "convert", str(source), str(dest), *options],
                       check=True, stdout=subprocess.DEVNULL)
    return dest


def row(case: str, wall: float, summary: dict, trace: list[dict], quality: str, extra: str = "") -> None:
    train = float(trace[-1]["elapsed_s"])
    print(f"{case:<9} {'now':<15} {wall:>7.1f} {train:>8.1f} {len(trace):>5} {summary['K']:>4} "
          f"{summary['elbo']:>16.6g} {quality:>12}  {extra}", flush=True)


def recorded(case: str) -> None:
    for commit, seconds, laps, K, quality, note in RECORDED[case]:
        fmt = lambda v, spec: "" if v is None else format(v, spec)  # noqa: E731
        print(f"{'':<9} {commit:<15} {'':>7} {fmt(seconds, '.1f'):>8} {fmt(laps, 'd'):>5} {fmt(K, 'd'):>4} "
              f"{'':>16} {fmt(quality, '.4g'):>12}  {note}")
    print(f"{'':<9} target: {TARGETS[case]}", flush=True)


def missing(case: str, source: Path) -> bool:
    """Whether the case's data file is absent (said in one line)."""
    if source.is_file():
        return False
    print(f"{case}: skipped ({source} not found)")
    return True


def case_bars(data: Path, tmp: Path) -> None:
    source = data / "bars_one_per_doc" / "dataset.npz"
    if missing("bars", source):
        return
    path = convert(source, tmp / "bars.h5", "--batches", "4")
    wall, _, summary, trace = run_train(["model=hdp_topic", "init.K=1", "moves=[birth,merge,delete]",
                                         f"data.path={path}", "seed=1"], tmp)
    row("bars", wall, summary, trace, f"K {summary['K']}")
    recorded("bars")


def case_wiki(data: Path, tmp: Path) -> None:
    source = data / "wiki" / "train.ldac"
    if missing("wiki", source):
        return
    path = convert(source, tmp / "wiki.h5", "--vocab", str(data / "wiki" / "vocab.txt"), "--batches", "5",
                   "--heldout", "0.1")
    wall, peak, summary, trace = run_train(["model=hdp_topic", "init.K=100", "moves=[merge,delete]",
                                            "alg.n_laps=20", f"data.path={path}"], tmp)
    row("wiki", wall, summary, trace, f"{float(trace[-1]['heldout_loglik']):.4f}", f"{peak:.0f} MiB peak")
    recorded("wiki")


def case_mocap6(data: Path, tmp: Path) -> None:
    source = data / "mocap6" / "dataset.npz"
    if missing("mocap6", source):
        return
    path = convert(source, tmp / "mocap6.h5", "--sequences", "doc_range", "--labels", "TrueZ")
    wall, _, summary, trace = run_train(["model=hdp_hmm", "obs=ar_gauss", "init.K=1", f"data.path={path}",
                                         "seed=1"], tmp)
    row("mocap6", wall, summary, trace, f"{summary['hamming']:.4f}",
        f"converged: {summary['converged']} ({summary['stop_reason']})")
    recorded("mocap6")


def case_toy(data: Path, tmp: Path) -> None:
    wall, _, summary, trace = run_train([], tmp)
    row("toy", wall, summary, trace, f"{summary['ari']:.4f}")
    recorded("toy")


def blobs32(n: int = 100_000, D: int = 32, K: int = 16, seed: int = 0):
    rng = np.random.default_rng(seed)
    means = rng.uniform(-10, 10, size=(K, D))
    labels = rng.integers(K, size=n)
    X = np.empty((n, D))
    for k in range(K):
        A = rng.normal(0, 1 / np.sqrt(D), size=(D, D))
        rows = labels == k
        X[rows] = means[k] + rng.standard_normal((rows.sum(), D)) @ A.T
    return X, labels


def case_points32(data: Path, tmp: Path) -> None:
    from sklearn.metrics import normalized_mutual_info_score
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    import bnpvi

    X, labels = blobs32()
    DPMixture = bnpvi.DPMixture  # the estimators' lazy import (Hydra, scikit-learn) outside the timing, as the peer's
    with threadpool_limits(limits=1):
        start = time.perf_counter()
        ours = DPMixture(random_state=0).fit(X)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        theirs = GaussianMixture(16, random_state=0).fit(X)
        peer = time.perf_counter() - start
    nmi = normalized_mutual_info_score(labels, ours.predict(X))
    K = int(getattr(ours, "n_components_", len(np.unique(ours.predict(X)))))
    print(f"{'points32':<9} {'now':<15} {seconds:>7.1f} {'':>8} {'':>5} {K:>4} {'':>16} {nmi:>12.4f}  "
          f"GaussianMixture(16): {peer:.1f} s (ours {seconds / peer:.1f}×), NMI "
          f"{normalized_mutual_info_score(labels, theirs.predict(X)):.4f}", flush=True)
    recorded("points32")


CASES = {"bars": case_bars, "wiki": case_wiki, "mocap6": case_mocap6, "toy": case_toy, "points32": case_points32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data directory (default ../shared/data)")
    parser.add_argument("--keep", type=Path, help="keep the converted files and runs here (default: a temporary "
                                                  "directory)")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    print(f"bench_regress at {commit or 'an unknown commit'}, 1 thread per run")
    print(f"{'case':<9} {'commit':<15} {'wall s':>7} {'train s':>8} {'laps':>5} {'K':>4} {'ELBO':>16} "
          f"{'quality':>12}  notes")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        for case in args.cases:
            CASES[case](args.data, tmp)


if __name__ == "__main__":
    main()
