"""The run directories under some paths, each read into a :class:`RunRecord`: its settings, how far it got
and what it reached.

A run directory is one ``bnpvi-train`` wrote (:mod:`bnpvi.learn.runner`, docs/outputs.md): ``.hydra/``
(the composed config, the command line's overrides, and one ``resumed-TIME/`` per resume) from the
start, ``trace.csv`` from the first lap on, ``checkpoints/latest.h5`` every ``checkpoint_every`` laps,
and ``summary.json`` when the run stops, also when Ctrl-C or SIGTERM stops it. Which of them are there,
and whether the summary is as far as the trace, tell how the run ended (:data:`STATUSES`). A sweep's
jobs that left no directory at all are found from its ``multirun.yaml`` (:mod:`bnpvi.report.sweeps`).
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf

from bnpvi.errors import BnpviError
from bnpvi.io.run_dir import RESTARTS, checkpoint_path
from bnpvi.report.sweeps import MULTIRUN_FILE, plain_value, sweep_jobs

HYDRA_DIR = ".hydra"
TRACE_FILE = "trace.csv"
SUMMARY_FILE = "summary.json"
STATUSES = {
    "finished": "stopped by itself: converged, or reached alg.n_laps",
    "interrupted": "stopped by Ctrl-C or SIGTERM; its files describe the lap it stopped after; resumable",
    "incomplete": "trace.csv but no summary.json of its last lap: killed, crashed, or still running",
    "failed": ".hydra/ but no trace.csv: stopped (or still starting) before its first lap",
    "missing": "a job of a sweep without a directory: it could not start (bnpvi-train removes the directory of "
               "a run that fails at start-up) or never started",
}
"""How a run ended -> what its directory holds."""
METRICS = {
    "ari": "adjusted Rand index against the true labels (points, documents)",
    "heldout_loglik": "held-out log-likelihood: nats per held-out point, or per held-out token by document "
                      "completion",
    "hamming": "normalised Hamming distance of the Viterbi paths to the true states after one-to-one alignment "
               "(sequences)",
    "hamming_many_to_one": "the same with each state mapped to the true state it overlaps most (several may share "
                           "one)",
    "states_used": "sequences: how many states the Viterbi paths visit (read the many-to-one distance with it)",
    "hamming_marginal_map": "the one-to-one distance of the marginal-MAP paths",
    "coherence_npmi": "topic models: token-weighted mean NPMI coherence of the topics' top words",
    "heldout_auc": "graph models: area under the ROC curve of the held-out pairs' link probabilities",
    "heldout_ap": "graph models: average precision of the held-out pairs' link probabilities",
    "nmi": "graph models: normalised mutual information of the nodes' main communities and the true labels",
}
"""The runs' own scores that the report shows where a run has them (summary.json's keys)."""
MODEL_NODES = ("model", "obs", "data")
"""Config nodes that define the objective: two runs' ELBOs compare only when these are equal."""


@dataclass
class RunRecord:
    """One run as the report sees it.

    Attributes
    ----------
    path : Path
        Its directory (for a ``missing`` job, where it would be).
    status : str
        A key of :data:`STATUSES`.
    results : dict
        ``elbo``, ``K``, ``laps``, ``seconds``, ``stop_reason`` and those of :data:`METRICS` it has: from
        summary.json when that describes the run's last lap, else from trace.csv's last row.
    overrides : dict
        Each key its command line (or a resume) set -> the value the run used.
    problem : str or None
        Why the run is not ``finished``, and what to do about it; None when it is.
    trace : DataFrame
        trace.csv (empty without one).
    config : DictConfig or None
        The config the run used: ``.hydra/config.yaml`` with each resume's changes.
    choices : dict
        The option of each config group (``model``: ``dp_mix``, ...).
    job : int or None
        Its job number, for a job of a Hydra sweep.
    """

    path: Path
    status: str
    results: dict
    overrides: dict
    problem: str | None = None
    trace: pd.DataFrame = field(default_factory=pd.DataFrame)
    config: DictConfig | None = None
    choices: dict = field(default_factory=dict)
    job: int | None = None

    def setting(self, key: str):
        """The value ``key`` (an override's key) had in this run: set on its command line, the option of a
        config group, or the config's value (a node as the list of its entries that are set); None when
        unknown."""
        if key in self.overrides:
            return self.overrides[key]
        if key in self.choices:
            return self.choices[key]
        if self.config is None:
            return None
        node = OmegaConf.select(self.config, key, default=None, throw_on_resolution_failure=False)
        if isinstance(node, DictConfig):
            return f"[{','.join(name for name, value in node.items() if value is not None)}]"
        return plain_value(list(node)) if isinstance(node, ListConfig) else node

    def model_settings(self) -> dict | None:
        """Every setting of the :data:`MODEL_NODES`, flat (``model.gamma``: 1.0, ...); None without a config."""
        if self.config is None:
            return None
        flat = {}
        for name in MODEL_NODES:
            node = OmegaConf.select(self.config, name, default=None, throw_on_resolution_failure=False)
            if node is not None:
                flat.update(_flatten(OmegaConf.to_container(node, resolve=False), name))
        return flat


