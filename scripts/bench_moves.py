"""Benchmark: memoized VI with birth/merge/delete from K=1 against full VB at fixed K.

A generated data set (default N=100,000 points in D=16 from 25 Gaussians, 10 batches)
is fitted by
  * memo + moves=[birth,merge,delete] from K=1,
  * vb from Bregman k-means++ at K=25 (the true number) and K=100;
and, when ../shared/data is present, memo + moves from K=1 on asterisk_k8 and
Old Faithful. Prints final K (all clusters, and those with > 1% of the data), ELBO
per atom, seconds and laps. Usage: python scripts/bench_moves.py [--quick] [--n N]
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
from bnpvi.data.store import write_points
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=20,000 and fewer laps")
    parser.add_argument("--n", type=int, default=None, help="number of generated points")
    parser.add_argument("--laps", type=int, default=None, help="lap limit of every run (default 100; quick 40)")
    args = parser.parse_args()
    n = args.n or (20_000 if args.quick else 100_000)
    laps = args.laps or (40 if args.quick else 100)
    logging.getLogger("bnpvi").setLevel(logging.WARNING)
    register_configs()
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


if __name__ == "__main__":
    main()
