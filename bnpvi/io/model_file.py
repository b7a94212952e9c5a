"""model.h5: the trained model in plain arrays, readable without bnpvi."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.io.h5tree import read_tree, write_atomic


def write_model(path: Path, model, cfg, summary: dict) -> None:
    """Cluster ids, counts, weights E[π], posterior and prior parameters, config and summary."""
    tree = {
        "uids": model.uids,
        "counts": model.eff.N,
        "weights": model.expected_pi(),
        "posterior": {key: np.asarray(value) for key, value in model.obs_post.items()},
        "prior": {key: np.asarray(value) for key, value in model.obs.prior_params().items()},
        "allocation": {key: np.asarray(value) for key, value in model.alloc_post.items()},
        "config": OmegaConf.to_yaml(cfg),
        "summary": json.dumps(summary),
    }
    write_atomic(path, tree, attrs={"format": "bnpvi-model", "format_version": 1,
                                    "model": model.alloc.name, "obs": model.obs.name, "K": model.K})


def read_model(path: Path) -> dict:
    """The contents of a model.h5 as a nested dict of arrays."""
    import h5py

    with h5py.File(path, "r") as f:
        return read_tree(f)
