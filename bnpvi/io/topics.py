"""What a topic-model run writes besides the model file: its topics and the documents' topic proportions.

* ``topics.csv``: ``topic,rank,word,probability,coherence_npmi`` (every topic's ``n_words`` most probable
  words, E[φ_kv] = λ̂_kv / Σ_w λ̂_kw, and the topic's coherence repeated on each of its rows), topics listed
  most used first;
* ``topics.txt``: one line per topic, most used first: its id, its share of the tokens, its coherence, its
  top words;
* ``doc_topics.h5``: E[π_d] of every training document (``proportions`` (D, K), columns in the
  model file's topic order, with the topic ``uids``), from a local step under the final globals.

Words are the vocabulary's when the data file holds one, else the word ids. A topic's coherence is
the NPMI of its top :data:`N_COHERENCE` words over their co-occurrence in the training documents
(:func:`bnpvi.metrics.npmi_coherence`), read from the data file one block of documents at a time.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.data.bow import BowStore
from bnpvi.data.writes import replacing, write_text
from bnpvi.io.h5tree import write_atomic
from bnpvi.metrics import npmi_coherence, weighted_mean

N_WORDS = 20
"""Words listed per topic."""
N_COHERENCE = 10
"""Top words per topic whose pairs the coherence scores (Lau, Newman & Baldwin 2014)."""


def topic_word_probs(post: dict) -> np.ndarray:
    """E[φ_kv] (K, V) from the multinomial posterior's λ̂."""
    lam = np.asarray(post["lam"], dtype=np.float64)
    return lam / lam.sum(axis=1, keepdims=True)


def write_topics(run_dir, probs: np.ndarray, usage: np.ndarray, uids: np.ndarray, vocab=None,
                 store: BowStore | None = None, n_words: int = N_WORDS) -> float | None:
    """``topics.csv`` and ``topics.txt`` for topic-word probabilities ``probs`` (K, V), most used topic first.

    Parameters
    ----------
    run_dir : str or Path
    probs : (K, V) ndarray
        E[φ_kv].
    usage : (K,) ndarray
        Tokens of each topic.
    uids : (K,) ndarray of int
        Stable topic ids.
    vocab : sequence of V str, optional
    store : BowStore, optional
        The training documents, for each topic's coherence (NaN without them).
    n_words : int, default 20

    Returns
    -------
    float or None
        The token-weighted mean coherence of the topics (``coherence_npmi`` of ``summary.json``), or
        None without documents.
    """
    run_dir = Path(run_dir)
    K, V = probs.shape
    words = np.asarray(vocab if vocab is not None else [str(v) for v in range(V)], dtype=object)
    order = np.argsort(-usage, kind="stable")
    n = min(int(n_words), V)
    top = np.argsort(-probs, axis=1, kind="stable")[:, :n]
    coherence = np.full(K, np.nan) if store is None else npmi_coherence(
        probs, (block.csr() for _, block in store.iter_blocks()), top_n=N_COHERENCE)
    rows, lines = [], []
    share = usage / max(float(usage.sum()), 1e-300)
    for k in order:
        for rank, v in enumerate(top[k], start=1):
            rows.append((int(uids[k]), rank, words[v], float(probs[k, v]), float(coherence[k])))
        lines.append(f"topic {int(uids[k])} ({100 * share[k]:.1f} % of tokens, NPMI {coherence[k]:.3f}): "
                     + " ".join(words[top[k]]))
    import pandas as pd  # only when a topic run ends (every command imports this module)

    with replacing(run_dir / "topics.csv") as tmp:
        pd.DataFrame(rows, columns=["topic", "rank", "word", "probability", "coherence_npmi"]).to_csv(tmp, index=False)
    write_text(run_dir / "topics.txt", "\n".join(lines) + "\n")
    return None if store is None else weighted_mean(coherence, usage)


def write_doc_topics(path, proportions: np.ndarray, uids: np.ndarray) -> None:
    """``doc_topics.h5``: the (D, K) proportions E[π_d] and the topic uids, written atomically."""
    write_atomic(Path(path), {"proportions": proportions, "uids": np.asarray(uids, dtype=np.int64)})
