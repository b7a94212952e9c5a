"""Grouped Gaussians on real image patches: does the HDP admixture predict held-out groups better than a DP
mixture of the same family (Hughes 2016 thesis Ch. 5)?

The data are made here from the photographs bundled with scikit-image (camera, astronaut, coffee, chelsea,
brick, grass, gravel; scikit-image must be installed): grey levels in [0, 1], 8×8 patches at stride 4 with
each patch's mean removed, grouped by the 64×64 tile of the photograph that holds them whole (15 × 15 = 225
patches a tile; ``--per-tile`` keeps a random few of each). A fraction of the tiles (``--heldout``, whole
groups) is kept apart by ``bnpvi-data convert --heldout``.

For each family (``--obs``, default ``gauss zm_gauss``) two runs from one cluster with the default moves
(memo, births, merges, deletes): ``hdp_topic`` on the groups, and ``dp_mix`` on the same training patches
(the same file: a mixture of time steps). Scores, in nats per patch on the same target points: the
admixture's held-out score by group completion (each held-out tile's topic weights fitted to half its
patches, the other half scored: the run's ``heldout_loglik``), and the mixture's per-point bound
ln Σ_k exp(E ln π_k + E ln p(x | φ_k)) of those same target patches.

Usage::

    python scripts/bench_grouped.py                       # 50 patches a tile, 20 % of tiles held out
    python scripts/bench_grouped.py --per-tile 225 --seeds 1 2 3
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

PHOTOS = ("camera", "astronaut", "coffee", "chelsea", "brick", "grass", "gravel")


def tile_patches(per_tile: int, seed: int, size: int = 8, stride: int = 4, tile: int = 64):
    """(X (T, 64), seq_range): the mean-removed patches of every whole 64×64 tile of the photographs, tile
    after tile, ``per_tile`` of each drawn at random (all 225 when ``per_tile`` >= 225)."""
    from skimage import color, data, util

    rng = np.random.default_rng(seed)
    groups = []
    for name in PHOTOS:
        image = getattr(data, name)()
        grey = util.img_as_float(color.rgb2gray(image) if image.ndim == 3 else image)
        for top in range(0, grey.shape[0] - tile + 1, tile):
            for left in range(0, grey.shape[1] - tile + 1, tile):
                block = grey[top:top + tile, left:left + tile]
                windows = np.lib.stride_tricks.sliding_window_view(block, (size, size))[::stride, ::stride]
                patches = windows.reshape(-1, size * size)
                patches = patches - patches.mean(axis=1, keepdims=True)
                if per_tile < patches.shape[0]:
                    patches = patches[np.sort(rng.choice(patches.shape[0], per_tile, replace=False))]
                groups.append(patches)
    bounds = np.concatenate([[0], np.cumsum([g.shape[0] for g in groups])])
    return np.vstack(groups), bounds


def mixture_on_targets(run_dir: Path, path: Path, seed: int) -> tuple[float, int]:
    """The DP mixture's per-point bound, averaged over the target halves of the file's held-out groups."""
    import bnpvi
    from bnpvi.data.heldout import group_halves
    from bnpvi.data.store import BatchStore
    from bnpvi.learn.heldout import point_bounds

    fitted = bnpvi.load(run_dir)
    with BatchStore.open(path) as store:
        held = store.read_heldout()
    target = ~group_halves(held.seq_range, seed)
    from bnpvi.data.batch import PointBatch
    values = point_bounds(fitted.model, fitted.globals_, PointBatch(np.ascontiguousarray(held.X[target])))
    return float(np.mean(values)), int(target.sum())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-tile", type=int, default=50)
    parser.add_argument("--heldout", type=float, default=0.2)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--obs", nargs="+", default=["gauss", "zm_gauss"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--laps", type=int, default=60)
    parser.add_argument("--out", default=None, help="folder for the data and the runs (default: a temporary one)")
    args = parser.parse_args(argv)

    from bnpvi.api.keywords import compose_train
    from bnpvi.data.convert import convert
    from bnpvi.learn import runner

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.out or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        X, bounds = tile_patches(args.per_tile, 0)
        np.savez(folder / "tiles.npz", X=X, seq_range=bounds)
        path = convert(folder / "tiles.npz", folder / "tiles.h5", n_batches=args.batches, sequences="seq_range",
                       heldout=args.heldout, overwrite=True)
        print(f"{bounds.shape[0] - 1} tiles, {X.shape[0]} patches of D={X.shape[1]}; {args.heldout:g} of the tiles "
              f"held out whole; {args.batches} batches")
        print(f"{'obs':9} {'seed':>4} {'model':9} {'K':>3} {'laps':>4} {'train s':>8} {'heldout/patch':>14}")
        rows = []
        for obs in args.obs:
            for seed in args.seeds:
                for model in ("hdp_topic", "dp_mix"):
                    run_dir = folder / f"{model}-{obs}-{seed}"
                    cfg = compose_train([f"model={model}", f"obs={obs}", "data=hdf5", f"data.path={path}",
                                         f"seed={seed}", "init.K=1", f"alg.n_laps={args.laps}", "plots=false"])
                    start = time.perf_counter()
                    summary = runner.train(cfg, run_dir)
                    seconds = time.perf_counter() - start
                    if model == "hdp_topic":
                        score, count = summary["heldout_loglik"], summary["heldout_points"]
                    else:
                        score, count = mixture_on_targets(run_dir, path, int(cfg.heldout_seed))
                    rows.append({"obs": obs, "seed": seed, "model": model, "K": summary["K"], "laps": summary["laps"],
                                 "seconds": seconds, "heldout_per_patch": score, "target_patches": count})
                    print(f"{obs:9} {seed:>4} {model:9} {summary['K']:>3} {summary['laps']:>4} {seconds:>8.1f} "
                          f"{score:>14.4f}", flush=True)
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
