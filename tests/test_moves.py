"""Birth, merge and delete moves: exact gains against brute force, and whole runs with moves."""
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from omegaconf import OmegaConf
from scipy.special import softmax

from bnpvi.alloc import DPMixAlloc
from bnpvi.config import BirthConfig
from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.data.store import BatchStore, write_points
from bnpvi.learn import runner
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.model import MixtureModel
from bnpvi.moves.birth import seed_birth, split_rows, transfer_stats
from bnpvi.moves.delete import delete_proposal_stats, with_rows
from bnpvi.moves.merge import merge_gain, merge_scores
from bnpvi.obs import make_obs
from bnpvi.stats import SuffStats
from bnpvi.stats.resp import Responsibilities

FAMILIES = ["gauss", "diag_gauss", "zm_gauss", "mult", "bern"]


def obs_cfg(name):
    return OmegaConf.create({"name": name, "sF": 0.5, "prior_cov": "diag", "nu": None, "kappa": 1e-4, "mean": None,
                             "lam": 0.1, "lam1": 0.1, "lam0": 0.3})


def four_clusters(n=800, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0, 0.0], [4.0, 4.0, 0.0], [-4.0, 3.0, 2.0], [1.0, -4.0, -3.0]])
    labels = rng.integers(0, 4, size=n)
    return centers[labels] + rng.normal(size=(n, 3)), labels


def family_batch(family):
    """Data from 4 clusters in the family's own kind: points, binary vectors or documents."""
    X, labels = four_clusters()
    if family == "bern":
        rng = np.random.default_rng(5)
        protos = rng.random((4, 12)) < 0.5
        return PointBatch(((protos[labels] ^ (rng.random((X.shape[0], 12)) < 0.1))).astype(np.float64))
    if family == "mult":
        rng = np.random.default_rng(6)
        topics = rng.dirichlet(np.full(20, 0.3), size=4)
        docs = np.stack([rng.multinomial(rng.integers(5, 40), topics[z]) for z in labels]).astype(np.float64)
        X = sp.csr_matrix(docs)
        return WordCountBatch(X.indices.astype(np.int32), X.data, X.indptr.astype(np.int64), 20)
    return PointBatch(X)


def fitted(family, K=6, iters=5):
    """A model after a few full-VB steps on one batch, with the batch's r and stats."""
    batch = family_batch(family)
    moments = _moments(batch.X) if isinstance(batch, PointBatch) else None
    obs = make_obs(obs_cfg(family), batch.D, moments)
    rng = np.random.default_rng(1)
    resp = np.zeros((batch.n_atoms, K))
    resp[np.arange(batch.n_atoms), rng.integers(0, K, batch.n_atoms)] = 1.0
    model = MixtureModel(DPMixAlloc(2.0), obs, brute_stats(obs, batch, resp))
    for _ in range(iters):
        model.set_globals(model.summarize(batch, model.local_step(batch)))
    log_lik = model.expected_log_lik(batch)
    r = Responsibilities.from_weights(log_lik, model.log_pi)
    return model, batch, log_lik, r


def _moments(X):
    from bnpvi.obs.base import DataMoments
    return DataMoments(X.shape[0], X.mean(axis=0), np.cov(X.T, bias=True))


def brute_stats(obs, batch, r):
    """Summaries straight from responsibilities, entropy as −Σ r ln r with 0 ln 0 = 0."""
    r = np.ascontiguousarray(r)
    H = -np.sum(np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0), axis=0)
    fields = {"N": r.sum(axis=0), "H": H}
    fields.update(obs.summarize(batch, r))
    return SuffStats(fields, {"n_atoms": batch.n_atoms})


def assert_gain(predicted, brute):
    assert predicted == pytest.approx(brute, rel=1e-6, abs=1e-6 * max(1.0, abs(brute)))


