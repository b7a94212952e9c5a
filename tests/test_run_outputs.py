"""What a run reports about itself: K (clusters that hold mass) beside K_total, and annealed laps marked, settled
and shaded (docs/outputs.md, bnpvi/learn/runner.py, bnpvi/io/plots.py, bnpvi/report/plots.py)."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import bnpvi
from bnpvi.cli.report import main as report_main
from bnpvi.data.store import write_points
from bnpvi.io import plots
from bnpvi.io.trace import CsvTable, clusters_holding_mass
from bnpvi.learn import runner
from bnpvi.report import plots as report_plots
from setups import TOPICS, compose


@pytest.fixture(scope="module")
def blobs(tmp_path_factory):
    """The issue's three blobs six standard deviations apart, 300 points each."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 1.0, size=(300, 2)) for c in ([0, 0], [6, 0], [0, 6])])
    return write_points(tmp_path_factory.mktemp("blobs") / "points.h5", X, n_batches=3)


def lines(caplog, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]


# ------------------------------------------------------------------ K
def test_K_counts_the_clusters_that_hold_mass_and_K_total_every_cluster(compose_cfg, blobs, tmp_path, caplog):
    """alg=vb init.K=5 on three blobs ends with two empty clusters: the old code said K 5 everywhere."""
    cfg = compose_cfg("data=hdf5", f"data.path={blobs}", "alg=vb", "init.K=5")
    with caplog.at_level(logging.INFO, logger="bnpvi"):
        summary = runner.train(cfg, tmp_path / "run")
    counts = np.array(summary["counts"])
    assert (summary["K"], summary["K_total"]) == (3, 5) and np.sum(counts < 0.01) == 2, counts
    assert len(summary["uids"]) == len(counts) == 5  # the per-cluster lists keep every cluster
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert (trace["K_total"] == 5).all() and trace["K"].iloc[-1] == 3 and trace["K"].iloc[0] == 5
    assert lines(caplog, f"lap {summary['laps']:4d}")[0].split("  K ")[1].startswith("  3 of 5")
    assert " K 3 of 5, " in lines(caplog, "done:")[0]
    fitted = bnpvi.load(tmp_path / "run")  # the estimators' K is the same, their arrays as they were
    assert (fitted.n_components_, fitted.n_components_total_) == (3, 5)
    assert fitted.weights_.shape == (5,) and fitted.cluster_ids_.shape == (5,)
    assert "K=3, K_total=5" in repr(fitted)
    table_dir = tmp_path / "report"
    assert report_main([str(tmp_path / "run"), "--out", str(table_dir)]) == 0
    assert pd.read_csv(table_dir / "report.csv")["K"].tolist() == [3]


def test_K_of_a_memoized_run_with_moves_is_its_truncation(compose_cfg, blobs, tmp_path):
    summary = runner.train(compose_cfg("data=hdf5", f"data.path={blobs}", "plots=false"), tmp_path / "run")
    assert summary["K"] == summary["K_total"] == 3
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert (trace["K"] == trace["K_total"]).all()


def test_clusters_holding_mass_uses_the_vanishing_mass():
    from bnpvi.moves.base import VANISHING_MASS

    assert VANISHING_MASS == 0.01
    assert clusters_holding_mass([300.0, 0.01, 0.0099, 0.0]) == 2 and clusters_holding_mass([]) == 0


def test_a_trace_from_a_checkpoint_before_K_total_takes_it_from_K():
    columns = ["lap", "K", "K_total", "annealed", "elbo_settled"]
    rows = CsvTable.rows_from_arrays({"lap": np.array([1.0, 2.0]), "K": np.array([5.0, 4.0])}, columns)
    assert [row["K_total"] for row in rows] == [5, 4] and isinstance(rows[0]["K_total"], int)
    assert all(np.isnan(row["annealed"]) and np.isnan(row["elbo_settled"]) for row in rows)


# ------------------------------------------------------------------ annealed laps
@pytest.fixture(scope="module")
def annealed_run(blobs, tmp_path_factory):
    """The default mixture run (births from one cluster, annealed from T = 30 over 10 laps), with its log."""
    cfg = compose("data=hdf5", f"data.path={blobs}", "alg.n_laps=20")
    run_dir = tmp_path_factory.mktemp("annealed") / "run"
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger("bnpvi")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        summary = runner.train(cfg, run_dir)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return run_dir, summary, [r.getMessage() for r in records]


