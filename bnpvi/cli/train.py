"""``bnpvi-train``: the Hydra entry point.

    bnpvi-train                                   # memoized VI from K = 1 on the built-in toy set
    bnpvi-train model=dp_mix obs=gauss alg=vb init.K=20 seed=3
    bnpvi-train data.path=points.h5               # a converted file (data=hdf5 is implied)
    bnpvi-train init=from_run init.path=RUN_DIR data.path=more.h5
    bnpvi-train -m model.gamma=0.5,1,5 seed=1,2,3 # Hydra multirun sweep
    bnpvi-train resume=outputs/2026-11-21/10-00-00 [alg.n_laps=200]
    bnpvi-train -m resume=RUN_DIR1,RUN_DIR2 alg.n_laps=200
    bnpvi-train resume=RUN_DIR data.path=more.h5 alg.n_laps=200   # more.h5: --append-to the run's file
    bnpvi-train model=hdp_topic --help            # the options, and the chosen ones' keys

``resume=RUN_DIR`` is an override like any other: the run continues in RUN_DIR
(Hydra's output directory becomes RUN_DIR, conf/train.yaml) with the config saved
there; only the keys in ``RESUMABLE_KEYS`` may change, since any other would make
the resumed run differ from an uninterrupted one, and ``data.path``, to a file that holds
the run's batches and new ones after them (``bnpvi-data convert NEW DST --append-to
RUN_DATA``): the run then goes on on all of it (:func:`bnpvi.learn.runner.grow`).

Config errors (unknown key, bad value, unknown option), an output location that cannot
be written and a run directory that already holds a run are reported on one line before
anything is written. A run claims its directory (:class:`bnpvi.io.run_dir.RunDirLock`)
before it writes its config record there (``.hydra/``, or ``.hydra/resumed-<time>/`` for a
resume: Hydra itself writes none, ``hydra.output_subdir: null``), so a refused start or a
second run started into the same directory changes nothing of the run there. Bad data
gives one line too, after which nothing written for the run is left (no run directory, no
empty ``outputs/``; for a refused resume, no ``.hydra/resumed-*`` in the run); exit
status 2. Ctrl-C or SIGTERM during training writes a checkpoint and the run's files as
they stand, and exits with status 130; during start-up it leaves nothing and exits 130.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf, open_dict

from bnpvi.cli.errors import config_error
from bnpvi.cli.help import render as render_help
from bnpvi.config import RESUMABLE_KEYS, check_config, register_configs
from bnpvi.errors import BnpviError
from bnpvi.io.run_dir import RUN_RECORD, RunDirLock, RunState, clear_unfinished, refuse_start, remove_if_empty, \
    run_state

PROG = "bnpvi-train"
HELP_FLAGS = {"-h", "--help"}
# Hydra's own command-line flags that need no validation by us.
HYDRA_FLAGS = {"--hydra-help", "--info", "-i", "--cfg", "-c", "--resolve", "--package", "-p",
               "--version", "--shell-completion", "-sc", "--config-path", "-cp", "--config-name", "-cn",
               "--config-dir", "-cd", "--experimental-rerun"}
SWEEP_FLAGS = ("-m", "--multirun")
OUTPUT_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
"""Hydra's keys of where runs go: composed with the config before Hydra starts, to check the location."""


def _fail(message: str, status: int = 2) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def _one_line(err: Exception) -> str:
    """``err`` as one line (:func:`bnpvi.cli.errors.config_error`); anything else than bad input is raised."""
    message = config_error(err)
    if message is None:
        raise err
    return message


