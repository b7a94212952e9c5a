"""End-to-end: bnpvi-train runs, sweeps, resumes exactly, and rejects bad input on one line (in this process,
``bnpvi_train``; the default run, and the runs stopped by a signal, as the console command in a process)."""
import functools
import json
import operator
import os
import signal

import h5py
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from bnpvi.data.store import write_points
from bnpvi.io.checkpoint import load_checkpoint
from bnpvi.learn import runner
from bnpvi.learn.work import process_batch
from setups import RESUME_ARGS, assert_same_run, env_of, start_and_stop, train


def assert_one_line_error(result, *fragments):
    """``result``, the (exit status, stdout, stderr) of bnpvi-train, is status 2 and one stderr line, its error."""
    status, out, err = result
    assert status == 2, (status, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("bnpvi-train: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def trained(bnpvi_train, *args) -> str:
    """The standard output of ``bnpvi-train ARGS`` run in this process, which must have exited with 0."""
    status, out, err = bnpvi_train(*args)
    assert status == 0, f"bnpvi-train {' '.join(args)} failed ({status}):\n{out}\n{err}"
    return out


def test_default_run_finds_the_toy_clusters_from_one(tmp_path, env, monkeypatch):
    """No arguments: memoized VI from K = 1 whose births, merges and deletes find the 8 toy clusters."""
    proc = train([], tmp_path, env)
    monkeypatch.setenv("BNPVI_CACHE", env["BNPVI_CACHE"])
    run_dirs = list((tmp_path / "outputs").glob("*/*"))
    assert len(run_dirs) == 1
    run = run_dirs[0]
    assert f"run directory: {run}" in proc.stdout
    assert "lap    1" in proc.stdout
    for name in ("trace.csv", "moves.csv", "model.h5", "summary.json", "elbo_K.png", "checkpoints/latest.h5",
                 ".hydra/config.yaml"):
        assert (run / name).is_file(), name
    clusters = pd.read_csv(run / "clusters.csv")
    assert clusters.loc[clusters["lap"] == 1, "uid"].tolist() == [0]  # one cluster in the first lap
    summary = json.loads((run / "summary.json").read_text())
    assert summary["ari"] > 0.95
    assert summary["K"] == 8
    trace = pd.read_csv(run / "trace.csv")
    assert list(trace.columns[:5]) == ["lap", "batches_seen", "elapsed_s", "elbo", "K"]
    assert trace["birth_accepted"].sum() >= 1
    # the reported ELBO is that of the final globals: a fresh local step over all the data under
    # them can only raise it, and by little once converged
    saved = runner.Run(OmegaConf.load(run / ".hydra" / "config.yaml"), run, load_checkpoint(run))
    try:
        fresh = functools.reduce(operator.add, (
            process_batch(saved.model, saved.alg.globals, saved.store.read_batch(b)).stats
            for b in range(saved.store.n_batches)))
        recomputed = saved.model.elbo(fresh, saved.alg.globals)
    finally:
        saved.close()
    assert summary["elbo"] <= recomputed + 1e-9 * abs(recomputed)
    assert summary["elbo"] == pytest.approx(recomputed, rel=1e-6)


@pytest.mark.parametrize("args", [
    ["alg=vb", "init.K=12", "seed=3", "obs=diag_gauss"],
    ["alg=sovb", "alg.n_laps=4", "obs=zm_gauss", "init=random"],
    ["alg.sparse_L=2", "init.K=20", "moves=[merge,delete]", "obs=zm_gauss"],
])
def test_other_algorithms_and_families_run(tmp_path, bnpvi_train, args):
    trained(bnpvi_train, "data.n_atoms=1500", *args)
    (run,) = list((tmp_path / "outputs").glob("*/*"))
    trace = pd.read_csv(run / "trace.csv")
    assert len(trace) >= 1 and np.all(np.isfinite(trace["elbo"]))
    assert (run / "moves.csv").exists() == any(a.startswith("moves=") for a in args)  # moves need alg=memo


def test_finite_mix_on_a_converted_file_with_n_batches(tmp_path, bnpvi_train):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(300, 3)), rng.normal(size=(300, 3)) + 6])
    write_points(tmp_path / "my.h5", X, n_batches=1, batches_fixed=False)
    trained(bnpvi_train, "model=finite_mix", "alg=memo", "data=hdf5", "data.path=my.h5", "alg.n_batches=4", "init.K=2")
    (run,) = list((tmp_path / "outputs").glob("*/*"))
    trace = pd.read_csv(run / "trace.csv")
    assert trace["batches_seen"].iloc[0] == 4
    assert not (run / "moves.csv").exists()  # a finite model's prior depends on K: no moves


