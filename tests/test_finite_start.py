"""A finite mixture's start: K seeds whose cells (each sampled atom to its closest seed) are the first
clusters, kept through memo's first lap. The README's three blobs, in batches that each hold one blob,
are found on every seed, as scikit-learn's k-means-started GaussianMixture finds them."""
import json

import numpy as np
import pytest

from bnpvi.data.store import write_points
from bnpvi.learn import runner


@pytest.fixture
def blobs(tmp_path):
    """The README's points: three groups of 300 at (0, 0), (6, 0) and (0, 6), sd 1, in that order, in 3
    batches (each batch one group)."""
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [6, 0], [0, 6]])
    X = np.vstack([rng.normal(c, 1.0, size=(300, 2)) for c in centers])
    path = tmp_path / "points.h5"
    write_points(path, X, n_batches=3)
    return path


@pytest.mark.parametrize("alg", ["memo", "vb"])
def test_the_readme_blobs_are_found_on_every_seed(compose_cfg, tmp_path, blobs, alg):
    for seed in range(10):
        cfg = compose_cfg("data=hdf5", f"data.path={blobs}", "model=finite_mix", "init.K=3", f"alg={alg}",
                          f"seed={seed}", "plots=false")
        summary = runner.train(cfg, tmp_path / f"{alg}{seed}")
        assert sorted(np.round(summary["counts"])) == [299, 300, 300], (seed, summary["counts"])
        assert json.loads((tmp_path / f"{alg}{seed}" / "summary.json").read_text())["K"] == 3


@pytest.mark.parametrize("moves", ["moves=[]", "moves=[merge,delete]"])
def test_a_dp_mixture_without_births_starts_as_a_finite_one(compose_cfg, tmp_path, blobs, moves):
    # before: its seeds alone, and memo's global step after batch 0 sent the clusters of the two other blobs
    # back to the prior, where the next blobs fell into one of them (600/300/0 on seeds 1, 4, 5, 8)
    for seed in (1, 4):
        cfg = compose_cfg("data=hdf5", f"data.path={blobs}", "model=dp_mix", moves, "init.K=3", f"seed={seed}",
                          "plots=false")
        summary = runner.train(cfg, tmp_path / f"{seed}")
        assert sorted(np.round(summary["counts"])) == [299, 300, 300], (seed, summary["counts"])
