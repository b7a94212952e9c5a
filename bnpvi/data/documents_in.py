"""Documents in: bag-of-words corpora from LDA-C text (``.ldac``, :mod:`bnpvi.data.ldac`) and sparse NPZ - the
CSR triplet ``word_id``/``word_count``/``doc_range`` or a ``scipy.sparse.save_npz`` matrix - for a ``"bow"``
batch file.

A word id repeated within one document is summed into one entry (in every input format); empty
documents are rejected (they carry no information); zero counts are rejected in ``.ldac`` and in the
CSR triplet, but stored zeros of a scipy matrix are simply dropped. A CSR-triplet ``.npz`` may also
hold ``true_topics`` (K, V), the generating topics of a synthetic corpus (as the bnpy bars data sets
do); it is kept in the batch file.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from bnpvi.data.base import block_values, range_groups
from bnpvi.data.bow import HeldoutDocuments, TextOrigin, joined_documents, write_documents
from bnpvi.data.checks import (as_index_array, check_doc_range, check_documents, check_labels, check_vocab,
                               first_repeat, positive_int)
from bnpvi.data.labels import appended_labels, one_source, source_labels
from bnpvi.data.ldac import ldac_documents
from bnpvi.data.mapped import Spool, scratch_space
from bnpvi.data.progress import meter
from bnpvi.data.reorder import permuted_ranges, take_ranges, take_units
from bnpvi.data.sources import TRIPLET, NpyStream, Reader, existing_file, first_line, listed_lines, npz_layout
from bnpvi.errors import BnpviError

BOW_SUFFIXES = (".ldac", ".npz")
_INT32_MAX = int(np.iinfo(np.int32).max)
# Lines of a vocabulary file read at once.
_VOCAB_LINES = 2**16


@dataclass(frozen=True)
class Documents:
    """A bag-of-words corpus in CSR form, as read by :func:`read_documents`.

    Attributes
    ----------
    word_ids : (nnz,) int32 array
    word_counts : (nnz,) float64 array, positive whole numbers
        Both in memory, or read a block at a time: spooled (:class:`~bnpvi.data.mapped.MappedArray`), or a view
        of the spool in another order (:class:`~bnpvi.data.reorder.Reordered`).
    doc_range : (N+1,) int64, from 0 to nnz, strictly increasing (no empty documents)
    vocab_size : int
        V.
    labels : (N,) int64 array (or view) or None
        Integers, or codes of ``label_names``.
    vocab : list of V str, or None
    true_topics : (K, V) float64 or None
        Generating topics of a synthetic corpus (from a CSR-triplet ``.npz``).
    label_names : tuple of str or None
    text : TextOrigin or None
        How raw text became the counts (:mod:`bnpvi.data.text_in`).
    """

    word_ids: object
    word_counts: object
    doc_range: np.ndarray
    vocab_size: int
    labels: object = None
    vocab: list[str] | None = None
    true_topics: np.ndarray | None = None
    label_names: tuple[str, ...] | None = None
    text: TextOrigin | None = None

    unit: ClassVar[str] = "documents"
    count_name: ClassVar[str] = "N"
    holds: ClassVar[str] = "bag-of-words documents"

    @property
    def n_docs(self) -> int:
        return self.doc_range.shape[0] - 1

    @property
    def n_units(self) -> int:
        """Number of documents (as n_docs)."""
        return self.n_docs

    def permuted(self, perm: np.ndarray) -> "Documents":
        """The documents ``perm`` in that order: a permutation, or a subset (labels follow their documents), as
        views: nothing is copied."""
        labels = None if self.labels is None else take_units(self.labels, perm)
        return replace(self, word_ids=take_ranges(self.word_ids, self.doc_range, perm),
                       word_counts=take_ranges(self.word_counts, self.doc_range, perm),
                       doc_range=permuted_ranges(self.doc_range, perm), labels=labels)

    def in_memory(self) -> "Documents":
        """The same corpus with every array read into memory."""
        return replace(self, word_ids=self.word_ids[:], word_counts=self.word_counts[:],
                       labels=None if self.labels is None else self.labels[:])

    def heldout_part(self, index: np.ndarray, train_index: np.ndarray, fraction: float,
                     seed: int) -> HeldoutDocuments:
        """These documents as the held-out part of a file whose training documents are ``train_index`` of
        the source."""
        return HeldoutDocuments(self.word_ids, self.word_counts, self.doc_range, index, train_index, self.labels,
                                fraction, seed)

    def after(self, store, where: str) -> "Documents":
        """The documents of the bag-of-words file ``store`` (named ``where``), then these
        (``convert(append_to=...)``): the same vocabulary size, and the same words where both name them."""
        if store.D != self.vocab_size:
            raise BnpviError(f"{where} has a vocabulary of V={store.D} words, the new documents V={self.vocab_size}")
        vocab = store.vocab()
        if vocab is not None and self.vocab is not None and list(vocab) != list(self.vocab):
            raise BnpviError(f"{where} has another vocabulary than the new documents")
        labels, names = appended_labels(store, self.labels, self.label_names, where)
        batches = [store.read_batch(b) for b in range(store.n_batches)]
        parts = [(b.word_ids, b.word_counts, b.doc_range) for b in batches]
        ids, counts, doc_range = joined_documents(parts + [(self.word_ids[:], self.word_counts[:], self.doc_range)])
        return Documents(ids, counts, doc_range, self.vocab_size, labels, vocab if vocab is not None else self.vocab,
                         label_names=names, text=store.text_origin())

    def write(self, dst, **options) -> Path:
        """Write a ``"bow"`` batch file (``options``: those of ``write_documents``)."""
        return write_documents(dst, self.word_ids, self.word_counts, self.doc_range, self.vocab_size,
                               labels=self.labels, vocab=self.vocab, true_topics=self.true_topics,
                               label_names=self.label_names, text=self.text, **options)


class CorpusSpool:
    """Documents met a group of whole documents at a time, each group checked and made canonical (repeated
    ids summed, entries sorted by id: :func:`~bnpvi.data.checks.check_documents`) and spooled, so the corpus is
    never held whole; documents are numbered in the order they come.

    Parameters
    ----------
    scratch : Path
        The spools' directory.
    where : str
        The source, in messages.
    vocab_size : int, optional
        V, when known; every id must be below it.
    """

    def __init__(self, scratch: Path, where: str, vocab_size: int | None = None):
        self.where, self.vocab_size = where, vocab_size
        self.ids, self.counts = Spool(scratch, np.int32), Spool(scratch, np.float64)
        self.lengths: list[np.ndarray] = []
        self.n_docs, self.max_id = 0, -1

    def add(self, word_ids, word_counts, doc_range) -> None:
        """Add a group of documents in CSR form (document d is entries ``doc_range[d]:doc_range[d+1]``)."""
        first = self.n_docs
        ids, counts, dr, _ = check_documents(word_ids, word_counts, doc_range,
                                             _INT32_MAX if self.vocab_size is None else self.vocab_size,
                                             self.where, duplicates="sum", doc_name=lambda d: f"document {first + d}")
        self.ids.append(ids)
        self.counts.append(counts)
        self.lengths.append(np.diff(dr))
        self.n_docs += dr.shape[0] - 1
        self.max_id = max(self.max_id, int(ids.max()) if ids.size else -1)

    def corpus(self) -> tuple:
        """``(word_ids, word_counts, doc_range)``: the spools as MappedArrays, and the document boundaries."""
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        return self.ids.mapped(), self.counts.mapped(), np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def read_vocab(path, encoding: str = "utf-8") -> list[str]:
    """Read a vocabulary file: one word per line (text in ``encoding``); word id i is line i+1.

    Surrounding whitespace of each word is removed. Blank lines at the end are
    ignored; a blank line before the last word is an error (it would shift every
    later id), and so is a word on two lines (new text could not be counted under it).

    Raises
    ------
    BnpviError
        Missing or empty file, bytes that are not text in ``encoding``, a blank line, or a repeated word
        (naming file and lines).
    """
    words = [word for items in listed_lines(path, "vocabulary", "one word per line; word id i is line i+1",
                                            _VOCAB_LINES, encoding) for word in items]
    if not words:
        raise BnpviError(f"{Path(path).expanduser()} is empty (no words)")
    repeat = first_repeat(words)
    if repeat is not None:
        i, j = repeat
        raise BnpviError(f"{Path(path).expanduser()}: the word {words[i]!r} is on line {i + 1} and again on line "
                         f"{j + 1}; a vocabulary lists each word once (word id i is line i+1)")
    return words


def _spool_npz_documents(path: Path, labels: str | None, spool: CorpusSpool, V: int | None):
    """Spool a sparse .npz's documents; ``((V, where it comes from) or None, labels array or None,
    true_topics or None)`` (true topics: the triplet's optional array ``true_topics``).

    The CSR triplet and a CSR matrix are read a group of documents at a time (their word ids and counts
    streamed, the document boundaries read whole); a matrix in another sparse format is loaded whole first.
    """
    layout = npz_layout(path)
    if layout not in ("triplet", "scipy"):
        raise BnpviError(f"{path}: not a bag-of-words .npz (expected arrays {', '.join(TRIPLET)} "
                         "or a scipy.sparse.save_npz matrix)")
    where = f"{path}: cannot read as .npz"
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = list(npz.files)
            y = None
            if labels is not None:
                if labels not in names:
                    raise BnpviError(f"{path}: no label array {labels!r} (arrays: {', '.join(names)})")
                y = npz[labels]
            if layout == "triplet":
                stored = None
                if "vocab_size" in names:
                    size = np.asarray(npz["vocab_size"])
                    if size.size != 1 or size.dtype.kind not in "iuf" or size.reshape(-1)[0] != \
                            np.round(size.reshape(-1)[0]) or size.reshape(-1)[0] < 1:
                        raise BnpviError(f"{path}: vocab_size must be a positive integer, got {size.tolist()!r}")
                    stored = (int(size.reshape(-1)[0]), f"the file's vocab_size is {int(size.reshape(-1)[0])}")
                topics = npz["true_topics"] if "true_topics" in names else None
                with npz.zip.open("word_id.npy") as ids, npz.zip.open("word_count.npy") as counts:
                    _spool_csr(NpyStream(ids, where), NpyStream(counts, where), npz["doc_range"], spool,
                               V if V is not None or stored is None else stored[0], keep_zeros=True)
                return stored, y, topics
            form = bytes(npz["format"].reshape(-1)[0]).decode() if "format" in names else ""
            if form == "csr":
                shape = tuple(int(n) for n in npz["shape"])
                with npz.zip.open("indices.npy") as ids, npz.zip.open("data.npy") as counts:
                    ids, counts = NpyStream(ids, where), NpyStream(counts, where)
                    _check_matrix(path, shape, counts.dtype)
                    _spool_csr(ids, counts, npz["indptr"], spool, shape[1], keep_zeros=False)
                return (shape[1], f"the matrix has {shape[1]} columns"), y, None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{where}: {first_line(err)}") from None
    try:
        X = sp.load_npz(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as a scipy.sparse .npz: {first_line(err)}") from None
    if X.ndim != 2:
        raise BnpviError(f"{path}: the sparse matrix must be 2-D (documents x vocabulary), got shape {X.shape}")
    _check_matrix(path, X.shape, X.dtype)
    X = sp.csr_matrix(X)
    _spool_csr(X.indices, X.data, X.indptr, spool, X.shape[1], keep_zeros=False)
    return (int(X.shape[1]), f"the matrix has {X.shape[1]} columns"), y, None


def _check_matrix(path: Path, shape: tuple, dtype) -> None:
    """A sparse matrix of counts (values of ``dtype``) with at least one row and column."""
    if dtype.kind not in "biuf":
        raise BnpviError(f"{path}: the sparse matrix must hold counts, got dtype {dtype}")
    if shape[0] < 1:
        raise BnpviError(f"{path}: the sparse matrix has no rows (documents)")
    if shape[1] < 1:
        raise BnpviError(f"{path}: the sparse matrix has no columns (vocabulary size 0)")


def _spool_csr(ids, counts, doc_range, spool: CorpusSpool, V: int | None, keep_zeros: bool) -> None:
    """Spool documents in CSR form a group at a time: ``ids`` and ``counts`` are arrays or
    :class:`~bnpvi.data.sources.NpyStream`-s read in order; stored zeros are absent words unless ``keep_zeros``
    (the triplet's zero counts are errors)."""
    if spool.vocab_size is None:
        spool.vocab_size = V
    nnz = ids.shape[0]
    if counts.shape[0] != nnz:
        raise BnpviError(f"{spool.where}: word_ids has {nnz} entries but word_counts has {counts.shape[0]}")
    dr = as_index_array(doc_range, "doc_range", spool.where)
    if keep_zeros:
        dr = check_doc_range(dr, nnz, spool.where)
    elif dr.shape[0] < 1 or dr[0] != 0 or dr[-1] != nnz or (np.diff(dr) < 0).any():
        raise BnpviError(f"{spool.where}: the sparse matrix has an invalid indptr")
    with meter("reading", dr.shape[0] - 1, "docs") as advance:
        for lo, hi in range_groups(dr, block_values()):
            _spool_group(ids, counts, dr, lo, hi, spool, keep_zeros)
            advance(hi - lo)


def _spool_group(ids, counts, dr: np.ndarray, lo: int, hi: int, spool: CorpusSpool, keep_zeros: bool) -> None:
    """Spool documents ``lo:hi`` of :func:`_spool_csr`."""
    n = int(dr[hi] - dr[lo])
    block_ids, block_counts = (_next(source, int(dr[lo]), n) for source in (ids, counts))
    block_ids = as_index_array(block_ids, "word_id", spool.where)
    block_dr = dr[lo:hi + 1] - dr[lo]
    if not keep_zeros:
        kept = block_counts != 0
        block_ids, block_counts = block_ids[kept], block_counts[kept]
        doc = np.repeat(np.arange(hi - lo), np.diff(block_dr))
        block_dr = np.concatenate([[0], np.cumsum(np.bincount(doc[kept], minlength=hi - lo))])
    spool.add(block_ids, block_counts, block_dr)


def _next(source, first: int, n: int) -> np.ndarray:
    """Entries ``first:first + n`` of an array, or the next ``n`` of a stream (read in order)."""
    return source.take(n) if isinstance(source, NpyStream) else source[first:first + n]


def read_documents(path, labels: str | None = None, vocab=None, vocab_size: int | None = None,
                   labels_file=None, scratch=None, encoding: str = "utf-8") -> Documents:
    """Read a bag-of-words corpus from an ``.ldac`` file or a sparse ``.npz`` file.

    Parameters
    ----------
    path : str or Path
        ``.ldac``: LDA-C text, see :func:`read_ldac`.
        ``.npz``: either the CSR triplet ``word_id`` (int), ``word_count``,
        ``doc_range`` (N+1, from 0) with an optional scalar ``vocab_size`` and
        optional generating topics ``true_topics`` (K, V) of a synthetic corpus, or a
        matrix saved by ``scipy.sparse.save_npz`` (documents x vocabulary; its
        column count is V; stored zeros are dropped).
    labels : str, optional
        NPZ only: the name of an array of N document labels.
    labels_file : str or Path, optional
        A file with one label per line, one line per document (instead of ``labels``).
    vocab : str, Path or sequence of str, optional
        A vocabulary file (one word per line) or the words themselves; V is its length.
    vocab_size : int, optional
        V. Default: from ``vocab``, the file (npz ``vocab_size`` / matrix shape), else
        the largest id + 1. All the sizes given must agree.
    scratch : Path, optional
        A scratch directory: the word ids and counts are then read a group of documents at a time and
        spooled there (an ``.ldac`` file a block of lines at a time, an ``.npz`` member a block of entries
        at a time; a sparse matrix in a format other than CSR is loaded whole first), never held whole.
        Default: a temporary one, and they are returned in memory.
    encoding : str, default "utf-8"
        The text encoding of a vocabulary file and of ``labels_file`` (any codec Python knows).

    Returns
    -------
    Documents
        Repeated ids within a document summed, and each document's entries sorted by word id.

    Raises
    ------
    BnpviError
        One line naming the file (and the line for ``.ldac``, the document for ``.npz``).
    """
    path, suffix = existing_file(path)
    if suffix not in BOW_SUFFIXES:
        raise BnpviError(f"{path}: not a bag-of-words file (expected one of {', '.join(BOW_SUFFIXES)})")
    one_source(labels, labels_file)
    if path.stat().st_size == 0:
        raise BnpviError(f"{path} is empty")
    if scratch is None:
        with scratch_space() as scratch:
            return read_documents(path, labels, vocab, vocab_size, labels_file, scratch, encoding).in_memory()
    words = None
    sizes = []  # (V, where it comes from)
    if vocab is not None:
        if isinstance(vocab, (str, Path)):
            words = read_vocab(vocab, encoding)
            sizes.append((len(words), f"vocabulary file {Path(vocab).expanduser()} has {len(words)} words"))
        else:
            words = list(vocab)
            sizes.append((len(words), f"the vocabulary has {len(words)} words"))
    if vocab_size is not None:
        given = positive_int(vocab_size, "the vocabulary size")
        sizes.append((given, f"the given vocabulary size is {given}"))
    _agree(sizes, path)
    V = sizes[0][0] if sizes else None
    spool = CorpusSpool(scratch, str(path), V)
    y = topics = None
    if suffix == ".ldac":
        if labels is not None:
            raise BnpviError(f"{path}: an .ldac file holds no labels, so labels={labels!r} cannot be read from it; "
                             "give them with --labels-file (one per line), or use a .npz file with word_id, "
                             "word_count, doc_range and a label array")
        with meter("reading", None, "docs") as advance:
            for ids, counts, lengths in ldac_documents(path, V):
                spool.add(ids, counts, np.concatenate([[0], np.cumsum(lengths)]))
                advance(lengths.shape[0])
        if spool.n_docs == 0:
            raise BnpviError(f"{path} is empty (no documents)")
    else:
        stored, y, topics = _spool_npz_documents(path, labels, spool, V)
        if stored is not None:
            sizes.append(stored)
            _agree(sizes, path)
    ids, counts, dr = spool.corpus()
    V = spool.vocab_size if spool.vocab_size is not None else max(1, spool.max_id + 1)
    if words is not None:
        words = check_vocab(words, V, str(path))
    N = dr.shape[0] - 1
    y, names = source_labels(y, labels_file, N, str(path), f"{N} documents", encoding)
    if y is not None:
        y = check_labels(y, N, str(path), atoms=f"there are {N} documents")
    if topics is not None:
        topics = np.asarray(topics)
        if topics.dtype.kind not in "biuf" or topics.ndim != 2 or topics.shape[0] < 1 or topics.shape[1] != V:
            raise BnpviError(f"{path}: true_topics has shape {topics.shape} and dtype {topics.dtype}; expected "
                             f"(K, V={V}) numbers")
        topics = topics.astype(np.float64)
        if not np.all(np.isfinite(topics)) or (topics < 0).any():
            raise BnpviError(f"{path}: true_topics must be finite and non-negative")
    return Documents(ids, counts, dr, V, y, words, topics, names)


def _agree(sizes: list[tuple[int, str]], path: Path) -> None:
    if len({v for v, _ in sizes}) > 1:
        raise BnpviError(f"{path}: conflicting vocabulary sizes: {'; '.join(text for _, text in sizes)}")


def _is_documents_file(path: Path, options: dict) -> bool:
    suffix = path.suffix.lower()
    return suffix == ".ldac" or (suffix == ".npz" and path.is_file() and npz_layout(path) in ("triplet", "scipy"))


READER = Reader(holds="bag-of-words documents", files=".ldac and sparse .npz files",
                suffixes=BOW_SUFFIXES, options=frozenset({"labels", "labels_file", "vocab", "vocab_size", "encoding"}),
                claims=_is_documents_file, read=read_documents)
