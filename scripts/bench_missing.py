"""Benchmark: missing entries marginalised by the model against filling them in first, on real data.

Cases (``../shared/data``, or ``--data DIR``):

* ``drawn`` (not run by default): 5,000 points of 20 dimensions drawn from a mixture of 10 diagonal
  Gaussians, the case the model describes; labels are also compared with the true ones.

* ``patches``: the 60,000 × 64 image patches of ``patches/patches.npy``, ``dp_mix`` + ``diag_gauss``, 4 batches,
  from K = 1 with the default moves, ``--laps`` laps, seed 1. Labels are compared with those of the same
  run on the complete data (adjusted Rand index: the patches have no true labels).
* ``mocap6``: the 6 motion-capture sequences of ``mocap6/dataset.npz``, ``hdp_hmm`` + ``diag_gauss`` (the
  auto-regressive family cannot take missing entries yet), from K = 1, seed 1; one-to-one Hamming distance of
  the state path to the true labels, and ARI to the complete-data run's path.

For each share of entries removed at random (``--shares``, default 0.1 0.3; one fixed seed) four fits:

* ``marginalised``: bnpvi on the data with NaN (each atom's likelihood is that of its observed entries);
* ``mean``: every missing entry filled with its column's mean, then the same bnpvi fit;
* ``iterative``: scikit-learn's ``IterativeImputer`` (default settings, a fixed seed), then the same fit;
* ``bgm``: scikit-learn's ``BayesianGaussianMixture`` (diagonal covariances, as many components as twice the
  complete-data run's K, its defaults otherwise) on the iteratively imputed data; for mocap6 it ignores time.

Columns: K, ELBO per observed entry (bnpvi fits on the data they were given: the imputed fits' ELBO counts the
filled entries as observed, so only the marginalised and complete rows compare), the labels' score, laps and
seconds. Then the cost of a lap: memo without moves from the complete-data run's K, complete data against
10 % missing (target: at most 1.5× for ``diag_gauss``), alone in this process at 1 thread.

Usage: python scripts/bench_missing.py [--cases patches mocap6] [--shares 0.1 0.3] [--laps 40] [--lap-only K]
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from bnpvi.config import register_configs
from bnpvi.data.store import write_points, write_sequences
from bnpvi.learn import runner
from bnpvi.metrics import hamming_distance

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import config, lap_seconds  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def with_holes(X: np.ndarray, share: float, seed: int = 0) -> np.ndarray:
    """X with ``share`` of its entries (drawn at random, a fixed seed) replaced by NaN."""
    X = np.array(X, dtype=np.float64)
    X[np.random.default_rng(seed).random(X.shape) < share] = np.nan
    return X


def imputed(X: np.ndarray, how: str) -> np.ndarray:
    if how == "mean":
        return np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer
    return IterativeImputer(random_state=0).fit_transform(X)


def ari(a, b) -> float:
    from sklearn.metrics import adjusted_rand_score
    return float(adjusted_rand_score(a, b))


class Case:
    """A data set, how to write it, the run's overrides, and how its labels are read and scored."""

    def __init__(self, name: str, data: Path, laps: int):
        self.name, self.laps = name, laps
        if name == "drawn":
            rng = np.random.default_rng(0)
            means, scales = rng.normal(0.0, 2.0, (10, 20)), rng.uniform(0.5, 2.0, (10, 20))
            self.truth = rng.integers(0, 10, 5000)
            self.X = means[self.truth] + scales[self.truth] * rng.normal(size=(5000, 20))
            self.seq_range = None
            self.overrides = ["model=dp_mix", "obs=diag_gauss", "init.K=1", f"alg.n_laps={laps}", "seed=1"]
        elif name == "patches":
            self.X = np.load(data / "patches" / "patches.npy").astype(np.float64)
            self.seq_range, self.truth = None, None
            self.overrides = ["model=dp_mix", "obs=diag_gauss", "init.K=1", f"alg.n_laps={laps}", "seed=1"]
        else:
            saved = np.load(data / "mocap6" / "dataset.npz")
            self.X, self.seq_range, self.truth = saved["X"], saved["doc_range"], saved["TrueZ"]
            self.overrides = ["model=hdp_hmm", "obs=diag_gauss", "init.K=1", f"alg.n_laps={max(laps, 100)}", "seed=1"]

    def write(self, path: Path, X: np.ndarray) -> Path:
        if self.seq_range is None:
            return write_points(path, X, n_batches=4, labels=self.truth, source=self.name)
        return write_sequences(path, X, self.seq_range, labels=self.truth, n_batches=1, source=self.name)

    def fit(self, tmp: Path, tag: str, X: np.ndarray, *extra: str) -> dict:
        """One bnpvi run on X: its summary, with the labels of every atom and its seconds and laps."""
        path = self.write(tmp / f"{tag}.h5", X)
        run = tmp / tag
        start = time.perf_counter()
        with threadpool_limits(limits=1):
            summary = runner.train(config("data=hdf5", f"data.path={path}", "plots=false", *self.overrides, *extra),
                                   run)
        summary["seconds"] = time.perf_counter() - start
        summary["labels"] = self.labels(run)
        summary["elbo_per_entry"] = summary["elbo"] / int(np.sum(~np.isnan(X)))
        return summary

    def labels(self, run: Path) -> np.ndarray:
        if self.seq_range is None:
            with open(run / "assignments.csv") as fh:
                return np.array([int(row["cluster"]) for row in csv.DictReader(fh)])
        import h5py
        with h5py.File(run / "segmentation.h5", "r") as f:
            return np.asarray(f["viterbi"][()])

    def score(self, labels: np.ndarray, reference: np.ndarray) -> str:
        out = f"ARI to complete {ari(labels, reference):.3f}"
        if self.truth is not None and self.seq_range is None:
            out += f"  ARI to truth {ari(labels, self.truth):.3f}"
        elif self.truth is not None:
            out += f"  Hamming {hamming_distance(self.truth, labels):.3f}"
        return out


