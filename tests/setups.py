"""What several test modules share: running laps; for the HMM tests, toy sequence files and a model with initial
globals; running bnpvi-train."""
import os
import subprocess
import sys

import numpy as np
from omegaconf import OmegaConf

from bnpvi.data.store import BatchStore, write_sequences
from bnpvi.data.toy import make_toy_sequences
from bnpvi.learn.init import initial_stats
from bnpvi.model import Model
from bnpvi.obs import make_obs
from bnpvi.stats import ClusterIds


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