def test_annealed_laps_are_marked_explained_once_and_settled(annealed_run):
    run_dir, _, messages = annealed_run
    trace = pd.read_csv(run_dir / "trace.csv")
    annealed = trace["annealed"].to_numpy() == 1
    np.testing.assert_array_equal(annealed, trace["temperature"].to_numpy() > 1.0)
    assert annealed[:6].all() and not annealed[-5:].any()
    np.testing.assert_array_equal(trace.loc[~annealed, "elbo_settled"], trace.loc[~annealed, "elbo"])
    # the annealed laps' ELBO falls by an order of magnitude; the settled one is on the scale of the later laps
    settled = trace["elbo_settled"].to_numpy()
    assert trace["elbo"].iloc[0] > 5 * trace["elbo"].iloc[-1]
    assert np.all(settled[annealed] < settled[~annealed].max())
    explained = [i for i, m in enumerate(messages) if m.startswith("laps marked 'annealed'")]
    first_lap = next(i for i, m in enumerate(messages) if m.startswith("lap    1"))
    assert explained == [first_lap - 1] and "not comparable" in messages[explained[0]]
    lap_lines = [m for m in messages if m.startswith("lap ")]
    for line, row in zip(lap_lines, trace.itertuples()):
        assert (f"annealed T {row.temperature:.3g}, settled elbo {row.elbo_settled:.10g}" in line) == bool(row.annealed)


def test_the_settled_elbo_is_the_configured_models_as_a_run_stopped_there_saves_it(compose_cfg, tmp_path):
    """A topic run that ends while its prior is annealed saves the configured model (runner.finish): its ELBO is
    the last lap's elbo_settled."""

    summary = runner.train(compose_cfg(*TOPICS, "alg.n_laps=2", "obs.anneal_laps=5"), tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv", float_precision="round_trip")
    assert trace["annealed"].tolist() == [1, 1]
    assert trace["elbo_settled"].iloc[-1] == pytest.approx(summary["elbo"], rel=1e-12)
    assert abs(trace["elbo"].iloc[-1] - summary["elbo"]) > 1.0


def test_annealed_spans_cover_the_runs_of_annealed_laps():
    assert plots.annealed_spans([1, 2, 3, 4, 5], [1, 1, 0, 0, 0]) == [(0.0, 2.0)]
    assert plots.annealed_spans([0.5, 1.0, 2.0], [1, 1, 1]) == [(0.0, 2.0)]
    assert plots.annealed_spans([1, 2, 3, 4], [0, 1, np.nan, 1]) == [(1.0, 2.0), (3.0, 4.0)]
    assert plots.annealed_spans([1, 2], [0, 0]) == []


def test_plots_draw_the_settled_elbo_and_shade_the_annealed_laps(annealed_run, tmp_path, monkeypatch):
    run_dir, _, _ = annealed_run
    trace = pd.read_csv(run_dir / "trace.csv")
    annealed = trace["annealed"] == 1
    settled = plots.settled_elbo_per_atom(trace["elbo_per_atom"], trace["elbo"], trace["elbo_settled"])
    np.testing.assert_allclose(settled, trace["elbo_settled"] / 900, rtol=1e-12)
    np.testing.assert_allclose(report_plots._elbo_per_atom(trace), settled, rtol=0)
    shaded = []
    monkeypatch.setattr("matplotlib.axes.Axes.axvspan", lambda ax, lo, hi, **kw: shaded.append((lo, hi)))
    plots.plot_trace(trace.to_dict("records"), tmp_path / "elbo_K.png")
    end = trace.loc[annealed, "elapsed_s"].iloc[-1]
    assert shaded == [(0.0, end)] * 2  # both panels
    shaded.clear()
    report_plots.plot_traces([trace], ["run"], [True], None, tmp_path)
    assert shaded == [(0.0, end)] * 2 + [(0.0, trace.loc[annealed, "lap"].iloc[-1])] * 2  # time, then laps
