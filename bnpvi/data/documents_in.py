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
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from bnpvi.data.bow import HeldoutDocuments, TextOrigin, write_documents
from bnpvi.data.checks import as_index_array, check_documents, check_labels, check_vocab, positive_int
from bnpvi.data.labels import one_source, source_labels
from bnpvi.data.ldac import read_ldac
from bnpvi.data.sources import TRIPLET, Reader, existing_file, first_line, listed_lines, npz_layout, permuted_ranges
from bnpvi.errors import BnpviError

BOW_SUFFIXES = (".ldac", ".npz")
# Lines of a vocabulary file read at once.
_VOCAB_LINES = 2**16


@dataclass(frozen=True)
class Documents:
    """A bag-of-words corpus in CSR form, as read by :func:`read_documents`.

    Attributes
    ----------
    word_ids : (nnz,) int32
    word_counts : (nnz,) float64, positive whole numbers
    doc_range : (N+1,) int64, from 0 to nnz, strictly increasing (no empty documents)
    vocab_size : int
        V.
    labels : (N,) int64 or None
        Integers, or codes of ``label_names``.
    vocab : list of V str, or None
    true_topics : (K, V) float64 or None
        Generating topics of a synthetic corpus (from a CSR-triplet ``.npz``).
    label_names : tuple of str or None
    text : TextOrigin or None
        How raw text became the counts (:mod:`bnpvi.data.text_in`).
    """

    word_ids: np.ndarray
    word_counts: np.ndarray
    doc_range: np.ndarray
    vocab_size: int
    labels: np.ndarray | None = None
    vocab: list[str] | None = None
    true_topics: np.ndarray | None = None
    label_names: tuple[str, ...] | None = None
    text: TextOrigin | None = None

    unit: ClassVar[str] = "documents"
    count_name: ClassVar[str] = "N"

    @property
    def n_docs(self) -> int:
        return self.doc_range.shape[0] - 1

    @property
    def n_units(self) -> int:
        """Number of documents (as n_docs)."""
        return self.n_docs

    def permuted(self, perm: np.ndarray) -> "Documents":
        """The documents ``perm`` in that order: a permutation, or a subset (labels follow their documents)."""
        doc_range, entries = permuted_ranges(self.doc_range, perm)
        labels = None if self.labels is None else self.labels[np.asarray(perm, dtype=np.int64)]
        return Documents(self.word_ids[entries], self.word_counts[entries], doc_range, self.vocab_size,
                         labels, self.vocab, self.true_topics, self.label_names, self.text)

    def heldout_part(self, index: np.ndarray, train_index: np.ndarray, fraction: float,
                     seed: int) -> HeldoutDocuments:
        """These documents as the held-out part of a file whose training documents are ``train_index`` of
        the source."""
        return HeldoutDocuments(self.word_ids, self.word_counts, self.doc_range, index, train_index, self.labels,
                                fraction, seed)

    def write(self, dst, **options) -> Path:
        """Write a ``"bow"`` batch file (``options``: those of ``write_documents``)."""
        return write_documents(dst, self.word_ids, self.word_counts, self.doc_range, self.vocab_size,
                               labels=self.labels, vocab=self.vocab, true_topics=self.true_topics,
                               label_names=self.label_names, text=self.text, **options)


def read_vocab(path) -> list[str]:
    """Read a vocabulary file: one word per line (UTF-8); word id i is line i+1.

    Surrounding whitespace of each word is removed. Blank lines at the end are
    ignored; a blank line before the last word is an error (it would shift every
    later id).

    Raises
    ------
    BnpviError
        Missing or empty file, invalid UTF-8, or a blank line (naming file and line).
    """
    words = [word for items in listed_lines(path, "vocabulary", "one word per line; word id i is line i+1",
                                            _VOCAB_LINES) for word in items]
    if not words:
        raise BnpviError(f"{Path(path).expanduser()} is empty (no words)")
    return words


