"""Batches: the unit of data every local step works on.

A batch always holds whole atoms (points, documents or sequences). Every kind supports
``take(rows)`` (a sub-batch, e.g. a sample for initialisation or a birth's
targeted subset) and ``concat(batches)``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class PointBatch:
    """A batch of independent data atoms (one row each).

    Attributes
    ----------
    X : ndarray of shape (N, D), float64, C-contiguous
        The observations x_n.
    start : int
        Index of the first row in the whole data set (rows are contiguous).
    weights : ndarray of shape (N,), float64, optional
        w_n ≥ 0, how much each atom counts in every summary and entropy (``bnpvi.stats.resp``);
        None: 1 each.
    """

    X: np.ndarray
    start: int = 0
    weights: np.ndarray | None = None

    @property
    def n_atoms(self) -> int:
        return self.X.shape[0]

    @property
    def D(self) -> int:
        return self.X.shape[1]

    def take(self, rows) -> "PointBatch":
        """The atoms ``rows`` (in that order) as a new batch, with their weights."""
        rows = np.asarray(rows, dtype=np.intp)
        weights = None if self.weights is None else np.ascontiguousarray(self.weights[rows])
        return PointBatch(np.ascontiguousarray(self.X[rows]), weights=weights)

    @staticmethod
    def concat(batches: list["PointBatch"]) -> "PointBatch":
        weights = None
        if any(b.weights is not None for b in batches):
            weights = np.concatenate([np.ones(b.n_atoms) if b.weights is None else b.weights for b in batches])
        return PointBatch(np.ascontiguousarray(np.concatenate([b.X for b in batches])), weights=weights)


def atom_weights(batch) -> np.ndarray | None:
    """The (n_atoms,) weights w_n of a batch's atoms, or None when every atom counts once."""
    return getattr(batch, "weights", None)


def unweighted(batch):
    """The batch with every atom counting once (itself when it has no weights): one atom as one observation,
    as a k-means++ seed or a smoothed atom is."""
    return batch if atom_weights(batch) is None else replace(batch, weights=None)


@dataclass(frozen=True)
class WordCountBatch:
    """Bag-of-words documents in CSR form (one atom = one document).

    Document d holds the word types ``word_ids[doc_range[d]:doc_range[d+1]]`` with
    counts ``word_counts[...]`` (Hughes 2016 thesis Eq. 2.19: x_n ∈ Z≥0^V).

    Attributes
    ----------
    word_ids : (nnz,) int32, values in [0, vocab_size)
    word_counts : (nnz,) float64, positive integers
    doc_range : (n_docs + 1,) int64, doc_range[0] == 0, non-decreasing
    vocab_size : int
        V.
    start : int
        Index of the first document in the whole data set.
    weights : (n_docs,) float64, optional
        w_d ≥ 0 of each document as an atom of a mixture (``PointBatch.weights``); None: 1 each. Topic
        models refuse them.
    """

    word_ids: np.ndarray
    word_counts: np.ndarray
    doc_range: np.ndarray
    vocab_size: int
    start: int = 0
    weights: np.ndarray | None = None

    @property
    def n_atoms(self) -> int:
        return self.doc_range.shape[0] - 1

    @property
    def D(self) -> int:
        return self.vocab_size

    def csr(self) -> sp.csr_matrix:
        """The (n_docs, V) sparse count matrix X, sharing the batch's arrays; made once per batch (a move reads
        the same few documents several times) and not pickled with it. Read-only by contract."""
        made = self.__dict__.get("_csr")
        if made is None:
            made = sp.csr_matrix((self.word_counts, self.word_ids, self.doc_range),
                                 shape=(self.n_atoms, self.vocab_size))
            object.__setattr__(self, "_csr", made)
        return made

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "_csr"}

    def tokens(self) -> "WordCountBatch":
        """One row per stored (document, word type) entry, holding that entry's count alone: the atoms
        of a topic model, whose tokens of one type in a document share their responsibilities
        (Hughes 2016 thesis §5.3.5)."""
        return WordCountBatch(self.word_ids, self.word_counts, np.arange(self.word_ids.shape[0] + 1, dtype=np.int64),
                              self.vocab_size, self.start)

    def take(self, rows) -> "WordCountBatch":
        """The documents ``rows`` (in that order) as a new batch."""
        rows = np.asarray(rows, dtype=np.intp).reshape(-1)
        starts = self.doc_range[rows]
        lengths = self.doc_range[rows + 1] - starts
        doc_range = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_range[1:])
        entries = np.arange(int(doc_range[-1]), dtype=np.int64) + np.repeat(starts - doc_range[:-1], lengths)
        weights = None if self.weights is None else np.ascontiguousarray(self.weights[rows])
        return WordCountBatch(self.word_ids[entries].astype(np.int32, copy=False),
                              self.word_counts[entries].astype(np.float64, copy=False), doc_range, self.vocab_size,
                              weights=weights)

    @staticmethod
    def concat(batches: list["WordCountBatch"]) -> "WordCountBatch":
        X = sp.vstack([b.csr() for b in batches], format="csr")
        weights = None
        if any(b.weights is not None for b in batches):
            weights = np.concatenate([np.ones(b.n_atoms) if b.weights is None else b.weights for b in batches])
        return WordCountBatch(X.indices.astype(np.int32), X.data.astype(np.float64),
                              X.indptr.astype(np.int64), batches[0].vocab_size, weights=weights)


