"""Births of HMM states (Hughes 2016 thesis §6.5.2): runs, cuts, the exact gain, and runs from K = 1."""
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from bnpvi.alloc import HDPHMMAlloc
from bnpvi.data.batch import SeqBatch
from bnpvi.data.store import BatchStore
from bnpvi.learn import runner
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.work import process_batch
from bnpvi.model import Model
from bnpvi.moves.seq_birth import best_cut, merge_cleanup, propose, state_runs
from bnpvi.obs import make_obs
from bnpvi.stats import ClusterIds

from setups import GAUSS, HMM_BIRTH, enumerated_stats, two_regime_store


def test_state_runs_are_the_maximal_runs_inside_each_sequence():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=200)
    labels[40:80] = 1
    seq_range = np.array([0, 50, 51, 120, 200])
    got = state_runs(labels, seq_range, 3)
    want = []
    for s in range(4):
        lo, hi = seq_range[s], seq_range[s + 1]
        t = lo
        while t < hi:
            e = t
            while e < hi and labels[e] == labels[t]:
                e += 1
            if e - t >= 3:
                want.append((t, e, labels[t]))
            t = e
    np.testing.assert_array_equal(got, np.array(want).reshape(-1, 3))
    # the 40 steps of state 1 from 40 to 80 cross two sequence starts (50 and 51): two runs, not one
    assert any(a <= 40 and e == 50 for a, e, _ in got) and any(a == 51 and e >= 80 for a, e, _ in got)


