"""Births on data that defeat naive births: from K = 1, every seed reaches the ELBO of an abundant start.

(a) 48-D points from 12 full-covariance clusters of 100-300 points: a birth of 8 fresh
clusters pays for all 8 unless its cleanup keeps only what the data support.
(b) 6,000 documents of 6-16 tokens from 10 topics over 3,000 words: the first birth must
split the whole corpus, a cluster that absorbs the ambiguous documents of every topic
must be deleted as a whole, and the documents that births leave in another topic's
cluster, held there by their own rare words, must be reassigned one by one.
"""
import numpy as np
import pytest

from bnpvi.data.generate import gaussian_clusters, topic_documents
from bnpvi.data.store import write_documents, write_points
from bnpvi.learn import runner
from setups import BIRTH, compose, moments, obs_cfg

SEEDS = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def data_sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("births")
    X, labels = gaussian_clusters(seed=0)
    write_points(root / "points.h5", X, labels=labels, batches_fixed=False)
    word_ids, word_counts, doc_range, topics = topic_documents(seed=0)
    write_documents(root / "docs.h5", word_ids, word_counts, doc_range, 3000, labels=topics, batches_fixed=False)
    return {"points": (root / "points.h5", []), "docs": (root / "docs.h5", ["obs=mult"])}


def final(compose_cfg, tmp_path, data, start, seed, big=False):
    """ELBO per atom and K of one run (and, with ``big``, its clusters holding more than 1 % of the atoms)."""
    path, extra = data
    args = ["init.K=1"] if start == 1 else ["init.K=50", "moves=[merge,delete]"]
    cfg = compose_cfg("data=hdf5", f"data.path={path}", "alg.n_batches=5", f"seed={seed}", *extra, *args)
    summary = runner.train(cfg, tmp_path / f"{start}_{seed}")
    out = (summary["elbo"] / summary["n_atoms"], summary["K"])
    if big:
        out += (int(np.sum(np.asarray(summary["counts"]) > 0.01 * summary["n_atoms"])),)
    return out


@pytest.mark.slow  # 10 runs, ~30 s; the default suite keeps the toy's births from one cluster (test_moves)
def test_points_from_one_cluster_reach_the_best_abundant_start(compose_cfg, tmp_path, data_sets):
    best = max(final(compose_cfg, tmp_path, data_sets["points"], 50, seed)[0] for seed in SEEDS)
    for seed in SEEDS:
        elbo, K = final(compose_cfg, tmp_path, data_sets["points"], 1, seed)
        assert elbo > best - 0.1, (seed, elbo, best, K)


def document_runs_of(root, data, seeds):
    """(ELBO per document, K, clusters holding more than 1 % of the documents) of ``seeds`` from K = 1
    (alg=memo's default moves) and from K = 50 with merges and deletes."""
    return {start: [final(compose, root, data, start, seed, big=True) for seed in seeds] for start in (1, 50)}


@pytest.fixture(scope="module")
def document_runs(tmp_path_factory, data_sets):
    """Seeds 1 and 2 (``document_runs_of``)."""
    return document_runs_of(tmp_path_factory.mktemp("document_runs"), data_sets["docs"], SEEDS[:2])


def check_documents(runs):
    """Every seed from K = 1 ends with the 10 topics as its clusters of more than 1 % of the documents (the
    ELBO may keep one or two more clusters of a few dozen documents: deleting them loses 100-200 nats,
    exactly), and within 0.1 nats per document of the best run from K = 50."""
    assert [big for _, _, big in runs[1]] == [10] * len(runs[1]), runs[1]
    assert all(K <= 12 for _, K, _ in runs[1]), runs[1]
    best = max(elbo for elbo, _, _ in runs[50])
    gaps = [best - elbo for elbo, _, _ in runs[1]]
    assert np.max(gaps) < 0.1, gaps


@pytest.mark.slow  # 4 runs, ~40 s; the default suite keeps documents' births from one cluster (test_discrete_runs),
# deletes (test_moves) and reassignments (test_reassign)
def test_documents_from_one_cluster_find_the_ten_topics_and_reach_the_abundant_start(document_runs):
    check_documents(document_runs)


@pytest.mark.slow  # 6 runs, ~20 s
def test_documents_from_one_cluster_find_the_ten_topics_with_more_seeds(tmp_path, data_sets):
    check_documents(document_runs_of(tmp_path, data_sets["docs"], SEEDS[2:]))


