"""A run directory as a fitted model: the saved globals, applied by the local step alone (no global step).

:func:`load` rebuilds the model from ``RUN_DIR/model.h5`` only (config, global summaries,
allocation parameters, the training data's kind, dimension, moments and vocabulary), so the
training file is not needed, and returns the :class:`FittedModel` of the model's family:

* mixtures (:class:`~bnpvi.api.fitted_mixture.FittedMixture`): ``predict``, ``predict_proba``,
  ``score_samples``, ``score``;
* topic models (:class:`~bnpvi.api.fitted_topics.FittedTopicModel`): ``transform``, ``topics_``,
  ``top_words``, ``score``;
* hidden Markov models (:class:`~bnpvi.api.fitted_hmm.FittedHMM`): ``predict`` (Viterbi paths),
  ``predict_proba``, ``score``, ``transmat_``, ``startprob_``.

Every family's :meth:`FittedModel.apply` writes what the model says about a whole data file
(``bnpvi-apply``).
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.errors import BnpviError
from bnpvi.io.model_file import moments_of, read_model_to_apply
from bnpvi.io.trace import clusters_holding_mass
from bnpvi.learn.build import build_model, make_alloc
from bnpvi.obs.base import missing_problem
from bnpvi.stats import SuffStats

_FAMILIES: list[tuple[type, type["FittedModel"]]] = []
"""(allocation model base class, FittedModel subclass) of every family, filled as the subclasses are defined."""


def load(run_dir) -> "FittedModel":
    """The final model of the run in ``run_dir`` (its model.h5), ready to apply to new data.

    Returns
    -------
    FittedModel
        Of the model's family: FittedMixture, FittedTopicModel or FittedHMM.

    Raises
    ------
    BnpviError
        No model.h5 in ``run_dir`` (the run has not ended), one written by an older bnpvi, or a model
        family that cannot be applied yet (one line).
    """
    tree = read_model_to_apply(Path(run_dir).expanduser() / "model.h5")
    cfg = OmegaConf.create(tree["config"])
    kind, D = str(tree["data"]["kind"]), int(tree["data"]["D"])
    model = build_model(cfg, make_alloc(cfg), kind, D, moments_of(tree))
    globals_ = model.restore(SuffStats.from_tree(tree["stats"]), tree["allocation"])
    for alloc, family in _FAMILIES:
        if isinstance(model.alloc, alloc):
            return family(model, globals_, cfg, tree)
    raise BnpviError(f"bnpvi.load cannot apply model={model.alloc.name} yet")


class FittedModel(ABC):
    """A trained model under its final globals: what every family has.

    Attributes
    ----------
    model : Model
    globals_ : Globals
    config : DictConfig
        The run's composed config.
    cluster_ids_ : (K_total,) ndarray of int64
        The stable id of every cluster (component, topic, state), in the order of model.h5 and of the
        columns of the families' per-cluster outputs (model.h5's ``uids``, clusters.csv's ``uid``).
    n_components_ : int
        K: the clusters that hold mass (at least 0.01 atoms, :func:`~bnpvi.io.trace.clusters_holding_mass`),
        as summary.json's ``K``.
    n_components_total_ : int
        K_total: every cluster the model carries, empty ones included (a finite model, or a run without
        deletes, keeps those); the length of :attr:`cluster_ids_` and of the per-cluster arrays.
    elbo_ : float
        The run's final ELBO.
    n_iter_ : int
        The laps the run took.
    converged_ : bool
        Whether it stopped by converging (rather than at ``alg.n_laps`` or interrupted).
    kind : str
        The kind of data the model was trained on (``"points"``, ``"bow"``, ``"seq"``).
    D : int
        The dimension of its atoms (a bag-of-words file's vocabulary size V).
    """

    def __init_subclass__(cls, alloc: type, **kwargs):
        super().__init_subclass__(**kwargs)
        _FAMILIES.append((alloc, cls))

    def __init__(self, model, globals_, cfg, tree: dict):
        self.model = model
        self.globals_ = globals_
        self.config = cfg
        self.cluster_ids_ = np.asarray(tree["uids"], dtype=np.int64)
        self.n_components_ = clusters_holding_mass(globals_.stats.N)
        self.n_components_total_ = int(globals_.K)
        self.kind = str(tree["data"]["kind"])
        self.D = int(tree["data"]["D"])
        summary = json.loads(tree["summary"])
        self.elbo_ = summary.get("elbo")
        self.n_iter_ = int(summary.get("laps", 0))
        self.converged_ = bool(summary.get("converged", False))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(model={self.model.alloc.name}, obs={self.model.obs.name}, "
                f"K={self.n_components_}, K_total={self.n_components_total_}, D={self.D})")

    def check_kind(self, what: str, kind: str) -> None:
        """A one-line BnpviError unless the model was trained on data of ``kind`` (``what`` names the call)."""
        if self.kind != kind:
            raise BnpviError(f"{what} takes {kind} data, but this model was trained on {self.kind} data; "
                             "use bnpvi-apply on a data file")

    def check_store(self, store) -> None:
        """A one-line BnpviError unless the data file ``store`` holds data of the model's kind and dimension, with
        missing entries only where the model's family marginalises them."""
        if store.kind != self.kind:
            raise BnpviError(f"data file {store.path} holds {store.kind} data; the model was trained on "
                             f"{self.kind} data")
        if store.D != self.D:
            size = "V" if self.kind == "bow" else "D"  # a bag-of-words file's dimension is its vocabulary size
            raise BnpviError(f"data file {store.path} has {size}={store.D}; the model was trained on "
                             f"{size}={self.D}")
        problem = missing_problem(self.model.obs, getattr(store, "n_missing_total", 0), f"data file {store.path}")
        if problem:
            raise BnpviError(problem)

    @abstractmethod
    def apply(self, store, out: Path) -> dict:
        """Write what the model says about every atom of the data file ``store`` to ``out`` (.h5) and the .csv
        beside it; nothing is left at either path on failure.

        Returns
        -------
        dict
            ``written`` (what was written, for a message) and ``scores``: name -> (value, unit) of the
            scores the file allows (a held-out score, agreement with true labels).
        """