def _check_resume(values: list[str], keys: list[str]) -> None:
    """``resume=RUN_DIR[,RUN_DIR...]``: each a run directory; the other keys only ones that keep it exact."""
    for value in values:
        path = Path(value).expanduser()
        if not path.is_dir():
            _fail(f"cannot resume: run directory {path} does not exist")
        if not (path / ".hydra" / "config.yaml").is_file():
            _fail(f"cannot resume: {path / '.hydra' / 'config.yaml'} not found (is {path} a bnpvi run directory?)")
    for key in keys:
        if key not in RESUMABLE_KEYS | {"data.path", "data"}:
            _fail(f"cannot change {key!r} when resuming; only {', '.join(sorted(RESUMABLE_KEYS))} may be set, and "
                  "data.path to a file that continues the run's data (bnpvi-data convert --append-to)")


def with_data_option(args: list[str]) -> list[str]:
    """``args``, plus ``data=hdf5`` when they set ``data.path`` but choose no ``data`` option."""
    keys = {arg.split("=", 1)[0].lstrip("+~") for arg in args if "=" in arg}
    return [*args, "data=hdf5"] if "data.path" in keys and "data" not in keys else args


def _first_values(args: list[str]) -> tuple[list[str], list[str], list[str] | None]:
    """The overrides with the first value of each sweep (of Hydra's own, only :data:`OUTPUT_KEYS`), the keys
    they set (Hydra's left out), and the ``resume`` directories."""
    try:
        parsed = OverridesParser.create().parse_overrides(args)
    except Exception as err:
        _fail(_one_line(err))
    plain, keys, resume = [], [], None
    for override in parsed:
        key = override.get_key_element()
        if key.lstrip("+~") in OUTPUT_KEYS and not override.is_sweep_override():
            plain.append(override.input_line)
        if key.lstrip("+~").startswith("hydra"):
            continue
        values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.value()]
        if key == "resume":
            resume = [str(v) for v in values if v is not None]
        else:
            keys.append(key)
        if override.is_sweep_override():
            if values:
                plain.append(f"{key}={values[0]}")
        else:
            plain.append(override.input_line)
    return plain, keys, resume


def compose_checked(overrides: list[str], output_key: str | None = None) -> tuple[DictConfig, Path | None]:
    """The config of ``overrides`` (no sweeps), its keys checked against the schemas, and the folder Hydra's
    ``output_key`` names (``hydra.run.dir`` or ``hydra.sweep.dir``; None without a key); bad input fails on
    one line."""
    try:
        with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
            cfg = compose(config_name="train", overrides=overrides, return_hydra_config=output_key is not None)
        output = None
        if output_key is not None:
            output = Path(str(OmegaConf.select(cfg, output_key))).expanduser()
            with open_dict(cfg):
                del cfg["hydra"]
        check_config(cfg)
    except Exception as err:
        _fail(_one_line(err))
    return cfg, output


def _existing_ancestor(folder: Path) -> Path:
    """``folder`` or the deepest folder above it that exists (a path that exists but is no folder is refused)."""
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            if not candidate.is_dir():
                _fail(f"cannot make the run directory {folder}: {candidate} is a file, not a folder")
            return candidate
    return Path(folder.anchor)


def _check_writable(folder: Path) -> Path:
    """Refuse an output ``folder`` that cannot be made or written; the deepest folder of it that exists."""
    existing = _existing_ancestor(folder)
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "the run directory" if existing == folder.resolve() else f"the run directory {folder.resolve()} in"
        _fail(f"cannot write {what} {existing}: permission denied or a read-only file system; choose another "
              "hydra.run.dir (or hydra.sweep.dir)")
    return existing


def _check_launcher(args: list[str]) -> None:
    """``hydra/launcher=NAME`` must name a launcher whose plugin is installed (Hydra finds the plugins in the
    ``hydra_plugins`` namespace package, which register their configs when it loads them)."""
    for arg in args:
        key, _, name = arg.partition("=")
        if key.lstrip("+") != "hydra/launcher":
            continue
        Plugins.instance()
        options = sorted(option.removesuffix(".yaml") for option in ConfigStore.instance().list("hydra/launcher"))
        if name not in options:
            _fail(f"hydra/launcher={name} is not an installed launcher (the launchers: {', '.join(options)}); the "
                  f"extra bnpvi[cluster] adds joblib, submitit_local and submitit_slurm")


