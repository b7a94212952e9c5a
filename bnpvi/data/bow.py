"""Bag-of-words files (kind ``"bow"``): one document per atom, stored in CSR layout.

Batches, blocks and checks always hold whole documents; a batch is read as one
slice of ``doc_range``, ``word_ids`` and ``word_counts``.

Two optional parts, both outside the batches (so a trainer reading batches sees
neither)::

    /heldout                 group: documents kept apart for evaluation (``bnpvi-data convert --heldout F``);
                             attrs N (held-out documents), nnz, tokens, and fraction and seed when known
    /heldout/word_ids        (nnz_h,) int32     the held-out documents, in the CSR layout of the
    /heldout/word_counts     (nnz_h,) float64   training documents (no empty documents)
    /heldout/doc_range       (N_h+1,) int64
    /heldout/labels          (N_h,) int64, optional; their true labels
    /heldout/doc_index       (N_h,) int64; index of each held-out document in the source corpus
    /heldout/train_doc_index (N,) int64; index of each training document (stored order) in the source corpus
    /true_topics             (K, V) float64, optional; the generating topics of a synthetic corpus
                             (rows are word distributions), kept for evaluation only

A corpus converted from raw text (``bnpvi-data convert --text``) also keeps how it was made, so that
new text is counted the same way (:func:`bnpvi.data.tokens.count_texts`)::

    /text                    group (:class:`TextOrigin`): attrs lowercase, token_pattern, stop_words (the list's
                             name: "english", "none" or the file), min_df, max_df, max_vocab (absent: no cap),
                             n_source (documents in the source)
    /text/stop_words         (S,) UTF-8 strings, the stop words left out
    /text/dropped            (n_dropped,) int64, source index of every document left without words by the
                             filters (dropped; the stored documents are the others, in source order)

``doc_index`` and ``train_doc_index`` together hold every source index once, so
another tool can rebuild the split from the source corpus alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.base import (BatchStore, block_values, chunk_1d, heldout_info, plain_number, range_groups,
                             read_attrs, sized_offsets, split_offsets, write_batch_file)
from bnpvi.data.batch import WordCountBatch
from bnpvi.data.checks import (as_index_array, as_rows, check_doc_range, check_documents, check_label_names,
                               check_labels, check_n_batches, check_vocab, check_vocab_size)
from bnpvi.data.progress import meter
from bnpvi.data.tokens import TextSettings
from bnpvi.data.writes import check_written
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
    has_heldout : bool
        Whether the file holds held-out documents (:meth:`read_heldout`).
    n_heldout : int
        Number of held-out documents (0 without them).
    has_true_topics : bool
        Whether the file holds the generating topics (:meth:`read_true_topics`).
    """

    unit = "documents"
    source_index_names = ("train_doc_index", "doc_index")

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
        layout = {"n_atoms": N, "D": V, "n_units": N, "nnz": nnz, "has_vocab": has_vocab}
        layout.update(_heldout_layout(f, N, fail))
        n_topics = 0
        if "true_topics" in f:
            topics = f["true_topics"]
            if not isinstance(topics, h5py.Dataset) or topics.ndim != 2 or topics.shape[1] != V \
                    or topics.shape[0] < 1 or topics.dtype.kind not in "iuf":
                raise fail(f"has an invalid true_topics dataset (expected (K, {V}) numbers)")
            n_topics = int(topics.shape[0])
        layout["n_true_topics"] = n_topics
        text = f.get("text")
        if text is not None and (not isinstance(text, h5py.Group) or not {"stop_words", "dropped"} <= set(text)
                                 or not {"lowercase", "token_pattern", "stop_words", "n_source"} <= set(text.attrs)):
            raise fail("has an invalid 'text' group (expected the attributes and datasets of bnpvi-data convert "
                       "--text)")
        layout["has_text"] = text is not None
        return layout

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

    # ---------------------------------------------------------- held out
    def _require_heldout(self) -> h5py.Group:
        if not self.has_heldout:
            raise BnpviError(f"data file {self._path} holds no held-out documents (write them with "
                             "`bnpvi-data convert SRC DST --heldout F`)")
        return self._handle()["heldout"]

    def read_heldout(self, lo: int = 0, hi: int | None = None) -> WordCountBatch:
        """The held-out documents ``lo:hi`` (default: all of them) as one WordCountBatch.

        Parameters
        ----------
        lo, hi : int, optional
            A range of held-out documents, counted from 0 in the held-out set
            (``0 <= lo < hi <= n_heldout``); read them in pieces to bound memory.

        Returns
        -------
        WordCountBatch
            doc_range rebased to 0; ``start = lo`` (the index of the first
            document in the held-out set, which
            :func:`~bnpvi.data.heldout.completion_split` uses to seed each
            document's split).

        Raises
        ------
        BnpviError
            The file holds no held-out documents (the message names the file), or a bad range.
        """
        g = self._require_heldout()
        hi = self.n_heldout if hi is None else int(hi)
        lo = int(lo)
        if not 0 <= lo < hi <= self.n_heldout:
            raise BnpviError(f"data file {self._path}: held-out documents {lo}:{hi} out of range "
                             f"0:{self.n_heldout}")
        dr = np.asarray(g["doc_range"][lo:hi + 1], dtype=np.int64)
        first, last = int(dr[0]), int(dr[-1])
        ids = np.ascontiguousarray(g["word_ids"][first:last], dtype=np.int32)
        counts = np.ascontiguousarray(g["word_counts"][first:last], dtype=np.float64)
        return WordCountBatch(word_ids=ids, word_counts=counts, doc_range=dr - first, vocab_size=self.D, start=lo)

    def heldout_labels(self) -> np.ndarray | None:
        """(N_h,) int64 true labels of the held-out documents, or None when the file holds none."""
        g = self._require_heldout()
        return np.asarray(g["labels"][()], dtype=np.int64) if "labels" in g else None

    def heldout_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Where the documents came from: the split in indices of the source corpus.

        Returns
        -------
        train_doc_index : (N,) int64
            Source index of each training document, in stored (batch) order.
        doc_index : (N_h,) int64
            Source index of each held-out document, in held-out order.
        """
        g = self._require_heldout()
        return (np.asarray(g["train_doc_index"][()], dtype=np.int64),
                np.asarray(g["doc_index"][()], dtype=np.int64))

    @property
    def has_text(self) -> bool:
        """Whether the corpus was converted from raw text (:meth:`text_origin`)."""
        return self._layout["has_text"]

    def text_origin(self) -> "TextOrigin | None":
        """How raw text became these counts (its tokeniser settings feed
        :func:`~bnpvi.data.tokens.count_texts`), or None for a corpus not made from text."""
        if not self.has_text:
            return None
        g = self._handle()["text"]
        attrs = read_attrs(g)
        settings = TextSettings.from_attrs(attrs, g["stop_words"].asstr()[()])
        return TextOrigin(settings, attrs.get("min_df", 1), attrs.get("max_df", 1.0), attrs.get("max_vocab"),
                          int(attrs["n_source"]), np.asarray(g["dropped"][()], dtype=np.int64))

    @property
    def has_true_topics(self) -> bool:
        return self._layout["n_true_topics"] > 0

    def read_true_topics(self) -> np.ndarray | None:
        """(K, V) float64 generating topics of a synthetic corpus, or None when the file holds none."""
        if not self.has_true_topics:
            return None
        return np.asarray(self._handle()["true_topics"][()], dtype=np.float64)

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
            for lo, hi in range_groups(dr, limit):
                yield start + lo, self._read(start + lo, start + hi)

    def _scan(self, check: bool, moments: bool) -> None:
        """Documents: doc_range strictly increasing (no empty documents), word ids in [0, V) and not
        repeated within a document, counts finite positive whole numbers, and the ``tokens`` attribute
        equal to the sum of the counts; the same for the held-out documents, whose source indices together
        with the training ones must name every source document once (O(N) integers in memory); true topics
        finite and non-negative. No moments: a V x V covariance of counts is neither cheap nor used by the
        discrete observation families."""
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
        if self.has_heldout:
            self._check_heldout()
        if self.has_true_topics:
            topics = self.read_true_topics()
            if not np.all(np.isfinite(topics)) or (topics < 0).any():
                raise BnpviError(f"data file {self._path} has true_topics with negative or non-finite values")

    def _check_heldout(self) -> None:
        """The held-out documents as the training ones, and the two index arrays covering the source once."""
        g = self._handle()["heldout"]
        limit = self._limit()
        tokens = 0.0
        dr_all = g["doc_range"]
        for start in range(0, self.n_heldout, limit):
            dr = np.asarray(dr_all[start:min(self.n_heldout, start + limit) + 1], dtype=np.int64)
            for lo, hi in range_groups(dr, limit):
                batch = self.read_heldout(start + lo, start + hi)
                check_documents(batch.word_ids, batch.word_counts, batch.doc_range, self.D, f"data file {self._path}",
                                doc_name=lambda d, first=batch.start: f"held-out document {first + d}")
                tokens += float(batch.word_counts.sum())
        stored = plain_number(g.attrs.get("tokens"))
        if stored is not None and stored != tokens:
            raise BnpviError(f"data file {self._path} is inconsistent: heldout attribute tokens={stored} but the "
                             f"held-out counts sum to {tokens:.0f}")
        train, held = self.heldout_indices()
        everything = np.concatenate([train, held])
        total = everything.shape[0]
        if everything.size and (everything.min() < 0 or everything.max() >= total
                                or (np.bincount(everything, minlength=total) != 1).any()):
            raise BnpviError(f"data file {self._path} is inconsistent: heldout/train_doc_index and "
                             f"heldout/doc_index must hold each source document index 0..{total - 1} exactly once")

    def _doc_namer(self, first_doc: int):
        def name(d: int) -> str:
            d = first_doc + int(d)
            return f"document {d} (batch {self._batch_of(d)})"
        return name

    def _info_extras(self) -> dict:
        origin = self.text_origin()
        return {"V": self.D, "nnz": self.nnz, "tokens": self.n_tokens(), "vocab": self.has_vocab,
                **heldout_info(self), "true_topics": self._layout["n_true_topics"],
                "text": None if origin is None else origin.describe(),
                "text_dropped": 0 if origin is None else int(origin.dropped.shape[0])}

    def _describe(self) -> str:
        held = f", heldout={self.n_heldout}" if self.has_heldout else ""
        return f"N={self.n_atoms}, V={self.D}, nnz={self.nnz}{held}"


def _heldout_layout(f: h5py.File, N: int, fail) -> dict:
    """Check the optional ``heldout`` group (shapes, dtypes, ends; O(1) values read)."""
    if "heldout" not in f:
        return {"n_heldout": 0, "heldout_nnz": 0}
    g = f["heldout"]
    if not isinstance(g, h5py.Group):
        raise fail("has a 'heldout' entry that is not a group")
    for name, kinds in (("word_ids", "iu"), ("word_counts", "iuf"), ("doc_range", "iu"), ("doc_index", "iu"),
                        ("train_doc_index", "iu")):
        ds = g.get(name)
        if not isinstance(ds, h5py.Dataset):
            raise fail(f"is missing the dataset 'heldout/{name}'")
        if ds.ndim != 1 or ds.dtype.kind not in kinds:
            raise fail(f"has a dataset heldout/{name} of shape {ds.shape} and dtype {ds.dtype}; expected 1-D "
                       f"{'numbers' if kinds == 'iuf' else 'integers'}")
    nnz = int(g["word_ids"].shape[0])
    if g["word_counts"].shape[0] != nnz:
        raise fail(f"is inconsistent: heldout/word_ids has {nnz} entries but heldout/word_counts has "
                   f"{g['word_counts'].shape[0]}")
    n_held = int(g["doc_range"].shape[0]) - 1
    if n_held < 1:
        raise fail("has a heldout group without documents")
    first, last = int(g["doc_range"][0]), int(g["doc_range"][n_held])
    if first != 0 or last != nnz:
        raise fail(f"has an inconsistent heldout/doc_range (need 0 first and nnz={nnz} last; got {first} and {last})")
    for name, want in (("doc_index", n_held), ("train_doc_index", N)):
        if g[name].shape[0] != want:
            raise fail(f"is inconsistent: heldout/{name} has {g[name].shape[0]} entries but there are {want} "
                       f"{'held-out' if name == 'doc_index' else 'training'} documents")
    if "labels" in g:
        lab = g["labels"]
        if not isinstance(lab, h5py.Dataset) or lab.shape != (n_held,) or lab.dtype.kind not in "iu":
            raise fail(f"has an invalid heldout/labels dataset (expected ({n_held},) integers)")
    return {"n_heldout": n_held, "heldout_nnz": nnz}


@dataclass(frozen=True)
class HeldoutDocuments:
    """Documents kept apart for evaluation, stored in the ``heldout`` group of a bag-of-words file.

    Built by :func:`bnpvi.data.heldout.hold_out` (or ``convert(..., heldout=F)``).

    Attributes
    ----------
    word_ids, word_counts, doc_range : arrays
        The held-out documents in CSR form (as for :func:`write_documents`).
    doc_index : (N_h,) int
        Index of each held-out document in the source corpus.
    train_doc_index : (N,) int
        Index of each training document in the source corpus, in the order the
        training documents are written.
    labels : (N_h,) int, optional
        True labels of the held-out documents.
    fraction : float, optional
        The fraction F that was asked for (stored as an attribute).
    seed : int, optional
        The seed that chose the held-out documents (stored as an attribute).
    """

    word_ids: np.ndarray
    word_counts: np.ndarray
    doc_range: np.ndarray
    doc_index: np.ndarray
    train_doc_index: np.ndarray
    labels: np.ndarray | None = None
    fraction: float | None = None
    seed: int | None = None

    @property
    def n_docs(self) -> int:
        return int(np.asarray(self.doc_range).shape[0]) - 1


@dataclass(frozen=True)
class TextOrigin:
    """How raw text became a corpus's counts (``bnpvi-data convert --text``), stored in the group ``text``.

    Attributes
    ----------
    settings : TextSettings
        The tokeniser: lower-casing, token pattern, stop words.
    min_df, max_df : int or float
        The document-frequency limits the vocabulary was chosen by (an int counts documents, a
        float is a fraction of them, as in scikit-learn's CountVectorizer).
    max_vocab : int or None
        The cap on the vocabulary size (the most frequent words kept).
    n_source : int
        Documents in the source (lines, or rows of a table).
    dropped : (n_dropped,) int64
        Source index of every document that no word of the vocabulary was left in (dropped).
    """

    settings: TextSettings
    min_df: int | float
    max_df: int | float
    max_vocab: int | None
    n_source: int
    dropped: np.ndarray

    def describe(self) -> str:
        """One line for ``bnpvi-data info``."""
        def share(limit) -> str:
            return f"{limit} documents" if isinstance(limit, int) else f"{100 * limit:g} % of the documents"

        cap = "" if self.max_vocab is None else f", at most {self.max_vocab} words"
        return (f"{self.settings.describe()}; words in at least {share(self.min_df)} and at most "
                f"{share(self.max_df)}{cap}; {self.dropped.shape[0]} of {self.n_source} documents dropped (no "
                "word left)")


def _write_text(f: h5py.File, origin: TextOrigin) -> None:
    g = f.create_group("text")
    g.attrs.update(origin.settings.attrs())
    g.attrs.update({"min_df": origin.min_df, "max_df": origin.max_df, "n_source": np.int64(origin.n_source)})
    if origin.max_vocab is not None:
        g.attrs["max_vocab"] = np.int64(origin.max_vocab)
    g.create_dataset("stop_words", data=np.array(origin.settings.stop_words, dtype=object),
                     dtype=h5py.string_dtype("utf-8"))
    g.create_dataset("dropped", data=np.asarray(origin.dropped, dtype=np.int64))


def joined_documents(parts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(word_ids, word_counts, doc_range) of the documents of ``parts`` (triples of them with doc_range from
    0, e.g. the batches of a file as read, then new documents), one part after another."""
    parts = list(parts)
    lengths = np.concatenate([np.diff(np.asarray(doc_range, dtype=np.int64)) for _, _, doc_range in parts])
    return (np.concatenate([np.asarray(ids, dtype=np.int64) for ids, _, _ in parts]),
            np.concatenate([np.asarray(counts, dtype=np.float64) for _, counts, _ in parts]),
            np.concatenate([[0], np.cumsum(lengths)]))


def write_documents(path, word_ids, word_counts, doc_range, vocab_size: int, n_batches: int = 1, labels=None,
                    vocab=None, batches_fixed: bool = True, source: str = "", compression: str | None = None,
                    heldout: HeldoutDocuments | None = None, true_topics=None, label_names=None,
                    text: TextOrigin | None = None, batch_sizes=None) -> Path:
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
        HDF5 compression filter for word_ids and word_counts (also the held-out ones); none by default.
    heldout : HeldoutDocuments, optional
        Documents kept apart for evaluation, stored in the group ``heldout`` (see
        the module docstring); the arrays above are then the training documents
        only. Its indices must name every source document (training and held
        out) exactly once.
    true_topics : array_like, shape (K, V), optional
        Generating topics of a synthetic corpus (finite, non-negative), stored
        as ``true_topics`` for evaluation only.
    label_names : sequence of str, optional
        The name of each label code (``labels`` and the held-out labels are then codes).
    text : TextOrigin, optional
        How raw text became the counts, stored in the group ``text``.
    batch_sizes : sequence of int, optional
        The documents of every batch, in order, in place of ``n_batches`` equal ones (as for
        :func:`~bnpvi.data.points.write_points`).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BnpviError
        One line naming ``path``: invalid arrays (see
        :func:`~bnpvi.data.checks.check_documents`; repeated ids within a document
        are an error here - converters sum them), labels, vocab, n_batches,
        held-out documents or true topics, or the file cannot be written. Nothing
        is left at ``path`` (nor a temporary file) on failure.
    """
    path = Path(path).expanduser()
    where = f"cannot write {path}"
    V = check_vocab_size(vocab_size, where)
    ids, counts, dr = _corpus_layout(word_ids, word_counts, doc_range, where)
    N = dr.shape[0] - 1
    if labels is not None:
        labels = check_labels(labels[:], N, where, atoms=f"there are {N} documents")
    if label_names is not None:
        label_names = check_label_names(label_names, labels, where)
    if vocab is not None:
        vocab = check_vocab(vocab, V, where)
    offsets = split_offsets(N, check_n_batches(n_batches, N, where, f"N={N} (documents)")) \
        if batch_sizes is None else sized_offsets(batch_sizes, N, where)
    held = None if heldout is None else _checked_heldout(heldout, N, where)
    if true_topics is not None:
        true_topics = _checked_topics(true_topics, V, where)

    def datasets(f: h5py.File) -> dict:
        tokens = _write_corpus(f, ids, counts, dr, V, where, compression)
        if vocab is not None:
            f.create_dataset("vocab", data=np.array(vocab, dtype=object), dtype=h5py.string_dtype("utf-8"),
                             chunks=(chunk_1d(V, 64),))
        if held is not None:
            _write_heldout(f, held, V, compression)
        if true_topics is not None:
            f.create_dataset("true_topics", data=true_topics)
        if text is not None:
            _write_text(f, text)
        return {"tokens": np.int64(tokens) if tokens < 2**63 else tokens}

    return write_batch_file(path, where, "bow", N, V, offsets, labels, batches_fixed, source,
                            datasets, {"nnz": np.int64(dr[-1])}, label_names)


def _corpus_layout(word_ids, word_counts, doc_range, where: str, doc_name=None) -> tuple:
    """The word ids and counts as arrays read a block at a time, and the checked document boundaries."""
    ids, counts = as_rows(word_ids), as_rows(word_counts)
    if len(counts.shape) != 1:
        raise BnpviError(f"{where}: word_counts must be 1-D, got shape {tuple(counts.shape)}")
    if ids.shape[0] != counts.shape[0]:
        raise BnpviError(f"{where}: word_ids has {ids.shape[0]} entries but word_counts has {counts.shape[0]}")
    return ids, counts, check_doc_range(doc_range, ids.shape[0], where, doc_name)


def _write_corpus(group: h5py.Group, ids, counts, dr: np.ndarray, V: int, where: str, compression: str | None,
                  doc_name=None) -> float:
    """Write ``word_ids``, ``word_counts`` and ``doc_range`` into ``group``, checking (and converting) a group of
    whole documents at a time (:func:`~bnpvi.data.checks.check_documents`); returns the sum of the counts."""
    name = doc_name if doc_name is not None else (lambda d: f"document {d}")
    nnz, N = int(dr[-1]), dr.shape[0] - 1
    ids_out = group.create_dataset("word_ids", shape=(nnz,), dtype=np.int32, chunks=(chunk_1d(nnz, 4),),
                                   compression=compression)
    counts_out = group.create_dataset("word_counts", shape=(nnz,), dtype=np.float64, chunks=(chunk_1d(nnz, 8),),
                                      compression=compression)
    tokens = 0.0
    with meter(f"writing {group.name.lstrip('/') or 'the'} documents", N, "docs") as advance:
        for lo, hi in range_groups(dr, block_values()):
            first, last = int(dr[lo]), int(dr[hi])
            block_ids, block_counts, _, _ = check_documents(ids[first:last], counts[first:last],
                                                            dr[lo:hi + 1] - first, V, where,
                                                            doc_name=lambda d, lo=lo: name(lo + d))
            ids_out[first:last] = block_ids
            counts_out[first:last] = block_counts
            check_written(group)
            tokens += float(block_counts.sum())
            advance(hi - lo)
    group.create_dataset("doc_range", data=dr, chunks=(chunk_1d(N + 1, 8),))
    return tokens


def _checked_heldout(heldout: HeldoutDocuments, N: int, where: str) -> dict:
    """The held-out documents (read a block at a time), their indices and labels in stored dtypes; BnpviError
    (one line) when they do not fit."""
    what = f"{where} (held-out documents)"
    name = lambda d: f"held-out document {d}"  # noqa: E731
    ids, counts, dr = _corpus_layout(heldout.word_ids, heldout.word_counts, heldout.doc_range, what, name)
    n_held = dr.shape[0] - 1
    doc_index = as_index_array(heldout.doc_index, "doc_index", what)
    train_index = as_index_array(heldout.train_doc_index, "train_doc_index", what)
    if doc_index.shape[0] != n_held:
        raise BnpviError(f"{what}: doc_index has {doc_index.shape[0]} entries but there are {n_held} held-out "
                         "documents")
    if train_index.shape[0] != N:
        raise BnpviError(f"{what}: train_doc_index has {train_index.shape[0]} entries but there are {N} training "
                         "documents")
    everything = np.concatenate([train_index, doc_index])
    total = everything.shape[0]
    if everything.min() < 0 or everything.max() >= total or (np.bincount(everything, minlength=total) != 1).any():
        raise BnpviError(f"{what}: train_doc_index and doc_index must hold each source document index "
                         f"0..{total - 1} exactly once")
    labels = None
    if heldout.labels is not None:
        labels = check_labels(heldout.labels[:], n_held, what, atoms=f"there are {n_held} held-out documents")
    attrs = {"N": np.int64(n_held), "nnz": np.int64(dr[-1])}
    if heldout.fraction is not None:
        attrs["fraction"] = float(heldout.fraction)
    if heldout.seed is not None:
        attrs["seed"] = np.int64(heldout.seed)
    return {"word_ids": ids, "word_counts": counts, "doc_range": dr, "doc_index": doc_index,
            "train_doc_index": train_index, "labels": labels, "attrs": attrs, "what": what, "name": name}


def _write_heldout(f: h5py.File, held: dict, V: int, compression: str | None) -> None:
    g = f.create_group("heldout")
    tokens = _write_corpus(g, held["word_ids"], held["word_counts"], held["doc_range"], V, held["what"], compression,
                           held["name"])
    for name in ("doc_index", "train_doc_index", "labels"):
        data = held[name]
        if data is not None:
            g.create_dataset(name, data=data, chunks=(chunk_1d(data.shape[0], 8),))
    g.attrs.update(held["attrs"])
    g.attrs["tokens"] = np.int64(tokens)


def _checked_topics(true_topics, V: int, where: str) -> np.ndarray:
    """True topics as a (K, V) float64 array of finite, non-negative values."""
    topics = np.asarray(true_topics)
    if topics.dtype.kind not in "biuf":
        raise BnpviError(f"{where}: true_topics must hold numbers, got dtype {topics.dtype}")
    if topics.ndim != 2 or topics.shape[0] < 1 or topics.shape[1] != V:
        raise BnpviError(f"{where}: true_topics has shape {topics.shape}; expected (K, V) with K >= 1 and V={V}")
    topics = np.ascontiguousarray(topics, dtype=np.float64)
    if not np.all(np.isfinite(topics)) or (topics < 0).any():
        raise BnpviError(f"{where}: true_topics must be finite and non-negative")
    return topics
