"""Benchmark: memoized VI with birth/merge/delete from K=1 against full VB at fixed K.

A generated data set (default N=100,000 points in D=16 from 25 Gaussians, 10 batches)
is fitted by
  * memo + moves=[birth,merge,delete] from K=1,
  * vb from Bregman k-means++ at K=25 (the true number) and K=100;
and, when ../shared/data is present, memo + moves from K=1 on asterisk_k8 and
Old Faithful. Prints final K (all clusters, and those with > 1% of the data), ELBO
per atom, seconds and laps.

Section "seeds" (births on data that defeat naive births, ``bnpvi.data.generate``):
(a) 48-D points from 12 full-covariance clusters of 100-300 points, (b) 6,000
documents of 6-16 tokens from 10 topics over 3,000 words; ``--seeds`` seeds from
K = 1 (alg=memo's default moves) and from K = 50 (merge, delete; for (b) also with
reassign); final K and clusters with > 1 % of the atoms, ELBO per atom (min, median, max),
the largest gap to the best ELBO of any run, and training seconds.

Section "real" (needs ../shared/data): ``--seeds`` seeds from K = 1 and from K = 50, both with
alg=memo's default moves, on real short documents (debian/short, 8 batches, 100 laps) and
image patches (zero-mean Gaussians, 4 batches, 40 laps).

Usage: python scripts/bench_moves.py [--quick] [--n N] [--seeds 10] [--sections gen seeds real]
       [--real debian/short patches]
"""
from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_module