def _validate_overrides(args: list[str], sweep: bool) -> Path:
    """Check the command line before anything is written: the launcher, the config composed once (first value
    of each sweep), every ``resume`` directory of a sweep, and the output location (it can be written; a
    fresh run's directory holds no run). The deepest folder of the output location that exists now."""
    _check_launcher(args)
    plain, keys, resume = _first_values(args)
    if resume:
        _check_resume(resume, keys)
    fresh_run = not sweep and not resume
    given = [line.split("=", 1)[1] for line in plain if line.startswith("hydra.run.dir=")]
    if fresh_run and given and "$" not in given[-1]:  # a directory named as it is: refused before composing
        _refuse_start(Path(given[-1]).expanduser())
    _, output = compose_checked(plain, "hydra.sweep.dir" if sweep else "hydra.run.dir")
    for folder in [Path(r).expanduser() for r in resume or []] or [output]:
        existing = _check_writable(folder)
    if fresh_run:
        _refuse_start(output)
    return existing


def _refuse_start(run_dir: Path) -> None:
    """Fail on one line when a fresh run cannot start in ``run_dir`` (:func:`~bnpvi.io.run_dir.refuse_start`)."""
    try:
        refuse_start(run_dir)
    except BnpviError as err:
        _fail(str(err))


@dataclass
class StartUp:
    """What this command has done towards the run it starts, so that a start that does not happen (refused,
    failed, interrupted) leaves nothing: the run directory, whether the command holds it, the config record
    written there, and the deepest folder above it that existed before the command (``kept``: nothing
    there or above is removed)."""

    kept: Path | None = None
    run_dir: Path | None = None
    fresh: bool = True
    claim: RunDirLock | None = None
    record: Path | None = None
    training: bool = False

    def begin(self, run_dir: Path, fresh: bool) -> "StartUp":
        """The start of one job (a sweep runs several in turn)."""
        self.run_dir, self.fresh, self.claim, self.record, self.training = run_dir, fresh, None, None, False
        return self

    def undo(self) -> None:
        """Remove what this start wrote (nothing once training began): the config record, and for a fresh
        run the directory and the folders made for it where they are left empty. Only while the directory is
        this command's (claimed here, or free to claim: never another run's)."""
        if self.training or self.run_dir is None:
            return
        claim = self.claim
        if claim is None:
            try:
                claim = RunDirLock.claim(self.run_dir)
            except (BnpviError, OSError):
                return
        if self.record is not None:
            shutil.rmtree(self.record, ignore_errors=True)
        claim.release()
        self.claim = None
        if self.fresh and self.kept is not None:
            remove_if_empty(self.run_dir, self.kept)


START = StartUp()


