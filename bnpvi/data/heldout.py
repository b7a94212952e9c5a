"""Held-out documents: the train / held-out split of a corpus, and the document-completion split.

Two levels of holding out, as in the evaluation of Hughes, Kim & Sudderth 2015
(AISTATS) §6 and Hughes 2016 thesis Ch. 7 (after Wang, Paisley & Blei 2011):

* :func:`choose_heldout` / :func:`hold_out` keep whole documents apart from
  training (``bnpvi-data convert --heldout F`` stores them in the ``heldout``
  group of the batch file, see :mod:`bnpvi.data.bow`);
* :func:`completion_split` splits each held-out document's tokens into an
  observed part (used to fit that document's topic proportions) and a target
  part (whose predictive log-likelihood is scored).

Both are deterministic functions of a seed. The held-out documents are the
first ``round(F N)`` entries of ``np.random.default_rng(seed).permutation(N)``,
so any tool can rebuild the split from the source corpus alone (the file also
stores the indices). The completion split draws every document's randomness
from a counter-based hash of ``(seed, document index)`` - one independent
stream per document, evaluated for all documents at once with NumPy - so a
document is split the same way whichever batch or subset it is read in, and no
Python loop runs over documents or tokens.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from bnpvi.data.batch import WordCountBatch
from bnpvi.data.bow import HeldoutDocuments
from bnpvi.data.checks import sum_duplicate_words
from bnpvi.errors import BnpviError

#: Fraction of a document's word types that "types" mode observes.
TYPES_OBSERVED = 0.8
MODES = ("halves", "types")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


# ----------------------------------------------------------- whole documents
def check_fraction(fraction, what: str = "the held-out fraction") -> float:
    """``fraction`` as a float strictly between 0 and 1; one-line BnpviError otherwise."""
    try:
        value = float(fraction)
    except (TypeError, ValueError):
        raise BnpviError(f"{what} must be a number strictly between 0 and 1, got {fraction!r}") from None
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise BnpviError(f"{what} must be a number strictly between 0 and 1, got {fraction!r}")
    return value


def check_seed(seed, what: str = "the seed") -> int:
    """``seed`` as a non-negative integer below 2**64; one-line BnpviError otherwise."""
    try:
        value = operator.index(seed)
    except TypeError:
        if isinstance(seed, str) and seed.strip().lstrip("+").isdigit():
            value = int(seed)
        else:
            raise BnpviError(f"{what} must be a non-negative integer, got {seed!r}") from None
    if not 0 <= value < 2**64:
        raise BnpviError(f"{what} must be a non-negative integer below 2**64, got {seed!r}")
    return int(value)


def n_heldout_docs(n_docs: int, fraction: float) -> int:
    """How many of ``n_docs`` documents a fraction F holds out: round(F N) (halves up), kept in 1..N-1."""
    return int(min(n_docs - 1, max(1, math.floor(fraction * n_docs + 0.5))))


def choose_heldout(n_docs: int, fraction, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Choose which documents of a corpus to keep apart for evaluation.

    The held-out documents are the first ``n_heldout_docs(N, F)`` entries of
    ``np.random.default_rng(seed).permutation(N)`` (round(F N), at least 1 and
    at most N - 1), so the split depends only on N, F and the seed.

    Parameters
    ----------
    n_docs : int
        N, the number of documents (at least 2).
    fraction : float
        F, strictly between 0 and 1.
    seed : int, default 0
        Non-negative.

    Returns
    -------
    train_index : (N - N_h,) int64, increasing
    heldout_index : (N_h,) int64, increasing

    Raises
    ------
    BnpviError
        A bad fraction or seed, or fewer than 2 documents.
    """
    fraction = check_fraction(fraction)
    seed = check_seed(seed, "the held-out seed")
    n_docs = int(n_docs)
    if n_docs < 2:
        raise BnpviError(f"cannot hold out documents from a corpus of {n_docs} document(s); need at least 2")
    perm = np.random.default_rng(seed).permutation(n_docs).astype(np.int64, copy=False)
    n_held = n_heldout_docs(n_docs, fraction)
    held = np.sort(perm[:n_held])
    train = perm[n_held:]
    train.sort()  # in place: the split costs the permutation's 8 bytes a document, no more
    return train, held


