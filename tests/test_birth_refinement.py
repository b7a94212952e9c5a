"""Births that live through laps (``bnpvi.moves.birth.LapBirths``, mixtures and topic models): a rejected proposal whose gain rose is
judged again at the next lap, its fresh clusters refined by its own whole-data summaries, memoized batch
by batch; its target is left alone by the other moves meanwhile, and a run cut while one is in flight
resumes exactly."""
import numpy as np
import pandas as pd
import pytest

from bnpvi.data.generate import topic_documents
from bnpvi.data.store import write_documents
from bnpvi.learn import runner
from bnpvi.moves.base import ordered_sum
from bnpvi.moves import topic_birth
from bnpvi.moves.birth import BirthMove, LapBirths

from setups import assert_resume_is_exact, compose

# 6,000 short documents from 10 topics: with seed 2, births of lap 3 are rejected and carried into lap 4
SEED = 2
# (one prior in every lap, obs.anneal_laps=0: these tests check that the ELBO never decreases)
ARGS = ["obs=mult", "obs.anneal_laps=0", "alg.n_batches=5", "init.K=1", f"seed={SEED}"]


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    path = tmp_path_factory.mktemp("carried") / "docs.h5"
    word_ids, word_counts, doc_range, topics = topic_documents(seed=0)
    write_documents(path, word_ids, word_counts, doc_range, 3000, labels=topics, batches_fixed=False)
    return path


def chains(moves: pd.DataFrame) -> list[list[tuple[int, bool]]]:
    """Birth proposals on the same target in consecutive laps: [(lap, accepted), ...] per chain."""
    return [chain for _, chain in target_chains(moves)]


def target_chains(moves: pd.DataFrame) -> list[tuple[str, list[tuple[int, bool]]]]:
    """:func:`chains` with the target of each."""
    births = moves[moves.move == "birth"].dropna(subset=["gain"])
    out, open_ = [], {}
    for row in births.itertuples():
        chain = open_.get(row.target)
        if chain is not None and chain[-1][0] == row.lap - 1 and not chain[-1][1]:
            chain.append((row.lap, bool(row.accepted)))
        else:
            chain = [(row.lap, bool(row.accepted))]
            out.append((row.target, chain))
        open_[row.target] = chain
    return out


def test_rejected_births_are_judged_again_and_their_targets_left_alone(compose_cfg, tmp_path, docs, monkeypatch):
    """A carried proposal is tried at the next lap with the pieces of its best cleanup level; its target is
    in no merge or delete of that lap; each
    carried proposal's aggregate ends its lap as the sum of that lap's transfers (the memoized refinement
    never keeps a stale batch); and the ELBO never decreases."""
    checked = []
    decide = BirthMove.decide

    def checking_decide(self, run, schedule):
        batches = sorted(self.tracked)
        for i, memo in enumerate(self.memo):
            if memo is not None:
                total = ordered_sum(self.tracked[b][i][0] for b in batches)
                assert memo[0].allclose(total, rtol=1e-9, atol=1e-6)
                assert not memo[1]  # every batch replaced its part of the previous lap
                checked.append(schedule.lap)
        decide(self, run, schedule)

    monkeypatch.setattr(BirthMove, "decide", checking_decide)
    carried = recorded_carries(monkeypatch)
    cfg = compose_cfg("data=hdf5", f"data.path={docs}", "alg.n_laps=8", *ARGS)
    runner.train(cfg, tmp_path / "run")
    moves = pd.read_csv(tmp_path / "run" / "moves.csv")
    links = [(target, lap, next_lap) for target, chain in target_chains(moves)
             for (lap, _), (next_lap, _) in zip(chain[:-1], chain[1:]) if (lap, str(target)) in carried]
    assert links, "no birth was judged again"
    assert checked
    births = moves[moves.move == "birth"].set_index(["lap", "target"])
    for target, lap, next_lap in links:  # a carried proposal goes on with the pieces of its best cleanup level
        assert births.loc[(next_lap, target), "fresh"] <= births.loc[(lap, target), "kept"]
        later = moves[(moves.lap == next_lap) & moves.move.isin(["merge", "delete"])]
        used = {int(t) for value in later.target for t in str(value).split("+")}
        assert int(target) not in used
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert np.all(np.diff(trace.elbo.to_numpy()) >= -1e-9 * np.abs(trace.elbo.to_numpy()[1:]))


def gain_chains(moves: pd.DataFrame, carried: set | None = None) -> list[list[float]]:
    """The gains of each chain of :func:`target_chains`, lap by lap; with ``carried`` (the (lap, target id) of
    every proposal carried out of its lap), a chain is cut where its proposal was not carried (the next lap's
    proposal on that target, a retry, starts a chain of its own)."""
    births = moves[moves.move == "birth"].dropna(subset=["gain"])
    gain = {(int(r.lap), str(r.target)): float(r.gain) for r in births.itertuples()}
    out = []
    for target, chain in target_chains(moves):
        gains = [gain[(chain[0][0], str(target))]]
        for (lap, _), (next_lap, _) in zip(chain[:-1], chain[1:]):
            if carried is not None and (lap, str(target)) not in carried:
                out.append(gains)
                gains = []
            gains.append(gain[(next_lap, str(target))])
        out.append(gains)
    return out