def _read_npz_documents(path: Path, labels: str | None):
    """(word_ids, word_counts, doc_range, (V, origin) or None, labels array or None, true_topics or None)
    from a sparse .npz (true topics: the triplet's optional array ``true_topics``)."""
    layout = npz_layout(path)
    if layout not in ("triplet", "scipy"):
        raise BnpviError(f"{path}: not a bag-of-words .npz (expected arrays {', '.join(TRIPLET)} "
                         "or a scipy.sparse.save_npz matrix)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = list(npz.files)
            y = None
            if labels is not None:
                if labels not in names:
                    raise BnpviError(f"{path}: no label array {labels!r} (arrays: {', '.join(names)})")
                y = npz[labels]
            if layout == "triplet":
                ids, counts, dr = (npz[name] for name in TRIPLET)
                V = None
                if "vocab_size" in names:
                    stored = np.asarray(npz["vocab_size"])
                    if stored.size != 1 or stored.dtype.kind not in "iuf" or stored.reshape(-1)[0] != \
                            np.round(stored.reshape(-1)[0]) or stored.reshape(-1)[0] < 1:
                        raise BnpviError(f"{path}: vocab_size must be a positive integer, got {stored.tolist()!r}")
                    V = (int(stored.reshape(-1)[0]), f"the file's vocab_size is {int(stored.reshape(-1)[0])}")
                topics = npz["true_topics"] if "true_topics" in names else None
                return ids, counts, dr, V, y, topics
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as .npz: {first_line(err)}") from None
    try:
        X = sp.load_npz(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise BnpviError(f"{path}: cannot read as a scipy.sparse .npz: {first_line(err)}") from None
    if X.ndim != 2:
        raise BnpviError(f"{path}: the sparse matrix must be 2-D (documents x vocabulary), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise BnpviError(f"{path}: the sparse matrix must hold counts, got dtype {X.dtype}")
    X = sp.csr_matrix(X)
    if X.shape[0] < 1:
        raise BnpviError(f"{path}: the sparse matrix has no rows (documents)")
    if X.shape[1] < 1:
        raise BnpviError(f"{path}: the sparse matrix has no columns (vocabulary size 0)")
    X.eliminate_zeros()  # stored zeros are absent words
    return X.indices, X.data, X.indptr, (int(X.shape[1]), f"the matrix has {X.shape[1]} columns"), y, None


def read_documents(path, labels: str | None = None, vocab=None, vocab_size: int | None = None,
                   labels_file=None) -> Documents:
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

    Returns
    -------
    Documents
        Repeated ids within a document summed into their first occurrence;
        entry order otherwise as in the file.

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
    words = None
    sizes = []  # (V, where it comes from)
    if vocab is not None:
        if isinstance(vocab, (str, Path)):
            words = read_vocab(vocab)
            sizes.append((len(words), f"vocabulary file {Path(vocab).expanduser()} has {len(words)} words"))
        else:
            words = list(vocab)
            sizes.append((len(words), f"the vocabulary has {len(words)} words"))
    if vocab_size is not None:
        given = positive_int(vocab_size, "the vocabulary size")
        sizes.append((given, f"the given vocabulary size is {given}"))
    _agree(sizes, path)
    V = sizes[0][0] if sizes else None
    y = topics = None
    if suffix == ".ldac":
        if labels is not None:
            raise BnpviError(f"{path}: an .ldac file holds no labels, so labels={labels!r} cannot be read from it; "
                             "give them with --labels-file (one per line), or use a .npz file with word_id, "
                             "word_count, doc_range and a label array")
        ids, counts, dr, V = read_ldac(path, vocab_size=V)
    else:
        ids, counts, dr, stored, y, topics = _read_npz_documents(path, labels)
        if stored is not None:
            sizes.append(stored)
            _agree(sizes, path)
            V = stored[0]
        ids = as_index_array(ids, "word_id", str(path))
        if V is None:
            V = max(1, int(ids.max()) + 1) if ids.size else 1
        ids, counts, dr, V = check_documents(ids, counts, dr, V, str(path), duplicates="sum")
    if words is not None:
        words = check_vocab(words, V, str(path))
    N = dr.shape[0] - 1
    y, names = source_labels(y, labels_file, N, str(path), f"{N} documents")
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


READER = Reader(holds="bag-of-words documents", kind_name="bag-of-words", files=".ldac and sparse .npz files",
                suffixes=BOW_SUFFIXES, options=frozenset({"labels", "labels_file", "vocab", "vocab_size"}),
                heldout=True, claims=_is_documents_file, read=read_documents)
