"""What several test modules share, as plain functions and constants (fixtures: conftest.py), by what they
test: runs stopped and resumed, bnpvi-train and bnpvi-apply in a process, mixtures and their moves, batch work,
the kernels, hidden Markov models, discrete observations, topic models."""
import io
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from omegaconf import OmegaConf
from scipy.special import digamma, entr, softmax

import bnpvi
from bnpvi.alloc import DPMixAlloc, HDPTopicAlloc, hdp_top
from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.data.moments import DataMoments
from bnpvi.data.store import BatchStore, write_points, write_sequences
from bnpvi.data.toy import make_toy_sequences
from bnpvi.io.model_file import read_model
from bnpvi.learn import runner
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.work import process_batch
from bnpvi.model import Model
from bnpvi.moves.birth import FAINT_MASS, fresh_weights
from bnpvi.obs import make_obs
from bnpvi.obs.tempered import Tempered
from bnpvi.special import c_beta, c_dir
from bnpvi.stats import ClusterIds, Responsibilities, SuffStats


def toy_sequence_file(tmp_path_factory, seed: int, n_seqs: int = 16, length: int = 300, n_batches: int = 4):
    """The toy 8-state sequences (``make_toy_sequences``) written with their labels."""
    X, seq_range, labels = make_toy_sequences(n_seqs=n_seqs, length=length, seed=seed)
    path = tmp_path_factory.mktemp("seq") / "toy.h5"
    write_sequences(path, X, seq_range, n_batches=n_batches, labels=labels)
    return path


def setup(path, alloc, family="gauss", K=8, seed=0, init="kmeanspp"):
    """(store, model, initial globals, ids, rng): ``alloc`` with a Gaussian-like family, K seeds by ``init``."""
    store = BatchStore.open(path)
    obs = make_obs({"name": family, "sF": 1.0, "prior_cov": "eye", "nu": None, "kappa": 1e-5, "mean": None},
                   store.D, store.moments())
    model = Model(alloc, obs)
    rng = np.random.default_rng(seed)
    cfg = OmegaConf.create({"name": init, "K": K, "n_samples": 5000, "n_trials": None, "kmeans_iters": 0})
    stats = initial_stats(model, store, cfg, rng, K)
    return store, model, model.global_step(stats), ClusterIds.first(K), rng


def settled_elbo(trace) -> np.ndarray:
    """The ELBO of the laps of a run's ``trace`` at temperature 1 (every lap, if the run does not anneal): the
    objective that must not decrease (an annealed lap's ELBO is that of its own tempered model)."""
    elbo = trace["elbo"].to_numpy()
    return elbo if "temperature" not in trace else elbo[trace["temperature"].to_numpy() == 1.0]


def run_laps(alg, laps):
    """Step ``alg`` to ``laps`` completed laps; the lap-end ELBOs."""
    elbos = []
    while alg.lap < laps:
        result = alg.step()
        if result is not None:
            elbos.append(result.elbo)
    return np.array(elbos)


