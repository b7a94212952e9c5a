"""model.h5: the trained model in plain arrays, readable without bnpvi, and enough to apply it.

Besides the readable parts (cluster ids, counts, weights, posterior and prior parameters,
config, summary) it holds the global summaries ``stats`` and the allocation parameters from
which :meth:`bnpvi.model.Model.restore` rebuilds the final globals, and under ``data`` the
kind and dimension of the training data, the whole-data moments that set the observation
prior's data-driven defaults, a bag-of-words file's vocabulary (``data/vocab``) and, for a corpus
converted from raw text, its tokeniser settings and text encoding (``data/text``; a file written before the
encoding was stored reads as UTF-8), so the model can be rebuilt and
applied, to raw text too, without the training file (:func:`bnpvi.api.load`).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.data.moments import DataMoments
from bnpvi.data.tokens import TextSettings
from bnpvi.errors import BnpviError
from bnpvi.io.h5tree import read_tree, write_atomic

FORMAT_VERSION = 3
"""3: adds ``stats`` and ``data`` (version 2 files cannot be applied to new data)."""


def write_model(path: Path, model, globals_, ids, cfg, summary: dict, kind: str, D: int,
                moments: DataMoments | None, vocab: list[str] | None = None, text: TextSettings | None = None) -> None:
    """Cluster ids, counts, the allocation model's readable summaries (weights, or start and
    transition probabilities), posterior and prior parameters, the global summaries, the training
    data's kind, dimension ``D``, ``moments`` and ``vocab`` (the words of a bag-of-words file, when it
    has them) and ``text`` (the tokeniser settings of a corpus converted from raw text), config and summary."""
    data = {"kind": kind, "D": np.int64(D)}
    if vocab is not None:
        data["vocab"] = np.asarray(vocab, dtype=object)
    if text is not None:
        data["text"] = {**text.attrs(), "stop_word_list": np.asarray(text.stop_words, dtype=object)}
    if moments is not None:
        data["moments"] = {key: np.asarray(value) for key, value in dataclasses.asdict(moments).items()
                           if value is not None}
    tree = {
        "uids": ids.uids,
        "counts": globals_.stats.N,
        **model.alloc.export(globals_.alloc),
        "posterior": {key: np.asarray(value) for key, value in globals_.obs.items()},
        "prior": {key: np.asarray(value) for key, value in model.obs.prior_params().items()},
        "allocation": {key: np.asarray(value) for key, value in globals_.alloc.items()},
        "stats": globals_.stats.to_tree(),
        "data": data,
        "config": OmegaConf.to_yaml(cfg),
        "summary": json.dumps(summary),
    }
    write_atomic(path, tree, attrs={"format": "bnpvi-model", "format_version": FORMAT_VERSION,
                                    "model": model.alloc.name, "obs": model.obs.name, "K": globals_.K})


def read_model(path: Path) -> dict:
    """The contents of a model.h5 as a nested dict of arrays."""
    import h5py

    with h5py.File(path, "r") as f:
        return read_tree(f)


def read_model_to_apply(path: Path) -> dict:
    """:func:`read_model` of a file that holds what applying the model needs (format version 3 or later).

    Raises
    ------
    BnpviError
        The file is missing, not a bnpvi model, or written by an older bnpvi (one line).
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise BnpviError(f"{path} not found (a run writes model.h5 when it ends)")
    try:
        with h5py.File(path, "r") as f:
            attrs = dict(f.attrs)
            tree = read_tree(f)
    except OSError:
        raise BnpviError(f"{path} is not an HDF5 file") from None
    if attrs.get("format") != "bnpvi-model":
        raise BnpviError(f"{path} is not a bnpvi model file (no format='bnpvi-model' attribute)")
    if int(attrs.get("format_version", 0)) < FORMAT_VERSION:
        raise BnpviError(f"{path} has format_version {attrs.get('format_version')}, which lacks the global "
                         f"summaries needed to apply it (version {FORMAT_VERSION}); train the model again")
    return tree


def moments_of(tree: dict) -> DataMoments | None:
    """The training data's moments saved by :func:`write_model` (None when the data kind has none)."""
    saved = tree["data"].get("moments")
    if saved is None:
        return None
    return DataMoments(n_atoms=int(saved["n_atoms"]), mean=saved["mean"], cov=saved["cov"],
                       diff_cov=saved.get("diff_cov"), n_missing=int(saved.get("n_missing", 0)))


def text_settings_of(tree: dict) -> TextSettings | None:
    """The tokeniser settings stored by :func:`write_model` (None: the model was not trained on raw text)."""
    text = tree["data"].get("text")
    if text is None:
        return None
    return TextSettings.from_attrs(text, [str(word) for word in np.asarray(text["stop_word_list"]).reshape(-1)])
