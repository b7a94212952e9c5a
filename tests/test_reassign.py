"""Reassign moves (bnpvi.moves.reassign): exact single-document gains against brute force, the state an
accepted reassignment installs, and a resumed run that carries one in flight."""
import logging
import warnings

import h5py
import numpy as np
import pytest
from omegaconf import OmegaConf

from bnpvi.alloc import DPMixAlloc
from bnpvi.data.batch import SeqBatch
from bnpvi.data.generate import topic_documents
from bnpvi.data.store import BatchStore, write_documents
from bnpvi.learn import runner
from bnpvi.learn.memo import MemoizedVB
from bnpvi.model import Model
from bnpvi.io.h5tree import read_tree, write_tree
from bnpvi.moves.reassign import Candidates, ReassignMove, exact_gains
from bnpvi.obs import Mult
from bnpvi.stats import ClusterIds, Responsibilities
from setups import assert_resume_is_exact, brute_stats, dense_resp, elbo_of, fitted

REASSIGN = {"start_lap": 2, "max_atoms": 1000}
REASSIGNING = ["mult", "gauss"]
"""The families with single-atom gains (the others skip the move)."""


def soft(family, sparse_L=None):
    """A DP mixture after a few full-VB steps from random labels (tests/test_moves.py): model, batch, dense r."""
    model, batch, _, _, local, _ = fitted(family, K=5, iters=3, sparse_L=sparse_L)
    return model, batch, dense_resp(local.resp)


@pytest.mark.parametrize("family", REASSIGNING)
def test_reassign_gains_are_the_change_of_the_data_terms(family):
    model, batch, r = soft(family)
    stats = brute_stats(model, batch, r)
    gains = model.obs.reassign_gains(stats.N, stats.select(model.obs_fields), batch, r)
    base = model.data_terms(stats).sum()
    for n in range(0, batch.n_atoms, 97):
        for j in range(r.shape[1]):
            moved = r.copy()
            moved[n] = 0.0
            moved[n, j] = 1.0
            brute = model.data_terms(brute_stats(model, batch, moved)).sum() - base
            assert gains[n, j] == pytest.approx(brute, rel=1e-8, abs=1e-8), (n, j)


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", REASSIGNING)
def test_exact_gain_equals_the_brute_force_elbo_difference(family, sparse_L):
    model, batch, r = soft(family, sparse_L)
    stats = brute_stats(model, batch, r)
    base = elbo_of(model, stats)
    checked = 0
    for n in range(0, batch.n_atoms, 131):
        predicted = exact_gains(model, stats.N, stats.select(model.obs_fields), batch.take([n]), r[n])
        for j in range(r.shape[1]):
            moved = r.copy()
            moved[n] = 0.0
            moved[n, j] = 1.0
            brute = elbo_of(model, brute_stats(model, batch, moved)) - base
            assert predicted[j] == pytest.approx(brute, rel=1e-7, abs=1e-7 * abs(base)), (n, j)
            checked += 1
    assert checked >= 5 * r.shape[1]