@pytest.mark.parametrize("family", FAMILIES)
def test_merge_gain_equals_brute_force_for_every_pair(family):
    model, batch, _, resp = fitted(family)
    r = resp.values
    stats = brute_stats(model.obs, batch, r)
    base = model.elbo(stats)
    pairs = np.array([(a, b) for a in range(r.shape[1]) for b in range(a + 1, r.shape[1])])
    scores = merge_scores(model, stats, pairs)
    entropies = resp.pair_entropy(pairs)
    for (a, b), score, h in zip(pairs, scores, entropies):
        merged = np.delete(r, b, axis=1)
        merged[:, a] += r[:, b]
        brute = model.elbo(brute_stats(model.obs, batch, merged)) - base
        predicted = merge_gain(model, stats, a, b, h)
        assert_gain(predicted, brute)
        assert score >= predicted - 1e-9 * abs(base)  # the m-score bounds the gain from above


@pytest.mark.parametrize("family", FAMILIES)
def test_delete_gain_equals_brute_force(family):
    model, batch, log_lik, resp = fitted(family)
    r = resp.values
    stats = brute_stats(model.obs, batch, r)
    K = r.shape[1]
    for target, absorb in [(K - 1, np.arange(K - 1)), (2, np.array([0, 4])), (0, np.array([1, 3, 5]))]:
        proposal = delete_proposal_stats(model, batch, log_lik, model.log_pi, resp, target, absorb)
        predicted = model.elbo(with_rows(stats, absorb, proposal, target)) - model.elbo(stats)
        new = r.copy()
        mass = r[:, target] + r[:, absorb].sum(axis=1)
        new[:, absorb] = mass[:, None] * softmax(log_lik[:, absorb] + model.log_pi[absorb], axis=1)
        new = np.delete(new, target, axis=1)
        brute = model.elbo(brute_stats(model.obs, batch, new)) - model.elbo(stats)
        assert_gain(predicted, brute)


@pytest.mark.parametrize("family", FAMILIES)
def test_birth_gain_equals_brute_force(family):
    model, batch, _, resp = fitted(family, K=2)
    r = resp.values
    stats = brute_stats(model.obs, batch, r)
    target = int(np.argmax(r.sum(axis=0)))
    seed = seed_birth(model, batch, resp, target, OmegaConf.structured(BirthConfig), np.random.default_rng(0), 10)
    assert seed is not None and seed.K >= 2
    proposal = transfer_stats(model, batch, r[:, target], seed)
    predicted = model.elbo(split_rows(stats, target, proposal)) - model.elbo(stats)
    post = model.obs.posterior(seed.N, seed.obs_fields())
    log_w = np.log((seed.N + 1.0 / seed.K) / (seed.N.sum() + 1.0))
    share = softmax(model.obs.expected_log_lik(post, batch) + log_w, axis=1)
    new = np.concatenate([r, r[:, [target]] * share], axis=1)
    new[:, target] = 0.0
    brute = model.elbo(brute_stats(model.obs, batch, new)) - model.elbo(stats)
    assert_gain(predicted, brute)
    if family != "zm_gauss":  # zero-mean clusters cannot tell shifted blobs apart
        assert predicted > 0  # 2 clusters cannot explain 4: splitting the biggest helps


# ------------------------------------------------------------ whole runs


def big_clusters(summary, frac=0.01):
    counts = np.asarray(summary["counts"])
    return int(np.sum(counts > frac * counts.sum()))


@pytest.mark.parametrize("seed", range(10))
def test_from_one_cluster_births_find_the_eight_toy_clusters(compose_cfg, tmp_path, seed):
    cfg = compose_cfg("init.K=1", "moves=[birth,merge,delete]", f"seed={seed}")
    summary = runner.train(cfg, tmp_path / "run")
    assert big_clusters(summary) == 8
    assert summary["ari"] > 0.95
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert np.all(np.diff(trace["elbo"]) >= -1e-9 * np.abs(trace["elbo"][1:]))
    moves = pd.read_csv(tmp_path / "run" / "moves.csv")
    for move in ("birth", "merge", "delete"):
        assert trace[f"{move}_tried"].sum() == (moves["move"] == move).sum()
        assert trace[f"{move}_accepted"].sum() == moves[(moves["move"] == move) & moves["accepted"]].shape[0]


def test_from_fifty_clusters_merges_and_deletes_reach_eight(compose_cfg, tmp_path):
    cfg = compose_cfg("init.K=50", "moves=[merge,delete]")
    summary = runner.train(cfg, tmp_path / "run")
    assert summary["K"] == 8
    assert summary["ari"] > 0.95


