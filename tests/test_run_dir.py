"""A run directory is one run's: a refused start changes nothing in it, a resume goes on with the config its
checkpoint was made with, two runs never share it, and signals, a replaced data file or an unwritable location
stop with one line and leave nothing that looks like a result (bnpvi-train in this process)."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from bnpvi.cli import train as train_cli
from bnpvi.data.store import write_points
from bnpvi.errors import BnpviError
from bnpvi.io.checkpoint import load_checkpoint
from bnpvi.io.run_dir import LOCK, RunDirLock, RunState, checkpoint_path, run_state
from bnpvi.learn import runner
from bnpvi.learn.stop import StopRequest

SMALL = ["data.n_atoms=400", "alg.n_laps=3"]


def one_line_error(status, err, *fragments):
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1, (status, err)
    assert lines[0].startswith("bnpvi-train: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def snapshot(folder: Path) -> dict:
    """Every file below ``folder`` with its bytes (the lock file and logs left out)."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_refused_start_changes_nothing_of_the_run_and_its_resume_trains_the_same_model(bnpvi_train, tmp_path):
    status, _, err = bnpvi_train(*SMALL, "model.gamma=10", "hydra.run.dir=runs/a")
    assert status == 0, err
    run = tmp_path / "runs" / "a"
    before = snapshot(run)
    for override in ("model.gamma=1", "seed=5"):
        status, _, err = bnpvi_train(*SMALL, override, "hydra.run.dir=runs/a")
        one_line_error(status, err, "already holds a run", "resume=")
        assert snapshot(run) == before
    status, _, err = bnpvi_train("resume=runs/a", "alg.n_laps=5")
    assert status == 0, err
    assert OmegaConf.load(run / ".hydra" / "config.yaml").model.gamma == 10


def test_a_resume_refuses_a_saved_config_that_differs_from_its_checkpoints(bnpvi_train, tmp_path):
    assert bnpvi_train(*SMALL, "model.gamma=10", "hydra.run.dir=runs/a")[0] == 0
    saved = tmp_path / "runs" / "a" / ".hydra" / "config.yaml"
    saved.write_text(saved.read_text().replace("gamma: 10.0", "gamma: 1.0"))
    before = snapshot(tmp_path / "runs" / "a")
    status, _, err = bnpvi_train("resume=runs/a", "alg.n_laps=5")
    one_line_error(status, err, "model.gamma=1.0", "model.gamma=10.0", "checkpoint")
    assert snapshot(tmp_path / "runs" / "a") == before  # no .hydra/resumed-* left


def test_a_claimed_directory_refuses_a_second_run_and_is_left_untouched(bnpvi_train, tmp_path):
    run = tmp_path / "runs" / "b"
    claim = RunDirLock.claim(run)
    try:
        (run / "train.log").write_text("the other run's log\n")
        before = snapshot(run)
        status, _, err = bnpvi_train(*SMALL, "hydra.run.dir=runs/b")
        one_line_error(status, err, "in use by another bnpvi run", f"process {os.getpid()}")
        assert snapshot(run) == before
    finally:
        claim.release()
    assert not (run / LOCK).exists()
    assert bnpvi_train(*SMALL, "hydra.run.dir=runs/b")[0] == 0


def test_a_lock_is_held_by_one_claim_at_a_time(tmp_path):
    first = RunDirLock.claim(tmp_path / "d")
    with pytest.raises(BnpviError, match="in use by another bnpvi run"):
        RunDirLock.claim(tmp_path / "d")
    first.release()
    first.release()  # a second release does nothing
    RunDirLock.claim(tmp_path / "d").release()