def train_command(args, cwd, env, timeout=600):
    """``bnpvi-train ARGS`` run in ``cwd`` with ``env``; the finished process, which must have exited with 0."""
    proc = subprocess.run([sys.executable, "-m", "bnpvi.cli.train", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, \
        f"bnpvi-train {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def cli_env(cache_dir):
    """The environment of a command-line run: toy data cached in ``cache_dir``, no warnings, plots by Agg."""
    return {**os.environ, "BNPVI_CACHE": str(cache_dir), "PYTHONWARNINGS": "ignore", "MPLBACKEND": "Agg"}


# --------------------------------------------- runs, stopped and resumed
RESUME_COMMON = ["alg.n_laps=6", "alg.converge_thr=-1", "checkpoint_every=1", "seed=7"]
"""The overrides of every stopped-and-resumed run: 6 laps, no convergence stop, a checkpoint every lap."""


def stop_mid_lap(run, lap, pos):
    """Make ``run`` receive SIGINT right after the batch that leaves it at (lap, pos), as Ctrl-C would."""
    step = run.alg.step

    def step_then_signal():
        result = step()
        if (run.alg.lap, run.alg.pos) == (lap, pos):
            signal.raise_signal(signal.SIGINT)
        return result
    run.alg.step = step_then_signal


def outputs(run_dir):
    model = read_model(run_dir / "model.h5")
    summary = json.loads(model.pop("summary"))
    summary.pop("elapsed_s")
    trace = pd.read_csv(run_dir / "trace.csv").drop(columns=["elapsed_s"])
    return model, summary, trace


def assert_same_tree(a, b, where=""):
    assert sorted(a) == sorted(b), where
    for key in a:
        if isinstance(a[key], dict):
            assert_same_tree(a[key], b[key], f"{where}/{key}")
        else:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{where}/{key}")


def assert_resume_is_exact(cfg, tmp_path, lap=2, ref=None):
    """Run ``cfg`` whole in tmp_path/ref (or take ``ref``, a finished run of ``cfg`` that several cuts share),
    and cut after batch 1 of lap ``lap`` then resumed in tmp_path/cut; both must end with the same model,
    summary and trace. Returns the summary and the trace."""
    if ref is None:
        ref = tmp_path / "ref"
        runner.train(cfg, ref)
    cut = tmp_path / "cut"
    cut.mkdir()
    run = runner.Run(cfg, cut)
    stop_mid_lap(run, lap, 1)
    with pytest.raises(runner.Interrupted, match=f"lap {lap} batch 1"):
        try:
            run.train()
        finally:
            run.close()
    interrupted = json.loads((cut / "summary.json").read_text())  # the files describe the run where it stopped
    assert interrupted["stop_reason"].startswith(f"interrupted at lap {lap} batch 1")
    assert interrupted["laps"] == lap and not interrupted["converged"]
    assert read_model(cut / "model.h5")["uids"].tolist() == interrupted["uids"]
    leftovers = [cut / "checkpoints" / ".latest.h5.x1y2.tmp", cut / ".model.h5.x1y2.tmp"]  # a kill mid-write
    for path in leftovers:
        path.write_bytes(b"partial")
    runner.resume(cut, cfg)
    assert not any(path.exists() for path in leftovers)

    ref_model, ref_summary, ref_trace = outputs(ref)
    model, summary, trace = outputs(cut)
    assert summary == ref_summary
    pd.testing.assert_frame_equal(trace, ref_trace, check_exact=True)
    assert_same_tree(model, ref_model)
    return summary, trace


# ----------------------------------------------------------- bnpvi-apply
def compose(*overrides):
    """The bnpvi-train config of ``overrides``, with ``plots=false`` unless they set ``plots``: drawing a run's
    figures costs a second or more, so they are drawn where a test looks at them (plots=true)."""
    from hydra import compose as hydra_compose, initialize_config_module

    from bnpvi.config import register_configs

    register_configs()
    if not any(o.split("=", 1)[0].lstrip("+~") == "plots" for o in overrides):
        overrides = (*overrides, "plots=false")
    with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        return hydra_compose(config_name="train", overrides=list(overrides))


def apply_command(*args):
    """bnpvi-apply in a child process, started outside the source tree (whose bnpvi/ has no compiled kernels
    when the package is installed elsewhere, as in CI); the paths are absolute. The console command end to end,
    for one test per family: :func:`apply_cli` checks the rest in this process."""
    return subprocess.run([sys.executable, "-m", "bnpvi.cli.apply", *(str(Path(a).resolve()) for a in args)],
                          capture_output=True, text=True, timeout=300, cwd=tempfile.gettempdir())


def apply_cli(*args) -> subprocess.CompletedProcess:
    """bnpvi-apply run in this process (``bnpvi.cli.apply.main``): its exit status and what it printed, as
    :func:`apply_command` returns them."""
    from bnpvi.cli import apply

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = apply.main(argv)
        except SystemExit as stop:  # argparse's usage errors
            status = stop.code
    return subprocess.CompletedProcess(["bnpvi-apply", *argv], status, out.getvalue(), err.getvalue())


def read_h5(path):
    with h5py.File(path, "r") as f:
        return {key: f[key][()] for key in f}


def assert_reproduces(out: Path, run_file: Path) -> None:
    """``out`` (.h5) holds the datasets of the run's ``run_file`` and its .csv is the run's, to the byte."""
    ours, runs = read_h5(out), read_h5(run_file)
    assert set(ours) == set(runs)
    for key in runs:
        np.testing.assert_array_equal(ours[key], runs[key], err_msg=key)
    assert out.with_suffix(".csv").read_text() == run_file.with_suffix(".csv").read_text()


def assert_one_line_error(proc, fragment: str) -> None:
    """bnpvi-apply exited 2 with one stderr line, its error, which holds ``fragment``."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bnpvi-apply: error: ") and fragment in lines[0], lines


@contextmanager
def one_line_error(problem: str) -> Iterator[None]:
    """The block raises a BnpviError whose message matches ``problem`` and is one line."""
    with pytest.raises(bnpvi.BnpviError, match=problem) as err:
        yield
    assert "\n" not in str(err.value)


@contextmanager
def moved_away(data: Path, elsewhere: Path) -> Iterator[Path]:
    """The training file ``data`` renamed to ``elsewhere`` for the block (and back after)."""
    data.rename(elsewhere)
    try:
        assert not data.exists()
        yield elsewhere
    finally:
        elsewhere.rename(data)


# ---------------------------------------------- mixtures and their moves
FAMILIES = ["gauss", "diag_gauss", "zm_gauss", "mult", "bern"]


BIRTH = {"start_lap": 2, "stop_lap": None, "max_per_lap": 3, "n_new": 8, "min_batch_mass": 10.0, "eps": 0.1,
         "max_atoms": 5000, "kmeans_iters": 10, "refine_iters": 3, "refine_laps": 5, "Kmax": 200, "retry_change": 0.1,
         "max_stuck": 10, "abundance": 0, "seeding": "kmeans", "group_size": 15}


MERGE = {"start_lap": 2, "max_pairs": 100, "max_per_cluster": 5, "retry_change": 0.1}


DELETE = {"start_lap": 2, "max_per_lap": 3, "max_fails": 2, "max_size_frac": 0.05, "absorb": 5, "retry_change": 0.1}


def obs_cfg(name):
    return {"name": name, "sF": 0.5, "prior_cov": "diag", "nu": None, "kappa": 1e-4, "mean": None,
            "lam": 0.1, "lam1": 0.1, "lam0": 0.3}


def moves_cfg(birth=False, merge=False, delete=False, **changes):
    node = {"birth": BIRTH if birth else None, "merge": MERGE if merge else None, "delete": DELETE if delete else None}
    cfg = OmegaConf.create(node)
    for key, value in changes.items():
        OmegaConf.update(cfg, key, value)
    return cfg


def four_clusters(n=800, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0, 0.0], [4.0, 4.0, 0.0], [-4.0, 3.0, 2.0], [1.0, -4.0, -3.0]])
    labels = rng.integers(0, 4, size=n)
    return centers[labels] + rng.normal(size=(n, 3)), labels


def family_batch(family):
    """Data from 4 clusters in the family's own kind: points, binary vectors or documents."""
    X, labels = four_clusters()
    if family == "bern":
        rng = np.random.default_rng(5)
        protos = rng.random((4, 12)) < 0.5
        return PointBatch(((protos[labels] ^ (rng.random((X.shape[0], 12)) < 0.1))).astype(np.float64))
    if family == "mult":
        rng = np.random.default_rng(6)
        topics = rng.dirichlet(np.full(20, 0.3), size=4)
        docs = np.stack([rng.multinomial(rng.integers(5, 40), topics[z]) for z in labels]).astype(np.float64)
        X = sp.csr_matrix(docs)
        return WordCountBatch(X.indices.astype(np.int32), X.data, X.indptr.astype(np.int64), 20)
    return PointBatch(X)


def moments(X):
    return DataMoments(X.shape[0], X.mean(axis=0), np.cov(X.T, bias=True))


def brute_stats(model, batch, r):
    """Summaries straight from dense responsibilities, the entropy as −Σ r ln r with 0 ln 0 = 0."""
    r = np.ascontiguousarray(r)
    H = -np.sum(np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0), axis=0)
    fields = {"N": r.sum(axis=0), "H": H, "n_atoms": float(batch.n_atoms)}
    fields.update(model.obs.summarize(batch, Responsibilities(r, r.shape[1])))
    return SuffStats(fields, {name: spec for name, (_, spec) in model.layout.items()})


def elbo_of(model, stats):
    return model.elbo(stats, model.global_step(stats))


def dense_resp(resp: Responsibilities) -> np.ndarray:
    return resp.values if not resp.is_sparse else resp.matrix().toarray()


def fitted(family, K=6, iters=5, sparse_L=None, temperature=1.0):
    """A model after a few full-VB steps on one batch: (model, batch, globals, log_lik, local, stats);
    with ``sparse_L``, an L-sparse local step (Hughes 2016 thesis §7.1); with ``temperature`` > 1, the model
    of a tempered lap (every data term divided by T, ``bnpvi.obs.tempered``)."""
    batch = family_batch(family)
    obs = make_obs(obs_cfg(family), batch.D, moments(batch.X) if isinstance(batch, PointBatch) else None)
    model = Model(DPMixAlloc(2.0), obs if temperature == 1.0 else Tempered(obs, temperature))
    model.alloc.use_sparse(sparse_L)
    rng = np.random.default_rng(1)
    globals_ = model.global_step(model.hard_stats(batch, rng.integers(0, K, batch.n_atoms), K))
    for _ in range(iters):
        globals_ = model.global_step(process_batch(model, globals_, batch).stats)
    log_lik, local = model.local_step(batch, globals_)
    assert local.resp.is_sparse == (sparse_L is not None and sparse_L < K)
    return model, batch, globals_, log_lik, local, brute_stats(model, batch, dense_resp(local.resp))


# ------------------------------------------ hidden Markov models: births
GAUSS = {"name": "gauss", "sF": 1.0, "prior_cov": "eye", "nu": None, "kappa": 1e-3, "mean": [0.0, 0.0]}


HMM_BIRTH = {"start_lap": 2, "stop_lap": None, "max_per_lap": 3, "n_new": 8, "min_batch_mass": 10.0, "eps": 0.1,
         "max_atoms": 5000, "kmeans_iters": 10, "refine_iters": 3, "Kmax": 50, "retry_change": 0.1,
         "min_block": 3, "max_stuck": 2, "seeding": "kmeans", "group_size": 15,
         "merge_cleanup": True}


def two_regime_store(tmp_path, n_batches=2):
    """Short sequences that each start near (−5, 0) and end near (5, 0) (a birth's clear case)."""
    rng = np.random.default_rng(3)
    lengths = (6, 7, 5, 6, 7, 6, 5, 6, 7, 6)
    seq_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    X = rng.normal(size=(seq_range[-1], 2)) * 0.5
    for d, L in enumerate(lengths):
        X[seq_range[d]:seq_range[d] + L // 2, 0] -= 5.0
        X[seq_range[d] + L // 2:seq_range[d + 1], 0] += 5.0
    return write_sequences(tmp_path / "two.h5", X, seq_range, n_batches=n_batches)


# ------------------------------------------------------------ batch work
def wide_points(path, n=6000, D=16, n_batches=6):
    """Points wide enough that OpenBLAS splits a batch's sums Rᵀ Y (1,000 atoms x K = 25 x D = 16) between threads."""
    rng = np.random.default_rng(0)
    return write_points(path, rng.normal(size=(n, D)) + 4 * rng.integers(0, 5, size=(n, 1)), n_batches=n_batches)


# ---------------------------------------------- bnpvi-train in a process
def env_of(cache_dir):
    return {**os.environ, "BNPVI_CACHE": str(cache_dir), "PYTHONWARNINGS": "ignore"}


def train(args, cwd, env, check=True):
    proc = subprocess.run([sys.executable, "-m", "bnpvi.cli.train", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"bnpvi-train {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


RESUME_ARGS = ["moves=[]", "data.n_atoms=20000", "data.n_batches=20", "alg.n_laps=10", "alg.converge_thr=-1",
               "checkpoint_every=5", "seed=4"]


def final_state(run):
    trace = pd.read_csv(run / "trace.csv").drop(columns=["elapsed_s"])
    with h5py.File(run / "model.h5") as f:
        params = {k: f["posterior"][k][()] for k in f["posterior"]}
        params["counts"] = f["counts"][()]
        params["uids"] = f["uids"][()]
    return trace, params


def assert_same_run(a, b):
    trace_a, params_a = final_state(a)
    trace_b, params_b = final_state(b)
    pd.testing.assert_frame_equal(trace_a, trace_b, check_exact=True)
    for key in params_a:
        np.testing.assert_array_equal(params_a[key], params_b[key], err_msg=key)


def start_and_stop(tmp_path, env, name, sig, args=RESUME_ARGS):
    run = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-m", "bnpvi.cli.train", *args, f"hydra.run.dir={name}"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (run / "checkpoints" / "latest.h5").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.002)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    return run, proc.returncode, out, err


# ------------------------------------------------- discrete observations
def block_corpus(n_docs=600, V=60, n_topics=4, seed=0):
    """Documents of 30-80 words, each from one of ``n_topics`` topics on disjoint word blocks."""
    rng = np.random.default_rng(seed)
    block = V // n_topics
    labels = rng.integers(0, n_topics, n_docs)
    ids, counts, doc_range = [], [], [0]
    for z in labels:
        p = np.full(V, 0.02 / V)
        p[z * block:(z + 1) * block] += 0.98 / block
        x = rng.multinomial(rng.integers(30, 80), p / p.sum())
        nz = np.flatnonzero(x)
        ids.append(nz)
        counts.append(x[nz])
        doc_range.append(doc_range[-1] + nz.size)
    return (np.concatenate(ids).astype(np.int32), np.concatenate(counts).astype(np.float64),
            np.array(doc_range, dtype=np.int64), V, labels)


# -------------------------------------------------- hidden Markov models
def enumerate_chain(C, log_start, log_trans, lump, K2):
    """q*(z) of one sequence by enumerating every path; state k relabelled ``lump[k]`` (in 0..K2−1)
    before the marginals are taken. Returns r (L, K2), pairwise s (L−1, K2, K2)."""
    L, K = C.shape
    paths = np.array(list(itertools.product(range(K), repeat=L)))
    score = log_start[paths[:, 0]] + C[np.arange(L), paths].sum(axis=1)
    if L > 1:
        score += log_trans[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    q = np.exp(score - score.max())
    q /= q.sum()
    z = np.asarray(lump)[paths]
    r = np.zeros((L, K2))
    s = np.zeros((max(L - 1, 0), K2, K2))
    for t in range(L):
        np.add.at(r[t], z[:, t], q)
    for t in range(L - 1):
        np.add.at(s[t], (z[:, t], z[:, t + 1]), q)
    return r, s


def enumerated_stats(batch, obs, log_lik, log_start, log_trans, lump, K2, specs) -> SuffStats:
    """A batch's HMM summaries from q*(z) of every sequence by path enumeration (``enumerate_chain``)."""
    r_all, M0, M, H0, H = [], np.zeros(K2), np.zeros((K2, K2)), np.zeros(K2), np.zeros((K2, K2))
    sr = batch.seq_range
    for d in range(batch.n_seqs):
        r, s = enumerate_chain(log_lik[sr[d]:sr[d + 1]], log_start, log_trans, lump, K2)
        r_all.append(r)
        M0 += r[0]
        H0 += xlogx_ratio(r[0], 1.0)
        for t in range(s.shape[0]):
            M += s[t]
            H += xlogx_ratio(s[t], s[t].sum(axis=1, keepdims=True))
    resp = Responsibilities(np.concatenate(r_all), K2)
    fields = {"N": resp.counts(), "start": M0, "trans": M, "start_entropy": H0, "trans_entropy": H,
              "n_seqs": np.float64(batch.n_seqs), "n_atoms": np.float64(batch.n_atoms)}
    fields.update(obs.summarize(batch, resp))
    return SuffStats(fields, specs)


def xlogx_ratio(x, d):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, -x * np.log(x / d), 0.0)


# --------------------------------------------------------- annealed runs
TOPICS = ["model=hdp_topic", "data.n_docs=300", "init.K=6", "moves=[]", "alg.converge_thr=-1", "seed=3"]


# ------------------------------------------------------- mixture kernels
RTOL = 1e-12


TINY = 1e-300  # absolute slack for subnormal responsibilities only


KINDS = ["unit", "scale1e4", "around-1e5", "gaps1e3", "neginf_prior", "neginf_lik"]


def make_weights(N: int, K: int, kind: str, seed: int = 0):
    """(log_lik, log_prior) of a named difficulty."""
    rng = np.random.default_rng([seed, N, K, KINDS.index(kind)])
    log_prior = np.log(rng.dirichlet(np.ones(K)))
    if kind == "unit":
        log_lik = 3.0 * rng.standard_normal((N, K))
    elif kind == "scale1e4":  # W spread over [-1e4, 0]: most rows one-hot, some underflow
        log_lik = -1e4 * rng.random((N, K))
    elif kind == "around-1e5":  # naive exp(W) underflows to 0 everywhere
        log_lik = -1e5 + 2.0 * rng.standard_normal((N, K))
    elif kind == "gaps1e3":  # columns 1e3 apart, in a random order per row, plus near-ties
        log_lik = 1e3 * rng.permuted(np.tile(np.arange(K, dtype=float), (N, 1)), axis=1)
        log_lik += 1e-3 * rng.standard_normal((N, K)) - 1e5
    elif kind == "neginf_prior":
        log_lik = 5.0 * rng.standard_normal((N, K))
        if K > 1:
            log_prior[rng.choice(K, size=max(1, K // 3), replace=False)] = -np.inf
    elif kind == "neginf_lik":
        log_lik = 5.0 * rng.standard_normal((N, K))
        if K > 1:
            mask = rng.random((N, K)) < 0.3
            mask[np.arange(N), rng.integers(0, K, N)] = False  # keep one finite entry per row
            log_lik[mask] = -np.inf
    else:  # pragma: no cover
        raise ValueError(kind)
    return np.ascontiguousarray(log_lik), log_prior


def assert_close(actual, desired, atol=0.0, what=""):
    np.testing.assert_allclose(actual, desired, rtol=RTOL, atol=atol, err_msg=what)


def bits_of(arrays):
    return [np.asarray(a).tobytes() for a in arrays]


# ---------------------------------------------------------- topic models
def corpus(seed=0, n_docs=12, V=30, K_true=3, length=(5, 40)):
    """Documents drawn from K_true random topics (a few documents empty of some words)."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.2), size=K_true)
    ids, counts, offsets = [], [], [0]
    for _ in range(n_docs):
        pi = rng.dirichlet(np.full(K_true, 0.5))
        x = rng.multinomial(rng.integers(*length), pi @ topics)
        nz = np.flatnonzero(x)
        ids.append(nz)
        counts.append(x[nz])
        offsets.append(offsets[-1] + nz.size)
    return WordCountBatch(np.concatenate(ids).astype(np.int32), np.concatenate(counts).astype(np.float64),
                          np.array(offsets, dtype=np.int64), V)


def make_model(alloc, V=30):
    return Model(alloc, make_obs({"name": "mult", "lam": 0.1}, V, None))


def dense_local(model, batch, g, **options):
    """The local step on the dense (entries, K) log-likelihood, which keeps the responsibilities."""
    log_lik = model.obs.expected_log_lik(g.obs, model.alloc.atoms(batch))
    return log_lik, model.alloc.local_step(batch, log_lik, g.alloc, **options)


def direct_allocation_terms(alloc, batch, local, params):
    """L_ent + L_doc (+ L_top) document by document from (r, θ_d) (Hughes 2016 thesis Eq. 5.26-5.28, 5.25),
    under ``params`` (not necessarily those of the local step)."""
    N_d = local.tables["doc_counts"]
    prior, rest = local.tables["prior"], float(local.tables["prior_rest"])
    theta = N_d + prior
    r, c = local.resp.values, batch.word_counts
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.sum(c[:, None] * np.where(r > 0, r * np.log(r), 0.0))
    D, K = N_d.shape
    if isinstance(alloc, HDPTopicAlloc):
        beta, alpha = hdp_top.stick_means(params["rho"]), alloc.concentration(params)
        now, now_rest = alpha * beta[:-1], alpha * beta[-1]
    else:
        now, now_rest = np.asarray(params["doc_prior"]), 0.0
    total = 0.0
    for d in range(D):
        full = np.append(theta[d], rest) if rest > 0 else theta[d]
        E = digamma(full) - digamma(full.sum())
        total += -float(c_dir(full)) + np.sum((N_d[d] + now - theta[d]) * E[:K])
        if rest > 0:
            total += (now_rest - rest) * E[K]
    if isinstance(alloc, HDPTopicAlloc):  # thesis Eq. 5.25, written out
        rho, omega, gamma = params["rho"], params["omega"], alloc.gamma
        a, b = rho * omega, (1 - rho) * omega
        k = np.arange(1, K + 1)
        top = (D * K * np.log(alpha) + np.sum(np.log(gamma) - c_beta(a, b))
               + np.sum((D + 1 - a) * (digamma(a) - digamma(omega)))
               + np.sum((D * (K + 1 - k) + gamma - b) * (digamma(b) - digamma(omega))))
    else:
        top = D * float(c_dir(now))
    return H + total + top


# ------------------------------------------------------ topic-model runs
def hellinger_to_truth(run_dir, true_topics):
    """Each true topic's Hellinger distance to its closest learned topic (E[φ_k])."""
    from bnpvi.io.model_file import read_model
    lam = read_model(run_dir / "model.h5")["posterior"]["lam"]
    phi = lam / lam.sum(axis=1, keepdims=True)
    return np.sqrt(0.5 * ((np.sqrt(phi[:, None, :]) - np.sqrt(true_topics[None, :, :])) ** 2).sum(axis=-1)).min(axis=0)


# --------------------------------------------------- topic-model kernels
FIELDS = ["resp", "doc_counts", "iters", "objective", "restarts_accepted"]


ALL_FIELDS = FIELDS + ["entropy", "word_topic", "pair_entropy"]


def doc_range_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def make_batch(lengths, K, rng, alpha=2.0, rest=True, scale=1.0):
    """(log_lik, counts, doc_range, prior, prior_rest) like a topic model's local step sees.

    C_uk = E ln φ_{k,v} of Dirichlet topic posteriors (spread by ``scale``), counts of 1-5
    tokens (some halved, as after weighting), prior α β̂ with β̂ ~ Dir(1) over K + 1 entries.
    """
    nnz = int(np.sum(lengths))
    lam = rng.gamma(0.3, 2.0, (nnz, K)) + 0.01
    C = scale * (digamma(lam) - digamma(lam.sum(axis=1, keepdims=True) + 50.0))
    counts = rng.integers(1, 6, nnz) * rng.choice([1.0, 0.5], nnz)
    beta = rng.dirichlet(np.ones(K + 1))
    prior_rest = alpha * beta[K] if rest else 0.0
    return np.ascontiguousarray(C), counts, doc_range_of(lengths), alpha * beta[:K], prior_rest


def mixed_lengths(rng, D=40):
    """Document lengths with empty, one-row and long documents."""
    lengths = list(rng.integers(2, 40, size=D))
    lengths[:6] = [0, 1, 0, 90, 1, 0]
    lengths[-1] = 0
    return lengths


def make_table_batch(lengths, K, rng, V=60, scale=1.0, rest=True, alpha=2.0):
    """(table, word_ids, counts, doc_range, prior, prior_rest): make_batch's log-likelihoods
    as a (V, K) table read through word ids (types repeat within and across documents; some
    types are never used)."""
    table, _, _, prior, prior_rest = make_batch([V], K, rng, alpha=alpha, rest=rest, scale=scale)
    nnz = int(np.sum(lengths))
    word_ids = rng.integers(0, V - 3, nnz).astype(np.int64)
    counts = rng.integers(1, 6, nnz) * rng.choice([1.0, 0.5], nnz)
    return table, word_ids, counts, doc_range_of(lengths), prior, prior_rest


def some_pairs(K, rng, M=30):
    a, b = rng.integers(0, K, (2, 4 * M))
    keep = a != b
    return np.ascontiguousarray(np.stack([a[keep], b[keep]], axis=1)[:M])


def direct_summaries(res, counts, word_ids=None, pairs=None, V=None):
    """entropy, word_topic and pair_entropy of the returned r, straight from their formulas."""
    r = res.resp
    out = {"entropy": counts @ entr(r)}
    if word_ids is not None:
        X = sp.csr_matrix((counts, (np.arange(counts.size), word_ids)), shape=(counts.size, V))
        out["word_topic"] = X.T @ r
    if pairs is not None:
        out["pair_entropy"] = counts @ entr(r[:, pairs[:, 0]] + r[:, pairs[:, 1]])
    return out


def noise(field, counts) -> float:
    """Absolute tolerance of a summary: a pair holding all of a row's mass has t = 1 ± 2⁻⁵², and
    t ln t is rounding noise (|t ln t| ≤ 2⁻⁵² per token) that no relative tolerance covers."""
    return 1e-15 * counts.sum() if field == "pair_entropy" else 0.0


def assert_summaries(res, counts, word_ids=None, pairs=None, V=None, what=""):
    for f, want in direct_summaries(res, counts, word_ids, pairs, V).items():
        np.testing.assert_allclose(getattr(res, f), want, rtol=1e-12, atol=noise(f, counts), err_msg=f"{what}: {f}")


def assert_same_bits(got, want, fields, what=""):
    for f in fields:
        a, b = getattr(got, f), getattr(want, f)
        assert (a is None) == (b is None), f"{what}: {f}"
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), f"{what}: {f}"


def memo_run(path, K, moves, seed=0):
    """(store, memoized VB) of a DP mixture of full Gaussians on the points file ``path`` from K k-means++ seeds,
    with the ``moves`` node."""
    store = BatchStore.open(path)
    obs = make_obs(obs_cfg("gauss"), store.D, store.moments())
    model = Model(DPMixAlloc(2.0), obs)
    rng = np.random.default_rng(seed)
    init = OmegaConf.create({"name": "kmeanspp", "K": K, "n_samples": 1000, "n_trials": None, "kmeans_iters": 0})
    stats = initial_stats(model, store, init, rng, K)
    return store, MemoizedVB(model, store, {}, rng, model.global_step(stats), ClusterIds.first(K), moves=moves)


# ---------------------------------------------- brute-force move checks
def proposal_share(model, batch, r_target, N, fields):
    """p̃_nj of a birth's transfer: softmax_j(E log p(x_n|φ̃_j) + ln π̃_j), and for an atom holding at most
    FAINT_MASS of the target all of its share at the largest fresh cluster."""
    share = softmax(model.obs.expected_log_lik(model.obs.posterior(N, fields), batch) + fresh_weights(N), axis=1)
    faint = (r_target > 0) & (r_target <= FAINT_MASS)
    share[faint] = 0.0
    share[faint, int(np.argmax(N))] = 1.0
    return share


def absorbed_columns(r_target, r_absorb, weights, into):
    """r'_{n,A} of a delete: an atom holding none of the target keeps its responsibilities, one holding more
    than FAINT_MASS shares r_nt + Σ_A r_nA by softmax(weights) (thesis Eq. 4.25-4.27), and a faint one gives
    r_nt to the absorbing cluster ``into``."""
    after = r_absorb.copy()
    scored = r_target > FAINT_MASS
    after[scored] = (r_target[scored] + r_absorb[scored].sum(axis=1))[:, None] * softmax(weights[scored], axis=1)
    faint = (r_target > 0) & ~scored
    after[faint, into] += r_target[faint]
    return after


def deleted_resp(r, target, absorb, scores, N):
    """The brute-force responsibilities after deleting cluster ``target`` into ``absorb`` (:func:`absorbed_columns`,
    with ``scores`` the (N, K) E log p + E ln π and ``N`` the clusters' counts)."""
    new = r.copy()
    new[:, absorb] = absorbed_columns(r[:, target], r[:, absorb], scores[:, absorb], int(np.argmax(N[absorb])))
    return np.delete(new, target, axis=1)


def assert_gain(predicted, brute):
    assert predicted == pytest.approx(brute, rel=1e-6, abs=1e-6 * max(1.0, abs(brute)))
