"""Progress while a run trains: a bar over the batches of each lap on a terminal (or when an estimator is
``verbose``), and the one log line per lap, unchanged, everywhere else; a bar per pass of a conversion."""
import io
import logging
import sys

import numpy as np
import pytest

import bnpvi
from bnpvi.learn import runner
from bnpvi.data.convert import convert
from bnpvi.data.progress import is_terminal, shown_on
from bnpvi.learn.progress import Progress


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def lap_lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.getMessage().startswith("lap")]


@pytest.fixture
def toy_cfg(compose_cfg):
    return compose_cfg("alg.n_laps=2", "alg.n_batches=3", "plots=false")


def test_a_terminal_shows_the_bar_with_k_elbo_and_seconds_per_lap(toy_cfg, tmp_path, caplog):
    stream = Terminal()
    with caplog.at_level(logging.INFO, logger="bnpvi"):
        runner.train(toy_cfg, tmp_path / "run", Progress(stream=stream))
    shown = stream.getvalue()
    assert "lap 1:" in shown and "lap 2:" in shown and "3/3" in shown and "batch" in shown
    assert "K=" in shown and "elbo=" in shown and "s/lap" in shown
    assert len(lap_lines(caplog)) == 2  # the log lines are still there


def test_elsewhere_only_the_lap_lines(toy_cfg, tmp_path, caplog):
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="bnpvi"):
        runner.train(toy_cfg, tmp_path / "run", Progress(stream=stream))
    assert stream.getvalue() == ""
    assert [line.split()[:2] for line in lap_lines(caplog)] == [["lap", "1"], ["lap", "2"]]


def test_quiet_logging_hides_the_bar_on_a_terminal(toy_cfg, tmp_path, caplog):
    stream = Terminal()
    with caplog.at_level(logging.ERROR, logger="bnpvi"):  # as hydra/job_logging=disabled leaves it
        runner.train(toy_cfg, tmp_path / "run", Progress(stream=stream))
    assert stream.getvalue() == "" and not lap_lines(caplog)


def test_is_terminal_of_files_and_closed_streams(tmp_path):
    assert is_terminal(Terminal()) and not is_terminal(io.StringIO())
    closed = open(tmp_path / "f", "w")
    closed.close()
    assert not is_terminal(closed) and not is_terminal(object())


@pytest.mark.parametrize("verbose", [True, False])
def test_verbose_estimator_shows_the_bar_on_a_terminal(verbose, monkeypatch):
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    X = np.random.default_rng(0).normal(size=(120, 2))
    bnpvi.DPMixture(n_laps=2, n_batches=2, verbose=verbose, random_state=0).fit(X)
    shown = stream.getvalue()
    assert ("lap 2:" in shown and "2/2" in shown and "elbo=" in shown) is verbose


def test_verbose_estimator_into_a_pipe_prints_the_lap_lines_without_the_bar(monkeypatch, caplog):
    """As the command line does: a file or pipe gets one line per lap, no bar."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    X = np.random.default_rng(0).normal(size=(120, 2))
    bnpvi.DPMixture(n_laps=2, n_batches=2, verbose=True, random_state=0).fit(X)
    assert len(lap_lines(caplog)) == 2
    assert "2/2" not in stream.getvalue() and "elbo=" not in stream.getvalue()


def test_conversion_shows_a_bar_per_pass_only_when_asked(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(50, 3)))
    stream = Terminal()
    with shown_on(stream):
        convert(tmp_path / "x.npy", tmp_path / "x.h5", shuffle_seed=0)
    assert "checking X" in stream.getvalue() and "writing X" in stream.getvalue()
    convert(tmp_path / "x.npy", tmp_path / "y.h5")
    assert capsys.readouterr().err == ""