def hold_out(batch: WordCountBatch, fraction, seed: int = 0,
             labels=None) -> tuple[WordCountBatch, np.ndarray | None, HeldoutDocuments]:
    """Split a corpus into training documents and held-out documents (:func:`choose_heldout`).

    Parameters
    ----------
    batch : WordCountBatch
        The whole corpus (document d is the source document d).
    fraction : float
        F, strictly between 0 and 1.
    seed : int, default 0
    labels : (N,) array of int, optional
        True labels of the documents; they follow their documents.

    Returns
    -------
    train : WordCountBatch
        The training documents in source order (``start = 0``).
    train_labels : (N - N_h,) int64 or None
    heldout : HeldoutDocuments
        The held-out documents in source order, with both index arrays, the
        fraction and the seed; pass it to ``write_documents(..., heldout=...)``.
    """
    train_index, heldout_index = choose_heldout(batch.n_atoms, fraction, seed)
    held = batch.take(heldout_index)
    train = batch.take(train_index)
    y = None if labels is None else np.asarray(labels)
    held_docs = HeldoutDocuments(held.word_ids, held.word_counts, held.doc_range, heldout_index, train_index,
                                 None if y is None else y[heldout_index], float(fraction), check_seed(seed))
    return train, None if y is None else y[train_index], held_docs


# ------------------------------------------------------- document completion
def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijective scramble of uint64 values."""
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX2
    return x ^ (x >> np.uint64(31))


def _uniform(bits: np.ndarray) -> np.ndarray:
    """uint64 hash values -> floats uniform on [0, 1) (the top 53 bits)."""
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def document_keys(seed: int, doc_index) -> np.ndarray:
    """The 64-bit key of each document's random stream: a hash of ``(seed, document index)``.

    Every random choice :func:`completion_split` makes for a document is a hash
    of this key and a counter (token position or word id), so the split of a
    document depends only on the seed and its index.
    """
    idx = np.asarray(doc_index, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        return _mix(_mix(np.uint64(seed) ^ _GOLDEN) ^ _mix(idx * _GOLDEN + np.uint64(1)))


def _draws(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """One uint64 draw per (key, counter) pair: element i of the stream of ``keys[i]``."""
    with np.errstate(over="ignore"):
        return _mix(keys + (counters.astype(np.uint64) + np.uint64(1)) * _GOLDEN)


def _canonical(batch: WordCountBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document, word id, count) per distinct (document, word) pair, sorted by document then word id.

    Counts must be finite, non-negative whole numbers; repeated ids within a document are summed.
    """
    dr = np.asarray(batch.doc_range, dtype=np.int64)
    ids = np.asarray(batch.word_ids, dtype=np.int64)
    counts = np.asarray(batch.word_counts, dtype=np.float64)
    if dr.ndim != 1 or dr.shape[0] < 1 or dr[0] != 0 or dr[-1] != ids.shape[0] or (np.diff(dr) < 0).any():
        raise BnpviError("completion_split: the batch has an invalid doc_range")
    bad = ~np.isfinite(counts) | (counts < 0) | (counts != np.round(counts))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise BnpviError(f"completion_split: counts must be non-negative whole numbers; entry {j} is "
                         f"{counts[j].item()!r}")
    X = sum_duplicate_words(ids, counts, dr, batch.vocab_size)
    doc = np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr))
    ids, counts = X.indices.astype(np.int64), X.data.astype(np.int64)
    return doc, ids, counts


def _as_batch(doc: np.ndarray, ids: np.ndarray, counts: np.ndarray, batch: WordCountBatch) -> WordCountBatch:
    """The entries with a positive count as a batch with ``batch``'s documents, vocabulary size and start."""
    keep = counts > 0
    n_docs = batch.doc_range.shape[0] - 1
    dr = np.concatenate([[0], np.cumsum(np.bincount(doc[keep], minlength=n_docs))]).astype(np.int64)
    return WordCountBatch(np.ascontiguousarray(ids[keep], dtype=np.int32),
                          np.ascontiguousarray(counts[keep], dtype=np.float64), dr, batch.vocab_size, batch.start)


