"""Bag-of-words files (kind ``"bow"``): one document per atom, stored in CSR layout.

Batches, blocks and checks always hold whole documents; a batch is read as one
slice of ``doc_range``, ``word_ids`` and ``word_counts``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.base import BatchStore, chunk_1d, split_offsets, write_batch_file
from bnpvi.data.batch import WordCountBatch
from bnpvi.data.checks import check_documents, check_labels, check_n_batches, check_vocab
from bnpvi.errors import BnpviError


class BowStore(BatchStore, kind="bow"):
    """Reader of a bag-of-words file: batch b is documents ``offsets[b]:offsets[b+1]`` as a WordCountBatch.

    ``D`` is the vocabulary size V. ``iter_blocks`` yields ``(first_document,
    WordCountBatch)`` blocks of whole documents holding at most ``max_values``
    entries (a longer document comes alone).

    Attributes
    ----------
    vocab_size : int
        V (same as D).
    nnz : int
        Number of stored (document, word) entries.
    has_vocab : bool
        Whether the file holds the vocabulary.
    """

    unit = "documents"

    @classmethod
    def _read_layout(cls, f: h5py.File, attrs: dict, fail) -> dict:
        for name in ("word_ids", "word_counts", "doc_range"):
            if not isinstance(f.get(name), h5py.Dataset):
                raise fail(f"is missing the dataset '{name}'")
        ids, counts, dr = f["word_ids"], f["word_counts"], f["doc_range"]
        for name, ds, kinds in (("word_ids", ids, "iu"), ("word_counts", counts, "iuf"), ("doc_range", dr, "iu")):
            if ds.ndim != 1 or ds.dtype.kind not in kinds:
                raise fail(f"has a dataset {name} of shape {ds.shape} and dtype {ds.dtype}; expected 1-D "
                           f"{'numbers' if kinds == 'iuf' else 'integers'}")
        nnz = int(ids.shape[0])
        if counts.shape[0] != nnz:
            raise fail(f"is inconsistent: word_ids has {nnz} entries but word_counts has {counts.shape[0]}")
        N = int(dr.shape[0]) - 1
        if N < 1:
            raise fail("has no documents (N=0)")
        V = attrs.get("D")
        if not isinstance(V, int) or isinstance(V, bool) or V < 1:
            raise fail(f"has no valid vocabulary size (attribute D={V!r}; expected a positive integer)")
        for key, actual in (("N", N), ("nnz", nnz)):
            if key in attrs and (not isinstance(attrs[key], int) or attrs[key] != actual):
                raise fail(f"is inconsistent: attribute {key}={attrs[key]} but the datasets hold {actual}")
        first, last = int(dr[0]), int(dr[N])
        if first != 0 or last != nnz:
            raise fail(f"has an inconsistent doc_range (need doc_range[0] = 0 and doc_range[N] = nnz={nnz}; "
                       f"got {first} and {last})")
        has_vocab = "vocab" in f
        if has_vocab:
            voc = f["vocab"]
            if not isinstance(voc, h5py.Dataset) or voc.shape != (V,) or h5py.check_string_dtype(voc.dtype) is None:
                raise fail(f"has an invalid vocab dataset (expected ({V},) strings)")
        return {"n_atoms": N, "D": V, "n_units": N, "nnz": nnz, "has_vocab": has_vocab}

    @property
    def vocab_size(self) -> int:
        """V (same as D)."""
        return self.D

    @property
    def nnz(self) -> int:
        """Stored (document, word) entries."""
        return self._layout["nnz"]

    @property
    def has_vocab(self) -> bool:
        return self._layout["has_vocab"]

    def vocab(self) -> list[str] | None:
        """The V words (word id -> word), or None when the file holds none."""
        if not self.has_vocab:
            return None
        return [str(w) for w in self._handle()["vocab"].asstr()[()]]

    def n_tokens(self) -> int:
        """The sum of all counts (from the ``tokens`` attribute, else one pass over word_counts)."""
        stored = self._attrs.get("tokens")
        if isinstance(stored, (int, float)):
            return int(stored)
        dataset = self._handle()["word_counts"]
        step = self._limit()
        return int(sum(float(np.sum(dataset[lo:lo + step])) for lo in range(0, self.nnz, step)))

    def _read(self, lo: int, hi: int) -> WordCountBatch:
        """Documents ``lo:hi`` as one WordCountBatch (doc_range rebased to 0)."""
        f = self._handle()
        dr = np.asarray(f["doc_range"][lo:hi + 1], dtype=np.int64)
        first, last = int(dr[0]), int(dr[-1])
        ids = np.ascontiguousarray(f["word_ids"][first:last], dtype=np.int32)
        counts = np.ascontiguousarray(f["word_counts"][first:last], dtype=np.float64)
        return WordCountBatch(word_ids=ids, word_counts=counts, doc_range=dr - first, vocab_size=self.D, start=lo)

    def _blocks(self, limit: int) -> Iterator[tuple[int, WordCountBatch]]:
        for start, dr in self._range_pieces("doc_range", "document", "has no words", limit):
            for lo, hi in _group_docs(dr, limit):
                yield start + lo, self._read(start + lo, start + hi)

    def _scan(self, check: bool, moments: bool) -> None:
        """Documents: doc_range strictly increasing (no empty documents), word ids in [0, V) and not
        repeated within a document, counts finite positive whole numbers, and the ``tokens`` attribute
        equal to the sum of the counts. No moments: a V x V covariance of counts is neither cheap nor
        used by the discrete observation families."""
        if not check:
            return
        tokens = 0.0
        for start, batch in self.iter_blocks():
            check_documents(batch.word_ids, batch.word_counts, batch.doc_range, self.D, f"data file {self._path}",
                            doc_name=self._doc_namer(start))
            tokens += float(batch.word_counts.sum())
        stored = self._attrs.get("tokens")
        if stored is not None and stored != tokens:
            raise BnpviError(f"data file {self._path} is inconsistent: attribute tokens={stored} but the counts "
                             f"sum to {tokens:.0f}")

    def _doc_namer(self, first_doc: int):
        def name(d: int) -> str:
            d = first_doc + int(d)
            return f"document {d} (batch {self._batch_of(d)})"
        return name

    def _info_extras(self) -> dict:
        return {"V": self.D, "nnz": self.nnz, "tokens": self.n_tokens(), "vocab": self.has_vocab}

    def _describe(self) -> str:
        return f"N={self.n_atoms}, V={self.D}, nnz={self.nnz}"


def _group_docs(dr: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """Split documents ``0..len(dr)-2`` (doc_range ``dr``, increasing) into consecutive groups.

    Each group ``(lo, hi)`` holds at most ``limit`` entries, except a single
    document longer than ``limit``, which forms a group of its own.
    """
    n_docs = dr.shape[0] - 1
    lo = 0
    while lo < n_docs:
        hi = int(np.searchsorted(dr, dr[lo] + limit, side="right")) - 1
        hi = min(n_docs, max(hi, lo + 1))
        yield lo, hi
        lo = hi


def write_documents(path, word_ids, word_counts, doc_range, vocab_size: int, n_batches: int = 1, labels=None,
                    vocab=None, batches_fixed: bool = True, source: str = "", compression: str | None = None) -> Path:
    """Write a bag-of-words corpus (CSR arrays) to a batch file of kind ``"bow"``, atomically.

    Parameters
    ----------
    path : str or Path
        Destination file; its directory must exist. An existing file is replaced.
    word_ids : array_like of int, shape (nnz,)
        Word types in [0, vocab_size), each at most once per document.
    word_counts : array_like, shape (nnz,)
        Positive whole-number counts.
    doc_range : array_like of int, shape (N+1,)
        Document d is entries ``doc_range[d]:doc_range[d+1]``; 0 first, nnz last,
        and no empty documents.
    vocab_size : int
        V (stored as the attribute D).
    n_batches : int, default 1
        Number of batches of whole documents, as equal in document count as possible (1..N).
    labels : array_like of int, shape (N,), optional
        True labels of the documents, stored for evaluation only.
    vocab : sequence of str, length V, optional
        The word of each id.
    batches_fixed : bool, default True
        Whether the batch split is part of the data set (a reader may not re-split it).
    source : str, default ""
        Free-text provenance stored in the ``source`` attribute.
    compression : str, optional
        HDF5 compression filter for word_ids and word_counts; none by default.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BnpviError
        One line naming ``path``: invalid arrays (see
        :func:`~bnpvi.data.checks.check_documents`; repeated ids within a document
        are an error here - converters sum them), labels, vocab or n_batches, or
        the file cannot be written. Nothing is left at ``path`` (nor a temporary
        file) on failure.
    """
    path = Path(path).expanduser()
    where = f"cannot write {path}"
    ids, counts, dr, V = check_documents(word_ids, word_counts, doc_range, vocab_size, where)
    N, nnz = dr.shape[0] - 1, ids.shape[0]
    if labels is not None:
        labels = check_labels(labels, N, where, atoms=f"there are {N} documents")
    if vocab is not None:
        vocab = check_vocab(vocab, V, where)
    n_batches = check_n_batches(n_batches, N, where, f"N={N} (documents)")
    tokens = float(counts.sum())

    def datasets(f: h5py.File) -> None:
        f.create_dataset("word_ids", data=ids, chunks=(chunk_1d(nnz, 4),), compression=compression)
        f.create_dataset("word_counts", data=counts, chunks=(chunk_1d(nnz, 8),), compression=compression)
        f.create_dataset("doc_range", data=dr, chunks=(chunk_1d(N + 1, 8),))
        if vocab is not None:
            f.create_dataset("vocab", data=np.array(vocab, dtype=object), dtype=h5py.string_dtype("utf-8"),
                             chunks=(chunk_1d(V, 64),))

    return write_batch_file(path, where, "bow", N, V, split_offsets(N, n_batches), labels, batches_fixed, source,
                            datasets, {"nnz": np.int64(nnz), "tokens": np.int64(tokens) if tokens < 2**63 else tokens})