@pytest.mark.parametrize("length", [12, 60])
def test_best_cut_maximises_the_two_blocks_data_term(length):
    """The cut is the best of the scanned cut points by L_data of the two hard blocks, each block
    summarised on its own; with a clear change point in a short interval it is found exactly."""
    rng = np.random.default_rng(length)
    X = rng.normal(size=(length, 2))
    change = length // 3
    X[change:] += 6.0
    batch = SeqBatch(X, np.array([0, length]))
    model = Model(HDPHMMAlloc(), make_obs(GAUSS, 2, None))
    labels = best_cut(model, batch, 0, length)

    def score(m):
        parts = [np.arange(0, m), np.arange(m, length)]
        total = 0.0
        for rows in parts:
            if rows.size:
                stats = model.hard_stats(batch.take(rows), np.zeros(rows.size, dtype=np.int64), 1)
                total += float(model.obs.log_marginal(stats.N, stats.select(model.obs_fields))[0])
        return total

    stride = -(-length // 25)
    cuts = list(range(0, length, stride))
    chosen = int(np.argmax(labels)) if labels.any() else 0
    assert chosen in cuts and score(chosen) == pytest.approx(max(score(m) for m in cuts), rel=1e-12)
    if stride == 1:
        assert chosen == change
    np.testing.assert_array_equal(labels, (np.arange(length) >= chosen).astype(np.int64))


def recorded_local_steps(model, monkeypatch) -> list:
    """``model.local_step`` patched to record (globals, the batch summaries it leads to) of every call."""
    calls = []
    local_step = model.local_step

    def recording(batch, globals_, **options):
        out = local_step(batch, globals_, **options)
        calls.append((globals_, model.summarize(batch, out[1])))
        return out
    monkeypatch.setattr(model, "local_step", recording)
    return calls


def enumerated_batch_stats(model, batch, stats, calls):
    """``stats`` checked against the summaries of q*(z) by enumerating every path of the batch's sequences
    under the globals of the recorded local step that made them (so they come from a genuine q(z))."""
    made_by = [g for g, s in calls if g.K == stats.K and s.allclose(stats, rtol=0, atol=0)]
    assert made_by, "the batch summaries come from one local step"
    log_lik = model.obs.expected_log_lik(made_by[0].obs, batch)
    log_start, log_trans = model.alloc._potentials(made_by[0].alloc)
    brute = enumerated_stats(batch, model.obs, log_lik, log_start, log_trans, list(range(stats.K)), stats.K,
                             stats.specs)
    assert brute.allclose(stats, rtol=1e-9, atol=1e-10)
    return brute


def test_birth_gain_is_the_exact_whole_data_elbo_difference(tmp_path, monkeypatch):
    """An accepted birth's gain equals L(after) − L(before), with L(after) computed from scratch: the
    other batch's cache plus batch b's summaries rebuilt by enumerating every path of its sequences
    under the globals of the local step that made them (so the candidate is a genuine q(z))."""
    store = BatchStore.open(two_regime_store(tmp_path))
    model = Model(HDPHMMAlloc(gamma=5.0, alpha=0.5, start_alpha=5.0, sticky_kappa=10.0), make_obs(GAUSS, 2, None))
    rng = np.random.default_rng(0)
    stats = sum((model.hard_stats(store.read_batch(b), np.zeros(store.read_batch(b).n_atoms, dtype=np.int64), 1)
                 for b in range(1, store.n_batches)), model.hard_stats(store.read_batch(0),
                                                                        np.zeros(store.read_batch(0).n_atoms, np.int64), 1))
    alg = MemoizedVB(model, store, OmegaConf.create({}), rng, model.global_step(stats), ClusterIds.first(1),
                     OmegaConf.create({"birth": HMM_BIRTH}))
    while alg.lap < 1:
        alg.step()
    alg.start_lap()
    b = 0
    batch = store.read_batch(b)
    plans = alg.moves.batch_plans(alg, b)
    calls = recorded_local_steps(model, monkeypatch)
    result = process_batch(model, alg.globals, batch, plans, alg.moves)
    monkeypatch.undo()
    outcome = result.tracked["birth"]
    assert outcome.stats is not None, "the clear two-regime birth must be accepted"
    target, gain, accepted, fresh, kept = outcome.events[0]
    assert accepted and target == 0 and kept == 2

    before_stats = alg.aggregate - alg.caches[b] + result.stats
    before = model.evaluate(before_stats, alg.globals.alloc)[0]

    new_stats, new_globals = outcome.stats, outcome.globals
    K2 = new_globals.K
    brute_b = enumerated_batch_stats(model, batch, new_stats, calls)
    whole = alg.caches[1].pad_to(K2) + brute_b
    after = model.elbo(whole, new_globals)
    assert gain == pytest.approx(after - before, rel=1e-8, abs=1e-6)
    assert gain > 0
    store.close()


def test_merge_cleanup_folds_a_duplicate_fresh_state_into_its_twin_exactly(tmp_path, monkeypatch):
    """A proposal whose fresh state copies existing state 0 (the first regime of three sequences) is made
    better by merging the copy into state 0, not into the target (state 1): the cleanup's result has the
    original two states, a higher ELBO than the proposal, and batch summaries that equal those of q*(z)
    by path enumeration under the globals of the local step that made them (an exact candidate)."""
    store = BatchStore.open(two_regime_store(tmp_path))
    model = Model(HDPHMMAlloc(gamma=5.0, alpha=0.5, start_alpha=5.0, sticky_kappa=10.0), make_obs(GAUSS, 2, None))
    batches = [store.read_batch(b) for b in range(store.n_batches)]

    def truth(batch):
        labels = np.zeros(batch.n_atoms, dtype=np.int64)
        for d in range(batch.n_seqs):
            a, e = batch.seq_range[d], batch.seq_range[d + 1]
            labels[a + (e - a) // 2:e] = 1
        return labels
    hard = [model.hard_stats(batch, truth(batch), 2) for batch in batches]
    globals_ = model.global_step(hard[0] + hard[1])
    batch, rest = batches[0], hard[1]
    _, local = model.local_step(batch, globals_)
    stats = model.summarize(batch, local)
    path = np.asarray(local.resp.values.argmax(axis=1), dtype=np.int64)
    np.testing.assert_array_equal(path, truth(batch))
    new_path = path.copy()
    for d in range(3):
        a, e = batch.seq_range[d], batch.seq_range[d + 1]
        new_path[a:a + (e - a) // 2] = 2
    proposal = propose(model, batch, rest, globals_, stats, path, new_path, 1)
    assert proposal is not None and proposal[2].K == 3 and proposal[6] == 1, "the copy must survive its refinement"

    calls = recorded_local_steps(model, monkeypatch)
    value, new_stats, candidate, _, _, fresh, kept = merge_cleanup(model, batch, rest, proposal, 2, 1)
    monkeypatch.undo()
    assert (fresh, kept) == (1, 0) and candidate.K == 2 and new_stats.K == 2
    assert value > proposal[0]
    np.testing.assert_allclose(candidate.stats.N[0], hard[0].N[0] + hard[1].N[0], rtol=1e-6)
    brute = enumerated_batch_stats(model, batch, new_stats, calls)
    assert value == pytest.approx(model.elbo(rest + brute, candidate), rel=1e-12)
    store.close()


def test_memo_with_births_never_decreases_the_elbo_after_any_batch(tmp_path):
    store = BatchStore.open(two_regime_store(tmp_path))
    model = Model(HDPHMMAlloc(gamma=5.0, alpha=0.5, start_alpha=5.0, sticky_kappa=10.0), make_obs(GAUSS, 2, None))
    rng = np.random.default_rng(1)
    stats = sum((model.hard_stats(store.read_batch(b), np.zeros(store.read_batch(b).n_atoms, dtype=np.int64), 1)
                 for b in range(store.n_batches)), model.empty_stats(1))
    moves = {"birth": HMM_BIRTH, "merge": {"start_lap": 2, "max_pairs": 10, "max_per_cluster": 3, "retry_change": 0.1},
             "delete": {"start_lap": 2, "max_per_lap": 2, "absorb": 5, "max_size_frac": 0.5, "max_fails": 2,
                        "retry_change": 0.1}}
    alg = MemoizedVB(model, store, OmegaConf.create({}), rng, model.global_step(stats), ClusterIds.first(1),
                     OmegaConf.create(moves))
    values = []
    while alg.lap < 6:
        alg.step()
        if alg.lap >= 1:
            values.append(alg.elbo())
            assert alg.cache_total().allclose(alg.aggregate, rtol=1e-9, atol=1e-9)
    values = np.array(values)
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    assert any(e.move == "birth" and e.accepted for e in alg.moves.events)
    store.close()


@pytest.mark.slow  # ~40 s a run; the default suite keeps births from one state: their exact gain and the ELBO after
# every batch (the tests above), and the README's run of model=hdp_hmm from one state
@pytest.mark.parametrize("obs, seed", [(o, s) for o in ("gauss", "ar_gauss") for s in (1, 2, 3, 4, 5)])
def test_births_from_one_state_find_the_eight_toy_states(compose_cfg, tmp_path, obs, seed):
    """The default command's run, from K = 1 with birth, merge and delete (Hughes 2016 thesis §6.6.1):
    8 states holding more than 1 % of the time steps each, Hamming distance below 0.02, within 30 laps."""
    cfg = compose_cfg("model=hdp_hmm", "alg=memo", f"obs={obs}", f"seed={seed}", "alg.n_laps=30")
    summary = runner.train(cfg, tmp_path / "run")
    counts = np.array(summary["counts"])
    assert np.sum(counts > 0.01 * counts.sum()) == 8  # (a state with less may stay where the ELBO keeps it)
    assert summary["hamming"] < 0.02
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert trace["K"].iloc[0] == 1 and trace["birth_accepted"].sum() >= 1
    assert np.all(np.diff(trace["elbo"]) >= -1e-9 * np.abs(trace["elbo"].iloc[1:]))
    moves = pd.read_csv(tmp_path / "run" / "moves.csv")
    assert moves["exact"][moves["accepted"] & (moves["move"] != "merge")].all()


def test_a_state_with_no_long_run_takes_its_turn_among_the_retries():
    """When every state is blocked, the least recently tried one is retried; a state tried that way but
    with no run of ``min_block`` steps counts as tried at that lap, so the next retry goes to another state
    (it used to stay the least recently tried and take every retry until ``max_stuck``)."""
    from types import SimpleNamespace

    from bnpvi.moves.seq_birth import SequenceBirthMove

    move = SequenceBirthMove(OmegaConf.create(dict(HMM_BIRTH, max_stuck=10, max_per_lap=1)))
    sizes = np.array([50.0, 40.0, 30.0])
    run = SimpleNamespace(ids=SimpleNamespace(uids=np.array([0, 1, 2])),
                          globals=SimpleNamespace(stats=SimpleNamespace(N=sizes, K=3)),
                          model=SimpleNamespace(alloc=SimpleNamespace(births_per_lap=None)))
    for uid in range(3):
        move.failures.record(uid, False, (sizes[uid],))
    move.last_tried = {0: 3, 1: 4, 2: 4}
    assert move._eligible(run, set()).tolist() == [0]
    move.eligible, move.visited, move.usable = np.array([0]), {0}, set()
    move.decide(run, SimpleNamespace(lap=5))
    assert move._eligible(run, set()).tolist() == [1]


def test_places_left_free_go_to_the_least_recently_tried_blocked_targets():
    """Unblocked targets come first; the places of ``max_per_lap`` (at most the allocation model's
    ``births_per_lap``) they leave free go to blocked ones, least recently tried first, until ``max_stuck`` laps
    in a row have failed; a state excluded by another move never."""
    from types import SimpleNamespace

    from bnpvi.moves.seq_birth import SequenceBirthMove

    move = SequenceBirthMove(OmegaConf.create(dict(HMM_BIRTH, max_stuck=4, max_per_lap=3)))
    sizes = np.array([50.0, 40.0, 30.0, 20.0, 10.0])
    alloc = SimpleNamespace(births_per_lap=None)
    run = SimpleNamespace(ids=SimpleNamespace(uids=np.array([7, 8, 9, 10, 11])),
                          globals=SimpleNamespace(stats=SimpleNamespace(N=sizes, K=5)),
                          model=SimpleNamespace(alloc=alloc))
    for uid in (7, 8, 9, 10):
        move.failures.record(uid, False, (sizes[uid - 7],))
    move.last_tried = {7: 6, 8: 2, 9: 5, 10: 2}
    assert move._eligible(run, set()).tolist() == [11, 8, 10]
    assert move._eligible(run, {8}).tolist() == [11, 10, 9]
    alloc.births_per_lap = 2  # the allocation model's cap (HMMs: 3) is below max_per_lap
    assert move._eligible(run, set()).tolist() == [11, 8]
    alloc.births_per_lap = None
    move.stuck = 4
    assert move._eligible(run, set()).tolist() == [11]
    move.failures.record(11, False, (sizes[4],))
    assert move._eligible(run, set()).tolist() == []
