"""Benchmark: memoized VI on more than one process (Dask), and memo caches on disk.

Sections (``--sections``):

* ``points``: 2,000,000 × 16 points (``bench_moves.make_data(2_000_000, 16, 25, seed=0)``, 200 batches), full
  Gaussian, memo without moves from Bregman k-means++ at K = 25: seconds per lap (laps 2-6) in this
  process at 1 thread (plain memo, P = 1), on 2 local Dask workers of 1 thread (P = 2), in this process
  at 2 BLAS/OpenMP threads (P = 1), on 1 Dask worker of 2 threads (P = 2), and on 2 workers in rounds of
  P = 8 and 20 batches (fewer global steps per lap: one per round); the speed-ups of 2 workers over 1
  process (P = 2, 8 and 20) and of 2 workers × 1 thread over 1 worker × 2 threads.
* ``topics``: the HDP topic model on the wiki corpus of ../shared/data (converted here, 5 and 20
  batches), K = 100, no moves, laps 2-6: the same rows and ratios.
* ``overhead``: the driver's time per batch on the Dask path: the training time of 6 laps minus the
  workers' busy time (the actors' own count, and task durations from Dask's task stream), per batch, on 1 worker of 1 thread
  (P = 1) and on 2 (P = 2, busy time halved); and plain memo's in this process, measured as
  ``bench_floor.py`` does (laps minus their ``process_batch`` time).
* ``memory``: peak resident memory of the training process (``bnpvi-train`` in a child process,
  2 laps) with alg.cache=memory and disk, at 200 and 2,000 batches of the points, K = 25.

``--quick``: 200,000 points (20 and 200 batches in ``memory``), 3 laps, and the topics at K = 20, for a
smoke test. Usage: python scripts/bench_scale.py [--quick] [--sections points topics overhead memory]
"""
from __future__ import annotations

import argparse
import csv
import logging
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import distributed
from hydra import compose, initialize_config_module
from threadpoolctl import threadpool_limits

from bnpvi.config import register_configs
from bnpvi.data.convert import convert
from bnpvi.data.store import write_points
from bnpvi.learn import dask_pool, runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import batch_times  # noqa: E402  (process_batch's time, as bench_floor measures it)
from bench_moves import make_data  # noqa: E402  (the scale benchmark's data)

WIKI = Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki"


def config(*overrides: str):
    with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def lap_seconds(run_dir: Path, laps: int) -> float:
    """Mean seconds of laps 2..laps from the run's trace.csv."""
    with open(run_dir / "trace.csv") as fh:
        elapsed = {int(r["lap"]): float(r["elapsed_s"]) for r in csv.DictReader(fh)}
    return (elapsed[laps] - elapsed[1]) / (laps - 1)


def train(run_dir: Path, threads: int, *overrides: str) -> Path:
    """One run, this process's BLAS/OpenMP at ``threads`` (the driver's, for the Dask rows: 1)."""
    with threadpool_limits(limits=threads):
        runner.train(config(*overrides), run_dir)
    return run_dir


SETUPS = [("1 process x 1 thread, P=1", 1, []),
          ("2 workers x 1 thread, P=2", 1, ["alg.workers=2", "alg.batches_per_round=2"]),
          ("1 process x 2 threads, P=1", 2, []),
          ("1 worker x 2 threads, P=2", 1, ["alg.batches_per_round=2"]),  # on a cluster of its own (one_by_two)
          ("2 workers x 1 thread, P=8", 1, ["alg.workers=2", "alg.batches_per_round=8"]),
          ("2 workers x 1 thread, P=20", 1, ["alg.workers=2", "alg.batches_per_round=20"])]
"""(row name, driver threads, overrides) of the ways to run a case."""


@contextmanager
def one_by_two(row: str) -> Iterator[list[str]]:
    """The overrides that send a row's run to a cluster of 1 worker × 2 threads, started for that row alone: a
    LocalCluster's scheduler runs in this process, and one left idle beside the other rows slowed them (a
    process's own lap on 2,000,000 16-D points: 3.39 s instead of 1.90)."""
    if not row.startswith("1 worker"):
        yield []
        return
    with dask_pool.worker_settings(), distributed.LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None,
                                                               silence_logs=logging.ERROR) as cluster:
        yield [f"alg.scheduler={cluster.scheduler_address}"]


def speed_table(name: str, tmp: Path, base: list[str], laps: int) -> None:
    seconds = {}
    for row, threads, extra in SETUPS:
        with one_by_two(row) as scheduler:
            run = train(tmp / f"{name}-{len(seconds)}", threads, *base, f"alg.n_laps={laps}", *extra, *scheduler)
        seconds[row] = lap_seconds(run, laps)
        print(f"{name:<24} {row:<28} {seconds[row]:>8.3f} s/lap", flush=True)
    rows = list(seconds)
    print(f"{name:<24} {'2 workers vs 1 process':<28} {seconds[rows[0]] / seconds[rows[1]]:>8.2f} x")
    print(f"{name:<24} {'2 workers x 1 vs 1 worker x 2':<28} {seconds[rows[3]] / seconds[rows[1]]:>8.2f} x",
          flush=True)
    for row, P in ((4, 8), (5, 20)):
        print(f"{name:<24} {f'2 workers (P={P}) vs 1 process':<28} {seconds[rows[0]] / seconds[rows[row]]:>8.2f} x",
              flush=True)


