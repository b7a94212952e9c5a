"""Writes that fail (a full disk, by a fake): one line naming the file, no temporary file left, the last checkpoint
good, and HDF5 never told (it crashes the process once one of its writes has failed; bnpvi.data.writes)."""
import errno
import io

import numpy as np
import pytest

from bnpvi.cli import train as cli_train
from bnpvi.cli.data import main as data_main
from bnpvi.data import mapped, writes
from bnpvi.data.writes import check_written, new_h5
from bnpvi.errors import BnpviError
from bnpvi.io import tables, trace
from bnpvi.io.checkpoint import load_checkpoint
from bnpvi.learn import runner

NO_SPACE = "no space left on device"


class FullDisk(io.FileIO):
    """A file on a disk that has room for ``room`` bytes of it: a write beyond them fails with ENOSPC."""

    room = 0

    def write(self, data):
        free = self.room - self.tell()
        if free <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(memoryview(data)[:free])


def fill_disk(monkeypatch, module, name: str, room: int = 0) -> None:
    """Files whose name contains ``name`` that ``module`` opens for writing are on a full disk (``room`` bytes
    each)."""
    real_open = open

    def fake_open(path, mode="r", *args, **kwargs):
        if name not in str(path) or not any(c in mode for c in "wa+"):
            return real_open(path, mode, *args, **kwargs)
        raw = type("Full", (FullDisk,), {"room": room})(path, mode.replace("b", "").replace("t", ""))
        if kwargs.get("buffering") == 0:
            return raw
        buffered = io.BufferedRandom(raw) if "+" in mode else io.BufferedWriter(raw)
        return buffered if "b" in mode else io.TextIOWrapper(buffered, newline=kwargs.get("newline"))

    monkeypatch.setattr(module, "open", fake_open, raising=False)


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*.tmp"))


def test_hdf5_never_meets_the_failure_and_reads_back_what_it_wrote(monkeypatch, tmp_path):
    fill_disk(monkeypatch, writes, "out.h5", room=4096)
    X = np.arange(200_000, dtype=np.float64)
    message = f"^cannot write {tmp_path / 'out.h5'}: {NO_SPACE}$"
    with pytest.raises(BnpviError, match=message):  # raised once HDF5 has closed the file: the process lives on
        with new_h5(tmp_path / "out.h5") as f:
            data = f.create_dataset("X", data=X, chunks=(10_000,))
            f.flush()
            np.testing.assert_array_equal(data[:], X)  # the bytes the disk refused are read from memory
            with pytest.raises(BnpviError, match=message):  # a writer that streams blocks stops at the next one
                check_written(data)
    assert leftovers(tmp_path) == []


def test_a_failed_write_keeps_the_old_file(monkeypatch, tmp_path):
    (tmp_path / "out.h5").write_text("old")
    (tmp_path / "out.csv").write_text("old")
    fill_disk(monkeypatch, tables, "out.csv")
    with pytest.raises(BnpviError, match=f"^cannot write {tmp_path / 'out.csv'}: {NO_SPACE}$"):
        tables.write_table(tmp_path / "out.h5", [tables.Column("x", np.float64, "%g")], ["x"],
                           [type("Block", (), {"x": np.zeros(10)})], {}, {})
    assert (tmp_path / "out.h5").read_text() == (tmp_path / "out.csv").read_text() == "old"
    assert leftovers(tmp_path) == []


@pytest.fixture
def finished_run(compose_cfg, tmp_path):
    """A run of 3 laps on 600 toy points with a checkpoint after every lap (closed when it ends)."""
    return runner.start(compose_cfg("data.n_atoms=600", "alg.n_laps=3", "checkpoint_every=1", "plots=false"),
                        tmp_path / "run")


@pytest.mark.parametrize("module, name", [(writes, "assignments.h5"), (tables, "assignments.csv"),
                                          (writes, "model.h5"), (writes, "latest.h5")])
def test_a_full_disk_at_the_final_files_stops_the_run_on_one_line(monkeypatch, capsys, finished_run, module, name):
    run = finished_run
    monkeypatch.setattr(run, "finish", lambda *a, real=run.finish: fill_disk(monkeypatch, module, name) or real(*a))
    monkeypatch.setattr(cli_train, "START", cli_train.StartUp())  # what bnpvi-train's run has done, this test's own
    with pytest.raises(SystemExit) as exited:
        cli_train._train(run)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    target = run.run_dir / ("checkpoints/" + name if name == "latest.h5" else name)
    assert err == f"bnpvi-train: error: cannot write {target}: {NO_SPACE}\n"
    assert leftovers(run.run_dir) == [] and not (run.run_dir / "summary.json").exists()
    last = int(load_checkpoint(run.run_dir)["trace"]["lap"][-1])  # the last good checkpoint
    assert last < run.alg.lap if name == "latest.h5" else last == run.alg.lap


def test_a_full_disk_while_the_trace_is_written_stops_on_one_line(monkeypatch, tmp_path):
    table = trace.CsvTable(tmp_path / "trace.csv", ["lap"])
    fill_disk(monkeypatch, trace, "trace.csv")
    with pytest.raises(BnpviError, match=f"cannot write {tmp_path / 'trace.csv'}: {NO_SPACE}"):
        table.append({"lap": 1})


@pytest.fixture
def points_csv(tmp_path):
    path = tmp_path / "points.csv"
    np.savetxt(path, np.random.default_rng(0).normal(size=(5000, 3)), delimiter=",", header="a,b,c", comments="")
    return path


@pytest.mark.parametrize("module, name", [(writes, "points.h5"), (mapped, "spool-")])
def test_a_full_disk_stops_convert_on_one_line(monkeypatch, capsys, tmp_path, points_csv, module, name):
    fill_disk(monkeypatch, module, name, room=1000)
    assert data_main(["convert", str(points_csv), str(tmp_path / "points.h5")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("bnpvi-data: error: cannot write ") and err[0].endswith(NO_SPACE)
    assert (name == "points.h5") == (f"{tmp_path / 'points.h5'}:" in err[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["points.csv"]  # no output, temporary or scratch file
