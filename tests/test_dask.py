"""Batch work on Dask workers: the same runs as in one process, bit for bit (vb, sovb; memo for a given P on any
number of workers; P = 1 is plain memo), rounds keep memo's guarantees, moves stay exact, resume keeps P, and
a cluster that cannot serve the run fails on one line before the first lap."""
import json
import logging
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from threadpoolctl import threadpool_limits

distributed = pytest.importorskip("distributed", reason="Dask's distributed scheduler is not installed "
                                                        "(pip install 'bnpvi[cluster]')")

from bnpvi import DPMixture  # noqa: E402
from bnpvi.alloc import DPMixAlloc, HDPHMMAlloc  # noqa: E402
from bnpvi.data.store import BatchStore, write_points  # noqa: E402
from bnpvi.errors import BnpviError  # noqa: E402
from bnpvi.learn import dask_pool, runner  # noqa: E402
from bnpvi.learn.init import initial_stats  # noqa: E402
from bnpvi.learn.memo import MemoizedVB  # noqa: E402
from bnpvi.learn.pool import open_pool  # noqa: E402
from bnpvi.model import Model  # noqa: E402
from bnpvi.moves.base import Edit  # noqa: E402
from bnpvi.obs import make_obs  # noqa: E402
from bnpvi.stats import ClusterIds  # noqa: E402
from setups import GAUSS, HMM_BIRTH, four_clusters, moves_cfg, obs_cfg, two_regime_store, wide_points  # noqa: E402

COMMON = ["alg.n_laps=5", "alg.converge_thr=-1", "seed=3", "data.n_atoms=2000", "data.n_batches=6"]


