"""Sweeps through Hydra's launcher plugins (the ``cluster`` extra): every job a normal, resumable run directory."""
import json

import pandas as pd
import pytest

from bnpvi.report.runs import collect_runs
from setups import cli_env, train_command

RUN_ARGS = ["alg.n_laps=3", "plots=false", "model.temperature=1"]  # at T = 1: an annealed run's schedule is fitted
# to the laps it starts with, so a run of 3 laps continued to 5 would not be the run of 5 laps


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return cli_env(tmp_path_factory.mktemp("cache"))


def finished_jobs(sweep_dir, seeds):
    """The sweep's jobs in order, each checked to be a finished run of its seed."""
    records, warnings = collect_runs([sweep_dir])
    assert warnings == [] and [r.path for r in records] == [sweep_dir / str(i) for i in range(len(seeds))]
    for record, seed in zip(records, seeds):
        assert record.status == "finished" and record.overrides["seed"] == seed, record.problem
        assert record.results["laps"] == 3 and record.trace["lap"].tolist() == [1, 2, 3]
        assert json.loads((record.path / "summary.json").read_text())["stop_reason"] == \
            "lap limit alg.n_laps=3 reached"
    return records


def trace_without_times(run_dir):
    return pd.read_csv(run_dir / "trace.csv").drop(columns=["elapsed_s"])


def test_the_joblib_launcher_runs_a_sweep_of_resumable_runs(tmp_path, env, bnpvi_train):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="hydra-joblib-launcher is not installed "
                                                                      "(pip install '.[cluster]')")
    proc = train_command(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=1,2", *RUN_ARGS,
                          "hydra.sweep.dir=sweep"], tmp_path, env)
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr
    sweep_dir = tmp_path / "sweep"
    finished_jobs(sweep_dir, [1, 2])
    # a job's directory continues as any run does, and ends where a run of 5 laps from the start ends
    for args in (["resume=sweep/1", "alg.n_laps=5"],
                 ["seed=2", "alg.n_laps=5", "plots=false", "model.temperature=1", "hydra.run.dir=straight"]):
        status, _, err = bnpvi_train(*args)  # (in this process)
        assert status == 0, err
    pd.testing.assert_frame_equal(trace_without_times(sweep_dir / "1"), trace_without_times(tmp_path / "straight"),
                                  check_exact=True)


def test_the_submitit_local_launcher_runs_a_sweep(tmp_path, env):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher is not installed "
                                                                        "(pip install '.[cluster]')")
    proc = train_command(["-m", "hydra/launcher=submitit_local", "seed=1,2", *RUN_ARGS, "hydra.sweep.dir=sweep"],
                         tmp_path, env)
    assert "Submitit 'local' sweep output dir : sweep" in proc.stdout + proc.stderr
    sweep_dir = tmp_path / "sweep"
    records = finished_jobs(sweep_dir, [1, 2])
    assert list((sweep_dir / ".submitit").glob("*/*_log.out"))  # each job ran as its own submitit job
    for record in records:
        assert (record.path / "checkpoints" / "latest.h5").is_file() and (record.path / "model.h5").is_file()


def test_a_launcher_that_is_not_installed_is_one_line_and_writes_nothing(tmp_path, bnpvi_train):
    status, out, err = bnpvi_train("-m", "hydra/launcher=slurm", "seed=1,2")
    assert status == 2 and out == ""
    (line,) = err.splitlines()  # the launchers listed are those installed here
    assert line.startswith("bnpvi-train: error: hydra/launcher=slurm is not an installed launcher (the launchers: "
                           "basic") and line.endswith("; the extra bnpvi[cluster] adds joblib, submitit_local and "
                                                      "submitit_slurm")
    assert list(tmp_path.iterdir()) == []
