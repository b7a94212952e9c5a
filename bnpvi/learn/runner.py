"""The runner: wires a composed config to data, model and algorithm, and drives the run.

It owns everything around the algorithm: the run directory's trace, checkpoints
(every ``checkpoint_every`` laps, on Ctrl-C/SIGTERM, and at the end), the final
model, the plot, and resuming from a checkpoint so that the resumed run ends
exactly where the uninterrupted one would have.
"""
from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from bnpvi.alloc import make_alloc
from bnpvi.data.store import BatchStore
from bnpvi.data.toy import ensure_toy
from bnpvi.errors import BnpviError
from bnpvi.io.checkpoint import load_checkpoint, save_checkpoint
from bnpvi.io.model_file import write_model
from bnpvi.io.plots import plot_trace
from bnpvi.io.trace import CLUSTER_COLUMNS, MOVE_COLUMNS, TRACE_COLUMNS, CsvTable
from bnpvi.learn.base import LapResult
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.sovb import StochasticVB
from bnpvi.learn.vb import FullVB
from bnpvi.metrics import adjusted_rand_index
from bnpvi.model import MixtureModel
from bnpvi.obs import make_obs
from bnpvi.stats import SuffStats

log = logging.getLogger("bnpvi")

ALGORITHMS = {cls.name: cls for cls in (FullVB, MemoizedVB, StochasticVB)}


class Interrupted(Exception):
    """Raised after a checkpoint was written because the user pressed Ctrl-C (or SIGTERM)."""


def open_store(cfg: DictConfig) -> BatchStore:
    """The data set named by the ``data`` node, split as ``alg.n_batches`` asks."""
    data = cfg.data
    if data.name == "toy":
        path = ensure_toy(n_atoms=int(data.n_atoms), seed=int(data.seed), n_batches=int(data.n_batches))
    elif data.name == "hdf5":
        if data.get("path") in (None, "", "???"):
            raise BnpviError("data=hdf5 needs data.path=FILE (a file written by `bnpvi-data convert`)")
        path = Path(str(data.path)).expanduser()
    else:
        raise BnpviError(f"unknown data {data.name!r}; choose toy or hdf5")
    store = BatchStore.open(path, n_batches=cfg.alg.get("n_batches"))
    if store.n_atoms < 2:
        raise BnpviError(f"data file {store.path} has {store.n_atoms} atom(s); need at least 2")
    return store


def hard_assignments(model: MixtureModel, store: BatchStore) -> np.ndarray:
    """argmax_k r_nk for every atom, in file order."""
    parts = []
    for b in range(store.n_batches):
        resp = model.local_step(store.read_batch(b))
        parts.append(np.argmax(resp.to_dense(), axis=1))
    return np.concatenate(parts)