@pytest.fixture(scope="module")
def scheduler():
    """The address of a local cluster of 2 single-threaded worker processes, shared by this module's tests."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def trace_of(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "trace.csv").drop(columns=["elapsed_s"])


def assert_same_runs(a: Path, b: Path) -> None:
    pd.testing.assert_frame_equal(trace_of(a), trace_of(b), check_exact=True)
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for summary in (sa, sb):
        summary.pop("elapsed_s")
    assert sa == sb


def test_vb_on_two_local_workers_is_vb_in_one_process_and_the_cluster_closes(compose_cfg, tmp_path):
    runner.train(compose_cfg("alg=vb", "init.K=6", *COMMON), tmp_path / "one")
    runner.train(compose_cfg("alg=vb", "init.K=6", "alg.workers=2", *COMMON), tmp_path / "two")
    assert_same_runs(tmp_path / "one", tmp_path / "two")
    assert not multiprocessing.active_children()  # the local cluster's worker processes are gone


def test_vb_on_two_workers_is_vb_in_one_process_where_blas_threads_split_the_sums(compose_cfg, tmp_path):
    # batches of 1,000 16-D atoms at K = 25: OpenBLAS splits Rᵀ Y between this process's 2 threads (a worker has 1)
    base = ["alg=vb", "data=hdf5", f"data.path={wide_points(tmp_path / 'x.h5')}", "obs=gauss", "init.K=25",
            "alg.n_laps=2", "alg.converge_thr=-1", "plots=false"]
    with threadpool_limits(2, user_api="blas"):
        runner.train(compose_cfg(*base), tmp_path / "one")
        runner.train(compose_cfg(*base, "alg.workers=2"), tmp_path / "two")
    assert_same_runs(tmp_path / "one", tmp_path / "two")  # before: 2e-16 apart after lap 1


def rounds_as_tasks(monkeypatch) -> list[int]:
    """Every actor round fails as if an actor's worker had died, so every round runs as tasks; returns the
    list to which each failed actor round appends its number of jobs."""
    failed = []

    def actor_lost(self, model, globals_, jobs, tracker):
        failed.append(len(jobs))
        raise OSError("the actor's worker is gone")

    monkeypatch.setattr(dask_pool.DaskPool, "_actor_round", actor_lost)
    return failed


def test_rounds_whose_actors_fail_run_as_tasks_with_the_same_result(compose_cfg, tmp_path, scheduler, monkeypatch):
    args = ["init.K=1", f"alg.scheduler={scheduler}", "alg.batches_per_round=2", *COMMON]
    runner.train(compose_cfg(*args), tmp_path / "actors")
    failed = rounds_as_tasks(monkeypatch)
    runner.train(compose_cfg(*args), tmp_path / "tasks")
    assert len(failed) >= 15  # every round of 5 laps (3 or more a lap) ran as tasks
    assert_same_runs(tmp_path / "actors", tmp_path / "tasks")


def test_a_worker_of_two_threads_gets_its_rounds_as_tasks(compose_cfg, tmp_path, monkeypatch):
    """The actors of a worker share one thread: on a worker of two, every round runs as two tasks, and the run
    is the one in this process."""
    args = ["init.K=1", "alg.batches_per_round=2", *COMMON]
    runner.train(compose_cfg(*args), tmp_path / "one")
    actor_rounds = []
    monkeypatch.setattr(dask_pool.DaskPool, "_actor_round", lambda self, *a: actor_rounds.append(1))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=":0") as cluster:
        runner.train(compose_cfg(*args, f"alg.scheduler={cluster.scheduler_address}"), tmp_path / "two_threads")
    assert not actor_rounds
    assert_same_runs(tmp_path / "one", tmp_path / "two_threads")


def test_a_round_whose_tasks_were_forgotten_is_sent_again(compose_cfg, tmp_path, scheduler, monkeypatch):
    """When the scheduler forgets a round's tasks (a scattered input went with a worker killed while it was
    being sent), the pool sends the inputs and the round again, and the run ends where an undisturbed one does."""
    args = ["init.K=1", f"alg.scheduler={scheduler}", *COMMON]
    runner.train(compose_cfg(*args), tmp_path / "undisturbed")
    rounds_as_tasks(monkeypatch)
    gather, calls = distributed.Client.gather, []

    def forgets_the_third_round(self, futures, *rest, **options):
        calls.append(len(futures))
        if len(calls) == 3:
            raise distributed.client.FutureCancelledError("bnpvi-round-2-0", "already forgotten")
        return gather(self, futures, *rest, **options)

    monkeypatch.setattr(distributed.Client, "gather", forgets_the_third_round)
    runner.train(compose_cfg(*args), tmp_path / "disturbed")
    assert len(calls) > 3
    assert_same_runs(tmp_path / "undisturbed", tmp_path / "disturbed")


def test_sovb_on_dask_workers_is_sovb_in_one_process(compose_cfg, tmp_path, scheduler):
    runner.train(compose_cfg("alg=sovb", "init.K=6", *COMMON), tmp_path / "one")
    runner.train(compose_cfg("alg=sovb", "init.K=6", f"alg.scheduler={scheduler}", *COMMON), tmp_path / "two")
    assert_same_runs(tmp_path / "one", tmp_path / "two")


@pytest.mark.parametrize("case", [["init.K=1", "model.temperature=1"], ["model=hdp_topic", "init.K=1", "data.n_docs=300"],
                                  ["model=hdp_hmm", "init.K=1", "data.n_seqs=8", "data.seq_length=200",
                                   "data.n_batches=4"]], ids=["dp_mix", "hdp_topic", "hdp_hmm"])
def test_memo_in_rounds_of_two_is_the_same_on_one_and_two_workers_and_twice(compose_cfg, tmp_path, scheduler, case):
    """Births, merges and deletes on (alg=memo's default); P = 2 in this process, then twice on 2 workers."""
    cfg = compose_cfg(*COMMON, "alg.batches_per_round=2", *case)
    runner.train(cfg, tmp_path / "one")
    for name in ("two", "again"):
        cfg.alg.scheduler = scheduler
        runner.train(cfg, tmp_path / name)
        assert_same_runs(tmp_path / "one", tmp_path / name)
    trace = trace_of(tmp_path / "one")
    assert trace["birth_accepted"].sum() > 0
    assert np.all(np.diff(trace["elbo"].to_numpy()[1:]) >= -1e-9 * np.abs(trace["elbo"].to_numpy()[2:]))


@pytest.mark.parametrize("moves", ["[]", "[birth,merge,delete]"])
def test_rounds_cut_into_pieces_are_the_same_on_two_workers(compose_cfg, tmp_path, scheduler, moves):
    """5 batches in rounds of 2: every lap's last round (one batch) is worked on in 2 pieces, on 2 workers as
    in this process (with moves, in the rounds that track none)."""
    cfg = compose_cfg(*COMMON, "data.n_batches=5", "alg.batches_per_round=2", "model=hdp_topic", "init.K=4",
                      "data.n_docs=300", "model.warm_start=true", f"moves={moves}")
    runner.train(cfg, tmp_path / "one")
    cfg.alg.scheduler = scheduler
    runner.train(cfg, tmp_path / "two")
    assert_same_runs(tmp_path / "one", tmp_path / "two")


def test_a_tempered_mixture_is_the_same_on_two_workers(compose_cfg, tmp_path, scheduler):
    """The model of a tempered lap (model.temperature) goes to the workers with the round: the same run."""
    cfg = compose_cfg(*COMMON, "alg.batches_per_round=2", "init.K=1", "model.temperature=20",
                      "model.temperature_laps=4")
    runner.train(cfg, tmp_path / "one")
    cfg.alg.scheduler = scheduler
    runner.train(cfg, tmp_path / "two")
    assert_same_runs(tmp_path / "one", tmp_path / "two")
    assert trace_of(tmp_path / "one")["temperature"].iloc[0] == 20.0


def test_scattered_globals_give_the_same_run_as_globals_inside_the_tasks(compose_cfg, tmp_path, scheduler,
                                                                       monkeypatch):
    """Rounds run as tasks: large globals are scattered to the workers first, small ones travel in the tasks:
    the same run."""
    cfg = compose_cfg(*COMMON, "alg.batches_per_round=2", "model=hdp_topic", "init.K=1", "data.n_docs=300",
                      f"alg.scheduler={scheduler}")
    rounds_as_tasks(monkeypatch)
    runner.train(cfg, tmp_path / "inline")
    scattered = []
    monkeypatch.setattr(dask_pool, "INLINE_BYTES", -1)
    monkeypatch.setattr(dask_pool.DaskPool, "_scatter", lambda self, value, scatter=dask_pool.DaskPool._scatter:
                        scattered.append(type(value).__name__) or scatter(self, value))
    runner.train(cfg, tmp_path / "scattered")
    assert "Globals" in scattered
    assert_same_runs(tmp_path / "inline", tmp_path / "scattered")


def test_rounds_of_one_on_two_workers_are_plain_memo(compose_cfg, tmp_path, scheduler):
    runner.train(compose_cfg(*COMMON, "init.K=1"), tmp_path / "plain")
    runner.train(compose_cfg(*COMMON, "init.K=1", f"alg.scheduler={scheduler}", "alg.batches_per_round=1"),
                 tmp_path / "rounds")
    assert_same_runs(tmp_path / "plain", tmp_path / "rounds")


def memo_alg(path, K, moves=None, P=3, pool=None, seed=0):
    store = BatchStore.open(path)
    model = Model(DPMixAlloc(2.0), make_obs(obs_cfg("gauss"), store.D, store.moments()))
    rng = np.random.default_rng(seed)
    init = OmegaConf.create({"name": "kmeanspp", "K": K, "n_samples": 1000, "n_trials": None, "kmeans_iters": 0})
    stats = initial_stats(model, store, init, rng, K)
    return store, MemoizedVB(model, store, {}, rng, model.global_step(stats), ClusterIds.first(K), moves=moves,
                             pool=pool, batches_per_round=P)


def test_the_elbo_never_decreases_from_round_to_round_without_moves(tmp_path):
    X, _ = four_clusters(n=1400, seed=2)
    write_points(tmp_path / "d.h5", X, n_batches=7)
    store, alg = memo_alg(tmp_path / "d.h5", K=10, P=3)
    values = []
    while alg.lap < 6:
        assert alg.step() is None or alg.pos == 0
        if alg.lap >= 1:
            values.append(alg.elbo())
            assert alg.aggregate.allclose(alg.cache_total(), rtol=1e-9, atol=1e-7)
    store.close()
    values = np.array(values)
    assert len(values) > 5 * 3  # rounds of 3, 3 and 1 batches
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))


