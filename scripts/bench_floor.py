"""Benchmark: laps against their GEMM floor (a roofline table), moves against the lap, initialisation against a lap.

GEMM time of a lap = (2·N·K·D² flops of the likelihood's quadratic forms + 2·N·K·D² of the
summaries) ÷ the rate of ``numpy.dot`` on an (n × D)·(D × K·D) product, n = one batch's atoms
(capped so the product stays ≤ 256 MB), measured in the same run and at the same thread count.
Per case and thread count:

* ``s/lap``: seconds per lap, laps 2-6 (``trace.csv``), from Bregman k-means++ at the stated K;
* ``lik GF/s``, ``sum GF/s``: achieved rate of the expected log-likelihood and of the summaries
  of one batch under the initial globals (2·n·K·D² flops each);
* ``GEMM s``: the lap's GEMM time, ``lap/GEMM`` the ratio; ``init s``: the initialisation
  (``initial_stats``: seeding and its k-means iterations on ``init.n_samples`` atoms);
* ``memo ms``: the work around a batch (reading it, the cache swap, the global step, move
  bookkeeping): laps 2-6's time minus their batches' ``process_batch`` time, per batch.

Cases (``--cases``): ``patches`` (60,000 real 8×8 patches, zero-mean Gaussian, 4 batches, K = 25,
no moves, births with merges and deletes, sub-cluster splits alone (their tracking's cost) and with merges
and deletes), ``points`` (2,000,000 × 16 points from ``bench_moves.make_data``,
full Gaussian, 200 batches, K = 25, no moves; ``--quick``: 200,000 and 20 batches), ``patches200``
(the first 36,000 patches, zero-mean Gaussian, 4 batches, K = 200, the same four move sets).
Threads: BLAS and OpenMP alike (threadpoolctl), ``--threads 1 2``.

Usage: python scripts/bench_floor.py [--quick] [--threads 1 2] [--cases patches points patches200]
"""
from __future__ import annotations

import argparse
import csv
import logging
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
from hydra import compose, initialize_config_module
from threadpoolctl import threadpool_limits

from bnpvi.config import register_configs
from bnpvi.data.store import write_points
from bnpvi.learn import pool, runner
from bnpvi.learn.build import build_model, make_alloc
from bnpvi.learn.init import initial_stats
from bnpvi.data.base import BatchStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_moves import make_data  # noqa: E402  (the scale benchmark's data)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
LAPS = 6
GEMM_BYTES = 256 * 2 ** 20
HEADER = (f"{'case':<22} {'thr':>3} {'moves':<20} {'K':>4} {'s/lap':>7} {'lik GF/s':>9} {'sum GF/s':>9} "
          f"{'GEMM s':>7} {'lap/GEMM':>9} {'init s':>7} {'memo ms':>8}")


