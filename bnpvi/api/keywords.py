"""The estimators' keywords: the leaf keys of the config options, and the ``train`` config they compose.

Every leaf key of an option that an estimator's model can use is a keyword, named by the key
itself (``gamma``, ``n_laps``, ``K``, ``sparse_L``, ``sF``, ``max_iters``, ...) or, when two groups
share it, by ``group_key`` (``init_kmeans_iters`` and ``birth_kmeans_iters``; a move is its own
group, so ``birth_max_per_lap``, ``delete_max_per_lap``). The options an estimator can use are its
``model``, the ``obs`` families of its kind of data (:data:`MODEL_KINDS`), every ``alg`` and
``init``, and the moves its allocation model supports (none for a finite model). Which keys are
shared is decided over all estimators at once, so a key has the same keyword in every estimator.
The table is read from the schemas of :mod:`bnpvi.config`, so a key added there is a keyword here
too. ``None`` leaves the key at its value in ``conf/`` (what ``bnpvi-train`` would use).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

import numpy as np
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from bnpvi.config import SCHEMAS, register_configs, schema_of
from bnpvi.obs import FAMILIES

GROUPS = ("model", "alg", "init", "obs", "moves")
"""The config groups whose keys are keywords, in the order of the estimators' signatures."""
MODEL_KINDS = {"dp_mix": "points", "finite_mix": "points", "hdp_topic": "bow", "lda": "bow",
               "hdp_hmm": "seq", "finite_hmm": "seq", "hdp_mmsb": "graph", "finite_mmsb": "graph"}
"""The ``model`` options of the estimators and the kind of data each one's ``fit`` takes."""


def obs_options(kind: str) -> list[str]:
    """The ``obs`` options whose family models data of ``kind`` ("points", "bow" or "seq")."""
    return [option for option in SCHEMAS["obs"] if kind in FAMILIES[option].data_kinds]


GROUPED_MODELS = ("hdp_topic", "lda")
"""The models whose estimators also take grouped real vectors (a list of arrays, one per group: an admixture
of the family's clusters, Hughes 2016 thesis Ch. 5 with another family than words)."""


MIXTURE_MODELS = ("dp_mix", "finite_mix")
"""The models whose estimators also take documents (a count matrix, with obs=mult): a mixture of documents."""


def estimator_obs(model: str) -> list[str]:
    """The ``obs`` options of the estimator of ``model=model``: the families of its kind of data, for a topic
    model those of independent real vectors too (grouped: a sequence file of groups), and for a mixture the
    word counts of documents too."""
    options = obs_options(MODEL_KINDS[model])
    if model in GROUPED_MODELS:
        options += [option for option in obs_options("points") if option in obs_options("seq")]
    if model in MIXTURE_MODELS:
        options += obs_options("bow")
    return options


def model_moves(model: str) -> list[str]:
    """The ``moves`` options that ``model=model`` runs: its allocation model's moves, none for a finite one."""
    alloc = get_class(SCHEMAS["model"][model]._target_)
    return [] if getattr(alloc, "finite", False) else [move for move in SCHEMAS["moves"] if move in alloc.moves]


def _options(group: str, model: str) -> list[str]:
    """The options of ``group`` that the estimator of ``model=model`` can choose."""
    if group == "model":
        return [model]
    if group == "obs":
        return estimator_obs(model)
    return model_moves(model) if group == "moves" else list(SCHEMAS[group])


def _leaves(group: str, option: str) -> list[tuple[str, str]]:
    """(owner, config path) of every leaf key of ``group=option``; a move's owner is the move itself."""
    owner = option if group == "moves" else group
    prefix = f"moves.{option}" if group == "moves" else group
    return [(owner, f"{prefix}.{f.name}") for f in dataclasses.fields(SCHEMAS[group][option])
            if f.name not in ("name", "_target_")]


def keyword_paths(model: str) -> dict[str, str]:
    """Keyword -> config path (``"moves.birth.Kmax"``) of every key the estimator of ``model=model`` can set.

    A key is written ``owner_key`` when two owners share it among the options of all estimators
    (:data:`MODEL_KINDS`), so a key has the same keyword in every estimator.
    """
    owned = {(owner, path.rsplit(".", 1)[1]) for other in MODEL_KINDS for group in GROUPS
             for option in _options(group, other) for owner, path in _leaves(group, option)}
    shared = {key for key, n in Counter(key for _, key in owned).items() if n > 1}
    table = {}
    for group in GROUPS:
        for option in _options(group, model):
            for owner, path in _leaves(group, option):
                key = path.rsplit(".", 1)[1]
                table[f"{owner}_{key}" if key in shared else key] = path
    return table


def plain(value):
    """``value`` as the YAML-like value OmegaConf stores: NumPy scalars and arrays become Python ones."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return value


@contextmanager
def _hydra_set_aside() -> Iterator[None]:
    """Hydra's global state cleared, and put back after (so a fit also works inside a Hydra app)."""
    saved = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        yield
    finally:  # Hydra's initialize_* may have replaced the instance: ask for it again
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)


def compose_train(overrides: list[str]) -> DictConfig:
    """The ``train`` config composed with ``overrides``, as ``bnpvi-train`` composes it (without the hydra node):
    a copy of the one composed for the same overrides before in this process, if any (composing takes about
    0.1 s, a copy 1 ms: it counts in a fit on small data and in every fit of a grid search)."""
    return copy.deepcopy(_composed(tuple(overrides)))


@functools.lru_cache(maxsize=64)
def _composed(overrides: tuple[str, ...]) -> DictConfig:
    register_configs()
    with _hydra_set_aside(), initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def set_keys(cfg: DictConfig, values: dict[str, object], paths: dict[str, str], owner: str) -> None:
    """Set ``cfg``'s key of every keyword in ``values`` to its value, each checked by the typed config.

    Raises
    ------
    TypeError
        A keyword whose key the chosen options lack (``lam1`` with obs=gauss, a birth key with births off).
    ValueError
        A value the key's type refuses (one line).
    """
    for name, value in values.items():
        parent, _, key = paths[name].rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if node is None:
            raise TypeError(f"{owner}: {name} sets {paths[name]}, but the {parent.split('.')[-1]} move is off "
                            f"(moves={sorted(k for k, v in cfg.moves.items() if v is not None)})")
        if key not in node:
            group = parent.split(".")[0]
            raise TypeError(f"{owner}: {name} sets {paths[name]}, which {group}={schema_of(group, cfg[group])[0]} "
                            "does not have")
        try:
            OmegaConf.update(cfg, paths[name], plain(value), merge=False)
        except Exception as err:
            raise ValueError(f"{owner}: {name}={value!r}: {str(err).splitlines()[0]}") from None