def points_file(tmp: Path, quick: bool, n_batches: int | None = None) -> Path:
    n, batches = (200_000, 20) if quick else (2_000_000, 200)
    path = tmp / "points.h5"
    if not path.exists():
        X, _ = make_data(n, 16, 25, seed=0)
        write_points(path, X, n_batches=batches, batches_fixed=False, source="make_data")
    return path


def points_base(path: Path) -> list[str]:
    return ["data=hdf5", f"data.path={path}", "obs=gauss", "init.K=25", "moves=[]", "alg.converge_thr=-1",
            "plots=false"]


def section_points(args, tmp: Path) -> None:
    speed_table("points 16-D, K=25", tmp, points_base(points_file(tmp, args.quick)), args.laps)


def section_topics(args, tmp: Path) -> None:
    if not WIKI.is_dir():
        print(f"(wiki corpus not found at {WIKI}; topics skipped)")
        return
    K = 20 if args.quick else 100
    for batches in (5, 20):
        path = convert(WIKI / "train.ldac", tmp / f"wiki{batches}.h5", n_batches=batches, vocab=WIKI / "vocab.txt")
        base = ["model=hdp_topic", "data=hdf5", f"data.path={path}", f"init.K={K}", "moves=[]",
                "alg.converge_thr=-1", "plots=false"]
        speed_table(f"wiki, K={K}, {batches} batches", tmp, base, args.laps)


def training_totals(run_dir: Path) -> tuple[float, int]:
    """Seconds of training and batches worked on, over the whole run (the trace's last row)."""
    with open(run_dir / "trace.csv") as fh:
        last = list(csv.DictReader(fh))[-1]
    return float(last["elapsed_s"]), int(last["batches_seen"])


def busy_seconds(stream: list[dict]) -> float:
    """Seconds the workers spent on the run's batch tasks (rounds that ran as tasks; the actors' rounds are
    counted by the actors, ``dask_pool.actor_seconds``)."""
    return sum(s["stop"] - s["start"] for task in stream if str(task["key"]).startswith("bnpvi-round-")
               for s in task["startstops"] if s["action"] == "compute")


def section_overhead(args, tmp: Path) -> None:
    path = points_file(tmp, args.quick)
    base = [*points_base(path), f"alg.n_laps={args.laps}"]
    with threadpool_limits(limits=1):
        for workers in (1, 2):
            # workers as the runner's own LocalCluster starts them (alg.workers)
            with dask_pool.worker_settings(), \
                    distributed.LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None,
                                             silence_logs=logging.ERROR) as cluster, \
                    distributed.Client(cluster) as client, distributed.get_task_stream(client) as stream:
                run = tmp / f"overhead-{workers}"
                runner.train(config(*base, f"alg.scheduler={cluster.scheduler_address}",
                                    f"alg.batches_per_round={workers}"), run)
                actors = sum(client.run(dask_pool.actor_seconds).values())
            wall, batches = training_totals(run)
            busy = busy_seconds(stream.data) + actors
            around = (wall - busy / workers) / batches
            print(f"{'driver overhead':<24} {f'Dask, {workers} worker(s), P={workers}':<28} {1e3 * around:>8.2f} ms/batch"
                  f"  (workers busy {1e3 * busy / batches:.2f} ms/batch)", flush=True)
        with batch_times() as times:
            run = train(tmp / "overhead-plain", 1, *base)
        wall, batches = training_totals(run)
        print(f"{'driver overhead':<24} {'this process, P=1':<28} {1e3 * (wall - sum(times)) / batches:>8.2f} ms/batch",
              flush=True)


def peak_mib(args: list[str], cwd: Path) -> float:
    """Peak resident memory (MiB) of ``bnpvi-train args`` in a child process."""
    proc = subprocess.Popen([sys.executable, "-m", "bnpvi.cli.train", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ, OMP_NUM_THREADS="1"))
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"bench_scale: bnpvi-train {' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024


def section_memory(args, tmp: Path) -> None:
    path = points_file(tmp, args.quick)
    few = 20 if args.quick else 200
    for cache in ("memory", "disk"):
        peaks = []
        for batches in (few, 10 * few):
            run = tmp / f"memory-{cache}-{batches}"
            peaks.append(peak_mib([*points_base(path), "alg.n_laps=2", f"alg.n_batches={batches}",
                                   f"alg.cache={cache}", f"hydra.run.dir={run}"], tmp))
            print(f"{'peak driver memory':<24} {f'alg.cache={cache}, {batches} batches':<28} {peaks[-1]:>8.0f} MiB",
                  flush=True)
        print(f"{'peak driver memory':<24} {f'alg.cache={cache}: x10 batches':<28} {peaks[1] / peaks[0]:>8.2f} x",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--sections", nargs="+", default=["points", "topics", "overhead", "memory"],
                        choices=["points", "topics", "overhead", "memory"])
    args = parser.parse_args()
    args.laps = 3 if args.quick else 6
    logging.getLogger("bnpvi").setLevel(logging.WARNING)
    register_configs()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "points" in args.sections:
            section_points(args, tmp)
        if "topics" in args.sections:
            section_topics(args, tmp)
        if "overhead" in args.sections:
            section_overhead(args, tmp)
        if "memory" in args.sections:
            section_memory(args, tmp)


if __name__ == "__main__":
    main()
