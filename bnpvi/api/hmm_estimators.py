"""scikit-learn estimators of hidden Markov models: HDPHMM and FiniteHMM (:mod:`bnpvi.api.estimator`).

``fit(seqs)`` takes a list of (T_i, D) arrays of finite numbers, one per sequence. State paths,
marginals and scores are :class:`~bnpvi.api.fitted_hmm.FittedHMM`'s (an auto-regressive family
gives every sequence T_i − 1 states: see :mod:`bnpvi.api.fitted_hmm`).
"""
from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from bnpvi.api.estimator import PARTIAL_LAPS, Estimator
from bnpvi.api.fitted_hmm import sequence_arrays
from bnpvi.data.seq import joined_sequences
from bnpvi.data.store import write_sequences


class _HMM(Estimator):
    """What both HMM estimators share."""

    def fit(self, seqs, y=None):
        """Train on the sequences ``seqs`` (a list of (T_i, D) arrays); ``y`` is ignored. Returns self."""
        X, seq_range = sequence_arrays(seqs, "fit")
        fitted = self.train_on(lambda path, n_batches, source: write_sequences(path, X, seq_range,
                                                                               n_batches=n_batches, source=source))
        return self._set_fitted(fitted, X.shape[1])

    def partial_fit(self, seqs, y=None, n_laps: int = PARTIAL_LAPS):
        """Train on the sequences ``seqs`` as more data: the first call fits them (as :meth:`fit`, its run
        kept), each later call adds them to the run's data as new batches and goes on for ``n_laps`` laps
        (:meth:`~bnpvi.api.estimator.Estimator.partial_train_on`; alg=memo or vb). ``y`` is ignored. Returns
        self."""
        first = getattr(self, "partial_run_", None) is None
        X, seq_range = sequence_arrays(seqs, "partial_fit", None if first else self.n_features_in_)
        fitted = self.partial_train_on(
            lambda path, n_batches, source: write_sequences(path, X, seq_range, n_batches=n_batches, source=source),
            lambda path, store, batches, sizes, source: write_sequences(
                path, *joined_sequences([(b.X, b.seq_range) for b in batches] + [(X, seq_range)]),
                batch_sizes=sizes, source=source),
            seq_range.shape[0] - 1, n_laps)
        return self._set_fitted(fitted, X.shape[1])

    def _set_fitted(self, fitted, D: int):
        self.n_features_in_ = D
        self.startprob_ = fitted.startprob_
        self.transmat_ = fitted.transmat_
        return self

    def predict(self, seqs) -> list[np.ndarray]:
        """The Viterbi path of every sequence, as stable state ids (:meth:`FittedHMM.predict`)."""
        check_is_fitted(self)
        return self.fitted_model_.predict(seqs)

    def predict_proba(self, seqs) -> list[np.ndarray]:
        """The (T_i, K) forward-backward marginals of every sequence (:meth:`FittedHMM.predict_proba`)."""
        check_is_fitted(self)
        return self.fitted_model_.predict_proba(seqs)

    def score(self, seqs, y=None) -> float:
        """Nats per time step of the sequences' local-step bound (:meth:`FittedHMM.score`); ``y`` is ignored."""
        check_is_fitted(self)
        return self.fitted_model_.score(seqs)


class HDPHMM(_HMM, model="hdp_hmm", obs="gauss"):
    """Sticky HDP hidden Markov model (``model=hdp_hmm``): the number of states adapts by birth, merge and delete
    moves under memoized VI (Hughes 2016 thesis Ch. 6).

    Fitted attributes: ``n_components_`` (K), ``elbo_`` (the final whole-data ELBO), ``startprob_`` (K,) and
    ``transmat_`` (K, K) (E[π_0] and E[π_j], without the HDP's mass on states beyond K), ``cluster_ids_``
    (the stable id of every state: the order of ``startprob_``, ``transmat_`` and the columns of
    :meth:`predict_proba`), ``fitted_model_`` (the :class:`~bnpvi.api.fitted_hmm.FittedHMM`). Keywords:
    see :class:`~bnpvi.api.estimator.Estimator`.
    """


class FiniteHMM(_HMM, model="finite_hmm", obs="gauss"):
    """Finite sticky HMM with ``K`` states (``model=finite_hmm``; no moves).

    Fitted attributes and keywords as :class:`HDPHMM`'s, without ``moves`` and the moves' keys.
    """