def _flatten(value, prefix: str) -> dict:
    if isinstance(value, dict):
        return {key: leaf for name, child in value.items() for key, leaf in _flatten(child, f"{prefix}.{name}").items()}
    return {prefix: plain_value(value)}


def is_run_dir(path: Path) -> bool:
    return (path / HYDRA_DIR / "config.yaml").is_file() or (path / TRACE_FILE).is_file()


def override_keys(lines) -> list[str]:
    """The keys (or config groups) that Hydra override ``lines`` set, in order."""
    return [override.key_or_group for override in OverridesParser.create().parse_overrides(list(lines))]


def _read_yaml(path: Path):
    """``path``'s YAML as plain Python (dicts, lists, values); None when it is absent or cannot be read (a torn
    write)."""
    try:
        return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return None


def _read_config(path: Path) -> DictConfig | None:
    plain = _read_yaml(path)
    return OmegaConf.create(plain) if isinstance(plain, dict) else None


def _read_settings(run_dir: Path) -> tuple[DictConfig | None, dict, list[str], int | None]:
    """The config the run used, its group options, the keys its command lines set (the run's and each
    resume's, ``resume`` left out) and its sweep job number, from ``.hydra/``."""
    hydra_dir = run_dir / HYDRA_DIR
    config = _read_config(hydra_dir / "config.yaml")
    keys = override_keys(_read_yaml(hydra_dir / "overrides.yaml") or [])
    for resumed in sorted(hydra_dir.glob("resumed-*")):  # named by time: oldest first
        resumed_config = _read_config(resumed / "config.yaml")
        for key in override_keys(_read_yaml(resumed / "overrides.yaml") or []):
            if key == "resume" or resumed_config is None or config is None:
                continue
            OmegaConf.update(config, key, OmegaConf.select(resumed_config, key, default=None), merge=False)
            if key not in keys:
                keys.append(key)
    hydra = (_read_yaml(hydra_dir / "hydra.yaml") or {}).get("hydra") or {}
    choices = (hydra.get("runtime") or {}).get("choices") or {}
    choices = {group: option for group, option in choices.items() if not group.startswith("hydra/")}
    job = (hydra.get("job") or {}).get("num") if hydra.get("mode") == "MULTIRUN" else None
    return config, choices, keys, job


def read_trace(path: Path) -> pd.DataFrame | None:
    """trace.csv, without a row cut short by a kill; None when there is no file."""
    if not path.is_file():
        return None
    try:
        trace = pd.read_csv(path, on_bad_lines="skip", float_precision="round_trip")
    except pd.errors.EmptyDataError:  # killed before its header was written
        return pd.DataFrame(columns=["lap", "elapsed_s", "elbo", "K"])
    for column in trace.columns:
        trace[column] = pd.to_numeric(trace[column], errors="coerce")
    return trace.dropna(subset=[c for c in ("lap", "elapsed_s", "elbo", "K") if c in trace]).reset_index(drop=True)


def _read_summary(path: Path) -> dict | None:
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or cut short by a kill
        return None
    return summary if isinstance(summary, dict) else None


def short_reason(reason: str) -> str:
    """A stop reason's first clause (``converged``, ``lap limit alg.n_laps=50 reached``,
    ``interrupted at lap 3 batch 2 (signal 2)``), without its explanation or hint."""
    return re.split(r"[:;]", reason, maxsplit=1)[0].strip()


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _results(trace: pd.DataFrame | None, summary: dict | None) -> dict:
    """What the run reached: from ``summary`` when given, else from the trace's last row."""
    if summary is not None:
        results = {"elbo": _number(summary.get("elbo")), "K": summary.get("K"), "laps": summary.get("laps"),
                   "seconds": _number(summary.get("elapsed_s")),
                   "stop_reason": short_reason(summary.get("stop_reason") or "")}
        return results | {name: _number(summary[name]) for name in METRICS if name in summary}
    if trace is None or trace.empty:
        return {}
    last = trace.iloc[-1]
    results = {"elbo": float(last["elbo"]), "K": int(last["K"]), "laps": int(last["lap"]),
               "seconds": float(last["elapsed_s"])}
    return results | {name: float(last[name]) for name in METRICS if name in last and math.isfinite(last[name])}


