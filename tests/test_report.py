"""bnpvi-report over a real sweep: a table, a CSV and plots; runs that did not finish are named, never skipped."""
import json
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from bnpvi.cli.report import main
from bnpvi.report.runs import read_run
from setups import cli_env

LAPS = 20
SWEEP_ARGS = ["-m", "model.gamma=1,10", "seed=1,2", f"alg.n_laps={LAPS}", "alg.converge_thr=-1", "checkpoint_every=2",
              "plots=false", "data.n_atoms=2000"]
"""Four jobs in Hydra's order: (gamma 1, seed 1), (1, 2), (10, 1), (10, 2); LAPS laps each, none converging early
(2,000 toy points: about a second a job, time enough to kill the last one between its third lap and its end)."""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return cli_env(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, env):
    """The sweep's directory, its last job killed (SIGKILL) after its first checkpoint and a few laps."""
    work = tmp_path_factory.mktemp("report")
    sweep_dir = work / "sweep"
    proc = subprocess.Popen([sys.executable, "-m", "bnpvi.cli.train", *SWEEP_ARGS, f"hydra.sweep.dir={sweep_dir}"],
                            cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = sweep_dir / "3"
    deadline = time.time() + 300
    while not ((last / "checkpoints" / "latest.h5").exists() and (last / "trace.csv").exists()
               and len((last / "trace.csv").read_text().splitlines()) > 3):
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and not (last / "summary.json").exists(), "job 3 finished too soon"
    return sweep_dir


def read_table(path):
    return pd.read_csv(path, dtype={"run": str}, float_precision="round_trip")


def report(capsys, *args):
    """``bnpvi-report ARGS``: (exit status, stdout, stderr lines)."""
    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


def test_a_sweep_with_a_killed_run_gives_the_table_the_csv_and_the_plots(sweep, capsys):
    code, out, err = report(capsys, sweep)
    assert code == 0, err
    out_dir = sweep / "report"
    table = read_table(out_dir / "report.csv")
    assert table["run"].tolist() == ["0", "1", "2", "3"]
    assert table["status"].tolist() == ["finished", "finished", "finished", "incomplete"]
    assert table["model.gamma"].tolist() == [1.0, 1.0, 10.0, 10.0] and table["seed"].tolist() == [1, 2, 1, 2]
    assert "alg.n_laps" not in table  # the same in every run: named in the footer instead
    assert (f"the same in every run: alg.n_laps={LAPS} alg.converge_thr=-1.0 checkpoint_every=2 plots=False "
            "data.n_atoms=2000") in out
    for job in range(3):  # a finished run: its summary
        summary = json.loads((sweep / str(job) / "summary.json").read_text())
        row = table.iloc[job]
        assert (row["elbo"], row["K"], row["laps"], row["seconds"]) == (summary["elbo"], summary["K"], LAPS,
                                                                         summary["elapsed_s"])
        assert row["ari"] == summary["ari"] and row["stop_reason"] == f"lap limit alg.n_laps={LAPS} reached"
    trace = pd.read_csv(sweep / "3" / "trace.csv")  # the killed run: its trace so far
    killed = table.iloc[3]
    assert 3 <= killed["laps"] == trace["lap"].iloc[-1] < LAPS and killed["elbo"] == trace["elbo"].iloc[-1]
    assert pd.isna(killed["stop_reason"]) and pd.isna(killed["ari"])
    # the broken run is named on stderr, with the way to continue it
    assert err == [f"bnpvi-report: incomplete run {sweep / '3'}: no summary.json, trace.csv at lap {killed['laps']}: "
                   f"killed, crashed or still running; continue it with bnpvi-train resume={sweep / '3'}"]
    # the printed table has the same rows; the footer counts them and flags the differing model settings
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["run", "status", "model.gamma", "seed", "hypers"]
    assert lines[4].split()[:4] == ["3", "incomplete", "10.0", "2"]
    assert table["hypers"].tolist() == [1, 1, 2, 2]
    assert f"4 runs under {sweep}: 3 finished, 1 incomplete" in out
    assert "model settings differ between runs (model.gamma)" in out and "ELBOs compare only within" in out
    assert f"wrote report.csv, elbo_K_time.png, elbo_K_laps.png in {out_dir}" in out
    for name in ("elbo_K_time.png", "elbo_K_laps.png"):
        assert (out_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_group_by_gives_mean_and_sd_over_the_finished_runs_and_sort_orders_the_rows(sweep, tmp_path, capsys):
    code, out, _ = report(capsys, sweep, "--group-by", "model.gamma", "--sort", "elbo", "--descending",
                          "--out", tmp_path)
    assert code == 0
    table = read_table(tmp_path / "report.csv")
    assert table["elbo"].is_monotonic_decreasing
    groups = pd.read_csv(tmp_path / "report_by_model.gamma.csv")
    assert groups["model.gamma"].tolist() == [1.0, 10.0]
    assert groups["runs"].tolist() == [2, 1] and groups["not_finished"].tolist() == [0, 1]
    finished = table[(table["status"] == "finished") & (table["model.gamma"] == 1.0)]
    assert groups["elbo_mean"].iloc[0] == pytest.approx(finished["elbo"].mean(), rel=1e-12)
    assert groups["elbo_sd"].iloc[0] == pytest.approx(finished["elbo"].std(), rel=1e-9, abs=1e-9)
    assert pd.isna(groups["elbo_sd"].iloc[1])  # one finished run
    assert "by model.gamma, over the finished runs:" in out
    assert (tmp_path / "elbo_K_laps.png").is_file()


def test_a_sort_by_a_setting_and_a_group_by_the_status(sweep, tmp_path, capsys):
    code, _, _ = report(capsys, sweep, "--sort", "seed", "--group-by", "status", "--out", tmp_path)
    assert code == 0
    assert read_table(tmp_path / "report.csv")["run"].tolist() == ["0", "2", "1", "3"]  # stable within a seed
    groups = pd.read_csv(tmp_path / "report_by_status.csv")
    assert groups[["status", "runs", "not_finished"]].values.tolist() == [["finished", 3, 0], ["incomplete", 0, 1]]


def test_a_run_given_twice_is_one_row_and_not_missing_from_its_sweep(sweep, tmp_path, capsys):
    code, out, err = report(capsys, sweep / "0", sweep, "--out", tmp_path)
    assert code == 0 and len(err) == 1 and "incomplete run" in err[0]
    assert read_table(tmp_path / "report.csv")["run"].tolist() == ["0", "1", "2", "3"]


def test_a_sweep_job_that_could_not_start_is_named(tmp_path, bnpvi_train, capsys):
    """bnpvi-train removes the directory of a run that fails at start-up (gamma -1), and the sweep stops there:
    the report finds both jobs from the sweep's multirun.yaml."""
    status, _, err = bnpvi_train("-m", "model.gamma=1,-1,5", "alg.n_laps=2", "plots=false", "hydra.sweep.dir=sweep")
    assert status == 2 and "model.gamma must be a number > 0" in err
    sweep_dir = tmp_path / "sweep"
    code, out, err = report(capsys, sweep_dir)
    assert code == 0
    table = read_table(sweep_dir / "report" / "report.csv")
    assert table["status"].tolist() == ["finished", "missing", "missing"]
    assert table["model.gamma"].tolist() == [1.0, -1.0, 5.0]
    assert len(err) == 2 and err[0].startswith(f"bnpvi-report: missing run {sweep_dir / '1'}: job 1 of the sweep")
    assert "`bnpvi-train model.gamma=-1 alg.n_laps=2 plots=False` says why" in err[0]
    assert "3 runs under" in out and "1 finished, 2 missing" in out


@pytest.mark.parametrize("state", ["interrupted", "resumed then killed", "failed"])
def test_what_a_run_directory_holds_gives_its_status(sweep, tmp_path, state):
    """The other ways a run can end, from a copy of a finished run: stopped by Ctrl-C (its summary says so),
    killed after a resume (its summary is older than its trace), or stopped before its first lap."""
    run = shutil.copytree(sweep / "0", tmp_path / "run", symlinks=True)
    summary = json.loads((run / "summary.json").read_text())
    if state == "interrupted":
        summary.update(laps=LAPS, stop_reason=f"interrupted at lap {LAPS} batch 2 (signal 2); continue with: ...")
    elif state == "resumed then killed":
        summary.update(laps=LAPS - 10)
    else:
        for name in ("summary.json", "trace.csv"):
            (run / name).unlink()
    if (run / "summary.json").exists():
        (run / "summary.json").write_text(json.dumps(summary))
    record = read_run(run)
    expected = {"interrupted": ("interrupted", f"interrupted at lap {LAPS} batch 2 (signal 2); continue it with "
                                               f"bnpvi-train resume={run}"),
                "resumed then killed": ("incomplete", f"resumed after lap {LAPS - 10}, no summary.json since, "
                                                      f"trace.csv at lap {LAPS}: killed, crashed or still running; "
                                                      f"continue it with bnpvi-train resume={run}"),
                "failed": ("failed", "no trace.csv: the job stopped (or is still starting) before its first lap; "
                                     "see its train.log")}[state]
    assert (record.status, record.problem) == expected
    assert record.overrides == {"model.gamma": 1.0, "seed": 1, "alg.n_laps": LAPS, "alg.converge_thr": -1.0,
                                "checkpoint_every": 2, "plots": False, "data.n_atoms": 2000}
    assert record.results.get("laps") == {"interrupted": LAPS, "resumed then killed": LAPS, "failed": None}[state]


@pytest.mark.parametrize("case", ["no such path", "a file", "no runs", "unknown sort column", "unknown group key",
                                  "descending alone"])
def test_bad_input_is_one_line_and_writes_nothing(sweep, tmp_path, capsys, case):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x\n")
    args, message = {
        "no such path": ([tmp_path / "nowhere"], f"{tmp_path / 'nowhere'} does not exist"),
        "a file": ([tmp_path / "file.txt"], "is not a directory"),
        "no runs": ([tmp_path / "empty"], f"no bnpvi runs under {tmp_path / 'empty'}"),
        "unknown sort column": ([sweep, "--sort", "gamma"], "--sort gamma: no such column or setting (the columns: "
                                                             "run, status, model.gamma, seed, hypers, elbo"),
        "unknown group key": ([sweep, "--group-by", "alg.lr"], "--group-by alg.lr: no such column or setting"),
        "descending alone": ([sweep, "--descending"], "--descending orders the rows of --sort COL; give --sort too"),
    }[case]
    out_dir = tmp_path / "out"
    code, out, err = report(capsys, *args, "--out", out_dir)
    assert code == 2 and out == ""
    assert len(err) == 1 and err[0].startswith("bnpvi-report: error: ") and message in err[0], err
    assert not out_dir.exists()


def test_a_resumed_run_is_reported_with_the_settings_of_its_resume(sweep, tmp_path, bnpvi_train, capsys):
    """A killed sweep job continued with resume=RUN_DIR and more laps: finished, with the new alg.n_laps."""
    run = shutil.copytree(sweep / "3", tmp_path / "3")
    status, _, err = bnpvi_train(f"resume={run}", f"alg.n_laps={LAPS + 2}")
    assert status == 0, err
    code, out, err = report(capsys, run)
    assert code == 0 and err == []
    row = read_table(run / "report" / "report.csv").iloc[0]
    assert (row["status"], row["laps"], row["stop_reason"]) == ("finished", LAPS + 2,
                                                                f"lap limit alg.n_laps={LAPS + 2} reached")
    assert read_run(run).overrides["alg.n_laps"] == LAPS + 2
    assert f"1 run under {tmp_path}: 1 finished" in out
