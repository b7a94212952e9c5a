"""scikit-learn estimators of mixtures of points: DPMixture and FiniteMixture (:mod:`bnpvi.api.estimator`).

``fit(X, sample_weight=w)`` takes an (N, D) array and optional per-row weights w_n ≥ 0 (a row of weight w
counts w times in every summary and entropy: integer weights train as duplicated rows); prediction is
:class:`~bnpvi.api.fitted_mixture.FittedMixture`'s, after scikit-learn's input checks.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import ClusterMixin, DensityMixin
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from bnpvi.api.estimator import PARTIAL_LAPS, Estimator, draw_emissions, refuse_empty, run_seed
from bnpvi.data.documents_in import Documents
from bnpvi.data.points_in import Points
from bnpvi.data.store import write_documents, write_points
from bnpvi.errors import BnpviError, check_int
from bnpvi.obs.base import refuse_missing


class _Mixture(ClusterMixin, DensityMixin, Estimator):
    """What both mixture estimators share."""

    def fit(self, X, y=None, sample_weight=None):
        """Train on the rows of ``X`` (N, D), row n counted ``sample_weight[n]`` ≥ 0 times (None: once each;
        stored as the run's data file's weights, ``bnpvi-data convert --weights``); ``y`` is ignored. With
        ``obs="mult"``, ``X`` is a count matrix (N documents × V words, SciPy sparse or dense): a mixture of
        documents, one cluster each. Returns self."""
        refuse_empty(X, "X", "rows (points)")
        if self.obs == "mult":
            if sample_weight is not None:
                raise BnpviError("fit: documents take no sample_weight yet (weights are for points)")
            X = self.checked_counts(X, reset=True)
            return self._set_fitted(self.train_on(lambda path, n_batches, source: write_documents(
                path, X.indices, X.data, X.indptr, X.shape[1], n_batches=n_batches, source=source)), X)
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2, ensure_all_finite="allow-nan")
        refuse_missing(self.family(), X, "fit: X")
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        return self._set_fitted(self.train_on(lambda path, n_batches, source: write_points(
            path, X, n_batches=n_batches, source=source, weights=sample_weight)), X)

    def partial_fit(self, X, y=None, n_laps: int = PARTIAL_LAPS):
        """Train on the rows of ``X`` as more data: the first call fits them (as :meth:`fit`, its run kept), each
        later call adds them to the run's data as new batches (of about the size of the first call's) and goes
        on for ``n_laps`` laps of the whole data with its moves, the memoized summaries of the rows seen before
        kept and the stable cluster ids too (:func:`bnpvi.learn.runner.grow`; alg=memo or vb). ``labels_`` are
        then those of ``X``. ``y`` is ignored. Returns self."""
        refuse_empty(X, "X", "rows (points)")
        first = getattr(self, "partial_run_", None) is None
        if self.obs == "mult":
            X = self.checked_counts(X, reset=first)
            more = Documents(X.indices, X.data, X.indptr, X.shape[1])
        else:
            X = validate_data(self, X, dtype=np.float64, reset=first, ensure_min_samples=2 if first else 1,
                              ensure_all_finite="allow-nan")
            refuse_missing(self.family(), X, "partial_fit: X")
            more = Points(X)
        return self._set_fitted(self.partial_train_on(
            lambda path, n_batches, source: more.write(path, n_batches=n_batches, source=source), more, n_laps), X)

    def _set_fitted(self, fitted, X):
        """The mixture's attributes from the loaded model; ``labels_`` of ``X``. Returns self."""
        self.weights_ = fitted.weights_
        for name, value in fitted.model.obs.cluster_moments(fitted.globals_.obs).items():
            setattr(self, name, value)
        self.labels_ = fitted.predict(X)
        return self

    def sample(self, n_samples: int = 1, random_state=None) -> tuple[np.ndarray, np.ndarray]:
        """(X (n_samples, D), labels): points drawn from the fitted mixture under its point estimates, as
        scikit-learn's ``GaussianMixture.sample``: a cluster k with probability ``weights_``, then a Gaussian of
        mean ``means_[k]`` and covariance ``covariances_[k]`` (Bernoulli families: independent 1s with
        probability ``means_[k]``); labels are the clusters' ids (:attr:`cluster_ids_`)."""
        check_is_fitted(self)
        n_samples = check_int(n_samples, "n_samples", 1)
        rng = np.random.default_rng(run_seed(random_state))
        means, covariances = self.means_, getattr(self, "covariances_", None)
        weights = np.asarray(self.weights_, dtype=np.float64)
        k = rng.choice(weights.shape[0], size=n_samples, p=weights / weights.sum())
        return draw_emissions(rng, means, covariances, k), np.asarray(self.cluster_ids_)[k]

    def _checked(self, X):
        check_is_fitted(self)
        if self.obs == "mult":
            return self.checked_counts(X, reset=False)
        return validate_data(self, X, dtype=np.float64, reset=False, ensure_all_finite="allow-nan")

    def predict(self, X) -> np.ndarray:
        """(N,) int64: the id (in :attr:`cluster_ids_`) of every row's most responsible cluster."""
        X = self._checked(X)
        return self.fitted_model_.predict(X)

    def predict_proba(self, X) -> np.ndarray:
        """(N, K) responsibilities, columns in the order of :attr:`cluster_ids_`."""
        X = self._checked(X)
        return self.fitted_model_.predict_proba(X)

    def score_samples(self, X) -> np.ndarray:
        """(N,) lower bound on the log predictive density of every row (:meth:`FittedMixture.score_samples`)."""
        X = self._checked(X)
        return self.fitted_model_.score_samples(X)

    def score(self, X, y=None, sample_weight=None) -> float:
        """The mean of :meth:`score_samples` (nats per point), weighted by ``sample_weight`` when given; ``y`` is
        ignored."""
        scores = self.score_samples(X)
        if sample_weight is None:
            return float(np.mean(scores))
        sample_weight = _check_sample_weight(sample_weight, scores[:, None], dtype=np.float64, ensure_non_negative=True)
        return float(np.average(scores, weights=sample_weight))


class DPMixture(_Mixture, model="dp_mix", obs="gauss"):
    """Dirichlet-process mixture (``model=dp_mix``): K adapts by birth, merge and delete moves under memoized VI.

    Fitted attributes: ``n_components_`` (K), ``elbo_`` (the final whole-data ELBO), ``weights_`` (E[π_k]),
    ``means_`` and ``covariances_`` (``ObsFamily.cluster_moments``), ``cluster_ids_`` (the stable id of every
    cluster, the columns of :meth:`predict_proba`), ``labels_`` (:meth:`predict` of the training rows),
    ``fitted_model_`` (the :class:`~bnpvi.api.fitted_mixture.FittedMixture`). Keywords: see
    :class:`~bnpvi.api.estimator.Estimator`.
    """


class FiniteMixture(_Mixture, model="finite_mix", obs="gauss", fixed_K=True):
    """Finite mixture of ``n_components`` clusters (``model=finite_mix``, symmetric Dirichlet(γ/K) weights; no moves).

    Fitted attributes and keywords as :class:`DPMixture`'s, without ``moves`` and the moves' keys.
    """
