"""Sub-cluster splits (bnpvi.moves.split): the proposal is the brute-force split of its cluster, its gain is
exact, the sub-summaries keep the memo identity, a merge keeps its pair, runs resume bit for bit, and from
one cluster K doubles per lap on clusters that halve evenly."""
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from scipy.special import softmax

from bnpvi.data.store import write_points
from bnpvi.learn.memo import MemoizedVB
from bnpvi.moves.base import FAINT_MASS, Edit
from bnpvi.moves.birth import fresh_weights, seed_birth, split
from bnpvi.moves.split import SEEDING, SplitMove, SubclusterPlan
from setups import (DELETE, FAMILIES, MERGE, assert_resume_is_exact, brute_stats, dense_resp, elbo_of, fitted,
                    four_clusters, memo_run)

SPLIT = {"start_lap": 2, "Kmax": 200}


def split_share(model, r_target, batch, N, fields):
    """s_n of the sub-clusters (N, fields): softmax_j(E ln p(x_n | φ̃_j) + ln π̃_j); an atom holding at most
    FAINT_MASS of the cluster gives it all to the larger sub-cluster."""
    share = softmax(model.obs.expected_log_lik(model.obs.posterior(N, fields), batch) + fresh_weights(N), axis=1)
    faint = (r_target > 0) & (r_target <= FAINT_MASS)
    share[faint] = 0.0
    share[faint, int(np.argmax(N))] = 1.0
    return share


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_split_proposal_is_the_brute_force_split_of_its_cluster(family, sparse_L):
    """The tracked sub-summaries of a batch make the split whose summaries, and so whose ELBO gain, are those of
    r_nk s_n straight from the definition; a seeded proposal divides exactly the cluster's mass."""
    model, batch, globals_, log_lik, local, stats = fitted(family, K=3, sparse_L=sparse_L)
    r = dense_resp(local.resp)
    target = int(np.argmax(r.sum(axis=0)))
    sub = seed_birth(model, batch, r[:, target].copy(), SEEDING, np.random.default_rng(0), 2)
    assert sub is not None
    move = SplitMove(OmegaConf.create(SPLIT))
    subs = [sub if k == target else None for k in range(stats.K)]
    tracked = move.track(model, globals_, batch, log_lik, local, SubclusterPlan(subs, 50, 3), stats=stats)
    part, sample = tracked[target]
    share = split_share(model, r[:, target], batch, *sub)
    new = np.concatenate([r, r[:, [target]] * share], axis=1)
    new[:, target] = 0.0
    expected = brute_stats(model, batch, new)
    candidate = split(stats, target, part)
    scale = max(1.0, float(np.abs(stats.N).max()))
    for name in ("N", "H", *model.obs_fields):
        np.testing.assert_allclose(candidate[name], expected[name], rtol=1e-9,
                                   atol=1e-10 * scale * max(1.0, float(np.abs(expected[name]).max())), err_msg=name)
    brute = elbo_of(model, expected) - elbo_of(model, stats)
    assert elbo_of(model, candidate) - elbo_of(model, stats) == pytest.approx(brute, rel=1e-7, abs=1e-6)
    for k, (made, sample) in enumerate(tracked):  # each cluster's sample: its atoms at r_nk, or at r_nk s_n
        rows = np.flatnonzero(r[:, k] > SEEDING.eps)
        assert sample.atoms.n_atoms == min(rows.size, 50)
        assert (made is None) == (k != target)
        drawn = np.array([np.flatnonzero((atom_rows(batch) == row).all(axis=1))[0] for row in atom_rows(sample.atoms)])
        weights = r[drawn, k][:, None] * (share[drawn] if k == target else 1.0)
        np.testing.assert_allclose(sample.weights, weights, rtol=1e-10, atol=1e-14)


def atom_rows(batch) -> np.ndarray:
    """Each atom of a batch as one dense row (points; documents by their counts)."""
    return batch.X if hasattr(batch, "X") else batch.csr().toarray()


def split_of(alg) -> SplitMove:
    return next(m for m in alg.moves.moves if m.name == "split")


def test_sub_summaries_keep_the_memo_identity_and_accepted_splits_gain_exactly_what_they_say(tmp_path, monkeypatch):
    """After every batch, each cluster's sub-summaries are the sum of their parts, and every part made since the
    cluster last changed divides exactly that batch's cached summaries of the cluster. Each accepted split raises
    the ELBO of the caches' sum, recomputed from scratch, by its logged gain."""
    X, _ = four_clusters(n=1200, seed=3)
    write_points(tmp_path / "d.h5", X, n_batches=3)
    moves = OmegaConf.create({"split": SPLIT, "merge": MERGE, "delete": DELETE})
    store, alg = memo_run(tmp_path / "d.h5", 1, moves)
    gains = []
    original = MemoizedVB.apply

    def apply(self, edit):
        before = self.elbo()
        original(self, edit)
        if len(edit.sources) >= 2 and edit.sources[-2:] == [[], []]:  # a split: the target emptied, two appended
            gains.append(elbo_of(self.model, self.cache_total()) - before)

    monkeypatch.setattr(MemoizedVB, "apply", apply)
    checked_parts = 0
    for _ in range(6):
        result = None
        while result is None:
            result = alg.step()
            move = split_of(alg)
            for uid, subs in move.subs.items():
                if not subs.parts:  # seeded at the last lap's end, not tracked yet
                    continue
                total = subs.parts[sorted(subs.parts)[0]]
                for b in sorted(subs.parts)[1:]:
                    total = total + subs.parts[b]
                for name in ("N", "H", *alg.model.obs_fields):
                    np.testing.assert_allclose(subs.total[name], total[name], rtol=1e-10, atol=1e-9)
                k = int(alg.ids.positions([uid])[0])
                for b in subs.current:
                    cache = alg.caches[b].pad_to(alg.globals.K)
                    part = subs.parts[b]
                    np.testing.assert_allclose(part.N.sum(), cache.N[k], rtol=1e-9, atol=1e-9)
                    for name in alg.model.obs_fields:
                        np.testing.assert_allclose(part[name].sum(axis=0), cache[name][k], rtol=1e-9, atol=1e-8)
                    checked_parts += 1
        assert alg.aggregate.allclose(alg.cache_total(), rtol=1e-9, atol=1e-7)
        assert elbo_of(alg.model, alg.cache_total()) == pytest.approx(result.elbo, rel=1e-9)
    logged = [e.gain for e in alg.moves.events if e.move == "split" and e.accepted]
    store.close()
    assert len(logged) >= 2 and checked_parts > 0
    np.testing.assert_allclose(gains, logged, rtol=1e-7, atol=1e-6)