def test_finite_hmm_on_the_toy_sequences(tmp_path, bnpvi_train):
    trained(bnpvi_train, "model=finite_hmm", "init.K=8", "data.n_seqs=16", "data.seq_length=300", "alg.n_laps=10")
    (run,) = list((tmp_path / "outputs").glob("*/*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["K"] == 8 and summary["hamming"] < 0.05 and summary["hamming_marginal_map"] < 0.05
    for name in ("segmentation.h5", "segmentation.csv", "transitions.csv", "segmentation.png"):
        assert (run / name).is_file(), name
    trace = pd.read_csv(run / "trace.csv")
    assert np.all(np.diff(trace["elbo"]) >= -1e-9 * np.abs(trace["elbo"][1:]))
    assert trace["hamming"].iloc[-1] == pytest.approx(summary["hamming"])


def test_plots_false_draws_no_figures_and_writes_every_other_file(tmp_path, bnpvi_train):
    trained(bnpvi_train, "model=finite_hmm", "init.K=3", "data.n_seqs=8", "data.seq_length=50", "alg.n_laps=2",
            "plots=false")
    (run,) = list((tmp_path / "outputs").glob("*/*"))
    assert not list(run.glob("*.png"))
    for name in ("summary.json", "model.h5", "segmentation.h5", "segmentation.csv", "transitions.csv"):
        assert (run / name).is_file(), name


def test_multirun_sweep_makes_one_run_per_combination(tmp_path, bnpvi_train):
    trained(bnpvi_train, "-m", "model.gamma=0.5,5", "seed=1,2", "data.n_atoms=800", "alg.n_laps=3", "plots=false")
    runs = [p for p in (tmp_path / "outputs" / "multirun").glob("*/*/*") if (p / "trace.csv").exists()]
    assert len(runs) == 4


MOVES_ARGS = ["data.n_atoms=10000", "data.n_batches=20", "alg.n_laps=10", "alg.converge_thr=-1",
              "checkpoint_every=1", "seed=5", "init.K=1", "moves=[birth,merge,delete]"]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, cache_dir):
    """The uninterrupted run of RESUME_ARGS, which the killed and the stopped runs must each end at exactly
    (made once: the tests only read it)."""
    work = tmp_path_factory.mktemp("reference")
    train([*RESUME_ARGS, "hydra.run.dir=ref"], work, env_of(cache_dir))
    return work / "ref"


def test_sigkill_between_checkpoints_then_resume_is_exact(tmp_path, env, bnpvi_train, reference_run):
    run, code, _, _ = start_and_stop(tmp_path, env, "killed", signal.SIGKILL)
    assert code == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (run / "model.h5").exists()
    assert "resuming" in trained(bnpvi_train, f"resume={run}")
    assert_same_run(reference_run, run)


def test_ctrl_c_writes_a_checkpoint_and_resume_is_exact(tmp_path, env, bnpvi_train, reference_run):
    run, code, _, err = start_and_stop(tmp_path, env, "stopped", signal.SIGINT)
    assert code == 130, err
    assert "resume=" in err.splitlines()[-1]
    summary = json.loads((run / "summary.json").read_text())  # rewritten for where the run stopped
    assert summary["stop_reason"].startswith("interrupted at lap ")
    assert summary["laps"] == len(pd.read_csv(run / "trace.csv"))
    trained(bnpvi_train, f"resume={run}")
    assert_same_run(reference_run, run)


def test_resume_with_moves_is_exact(tmp_path, env, bnpvi_train):
    trained(bnpvi_train, *MOVES_ARGS, "hydra.run.dir=ref")
    run, code, _, err = start_and_stop(tmp_path, env, "stopped", signal.SIGINT, MOVES_ARGS)
    assert code == 130, err
    trained(bnpvi_train, f"resume={run}")
    assert_same_run(tmp_path / "ref", run)
    for name in ("moves.csv", "clusters.csv"):
        assert (run / name).read_text() == (tmp_path / "ref" / name).read_text()
    assert pd.read_csv(run / "trace.csv")["birth_accepted"].sum() > 0


def test_resume_can_extend_the_lap_limit(tmp_path, bnpvi_train):
    trained(bnpvi_train, "data.n_atoms=1000", "alg.n_laps=3", "alg.converge_thr=-1", "plots=false",
            "hydra.run.dir=short")
    trained(bnpvi_train, "resume=short", "alg.n_laps=5")
    trace = pd.read_csv(tmp_path / "short" / "trace.csv")
    assert trace["lap"].tolist() == [1, 2, 3, 4, 5]


def test_multirun_resumes_each_run_in_its_own_directory(tmp_path, bnpvi_train):
    for name in ("a", "b"):
        trained(bnpvi_train, "data.n_atoms=1000", "alg.n_laps=2", "alg.converge_thr=-1", "plots=false",
                f"hydra.run.dir={name}")
    saved = {name: (tmp_path / name / ".hydra" / "config.yaml").read_text() for name in ("a", "b")}
    trained(bnpvi_train, "-m", "resume=a,b", "alg.n_laps=4")
    for name in ("a", "b"):
        run = tmp_path / name
        assert pd.read_csv(run / "trace.csv")["lap"].tolist() == [1, 2, 3, 4]
        assert (run / ".hydra" / "config.yaml").read_text() == saved[name]  # the run's config is kept
        (resumed,) = (run / ".hydra").glob("resumed-*/overrides.yaml")
        assert "alg.n_laps=4" in resumed.read_text()
    assert not [p for p in tmp_path.glob("outputs/**/trace.csv")]  # no new run directory


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("arg, name", [("alg.n_lap=5", "alg.n_lap"), ("+obs.nuu=3", "nuu"), ("init.K=abc", "init.K")])
def test_unknown_config_key_or_bad_value(tmp_path, bnpvi_train, arg, name):
    assert_one_line_error(bnpvi_train(arg), name)
    assert not (tmp_path / "outputs").exists()


def test_model_kappa_points_to_sticky_kappa(tmp_path, bnpvi_train):
    assert_one_line_error(bnpvi_train("model=hdp_hmm", "model.kappa=300"), "model.kappa", "model.sticky_kappa")
    assert not (tmp_path / "outputs").exists()


def test_unknown_option_in_group(bnpvi_train):
    assert_one_line_error(bnpvi_train("alg=vbb"), "alg=vbb", "memo")
    assert_one_line_error(bnpvi_train("model=dp_mix_schema"), "model=dp_mix_schema", "dp_mix")


@pytest.mark.parametrize("args, fragments", [
    (["alg=vb", "moves=[merge]"], ["alg=memo"]),
    (["model=finite_mix", "moves=[merge]"], ["finite"]),
    (["model=finite_hmm", "alg.sparse_L=2"], ["alg.sparse_L", "model=finite_hmm", "no L-sparse local step"]),
    (["alg.sparse_L=0"], ["alg.sparse_L must be an integer >= 1, got 0"]),
    (["moves.birth.seeding=foo"], ["moves.birth.seeding must be one of kmeans, dense", "got 'foo'"]),
    (["model=hdp_topic", "moves.birth.seeding=dense"], ["moves.birth.seeding must be one of kmeans for these births"]),
])
def test_options_that_do_not_fit_the_model_or_algorithm(tmp_path, bnpvi_train, args, fragments):
    assert_one_line_error(bnpvi_train(*args, "data.n_atoms=300"), *fragments)
    assert not (tmp_path / "outputs").exists()  # a start-up error leaves no run directory


def test_missing_data_file(tmp_path, bnpvi_train):
    assert_one_line_error(bnpvi_train("data=hdf5", "data.path=nope.h5"), "nope.h5")
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("args, fragments", [
    (["obs=mult"], ["obs=mult", "bag-of-words", "points"]),
    (["model=finite_hmm"], ["model=finite_hmm", "sequences", "points"]),
])
def test_data_of_the_wrong_kind(tmp_path, bnpvi_train, args, fragments):
    write_points(tmp_path / "points.h5", np.random.default_rng(0).normal(size=(100, 2)), n_batches=2)
    assert_one_line_error(bnpvi_train(*args, "data=hdf5", "data.path=points.h5"), *fragments)
    assert not (tmp_path / "outputs").exists()


def test_nan_in_data(tmp_path, bnpvi_train):
    X = np.random.default_rng(0).normal(size=(50, 2))
    write_points(tmp_path / "bad.h5", X, n_batches=2)
    with h5py.File(tmp_path / "bad.h5", "r+") as f:
        f["X"][30, 1] = np.nan
    assert_one_line_error(bnpvi_train("data=hdf5", "data.path=bad.h5", "init.K=2"), "bad.h5")
    assert not (tmp_path / "outputs").exists()


def test_dimension_mismatch_with_checkpoint(tmp_path, bnpvi_train):
    rng = np.random.default_rng(1)
    write_points(tmp_path / "d.h5", rng.normal(size=(200, 2)), n_batches=2)
    trained(bnpvi_train, "data=hdf5", "data.path=d.h5", "init.K=2", "alg.n_laps=2", "plots=false", "hydra.run.dir=r")
    os.remove(tmp_path / "d.h5")
    write_points(tmp_path / "d.h5", rng.normal(size=(200, 3)), n_batches=2)
    assert_one_line_error(bnpvi_train("resume=r", "alg.n_laps=4"), "D=3", "D=2")


def test_corrupt_or_missing_checkpoint(tmp_path, bnpvi_train):
    trained(bnpvi_train, "data.n_atoms=600", "alg.n_laps=2", "plots=false", "hydra.run.dir=r")
    ckpt = tmp_path / "r" / "checkpoints" / "latest.h5"
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    assert_one_line_error(bnpvi_train("resume=r"), "corrupt")
    ckpt.unlink()
    assert_one_line_error(bnpvi_train("resume=r"), "latest.h5")
    assert_one_line_error(bnpvi_train("resume=nowhere"), "nowhere")
    assert_one_line_error(bnpvi_train("resume=r", "model.gamma=3"), "model.gamma")
    assert_one_line_error(bnpvi_train("-m", "resume=r,nowhere"), "nowhere")
    assert not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in (tmp_path / "r" / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml",
                                                                            "overrides.yaml"]
    assert not (tmp_path / "outputs").exists()  # a refused resume writes nothing, in the run or beside it


def test_a_value_the_model_refuses_is_the_last_line(tmp_path, bnpvi_train):
    """Hydra wraps the model's own error when it builds the model; the user sees only the model's line."""
    assert_one_line_error(bnpvi_train("model.gamma=-1"), "model.gamma", "-1")
    assert not (tmp_path / "outputs").exists()


def test_data_path_alone_picks_a_converted_file(tmp_path, bnpvi_train):
    rng = np.random.default_rng(0)
    write_points(tmp_path / "my.h5", np.concatenate([rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 6]),
                 n_batches=1, batches_fixed=False)
    trained(bnpvi_train, "data.path=my.h5", "alg.n_batches=4", "alg.n_laps=3")
    (run,) = list((tmp_path / "outputs").glob("*/*"))
    assert json.loads((run / "summary.json").read_text())["n_atoms"] == 400


@pytest.mark.parametrize("source, args, command", [
    ("points.csv", [], "bnpvi-data convert points.csv points.h5`"),
    ("points.npz", [], "bnpvi-data convert points.npz points.h5`"),
    ("corpus.ldac", ["model=hdp_topic"], "bnpvi-data convert corpus.ldac corpus.h5 [--vocab VOCAB.txt]`"),
    ("lines.txt", ["model=hdp_topic"], "bnpvi-data convert lines.txt lines.h5 --text`"),
    ("seqs.npz", ["model=hdp_hmm"], "bnpvi-data convert seqs.npz seqs.h5 --sequences RANGES`"),
    ("seqs.csv", ["model=finite_hmm"], "bnpvi-data convert seqs.csv seqs.h5 --sequence-column COLUMN`"),
])
def test_a_source_file_names_the_command_that_converts_it(tmp_path, bnpvi_train, source, args, command):
    (tmp_path / source).write_text("1,2\n")
    assert_one_line_error(bnpvi_train(*args, f"data.path={source}"), command,
                          f"data.path={source.rsplit('.', 1)[0]}.h5")
    assert not (tmp_path / "outputs").exists()


def test_n_batches_against_fixed_batches_says_what_to_do(tmp_path, bnpvi_train):
    write_points(tmp_path / "my.h5", np.random.default_rng(0).normal(size=(100, 2)), n_batches=5)
    assert_one_line_error(bnpvi_train("data=hdf5", "data.path=my.h5", "alg.n_batches=10"), "5 fixed batches",
                          "drop alg.n_batches", "convert the data again without --batches")
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("args", [["model=hdp_topic", "data.n_docs=200"],
                                  ["model=hdp_hmm", "data.n_seqs=4", "data.seq_length=100", "data.n_batches=2"]])
def test_topic_and_hmm_runs_say_nothing_about_reassign(bnpvi_train, args):
    """alg=memo lists reassign by default; models it does not apply to skip it without a word."""
    status, out, err = bnpvi_train(*args, "alg.n_laps=1")
    assert status == 0, err
    assert "reassign" not in out + err