def gemm_rate(n: int, D: int, K: int, rng: np.random.Generator) -> float:
    """Flops per second of numpy.dot on an (n × D)·(D × K·D) product (best of 3)."""
    n = max(1, min(n, GEMM_BYTES // (8 * K * D)))
    A, B = rng.normal(size=(n, D)), rng.normal(size=(D, K * D))
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        np.dot(A, B)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n * D * K * D / best


def config(path: Path, *overrides: str):
    with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        return compose(config_name="train", overrides=["data=hdf5", f"data.path={path}", *overrides])


def kernel_rates(cfg, K: int) -> tuple[float, float, float]:
    """(likelihood flop rate, summary flop rate, initialisation seconds) on the first batch of ``cfg``'s file."""
    alloc = make_alloc(cfg)
    with BatchStore.open(cfg.data.path) as store:
        model = build_model(cfg, alloc, store.kind, store.D, store.scan())
        t0 = time.perf_counter()
        stats = initial_stats(model, store, cfg.init, np.random.default_rng(0), K)
        init_s = time.perf_counter() - t0
        globals_ = model.evaluate(stats)[1]
        batch = store.read_batch(0)
    flops = 2.0 * batch.n_atoms * K * store.D ** 2
    t0 = time.perf_counter()
    log_lik, local = model.local_step(batch, globals_)
    lik_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.summarize(batch, local)
    sum_s = time.perf_counter() - t0
    return flops / lik_s, flops / sum_s, init_s


def seconds_per_lap(run_dir: Path) -> float:
    """Mean seconds of laps 2..LAPS from the run's trace.csv."""
    with open(run_dir / "trace.csv") as fh:
        elapsed = {int(r["lap"]): float(r["elapsed_s"]) for r in csv.DictReader(fh)}
    return (elapsed[LAPS] - elapsed[1]) / (LAPS - 1)


@contextmanager
def batch_times() -> Iterator[list[float]]:
    """The seconds of every ``process_batch`` call of memoized VI in the block, in order."""
    times, inner = [], pool.process_batch

    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = inner(*args, **kwargs)
        times.append(time.perf_counter() - start)
        return result

    pool.process_batch = timed
    try:
        yield times
    finally:
        pool.process_batch = inner


def case_files(name: str, tmp: Path, quick: bool) -> tuple[Path, str, int, list[str]]:
    """(data file, obs family, K, move sets) of a case, converted into ``tmp``."""
    if name == "points":
        n, batches = (200_000, 20) if quick else (2_000_000, 200)
        X, _ = make_data(n, 16, 25, seed=0)
        return write_points(tmp / "points.h5", X, n_batches=batches, source="make_data"), "gauss", 25, ["[]"]
    X = np.load(SHARED / "patches" / "patches.npy").astype(np.float64)
    if name == "patches200":
        X = X[:36_000]
    K = 200 if name == "patches200" else 25
    path = write_points(tmp / f"{name}.h5", X, n_batches=4, source="patches.npy")
    return path, "zm_gauss", K, ["[]", "[birth,merge,delete]", "[split]", "[split,merge,delete]"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the points case at 200,000 points")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", nargs="+", default=["patches", "points", "patches200"],
                        choices=["patches", "points", "patches200"])
    args = parser.parse_args()
    logging.getLogger("bnpvi").setLevel(logging.WARNING)
    register_configs()
    if not SHARED.is_dir() and set(args.cases) - {"points"}:
        print(f"(reference data not found at {SHARED}; patch cases skipped)")
        args.cases = [c for c in args.cases if c == "points"]
    print(HEADER)
    print("-" * len(HEADER))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in args.cases:
            path, obs, K, move_sets = case_files(name, tmp, args.quick)
            with BatchStore.open(path) as store:
                N, D, n_batch = store.n_atoms, store.D, max(store.batch_sizes())
            for threads in args.threads:
                with threadpool_limits(limits=threads):
                    rate = gemm_rate(n_batch, D, K, rng)
                    gemm_s = 4.0 * N * K * D ** 2 / rate
                    for m, moves in enumerate(move_sets):
                        cfg = config(path, f"obs={obs}", f"init.K={K}", f"alg.n_laps={LAPS}", f"moves={moves}",
                                     "alg.converge_thr=0")
                        lik, summ, init_s = kernel_rates(cfg, K)
                        run_dir = tmp / f"{name}-{threads}-{m}"
                        with batch_times() as times:
                            runner.train(cfg, run_dir)
                        lap = seconds_per_lap(run_dir)
                        n_b = len(times) // LAPS
                        around = (lap * (LAPS - 1) - sum(times[n_b:LAPS * n_b])) / ((LAPS - 1) * n_b)
                        print(f"{name:<22} {threads:>3} {moves:<20} {K:>4} {lap:>7.2f} {lik / 1e9:>9.1f} "
                              f"{summ / 1e9:>9.1f} {gemm_s:>7.2f} {lap / gemm_s:>9.2f} {init_s:>7.2f} "
                              f"{1e3 * around:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