def group_halves(seq_range, seed: int = 0, start: int = 0) -> np.ndarray:
    """(T,) bool: the observed half of every group of a grouped real-vector set, for group completion.

    Group g holds rows ``seq_range[g]:seq_range[g+1]`` and is group ``start + g`` of the whole set; its
    n_g rows are put in the order of draws from its own stream (:func:`document_keys` of ``(seed, start +
    g)``, as :func:`completion_split` draws a document's tokens) and the first floor(n_g / 2) are observed,
    the other ceil(n_g / 2) the target. The split of a group depends on the seed and its index alone.
    """
    seq_range = np.asarray(seq_range, dtype=np.int64)
    lengths = np.diff(seq_range)
    group = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    position = np.arange(seq_range[-1] - seq_range[0], dtype=np.int64) - (seq_range[group] - seq_range[0])
    draws = _draws(document_keys(seed, group + int(start)), position)
    order = np.lexsort((draws, group))  # rows by group, then by draw
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0]) - (seq_range[group[order]] - seq_range[0])
    return rank < (lengths // 2)[group]


def completion_split(batch: WordCountBatch, seed: int = 0,
                     mode: str = "halves") -> tuple[WordCountBatch, WordCountBatch]:
    """Split each document's tokens into an observed part and a target part, for document completion.

    Document completion (Hughes, Kim & Sudderth 2015 (AISTATS) §6; Wang, Paisley
    & Blei 2011) fits a held-out document's topic proportions to its observed
    part and scores the predictive likelihood of its target part.

    Document d of the batch is document ``batch.start + d`` of the whole
    held-out set; its split is drawn from its own random stream, a hash of
    ``(seed, batch.start + d)`` (:func:`document_keys`), so it is the same in
    any batching or subset of the held-out set that keeps the document's index.
    All documents are split at once, vectorised over tokens (memory: a few
    int64 per token of the batch).

    Parameters
    ----------
    batch : WordCountBatch
        Documents with non-negative whole-number counts (e.g.
        ``BowStore.read_heldout()``).
    seed : int, default 0
        Non-negative.
    mode : {"halves", "types"}
        ``"halves"``: the document's T tokens, expanded from the counts in word
        id order, are put in a random order and the first floor(T/2) are
        observed, the other ceil(T/2) the target; then counted again per word
        type (a type may appear on both sides).
        ``"types"``: each distinct word type goes wholly to the observed part
        with probability 0.8, else to the target; a document with at least two
        types keeps at least one on each side (if all were observed, the type
        with the largest draw moves to the target; if none, the one with the
        smallest draw moves to the observed part).

    Returns
    -------
    observed, target : WordCountBatch
        One document per input document (possibly empty), in the same order,
        with the batch's vocab_size and start; word ids ascending within a
        document; observed + target counts equal the document's counts.

    Raises
    ------
    BnpviError
        An unknown mode, a bad seed, or counts that are not non-negative whole numbers.
    """
    if mode not in MODES:
        raise BnpviError(f"completion_split: mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    seed = check_seed(seed, "completion_split: the seed")
    doc, ids, counts = _canonical(batch)
    n_docs = batch.doc_range.shape[0] - 1
    keys = document_keys(seed, batch.start + np.arange(n_docs, dtype=np.int64))
    if mode == "halves":
        observed = _observed_halves(doc, counts, keys, n_docs)
    else:
        observed = np.where(_observed_types(doc, ids, keys, n_docs), counts, 0)
    return _as_batch(doc, ids, observed, batch), _as_batch(doc, ids, counts - observed, batch)


def _observed_halves(doc: np.ndarray, counts: np.ndarray, keys: np.ndarray, n_docs: int) -> np.ndarray:
    """Observed count of each (document, word) entry: the first floor(T/2) tokens of a random order."""
    n_entries = counts.shape[0]
    tok_entry = np.repeat(np.arange(n_entries, dtype=np.int64), counts)
    tok_doc = doc[tok_entry]
    T = np.bincount(doc, weights=counts, minlength=n_docs).astype(np.int64)
    first = np.concatenate([[0], np.cumsum(T)[:-1]]).astype(np.int64)
    position = np.arange(tok_entry.shape[0], dtype=np.int64) - first[tok_doc]  # 0..T-1 in word id order
    order = np.lexsort((_draws(keys[tok_doc], position), tok_doc))  # by document, then random key
    rank = np.empty_like(position)
    rank[order] = position  # tokens sorted by document keep the same positions: position = rank
    observed = rank < T[tok_doc] // 2
    return np.bincount(tok_entry, weights=observed, minlength=n_entries).astype(np.int64)


def _observed_types(doc: np.ndarray, ids: np.ndarray, keys: np.ndarray, n_docs: int) -> np.ndarray:
    """Whether each (document, word type) entry is observed: probability 0.8, at least one type per side."""
    u = _uniform(_draws(keys[doc], ids))
    observed = u < TYPES_OBSERVED
    n_types = np.bincount(doc, minlength=n_docs)
    n_observed = np.bincount(doc, weights=observed, minlength=n_docs)
    order = np.lexsort((u, doc))  # by document, then draw
    first = np.concatenate([[0], np.cumsum(n_types)[:-1]])
    last = first + n_types - 1
    several = n_types >= 2
    observed[order[last[several & (n_observed == n_types)]]] = False
    observed[order[first[several & (n_observed == 0)]]] = True
    return observed
