"""Memo caches on disk (alg.cache=disk): the same run as with caches in memory, to the last bit; the cache
files a checkpoint names are sealed before it and never written after, so a run killed with SIGKILL resumes
exactly; the cache kind may change on resume."""
import json
import signal

import h5py
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from bnpvi.io.checkpoint import load_checkpoint
from bnpvi.io.run_dir import checkpoint_path, remove_partial_writes
from bnpvi.learn import runner
from bnpvi.learn.cache import DiskCaches, MemoryCaches, sealed_generations
from bnpvi.stats import SuffStats
from bnpvi.stats.suffstats import PER_CLUSTER, TOTAL
from setups import assert_same_run, start_and_stop

COMMON = ["alg.n_laps=5", "alg.converge_thr=-1", "seed=2", "checkpoint_every=2"]
CASES = {"dp_mix": ["init.K=1", "data.n_atoms=2000"],
         "hdp_hmm": ["model=hdp_hmm", "init.K=1", "data.n_seqs=8", "data.seq_length=200", "data.n_batches=4"],
         "hdp_topic_rounds": ["model=hdp_topic", "init.K=1", "data.n_docs=300", "alg.batches_per_round=2"]}


def stats(K, value):
    layout = {"N": ((), PER_CLUSTER), "S": ((2,), PER_CLUSTER), "n_atoms": ((), TOTAL)}
    zero = SuffStats.zeros(K, layout)
    return zero.with_fields(N=np.full(K, float(value)), S=np.full((K, 2), value + 0.5))


def assert_same_runs(a, b):
    pd.testing.assert_frame_equal(*(pd.read_csv(d / "trace.csv").drop(columns=["elapsed_s"]) for d in (a, b)),
                                  check_exact=True)
    sa, sb = ({k: v for k, v in json.loads((d / "summary.json").read_text()).items() if k != "elapsed_s"}
              for d in (a, b))
    assert sa == sb


def cache_files(run_dir):
    folder = checkpoint_path(run_dir).parent
    return sorted(p.name for p in folder.iterdir() if p.name != "latest.h5")


@pytest.mark.parametrize("case", sorted(CASES))
def test_caches_on_disk_give_the_run_of_caches_in_memory(compose_cfg, tmp_path, case):
    runner.train(compose_cfg(*COMMON, *CASES[case]), tmp_path / "memory")
    runner.train(compose_cfg(*COMMON, *CASES[case], "alg.cache=disk"), tmp_path / "disk")
    assert_same_runs(tmp_path / "memory", tmp_path / "disk")
    (name,) = cache_files(tmp_path / "disk")  # one sealed file, named by the final checkpoint
    state = load_checkpoint(tmp_path / "disk")["alg"]["caches"]
    assert name == f"caches.{int(state['generation'][0])}.h5" and set(state["generation"]) == {state["generation"][0]}
    assert cache_files(tmp_path / "memory") == []


def test_a_sealed_generation_is_never_written_again_and_goes_once_no_checkpoint_names_it(tmp_path):
    folder = checkpoint_path(tmp_path).parent
    caches = DiskCaches(3, folder)
    for b in range(3):
        caches[b] = stats(2, b)
    assert sealed_generations(folder) == set() and (folder / ".caches.0.h5.tmp").exists()
    first = caches.state()  # a checkpoint seals generation 0
    assert first["generation"].tolist() == [0, 0, 0] and sealed_generations(folder) == {0}
    caches[1] = stats(3, 7)  # into generation 1, the live file
    caches.committed()
    assert sealed_generations(folder) == {0}  # batches 0 and 2 are still there
    with h5py.File(folder / "caches.0.h5") as f:
        assert f["1"]["fields"]["N"][()].tolist() == [1.0, 1.0]
    assert caches[1].N.tolist() == [7.0, 7.0, 7.0] and caches[0].N.tolist() == [0.0, 0.0]
    caches.rewrite(lambda b, c: c.pad_to(3))
    second = caches.state()
    caches.committed()
    assert second["generation"].tolist() == [1, 1, 1] and sealed_generations(folder) == {1}
    caches[0] = stats(3, 9)
    caches.close()  # a run that stops without a checkpoint: no one needs the live file
    assert not (folder / ".caches.2.h5.tmp").exists()
    (folder / ".caches.2.h5.tmp").write_bytes(b"cut short")  # what a run killed mid-write leaves
    assert remove_partial_writes(tmp_path) == [folder / ".caches.2.h5.tmp"]
    resumed = DiskCaches(3, folder)
    resumed.load(second)
    assert [c.N[0] for c in resumed] == [0.0, 7.0, 2.0] and resumed.next_generation == 2
    in_memory = MemoryCaches(3, folder)
    in_memory.load(second)
    assert all(a.allclose(b, rtol=0, atol=0) for a, b in zip(in_memory, resumed))
    resumed.close()


def test_without_checkpoints_disk_caches_leave_nothing_behind(compose_cfg, tmp_path):
    runner.train(compose_cfg(*COMMON, *CASES["dp_mix"], "alg.cache=disk", "checkpoints=false"), tmp_path / "run")
    assert not checkpoint_path(tmp_path / "run").parent.exists()


def test_a_resume_may_move_the_caches_between_memory_and_disk(compose_cfg, tmp_path):
    # at T = 1: an annealed run's schedule is fitted to the laps it starts with (2 here, 5 for the reference)
    args = [*COMMON, *CASES["dp_mix"], "model.temperature=1"]
    runner.train(compose_cfg(*args), tmp_path / "ref")
    for first, then in (("memory", "disk"), ("disk", "memory")):
        cut = tmp_path / f"{first}-{then}"
        cfg = compose_cfg(*args, "alg.n_laps=2", f"alg.cache={first}")
        runner.train(cfg, cut)
        runner.resume(cut, OmegaConf.merge(cfg, {"alg": {"n_laps": 5, "cache": then}}))
        assert_same_runs(tmp_path / "ref", cut)
        assert len(cache_files(cut)) == (then == "disk")  # one sealed file, or none


def test_sigkill_during_a_disk_cache_run_then_resume_is_exact(tmp_path, env, bnpvi_train):
    """The killed run is the console command in a process; the reference and the resume run in this one."""
    args = ["data.n_atoms=10000", "data.n_batches=20", "alg.n_laps=12", "alg.converge_thr=-1", "checkpoint_every=3",
            "seed=4", "init.K=1", "alg.cache=disk", "plots=false"]
    assert bnpvi_train(*args, "hydra.run.dir=ref")[0] == 0
    run, code, _, _ = start_and_stop(tmp_path, env, "killed", signal.SIGKILL, args)
    assert code == -signal.SIGKILL, "the run finished before it could be killed"
    status, _, err = bnpvi_train(f"resume={run}")
    assert status == 0, err
    assert_same_run(tmp_path / "ref", run)
    assert [p for p in cache_files(run) if p.startswith(".")] == []


def test_a_rewrite_in_memory_replaces_the_caches_one_at_a_time():
    """Each old cache is let go before the next new one is made: a rewrite (a sort, an accepted move) never holds
    two copies of every cache (docs/mmsb.md, memory)."""
    caches = MemoryCaches(3)
    for b in range(3):
        caches[b] = stats(2, b)
    made = {}

    def edit(b, cache):
        if b > 0:
            assert caches[b - 1] is made[b - 1]
        made[b] = cache.reorder([1, 0])
        return made[b]

    caches.rewrite(edit)
    assert [caches[b] for b in range(3)] == [made[b] for b in range(3)]
