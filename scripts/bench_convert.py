"""Peak memory of ``bnpvi-data convert`` against the number of rows: is it flat in N? (issue 24, part 5)

For each N, writes an .npy file of N x D float64 normal values (in blocks, so making it needs little memory),
converts it with ``bnpvi-data convert`` in a child process, and reads the child's peak resident set size
(``getrusage`` of a wrapper process whose only child is the converter). Prints one table: N, the input's size,
the peak in MB and its ratio to the smallest N's peak; then the resident size of a Python that has only
imported the converter (the floor every run pays).

    python scripts/bench_convert.py                                  # 2e5, 2e6, 2e7 rows of 16-D points
    python scripts/bench_convert.py --sizes 200000 2000000 --options="--shuffle 0"
    python scripts/bench_convert.py --dir /big/disk --keep

The 2e7-row input is 2.56 GB and its output as large: check the free space of --dir (default: the system's
temporary directory) first. Peak memory is meaningful on a loaded machine; the seconds printed are not.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The wrapper runs its arguments as its only child and prints the child's peak RSS (KiB on Linux).
_WRAPPER = ("import resource, subprocess, sys\n"
            "rc = subprocess.call(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(rc)\n")
_ROWS_PER_BLOCK = 2**18


def make_points(path: Path, n: int, d: int, seed: int = 0) -> None:
    """An .npy file of n x d standard normal float64 values, written a block of rows at a time."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    rng = np.random.default_rng(seed)
    for lo in range(0, n, _ROWS_PER_BLOCK):
        hi = min(n, lo + _ROWS_PER_BLOCK)
        out[lo:hi] = rng.standard_normal((hi - lo, d))
        out.flush()
    del out


def peak_rss_mb(command: list[str]) -> tuple[float, float]:
    """Run ``command`` as the only child of a wrapper process; (its peak RSS in MB, seconds)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *command], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return int(done.stdout.strip().splitlines()[-1]) / 1024, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000, 20_000_000], metavar="N")
    parser.add_argument("--dim", type=int, default=16, metavar="D")
    parser.add_argument("--options", default="", help="further options of bnpvi-data convert, e.g. '--shuffle 0'")
    parser.add_argument("--dir", type=Path, default=None, help="where the inputs and outputs go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs and outputs")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench_convert_", dir=args.dir))
    need = 2 * 8 * args.dim * max(args.sizes) / 1e9
    free = shutil.disk_usage(work).free / 1e9
    if free < need * 1.1:
        raise SystemExit(f"{work}: {free:.1f} GB free, the largest input and its output need {need:.1f} GB")
    convert = [sys.executable, "-m", "bnpvi.cli.data", "convert"]
    rows = []
    try:
        for n in sorted(args.sizes):
            src, dst = work / f"points_{n}.npy", work / f"points_{n}.h5"
            make_points(src, n, args.dim)
            peak, seconds = peak_rss_mb([*convert, str(src), str(dst), "--overwrite", *args.options.split()])
            rows.append((n, src.stat().st_size / 1e6, peak, seconds))
            if not args.keep:
                src.unlink()
                dst.unlink()
        floor, _ = peak_rss_mb([sys.executable, "-c", "import bnpvi.cli.data, bnpvi.data.convert"])
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"bnpvi-data convert points.npy points.h5 {args.options}".rstrip()
          + f"  ({args.dim}-D float64 rows; peak RSS of the converter process)")
    print(f"{'N':>12} {'input MB':>10} {'peak MB':>9} {'ratio':>7} {'seconds':>8}")
    for n, size, peak, seconds in rows:
        print(f"{n:>12,} {size:>10.0f} {peak:>9.1f} {peak / rows[0][2]:>7.3f} {seconds:>8.1f}")
    print(f"floor: a Python that has only imported the converter peaks at {floor:.1f} MB")
    if args.keep:
        print(f"inputs and outputs kept in {work}")


if __name__ == "__main__":
    main()
