"""Birth, merge and delete moves: exact gains against brute force, exact cache rewrites, and whole runs with moves."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from bnpvi.data.store import write_points
from bnpvi.learn import runner
from bnpvi.learn.memo import MemoizedVB
from bnpvi.moves.base import alloc_part
from bnpvi.moves.birth import (FAINT_MASS, BirthMove, cleanup_order, grouped, level_value,
                               partitions_membership, seed_birth, split, transfer)
from bnpvi.moves.delete import DeleteMove
from bnpvi.moves.merge import MergeMove, _merged_data_term, merge_scores
from bnpvi.stats import ClusterIds
from setups import (BIRTH, DELETE, FAMILIES, MERGE, absorbed_columns, assert_gain, brute_stats, deleted_resp, dense_resp,
                    elbo_of, fitted, four_clusters, memo_run, moves_cfg, obs_cfg, proposal_share, settled_elbo)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_merge_gain_equals_brute_force_for_every_pair(family, sparse_L, temperature):
    model, batch, globals_, _, local, stats = fitted(family, sparse_L=sparse_L, temperature=temperature)
    r = dense_resp(local.resp)
    base = elbo_of(model, stats)
    pairs = np.array([(a, b) for a in range(r.shape[1]) for b in range(a + 1, r.shape[1])])
    scores = merge_scores(model, model.global_step(stats), pairs)
    tracked = MergeMove(OmegaConf.create(MERGE)).track(model, globals_, batch, None, local, pairs)
    for m, ((a, b), score) in enumerate(zip(pairs, scores)):
        merged = np.delete(r, b, axis=1)
        merged[:, a] += r[:, b]
        brute = elbo_of(model, brute_stats(model, batch, merged)) - base
        predicted = elbo_of(model, stats.merge(a, b, {"H": tracked["H"][m]})) - base
        assert_gain(predicted, brute)
        assert score >= predicted - 1e-9 * abs(base)  # the m-score bounds the gain from above


@pytest.mark.parametrize("family", FAMILIES)
def test_a_merge_candidate_scored_from_its_two_rows_and_the_allocation_summaries_is_the_merged_summaries(family):
    model, _, _, _, _, stats = fitted(family)
    for a, b in [(0, 1), (2, 5), (1, 4)]:
        merged = stats.merge(a, b, {"H": np.float64(stats["H"][a] + stats["H"][b] - 1.0)})
        assert _merged_data_term(model, stats, a, b) == model.data_terms(merged, [a])[0]
        part = alloc_part(model, stats).merge(a, b, {"H": merged["H"][a]})
        assert set(part.fields) == set(merged.fields) - set(model.obs_fields)
        assert model.alloc_value(part) == model.alloc_value(merged)


@pytest.mark.parametrize("family", FAMILIES)
def test_merged_log_marginal_equals_the_log_marginal_of_the_summed_summaries(family):
    """Every family's pair route (compiled for the Wishart families) against merging the statistics by hand."""
    model, _, _, _, _, stats = fitted(family, K=7)
    N = np.maximum(stats.N, 0.0)
    fields = stats.select(model.obs_fields)
    pairs = np.array([(a, b) for a in range(7) for b in range(a + 1, 7)])
    got = model.obs.merged_log_marginal(N, fields, pairs)
    for (a, b), value in zip(pairs, got):
        by_hand = model.obs.log_marginal(N[[a]] + N[[b]], {n: v[[a]] + v[[b]] for n, v in fields.items()})[0]
        assert value == pytest.approx(by_hand, rel=1e-12, abs=1e-9)