def recorded_carries(monkeypatch) -> set:
    """The (lap, target id) of every proposal ``LapBirths.carry`` carries out of its lap, filled as a run goes."""
    carried, carry = set(), LapBirths.carry

    def noting(decide):
        def noting_decide(self, run, schedule):
            self.deciding_lap = schedule.lap
            decide(self, run, schedule)
        return noting_decide

    def noting_carry(self, uid, i, gain, kept):
        done = carry(self, uid, i, gain, kept)
        if done:
            carried.add((self.deciding_lap, str(uid)))
        return done

    for cls in (BirthMove, topic_birth.TopicBirthMove):
        monkeypatch.setattr(cls, "decide", noting(cls.decide))
    monkeypatch.setattr(LapBirths, "carry", noting_carry)
    return carried


def assert_carried_at_pace(moves: pd.DataFrame, horizon: int, longest: int, carried: set | None = None) -> None:
    """Every proposal lived at most 2 ``horizon`` laps, some ``longest`` laps or more, and each one carried
    after its first lap had risen since the lap before at a pace that would make it win within ``horizon``
    laps (``LapBirths.carry``). ``carried``: see :func:`gain_chains`."""
    chains = gain_chains(moves, carried)
    assert longest <= max(len(c) for c in chains) <= 2 * horizon, chains
    for gains in chains:
        for previous, gain in zip(gains[:-2], gains[1:-1]):  # a link out of lap 2 of the chain or later
            assert gain > previous and -gain <= horizon * (gain - previous), gains


def test_proposals_live_while_they_would_win_within_refine_laps(compose_cfg, tmp_path, docs, monkeypatch):
    carried = recorded_carries(monkeypatch)
    cfg = compose_cfg("data=hdf5", f"data.path={docs}", "alg.n_laps=10", "moves.birth.refine_laps=5", *ARGS)
    runner.train(cfg, tmp_path / "run")
    assert carried
    assert_carried_at_pace(pd.read_csv(tmp_path / "run" / "moves.csv"), 5, longest=3, carried=carried)


def test_resume_with_carried_births_in_flight_is_exact(compose_cfg, tmp_path, docs):
    cfg = compose_cfg("data=hdf5", f"data.path={docs}", "alg.n_laps=6", "alg.converge_thr=-1",
                      "checkpoint_every=1", *ARGS)
    summary, trace = assert_resume_is_exact(cfg, tmp_path, lap=4)
    moves = pd.read_csv(tmp_path / "ref" / "moves.csv")
    assert any(c[0][0] == 3 and len(c) > 1 for c in chains(moves)), "no proposal carried from lap 3 into lap 4"


# births of lap 4 carried to lap 5 (one prior in every lap: the ELBO never decreases)
TOPIC_ARGS = ["model=hdp_topic", "obs.anneal_laps=0", "alg.n_batches=5", "init.K=1", "seed=7",
              "moves.birth.abundance=0"]  # births of n_new pieces, which are carried; not one split into many


def transplant_recorders(monkeypatch):
    """Record, as a run goes, every carried topic proposal put on changed topics (checking that it is put on
    the current topics: their target row replaced by its refined first piece, its other pieces appended) and
    the (logged gain, ELBO difference) of each lap that accepts such a proposal. Returns (moved, accepted)."""
    moved, accepted = [], []
    transplanted, decide = topic_birth.transplanted, topic_birth.TopicBirthMove.decide

    def recording(model, globals_, uids, uid, kept):
        candidate = transplanted(model, globals_, uids, uid, kept)
        if not np.array_equal(kept[0], uids):
            old, new = (int(np.flatnonzero(ids == uid)[0]) for ids in (kept[0], uids))
            K_old, K = kept[0].shape[0], globals_.K
            pieces = np.concatenate([[kept[1].N[old]], kept[1].N[K_old:]])
            np.testing.assert_array_equal(candidate.N[np.r_[new, K:candidate.N.shape[0]]], pieces)
            others = np.delete(np.arange(K), new)
            np.testing.assert_array_equal(candidate.N[others], np.maximum(globals_.stats.N, 0.0)[others])
            moved.append(uid)
        return candidate

    def recording_decide(self, run, schedule):
        before, start = run.elbo(), len(schedule.events)
        carried = set(int(u) for u in self.target_uids[[age > 1 for age in self.ages]]) if self.ages else set()
        decide(self, run, schedule)
        wins = [e for e in schedule.events[start:] if e.move == "birth" and e.accepted and int(e.target) in moved
                and int(e.target) in carried]
        if wins:
            accepted.append((wins[0].gain, run.elbo() - before))

    monkeypatch.setattr(topic_birth, "transplanted", recording)
    monkeypatch.setattr(topic_birth.TopicBirthMove, "decide", recording_decide)
    return moved, accepted


