"""A loaded topic model (``hdp_topic``, ``lda``): topic weights of new documents, its topics, and scores.

Documents are a count matrix, N documents x V words (a SciPy sparse matrix, CSR best, or a
dense array) of non-negative whole numbers, with the model's vocabulary as columns, or raw texts (a
list of strings) when the model has a vocabulary: they are counted as the training corpus was
(:func:`bnpvi.data.tokens.count_texts`, with the tokeniser settings of a corpus converted from text),
and words outside the vocabulary are dropped.
:meth:`FittedTopicModel.transform` runs the model's own compiled document-level step (Hughes
2016 thesis Alg. 5.1, with its sparse restarts) under the saved globals, as the run does for
doc_topics.h5; :meth:`FittedTopicModel.apply` writes the weights of a whole data file
(:mod:`bnpvi.io.topic_weights`) and scores its held-out documents as the run does.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bnpvi.alloc.topic import TopicAlloc
from bnpvi.api.fitted import FittedModel
from bnpvi.data.batch import SeqBatch, WordCountBatch
from bnpvi.data.text_in import count_text_file
from bnpvi.data.tokens import TextSettings, count_texts
from bnpvi.errors import BnpviError
from bnpvi.io.model_file import text_settings_of
from bnpvi.io.topic_weights import write_topic_weights
from bnpvi.io.topics import topic_word_probs
from bnpvi.learn.assign import TopicWeights, marks_heldout, topic_weights, weigh_file
from bnpvi.metrics import npmi_coherence
from bnpvi.learn.heldout import completion_score, evaluates_heldout, group_completion_loglik, heldout_loglik
from bnpvi.obs.base import refuse_missing

SCORE_BLOCK = 5000
"""Documents split and scored at a time by :meth:`FittedTopicModel.score` (the score does not depend on it)."""


def is_texts(docs) -> bool:
    """Whether ``docs`` are raw texts: a list, tuple or 1-D array whose items are all strings."""
    if isinstance(docs, str) or sp.issparse(docs):
        return False
    if isinstance(docs, np.ndarray):
        return docs.ndim == 1 and docs.dtype.kind in "OUS" and all(isinstance(d, str) for d in docs.tolist())
    return isinstance(docs, (list, tuple)) and len(docs) > 0 and all(isinstance(d, str) for d in docs)


def count_matrix(docs, V: int, what: str) -> sp.csr_matrix:
    """``docs`` as a canonical CSR matrix (N, V) of float64 counts: one line BnpviError unless it is a 2-D
    matrix of ``V`` columns of finite, non-negative whole numbers."""
    if sp.issparse(docs):
        X = sp.csr_matrix(docs)
    else:
        dense = np.asarray(docs)
        if dense.ndim != 2 or dense.dtype.kind not in "biuf":
            raise BnpviError(f"{what}: docs must be a count matrix (N documents x V words: a SciPy sparse "
                             f"matrix or a 2-D array of numbers), got {type(docs).__name__} of shape "
                             f"{dense.shape} and dtype {dense.dtype}")
        X = sp.csr_matrix(dense)
    if X.dtype.kind not in "biuf":
        raise BnpviError(f"{what}: docs must hold numbers, got dtype {X.dtype}")
    if X.shape[1] != V:
        raise BnpviError(f"{what}: docs have V={X.shape[1]} columns (words); the model's vocabulary has V={V}")
    X = X.astype(np.float64)
    if not X.has_canonical_format:
        X.sum_duplicates()
    bad = ~np.isfinite(X.data) | (X.data < 0) | (X.data != np.round(X.data))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        row = int(np.searchsorted(X.indptr, j, side="right")) - 1
        raise BnpviError(f"{what}: document {row} has a count of {X.data[j].item()!r} for word {X.indices[j]} (counts "
                         "must be non-negative whole numbers)")
    X.eliminate_zeros()
    return X


def stack_groups(groups, what: str, D: int | None = None, *, family) -> tuple[np.ndarray, np.ndarray]:
    """(X (T, D), seq_range (G+1,)) of a list of groups of real vectors, each an (n_g, D) array of finite
    numbers with n_g ≥ 1 (``D``: the dimension they must have), NaN a missing entry where ``family`` (the
    observation family, an instance or its class) models them; one-line BnpviErrors naming the group."""
    if not isinstance(groups, (list, tuple)) or not groups:
        raise BnpviError(f"{what} takes groups of vectors (the model's kind of data): a non-empty list of (n, D) "
                         "arrays, one per group")
    arrays = []
    for g, group in enumerate(groups):
        try:
            array = np.asarray(group, dtype=np.float64)
        except (TypeError, ValueError):
            raise BnpviError(f"{what}: group {g} is not an array of numbers") from None
        if array.ndim != 2 or array.shape[0] == 0:
            raise BnpviError(f"{what}: group {g} has shape {array.shape}; each group is an (n, D) array with n >= 1")
        if np.isinf(array).any():
            raise BnpviError(f"{what}: group {g} holds an infinite value")
        refuse_missing(family, array, f"{what}: group {g}")
        arrays.append(array)
    dims = {array.shape[1] for array in arrays} | ({D} if D is not None else set())
    if len(dims) > 1:
        raise BnpviError(f"{what}: the groups have {len(dims)} different dimensions {sorted(dims)}"
                         + ("" if D is None else f"; the model was trained on D={D}"))
    seq_range = np.concatenate([[0], np.cumsum([array.shape[0] for array in arrays])]).astype(np.int64)
    return np.ascontiguousarray(np.vstack(arrays)), seq_range


def as_batch(X: sp.csr_matrix, start: int = 0) -> WordCountBatch:
    """The documents of a canonical CSR count matrix (:func:`count_matrix`) as a batch; ``start`` is the index
    of its first document in the set it belongs to."""
    return WordCountBatch(np.ascontiguousarray(X.indices, dtype=np.int32), np.ascontiguousarray(X.data),
                          np.ascontiguousarray(X.indptr, dtype=np.int64), X.shape[1], start)


class FittedTopicModel(FittedModel, alloc=TopicAlloc):
    """A trained topic model under its final globals (:class:`~bnpvi.api.fitted.FittedModel`'s attributes, and:)

    Attributes
    ----------
    topics_ : (K, V) ndarray, or None
        E[φ_kv] = λ̂_kv / Σ_w λ̂_kw, rows in the order of :attr:`cluster_ids_` (None unless obs=mult).
    vocabulary_ : list of str, or None
        The word of every word id, when the training file held a vocabulary.
    text_settings_ : TextSettings, or None
        How the training corpus was tokenised, when it was converted from raw text.
    """

    def __init__(self, model, globals_, cfg, tree: dict):
        super().__init__(model, globals_, cfg, tree)
        self.topics_ = topic_word_probs(globals_.obs) if "lam" in globals_.obs else None
        vocab = tree["data"].get("vocab")
        self.vocabulary_ = None if vocab is None else [str(word) for word in vocab]
        self.text_settings_ = text_settings_of(tree)

    def _text_settings(self, what: str) -> TextSettings:
        """The tokeniser of new text: the training corpus's, or scikit-learn's defaults (lower case, runs of
        two or more word characters, no stop words) for a corpus given as counts with a vocabulary."""
        if self.vocabulary_ is None:
            raise BnpviError(f"{what}: raw text needs the model's vocabulary, and this model was trained without "
                             "one (convert the corpus with --vocab or --text)")
        return self.text_settings_ or TextSettings()

    def count_text(self, texts) -> tuple[sp.csr_matrix, int]:
        """Counts (N, V) of raw ``texts`` under the model's vocabulary, and the tokens dropped as unknown."""
        return count_texts(texts, self.vocabulary_, self._text_settings("count_text"))

    def _documents(self, docs, what: str) -> sp.csr_matrix:
        self.check_kind(what, "bow")
        if is_texts(docs):
            return count_texts(docs, self.vocabulary_, self._text_settings(what))[0]
        return count_matrix(docs, self.D, what)

    def coherence(self, docs, top_n: int = 10) -> np.ndarray:
        """(K,) NPMI coherence of every topic's ``top_n`` words over document co-occurrence in ``docs``
        (:func:`bnpvi.metrics.npmi_coherence`; topics in the order of :attr:`cluster_ids_`)."""
        if self.topics_ is None:
            raise BnpviError(f"coherence needs topics over words (obs=mult), not obs={self.model.obs.name}")
        return npmi_coherence(self.topics_, self._documents(docs, "coherence"), top_n)

    def transform(self, docs) -> np.ndarray:
        """(N, K) E[π_dk] of every document (row of ``docs``), columns in the order of :attr:`cluster_ids_`.

        θ_d = N_d + α β̂ from the model's document-level step under the saved globals (Hughes 2016
        thesis Alg. 5.1), and E[π_dk] = θ_dk / Σ_l θ_dl, the sum including the HDP's mass α β̂_> beyond
        K, so an HDP's rows sum to a little less than 1 (an LDA's to 1); as the run's doc_topics.h5.
        A document without words gets the prior's weights.
        """
        if self.kind == "seq":
            return topic_weights(self.model, self.globals_, SeqBatch(*stack_groups(docs, "transform", self.D,
                                                                                    family=self.model.obs)))
        return topic_weights(self.model, self.globals_, as_batch(self._documents(docs, "transform")))

    def top_words(self, n: int = 10) -> list[list]:
        """The ``n`` most probable words of every topic (in the order of :attr:`cluster_ids_`), most probable
        first: strings from :attr:`vocabulary_`, or word ids when the model has no vocabulary."""
        if self.topics_ is None:
            raise BnpviError(f"top_words needs topics over words (obs=mult), not obs={self.model.obs.name}")
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise BnpviError(f"top_words: n must be a positive whole number, got {n!r}")
        top = np.argsort(-self.topics_, axis=1, kind="stable")[:, :n]
        if self.vocabulary_ is None:
            return top.tolist()
        return [[self.vocabulary_[v] for v in row] for row in top]

    def _completion(self) -> dict:
        """The run's document-completion split: ``seed`` and ``mode`` (``heldout_seed``, ``heldout_split``)."""
        return {"seed": int(self.config.get("heldout_seed", 0)), "mode": str(self.config.get("heldout_split",
                                                                                             "halves"))}

    def score(self, docs) -> float:
        """Log-likelihood per token by document completion of ``docs`` (nats per target token, higher is better).

        The runner's held-out score (Hughes, Kim & Sudderth 2015 §6, Eq. 22;
        :func:`bnpvi.learn.heldout.completion_score`), with ``docs`` as the held-out set: each document's
        tokens are split by the run's ``heldout_split`` and ``heldout_seed`` (document d of ``docs``
        by its own stream, seeded by d) into an observed part, which fits its topic weights, and a target
        part, which is scored under the point-estimate topics. Needs obs=mult and at least one target token.
        A model of grouped real vectors (a list of (n, D) arrays) is scored by group completion, in nats per
        target point (:func:`bnpvi.learn.heldout.group_completion_loglik`, seeded by ``heldout_seed``).
        """
        if self.kind == "seq":
            X, seq_range = stack_groups(docs, "score", self.D, family=self.model.obs)
            return group_completion_loglik(self.model, self.globals_, X, seq_range,
                                           seed=self._completion()["seed"])["loglik_per_point"]
        X = self._documents(docs, "score")
        blocks = (as_batch(X[lo:lo + SCORE_BLOCK], lo) for lo in range(0, X.shape[0], SCORE_BLOCK))
        return completion_score(self.model, self.globals_, blocks, self.D, "docs",
                                **self._completion())["loglik_per_token"]

    def check_store(self, store) -> None:
        """Also a one-line BnpviError when the file and the model both have a vocabulary and they differ."""
        super().check_store(store)
        theirs = store.vocab() if getattr(store, "has_vocab", False) else None
        if self.vocabulary_ is not None and theirs is not None and theirs != self.vocabulary_:
            v = next(i for i, (a, b) in enumerate(zip(theirs, self.vocabulary_)) if a != b)
            raise BnpviError(f"data file {store.path} has another vocabulary than the model (word id {v} is "
                             f"{theirs[v]!r} there, {self.vocabulary_[v]!r} in the model)")

    def apply(self, store, out: Path) -> dict:
        """The topic weights of every document of ``store`` (training then held-out part) in ``out`` and the
        .csv beside it (:mod:`bnpvi.io.topic_weights`); scores: the held-out documents' ``heldout_loglik`` by
        document completion, as the run computes it, when the file has them."""
        self.check_store(store)
        store.validate()
        rows = write_topic_weights(out, weigh_file(self.model, self.globals_, store), self.cluster_ids_,
                                   heldout=marks_heldout(store))
        scores = {}
        if evaluates_heldout(self.model, store):
            score, count, unit = heldout_loglik(self.model, self.globals_, store, **self._completion())
            scores["heldout_loglik"] = (score, f"nats per {unit[:-1]} ({count} held-out target {unit})")
        return {"written": f"{rows} documents", "scores": scores}

    def apply_text(self, path, out: Path, text_column=None, encoding: str | None = None) -> dict:
        """The topic weights of the documents of a raw text file (one per line, or the column ``text_column``
        of a .csv / .tsv; text in ``encoding``, by default the training corpus's) in ``out`` and its .csv,
        counted under the model's vocabulary; document i is line (row) i, and one whose words are all unknown
        gets the prior's weights."""
        self.check_kind("bnpvi-apply", "bow")
        counts, unknown = count_text_file(path, self.vocabulary_, self._text_settings("bnpvi-apply"), text_column,
                                          encoding)
        blocks = (TopicWeights(np.arange(lo, min(lo + SCORE_BLOCK, counts.shape[0]), dtype=np.int64),
                               topic_weights(self.model, self.globals_, as_batch(counts[lo:lo + SCORE_BLOCK], lo)),
                               False) for lo in range(0, counts.shape[0], SCORE_BLOCK))
        rows = write_topic_weights(out, blocks, self.cluster_ids_, heldout=False)
        tokens = int(counts.sum()) + unknown
        return {"written": f"{rows} documents; {unknown} of {tokens} tokens dropped as not in the model's "
                           "vocabulary", "scores": {}}