def test_merge_pairs_blocked_by_rejections_are_skipped_as_one_check_per_pair_skips_them():
    model, _, globals_, _, _, stats = fitted("gauss", K=8)
    globals_ = model.global_step(stats)
    uids = np.array([7, 3, 11, 0, 5, 9, 2, 4])
    run = SimpleNamespace(model=model, globals=globals_, ids=ClusterIds(uids))
    cfg = dict(MERGE, max_pairs=6, max_per_cluster=2)
    move = MergeMove(OmegaConf.create(cfg))
    N = stats.N
    move.failures.record((7, 0), False, (N[0], N[3]))  # blocked
    move.failures.record((11, 5), False, (N[2], N[4] * 1.5))  # one size changed since: not blocked
    move.failures.record((9, 0), False, (N[5], N[3]))  # on record as (b, a): pair (a, b) is not blocked
    move.failures.record((2, 4), False, (N[6], N[7]))  # blocked
    move.failures.record((3, 13), False, (N[1], 1.0))  # a cluster that no longer exists
    pairs = np.array([(i, j) for i in range(8) for j in range(i + 1, 8)])
    scores = merge_scores(model, globals_, pairs)
    expected, used = [], {}
    for m in np.argsort(-scores, kind="stable"):  # the pair-by-pair rule
        i, j = (int(x) for x in pairs[m])
        if scores[m] <= 0 or len(expected) >= cfg["max_pairs"]:
            break
        if used.get(i, 0) >= cfg["max_per_cluster"] or used.get(j, 0) >= cfg["max_per_cluster"]:
            continue
        if move.failures.blocked((uids[i], uids[j]), (N[i], N[j]), 1, cfg["retry_change"]):
            continue
        expected.append((i, j))
        used[i], used[j] = used.get(i, 0) + 1, used.get(j, 0) + 1
    blocked = move._blocked(pairs, uids, N, cfg["retry_change"])
    assert {tuple(p) for p in pairs[blocked]} == {(0, 3), (6, 7)}
    assert np.all(scores[blocked] > 0)  # both would be chosen but for their rejections
    np.testing.assert_array_equal(move._choose(run, set()), np.array(expected, dtype=np.intp).reshape(-1, 2))


@pytest.mark.parametrize("mass, loss, accepted", [(3e-6, 2e-6, True), (3e-6, 1.0, False), (0.5, 2e-6, False)])
def test_a_vanishing_cluster_is_deleted_first_unless_that_lowers_the_elbo_beyond_rounding(mass, loss, accepted):
    """Clusters of an abundant start that the data stop using shrink lap by lap (debian/short, K = 50: six
    clusters of 2e-6 documents each at lap 100, counted in K); their deletes lose a few 1e-6 nats. A cluster
    of less than VANISHING_MASS atoms is targeted before any other and removed unless its exact gain is below
    float noise; any other cluster still needs a gain."""
    model, _, _, _, _, stats = fitted("gauss", K=5)
    stats = stats.with_clusters([3], stats.remap([[3]]).scaled(mass / float(stats.N[3])))
    uids = np.array([3, 1, 4, 7, 9])
    current = -1.9e6
    applied = []
    run = SimpleNamespace(model=model, globals=model.global_step(stats),
                          ids=ClusterIds(uids), n_batches=1, lap=3, moves=SimpleNamespace(settled=False),
                          elbo=lambda: current, evaluate=lambda cand, sources: (current - loss, None),
                          apply=applied.append)
    move = DeleteMove(OmegaConf.create(dict(DELETE, max_per_lap=1, max_size_frac=0.5, absorb=2)))
    move.failures.record(7, False, (mass * 2.0,))  # tried before, at another size: still eligible
    move.proposals = [uids[[3, 0, 1]]]
    first = int(move._choose(run, set(), 2, 1)[0][0])
    assert (first == 7) == (mass < 0.01)  # otherwise the clusters never tried come first
    move.tracked = {0: [stats.remap([[0], [1]])]}
    schedule = SimpleNamespace(changed=set(), lap=3, event=lambda *a, **k: None)
    move.decide(run, schedule)
    assert bool(applied) == accepted and (7 in schedule.changed) == accepted


@pytest.mark.parametrize("temperature", [1.0, 3.0])
@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_delete_gain_equals_brute_force(family, sparse_L, temperature):
    model, batch, globals_, log_lik, local, stats = fitted(family, sparse_L=sparse_L, temperature=temperature)
    r = dense_resp(local.resp)
    K = r.shape[1]
    move = DeleteMove(OmegaConf.create(DELETE))
    log_pi = model.alloc.expected_log_pi(globals_.alloc)
    proposals = [(K - 1, np.arange(K - 1)), (2, np.array([0, 4])), (0, np.array([1, 3, 5]))]
    tracked = move.track(model, globals_, batch, log_lik, local, [np.concatenate([[t], a]) for t, a in proposals])
    if family == "mult":  # the cases the rules for faint atoms and (sparse) untouched ones are for
        assert ((r > 0) & (r <= FAINT_MASS))[:, [t for t, _ in proposals]].any()
    if sparse_L:
        assert (r[:, [t for t, _ in proposals]] == 0).any()
    for (target, absorb), (rows, _) in zip(proposals, tracked):
        predicted = elbo_of(model, stats.with_clusters(absorb, rows).remove([target])) - elbo_of(model, stats)
        new = deleted_resp(r, target, absorb, log_lik + log_pi, globals_.stats.N)
        brute = elbo_of(model, brute_stats(model, batch, new)) - elbo_of(model, stats)
        assert_gain(predicted, brute)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