def test_gauss_gains_of_a_point_its_cluster_holds_less_of_are_minus_inf_without_a_warning():
    """The screening's responsibilities (a new local step) against the previous aggregate: cluster 0 holds 0.3
    of point 0, which now gives it all of its mass; the gains cannot be made, so they are −inf, silently."""
    model, batch, r = soft("gauss", None)
    old = r.copy()
    old[:, 0] = 0.0
    old /= old.sum(axis=1, keepdims=True)
    old[0] = 0.0
    old[0, :2] = 0.3, 0.7
    stats = brute_stats(model, batch, old)
    new = np.zeros((2, r.shape[1]))
    new[0, 0] = 1.0
    new[1] = old[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gains = model.obs.reassign_gains(stats.N, stats.select(model.obs_fields), batch.take([0, 1]), new)
    assert np.all(gains[0] == -np.inf) and np.all(np.isfinite(gains[1]))


@pytest.mark.parametrize("family", REASSIGNING)
def test_summaries_updated_in_place_equal_the_summaries_added(family):
    """``ObsFamily.add_weighted`` (the greedy ascent's running summaries) adds what ``summarize`` makes, for
    one atom and for several at signed weights."""
    model, batch, r = soft(family, None)
    rng = np.random.default_rng(4)
    for rows in ([7], [3, 11, 40, 41]):
        atoms = batch.take(rows)
        weights = rng.normal(size=(len(rows), r.shape[1]))
        start = {name: rng.normal(size=v.shape) for name, v in brute_stats(model, batch, r).select(model.obs_fields).items()}
        running = {name: v.copy() for name, v in start.items()}
        model.obs.add_weighted(running, atoms, weights)
        added = model.obs.summarize(atoms, Responsibilities(weights, r.shape[1]))
        for name, value in running.items():
            np.testing.assert_allclose(value, start[name] + added[name], rtol=1e-12, atol=1e-12)


def test_an_accepted_reassignment_installs_the_brute_force_state(tmp_path, monkeypatch):
    """Documents start in a mixed-up partition; the lap in which the move is accepted leaves every cache
    equal to the summaries of its batch's responsibilities with the moved documents one-hot on their new
    cluster, and the run's ELBO rises by the logged gain."""
    word_ids, word_counts, doc_range, labels = topic_documents(n_docs=900, n_topics=4, seed=2)
    write_documents(tmp_path / "d.h5", word_ids, word_counts, doc_range, 3000, n_batches=3)
    store = BatchStore.open(tmp_path / "d.h5")
    model = Model(DPMixAlloc(2.0), Mult(0.1, store.D))
    noisy = np.where(np.random.default_rng(3).random(labels.size) < 0.25, (labels + 1) % 4, labels)
    stats = None
    for b in range(store.n_batches):
        part = store.read_batch(b)
        s = model.hard_stats(part, noisy[part.start:part.start + part.n_atoms], 4)
        stats = s if stats is None else stats + s
    moves = OmegaConf.create({"reassign": REASSIGN})
    alg = MemoizedVB(model, store, {}, np.random.default_rng(0), model.global_step(stats), ClusterIds.first(4),
                     moves=moves)
    visits, before = {}, {}  # globals at each batch's visit; the ELBO just before and after the decision
    original_plan, original_decide = MemoizedVB.plan_batch, ReassignMove.decide

    def plan_batch(self, b):  # each batch is planned under the globals its work runs with
        visits[b] = (self.globals, self.ids.uids.copy())
        return original_plan(self, b)

    def decide(self, run, schedule):
        before["elbo"] = run.elbo()
        original_decide(self, run, schedule)
        before["after"] = run.elbo()

    monkeypatch.setattr(MemoizedVB, "plan_batch", plan_batch)
    monkeypatch.setattr(ReassignMove, "decide", decide)
    accepted = 0
    for _ in range(6):
        result = None
        while result is None:
            result = alg.step()
        event = [e for e in alg.moves.events if e.lap == result.lap and e.move == "reassign"]
        if not (event and event[0].accepted):
            continue
        accepted += 1
        move = alg.moves.moves[0]
        assert int(event[0].target.split()[0]) == len(move.moved) > 0
        assert before["after"] - before["elbo"] == pytest.approx(event[0].gain, rel=1e-9)
        assert event[0].gain > 0
        total = None
        for b in range(store.n_batches):
            part = store.read_batch(b)
            globals_, uids = visits[b]
            _, local = model.local_step(part, globals_)
            r = np.array(local.resp.values)
            for mb, row, j in move.moved:  # j: a position at the decision, where the clusters are as at the visit
                if mb == b:
                    r[row] = 0.0
                    r[row, j] = 1.0
            order = [int(np.flatnonzero(uids == u)[0]) for u in alg.ids.uids]  # the lap's end sorts by size
            expected = brute_stats(model, part, r[:, order])
            for name in ("N", "H", "S"):
                np.testing.assert_allclose(alg.caches[b][name], expected[name], rtol=1e-7, atol=1e-7, err_msg=name)
            total = expected if total is None else total + expected
        assert elbo_of(model, total) == pytest.approx(alg.elbo(), rel=1e-9)
    store.close()
    assert accepted >= 1


def test_resume_with_reassignments_in_flight_is_exact(compose_cfg, tmp_path):
    word_ids, word_counts, doc_range, topics = topic_documents(n_docs=600, seed=1)
    write_documents(tmp_path / "docs.h5", word_ids, word_counts, doc_range, 3000, labels=topics, n_batches=3)
    cfg = compose_cfg("data=hdf5", f"data.path={tmp_path / 'docs.h5'}", "obs=mult", "obs.anneal_laps=0", "init.K=6",
                      "alg.n_laps=6", "alg.converge_thr=-1", "checkpoint_every=1", "seed=7")
    _, trace = assert_resume_is_exact(cfg, tmp_path)
    assert trace["reassign_tried"].sum() >= 1


@pytest.mark.parametrize("xprev", [False, True])
def test_tracked_atoms_of_a_sequence_batch_go_through_a_checkpoint(tmp_path, xprev):
    """A DP mixture of the steps of a sequence file tracks sequence batches, whose Xprev may be unset: they are
    written and read back as they were."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(5, 2))
    atoms = SeqBatch(X=X, seq_range=np.array([0, 2, 5]), Xprev=X + 1 if xprev else None, start=7, first_seq=2)
    tracked = Candidates(rows=np.array([1, 3]), gain=np.array([0.5, 0.2]), resp=np.ones((2, 3)) / 3, atoms=atoms)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        write_tree(f, {"tracked": tracked.to_tree()})
    with h5py.File(tmp_path / "c.h5", "r") as f:
        back = Candidates.from_tree(read_tree(f)["tracked"])
    assert type(back["atoms"]) is SeqBatch and back["atoms"].start == 7 and back["atoms"].first_seq == 2
    np.testing.assert_array_equal(back["atoms"].X, X)
    assert (back["atoms"].Xprev is None) != xprev
    np.testing.assert_array_equal(back["rows"], tracked["rows"])


def test_reassign_is_skipped_quietly_where_it_does_not_apply(compose_cfg, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="bnpvi")
    summary = runner.train(compose_cfg("obs=diag_gauss", "init.K=1", "data.n_atoms=600", "alg.n_laps=3",
                                       "model.temperature=1"),  # (a 3-lap annealed run would warn that it ended hot)
                           tmp_path / "run")
    assert summary["K"] >= 1
    said = [r for r in caplog.records if "moves.reassign applies to mixtures" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.DEBUG]  # alg=memo lists reassign by default: not worth a line
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