from bnpvi.config import register_configs
from bnpvi.data.convert import convert
from bnpvi.data.generate import gaussian_clusters, topic_documents
from bnpvi.data.store import write_documents, write_points
from bnpvi.learn import runner

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def make_data(n: int, D: int, K: int, seed: int = 0):
    """K Gaussians with random means (spread 3) and random covariances (scales 0.3-1.5), unequal weights."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=3.0, size=(K, D))
    weights = rng.dirichlet(np.full(K, 5.0))
    labels = rng.choice(K, size=n, p=weights)
    X = np.empty((n, D))
    for k in range(K):
        idx = np.flatnonzero(labels == k)
        A = rng.normal(size=(D, D)) / np.sqrt(D) * rng.uniform(0.3, 1.5)
        X[idx] = means[k] + rng.normal(size=(idx.size, D)) @ A.T
    return X, labels


def fit(path: Path, out: Path, *overrides: str) -> dict:
    with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        cfg = compose(config_name="train", overrides=["data=hdf5", f"data.path={path}", *overrides])
    start = time.perf_counter()
    summary = runner.train(cfg, out)
    summary["wall_s"] = time.perf_counter() - start
    return summary


def row(name: str, summary: dict) -> str:
    counts = np.asarray(summary["counts"])
    big = int(np.sum(counts > 0.01 * counts.sum()))
    ari = f"{summary['ari']:.3f}" if "ari" in summary else "-"
    return (f"{name:<34} {summary['K']:>4} {big:>6} {summary['elbo'] / summary['n_atoms']:>14.6f} "
            f"{summary['elapsed_s']:>9.2f} {summary['laps']:>5} {ari:>6}")


def print_starts(name: str, results: dict) -> float:
    """One row per start of ``results`` (start -> run summaries over seeds): K and clusters with more than
    1 % of the atoms (min-max), ELBO per atom (min, median, max), the largest gap to the best run of any
    start, training seconds (median, max). Returns the best ELBO per atom."""
    best = max(s["elbo"] / s["n_atoms"] for runs in results.values() for s in runs)
    for start, runs in results.items():
        elbo = np.array([s["elbo"] / s["n_atoms"] for s in runs])
        K = [s["K"] for s in runs]
        big = [int(np.sum(np.asarray(s["counts"]) > 0.01 * s["n_atoms"])) for s in runs]
        secs = np.array([s["elapsed_s"] for s in runs])
        print(f"{name:<22} {start:<9} {f'{min(K)}-{max(K)}':>11} {f'{min(big)}-{max(big)}':>6} "
              f"{elbo.min():14.4f} {np.median(elbo):10.4f} {elbo.max():10.4f} {best - elbo.min():11.4f} "
              f"{np.median(secs):9.2f} {secs.max():7.2f}", flush=True)
    return best


STARTS_HEADER = (f"{'data':<22} {'start':<9} {'K (min-max)':>11} {'K>1%':>6} {'ELBO/atom min':>14} {'median':>10} "
                 f"{'max':>10} {'gap to best':>11} {'s median':>9} {'s max':>7}")


def section_seeds(args) -> None:
    """Births from K = 1 against merges and deletes from K = 50, over seeds, on the generated sets (a), (b)."""
    print(STARTS_HEADER)
    print("-" * len(STARTS_HEADER))
    seeds = range(1, args.seeds + 1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        X, labels = gaussian_clusters(seed=0)
        write_points(tmp / "a.h5", X, labels=labels, batches_fixed=False)
        word_ids, word_counts, doc_range, topics = topic_documents(seed=0)
        write_documents(tmp / "b.h5", word_ids, word_counts, doc_range, 3000, labels=topics, batches_fixed=False)
        for name, path, extra in (("(a) points 48-D, 12", tmp / "a.h5", []),
                                  ("(b) documents, 10", tmp / "b.h5", ["obs=mult"])):
            results = {}
            starts = [("K=1", ["init.K=1"]), ("K=50", ["init.K=50", "moves=[merge,delete]"])]
            if extra:  # documents: the abundant start with reassignments too
                starts.append(("K=50+r", ["init.K=50", "moves=[merge,delete,reassign]"]))
            for start, start_args in starts:
                results[start] = [fit(path, tmp / f"{name[1]}{start}{seed}", "alg.n_batches=5", f"seed={seed}",
                                      *extra, *start_args) for seed in seeds]
            print_starts(name, results)


def section_gen(args) -> None:
    """Memo + moves from K = 1 against VB at fixed K on 25 generated 16-D clusters (and the shared sets)."""
    n = args.n or (20_000 if args.quick else 100_000)
    laps = args.laps or (40 if args.quick else 100)
    moves = ["moves=[birth,merge,delete]", "init.K=1"]
    common = [f"alg.n_laps={laps}", "seed=0"]
    header = f"{'run':<34} {'K':>4} {'K>1%':>6} {'ELBO/atom':>14} {'seconds':>9} {'laps':>5} {'ARI':>6}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        X, labels = make_data(n, 16, 25)
        data = tmp / "gen.h5"
        write_points(data, X, n_batches=10, labels=labels)
        runs = [("memo+moves K=1 (gen25, D=16)", [*moves]),
                ("vb K=25 k-means++ (gen25, D=16)", ["alg=vb", "init.K=25"]),
                ("vb K=100 k-means++ (gen25, D=16)", ["alg=vb", "init.K=100"])]
        for i, (name, extra) in enumerate(runs):
            print(row(name, fit(data, tmp / f"run{i}", *common, *extra)), flush=True)
        if SHARED.is_dir():
            shared = [("asterisk_k8/x_dataset.npz", ["--labels", "TrueZ"], 5), ("faithful/faithful.csv", [], 1)]
            for j, (rel, label_args, batches) in enumerate(shared):
                dst = tmp / f"shared{j}.h5"
                convert(SHARED / rel, dst, n_batches=batches, labels="TrueZ" if label_args else None, shuffle_seed=0)
                name = f"memo+moves K=1 ({rel.split('/')[0]})"
                print(row(name, fit(dst, tmp / f"srun{j}", *common, *moves)), flush=True)
        else:
            print(f"(reference data not found at {SHARED}; shared-data rows skipped)")
    print(json.dumps({"n": n, "laps": laps}))


REAL = {  # name: (file in ../shared/data, converter batches, laps, obs)
    "debian/short": ("debian/short.npz", 8, 100, "mult"),
    "patches": ("patches/patches.npy", 4, 40, "zm_gauss"),
}


def section_real(args) -> None:
    """Births from K = 1 against an abundant start (K = 50) on real data, both with alg=memo's default moves:
    per start, K, ELBO per atom (min, median, max), the largest gap to the best run of either start, and
    training seconds (median, max). Files are converted with contiguous batches (no shuffle), as a user would."""
    if not SHARED.is_dir():
        print(f"(reference data not found at {SHARED}; section real skipped)")
        return
    print(STARTS_HEADER)
    print("-" * len(STARTS_HEADER))
    seeds = range(1, args.seeds + 1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in args.real:
            rel, batches, laps, obs = REAL[name]
            path = tmp / f"{name.replace('/', '_')}.h5"
            convert(SHARED / rel, path, n_batches=batches)
            results = {start: [fit(path, tmp / f"{path.stem}{start}{seed}", f"obs={obs}", f"init.K={start}",
                                   f"alg.n_laps={args.laps or laps}", f"seed={seed}") for seed in seeds]
                       for start in (1, 50)}
            results = {f"K={start}": runs for start, runs in results.items()}
            best = print_starts(name, results)
            print(f"{name:<22} best ELBO {best * results['K=1'][0]['n_atoms']:.0f}", flush=True)


SECTIONS = {"gen": section_gen, "seeds": section_seeds, "real": section_real}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=20,000 and fewer laps; 3 seeds")
    parser.add_argument("--n", type=int, default=None, help="number of generated points")
    parser.add_argument("--laps", type=int, default=None, help="lap limit of every run (default 100; quick 40)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per start in section seeds (default 10)")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--real", nargs="+", default=list(REAL), choices=list(REAL), help="data sets of section real")
    args = parser.parse_args()
    args.seeds = args.seeds or (3 if args.quick else 10)
    logging.getLogger("bnpvi").setLevel(logging.WARNING)
    register_configs()
    for name in args.sections:
        print()
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