def test_accepted_moves_raise_the_recomputed_elbo_by_the_predicted_gain(tmp_path, monkeypatch):
    """One batch: r of every atom is known, so the post-move summaries can be recomputed from scratch."""
    X, _ = four_clusters(n=600, seed=3)
    write_points(tmp_path / "d.h5", X, n_batches=1)
    moves_cfg = OmegaConf.create({"merge": {"start_lap": 2, "max_pairs": 20, "max_per_cluster": 5, "retry_change": 0.1},
                                  "delete": None, "birth": None})
    with BatchStore.open(tmp_path / "d.h5") as store:
        obs = make_obs(obs_cfg("gauss"), 3, store.moments())
        rng = np.random.default_rng(0)
        init = OmegaConf.create({"name": "kmeanspp", "K": 12, "n_samples": 1000, "n_trials": None, "kmeans_iters": 0})
        model = MixtureModel(DPMixAlloc(2.0), obs, initial_stats(obs, store, init, rng))
        alg = MemoizedVB(model, store, {}, rng, moves=moves_cfg)
        seen = {}
        original_visit = MemoizedVB.visit

        def visit(self, b, batch):
            seen["uids"] = self.model.uids.copy()
            seen["resp"] = self.model.local_step(batch).values.copy()
            original_visit(self, b, batch)
        monkeypatch.setattr(MemoizedVB, "visit", visit)
        checked = 0
        for _ in range(6):
            result = None
            while result is None:
                result = alg.step()
            events = [e for e in alg.moves.events if e.lap == result.lap and e.accepted]
            if not events:
                continue
            # rebuild the post-move responsibilities from the lap's r, following the accepted merges
            r = seen["resp"]
            cols = {int(u): r[:, i] for i, u in enumerate(seen["uids"])}
            for e in events:
                ua, ub = (int(x) for x in e.target.split("+"))
                cols[ua] = cols[ua] + cols.pop(ub)
            new = np.stack([cols[int(u)] for u in model.uids], axis=1)
            recomputed = model.elbo(brute_stats(obs, store.read_batch(0), new))
            assert recomputed == pytest.approx(result.elbo, rel=1e-9)
            checked += len(events)
        assert checked > 0


def test_a_rejected_merge_leaves_the_state_unchanged(tmp_path, monkeypatch):
    X, labels = four_clusters(n=600, seed=4)
    write_points(tmp_path / "d.h5", X, n_batches=3)

    def lap_three(forced):
        with BatchStore.open(tmp_path / "d.h5") as store:
            obs = make_obs(obs_cfg("gauss"), 3, store.moments())
            rng = np.random.default_rng(0)
            init = OmegaConf.create({"name": "kmeanspp", "K": 4, "n_samples": 1000, "n_trials": None, "kmeans_iters": 0})
            model = MixtureModel(DPMixAlloc(2.0), obs, initial_stats(obs, store, init, rng))
            moves = OmegaConf.create({"merge": {"start_lap": 3, "max_pairs": 1, "max_per_cluster": 1, "retry_change": 0.1},
                                      "birth": None, "delete": None})
            alg = MemoizedVB(model, store, {}, rng, moves=moves if forced else None)
            if forced:  # plan a pair of two clearly different clusters
                monkeypatch.setattr("bnpvi.moves.schedule.plan_merges",
                                    lambda *a, **k: np.array([[0, 1]], dtype=np.int64))
            while alg.lap < 3:
                alg.step()
            events = alg.moves.events if forced else []
            return alg.aggregate, [c for c in alg.caches], model.uids.copy(), events

    agg_a, caches_a, uids_a, events = lap_three(True)
    agg_b, caches_b, uids_b, _ = lap_three(False)
    assert [e.accepted for e in events if e.move == "merge"] == [False]
    assert agg_a.allclose(agg_b, rtol=0, atol=0)
    assert all(a.allclose(b, rtol=0, atol=0) for a, b in zip(caches_a, caches_b))
    np.testing.assert_array_equal(uids_a, uids_b)
