"""A loaded mixture (``dp_mix``, ``finite_mix``): cluster labels, responsibilities and scores of new points.

In the style of scikit-learn: ``predict`` (stable cluster ids), ``predict_proba``,
``score_samples`` and ``score``; :meth:`FittedMixture.apply` writes the assignments of a
whole data file (:mod:`bnpvi.io.assignments`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.alloc.mixture import MixtureAlloc
from bnpvi.api.fitted import FittedModel
from bnpvi.api.fitted_topics import as_batch, count_matrix
from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.data.checks import check_points
from bnpvi.errors import BnpviError
from bnpvi.io.assignments import write_assignments
from bnpvi.learn.assign import assign_file, best_labels, marks_heldout
from bnpvi.learn.heldout import evaluates_heldout, point_bounds, points_loglik
from bnpvi.obs.base import refuse_missing


class FittedMixture(FittedModel, alloc=MixtureAlloc):
    """A trained mixture under its final globals (:class:`~bnpvi.api.fitted.FittedModel`'s attributes, and:)

    Attributes
    ----------
    weights_ : (K,) ndarray
        E[π_k], in the order of :attr:`cluster_ids_`.
    """

    def __init__(self, model, globals_, cfg, tree: dict):
        super().__init__(model, globals_, cfg, tree)
        self.weights_ = model.alloc.export(globals_.alloc)["weights"]

    def _points(self, X, what: str) -> PointBatch | WordCountBatch:
        """``X`` as a batch, after the checks: a 2-D array of D columns, finite or missing (NaN, where the family
        marginalises missing entries); for a mixture of documents, a count matrix of V columns."""
        if self.kind == "bow":
            return as_batch(count_matrix(X, self.D, what))
        self.check_kind(what, "points")
        X = check_points(X, what, missing_ok=True)
        refuse_missing(self.model.obs, X, f"{what}: X")
        if X.shape[1] != self.D:
            raise BnpviError(f"{what}: X has D={X.shape[1]} columns, the model was trained on D={self.D}")
        return PointBatch(X=X)

    def predict(self, X) -> np.ndarray:
        """(N,) int64: the stable id (:attr:`cluster_ids_`) of every row's most responsible cluster."""
        return self.cluster_ids_[best_labels(self.model, self.globals_, self._points(X, "predict"))]

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

    def apply(self, store, out: Path) -> dict:
        """The assignments of every point of ``store`` (training then held-out part) in ``out`` and the .csv
        beside it (:mod:`bnpvi.io.assignments`); scores: the held-out points' ``heldout_loglik`` (the
        runner's held-out score) when the file has them."""
        self.check_store(store)
        store.validate()
        rows = write_assignments(out, assign_file(self.model, self.globals_, store, self.cluster_ids_),
                                 self.cluster_ids_, heldout=marks_heldout(store))
        scores = {}
        if evaluates_heldout(self.model, store):
            score = points_loglik(self.model, self.globals_, store)
            scores["heldout_loglik"] = (score["loglik_per_point"],
                                        f"nats per point ({score['n_points']} held-out points)")
        return {"written": f"{rows} rows", "scores": scores}
