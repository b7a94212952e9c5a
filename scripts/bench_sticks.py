"""Time per call of the HDP top-level stick optimiser (``bnpvi.alloc.hdp_top.optimize``, compiled Newton) against
the L-BFGS-B solver it replaced (``lbfgs_reference`` of tests/test_hdp_top.py), on the same problems, in one run.

Problems (``problem`` of the same test file: topic-model, HMM and sticky-HMM shapes of c and T) for K in
``--ks``, each from two starts: ``cold``, sticks off the optimum (an edited cluster set, a first global step),
and ``warm``, the previous optimum after T moved by 0.1 % (a plain lap's global step). Prints the mean
milliseconds per call of each solver, the ratio, and the largest shortfall (f_old − f_new) / |f_old| (negative:
the new optimum is higher).

Usage::

    python scripts/bench_sticks.py               # K 10 30 100 200, a few seconds
    python scripts/bench_sticks.py --ks 10 50 --problems 5
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bnpvi.alloc import hdp_top  # noqa: E402
from bnpvi.kernels.blas import blas_single_thread  # noqa: E402
from tests.test_hdp_top import lbfgs_reference, problem  # noqa: E402


def timed(solver, args):
    t0 = time.perf_counter()
    result = solver(*args)
    return time.perf_counter() - t0, result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 30, 100, 200])
    parser.add_argument("--problems", type=int, default=3, help="problems per K (default 3)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'K':>4} {'start':>5} {'calls':>5} {'L-BFGS-B ms':>12} {'Newton ms':>10} {'ratio':>6} {'shortfall':>10}")
    with blas_single_thread():
        for K in args.ks:
            rows = {"cold": [], "warm": []}
            for _ in range(args.problems):
                c, T, gamma, rho, omega = problem(rng, K)
                best = hdp_top.optimize(c, T, gamma, rho, omega)
                moved = T * (1.0 + 1e-3 * rng.standard_normal(K + 1))
                for start, case in (("cold", (c, T, gamma, rho, omega)), ("warm", (c, moved, gamma, *best))):
                    t_old, old = timed(lbfgs_reference, case)
                    t_new, new = timed(hdp_top.optimize, case)
                    f_old, f_new = (hdp_top.surrogate(*point, case[0], case[1], gamma) for point in (old, new))
                    rows[start].append((t_old, t_new, (f_old - f_new) / abs(f_old)))
            for start, got in rows.items():
                t_old, t_new, short = np.array(got).T
                print(f"{K:>4} {start:>5} {len(got):>5} {1e3 * t_old.mean():>12.2f} {1e3 * t_new.mean():>10.3f} "
                      f"{t_old.mean() / t_new.mean():>6.0f} {short.max():>10.1e}")


if __name__ == "__main__":
    main()
