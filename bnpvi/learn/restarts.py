"""Restarts that keep the best: ``alg.n_init = R`` trains R runs of one config from the seeds
``seed, seed + 1, …, seed + R − 1`` and keeps the one whose final whole-data ELBO is highest.

Each restart is a complete run directory, ``RUN_DIR/restarts/seed-<s>/``, with its own config record,
trace, checkpoints and final files, so ``bnpvi-report RUN_DIR`` lists every restart and a restart can be
read and loaded on its own. When all have stopped, the kept one's final files (model, summary,
assignments, tables, plots) are copied into ``RUN_DIR`` itself, which is then what :func:`bnpvi.load`,
``bnpvi-apply`` and the estimators read; ``RUN_DIR/restarts.csv`` has one row per restart (seed, ELBO, K,
laps, seconds, converged, kept) and ``summary.json`` the same under ``restarts`` and the kept seed under
``kept_seed``. Restart 1 is the run ``alg.n_init = 1`` would make, to the last bit.

The restarts run one after another in this process; with ``alg.workers`` > 1 (or ``alg.scheduler``) the
Dask workers run them, one restart per worker at a time, each restart's batches in its worker (a restart
then trains as ``alg.workers = 1`` does). ``bnpvi-train resume=RUN_DIR`` continues every restart from
its latest checkpoint, starts those that had not started, and chooses again. The ELBO compares restarts
because they share the model and the data; the algorithm must compute one (``alg=tfsvi`` does not).
"""
from __future__ import annotations

import csv
import json
import logging
import shutil
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bnpvi.data.writes import write_text
from bnpvi.errors import BnpviError, check_int
from bnpvi.io.run_dir import (RESTARTS, RUN_RECORD, RunDirLock, RunState, clear_unfinished, refuse_start,
                              remove_if_empty, run_state)
from bnpvi.learn import runner
from bnpvi.learn.progress import Progress

log = logging.getLogger("bnpvi")

TABLE = "restarts.csv"
TABLE_COLUMNS = ["seed", "elbo", "K", "laps", "elapsed_s", "converged", "kept", "run"]
KEPT_FILES_SKIPPED = {"train.log", ".bnpvi.lock"}
"""Files of the kept restart's directory that are not copied into the run directory (its own log and lock)."""
NO_ELBO = {"tfsvi"}
"""Algorithms whose runs end without a whole-data ELBO to compare restarts by."""


def n_init(cfg: DictConfig) -> int:
    """``alg.n_init`` of ``cfg`` (1 for configs saved before the key), checked (an integer ≥ 1)."""
    return check_int(OmegaConf.select(cfg, "alg.n_init", default=1), "alg.n_init", minimum=1)


def restart_seeds(cfg: DictConfig) -> list[int]:
    """The seeds of the restarts: ``seed``, ``seed + 1``, …, ``seed + alg.n_init − 1``."""
    first = int(cfg.seed)
    return list(range(first, first + n_init(cfg)))


def restart_dir(run_dir: Path, seed: int) -> Path:
    return Path(run_dir) / RESTARTS / f"seed-{seed}"


def restart_config(cfg: DictConfig, seed: int, in_worker: bool) -> DictConfig:
    """The config of the restart of ``seed``: ``cfg`` with that seed and one restart; ``in_worker``: trained
    inside one Dask worker (``alg.workers = 1``, no scheduler)."""
    one = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    one.seed = seed
    one.alg.n_init = 1
    if in_worker:
        one.alg.workers = 1
        if "scheduler" in one.alg:
            one.alg.scheduler = None
    return one


def _write_record(folder: Path, cfg: DictConfig, overrides: list[str]) -> None:
    """A restart's config record (``.hydra/config.yaml`` and ``overrides.yaml``: the run's overrides and its
    seed), which the report reads and a resume compares with."""
    record = folder / RUN_RECORD
    record.mkdir(parents=True, exist_ok=True)
    (record / "config.yaml").write_text(OmegaConf.to_yaml(cfg), encoding="utf-8")
    lines = [line for line in overrides if line.split("=", 1)[0].lstrip("+~") not in ("seed", "alg.n_init")]
    (record / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create([*lines, f"seed={cfg.seed}"])),
                                           encoding="utf-8")


