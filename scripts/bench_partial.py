"""partial_fit against one fit on all the data: 20 calls of 10,000 points each on 200,000 × 16 points.

The points are ``bench_moves.make_data(200_000, 16, 25, seed=0)`` (25 full-covariance Gaussians). One
``DPMixture(random_state=0, n_batches=20).fit(X)`` against a ``DPMixture(random_state=0)`` fed the rows 10,000
at a time by ``partial_fit`` (each call one new batch of 10,000, ``n_laps`` laps of all the data so far;
``--n-laps``), both from one cluster with the default moves. Reported: K, the final ELBO per point (the
whole-data ELBO of all 200,000 points for both), wall seconds of the fit and of all the calls, and their
ratio, measured in one process one after the other.

Usage::

    python scripts/bench_partial.py [--n 200000] [--chunk 10000] [--n-laps 3]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_moves import make_data  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--n-laps", type=int, default=3)
    args = parser.parse_args(argv)
    import bnpvi

    X, _ = make_data(args.n, 16, 25, seed=0)
    calls = args.n // args.chunk
    start = time.perf_counter()
    whole = bnpvi.DPMixture(random_state=0, n_batches=calls).fit(X)
    fit_s = time.perf_counter() - start
    print(f"fit:         K {whole.n_components_:>3}  elbo/pt {whole.elbo_ / args.n:.5f}  laps {whole.n_iter_:>4}  "
          f"{fit_s:7.1f} s", flush=True)
    est = bnpvi.DPMixture(random_state=0)
    start = time.perf_counter()
    for i in range(calls):
        est.partial_fit(X[i * args.chunk:(i + 1) * args.chunk], n_laps=args.n_laps)
    partial_s = time.perf_counter() - start
    print(f"partial_fit: K {est.n_components_:>3}  elbo/pt {est.elbo_ / args.n:.5f}  laps {est.n_iter_:>4}  "
          f"{partial_s:7.1f} s  ({calls} calls of {args.chunk}, n_laps={args.n_laps})")
    print(f"gap {(whole.elbo_ - est.elbo_) / args.n:+.5f} nats per point (fit minus partial_fit); "
          f"time ratio partial_fit / fit {partial_s / fit_s:.2f}")


if __name__ == "__main__":
    main()
