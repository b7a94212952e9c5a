"""Births on data that defeat naive births: from K = 1, every seed reaches the ELBO of an abundant start.

(a) 48-D points from 12 full-covariance clusters of 100-300 points: a birth of 8 fresh
clusters pays for all 8 unless its cleanup keeps only what the data support.
(b) 6,000 documents of 6-16 tokens from 10 topics over 3,000 words: the first birth must
split the whole corpus, and a cluster that absorbs the ambiguous documents of every
topic must be deleted as a whole.
"""
import numpy as np
import pytest

from bnpvi.data.generate import gaussian_clusters, topic_documents
from bnpvi.data.store import write_documents, write_points
from bnpvi.learn import runner

SEEDS = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def data_sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("births")
    X, labels = gaussian_clusters(seed=0)
    write_points(root / "points.h5", X, labels=labels, batches_fixed=False)
    word_ids, word_counts, doc_range, topics = topic_documents(seed=0)
    write_documents(root / "docs.h5", word_ids, word_counts, doc_range, 3000, labels=topics, batches_fixed=False)
    return {"points": (root / "points.h5", []), "docs": (root / "docs.h5", ["obs=mult"])}


def final(compose_cfg, tmp_path, data, start, seed):
    path, extra = data
    args = ["init.K=1"] if start == 1 else ["init.K=50", "moves=[merge,delete]"]
    cfg = compose_cfg("data=hdf5", f"data.path={path}", "alg.n_batches=5", f"seed={seed}", *extra, *args)
    summary = runner.train(cfg, tmp_path / f"{start}_{seed}")
    return summary["elbo"] / summary["n_atoms"], summary["K"]


def test_points_from_one_cluster_reach_the_best_abundant_start(compose_cfg, tmp_path, data_sets):
    best = max(final(compose_cfg, tmp_path, data_sets["points"], 50, seed)[0] for seed in SEEDS)
    for seed in SEEDS:
        elbo, K = final(compose_cfg, tmp_path, data_sets["points"], 1, seed)
        assert elbo > best - 0.1, (seed, elbo, best, K)


def test_documents_from_one_cluster_find_the_ten_topics(compose_cfg, tmp_path, data_sets):
    assert [final(compose_cfg, tmp_path, data_sets["docs"], 1, seed)[1] for seed in SEEDS] == [10] * 5


@pytest.mark.slow
@pytest.mark.xfail(reason="open target of births on short documents: seeds 2, 4 and 5 end 0.15-0.6 nats per "
                          "document below the best K = 50 start, in clusters that keep a few documents of other "
                          "topics", strict=False)
def test_documents_from_one_cluster_reach_the_best_abundant_start(compose_cfg, tmp_path, data_sets):
    best = max(final(compose_cfg, tmp_path, data_sets["docs"], 50, seed)[0] for seed in SEEDS)
    gaps = [best - final(compose_cfg, tmp_path, data_sets["docs"], 1, seed)[0] for seed in SEEDS]
    assert np.max(gaps) < 0.1, gaps