def recorded_edits(monkeypatch) -> list[tuple[float, float]]:
    """(ELBO before, ELBO after) of every change of the cluster set a run applies."""
    edits = []
    original = MemoizedVB.apply

    def apply(self, edit: Edit):
        before = self.elbo()
        original(self, edit)
        edits.append((before, self.elbo()))
    monkeypatch.setattr(MemoizedVB, "apply", apply)
    return edits


@pytest.mark.parametrize("K, moves, wanted", [
    (1, moves_cfg(birth=True, merge=True, delete=True), {"birth"}),
    (12, moves_cfg(merge=True, delete=True, **{"delete.max_size_frac": 0.3, "merge.start_lap": 4}), {"merge", "delete"})])
def test_with_moves_in_rounds_every_change_raises_the_whole_data_elbo(tmp_path, monkeypatch, K, moves, wanted):
    """Rounds of 2 of 3 batches on data of 4 clusters (the runs of test_moves' cache check): every accepted move
    (and every sort) leaves the ELBO of the aggregate, which stays the sum of the caches, at least where it was."""
    X, _ = four_clusters(n=900, seed=3)
    write_points(tmp_path / "d.h5", X, n_batches=3)
    edits = recorded_edits(monkeypatch)
    store, alg = memo_alg(tmp_path / "d.h5", K=K, moves=moves, P=2)
    while alg.lap < 8:
        alg.step()
        assert alg.aggregate.allclose(alg.cache_total(), rtol=1e-9, atol=1e-7)
    store.close()
    accepted = [e for e in alg.moves.events if e.accepted]
    assert wanted <= {e.move for e in accepted}
    assert len(edits) >= len(accepted) and all(after >= before - 1e-9 * abs(before) for before, after in edits)
    assert all(e.gain > 0 for e in accepted)