def open_restart(cfg: DictConfig, folder: Path, overrides: list[str]):
    """The restart in ``folder``, ready to train (a :class:`~bnpvi.learn.runner.Run`: fresh, or continued from
    its checkpoint), or the summary of one that finished without a checkpoint. A fresh restart that cannot
    start leaves no folder behind."""
    state = run_state(folder)
    if state is RunState.FINISHED:  # checkpoints=false
        return json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    if state is RunState.RESUMABLE:
        return runner.reopen(folder, cfg)
    if state is RunState.UNFINISHED:
        clear_unfinished(folder)
    _write_record(folder, cfg, overrides)
    try:
        return runner.start(cfg, folder)
    except BaseException:
        shutil.rmtree(folder / RUN_RECORD, ignore_errors=True)
        remove_if_empty(folder, folder.parent.parent)
        raise


def train_restart(cfg_yaml: str, folder: str, overrides: list[str], progress: Progress | None = None,
                  hard_stop: bool = False) -> dict:
    """Train one restart in ``folder`` to its end (:func:`open_restart`); its summary. A module-level function,
    so that a Dask worker can run it (the config travels as YAML)."""
    opened = open_restart(OmegaConf.create(cfg_yaml), Path(folder), overrides)
    return opened if isinstance(opened, dict) else runner.run_to_end(opened, progress, hard_stop)


def best_restart(rows: list[dict]) -> int:
    """The index of the row of highest final ELBO (the first on ties; a restart without an ELBO never wins)."""
    scored = [(i, row["elbo"]) for i, row in enumerate(rows) if row["elbo"] is not None]
    if not scored:
        raise BnpviError("no restart ended with an ELBO to compare by")
    return max(scored, key=lambda item: (item[1], -item[0]))[0]