class Run:
    """One training run in one run directory (fresh or resumed)."""

    def __init__(self, cfg: DictConfig, run_dir: Path, checkpoint: dict | None = None):
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.store = open_store(cfg)
        self.store.validate()
        moments = self.store.moments()
        self.obs = make_obs(cfg.obs, self.store.D, moments)
        self.alloc = make_alloc(cfg.model)
        if cfg.alg.name not in ALGORITHMS:
            raise BnpviError(f"unknown alg {cfg.alg.name!r}; choose one of {sorted(ALGORITHMS)}")
        if int(cfg.alg.n_laps) < 1:
            raise BnpviError(f"alg.n_laps must be at least 1, got {cfg.alg.n_laps}")
        if int(cfg.checkpoint_every) < 1:
            raise BnpviError(f"checkpoint_every must be at least 1, got {cfg.checkpoint_every}")
        moves = cfg.get("moves")
        self.moves = moves if moves is not None and any(moves.get(m) is not None for m in moves) else None
        if self.moves is not None and cfg.alg.name != "memo":
            raise BnpviError(f"moves={sorted(m for m in moves if moves.get(m) is not None)} need alg=memo, not alg={cfg.alg.name}")
        self.meta = {"D": self.store.D, "n_atoms": self.store.n_atoms, "n_batches": self.store.n_batches,
                     "data_mean": np.zeros(0) if moments is None else moments.mean}
        self.rng = np.random.default_rng(int(cfg.seed))
        self.converged = False
        self.prev_counts: np.ndarray | None = None
        self._start: float | None = None  # perf_counter() when this process started training
        if checkpoint is None:
            stats = initial_stats(self.obs, self.store, cfg.init, self.rng)
            self.model = MixtureModel(self.alloc, self.obs, stats)
            self.alg = self._algorithm()
            self.trace = CsvTable(self.run_dir / "trace.csv", TRACE_COLUMNS)
            self.clusters = CsvTable(self.run_dir / "clusters.csv", CLUSTER_COLUMNS)
            self._open_move_log()
            self.elapsed_before = 0.0
        else:
            self._restore(checkpoint)

    def _algorithm(self):
        cls = ALGORITHMS[self.cfg.alg.name]
        if self.moves is not None:
            return cls(self.model, self.store, self.cfg.alg, self.rng, moves=self.moves)
        return cls(self.model, self.store, self.cfg.alg, self.rng)

    def _open_move_log(self) -> None:
        schedule = getattr(self.alg, "moves", None)
        events = schedule.event_rows() if schedule is not None else []
        self.move_log = CsvTable(self.run_dir / "moves.csv", MOVE_COLUMNS, events) if schedule is not None else None
        self.events_logged = len(events)

    # ---------------------------------------------------------------- state
    def state(self) -> dict:
        model = {"eff": self.model.eff.to_tree(), "uids": self.model.uids, "next_uid": self.model.next_uid}
        run = {"elapsed_s": self.elapsed(), "converged": int(self.converged)}
        if self.prev_counts is not None:
            run["prev_counts"] = self.prev_counts
        return {"model": model, "alg": self.alg.state(), "trace": self.trace.to_arrays(),
                "clusters": self.clusters.to_arrays(), "run": run,
                "rng": json.dumps(self.rng.bit_generator.state), "meta": self.meta,
                "config": OmegaConf.to_yaml(self.cfg)}

    def _restore(self, ckpt: dict) -> None:
        meta = ckpt["meta"]
        if int(meta["D"]) != self.store.D:
            raise BnpviError(f"data dimension D={self.store.D} of {self.store.path} does not match the checkpoint's D={int(meta['D'])}")
        if int(meta["n_atoms"]) != self.store.n_atoms or int(meta["n_batches"]) != self.store.n_batches:
            raise BnpviError(
                f"data file {self.store.path} has N={self.store.n_atoms} in {self.store.n_batches} batches; "
                f"the checkpoint was made with N={int(meta['n_atoms'])} in {int(meta['n_batches'])} batches")
        if not np.array_equal(np.asarray(meta["data_mean"]), self.meta["data_mean"]):
            raise BnpviError(f"data file {self.store.path} has changed since the checkpoint was written")
        m = ckpt["model"]
        self.model = MixtureModel(self.alloc, self.obs, SuffStats.from_tree(m["eff"]), uids=m["uids"])
        self.model.next_uid = int(m["next_uid"])
        self.rng.bit_generator.state = json.loads(ckpt["rng"])
        self.alg = self._algorithm()
        self.alg.load_state(ckpt["alg"])
        self.trace = CsvTable(self.run_dir / "trace.csv", TRACE_COLUMNS,
                              CsvTable.rows_from_arrays(ckpt["trace"], TRACE_COLUMNS))
        self.clusters = CsvTable(self.run_dir / "clusters.csv", CLUSTER_COLUMNS,
                                 CsvTable.rows_from_arrays(ckpt.get("clusters", {}), CLUSTER_COLUMNS))
        self._open_move_log()
        run = ckpt.get("run", {})
        self.elapsed_before = float(run.get("elapsed_s", 0.0))
        self.converged = bool(int(run.get("converged", 0)))
        self.prev_counts = np.asarray(run["prev_counts"]) if "prev_counts" in run else None

    def elapsed(self) -> float:
        """Seconds of training so far, summed over the processes that ran this run."""
        return self.elapsed_before + (0.0 if self._start is None else time.perf_counter() - self._start)

    def checkpoint(self) -> Path:
        return save_checkpoint(self.run_dir, self.state())

    # ------------------------------------------------------------------ loop
    def _record(self, result: LapResult) -> None:
        elbo = result.elbo
        row = {"lap": result.lap, "batches_seen": self.alg.batches_seen, "elapsed_s": round(self.elapsed(), 4),
               "elbo": elbo, "K": result.K, "elbo_per_atom": elbo / self.store.n_atoms}
        row.update(result.moves)
        prev = self.trace.rows[-1] if self.trace.rows else None
        self.trace.append(row)
        self.clusters.extend([{"lap": result.lap, "uid": int(u), "count": float(n)}
                              for u, n in zip(self.model.uids, result.counts)])
        if self.move_log is not None:
            self.move_log.extend(self.alg.moves.event_rows(self.events_logged))
            self.events_logged = len(self.alg.moves.events)
        moves = "".join(f"  {m} {result.moves[m + '_accepted']}/{result.moves[m + '_tried']}"
                        for m in ("birth", "merge", "delete") if result.moves.get(m + "_tried"))
        log.info("lap %4d  elbo %.10g  K %3d  %8.2f s%s", result.lap, elbo, result.K, row["elapsed_s"], moves)
        thr, count_thr = float(self.cfg.alg.converge_thr), float(self.cfg.alg.count_thr)
        if prev is not None and self.prev_counts is not None and self.prev_counts.shape == result.counts.shape:
            small_change = abs(elbo - prev["elbo"]) / self.store.n_atoms < thr
            stable_counts = np.max(np.abs(result.counts - self.prev_counts)) < count_thr
            no_moves = not any(v for k, v in result.moves.items() if k.endswith("_accepted"))
            self.converged = bool(small_change and stable_counts and no_moves)
        self.prev_counts = result.counts

    def train(self) -> dict:
        """Run laps until convergence or ``alg.n_laps``; write the final outputs."""
        cfg = self.cfg
        n_laps, every = int(cfg.alg.n_laps), int(cfg.checkpoint_every)
        stop = {"signal": None}

        def request_stop(signum, frame):
            if stop["signal"] is not None:  # a second Ctrl-C stops at once
                raise KeyboardInterrupt
            stop["signal"] = signum
            log.info("stopping after the current batch (signal %d) ...", signum)

        handlers = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._start = time.perf_counter()
        try:
            while not self.converged and self.alg.lap < n_laps:
                result = self.alg.step()
                if result is not None:
                    self._record(result)
                    if result.lap % every == 0 and not self.converged and result.lap < n_laps:
                        self.checkpoint()
                if stop["signal"] is not None:
                    path = self.checkpoint()
                    raise Interrupted(f"interrupted at lap {self.alg.lap} batch {self.alg.pos}; checkpoint {path}; "
                                      f"continue with: bnpvi-train resume={self.run_dir}")
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        return self.finish()

    def finish(self) -> dict:
        self.checkpoint()
        summary = {"elbo": self.trace.rows[-1]["elbo"] if self.trace.rows else None,
                   "K": self.model.K, "laps": self.alg.lap, "converged": self.converged,
                   "elapsed_s": round(self.elapsed(), 4), "n_atoms": self.store.n_atoms, "D": self.store.D,
                   "counts": np.round(self.model.eff.N, 6).tolist(), "uids": self.model.uids.tolist()}
        truth = self.store.labels()
        if truth is not None:
            summary["ari"] = adjusted_rand_index(truth, hard_assignments(self.model, self.store))
        write_model(self.run_dir / "model.h5", self.model, self.cfg, summary)
        if self.trace.rows:
            plot_trace(self.trace.rows, self.run_dir / "elbo_K.png")
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        ari = f"  ARI {summary['ari']:.4f}" if "ari" in summary else ""
        log.info("done: %d laps, elbo %.10g, K %d%s, %.2f s%s", self.alg.lap, summary["elbo"], self.model.K,
                 ari, summary["elapsed_s"], "" if self.converged else " (lap limit reached)")
        log.info("run directory: %s", self.run_dir)
        return summary

    def close(self) -> None:
        self.store.close()


def train(cfg: DictConfig, run_dir: Path) -> dict:
    """A fresh run in ``run_dir``."""
    run_dir = Path(run_dir)
    if (run_dir / "trace.csv").exists():
        raise BnpviError(f"run directory {run_dir} already holds a run; use resume={run_dir} to continue it")
    run_dir.mkdir(parents=True, exist_ok=True)
    log.info("run directory: %s", run_dir)
    run = Run(cfg, run_dir)
    try:
        return run.train()
    finally:
        run.close()


def resume(run_dir: Path, cfg: DictConfig) -> dict:
    """Continue the run in ``run_dir`` from its latest checkpoint."""
    checkpoint = load_checkpoint(run_dir)
    run = Run(cfg, run_dir, checkpoint)
    try:
        log.info("resuming %s at lap %d, batch %d", run_dir, run.alg.lap, run.alg.pos)
        return run.train()
    finally:
        run.close()