def refinement_checks(monkeypatch) -> list:
    """Check, at the end of every lap after a topic proposal was carried, that its pieces were memoized: their
    aggregate is the sum of that lap's summaries of the pieces (no batch of the previous lap left), and the
    candidate's pieces are made from it. Returns the laps checked, filled as a run goes."""
    checked = []
    decide = topic_birth.TopicBirthMove.decide

    def checking_decide(self, run, schedule):
        batches, K = sorted(self.tracked), run.globals.K
        for i, memo in enumerate(self.memo):
            if memo is not None and not schedule.changed:  # (an accepted merge or delete voids the lap's births)
                target = int(run.ids.positions(self.target_uids[i:i + 1])[0])
                total = ordered_sum(topic_birth.piece_stats(self.tracked[b][i][0], target, K) for b in batches)
                assert memo[0].allclose(total, rtol=1e-9, atol=1e-6)
                assert not memo[1]  # every batch replaced its part of the previous lap
                rows = np.r_[target, K:self.candidates[i].N.shape[0]]
                np.testing.assert_allclose(self.candidates[i].N[rows], np.maximum(memo[0].N, 0.0), rtol=1e-12)
                checked.append(schedule.lap)
        decide(self, run, schedule)

    monkeypatch.setattr(topic_birth.TopicBirthMove, "decide", checking_decide)
    return checked


@pytest.fixture(scope="module")
def topic_run(tmp_path_factory, docs):
    """One 10-lap HDP topic run from one topic (TOPIC_ARGS, refine_laps 5) watched by every recorder of the topic
    tests below, which read it: (run directory, carried, moved, accepted, checked)."""
    tmp = tmp_path_factory.mktemp("topic-run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        carried = recorded_carries(monkeypatch)
        moved, accepted = transplant_recorders(monkeypatch)
        checked = refinement_checks(monkeypatch)
        cfg = compose("data=hdf5", f"data.path={docs}", "alg.n_laps=10", "alg.converge_thr=-1",
                      "moves.birth.refine_laps=5", *TOPIC_ARGS)
        runner.train(cfg, tmp / "run")
    return tmp / "run", carried, moved, accepted, checked


def test_rejected_topic_births_are_judged_again_while_the_topics_stay(topic_run):
    """An HDP topic model from one topic: a lap whose births all lose carries them into the next lap, as long as
    they would win within refine_laps laps at their pace; the ELBO never decreases."""
    run_dir, carried = topic_run[:2]
    assert carried
    assert_carried_at_pace(pd.read_csv(run_dir / "moves.csv"), 5, longest=2, carried=carried)
    trace = pd.read_csv(run_dir / "trace.csv")
    assert np.all(np.diff(trace.elbo.to_numpy()) >= -1e-9 * np.abs(trace.elbo.to_numpy()[1:]))


@pytest.mark.slow  # 3 runs, ~50 s; the default suite resumes carried births of mixtures (above) and topic models'
# births (test_resume)
def test_resume_with_carried_topic_births_in_flight_is_exact(compose_cfg, tmp_path, docs):
    """Cut in lap 4, whose carried proposals were put on the topics as the sort of lap 3 reordered them."""
    cfg = compose_cfg("data=hdf5", f"data.path={docs}", "alg.n_laps=6", "alg.converge_thr=-1",
                      "checkpoint_every=1", *TOPIC_ARGS)
    assert_resume_is_exact(cfg, tmp_path, lap=4)
    moves = pd.read_csv(tmp_path / "ref" / "moves.csv")
    assert any(c[0][0] == 3 and len(c) > 1 for c in chains(moves)), "no topic birth carried from lap 3 into lap 4"


def test_carried_topic_births_outlive_a_change_of_the_topics_and_gain_exactly(topic_run):
    """A carried topic proposal whose model's topics changed (reordered by the lap's sort, or another
    proposal accepted) is put on the current topics: the current topics with the target's row replaced by
    its refined first piece and its other pieces appended (checked as the run went). Such a proposal is judged
    again and accepted in some lap, with a logged gain equal to the ELBO difference."""
    moved, accepted = topic_run[2:4]
    assert moved, "no carried proposal was put on changed topics"
    assert accepted, "no carried proposal on changed topics was accepted"
    gain, difference = accepted[0]
    assert gain > 0 and gain == pytest.approx(difference, rel=1e-9)


def test_carried_topic_births_are_refined_batch_by_batch(topic_run):
    """Through the lap after it was carried, a topic proposal's pieces are memoized (checked as the run went:
    :func:`refinement_checks`); the ELBO never decreases."""
    run_dir, checked = topic_run[0], topic_run[4]
    assert checked, "no carried topic proposal was refined"
    trace = pd.read_csv(run_dir / "trace.csv")
    assert np.all(np.diff(trace.elbo.to_numpy()) >= -1e-9 * np.abs(trace.elbo.to_numpy()[1:]))