def _write_record(folder: Path, cfg: DictConfig, hydra_cfg) -> Path:
    """The run's config record in ``folder``: config.yaml, hydra.yaml and overrides.yaml, as Hydra writes
    them (``hydra.output_subdir``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, node in (("config.yaml", cfg), ("hydra.yaml", OmegaConf.create({"hydra": hydra_cfg})),
                       ("overrides.yaml", hydra_cfg.overrides.task)):
        (folder / name).write_text(OmegaConf.to_yaml(node), encoding="utf-8")
    return folder


def _prepare_fresh(run_dir: Path) -> None:
    """Refuse a run directory that holds a run to keep; clear the files of one that stopped before its first
    checkpoint, saying so."""
    refuse_start(run_dir)
    if run_state(run_dir) is RunState.UNFINISHED:
        print(f"{PROG}: {run_dir} held a run that stopped before its first checkpoint; starting it again in place",
              file=sys.stderr)
        clear_unfinished(run_dir)


def _open(cfg: DictConfig, run_dir: Path, hydra_cfg):
    """Claim ``run_dir``, write the config record, and open the run (fresh, or resumed from its checkpoint);
    anything that stops it undoes what was written and fails on one line."""
    from bnpvi.learn import restarts

    start = START.begin(run_dir, cfg.resume is None)
    try:
        start.claim = RunDirLock.claim(run_dir)
    except BnpviError as err:  # another run's directory: nothing is touched
        _fail(str(err))
    try:
        if start.fresh:
            _prepare_fresh(run_dir)
            start.record = _write_record(run_dir / RUN_RECORD, cfg, hydra_cfg)
            return restarts.start(cfg, run_dir, start.claim, list(hydra_cfg.overrides.task))
        saved = resumed_config(run_dir, cfg, list(hydra_cfg.overrides.task))
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        start.record = _write_record(run_dir / RUN_RECORD / f"resumed-{stamp}", cfg, hydra_cfg)
        return restarts.reopen(run_dir, saved, start.claim, _saved_overrides(run_dir))
    except Exception as err:
        message = _one_line(err)
        start.undo()
        _fail(message)


def _train(run) -> None:
    """Train an opened run: bad input -> one-line error, exit 2; Ctrl-C -> where to resume, exit 130."""
    from bnpvi.learn import runner

    START.training = True
    try:
        runner.run_to_end(run, hard_stop=True)
    except BnpviError as err:
        _fail(str(err))
    except runner.Interrupted as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        raise SystemExit(130)
    print(f"run directory: {run.run_dir}", flush=True)


def _saved_overrides(run_dir: Path) -> list[str]:
    """The overrides a run was started with (``.hydra/overrides.yaml``; none when absent)."""
    path = run_dir / RUN_RECORD / "overrides.yaml"
    return [str(line) for line in OmegaConf.load(path)] if path.is_file() else []


def resumed_config(run_dir: Path, cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The config saved in ``run_dir`` with the resumable keys this command line sets taken from ``cfg``, and
    ``data.path`` (absolute: a file that continues the run's data, checked by the runner)."""
    saved = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    for line in overrides:
        key = line.split("=", 1)[0].lstrip("+~")
        if key in RESUMABLE_KEYS:
            OmegaConf.update(saved, key, OmegaConf.select(cfg, key))
        elif key == "data.path":
            given = Path(str(cfg.data.path)).expanduser().resolve()
            if given != Path(str(OmegaConf.select(saved, key))).expanduser().resolve():
                OmegaConf.update(saved, key, str(given))
    return saved


@hydra.main(version_base="1.3", config_path="pkg://bnpvi.conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    # a resume's output directory is the run directory itself (conf/train.yaml)
    _train(_open(cfg, Path(hydra_cfg.runtime.output_dir), hydra_cfg))


def _terminated(signum, frame) -> None:
    """SIGTERM before training (or after it): stop as Ctrl-C does."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    args = with_data_option(list(sys.argv[1:] if argv is None else argv))
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        register_configs()
        if any(arg in HELP_FLAGS for arg in args):
            overrides = [arg for arg in args if arg not in HELP_FLAGS and arg not in SWEEP_FLAGS]
            print(render_help(compose_checked(_first_values(overrides)[0], "hydra.run.dir")[0]))
            return
        if not any(arg.split("=")[0] in HYDRA_FLAGS for arg in args):
            sweep = any(arg in SWEEP_FLAGS for arg in args)
            START.kept = _validate_overrides([arg for arg in args if arg not in SWEEP_FLAGS], sweep)
        sys.argv = [PROG] + args
        _hydra_main()
    except KeyboardInterrupt:
        output = OmegaConf.select(HydraConfig.get(), "runtime.output_dir", default=None) \
            if HydraConfig.initialized() else None
        if START.run_dir is None and output:  # stopped inside Hydra, after it made the run directory
            START.begin(Path(output), not any(arg.startswith("resume=") for arg in args))
        training = START.training
        START.undo()
        print(f"{PROG}: interrupted" + ("" if training else " before the run started; nothing was kept"),
              file=sys.stderr)
        raise SystemExit(130)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    main()
