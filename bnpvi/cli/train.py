"""``bnpvi-train``: the Hydra entry point.

    bnpvi-train                                   # memoized VI from K = 1 on the built-in toy set
    bnpvi-train model=dp_mix obs=gauss alg=vb init.K=20 seed=3
    bnpvi-train data.path=points.h5               # a converted file (data=hdf5 is implied)
    bnpvi-train init=from_run init.path=RUN_DIR data.path=more.h5
    bnpvi-train -m model.gamma=0.5,1,5 seed=1,2,3 # Hydra multirun sweep
    bnpvi-train resume=outputs/2026-11-21/10-00-00 [alg.n_laps=200]
    bnpvi-train -m resume=RUN_DIR1,RUN_DIR2 alg.n_laps=200
    bnpvi-train model=hdp_topic --help            # the options, and the chosen ones' keys

``resume=RUN_DIR`` is an override like any other: the run continues in RUN_DIR
(Hydra's output directory becomes RUN_DIR, conf/train.yaml) with the config saved
there; only the keys in ``RESUMABLE_KEYS`` may change, since any other would make
the resumed run differ from an uninterrupted one.

Config errors (unknown key, bad value, unknown option) are reported on one line
before anything is written; bad data gives one line too, after which nothing that
Hydra wrote for the run is left (no run directory, no empty ``outputs/``; for a
refused resume, no ``.hydra/resumed-*`` in the run); exit status 2. Ctrl-C writes a
checkpoint and the run's files as they stand, and exits with status 130.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import hydra
from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf

from bnpvi.cli.errors import config_error
from bnpvi.cli.help import render as render_help
from bnpvi.config import check_config, register_configs
from bnpvi.errors import BnpviError
from bnpvi.learn import runner

PROG = "bnpvi-train"
# Settings that may change when a run is resumed; anything else would break exactness. (Where the work
# runs and where memo's caches live do not change the result; alg.batches_per_round is checked against
# the checkpoint by the runner, which refuses a different one.)
RESUMABLE_KEYS = {"alg.n_laps", "alg.converge_thr", "alg.count_thr", "checkpoint_every", "alg.workers",
                  "alg.threads_per_worker", "alg.scheduler", "alg.cache", "alg.batches_per_round"}
HELP_FLAGS = {"-h", "--help"}
# Hydra's own command-line flags that need no validation by us.
HYDRA_FLAGS = {"--hydra-help", "--info", "-i", "--cfg", "-c", "--resolve", "--package", "-p",
               "--version", "--shell-completion", "-sc", "--config-path", "-cp", "--config-name", "-cn",
               "--config-dir", "-cd", "--experimental-rerun"}
SWEEP_FLAGS = ("-m", "--multirun")


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
        if key not in RESUMABLE_KEYS:
            _fail(f"cannot change {key!r} when resuming; only {', '.join(sorted(RESUMABLE_KEYS))} may be set")


def with_data_option(args: list[str]) -> list[str]:
    """``args``, plus ``data=hdf5`` when they set ``data.path`` but choose no ``data`` option."""
    keys = {arg.split("=", 1)[0].lstrip("+~") for arg in args if "=" in arg}
    return [*args, "data=hdf5"] if "data.path" in keys and "data" not in keys else args


def _first_values(args: list[str]) -> tuple[list[str], list[str], list[str] | None]:
    """The overrides with the first value of each sweep, the keys they set, and the ``resume`` directories."""
    try:
        parsed = OverridesParser.create().parse_overrides(args)
    except Exception as err:
        _fail(_one_line(err))
    plain, keys, resume = [], [], None
    for override in parsed:
        key = override.get_key_element()
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


def compose_checked(overrides: list[str]) -> DictConfig:
    """The config of ``overrides`` (no sweeps), its keys checked against the schemas; bad input fails on one line."""
    try:
        with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
            cfg = compose(config_name="train", overrides=overrides)
        check_config(cfg)
    except Exception as err:
        _fail(_one_line(err))
    return cfg


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


def _validate_overrides(args: list[str]) -> None:
    """Check the command line before anything is written: the launcher, the config composed once (first value
    of each sweep), and every ``resume`` directory of a sweep."""
    _check_launcher(args)
    plain, keys, resume = _first_values(args)
    if resume:
        _check_resume(resume, keys)
    compose_checked(plain)


def _remove_empty_parents(run_dir: Path) -> None:
    """Remove the folders above a discarded run directory that are left empty, up to the working directory
    (those Hydra made for the run, such as ``outputs/`` and ``outputs/DATE/``)."""
    cwd = Path.cwd().resolve()
    for parent in Path(run_dir).resolve().parents:
        if parent == cwd or cwd not in parent.parents:
            return
        try:
            parent.rmdir()
        except OSError:  # not empty
            return


def _run(open_run, undo) -> None:
    """Open a run with ``open_run``; if it cannot start, ``undo`` what Hydra wrote for it and fail on one line.
    Then train it: bad input -> one-line error, exit 2; Ctrl-C -> where to resume, exit 130."""
    try:
        run = open_run()
    except Exception as err:
        message = _one_line(err)
        undo()
        _fail(message)
    try:
        runner.run_to_end(run)
    except BnpviError as err:
        _fail(str(err))
    except runner.Interrupted as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        raise SystemExit(130)
    except KeyboardInterrupt:  # a second Ctrl-C while the run's files were written
        print(f"{PROG}: interrupted", file=sys.stderr)
        raise SystemExit(130)


def resumed_config(run_dir: Path, cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The config saved in ``run_dir`` with the resumable keys this command line sets taken from ``cfg``."""
    saved = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    for line in overrides:
        key = line.split("=", 1)[0].lstrip("+~")
        if key in RESUMABLE_KEYS:
            OmegaConf.update(saved, key, OmegaConf.select(cfg, key))
    return saved


@hydra.main(version_base="1.3", config_path="pkg://bnpvi.conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    if cfg.resume is None:
        _run(lambda: runner.start(cfg, run_dir), lambda: _remove_empty_parents(run_dir))
    else:  # Hydra's output directory is the run directory itself (conf/train.yaml)
        saved = resumed_config(run_dir, cfg, list(hydra_cfg.overrides.task))
        _run(lambda: runner.reopen(run_dir, saved),
             lambda: shutil.rmtree(run_dir / hydra_cfg.output_subdir, ignore_errors=True))


def main(argv: list[str] | None = None) -> None:
    args = with_data_option(list(sys.argv[1:] if argv is None else argv))
    register_configs()
    if any(arg in HELP_FLAGS for arg in args):
        overrides = [arg for arg in args if arg not in HELP_FLAGS and arg not in SWEEP_FLAGS]
        print(render_help(compose_checked(_first_values(overrides)[0])))
        return
    if not any(arg.split("=")[0] in HYDRA_FLAGS for arg in args):
        _validate_overrides([arg for arg in args if arg not in SWEEP_FLAGS])
    sys.argv = [PROG] + args
    _hydra_main()


if __name__ == "__main__":
    main()
