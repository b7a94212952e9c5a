"""Raw text to word counts: the tokeniser settings a corpus was made with, and counts of text under a vocabulary.

Tokens are what scikit-learn's ``CountVectorizer(...).build_analyzer()`` makes of a document: the
text lower-cased (unless ``lowercase`` is off), the matches of ``token_pattern`` (scikit-learn's
default: runs of two or more word characters), stop words removed. The analyzer runs once per
document; counting its tokens is vectorised (``pandas.factorize`` and scipy's ``sum_duplicates``),
with no Python loop over tokens. ``bnpvi-data convert --text`` stores the settings in the batch file
(:class:`~bnpvi.data.bow.TextOrigin`), so that :func:`count_texts` counts new text exactly as the
training corpus was counted.

scikit-learn and pandas are imported when text is tokenised or counted, not with this module (a batch
file's reader imports it to read the settings, and every command reads batch files).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np
import scipy.sparse as sp

from bnpvi.data.sources import line_chunks, text_encoding
from bnpvi.errors import BnpviError

if TYPE_CHECKING:
    import pandas as pd

#: scikit-learn's default token pattern: runs of two or more word characters.
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
#: Named stop-word lists (scikit-learn's ``ENGLISH_STOP_WORDS``).
STOP_LISTS = ("english",)
#: The stop words of raw text unless told otherwise, in ``bnpvi-data convert --text`` and the topic estimators
#: alike: a topic model of text with its function words spends topics on them.
DEFAULT_STOP_WORDS = "english"
# Lines of a stop-word file read at once.
_STOP_WORD_LINES = 2**16


@dataclass(frozen=True)
class TextSettings:
    """How raw text becomes tokens.

    Attributes
    ----------
    lowercase : bool
        Lower-case the text before tokenising.
    token_pattern : str
        The regular expression whose matches are the tokens (at most one capturing group).
    stop_words : tuple of str
        The words left out, sorted.
    stop_words_name : str
        Where they came from: ``"none"``, ``"english"`` or the stop-word file.
    encoding : str
        The text encoding of the raw text files (:func:`~bnpvi.data.sources.text_encoding`'s name); new text is
        read in it too.
    """

    lowercase: bool = True
    token_pattern: str = TOKEN_PATTERN
    stop_words: tuple[str, ...] = ()
    stop_words_name: str = "none"
    encoding: str = "utf-8"

    @classmethod
    def make(cls, stop_words=DEFAULT_STOP_WORDS, lowercase: bool = True, token_pattern: str = TOKEN_PATTERN,
             encoding: str = "utf-8") -> "TextSettings":
        """Checked settings.

        Parameters
        ----------
        stop_words : str, Path or sequence of str, default :data:`DEFAULT_STOP_WORDS`
            ``"english"`` (scikit-learn's list), ``"none"`` / None (no stop words), a file
            with one stop word per line (blank lines skipped), or the words themselves.
        lowercase : bool, default True
        token_pattern : str, default :data:`TOKEN_PATTERN`
        encoding : str, default "utf-8"
            The text encoding of the raw text and of a stop-word file: any codec name Python knows.

        Raises
        ------
        BnpviError
            A token pattern that does not compile or has more than one capturing group, an unknown
            encoding, or a stop-word file that cannot be read.
        """
        try:
            groups = re.compile(token_pattern).groups
        except (re.error, TypeError) as err:
            raise BnpviError(f"--token-pattern {token_pattern!r} is not a regular expression: {err}") from None
        if groups > 1:
            raise BnpviError(f"--token-pattern {token_pattern!r} has {groups} capturing groups; at most one "
                             "(the token) is allowed")
        encoding = text_encoding(encoding)
        if stop_words is None or (isinstance(stop_words, str) and stop_words == "none"):
            words, name = (), "none"
        elif isinstance(stop_words, str) and stop_words in STOP_LISTS:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
            words, name = tuple(sorted(ENGLISH_STOP_WORDS)), stop_words
        elif isinstance(stop_words, (str, Path)):
            words, name = _read_stop_words(Path(stop_words).expanduser(), encoding), str(stop_words)
        else:
            words, name = tuple(sorted({str(w) for w in stop_words})), "given"
        return cls(bool(lowercase), token_pattern, words, name, encoding)

    def attrs(self) -> dict:
        """The settings as plain HDF5 attribute values (the stop words themselves are stored apart)."""
        return {"lowercase": self.lowercase, "token_pattern": self.token_pattern,
                "stop_words": self.stop_words_name, "encoding": self.encoding}

    @classmethod
    def from_attrs(cls, attrs: dict, stop_words) -> "TextSettings":
        """The settings stored by :meth:`attrs` and the stored stop words (files written before the encoding was
        stored were read as UTF-8)."""
        return cls(bool(attrs["lowercase"]), str(attrs["token_pattern"]), tuple(str(w) for w in stop_words),
                   str(attrs["stop_words"]), str(attrs.get("encoding", "utf-8")))

    def describe(self) -> str:
        """One line for ``bnpvi-data info``."""
        stop = "no stop words" if not self.stop_words else f"stop words {self.stop_words_name} ({len(self.stop_words)})"
        return (f"{'lower-cased' if self.lowercase else 'case kept'}, tokens {self.token_pattern}, {stop}, "
                f"read as {self.encoding}")

    def analyzer(self) -> Callable[[str], list[str]]:
        """scikit-learn's analyzer for these settings: a document -> its tokens."""
        from sklearn.feature_extraction.text import CountVectorizer
        return CountVectorizer(lowercase=self.lowercase, token_pattern=self.token_pattern,
                               stop_words=list(self.stop_words) or None).build_analyzer()


def _read_stop_words(path: Path, encoding: str) -> tuple[str, ...]:
    """The distinct words of a stop-word file (one per line, blank lines skipped), sorted."""
    if not path.is_file():
        raise BnpviError(f"stop-word file not found: {path} (or give --stop-words english, or none)")
    words = set()
    for lines in line_chunks(path, _STOP_WORD_LINES, encoding):
        words.update(line.strip() for line in lines)
    return tuple(sorted(words - {""}))


def tokenise(texts: list[str], analyzer: Callable[[str], list[str]]) -> tuple[sp.csr_matrix, np.ndarray]:
    """Counts of a list of documents under their own vocabulary.

    Returns
    -------
    counts : (len(texts), W) CSR float64
        Canonical (entries sorted by column, no repeats); a document without tokens is an empty row.
    words : (W,) object ndarray
        The word of each column, in order of first appearance.
    """
    import pandas as pd

    tokens = [analyzer(text) for text in texts]
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    codes, words = pd.factorize(np.fromiter(itertools.chain.from_iterable(tokens), dtype=object,
                                            count=int(lengths.sum())))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    counts = sp.csr_matrix((np.ones(codes.shape[0]), codes, indptr), shape=(len(texts), len(words)))
    counts.sum_duplicates()
    return counts, np.asarray(words, dtype=object)


def vocabulary_index(vocab) -> pd.Index:
    """A vocabulary (word id i is ``vocab[i]``) as a pandas Index for :func:`count_texts`.

    Raises
    ------
    BnpviError
        A word appears twice (new text could not be counted unambiguously).
    """
    import pandas as pd

    index = vocab if isinstance(vocab, pd.Index) else pd.Index(np.asarray(list(vocab), dtype=object))
    if not index.is_unique:
        raise BnpviError(f"the vocabulary lists {index[index.duplicated()][0]!r} more than once; new text cannot "
                         "be counted under it")
    return index


def count_texts(texts: Iterable[str], vocab, settings: TextSettings) -> tuple[sp.csr_matrix, int]:
    """Word counts of raw texts under a given vocabulary, as ``bnpvi-data convert --text`` counts them.

    Each text is one document, tokenised by ``settings`` (scikit-learn's analyzer, see the module
    docstring); a token whose word is not in ``vocab`` is dropped and counted as unknown. This is
    how new text reaches a trained topic model (``bnpvi-apply RUN_DIR new.txt out.h5``): pass the
    run's vocabulary and the settings of its training file
    (:meth:`bnpvi.data.bow.BowStore.text_origin`, or :meth:`TextSettings.from_attrs`).

    Parameters
    ----------
    texts : iterable of str
        The documents (e.g. one chunk of :func:`bnpvi.data.sources.line_chunks`).
    vocab : sequence of str or pandas.Index
        V distinct words; word id i is ``vocab[i]``. Pass :func:`vocabulary_index` once to
        reuse it over many chunks.
    settings : TextSettings
        The settings the vocabulary was made with.

    Returns
    -------
    counts : (n_texts, V) scipy.sparse.csr_matrix of float64
        One row per text, entries sorted by word id; a text with no known word is an empty row.
    n_unknown : int
        Tokens dropped because their word is not in ``vocab`` (stop words are not tokens).
    """
    index = vocabulary_index(vocab)
    chunk, words = tokenise(list(texts), settings.analyzer())
    return restrict(chunk, words, index)


def restrict(counts: sp.csr_matrix, words: np.ndarray, index: pd.Index) -> tuple[sp.csr_matrix, int]:
    """Counts under their own ``words`` (:func:`tokenise`) re-indexed by a vocabulary; (counts, unknown tokens)."""
    column = index.get_indexer(words)[counts.indices]
    known = column >= 0
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[known], minlength=counts.shape[0]))])
    out = sp.csr_matrix((counts.data[known], column[known], indptr), shape=(counts.shape[0], len(index)))
    out.sort_indices()
    return out, int(counts.data[~known].sum())
