"""Topic coherence in a run's outputs: raw text in, NPMI per topic in topics.csv, its token-weighted mean in
summary.json."""
import json

import numpy as np
import pandas as pd
import pytest

from bnpvi.data.convert import convert
from bnpvi.data.store import BatchStore
from bnpvi.learn import runner
from bnpvi.metrics import npmi_coherence

GROUPS = [["cat", "dog", "horse", "cow", "sheep", "goat"], ["red", "green", "blue", "yellow", "purple", "brown"],
          ["apple", "pear", "plum", "cherry", "grape", "melon"]]


@pytest.fixture
def text_corpus(tmp_path):
    """120 lines, each mostly the words of one of three groups, with stop words between them."""
    rng = np.random.default_rng(0)
    lines = []
    for d in range(120):
        main, other = GROUPS[d % 3], GROUPS[(d + 1) % 3]
        words = list(rng.choice(main, size=8)) + list(rng.choice(other, size=1)) + ["the", "and", "of"]
        lines.append(" ".join(rng.permutation(words)))
    (tmp_path / "docs.txt").write_text("\n".join(lines) + "\n")
    return convert(tmp_path / "docs.txt", tmp_path / "docs.h5", text=True, stop_words="english", n_batches=2)


def test_topic_runs_report_npmi_coherence(compose_cfg, tmp_path, text_corpus):
    cfg = compose_cfg("model=lda", "obs=mult", "data=hdf5", f"data.path={text_corpus}", "alg=memo", "init.K=3",
                      "alg.n_laps=15", "alg.converge_thr=-1", "moves=[]", "seed=1")
    summary = runner.train(cfg, tmp_path / "run")
    topics = pd.read_csv(tmp_path / "run" / "topics.csv")
    per_topic = topics.groupby("topic", sort=False)["coherence_npmi"].first()
    assert topics.groupby("topic")["coherence_npmi"].nunique().eq(1).all()  # one value per topic
    with BatchStore.open(text_corpus) as store:
        vocab = store.vocab()
        documents = [batch.csr() for _, batch in store.iter_blocks()]
    index = {word: i for i, word in enumerate(vocab)}
    top = np.array([[index[w] for w in group.sort_values("rank")["word"][:10]]
                    for _, group in topics.groupby("topic", sort=False)])
    np.testing.assert_allclose(per_topic.to_numpy(), npmi_coherence(top, documents), rtol=1e-12)
    usage = dict(zip(summary["uids"], summary["counts"]))
    weights = np.array([usage[uid] for uid in per_topic.index])
    assert summary["coherence_npmi"] == pytest.approx(np.dot(per_topic.to_numpy(), weights) / weights.sum())
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["coherence_npmi"] == summary["coherence_npmi"]
    assert "NPMI" in (tmp_path / "run" / "topics.txt").read_text()
