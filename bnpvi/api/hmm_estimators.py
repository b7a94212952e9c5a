"""scikit-learn estimators of hidden Markov models: HDPHMM and FiniteHMM (:mod:`bnpvi.api.estimator`).

``fit(seqs)`` takes a list of (T_i, D) arrays of finite numbers, one per sequence. State paths,
marginals and scores are :class:`~bnpvi.api.fitted_hmm.FittedHMM`'s (an auto-regressive family
gives every sequence T_i − 1 states: see :mod:`bnpvi.api.fitted_hmm`).
"""
from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from bnpvi.api.estimator import PARTIAL_LAPS, Estimator, draw_emissions, run_seed
from bnpvi.api.fitted_hmm import sequence_arrays
from bnpvi.data.sequences_in import Sequences
from bnpvi.data.store import write_sequences
from bnpvi.errors import BnpviError, check_int


def as_sequences(seqs, lengths, what: str):
    """``seqs`` as a list of (T_i, D) arrays, and whether they came as hmmlearn's (X, lengths): one (T, D)
    array, the sequences one after another, with ``lengths`` (T_i, summing to T; None: one sequence)."""
    if lengths is None and not (isinstance(seqs, np.ndarray) and seqs.ndim == 2):
        return seqs, False
    X = np.asarray(seqs)
    if X.ndim != 2:
        raise BnpviError(f"{what}: with lengths, X must be one (T, D) array of the sequences one after another")
    lengths = np.array([X.shape[0]] if lengths is None else lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or np.any(lengths < 1) or lengths.sum() != X.shape[0]:
        raise BnpviError(f"{what}: lengths must be positive integers that sum to the {X.shape[0]} rows of X")
    return np.split(X, np.cumsum(lengths)[:-1]), True


class _HMM(Estimator):
    """What both HMM estimators share. Sequences come as a list of (T_i, D) arrays, or as hmmlearn takes them:
    one (T, D) array and ``lengths``, the second argument of every method (paths and marginals then come back
    as one array, the sequences one after another; scikit-learn's tools pass no second argument to these
    unsupervised estimators)."""

    def fit(self, seqs, lengths=None):
        """Train on the sequences ``seqs`` (a list of (T_i, D) arrays, or hmmlearn's (X, ``lengths``)). Returns
        self."""
        X, seq_range = sequence_arrays(as_sequences(seqs, lengths, "fit")[0], "fit", family=self.family())
        fitted = self.train_on(lambda path, n_batches, source: write_sequences(path, X, seq_range,
                                                                               n_batches=n_batches, source=source))
        return self._set_fitted(fitted, X.shape[1])

    def partial_fit(self, seqs, lengths=None, n_laps: int = PARTIAL_LAPS):
        """Train on the sequences ``seqs`` as more data: the first call fits them (as :meth:`fit`, its run
        kept), each later call adds them to the run's data as new batches and goes on for ``n_laps`` laps
        (:meth:`~bnpvi.api.estimator.Estimator.partial_train_on`; alg=memo or vb). Returns self."""
        first = getattr(self, "partial_run_", None) is None
        X, seq_range = sequence_arrays(as_sequences(seqs, lengths, "partial_fit")[0], "partial_fit",
                                       None if first else self.n_features_in_, family=self.family())
        more = Sequences(X, seq_range)
        fitted = self.partial_train_on(
            lambda path, n_batches, source: more.write(path, n_batches=n_batches, source=source), more, n_laps)
        return self._set_fitted(fitted, X.shape[1])

    def _set_fitted(self, fitted, D: int):
        """The HMM's attributes from the loaded model: ``startprob_``, ``transmat_``, and the states' ``means_``
        and ``covars_`` (hmmlearn's names; ``ObsFamily.cluster_moments``) where the family has them. Returns
        self."""
        self.n_features_in_ = D
        self.startprob_ = fitted.startprob_
        self.transmat_ = fitted.transmat_
        moments = fitted.model.obs.cluster_moments(fitted.globals_.obs)
        self.means_, self.covars_ = moments.get("means_"), moments.get("covariances_")
        return self

    def predict(self, seqs, lengths=None):
        """The Viterbi path of every sequence, as stable state ids (:meth:`FittedHMM.predict`): a list, or one
        array for (X, ``lengths``)."""
        check_is_fitted(self)
        seqs, joined = as_sequences(seqs, lengths, "predict")
        paths = self.fitted_model_.predict(seqs)
        return np.concatenate(paths) if joined else paths

    def decode(self, seqs, lengths=None):
        """(log_prob, paths): the Viterbi paths (as :meth:`predict`) and their summed score under the saved
        globals (:meth:`FittedHMM.decode`), as hmmlearn's ``decode``."""
        check_is_fitted(self)
        seqs, joined = as_sequences(seqs, lengths, "decode")
        log_prob, paths = self.fitted_model_.decode(seqs)
        return log_prob, np.concatenate(paths) if joined else paths

    def score_samples(self, seqs, lengths=None):
        """(log_prob, marginals): the summed local-step bound Σ_d ln Z_d and the forward-backward marginals
        (:meth:`FittedHMM.score_samples`), as hmmlearn's ``score_samples``."""
        check_is_fitted(self)
        seqs, joined = as_sequences(seqs, lengths, "score_samples")
        log_prob, marginals = self.fitted_model_.score_samples(seqs)
        return log_prob, np.concatenate(marginals) if joined else marginals

    def sample(self, n_samples: int = 1, random_state=None) -> tuple[np.ndarray, np.ndarray]:
        """(X (n_samples, D), states): one sequence drawn from the fitted HMM under its point estimates, as
        hmmlearn's ``sample``: z_1 from ``startprob_``, each next state from its row of ``transmat_`` (both
        renormalised over the K states, the HDP's mass beyond them left out), then each step's observation
        from its state's ``means_`` and ``covars_`` (Bernoulli families: 1s with probability ``means_``);
        states are stable ids (:attr:`cluster_ids_`). Families without them (``ar_gauss``) are refused."""
        check_is_fitted(self)
        n_samples = check_int(n_samples, "n_samples", 1)
        if self.means_ is None:
            raise BnpviError(f"sample: obs={self.obs} has no state means and covariances to draw from")
        rng = np.random.default_rng(run_seed(random_state))
        start = np.cumsum(self.startprob_ / self.startprob_.sum())
        rows = np.cumsum(self.transmat_ / self.transmat_.sum(axis=1, keepdims=True), axis=1)
        u = rng.random(n_samples)
        states = np.empty(n_samples, dtype=np.int64)
        states[0] = min(int(np.searchsorted(start, u[0], side="right")), start.shape[0] - 1)
        for t in range(1, n_samples):  # a chain: each state depends on the one before
            states[t] = min(int(np.searchsorted(rows[states[t - 1]], u[t], side="right")), rows.shape[1] - 1)
        return draw_emissions(rng, self.means_, self.covars_, states), np.asarray(self.cluster_ids_)[states]

    def predict_proba(self, seqs, lengths=None):
        """The (T_i, K) forward-backward marginals of every sequence (:meth:`FittedHMM.predict_proba`): a list,
        or one (T, K) array for (X, ``lengths``)."""
        check_is_fitted(self)
        seqs, joined = as_sequences(seqs, lengths, "predict_proba")
        marginals = self.fitted_model_.predict_proba(seqs)
        return np.concatenate(marginals) if joined else marginals

    def score(self, seqs, lengths=None) -> float:
        """Nats per time step of the sequences' local-step bound (:meth:`FittedHMM.score`)."""
        check_is_fitted(self)
        return self.fitted_model_.score(as_sequences(seqs, lengths, "score")[0])


class HDPHMM(_HMM, model="hdp_hmm", obs="gauss"):
    """Sticky HDP hidden Markov model (``model=hdp_hmm``): the number of states adapts by birth, merge and delete
    moves under memoized VI (Hughes 2016 thesis Ch. 6).

    Fitted attributes: ``n_components_`` (K), ``elbo_`` (the final whole-data ELBO), ``startprob_`` (K,) and
    ``transmat_`` (K, K) (E[π_0] and E[π_j], without the HDP's mass on states beyond K), ``cluster_ids_``
    (the stable id of every state: the order of ``startprob_``, ``transmat_`` and the columns of
    :meth:`predict_proba`), ``fitted_model_`` (the :class:`~bnpvi.api.fitted_hmm.FittedHMM`). Keywords:
    see :class:`~bnpvi.api.estimator.Estimator`.
    """


class FiniteHMM(_HMM, model="finite_hmm", obs="gauss", fixed_K=True):
    """Finite sticky HMM with ``n_components`` states (``model=finite_hmm``; no moves).

    Fitted attributes and keywords as :class:`HDPHMM`'s, without ``moves`` and the moves' keys.
    """
