"""scikit-learn estimators of topic models: HDPTopicModel and LDA (:mod:`bnpvi.api.estimator`).

``fit(docs, vocabulary=None)`` takes a count matrix, N documents x V words (a SciPy sparse matrix,
CSR best, or a dense array of non-negative whole numbers; every document needs a word) and
optionally the V words, which are stored with the model (``vocabulary_``, ``top_words``); or raw
texts (a list of strings), which are tokenised as ``bnpvi-data convert --text`` does, with the
keywords ``stop_words`` ("english", the default of both; "none" keeps every word), ``min_df`` (1),
``max_df`` (1.0) and ``max_vocab`` (None) of its options (:mod:`bnpvi.data.text_in`), and ``encoding``
("utf-8": that of a stop-word file given as ``stop_words``, and of raw text files the model is later applied
to, ``bnpvi-apply``); documents left without a word are dropped. ``transform``,
``score`` and ``coherence`` then take raw texts too, counted under the model's vocabulary. The
topic weights, topics and scores are :class:`~bnpvi.api.fitted_topics.FittedTopicModel`'s.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from bnpvi.api.estimator import PARTIAL_LAPS, Estimator, refuse_empty
from bnpvi.api.fitted_topics import is_texts, stack_groups
from bnpvi.data.checks import check_vocab
from bnpvi.data.documents_in import Documents
from bnpvi.data.sequences_in import Sequences
from bnpvi.data.store import write_documents, write_sequences
from bnpvi.data.text_in import VocabularyLimits, text_documents
from bnpvi.data.tokens import DEFAULT_STOP_WORDS, TextSettings
from bnpvi.errors import BnpviError


class _TopicModel(TransformerMixin, Estimator):
    """What both topic-model estimators share."""

    extra_keywords = {"stop_words": DEFAULT_STOP_WORDS, "min_df": 1, "max_df": 1.0, "max_vocab": None,
                      "encoding": "utf-8"}

    def _counts(self, docs, reset: bool):
        """``docs`` after scikit-learn's checks (which set or compare ``n_features_in_``) and
        :func:`~bnpvi.api.fitted_topics.count_matrix`'s; raw texts after fit are counted by the model, and
        groups of real vectors are the fitted model's to check."""
        if not reset and (is_texts(docs) or self._grouped()):
            return docs
        return self.checked_counts(docs, reset)

    def _grouped(self) -> bool:
        """Whether the documents are groups of real vectors (``obs`` other than ``mult``)."""
        return self.obs != "mult"

    def fit(self, docs, y=None, vocabulary=None):
        """Train on the documents of ``docs``: rows of a count matrix (N, V), with ``vocabulary`` the V words
        stored with the model, or raw texts (the vocabulary is then made from them); with ``obs`` a family of
        real vectors (``gauss``, ``diag_gauss``, ``zm_gauss``, ``bern``), a list of (n_d, D) arrays, one per
        group (an admixture of that family's clusters). ``y`` is ignored. Returns self."""
        refuse_empty(docs, "docs", "documents")
        self.checked_choices()
        return self._fit(docs, vocabulary, partial=False)

    def partial_fit(self, docs, y=None, vocabulary=None, n_laps: int = PARTIAL_LAPS):
        """Train on ``docs`` (as :meth:`fit` takes them) as more data: the first call fits them (its run kept),
        each later call adds them to the run's data as new batches and goes on for ``n_laps`` laps
        (:meth:`~bnpvi.api.estimator.Estimator.partial_train_on`; alg=memo or vb). Later documents are counted
        by the run's vocabulary (raw texts by its tokeniser, unknown words dropped, documents left without a
        word dropped), so ``vocabulary`` goes with the first call only. ``y`` is ignored. Returns self."""
        refuse_empty(docs, "docs", "documents")
        self.checked_choices()
        if getattr(self, "partial_run_", None) is None:
            return self._fit(docs, vocabulary, partial=True)
        if vocabulary is not None:
            raise BnpviError("partial_fit: vocabulary= goes with the first call; later documents are counted by "
                             "the run's vocabulary")
        if self._grouped():
            more = Sequences(*stack_groups(docs, "partial_fit", self.n_features_in_, family=self.family()))
        else:
            X = self.fitted_model_.count_text(docs)[0] if is_texts(docs) else self._counts(docs, reset=False)
            X = X[np.diff(X.indptr) > 0]
            if X.shape[0] == 0:
                raise BnpviError("partial_fit: no document holds a word of the run's vocabulary")
            more = Documents(X.indices, X.data, X.indptr, X.shape[1])  # the run's vocabulary and text origin follow
        return self._set_topics(self.partial_train_on(None, more, n_laps))

    def _set_topics(self, fitted):
        """The topics' attributes from the loaded model (None for groups of vectors): ``topics_`` (K, V) the
        probabilities λ̂_k / Σ_v λ̂_kv, ``components_`` (K, V) the Dirichlet parameters λ̂ (scikit-learn's
        name), ``vocabulary_``. Returns self."""
        self.topics_, self.vocabulary_ = fitted.topics_, fitted.vocabulary_
        self.components_ = None if fitted.topics_ is None else np.asarray(fitted.globals_.obs["lam"])
        return self

    def _fit(self, docs, vocabulary, partial: bool):
        """:meth:`fit`'s training (``partial``: the first call of :meth:`partial_fit`)."""
        if self._grouped():
            if vocabulary is not None:
                raise BnpviError(f"fit: vocabulary= is for word counts (obs=mult), not obs={self.obs}")
            X, seq_range = stack_groups(docs, "fit", family=self.family())
            self.n_features_in_ = X.shape[1]
            return self._set_topics(self.train_on(lambda path, n_batches, source: write_sequences(
                path, X, seq_range, n_batches=n_batches, source=source), partial))
        if is_texts(docs):
            if vocabulary is not None:
                raise BnpviError("fit: raw texts make their own vocabulary; pass vocabulary= with a count matrix only")
            corpus = text_documents(lambda: [(list(docs), None)],
                                    TextSettings.make(self.stop_words, encoding=self.encoding),
                                    VocabularyLimits.make(self.min_df, self.max_df, self.max_vocab), "fit")
            self.n_features_in_ = corpus.vocab_size
            fitted = self.train_on(lambda path, n_batches, source: corpus.write(path, n_batches=n_batches,
                                                                                source=source), partial)
        else:
            X = self._counts(docs, reset=True)
            vocab = None if vocabulary is None else check_vocab(vocabulary, X.shape[1], "fit")
            fitted = self.train_on(lambda path, n_batches, source: write_documents(
                path, X.indices, X.data, X.indptr, X.shape[1], n_batches=n_batches, vocab=vocab, source=source),
                partial)
        return self._set_topics(fitted)

    def coherence(self, docs, top_n: int = 10) -> np.ndarray:
        """(K,) NPMI coherence of every topic's ``top_n`` words over document co-occurrence in ``docs`` (the
        training documents, typically; :meth:`FittedTopicModel.coherence`)."""
        check_is_fitted(self)
        return self.fitted_model_.coherence(self._counts(docs, reset=False), top_n)

    def transform(self, docs) -> np.ndarray:
        """(N, K) topic weights E[π_dk] of every document, columns in the order of :attr:`cluster_ids_`
        (:meth:`FittedTopicModel.transform`)."""
        check_is_fitted(self)
        return self.fitted_model_.transform(self._counts(docs, reset=False))

    def top_words(self, n: int = 10) -> list[list]:
        """The ``n`` most probable words (or word ids) of every topic (:meth:`FittedTopicModel.top_words`)."""
        check_is_fitted(self)
        return self.fitted_model_.top_words(n)

    def perplexity(self, docs) -> float:
        """exp(−:meth:`score`): the perplexity per held-out token (per point, for groups of vectors) by document
        completion, lower is better (scikit-learn's name; its value comes from another bound)."""
        return float(np.exp(-self.score(docs)))

    def score(self, docs, y=None) -> float:
        """Log-likelihood per token by document completion of ``docs`` (:meth:`FittedTopicModel.score`; the
        run's held-out score); ``y`` is ignored."""
        check_is_fitted(self)
        return self.fitted_model_.score(self._counts(docs, reset=False))


class HDPTopicModel(_TopicModel, model="hdp_topic", obs="mult"):
    """HDP topic model (``model=hdp_topic``): the number of topics adapts by birth, merge and delete moves under
    memoized VI (Hughes 2016 thesis Ch. 5).

    Fitted attributes: ``n_components_`` (K), ``elbo_`` (the final whole-data ELBO), ``topics_`` ((K, V)
    E[φ_kv]), ``vocabulary_`` (the words given to ``fit``, or None), ``cluster_ids_`` (the stable id of every
    topic: the rows of ``topics_``, the columns of :meth:`transform`), ``fitted_model_`` (the
    :class:`~bnpvi.api.fitted_topics.FittedTopicModel`). Keywords: see :class:`~bnpvi.api.estimator.Estimator`.
    """


class LDA(_TopicModel, model="lda", obs="mult", fixed_K=True):
    """Latent Dirichlet allocation with ``n_components`` topics (``model=lda``, document weights Dirichlet(α/K);
    no moves).

    Fitted attributes and keywords as :class:`HDPTopicModel`'s, without ``moves`` and the moves' keys.
    """