def test_hmm_births_in_a_round_are_judged_again_at_its_end_and_raise_the_elbo(tmp_path, monkeypatch):
    """Both batches of the two-regime sequences in one round: the births each one's work accepted are applied
    at the round's end only if they still raise the whole-data ELBO against the other batch's new cache."""
    store = BatchStore.open(two_regime_store(tmp_path))
    model = Model(HDPHMMAlloc(gamma=5.0, alpha=0.5, start_alpha=5.0, sticky_kappa=10.0), make_obs(GAUSS, 2, None))
    stats = sum((model.hard_stats(store.read_batch(b), np.zeros(store.read_batch(b).n_atoms, dtype=np.int64), 1)
                 for b in range(store.n_batches)), model.empty_stats(1))
    edits = recorded_edits(monkeypatch)
    alg = MemoizedVB(model, store, {}, np.random.default_rng(1), model.global_step(stats), ClusterIds.first(1),
                     OmegaConf.create({"birth": HMM_BIRTH}), batches_per_round=2)
    values = []
    while alg.lap < 5:
        alg.step()
        values.append(alg.elbo())
        assert alg.cache_total().allclose(alg.aggregate, rtol=1e-9, atol=1e-9)
    store.close()
    assert any(e.move == "birth" and e.accepted for e in alg.moves.events)
    assert all(after > before for before, after in edits[:1])  # the first edit is a birth
    assert all(after >= before - 1e-9 * abs(before) for before, after in edits)
    assert np.all(np.diff(values[1:]) >= -1e-9 * np.abs(values[2:]))


def test_resume_may_move_the_work_to_dask_and_keeps_the_rounds(compose_cfg, tmp_path, scheduler):
    # at T = 1: an annealed run's schedule is fitted to the laps it starts with (2 here, 5 for the reference)
    cfg = compose_cfg(*COMMON, "init.K=1", "alg.batches_per_round=2", "model.temperature=1")
    runner.train(cfg, tmp_path / "ref")
    short = compose_cfg(*COMMON, "init.K=1", "alg.batches_per_round=2", "model.temperature=1", "alg.n_laps=2")
    runner.train(short, tmp_path / "cut")
    moved = OmegaConf.merge(short, {"alg": {"n_laps": 5, "scheduler": scheduler, "batches_per_round": None}})
    runner.resume(tmp_path / "cut", moved)  # P is the run's own: 2
    assert_same_runs(tmp_path / "ref", tmp_path / "cut")
    other = OmegaConf.merge(moved, {"alg": {"n_laps": 7, "batches_per_round": 3}})
    with pytest.raises(BnpviError, match="batches_per_round=3 differs from the 2 batches per round"):
        runner.resume(tmp_path / "cut", other)


def test_the_estimators_take_a_scheduler(scheduler):
    X, _ = four_clusters(n=600, seed=1)
    plain = DPMixture(random_state=0, n_laps=4, n_batches=3).fit(X)
    on_dask = DPMixture(random_state=0, n_laps=4, n_batches=3, scheduler=scheduler, batches_per_round=1).fit(X)
    assert plain.elbo_ == on_dask.elbo_
    np.testing.assert_array_equal(plain.predict(X), on_dask.predict(X))


