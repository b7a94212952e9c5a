"""``bnpvi-train``: the Hydra entry point.

    bnpvi-train                                   # memoized VI from K = 1 on the built-in toy set
    bnpvi-train model=dp_mix obs=gauss alg=vb init.K=20 seed=3
    bnpvi-train -m model.gamma=0.5,1,5 seed=1,2,3 # Hydra multirun sweep
    bnpvi-train resume=outputs/2026-11-21/10-00-00 [alg.n_laps=200]
    bnpvi-train -m resume=RUN_DIR1,RUN_DIR2 alg.n_laps=200

``resume=RUN_DIR`` is an override like any other: the run continues in RUN_DIR
(Hydra's output directory becomes RUN_DIR, conf/train.yaml) with the config saved
there; only the keys in ``RESUMABLE_KEYS`` may change, since any other would make
the resumed run differ from an uninterrupted one.

Config errors (unknown key, bad value, unknown option) are reported on one line
before anything is written; bad data gives one line too; exit status 2.
Ctrl-C writes a checkpoint and exits with status 130.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import hydra
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from bnpvi.config import check_config, register_configs
from bnpvi.errors import BnpviError
from bnpvi.learn import runner

PROG = "bnpvi-train"
# Settings that may change when a run is resumed; anything else would break exactness.
RESUMABLE_KEYS = {"alg.n_laps", "alg.converge_thr", "alg.count_thr", "checkpoint_every"}
# Hydra's own command-line flags that need no validation by us.
HYDRA_FLAGS = {"-h", "--help", "--hydra-help", "--info", "-i", "--cfg", "-c", "--resolve", "--package", "-p",
               "--version", "--shell-completion", "-sc", "--config-path", "-cp", "--config-name", "-cn",
               "--config-dir", "-cd", "--experimental-rerun"}


def _fail(message: str, status: int = 2) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def _one_line(err: BaseException) -> str:
    """Hydra/OmegaConf's multi-line composition errors condensed to one line."""
    text = str(err).split("Config search path")[0]
    options = re.findall(r"^\t(\S+)$", text, flags=re.M)
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    first = re.sub(r"^In '[^']*': ", "", first)
    cause = err.__cause__
    if cause is not None and str(cause).strip():
        first += f" ({str(cause).strip().splitlines()[0]})"
    if options:
        first += " (available: " + ", ".join(options) + ")"
    if re.search(r"Key 'kappa' not in '\w*HMMConfig'", first):
        first += "; an HMM's sticky self-transition bias is model.sticky_kappa (obs.kappa is the Gaussian prior's)"
    return first


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


def _validate_overrides(args: list[str]) -> None:
    """Check the command line before anything is written: compose the config once (first value of
    each sweep), and check every ``resume`` directory of a sweep."""
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
            if not values:
                continue
            plain.append(f"{key}={values[0]}")
        else:
            plain.append(override.input_line)
    if resume:
        _check_resume(resume, keys)
    try:
        with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
            check_config(compose(config_name="train", overrides=plain))
    except Exception as err:
        _fail(_one_line(err))


def _report(job, *args) -> None:
    """Run ``job``: bad input -> one-line error, exit 2; Ctrl-C -> where to resume, exit 130."""
    try:
        job(*args)
    except BnpviError as err:
        _fail(str(err))
    except runner.Interrupted as err:
        print(f"{PROG}: {err}", file=sys.stderr)
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
        _report(runner.train, cfg, run_dir)
    else:  # Hydra's output directory is the run directory itself (conf/train.yaml)
        _report(runner.resume, run_dir, resumed_config(run_dir, cfg, list(hydra_cfg.overrides.task)))


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    register_configs()
    if not any(a.split("=")[0] in HYDRA_FLAGS for a in args):
        _validate_overrides([a for a in args if a not in ("-m", "--multirun")])
    sys.argv = [PROG] + args
    _hydra_main()


if __name__ == "__main__":
    main()