def test_a_merge_keeps_its_pair_and_the_split_of_the_merged_cluster_restores_them(tmp_path):
    """The merged cluster's sub-clusters are the two merged clusters, exactly, and valid at once; its split is the
    state before the merge (the pair's summaries, their entropies included)."""
    X, _ = four_clusters(n=900, seed=1)
    write_points(tmp_path / "d.h5", X, n_batches=3)
    store, alg = memo_run(tmp_path / "d.h5", 4, OmegaConf.create({"split": SPLIT}))
    while alg.lap < 2:
        alg.step()
    before = alg.globals.stats
    a, c = 0, 2
    ua, uc = (int(u) for u in alg.ids.uids[[a, c]])
    K = before.K
    sources = [[a, c] if k == a else [k] for k in range(K) if k != c]
    merged_H = {"H": {sources.index([a, c]): 0.0}}  # any merged entropy: the sub-clusters keep their own

    def rewrite(b, cache):
        return cache.remap(sources, merged_H)

    stats = before.remap(sources, merged_H)
    alg.apply(Edit(sources, rewrite, alg.model.global_step(stats), changed=frozenset({ua, uc})))
    subs = split_of(alg).subs[ua]
    assert subs.current == {0, 1, 2}
    pair = before.remap([[a], [c]])
    for name in ("N", "H", *alg.model.obs_fields):
        np.testing.assert_allclose(subs.total[name], pair[name], rtol=1e-12, atol=1e-9)
    m = int(alg.ids.positions([ua])[0])
    restored = split(alg.globals.stats, m, subs.total)
    n = len(sources)  # the pair was appended after the merged clusters, a first: put every cluster back in place
    back = [[n] if k == a else [n + 1] if k == c else [sources.index([k])] for k in range(K)]
    restored = restored.remap(back)
    for name in ("N", "H", *alg.model.obs_fields):
        np.testing.assert_allclose(restored[name], before[name], rtol=1e-12, atol=1e-9, err_msg=name)
    assert elbo_of(alg.model, restored) == pytest.approx(elbo_of(alg.model, before), rel=1e-12)
    store.close()


def hypercube_points(m=3, per=400, spread=12.0, seed=0):
    """2^m round clusters at the corners of a cube of side ``spread``: every 2-means cut halves a set of corners."""
    rng = np.random.default_rng(seed)
    corners = spread * np.array([[(c >> i) & 1 for i in range(m)] for c in range(2 ** m)], dtype=np.float64)
    return np.concatenate([c + rng.normal(size=(per, m)) for c in corners])


def test_from_one_cluster_K_doubles_every_lap_on_clusters_that_halve_evenly(compose_cfg, tmp_path):
    """Lap 2 samples the one cluster and seeds its sub-clusters, lap 3 accepts its split and seeds each child's
    sub-clusters from its part of the sample: from there K doubles every lap, though each batch holds only half of
    the corners (sorted data), and the run stops 2 laps after the last split at the best state there is."""
    X = hypercube_points()
    write_points(tmp_path / "cube.h5", X, n_batches=2)
    cfg = compose_cfg("data=hdf5", f"data.path={tmp_path / 'cube.h5'}", "moves=[split]", "init.K=1", "seed=4",
                      "alg.n_laps=20", "plots=false")
    from bnpvi.learn import runner
    runner.train(cfg, tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    np.testing.assert_array_equal(trace["K"].to_numpy(), [1, 1, 2, 4, 8, 8, 8])
    assert trace["split_accepted"].to_numpy().tolist() == [0, 0, 1, 2, 4, 0, 0]
    truth = compose_cfg("data=hdf5", f"data.path={tmp_path / 'cube.h5'}", "moves=[]", "init.K=8", "seed=1",
                        "plots=false")
    runner.train(truth, tmp_path / "truth")
    best = pd.read_csv(tmp_path / "truth" / "trace.csv")["elbo"].iloc[-1]
    assert trace["elbo"].iloc[-1] == pytest.approx(best, rel=1e-9)


def test_resume_with_sub_clusters_in_flight_is_exact(compose_cfg, tmp_path):
    cfg = compose_cfg("moves=[split,merge,delete]", "init.K=1", "alg.n_laps=5", "alg.converge_thr=-1",
                      "checkpoint_every=1", "seed=7", "plots=false")
    summary, trace = assert_resume_is_exact(cfg, tmp_path, lap=3)
    assert trace["split_accepted"].sum() > 0
