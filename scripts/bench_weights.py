"""Benchmark: the cost of sample weights, per lap of memoized VI.

The 200,000 × 16 points of ``bench_scale.py --quick`` (``bench_moves.make_data(200_000, 16, 25, seed=0)``, 20
batches), full Gaussian, memo without moves from Bregman k-means++ at K = 25, in this process at 1 thread:
seconds per lap (laps 2..``--laps``) of the unweighted file and of the same points with weights (Gamma(2, 1)
draws, a fixed seed), each run ``--repeats`` times alternately, the fastest kept; then their ratio
(target: at most 1.10). A weighted lap does the same local step, whose compiled kernel also sums the
weighted entropy −Σ_n w_n r_nk ln r_nk; what it adds is the scaling of the responsibilities by w_n before the
family's summaries.

Usage: python scripts/bench_weights.py [--laps 6] [--repeats 2]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from bnpvi.config import register_configs
from bnpvi.data.store import write_points

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_moves import make_data  # noqa: E402  (the scale benchmark's data)
from bench_scale import lap_seconds, points_base, train  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--laps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    register_configs()
    with tempfile.TemporaryDirectory(prefix="bench-weights-") as tmp:
        tmp = Path(tmp)
        X, _ = make_data(200_000, 16, 25, seed=0)
        weights = np.random.default_rng(0).gamma(2.0, 1.0, size=X.shape[0])
        files = {"unweighted": write_points(tmp / "plain.h5", X, n_batches=20, batches_fixed=False, source="make_data"),
                 "weighted": write_points(tmp / "weighted.h5", X, n_batches=20, batches_fixed=False,
                                          source="make_data", weights=weights)}
        seconds: dict[str, list[float]] = {name: [] for name in files}
        for repeat in range(args.repeats):
            for name, path in files.items():
                run = train(tmp / f"{name}-{repeat}", 1, *points_base(path), f"alg.n_laps={args.laps}")
                seconds[name].append(lap_seconds(run, args.laps))
                print(f"{name:<12} repeat {repeat}  {seconds[name][-1]:>8.3f} s/lap", flush=True)
        best = {name: min(values) for name, values in seconds.items()}
        for name, value in best.items():
            print(f"{name:<12} best      {value:>8.3f} s/lap")
        print(f"weighted / unweighted per lap: {best['weighted'] / best['unweighted']:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