@dataclass(frozen=True)
class SeqBatch:
    """Whole sequences of observations; one atom = one time step.

    Sequence s of the batch is steps ``seq_range[s]:seq_range[s+1]`` of X. A batch
    always holds whole sequences (the HMM's local step runs forward-backward over
    each one); ``take`` and ``concat`` are for atom-level work (initialisation,
    births) and return steps as sequences of length 1, keeping ``Xprev``.

    Attributes
    ----------
    X : (T, D) ndarray of float64, C-contiguous
        The observation x_t of every time step, sequences one after another.
    seq_range : (n_seqs + 1,) ndarray of int64
        Starts of the sequences in X; ``seq_range[0] == 0``, ``seq_range[-1] == T``,
        strictly increasing (no empty sequence).
    Xprev : (T, D) ndarray of float64, optional
        The observation before each step (x_{t-1}; for auto-regressive models), or None.
    start : int
        Index of the batch's first time step in the whole data set.
    first_seq : int
        Index of the batch's first sequence in the whole data set.
    """

    X: np.ndarray
    seq_range: np.ndarray
    Xprev: np.ndarray | None = None
    start: int = 0
    first_seq: int = 0

    @property
    def n_atoms(self) -> int:
        return self.X.shape[0]

    @property
    def D(self) -> int:
        return self.X.shape[1]

    @property
    def n_seqs(self) -> int:
        return self.seq_range.shape[0] - 1

    def take(self, rows) -> "SeqBatch":
        """The time steps ``rows`` (in that order), each as a sequence of length 1."""
        rows = np.asarray(rows, dtype=np.intp)
        Xprev = None if self.Xprev is None else np.ascontiguousarray(self.Xprev[rows])
        return SeqBatch(np.ascontiguousarray(self.X[rows]), np.arange(rows.shape[0] + 1, dtype=np.int64), Xprev)

    @staticmethod
    def concat(batches: list["SeqBatch"]) -> "SeqBatch":
        """The sequences of ``batches`` one after another."""
        X = np.ascontiguousarray(np.concatenate([b.X for b in batches]))
        ends = np.cumsum([b.n_atoms for b in batches])[:-1]
        seq_range = np.concatenate([batches[0].seq_range] + [b.seq_range[1:] + e for b, e in zip(batches[1:], ends)])
        has_prev = [b.Xprev is not None for b in batches]
        if any(has_prev) and not all(has_prev):
            raise ValueError("cannot concatenate sequence batches with and without Xprev")
        Xprev = np.ascontiguousarray(np.concatenate([b.Xprev for b in batches])) if all(has_prev) else None
        return SeqBatch(X, seq_range.astype(np.int64), Xprev)