def test_an_unreachable_scheduler_fails_on_one_line_and_leaves_no_run(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setattr(dask_pool, "CONNECT_TIMEOUT", 1)
    with pytest.raises(BnpviError, match=r"cannot reach the Dask scheduler at alg.scheduler=tcp://127.0.0.1:9") as err:
        runner.start(compose_cfg(*COMMON, "alg.scheduler=tcp://127.0.0.1:9"), tmp_path / "run")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_workers_that_cannot_read_the_data_file_fail_on_one_line(compose_cfg, tmp_path, scheduler, monkeypatch):
    """A relative data path means another file to workers that run in another directory."""
    X, _ = four_clusters(n=300)
    write_points(tmp_path / "here.h5", X, n_batches=3)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BnpviError, match="Dask worker .* cannot read the data file here.h5") as err:
        runner.start(compose_cfg("data=hdf5", "data.path=here.h5", f"alg.scheduler={scheduler}"), tmp_path / "run")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_without_dask_more_workers_fail_on_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "bnpvi.learn.dask_pool", None)
    with pytest.raises(BnpviError, match=r"alg.workers=2 needs Dask's distributed scheduler: pip install 'bnpvi\[cluster\]'"):
        open_pool(OmegaConf.create({"workers": 2}), None)


def test_more_threads_than_cores_are_refused(tmp_path):
    X, _ = four_clusters(n=300)
    with BatchStore.open(write_points(tmp_path / "d.h5", X, n_batches=3)) as store:
        with pytest.raises(BnpviError, match="exceed the .* cores of this machine"):
            open_pool(OmegaConf.create({"workers": 2, "threads_per_worker": os.cpu_count()}), store)


# ------------------------------------------------------- a real scheduler and workers
def dask_process(*args, cwd):
    return subprocess.Popen([shutil.which("dask"), *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ))


def test_a_worker_killed_mid_lap_changes_nothing(compose_cfg, tmp_path):
    """``dask scheduler`` and two ``dask worker`` processes (no nanny) on 127.0.0.1; a run through alg.scheduler,
    one worker killed with SIGKILL during lap 3: the round its actor was in runs again as tasks, on the other
    worker, the actors are made again there, and the run ends as an undisturbed run does."""
    args = [*COMMON, "init.K=1", "alg.n_laps=6", "data.n_atoms=60000", "data.n_batches=12",
            "alg.batches_per_round=2"]
    runner.train(compose_cfg(*args), tmp_path / "ref")
    file = tmp_path / "scheduler.json"
    procs = [dask_process("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                          "--scheduler-file", str(file), cwd=tmp_path)]
    try:
        deadline = time.time() + 60
        while not (file.exists() and file.read_text().strip().endswith("}")):  # the scheduler writes it in parts
            assert time.time() < deadline
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        procs += [dask_process("worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                               "--host", "127.0.0.1", cwd=tmp_path) for _ in range(2)]
        with distributed.Client(address) as client:
            client.wait_for_workers(2, timeout=60)
        killed = threading.Event()

        def kill_one_worker_in_lap_3():
            trace = tmp_path / "run" / "trace.csv"
            while not (trace.exists() and len(trace.read_text().splitlines()) >= 3):
                time.sleep(0.005)
            procs[1].send_signal(signal.SIGKILL)
            killed.set()

        watcher = threading.Thread(target=kill_one_worker_in_lap_3, daemon=True)
        watcher.start()
        runner.train(compose_cfg(*args, f"alg.scheduler={address}"), tmp_path / "run")
        assert killed.is_set() and procs[1].wait(timeout=10) == -signal.SIGKILL
        assert_same_runs(tmp_path / "ref", tmp_path / "run")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("before, after", [(logging.INFO, logging.WARNING), (logging.NOTSET, logging.WARNING),
                                           (logging.DEBUG, logging.DEBUG), (logging.ERROR, logging.ERROR)])
def test_dask_logging_is_quiet_unless_asked_for(monkeypatch, before, after):
    """Dask's INFO records stay out of a run's output; a level chosen for them (hydra.verbose) is kept."""
    from bnpvi.learn.dask_pool import quiet_dask_logging

    dask_log = logging.getLogger("distributed")
    monkeypatch.setattr(dask_log, "level", before)
    quiet_dask_logging()
    assert dask_log.level == after