def test_a_killed_process_leaves_no_claim(tmp_path):
    """The kernel drops an flock with its process: a SIGKILLed run's directory can be claimed again."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from bnpvi.io.run_dir import RunDirLock; "
                               f"c = RunDirLock.claim({str(tmp_path / 'd')!r}); print('held', flush=True); "
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BnpviError, match=f"process {holder.pid}"):
            RunDirLock.claim(tmp_path / "d")
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / "d" / LOCK).exists()  # left by the killed process, but not held
    RunDirLock.claim(tmp_path / "d").release()


def test_a_run_killed_before_its_first_checkpoint_starts_again_in_place(bnpvi_train, tmp_path):
    run = tmp_path / "runs" / "c"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 3\n")
    (run / "trace.csv").write_text("lap,elbo\n1,-5\n")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / ".latest.h5.x1.tmp").write_bytes(b"partial")
    assert run_state(run) is RunState.UNFINISHED
    status, _, err = bnpvi_train("resume=runs/c")
    one_line_error(status, err, "stopped before its first checkpoint", "start it again in place")
    assert not (run / "checkpoints" / ".latest.h5.x1.tmp").exists()  # the refused resume removed it
    status, _, err = bnpvi_train(*SMALL, "hydra.run.dir=runs/c")
    assert status == 0, err
    assert "starting it again in place" in err
    assert OmegaConf.load(run / ".hydra" / "config.yaml").seed == 0
    assert run_state(run) is RunState.RESUMABLE


def test_the_first_checkpoint_comes_after_lap_1(compose_cfg, tmp_path, monkeypatch):
    laps = []
    original = runner.Run.checkpoint

    def recording(self):
        laps.append(self.alg.lap)
        return original(self)
    monkeypatch.setattr(runner.Run, "checkpoint", recording)
    runner.train(compose_cfg("data.n_atoms=400", "alg.n_laps=4", "checkpoint_every=10", "moves=[]"), tmp_path / "r")
    assert laps == [1, 4]


def test_a_data_file_replaced_during_a_run_stops_it_at_the_next_checkpoint(compose_cfg, tmp_path):
    rng = np.random.default_rng(0)
    data, other = tmp_path / "data.h5", tmp_path / "other.h5"
    write_points(data, rng.normal(size=(300, 2)), n_batches=2)
    run = runner.start(compose_cfg("data=hdf5", f"data.path={data}", "alg.n_laps=3"), tmp_path / "r")
    try:
        run.alg.step()
        run.checkpoint()
        kept = checkpoint_path(run.run_dir).read_bytes()
        write_points(other, rng.normal(size=(300, 2)), n_batches=2)
        data.write_bytes(other.read_bytes())  # copied over in place
        with pytest.raises(BnpviError, match="was replaced during the run"):
            run.checkpoint()
        with pytest.raises(BnpviError, match="was replaced during the run"):
            run.finish()
        assert checkpoint_path(run.run_dir).read_bytes() == kept
        assert not (run.run_dir / "summary.json").exists()
    finally:
        run.close()


def test_a_signal_while_the_final_files_are_written_waits_for_them(compose_cfg, tmp_path, monkeypatch):
    run = runner.start(compose_cfg("data.n_atoms=400", "alg.n_laps=2"), tmp_path / "r")
    original = runner.write_model

    def write_then_signal(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)
    monkeypatch.setattr(runner, "write_model", write_then_signal)
    summary = runner.run_to_end(run)
    assert summary["laps"] == 2
    for name in ("summary.json", "model.h5", "assignments.h5", "checkpoints/latest.h5"):
        assert (run.run_dir / name).is_file(), name
    assert not list(run.run_dir.glob(".*.tmp"))


def test_a_second_signal_raises_in_a_library_call():
    stop = StopRequest(hard_stop=False)
    with stop.installed():
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signal == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_signal_ends_a_command_at_once():
    script = ("import os, signal, time\nfrom bnpvi.learn.stop import StopRequest\n"
              "with StopRequest(hard_stop=True, prog='bnpvi-train').installed():\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n    os.kill(os.getpid(), signal.SIGINT)\n"
              "    time.sleep(5)\nprint('not stopped')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("bnpvi-train: interrupted again")


@pytest.mark.parametrize("fresh", [True, False])
def test_an_interrupt_before_training_leaves_nothing(bnpvi_train, tmp_path, monkeypatch, fresh):
    if not fresh:
        assert bnpvi_train(*SMALL, "hydra.run.dir=runs/a")[0] == 0
        before = snapshot(tmp_path / "runs" / "a")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(runner, "start" if fresh else "reopen", interrupted)
    status, _, err = bnpvi_train(*SMALL, "hydra.run.dir=runs/a") if fresh else bnpvi_train("resume=runs/a", "alg.n_laps=5")
    assert status == 130
    assert err.strip() == "bnpvi-train: interrupted before the run started; nothing was kept"
    if fresh:
        assert not (tmp_path / "runs").exists()
    else:
        assert snapshot(tmp_path / "runs" / "a") == before


def test_an_output_location_that_cannot_be_written_is_one_line(bnpvi_train, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    one_line_error(*bnpvi_train(*SMALL, "hydra.run.dir=afile/run")[::2], "is a file, not a folder")
    monkeypatch.setattr(train_cli.os, "access", lambda path, mode: False)  # as on a read-only mount
    one_line_error(*bnpvi_train(*SMALL, "hydra.run.dir=ro/run")[::2], "cannot write", "read-only")
    one_line_error(*bnpvi_train(*SMALL)[::2], "cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_relative_data_path_resumes_from_another_directory(bnpvi_train, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    write_points(work / "pts.h5", np.random.default_rng(1).normal(size=(200, 2)), n_batches=2)
    monkeypatch.chdir(work)
    assert bnpvi_train("data.path=pts.h5", "alg.n_laps=2", "hydra.run.dir=run")[0] == 0
    assert load_checkpoint(work / "run")["meta"]["data_path"] == str(work / "pts.h5")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status, _, err = bnpvi_train(f"resume={work / 'run'}", "alg.n_laps=3")
    assert status == 0, err


def test_a_sweep_says_where_its_runs_went_without_logging(bnpvi_train, tmp_path):
    status, out, err = bnpvi_train("-m", *SMALL, "seed=1,2", "hydra/job_logging=disabled", "hydra.sweep.dir=sw")
    assert status == 0, err
    for job in ("0", "1"):
        assert f"run directory: {tmp_path / 'sw' / job}" in out


def test_a_foreign_checkpoint_is_refused_for_its_model(bnpvi_train, tmp_path):
    assert bnpvi_train(*SMALL, "hydra.run.dir=runs/gauss")[0] == 0
    assert bnpvi_train(*SMALL, "obs=diag_gauss", "hydra.run.dir=runs/diag")[0] == 0
    latest = checkpoint_path(tmp_path / "runs" / "gauss")
    latest.write_bytes(checkpoint_path(tmp_path / "runs" / "diag").read_bytes())
    status, _, err = bnpvi_train("resume=runs/gauss", "alg.n_laps=5")
    one_line_error(status, err, "obs.", "checkpoint was made with")