@pytest.mark.parametrize("sparse_L", [None, 1])
@pytest.mark.parametrize("family", FAMILIES)
def test_birth_gain_equals_brute_force(family, sparse_L, temperature):
    model, batch, globals_, _, local, stats = fitted(family, K=2, sparse_L=sparse_L, temperature=temperature)
    r = dense_resp(local.resp)
    target = int(np.argmax(r.sum(axis=0)))
    seed = seed_birth(model, batch, r[:, target].copy(), OmegaConf.create(BIRTH), np.random.default_rng(0), 10)
    assert seed is not None and seed[0].shape[0] >= 2
    N, fields = seed
    rows = transfer(model, batch, r[:, target].copy(), N, fields)[0]
    predicted = elbo_of(model, split(stats, target, rows)) - elbo_of(model, stats)
    share = proposal_share(model, batch, r[:, target], N, fields)
    new = np.concatenate([r, r[:, [target]] * share], axis=1)
    new[:, target] = 0.0
    brute = elbo_of(model, brute_stats(model, batch, new)) - elbo_of(model, stats)
    assert_gain(predicted, brute)
    if family != "zm_gauss" and temperature == 1.0:  # zero-mean clusters cannot tell shifted blobs apart
        assert predicted > 0  # 2 clusters cannot explain 4: splitting the biggest helps (at T = 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_transfer_summarises_its_proposal_faint_atoms_included(family):
    """Fresh summaries of a transfer (scored atoms, then the faint ones given whole to the largest fresh
    cluster) equal the summaries of the responsibilities r_nt p̃_nj straight from the definition."""
    model, batch, _, _, local, stats = fitted(family, K=6)
    r = dense_resp(local.resp)
    faint = ((r > 0) & (r <= FAINT_MASS)).sum(axis=0)
    target = int(np.argmax(faint))
    if family == "mult":
        assert faint[target] > 0  # the case the rule is for
    N, fields = seed_birth(model, batch, r[:, target].copy(), OmegaConf.create(BIRTH), np.random.default_rng(0), 10)
    fresh, proposal = transfer(model, batch, r[:, target].copy(), N, fields)
    expected = brute_stats(model, batch, r[:, [target]] * proposal_share(model, batch, r[:, target], N, fields))
    for name in ("N", "H", *model.obs_fields):
        np.testing.assert_allclose(fresh[name], expected[name], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(proposal.resp.values.sum(axis=0), expected["N"], rtol=1e-10, atol=1e-12)
    # with the target's own batch summaries the faint atoms are not read: their statistics are the rest
    held = brute_stats(model, batch, r[:, [target]])
    from_held, _ = transfer(model, batch, r[:, target].copy(), N, fields, held)
    scale = max(1.0, float(np.abs(held["N"]).max()))
    for name in ("N", "H", *model.obs_fields):
        np.testing.assert_allclose(from_held[name], expected[name], rtol=1e-9, atol=1e-12 * scale * max(
            1.0, float(np.abs(held[name]).max())))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_level_of_a_birth_cleanup_gains_what_brute_force_says(family):
    """A birth's fresh clusters merged level by level along its cleanup order: each level's predicted gain
    (tracked group entropies) equals the ELBO difference of the responsibilities it stands for."""
    model, batch, globals_, _, local, stats = fitted(family, K=2)
    r = local.resp.values
    target = int(np.argmax(r.sum(axis=0)))
    N, fields = seed_birth(model, batch, r[:, target].copy(), OmegaConf.create(BIRTH), np.random.default_rng(0), 10)
    fresh, proposal = transfer(model, batch, r[:, target].copy(), N, fields)
    levels = cleanup_order(model, globals_, target, fresh, proposal, 1.0)
    J = N.shape[0]
    assert levels.shape == (J - 1, J)
    assert [int(labels.max()) + 1 for labels in levels] == list(range(J, 1, -1))
    share = proposal_share(model, batch, r[:, target], N, fields)
    membership, node_of = partitions_membership(levels)
    terms = model.alloc.group_terms(proposal, membership) if membership.shape[1] else {}
    current = model.global_step(stats)
    run = SimpleNamespace(model=model, globals=current, data_terms=lambda: model.data_terms(stats))
    for level, labels in enumerate(levels):
        candidate = grouped(fresh, labels, terms, node_of[level])
        predicted = elbo_of(model, split(stats, target, candidate))
        sources = [[k] for k in range(stats.K)] + [[] for _ in range(candidate.K)]
        assert level_value(run, target, candidate, sources) == pytest.approx(predicted, rel=1e-12)
        groups = np.stack([share[:, labels == g].sum(axis=1) for g in range(int(labels.max()) + 1)], axis=1)
        new = np.concatenate([r, r[:, [target]] * groups], axis=1)
        new[:, target] = 0.0
        assert_gain(predicted - elbo_of(model, stats), elbo_of(model, brute_stats(model, batch, new)) - elbo_of(model, stats))


# ------------------------------------------------------------- runs with moves
def rebuild_caches(alg, store, visits, lap_events, moves_state):
    """Each batch's responsibilities rebuilt from scratch and edited by the lap's accepted moves, column by column.

    ``visits[b]`` = (globals, uids) at batch b's visit; ``moves_state`` = what the moves planned this lap.
    Returns the brute-force summaries of every batch in the final cluster order.
    """
    model = alg.model
    new_ids = sorted(set(alg.ids.uids.tolist()) - {u for g, uids in visits.values() for u in uids.tolist()})
    out = []
    for b in range(store.n_batches):
        globals_, uids = visits[b]
        batch = store.read_batch(b)
        log_lik, local = model.local_step(batch, globals_)
        r = local.resp.values
        cols = {int(u): r[:, k].copy() for k, u in enumerate(uids)}
        log_pi = model.alloc.expected_log_pi(globals_.alloc)
        fresh = iter(new_ids)
        for e in lap_events:
            if not e.accepted:
                continue
            if e.move == "merge":
                ua, ub = (int(x) for x in e.target.split("+"))
                cols[ua] = cols[ua] + cols.pop(ub)
            elif e.move == "delete":
                t, *absorb = moves_state["delete"][int(e.target)]
                pos = {int(u): k for k, u in enumerate(uids)}
                at = [pos[int(a)] for a in absorb]
                after = absorbed_columns(cols.pop(t), np.stack([cols[int(a)] for a in absorb], axis=1),
                                         log_lik[:, at] + log_pi[at], int(np.argmax(globals_.stats.N[at])))
                for j, a in enumerate(absorb):
                    cols[int(a)] = after[:, j]
            elif e.move == "birth":  # the fresh clusters, grouped as the accepted cleanup level says
                t = int(e.target)
                (N, fields), levels = moves_state["birth"][t]
                labels = levels[e.fresh - e.kept]
                share = proposal_share(model, batch, cols[t], N, fields)
                for g in range(e.kept):
                    cols[next(fresh)] = cols[t] * share[:, labels == g].sum(axis=1)
                cols[t] = np.zeros(batch.n_atoms)
        final = np.stack([cols.get(int(u), np.zeros(batch.n_atoms)) for u in alg.ids.uids], axis=1)
        out.append(brute_stats(model, batch, final))
    return out


@pytest.mark.parametrize("K, moves", [(1, moves_cfg(birth=True, merge=True, delete=True)),
                                      (12, moves_cfg(merge=True, delete=True, **{"delete.max_size_frac": 0.3, "merge.start_lap": 4}))])
def test_after_moves_the_caches_are_the_summaries_of_a_fresh_pass(tmp_path, monkeypatch, K, moves):
    """Births, merges and deletes on 3 batches: the aggregate is the sum of the caches, and every cache equals
    the summaries of its batch's responsibilities rebuilt from scratch and edited by the accepted moves; the
    run's ELBO is the ELBO of their sum."""
    X, _ = four_clusters(n=900, seed=3)
    write_points(tmp_path / "d.h5", X, n_batches=3)
    store, alg = memo_run(tmp_path / "d.h5", K, moves)
    visits = {}
    original = MemoizedVB.plan_batch

    def plan_batch(self, b):  # each batch is planned under the globals its work runs with
        visits[b] = (self.globals, self.ids.uids.copy())
        return original(self, b)

    monkeypatch.setattr(MemoizedVB, "plan_batch", plan_batch)
    decide = {}
    original_birth, original_delete = BirthMove.decide, DeleteMove.decide

    def birth_decide(self, run, schedule):
        decide["birth"] = {int(u): (seed, levels) for u, seed, levels in zip(self.target_uids, self.seeds, self.levels)}
        original_birth(self, run, schedule)

    def delete_decide(self, run, schedule):
        decide["delete"] = {int(uids[0]): [int(u) for u in uids] for uids in self.proposals}
        original_delete(self, run, schedule)

    monkeypatch.setattr(BirthMove, "decide", birth_decide)
    monkeypatch.setattr(DeleteMove, "decide", delete_decide)
    checked = set()
    for _ in range(8):
        decide.clear()
        result = None
        while result is None:
            result = alg.step()
        assert alg.aggregate.allclose(alg.cache_total(), rtol=1e-9, atol=1e-7)
        events = [e for e in alg.moves.events if e.lap == result.lap]
        if not any(e.accepted for e in events):
            continue
        caches = rebuild_caches(alg, store, visits, events, decide)
        for b, expected in enumerate(caches):
            got = alg.caches[b].pad_to(alg.globals.K)
            for name in expected.fields:
                if name != "n_atoms":
                    np.testing.assert_allclose(got[name], expected[name], rtol=1e-7, atol=1e-7, err_msg=name)
        total = caches[0]
        for c in caches[1:]:
            total = total + c
        assert elbo_of(alg.model, total) == pytest.approx(result.elbo, rel=1e-9)
        checked |= {e.move for e in events if e.accepted}
    store.close()
    assert checked >= ({"birth"} if K == 1 else {"merge", "delete"}), checked


def test_a_rejected_merge_leaves_the_state_unchanged(tmp_path, monkeypatch):
    X, labels = four_clusters(n=600, seed=4)
    write_points(tmp_path / "d.h5", X, n_batches=3)

    def lap_three(forced):
        moves = moves_cfg(merge=True, **{"merge.start_lap": 3})
        store, alg = memo_run(tmp_path / "d.h5", 4, moves if forced else None)
        if forced:  # plan a pair of two clearly different clusters
            def plan(self, run, rng, excluded):
                self.pair_uids = run.ids.uids[np.array([[0, 1]])]
                return set(self.pair_uids.ravel().tolist())
            monkeypatch.setattr(MergeMove, "plan", plan)
        while alg.lap < 3:
            alg.step()
        events = alg.moves.events if forced else []
        store.close()
        return alg.aggregate, list(alg.caches), alg.ids.uids.copy(), events

    agg_a, caches_a, uids_a, events = lap_three(True)
    agg_b, caches_b, uids_b, _ = lap_three(False)
    assert [e.accepted for e in events if e.move == "merge"] == [False]
    assert agg_a.allclose(agg_b, rtol=0, atol=0)
    assert all(a.allclose(b, rtol=0, atol=0) for a, b in zip(caches_a, caches_b))
    np.testing.assert_array_equal(uids_a, uids_b)


def big_clusters(summary, frac=0.01):
    counts = np.asarray(summary["counts"])
    return int(np.sum(counts > frac * counts.sum()))


@pytest.mark.parametrize("seed", [*range(5), *(pytest.param(s, marks=pytest.mark.slow) for s in range(5, 10))])
def test_from_one_cluster_births_find_the_eight_toy_clusters(compose_cfg, tmp_path, seed):
    """Seeds 0-4 in the default suite, 5-9 in the slow one (the default run of test_cli is one more seed)."""
    cfg = compose_cfg("init.K=1", "moves=[birth,merge,delete]", f"seed={seed}")
    summary = runner.train(cfg, tmp_path / "run")
    assert big_clusters(summary) == 8
    assert summary["ari"] > 0.95
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    elbo = settled_elbo(trace)  # dp_mix of gauss anneals its first laps by default
    assert elbo.size > 10 and np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    moves = pd.read_csv(tmp_path / "run" / "moves.csv")
    for move in ("birth", "merge", "delete"):
        assert trace[f"{move}_tried"].sum() == (moves["move"] == move).sum()
        assert trace[f"{move}_accepted"].sum() == moves[(moves["move"] == move) & moves["accepted"]].shape[0]


def test_from_fifty_clusters_merges_and_deletes_reach_eight(compose_cfg, tmp_path):
    cfg = compose_cfg("init.K=50", "moves=[merge,delete]")
    summary = runner.train(cfg, tmp_path / "run")
    assert summary["K"] == 8
    assert summary["ari"] > 0.95
