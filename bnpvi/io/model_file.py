"""model.h5: the trained model in plain arrays, readable without bnpvi."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.io.h5tree import read_tree, write_atomic


def write_model(path: Path, model, globals_, ids, cfg, summary: dict) -> None:
    """Cluster ids, counts, the allocation model's readable summaries (weights, or start and
    transition probabilities), posterior and prior parameters, config and summary."""
    tree = {
        "uids": ids.uids,
        "counts": globals_.stats.N,
        **model.alloc.export(globals_.alloc),
        "posterior": {key: np.asarray(value) for key, value in globals_.obs.items()},
        "prior": {key: np.asarray(value) for key, value in model.obs.prior_params().items()},
        "allocation": {key: np.asarray(value) for key, value in globals_.alloc.items()},
        "config": OmegaConf.to_yaml(cfg),
        "summary": json.dumps(summary),
    }
    write_atomic(path, tree, attrs={"format": "bnpvi-model", "format_version": 2,
                                    "model": model.alloc.name, "obs": model.obs.name, "K": globals_.K})


def read_model(path: Path) -> dict:
    """The contents of a model.h5 as a nested dict of arrays."""
    import h5py

    with h5py.File(path, "r") as f:
        return read_tree(f)
