"""Raw text in: documents of words become a ``"bow"`` batch file (``bnpvi-data convert SRC DST --text``).

A source is a text file with one document per line (line i, counted from 0, is document i; a
blank line is an empty document), or a CSV (``.csv``) or TSV (``.tsv``) file whose first row names
the columns, with the text of each document in the column ``text_column`` (and, optionally, its
label in the column ``labels``).

The file is read in chunks of at most :data:`_CHUNK_DOCS` documents and about
:data:`~bnpvi.data.sources.TEXT_BLOCK` bytes (a table: as many rows as its first such block holds), twice, so
no list of the whole corpus is ever held and memory does not grow with the corpus (only the vocabulary does):

1. every chunk is tokenised (:mod:`bnpvi.data.tokens`: scikit-learn's analyzer) and the document
   frequency and total count of every word are added up;
2. the vocabulary is chosen by the limits, as scikit-learn's ``CountVectorizer`` chooses it:
   the words in at least ``min_df`` and at most ``max_df`` documents (an int counts documents, a
   float in [0, 1] is a fraction of them), then, if more than ``max_vocab`` are left, the
   ``max_vocab`` with the largest total counts (ties to the alphabetically first); word ids
   follow alphabetical order;
3. every chunk is tokenised again and counted under that fixed vocabulary
   (:func:`~bnpvi.data.tokens.count_texts`'s re-indexing), one CSR block per chunk, spooled
   (:class:`~bnpvi.data.documents_in.CorpusSpool`), so the counts are never held whole either.

The text is decoded in the ``encoding`` given (UTF-8 unless told otherwise; stored with the settings, so
new text is read the same way); bytes that are not text in it are reported with their line.

Documents left without a word of the vocabulary (blank lines, or only stop words and filtered
words) are dropped: a bag-of-words file holds no empty documents, and an empty document tells a
topic model nothing. Their number is reported, their source indices are stored
(``text/dropped``), and their labels go with them. The document frequencies count every source
document, and the vocabulary is chosen from all of them, held out or not.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from bnpvi.data.bow import TextOrigin
from bnpvi.data.checks import positive_int
from bnpvi.data.documents_in import CorpusSpool, Documents
from bnpvi.data.labels import LabelCoder, one_source, source_labels
from bnpvi.data.mapped import scratch_space
from bnpvi.data.progress import meter
from bnpvi.data.sources import (TEXT_BLOCK, Reader, existing_file, find_column, first_line, line_chunks, nonempty,
                                not_text, text_encoding)
from bnpvi.data.tokens import DEFAULT_STOP_WORDS, TOKEN_PATTERN, TextSettings, restrict, tokenise, vocabulary_index
from bnpvi.errors import BnpviError

# Documents read and tokenised at once.
_CHUNK_DOCS = 2**14
#: Table files and their separators; any other file holds one document per line.
TABLE_SEPARATORS = {".csv": ",", ".tsv": "\t"}


@dataclass(frozen=True)
class VocabularyLimits:
    """Which words make the vocabulary (scikit-learn's ``min_df``, ``max_df``, ``max_features``).

    Attributes
    ----------
    min_df, max_df : int or float
        Document-frequency limits: an int counts documents, a float in [0, 1] is a fraction of them.
    max_vocab : int or None
        Keep at most this many words, those with the largest total counts.
    """

    min_df: int | float = 1
    max_df: int | float = 1.0
    max_vocab: int | None = None

    @classmethod
    def make(cls, min_df=1, max_df=1.0, max_vocab=None) -> "VocabularyLimits":
        """Checked limits; BnpviError (one line) for a bad value."""
        return cls(_df_limit(min_df, "--min-df"), _df_limit(max_df, "--max-df"),
                   None if max_vocab is None else positive_int(max_vocab, "--max-vocab"))

    def choose(self, words: np.ndarray, df: np.ndarray, tf: np.ndarray, n_docs: int, where: str) -> np.ndarray:
        """The vocabulary, sorted, from every word's document frequency ``df`` and total count ``tf``."""
        low = self.min_df if isinstance(self.min_df, numbers.Integral) else self.min_df * n_docs
        high = self.max_df if isinstance(self.max_df, numbers.Integral) else self.max_df * n_docs
        if high < low:
            raise BnpviError(f"{where}: --min-df {self.min_df!r} and --max-df {self.max_df!r} keep no word: a word "
                             f"would have to be in at least {low:g} and at most {high:g} of its {n_docs} documents")
        if words.size == 0:
            raise BnpviError(f"{where}: no words in any of its {n_docs} documents (every one is blank or holds only "
                             "stop words)")
        order = np.argsort(words.astype(str), kind="stable")
        words, df, tf = words[order], df[order], tf[order]
        kept = np.flatnonzero((df >= low) & (df <= high))
        if kept.size == 0:
            raise BnpviError(f"{where}: empty vocabulary after filtering: none of its {words.size} words is in at "
                             f"least {low:g} and at most {high:g} of its {n_docs} documents (lower --min-df or "
                             "raise --max-df)")
        if self.max_vocab is not None and kept.size > self.max_vocab:
            kept = np.sort(kept[np.argsort(-tf[kept], kind="stable")[:self.max_vocab]])
        return words[kept]


def _df_limit(value, flag: str) -> int | float:
    """A document-frequency limit: an int >= 0 (documents) or a float in [0, 1] (a fraction of them)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = text
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0:
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)) and 0.0 <= value <= 1.0:
        return float(value)
    raise BnpviError(f"{flag} must be a number of documents (an integer >= 0) or a fraction of them (a decimal "
                     f"from 0 to 1, e.g. 0.5), got {value!r}")


# ------------------------------------------------------------------ sources
class _TextSource:
    """The documents of a text source (text in ``encoding``) in chunks: ``(texts, labels or None)`` per chunk, as
    often as asked."""

    def __init__(self, path: Path, text_column, labels, encoding: str):
        self.path, self.encoding = path, encoding
        self.sep = TABLE_SEPARATORS.get(path.suffix.lower())
        if self.sep is None:
            if text_column is not None:
                raise BnpviError(f"{path}: --text-column names a column of a .csv or .tsv file; this file is read "
                                 "as one document per line")
            if labels is not None:
                raise BnpviError(f"{path}: a file of one document per line has no label column; give the labels "
                                 "with --labels-file (one per line)")
            return
        if text_column is None:
            raise BnpviError(f"{path}: name the column that holds the text with --text-column NAME")
        import pandas as pd  # here, not with the module: bnpvi-apply imports it and needs pandas only for tables

        try:
            header = pd.read_csv(path, sep=self.sep, nrows=0, encoding=encoding).columns
        except pd.errors.EmptyDataError:
            raise BnpviError(f"{path} is empty (no header row)") from None
        except UnicodeDecodeError:
            raise not_text(path, encoding) from None
        except (pd.errors.ParserError, ValueError) as err:
            raise BnpviError(f"{path}: cannot parse as {self._table}: {first_line(err)}") from None
        self.text = find_column(header, text_column, True, path, "the text")
        self.labels = None if labels is None else find_column(header, labels, True, path, "labels")
        if self.labels == self.text:
            raise BnpviError(f"{path}: the text and the labels must be different columns (both {labels!r})")
        self.label_name = labels

    @property
    def _table(self) -> str:
        return "TSV" if self.sep == "\t" else "CSV"

    def chunks(self) -> Iterator[tuple[list[str], np.ndarray | None]]:
        if self.sep is None:
            for lines in line_chunks(self.path, _CHUNK_DOCS, self.encoding):
                yield lines, None
            return
        columns = [self.text] + ([self.labels] if self.labels is not None else [])
        import pandas as pd

        try:
            reader = pd.read_csv(self.path, sep=self.sep, header=0, index_col=False, usecols=columns, dtype=str,
                                 keep_default_na=False, chunksize=self._rows(), encoding=self.encoding)
            first = 0
            for frame in reader:
                labels = None
                if self.labels is not None:
                    labels = frame[self.labels].str.strip().to_numpy()
                    missing = np.flatnonzero(labels == "")
                    if missing.size:
                        raise BnpviError(f"{self.path}: labels column {self.label_name!r} has a missing value in row "
                                         f"{first + int(missing[0])}")
                yield frame[self.text].tolist(), labels
                first += len(frame)
        except UnicodeDecodeError:
            raise not_text(self.path, self.encoding) from None
        except (pd.errors.ParserError, ValueError) as err:
            raise BnpviError(f"{self.path}: cannot parse as {self._table}: {first_line(err)}") from None

    def _rows(self) -> int:
        """Rows of the table read at once: as many as its first :data:`~bnpvi.data.sources.TEXT_BLOCK` bytes hold
        (at least 1, at most :data:`_CHUNK_DOCS`), so a chunk of long documents is no larger than one of short
        ones."""
        with open(self.path, "rb") as fh:
            return max(1, min(_CHUNK_DOCS, fh.read(TEXT_BLOCK).count(b"\n")))


class _WordTally:
    """Document frequency and total count of every word met, chunk by chunk (first pass)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.df = np.zeros(0, dtype=np.int64)
        self.tf = np.zeros(0, dtype=np.float64)
        self.n_docs = 0

    def add(self, counts: sp.csr_matrix, words: np.ndarray) -> None:
        """Add one chunk's counts under its own ``words`` (:func:`~bnpvi.data.tokens.tokenise`)."""
        ids = np.fromiter((self.index.setdefault(word, len(self.index)) for word in words), dtype=np.int64,
                          count=words.shape[0])
        if len(self.index) > self.df.shape[0]:  # room for the new words, doubling (amortised O(1) per word)
            grow = max(len(self.index), 2 * self.df.shape[0]) - self.df.shape[0]
            self.df = np.concatenate([self.df, np.zeros(grow, dtype=np.int64)])
            self.tf = np.concatenate([self.tf, np.zeros(grow)])
        self.df[ids] += np.bincount(counts.indices, minlength=words.shape[0])  # canonical: one entry per document
        self.tf[ids] += np.bincount(counts.indices, weights=counts.data, minlength=words.shape[0])
        self.n_docs += counts.shape[0]

    def totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every word met, its document frequency and its total count."""
        n = len(self.index)
        return np.array(list(self.index), dtype=object), self.df[:n], self.tf[:n]


# -------------------------------------------------------------------- read
def read_text(path, text_column=None, labels=None, labels_file=None, stop_words=DEFAULT_STOP_WORDS, min_df=1,
              max_df=1.0, max_vocab=None, lowercase: bool = True, token_pattern: str = TOKEN_PATTERN, scratch=None,
              encoding: str = "utf-8") -> Documents:
    """Read raw text as a bag-of-words corpus (see the module docstring for the passes and the choices).

    Parameters
    ----------
    path : str or Path
        One document per line, or a ``.csv`` / ``.tsv`` file with a header row.
    text_column : str, optional
        CSV/TSV (required there): the column of text (header name, or 0-based index).
    labels : str, optional
        CSV/TSV: the column of document labels (strings allowed: stored with their names).
    labels_file : str or Path, optional
        One label per line, one line per source document (also for the documents dropped as empty).
    stop_words : str, Path or sequence of str, default ``"english"``
        ``"english"`` (scikit-learn's list), ``"none"`` or None (no stop words), a file of stop words (one per
        line), or the words.
    min_df, max_df : int or float, default 1 and 1.0
        Document-frequency limits: an int counts documents, a float in [0, 1] is a fraction of them.
    max_vocab : int, optional
        Keep at most this many words (the most frequent).
    lowercase : bool, default True
    token_pattern : str, default scikit-learn's ``r"(?u)\\b\\w\\w+\\b"``
    scratch : Path, optional
        A scratch directory for the counts (:func:`text_documents`); default: a temporary one, and the counts
        are returned in memory.
    encoding : str, default "utf-8"
        The text encoding of the source, of ``labels_file`` and of a stop-word file (any codec name Python
        knows); stored with the settings.

    Returns
    -------
    Documents
        With the vocabulary, the labels (of the documents kept) and the :class:`~bnpvi.data.bow.TextOrigin`.

    Raises
    ------
    BnpviError
        One line: a missing or empty file, bad options, an unknown column, bytes that are not text in
        ``encoding`` (with their line),
        an empty vocabulary after filtering, or a labels file whose length is not the number of documents.
    """
    path, _ = existing_file(path)
    nonempty(path)
    one_source(labels, labels_file)
    settings = TextSettings.make(stop_words, lowercase, token_pattern, encoding)
    limits = VocabularyLimits.make(min_df, max_df, max_vocab)
    source = _TextSource(path, text_column, labels, settings.encoding)
    return text_documents(source.chunks, settings, limits, str(path), labels_file, scratch)


def text_documents(chunks: Callable[[], Iterable[tuple[list[str], np.ndarray | None]]], settings: TextSettings,
                   limits: VocabularyLimits, where: str, labels_file=None, scratch=None) -> Documents:
    """The two passes over the chunks of a text corpus (the module docstring): vocabulary, then counts.

    Parameters
    ----------
    chunks : callable
        ``chunks()`` -> a fresh iterable of ``(texts, labels)``, one pair per chunk of documents
        (``labels``: their labels as strings, or None); called twice. For texts in memory,
        ``lambda: [(texts, None)]``.
    settings : TextSettings
    limits : VocabularyLimits
    where : str
        The source, in messages.
    labels_file : str or Path, optional
        One label per line, one line per document (when the chunks bring none), text in ``settings.encoding``.
    scratch : Path, optional
        A scratch directory: the counts are then spooled there a chunk at a time, never held whole.
        Default: a temporary one, and they are returned in memory.

    Returns
    -------
    Documents
        The documents left with a word of the vocabulary, with their labels, the vocabulary and the
        :class:`~bnpvi.data.bow.TextOrigin`.
    """
    if scratch is None:
        with scratch_space() as scratch:
            return text_documents(chunks, settings, limits, where, labels_file, scratch).in_memory()
    analyzer = settings.analyzer()
    tally, coder, codes = _WordTally(), LabelCoder(), []
    with meter("counting words", None, "docs") as advance:
        for texts, y in chunks():
            tally.add(*tokenise(texts, analyzer))
            if y is not None:
                codes.append(coder.add(y))
            advance(len(texts))
    if tally.n_docs == 0:
        raise BnpviError(f"{where} holds no documents (only a header row)")
    index = vocabulary_index(limits.choose(*tally.totals(), tally.n_docs, where))
    spool, kept = CorpusSpool(scratch, where, len(index)), np.ones(tally.n_docs, dtype=bool)
    first = 0
    with meter("counting documents", tally.n_docs, "docs") as advance:
        for texts, _ in chunks():
            counts = restrict(*tokenise(texts, analyzer), index)[0]
            empty = np.diff(counts.indptr) == 0
            kept[first + np.flatnonzero(empty)] = False
            first += counts.shape[0]
            if not empty.all():
                counts = counts[~empty]
                spool.add(counts.indices, counts.data, counts.indptr)
            advance(len(texts))
    y, names = (coder.labels(np.concatenate(codes), where) if codes
                else source_labels(None, labels_file, tally.n_docs, where, f"{tally.n_docs} documents",
                                   settings.encoding))
    origin = TextOrigin(settings, limits.min_df, limits.max_df, limits.max_vocab, tally.n_docs,
                        np.flatnonzero(~kept).astype(np.int64))
    return Documents(*spool.corpus(), len(index), None if y is None else y[kept], [str(word) for word in index],
                     None, names, origin)


def count_text_file(path, vocab, settings: TextSettings, text_column=None,
                    encoding: str | None = None) -> tuple[sp.csr_matrix, int]:
    """Word counts of the documents of a text file under a given vocabulary, read in chunks.

    The file is read as :func:`read_text` reads it (one document per line, or the column
    ``text_column`` of a ``.csv`` / ``.tsv`` file; text in ``encoding``, by default ``settings.encoding``), and
    every document is counted by
    :func:`~bnpvi.data.tokens.count_texts`; nothing is dropped, so row i is source document i
    (an empty row when none of its words is in ``vocab``).

    Returns
    -------
    counts : (n_docs, V) CSR float64
    n_unknown : int
        Tokens dropped because their word is not in ``vocab``.
    """
    path, _ = existing_file(path)
    nonempty(path)
    index = vocabulary_index(vocab)
    analyzer = settings.analyzer()
    blocks, unknown = [], 0
    encoding = settings.encoding if encoding is None else text_encoding(encoding)
    for texts, _ in _TextSource(path, text_column, None, encoding).chunks():
        block, dropped = restrict(*tokenise(texts, analyzer), index)
        blocks.append(block)
        unknown += dropped
    return sp.vstack(blocks, format="csr"), unknown


READER = Reader(holds="raw text", files="text read with --text", suffixes=(),
                options=frozenset({"text", "text_column", "labels", "labels_file", "stop_words", "min_df", "max_df",
                                   "max_vocab", "lowercase", "token_pattern", "encoding"}),
                claims=lambda path, options: bool(options.get("text")),
                read=lambda path, text, **options: read_text(path, **options))
