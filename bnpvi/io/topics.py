"""What a topic-model run writes besides the model file: its topics and the documents' topic proportions.

* ``topics.csv``: ``topic,rank,word,probability`` (every topic's ``n_words`` most probable words,
  E[φ_kv] = λ̂_kv / Σ_w λ̂_kw), topics listed most used first;
* ``topics.txt``: one line per topic, most used first: its id, its share of the tokens, its top words;
* ``doc_topics.h5``: E[π_d] of every training document (``proportions`` (D, K), columns in the
  model file's topic order, with the topic ``uids``), from a local step under the final globals.

Words are the vocabulary's when the data file holds one, else the word ids.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bnpvi.io.h5tree import write_atomic

N_WORDS = 20
"""Words listed per topic."""


def topic_word_probs(post: dict) -> np.ndarray:
    """E[φ_kv] (K, V) from the multinomial posterior's λ̂."""
    lam = np.asarray(post["lam"], dtype=np.float64)
    return lam / lam.sum(axis=1, keepdims=True)


def write_topics(run_dir, probs: np.ndarray, usage: np.ndarray, uids: np.ndarray, vocab=None,
                 n_words: int = N_WORDS) -> None:
    """``topics.csv`` and ``topics.txt`` for topic-word probabilities ``probs`` (K, V), most used topic first."""
    run_dir = Path(run_dir)
    K, V = probs.shape
    words = np.asarray(vocab if vocab is not None else [str(v) for v in range(V)], dtype=object)
    order = np.argsort(-usage, kind="stable")
    n = min(int(n_words), V)
    top = np.argsort(-probs, axis=1, kind="stable")[:, :n]
    rows, lines = [], []
    share = usage / max(float(usage.sum()), 1e-300)
    for k in order:
        for rank, v in enumerate(top[k], start=1):
            rows.append((int(uids[k]), rank, words[v], float(probs[k, v])))
        lines.append(f"topic {int(uids[k])} ({100 * share[k]:.1f} % of tokens): " + " ".join(words[top[k]]))
    pd.DataFrame(rows, columns=["topic", "rank", "word", "probability"]).to_csv(run_dir / "topics.csv", index=False)
    (run_dir / "topics.txt").write_text("\n".join(lines) + "\n")


def write_doc_topics(path, proportions: np.ndarray, uids: np.ndarray) -> None:
    """``doc_topics.h5``: the (D, K) proportions E[π_d] and the topic uids, written atomically."""
    write_atomic(Path(path), {"proportions": proportions, "uids": np.asarray(uids, dtype=np.int64)})