def _status(run_dir: Path, trace: pd.DataFrame | None, summary: dict | None) -> tuple[str, str | None, bool]:
    """The run's status, the problem to report (None for a finished run), and whether ``summary`` describes
    the run's last lap."""
    traced = int(trace["lap"].max()) if trace is not None and not trace.empty else 0
    current = summary is not None and _number(summary.get("laps")) >= traced
    resume = f"bnpvi-train resume={run_dir}"
    if current and str(summary.get("stop_reason", "")).startswith("interrupted"):
        return "interrupted", f"{short_reason(summary['stop_reason'])}; continue it with {resume}", True
    if current:
        return "finished", None, True
    if trace is None:
        return "failed", (f"no {TRACE_FILE}: the job stopped (or is still starting) before its first lap; see its "
                          f"train.log"), False
    hint = f"continue it with {resume}" if checkpoint_path(run_dir).is_file() else "no checkpoint yet: run it again"
    if summary is not None:
        where = f"resumed after lap {summary.get('laps')}, no {SUMMARY_FILE} since, {TRACE_FILE} at lap {traced}"
    else:
        where = f"no {SUMMARY_FILE}, {TRACE_FILE} at lap {traced}"
    return "incomplete", f"{where}: killed, crashed or still running; {hint}", False


def read_run(run_dir: Path) -> RunRecord:
    """The run in ``run_dir`` (a directory :func:`is_run_dir` accepts)."""
    run_dir = Path(run_dir)
    config, choices, keys, job = _read_settings(run_dir)
    trace = read_trace(run_dir / TRACE_FILE)
    summary = _read_summary(run_dir / SUMMARY_FILE)
    status, problem, current = _status(run_dir, trace, summary)
    record = RunRecord(run_dir, status, _results(trace, summary if current else None), {}, problem,
                       pd.DataFrame() if trace is None else trace, config, choices, job)
    record.overrides = {key: record.setting(key) for key in keys}
    return record


def _natural_key(path: Path) -> list:
    """Sort key that puts job 2 before job 10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def _walk(top: Path) -> tuple[list[Path], list[Path]]:
    """The run directories and the sweep directories at or below ``top`` (hidden folders skipped)."""
    runs, sweeps = [], []
    for folder, subfolders, files in os.walk(top):
        here = Path(folder)
        if is_run_dir(here):
            runs.append(here)
            subfolders[:] = [RESTARTS] if (here / RESTARTS).is_dir() else []  # every restart is a run too
            continue
        if MULTIRUN_FILE in files:
            sweeps.append(here)
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
    return runs, sweeps


def _missing_jobs(sweep_dir: Path, records: list[RunRecord]) -> list[RunRecord]:
    """A ``missing`` record for each job of the sweep in ``sweep_dir`` that none of ``records`` below it is
    (:func:`~bnpvi.report.sweeps.sweep_jobs`; raises ValueError when its file cannot be read)."""
    jobs = sweep_jobs(sweep_dir)
    if jobs is None:
        return []
    top = sweep_dir.resolve()
    present = {r.job for r in records if r.job is not None and top in r.path.resolve().parents}
    missing = []
    for number, settings in enumerate(jobs):
        if number not in present:
            line = " ".join(f"{key}={value}" for key, value in settings.items())
            problem = (f"job {number} of the sweep left no run directory: it could not start (bnpvi-train removes "
                       f"the directory of a run that fails at start-up) or never started; `bnpvi-train {line}` "
                       f"says why")
            missing.append(RunRecord(sweep_dir / str(number), "missing", {}, settings, problem))
    return missing


def collect_runs(paths: list[str | Path]) -> tuple[list[RunRecord], list[str]]:
    """Every run at or below each of ``paths`` (run or sweep directories, searched recursively), in path
    order, with a ``missing`` record for each sweep job that left no directory; and warnings about what
    could not be read.

    Raises
    ------
    BnpviError
        A path that does not exist or is not a directory, or one with no run below it.
    """
    records, warnings, seen = [], [], set()
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            raise BnpviError(f"{path} does not exist")
        if not path.is_dir():
            raise BnpviError(f"{path} is not a directory (give run or sweep directories)")
        run_dirs, sweep_dirs = _walk(path)
        found = [read_run(run_dir) for run_dir in run_dirs if run_dir.resolve() not in seen]
        for sweep_dir in sweep_dirs:
            try:
                found += _missing_jobs(sweep_dir, records + found)
            except ValueError as err:
                warnings.append(f"{err}; a job of it that left no directory is not listed")
        if not run_dirs and not found:
            raise BnpviError(f"no bnpvi runs under {path} (a run directory holds .hydra/config.yaml and "
                             f"{TRACE_FILE})")
        seen |= {record.path.resolve() for record in found}
        records += sorted(found, key=lambda record: _natural_key(record.path))
    return records, warnings