class Restarts:
    """The R restarts of one run directory, trained to their end by :meth:`train` (the interface of
    :class:`bnpvi.learn.runner.Run` that :func:`bnpvi.learn.runner.run_to_end` drives)."""

    def __init__(self, cfg: DictConfig, run_dir: Path, claim: RunDirLock | None = None,
                 overrides: list[str] | None = None):
        self.cfg, self.run_dir, self.claim = cfg, Path(run_dir), claim
        self.overrides = list(overrides or [])
        if str(cfg.alg.name) in NO_ELBO:
            raise BnpviError(f"alg.n_init={n_init(cfg)}: alg={cfg.alg.name} ends without a whole-data ELBO to keep "
                             f"the best restart by; use alg.n_init=1")
        self.parallel = int(OmegaConf.select(cfg, "alg.workers", default=1) or 1) > 1 \
            or bool(OmegaConf.select(cfg, "alg.scheduler", default=None))
        self.jobs = [(seed, restart_dir(self.run_dir, seed)) for seed in restart_seeds(cfg)]
        self._opened = self._open_first()

    def _open_first(self):
        """The first restart still to train, opened now so that bad input (data, config) fails at start-up, as
        a run of one does: (its index, its Run) when the restarts train in turn, else closed again (the
        worker opens it anew); None when every restart has finished."""
        for number, (seed, folder) in enumerate(self.jobs):
            opened = open_restart(restart_config(self.cfg, seed, self.parallel), folder, self.overrides)
            if isinstance(opened, dict):
                continue
            if not self.parallel:
                return number, opened
            opened.close()
            return None
        return None

    def train(self, progress: Progress | None = None, hard_stop: bool = False) -> dict:
        """Train every restart to its end, keep the best, and write the run directory's final files."""
        summaries = self._train_parallel(self.jobs) if self.parallel else \
            self._train_in_turn(self.jobs, progress, hard_stop)
        return self._keep_best(self.jobs, summaries)

    def _config_yaml(self, seed: int) -> str:
        return OmegaConf.to_yaml(restart_config(self.cfg, seed, in_worker=self.parallel))

    def _train_in_turn(self, jobs, progress, hard_stop: bool) -> list[dict]:
        summaries = []
        for number, (seed, folder) in enumerate(jobs, start=1):
            log.info("restart %d of %d: seed %d in %s", number, len(jobs), seed, folder)
            opened = self._opened[1] if self._opened is not None and self._opened[0] == number - 1 else None
            if opened is not None:
                self._opened = None  # run_to_end closes it
            try:
                summaries.append(train_restart(self._config_yaml(seed), str(folder), self.overrides, progress,
                                               hard_stop) if opened is None else
                                 runner.run_to_end(opened, progress, hard_stop))
            except runner.Interrupted as err:
                raise runner.Interrupted(f"restart {number} of {len(jobs)} (seed {seed}): {err}; continue every "
                                         f"restart with: bnpvi-train resume={self.run_dir}") from None
        return summaries

    def _train_parallel(self, jobs) -> list[dict]:
        from bnpvi.learn.dask_pool import connect  # Dask is an extra: imported when asked for

        alg = self.cfg.alg
        client, cluster = connect(int(alg.workers), int(alg.threads_per_worker), alg.get("scheduler"))
        try:
            futures = [client.submit(train_restart, self._config_yaml(seed), str(folder), self.overrides,
                                     key=f"bnpvi-restart-{seed}", pure=False) for seed, folder in jobs]
            log.info("%d restarts on %d Dask workers", len(jobs), len(client.scheduler_info()["workers"]))
            try:
                return client.gather(futures)
            except KeyboardInterrupt:
                raise runner.Interrupted(f"interrupted; each restart kept its latest checkpoint; continue every "
                                         f"restart with: bnpvi-train resume={self.run_dir}") from None
        finally:
            client.close()
            if cluster is not None:
                cluster.close()

    def _keep_best(self, jobs, summaries: list[dict]) -> dict:
        rows = [{"seed": seed, "elbo": s.get("elbo"), "K": s.get("K"), "laps": s.get("laps"),
                 "elapsed_s": s.get("elapsed_s"), "converged": s.get("converged"),
                 "run": str(folder.relative_to(self.run_dir))} for (seed, folder), s in zip(jobs, summaries)]
        kept = best_restart(rows)
        for i, row in enumerate(rows):
            row["kept"] = i == kept
        source = jobs[kept][1]
        for path in source.iterdir():
            if path.is_file() and path.name not in KEPT_FILES_SKIPPED and path.name != "summary.json":
                shutil.copy2(path, self.run_dir / path.name)
        with (self.run_dir / f".{TABLE}.tmp").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=TABLE_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        (self.run_dir / f".{TABLE}.tmp").replace(self.run_dir / TABLE)
        summary = dict(summaries[kept])
        summary["stop_reason"] = f"best of {len(rows)} restarts (seed {rows[kept]['seed']}): {summary['stop_reason']}"
        summary.update(kept_seed=rows[kept]["seed"], restarts=[{k: row[k] for k in TABLE_COLUMNS if k != "run"}
                                                                for row in rows])
        write_text(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        elbos = ", ".join("none" if row["elbo"] is None else f"{row['elbo']:.10g}" for row in rows)
        log.info("kept restart %d of %d (seed %d): elbo %.10g, K %s; the restarts' ELBOs: %s", kept + 1, len(rows),
                 rows[kept]["seed"], rows[kept]["elbo"], rows[kept]["K"], elbos)
        return summary

    def close(self) -> None:
        """Release the run directory, and the first restart if it was opened and not trained."""
        if self._opened is not None:
            self._opened[1].close()
            self._opened = None
        if self.claim is not None:
            self.claim.release()
            self.claim = None


def start(cfg: DictConfig, run_dir: Path, claim: RunDirLock | None = None, overrides: list[str] | None = None):
    """A fresh run of ``cfg`` in ``run_dir``: :func:`bnpvi.learn.runner.start`'s, or its restarts when
    ``alg.n_init`` > 1."""
    if n_init(cfg) == 1:
        return runner.start(cfg, run_dir, claim)
    run_dir = Path(run_dir)

    def begin(claim: RunDirLock) -> Restarts:
        refuse_start(run_dir)
        return Restarts(cfg, run_dir, claim, overrides)
    return runner.claimed(run_dir, claim, begin)


def reopen(run_dir: Path, cfg: DictConfig, claim: RunDirLock | None = None, overrides: list[str] | None = None):
    """The run in ``run_dir`` ready to continue: :func:`bnpvi.learn.runner.reopen`'s, or its restarts."""
    if n_init(cfg) == 1:
        return runner.reopen(run_dir, cfg, claim)
    run_dir = Path(run_dir)

    def begin(claim: RunDirLock) -> Restarts:
        if not (run_dir / RESTARTS).is_dir():
            raise BnpviError(f"cannot resume {run_dir}: its config has alg.n_init={n_init(cfg)} but it holds no "
                             f"{RESTARTS}/ folder")
        return Restarts(cfg, run_dir, claim, overrides)
    return runner.claimed(run_dir, claim, begin)


def train(cfg: DictConfig, run_dir: Path, progress: Progress | None = None) -> dict:
    """A fresh run (or its restarts) in ``run_dir``, trained to its end: its summary."""
    return runner.run_to_end(start(cfg, run_dir), progress)