def test_a_cluster_never_proposed_asks_for_pieces_in_proportion_to_its_share():
    """J' = max(n_new, ⌈A · N_k / Σ N⌉) for clusters never proposed before; a cluster proposed before, and every
    cluster when the abundance A is 0, asks for n_new; null takes the model's own abundance."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from bnpvi.moves.birth import BirthMove

    run = SimpleNamespace(model=SimpleNamespace(alloc=SimpleNamespace(birth_abundance=100)),
                          globals=SimpleNamespace(stats=SimpleNamespace(N=np.array([60.0, 30.0, 10.0, 0.0]))),
                          ids=SimpleNamespace(uids=np.array([5, 6, 7, 8])))

    def counts(abundance, tried=()):
        move = BirthMove(OmegaConf.create(dict(BIRTH, abundance=abundance)))
        move.last_tried = {uid: 3 for uid in tried}
        return move.fresh_counts(run).tolist()
    assert counts(None) == [60, 30, 10, 8]
    assert counts(None, tried=[6]) == [60, 8, 10, 8]
    assert counts(20) == [12, 8, 8, 8]
    assert counts(0) == [8, 8, 8, 8]


def planted_groups(kind, rng):
    """A broad background and three tight groups of 15 atoms each: (batch, obs, the groups' atom sets)."""
    from bnpvi.data.batch import PointBatch, WordCountBatch
    from bnpvi.obs import make_obs

    n_back, groups = 300, [np.arange(300 + 15 * g, 315 + 15 * g) for g in range(3)]
    if kind == "gauss":
        X = rng.normal(0.0, 10.0, size=(345, 2))
        for g, members in enumerate(groups):
            X[members] = np.array([[-12.0, 5.0], [3.0, -9.0], [14.0, 14.0]])[g] + rng.normal(0.0, 0.05, (15, 2))
        batch = PointBatch(X)
        return batch, make_obs(obs_cfg("gauss"), 2, moments(X)), groups
    V, docs = 200, []
    for d in range(345):
        vocab = np.arange(V) if d < n_back else 50 + 4 * ((d - n_back) // 15) + np.arange(4)
        docs.append(np.unique(rng.choice(vocab, size=8), return_counts=True))
    ids = np.concatenate([w for w, _ in docs]).astype(np.int32)
    counts = np.concatenate([c for _, c in docs]).astype(np.float64)
    doc_range = np.concatenate([[0], np.cumsum([w.size for w, _ in docs])]).astype(np.int64)
    return WordCountBatch(ids, counts, doc_range, V), make_obs(obs_cfg("mult"), V, None), groups


@pytest.mark.parametrize("kind", ["gauss", "mult"])
def test_dense_seeding_finds_the_tight_groups_inside_a_broad_cluster(kind):
    """seeding=dense: the J − 1 tightest disjoint groups of group_size atoms become fresh clusters 1, 2, ...
    and every other atom stays in cluster 0, the rest of the target."""
    from bnpvi.moves.birth import dense_groups

    rng = np.random.default_rng(0)
    batch, obs, groups = planted_groups(kind, rng)
    labels = dense_groups(obs, batch, 4, 15, rng)
    found = sorted(sorted(np.flatnonzero(labels == g).tolist()) for g in range(1, labels.max() + 1))
    assert found == sorted(members.tolist() for members in groups)
    assert np.all(labels[:300] == 0)
    labels = dense_groups(obs, batch, 3, 15, rng)  # room for two groups: two of the three, whole
    planted = [members.tolist() for members in groups]
    assert labels.max() == 2 and all(np.flatnonzero(labels == g).tolist() in planted for g in (1, 2))


def test_dense_seeding_is_for_the_largest_cluster_after_a_failed_birth_on_odd_laps_only():
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from bnpvi.moves.birth import BirthMove

    run = SimpleNamespace(globals=SimpleNamespace(K=3, stats=SimpleNamespace(N=np.array([30.0, 60.0, 10.0]))),
                          ids=SimpleNamespace(uids=np.array([5, 6, 7])))

    def target(seeding, seed, failed=()):
        move = BirthMove(OmegaConf.create(dict(BIRTH, seeding=seeding)))
        for uid in failed:
            move.failures.record(uid, False, (1.0,))
        move.seed = seed
        return move.dense_target(run)
    assert target("dense", 3, failed=[6]) == 1
    assert target("dense", 4, failed=[6]) == -1  # even laps keep k-means
    assert target("dense", 3, failed=[5, 7]) == -1  # the largest cluster has not failed
    assert target("kmeans", 3, failed=[6]) == -1
