"""Rounds of parallel memoized VI with fewer batches than P (the last round of a lap that P does not divide) are
worked on in P pieces: a batch's pieces add up to the batch's summaries for every model, the cut depends on P
alone (the same run in this process and on workers), and rounds that track moves are never cut."""
import numpy as np
import pytest

from bnpvi.data.base import piece_range
from bnpvi.learn import runner
from bnpvi.learn.work import process_batch

CASES = {"dp_mix": ["model=dp_mix", "data.n_atoms=900"],
         "hdp_topic": ["model=hdp_topic", "data.n_docs=90", "model.warm_start=true"],
         "hdp_hmm": ["model=hdp_hmm", "data.n_seqs=9", "data.seq_length=60"],
         "hdp_mmsb": ["model=hdp_mmsb", "data.n_nodes=60"]}
COMMON = ["data=toy", "data.n_batches=3", "alg.n_laps=3", "alg.converge_thr=-1", "init.K=4", "moves=[]",
          "checkpoints=false"]


@pytest.mark.parametrize("lo, hi, n", [(0, 10, 3), (5, 7, 2), (3, 103, 7)])
def test_piece_ranges_cover_the_units_once_in_nearly_equal_parts(lo, hi, n):
    parts = [piece_range(lo, hi, i, n) for i in range(n)]
    assert parts[0][0] == lo and parts[-1][1] == hi
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    sizes = [b - a for a, b in parts]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("case", list(CASES))
def test_the_pieces_of_a_batch_add_up_to_its_summaries(compose_cfg, tmp_path, case):
    """Under the same globals, the summaries of a batch's 3 pieces (read as pieces from the file, each local
    step from its rows of the batch's warm start) add up to the whole batch's, and their warm starts stack
    to the batch's."""
    run = runner.start(compose_cfg(*COMMON, *CASES[case]), tmp_path / "run")
    try:
        alg = run.alg
        while alg.step() is None:
            pass
        model, globals_, store = alg.model, alg.globals, alg.store
        warm = alg.warm_for(1)
        whole = process_batch(model, globals_, store.read_batch(1), warm=warm)
        size = int(store.batch_sizes()[1])
        parts = []
        for i in range(3):
            lo, hi = piece_range(0, size, i, 3)
            batch = store.read_batch(1, (i, 3))
            assert batch.n_atoms == hi - lo
            parts.append(process_batch(model, globals_, batch, warm=None if warm is None else warm[lo:hi]))
        total = parts[0].stats + parts[1].stats + parts[2].stats
        assert total.allclose(whole.stats, rtol=1e-10, atol=1e-9)
        assert (whole.warm is not None) == (case == "hdp_topic")
        if whole.warm is not None:
            np.testing.assert_allclose(np.concatenate([p.warm for p in parts]), whole.warm, rtol=1e-10, atol=1e-12)
    finally:
        run.close()


def test_a_short_round_is_cut_into_p_pieces_and_joined_into_the_batchs_result(compose_cfg, tmp_path, monkeypatch):
    """3 batches in rounds of P = 2: the lap's second round (one batch) goes to the pool as 2 pieces, joined
    into the batch's summaries and warm start under that round's globals; the ELBO never decreases."""
    run = runner.start(compose_cfg(*COMMON, *CASES["hdp_topic"], "alg.batches_per_round=2"), tmp_path / "run")
    try:
        alg = run.alg
        sent, rounds = [], []
        pool_run, work = alg.pool.run, alg._work

        def recording_pool(model, globals_, jobs, schedule=None):
            sent.append([(job.b, job.piece) for job in jobs])
            return pool_run(model, globals_, jobs, schedule)

        def recording_work(jobs):
            results = work(jobs)
            rounds.append((alg.globals, jobs, results))
            return results
        monkeypatch.setattr(alg.pool, "run", recording_pool)
        monkeypatch.setattr(alg, "_work", recording_work)
        values = []
        for lap in range(3):
            while alg.step() is None:
                pass
            values.append(alg.elbo())
        assert [len(jobs) for jobs in sent] == [2, 2] * 3
        cut = sent[1::2]
        assert all(jobs[0][0] == jobs[1][0] and [piece for _, piece in jobs] == [(0, 2), (1, 2)] for jobs in cut)
        globals_, jobs, results = rounds[-1]
        assert len(jobs) == 1 and jobs[0].piece is None and jobs[0].warm is not None
        whole = process_batch(alg.model, globals_, alg.store.read_batch(jobs[0].b), warm=jobs[0].warm)
        assert results[0].stats.allclose(whole.stats, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(results[0].warm, whole.warm, rtol=1e-10, atol=1e-12)
        assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    finally:
        run.close()


def test_rounds_that_track_moves_are_not_cut(compose_cfg, tmp_path, monkeypatch):
    cfg = compose_cfg(*[a for a in COMMON if a != "moves=[]"], *CASES["dp_mix"], "alg.batches_per_round=2",
                      "moves=[merge,delete]", "init.K=8")
    run = runner.start(cfg, tmp_path / "run")
    try:
        alg = run.alg
        sent, pool_run = [], alg.pool.run

        def recording(model, globals_, jobs, schedule=None):
            sent.append([(job.piece, bool(job.plans)) for job in jobs])
            return pool_run(model, globals_, jobs, schedule)
        monkeypatch.setattr(alg.pool, "run", recording)
        for lap in range(3):
            while alg.step() is None:
                pass
        tracked = [jobs for jobs in sent if any(plans for _, plans in jobs)]
        assert tracked, "merges and deletes track in the rounds of laps 2 and 3"
        assert all(piece is None for jobs in tracked for piece, _ in jobs)
    finally:
        run.close()
