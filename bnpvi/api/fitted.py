"""A run directory as a fitted model: the saved globals, applied by the local step alone (no global step).

:func:`load` rebuilds the model from ``RUN_DIR/model.h5`` only (config, global summaries,
allocation parameters, the training data's kind, dimension and moments), so the training
file is not needed. For mixtures :class:`FittedModel` answers in the style of
scikit-learn: ``predict`` (stable cluster ids), ``predict_proba``, ``score_samples`` and
``score``, and :meth:`FittedModel.apply` writes the assignments of a whole data file.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from bnpvi.data.batch import PointBatch
from bnpvi.data.checks import check_points
from bnpvi.errors import BnpviError
from bnpvi.io.assignments import write_assignments
from bnpvi.io.model_file import moments_of, read_model_to_apply
from bnpvi.learn.assign import assign_file, best_clusters, check_mixture, marks_heldout
from bnpvi.learn.build import build_model, make_alloc
from bnpvi.learn.heldout import evaluates_heldout, point_bounds, points_loglik
from bnpvi.stats import SuffStats


def load(run_dir) -> "FittedModel":
    """The final model of the run in ``run_dir`` (its model.h5), ready to apply to new data.

    Raises
    ------
    BnpviError
        No model.h5 in ``run_dir`` (the run has not ended), or one written by an older bnpvi (one line).
    """
    tree = read_model_to_apply(Path(run_dir).expanduser() / "model.h5")
    cfg = OmegaConf.create(tree["config"])
    kind, D = str(tree["data"]["kind"]), int(tree["data"]["D"])
    model = build_model(cfg, make_alloc(cfg), kind, D, moments_of(tree))
    globals_ = model.restore(SuffStats.from_tree(tree["stats"]), tree["allocation"])
    return FittedModel(model, globals_, np.asarray(tree["uids"], dtype=np.int64), kind, D,
                       json.loads(tree["summary"]))


class FittedModel:
    """A trained model under its final globals.

    Attributes
    ----------
    model : Model
    globals_ : Globals
    cluster_ids_ : (K,) ndarray of int64
        The stable id of every cluster, in the order of the columns of :meth:`predict_proba`
        (model.h5's ``uids``, clusters.csv's ``uid``).
    n_components_ : int
        K.
    weights_ : (K,) ndarray
        E[π_k] of a mixture.
    elbo_ : float
        The run's final ELBO.
    kind : str
        The kind of data the model was trained on (``"points"``, ``"bow"``, ``"seq"``).
    D : int
        The dimension of its atoms.
    """

    def __init__(self, model, globals_, uids: np.ndarray, kind: str, D: int, summary: dict):
        self.model = model
        self.globals_ = globals_
        self.cluster_ids_ = uids
        self.n_components_ = int(globals_.K)
        self.kind = kind
        self.D = D
        self.elbo_ = summary.get("elbo")
        exported = model.alloc.export(globals_.alloc)
        self.weights_ = exported.get("weights")

    def __repr__(self) -> str:
        return (f"FittedModel(model={self.model.alloc.name}, obs={self.model.obs.name}, K={self.n_components_}, "
                f"D={self.D})")

    # ------------------------------------------------------------- points
    def _points(self, X, what: str) -> PointBatch:
        """``X`` as a batch, after the checks: a mixture of points, a 2-D finite array of D columns."""
        check_mixture(self.model, what)
        if self.kind != "points":
            raise BnpviError(f"{what} takes points, but this model was trained on {self.kind} data; "
                             "use bnpvi-apply on a data file")
        X = check_points(X, what)
        if X.shape[1] != self.D:
            raise BnpviError(f"{what}: X has D={X.shape[1]} columns, the model was trained on D={self.D}")
        return PointBatch(X=X)

    def predict(self, X) -> np.ndarray:
        """(N,) int64: the stable id (:attr:`cluster_ids_`) of every row's most responsible cluster."""
        clusters, _ = best_clusters(self.model, self.globals_, self._points(X, "predict"))
        return self.cluster_ids_[clusters]

    def predict_proba(self, X) -> np.ndarray:
        """(N, K) responsibilities r_nk of the local step (columns in the order of :attr:`cluster_ids_`;
        an L-sparse model's rows hold at most L nonzeros)."""
        resp = self.model.local_step(self._points(X, "predict_proba"), self.globals_)[1].resp
        matrix = resp.matrix()
        return matrix if isinstance(matrix, np.ndarray) else matrix.toarray()

    def score_samples(self, X) -> np.ndarray:
        """(N,) ln Σ_k exp(E ln π_k + E ln p(x_n | φ_k)) of every row: the optimum of its own local step,
        a lower bound on its log predictive density (the runner's held-out score per point)."""
        return point_bounds(self.model, self.globals_, self._points(X, "score_samples"))

    def score(self, X) -> float:
        """The mean of :meth:`score_samples` (nats per point)."""
        return float(np.mean(self.score_samples(X)))

    # --------------------------------------------------------- data files
    def check_store(self, store) -> None:
        """A one-line BnpviError unless the data file ``store`` holds data of the model's kind and dimension."""
        if store.kind != self.kind:
            raise BnpviError(f"data file {store.path} holds {store.kind} data; the model was trained on "
                             f"{self.kind} data")
        if store.D != self.D:
            raise BnpviError(f"data file {store.path} has D={store.D}; the model was trained on D={self.D}")

    def apply(self, store, out: Path) -> dict:
        """Write the assignments of every atom of ``store`` (training then held-out part) to ``out`` (.h5) and
        the .csv beside it (:mod:`bnpvi.io.assignments`).

        Returns
        -------
        dict
            ``rows`` written, and when the file has held-out points ``heldout_loglik`` and ``heldout_points``
            (the runner's held-out score).
        """
        check_mixture(self.model, "bnpvi-apply")
        self.check_store(store)
        store.validate()
        rows = write_assignments(out, assign_file(self.model, self.globals_, store, self.cluster_ids_),
                                 self.cluster_ids_, heldout=marks_heldout(store))
        result = {"rows": rows}
        if evaluates_heldout(self.model, store):
            score = points_loglik(self.model, self.globals_, store)
            result.update(heldout_loglik=score["loglik_per_point"], heldout_points=score["n_points"])
        return result