def row(method: str, K, elbo, score: str, laps, seconds: float) -> None:
    elbo = "" if elbo is None else f"{elbo:.5f}"
    print(f"  {method:<13} K {K!s:>3}  ELBO/entry {elbo:>10}  {score}  laps {laps!s:>3}  {seconds:7.1f} s",
          flush=True)


def bgm_labels(X: np.ndarray, K: int) -> tuple[np.ndarray, float, int]:
    from sklearn.mixture import BayesianGaussianMixture
    start = time.perf_counter()
    with threadpool_limits(limits=1):
        model = BayesianGaussianMixture(n_components=2 * K, covariance_type="diag", random_state=0).fit(X)
    labels = model.predict(X)
    return labels, time.perf_counter() - start, int(np.unique(labels).size)


def quality(case: Case, tmp: Path, shares: list[float]) -> dict:
    complete = case.fit(tmp, "complete", case.X)
    reference = complete["labels"]
    print(f"{case.name}: {case.X.shape[0]} atoms × {case.X.shape[1]}")
    row("complete", complete["K"], complete["elbo_per_entry"], case.score(reference, reference), complete["laps"],
        complete["seconds"])
    for share in shares:
        holes = with_holes(case.X, share)
        print(f" {share:.0%} of entries missing")
        ours = case.fit(tmp, f"marg{share}", holes)
        row("marginalised", ours["K"], ours["elbo_per_entry"], case.score(ours["labels"], reference), ours["laps"],
            ours["seconds"])
        filled = {}
        for how in ("mean", "iterative"):
            start = time.perf_counter()
            filled[how] = imputed(holes, how)
            spent = time.perf_counter() - start
            fit = case.fit(tmp, f"{how}{share}", filled[how])
            row(how, fit["K"], None, case.score(fit["labels"], reference), fit["laps"], spent + fit["seconds"])
        labels, seconds, K = bgm_labels(filled["iterative"], complete["K"])
        row("bgm", K, None, case.score(labels, reference), "", seconds)
    return complete


def lap_cost(case: Case, tmp: Path, K: int, repeats: int = 2) -> None:
    """Seconds per lap (laps 2..6) without moves from K clusters, complete data against 10 % missing."""
    seconds = {"complete": [], "10% missing": []}
    files = {"complete": case.X, "10% missing": with_holes(case.X, 0.1)}
    for repeat in range(repeats):
        for name, X in files.items():
            path = case.write(tmp / f"lap-{repeat}-{len(seconds[name])}.h5", X)
            run = tmp / f"lap-{name.replace('%', '').replace(' ', '-')}-{repeat}"
            with threadpool_limits(limits=1):
                runner.train(config("data=hdf5", f"data.path={path}", "plots=false", *case.overrides[:2],
                                    f"init.K={K}", "moves=[]", "alg.n_laps=6", "alg.converge_thr=-1",
                                    *(["model.temperature=1"] if case.seq_range is None else [])), run)
            seconds[name].append(lap_seconds(run, 6))
    best = {name: min(values) for name, values in seconds.items()}
    print(f"  lap, K={K}, no moves: complete {best['complete']:.3f} s, 10% missing {best['10% missing']:.3f} s: "
          f"{best['10% missing'] / best['complete']:.2f}× (target <= 1.5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["patches", "mocap6"], choices=["drawn", "patches", "mocap6"])
    parser.add_argument("--shares", nargs="+", type=float, default=[0.1, 0.3])
    parser.add_argument("--laps", type=int, default=40)
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--lap-only", type=int, default=None, metavar="K",
                        help="only the cost of a lap, from K clusters (skips the fits)")
    args = parser.parse_args()
    register_configs()
    with tempfile.TemporaryDirectory(prefix="bench-missing-") as tmp:
        for name in args.cases:
            case, room = Case(name, args.data, args.laps), Path(tmp) / name
            room.mkdir()
            if args.lap_only is None:
                K = quality(case, room, args.shares)["K"]
                print(json.dumps({"case": name, "complete_K": K}))
            lap_cost(case, room, K if args.lap_only is None else args.lap_only)


if __name__ == "__main__":
    main()
