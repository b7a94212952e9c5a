"""``bnpvi-train``: the Hydra entry point.

    bnpvi-train                                   # default experiment on the built-in toy set
    bnpvi-train model=dp_mix obs=gauss alg=vb init.K=20 seed=3
    bnpvi-train -m model.gamma=0.5,1,5 seed=1,2,3 # Hydra multirun sweep
    bnpvi-train resume=outputs/2026-11-21/10-00-00 [alg.n_laps=200]

Config errors (unknown key, bad value, unknown option) are reported on one line
before anything is written; bad data gives one line too; exit status 2.
Ctrl-C writes a checkpoint and exits with status 130.
"""
from __future__ import annotations

import logging
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
    return first


def _validate_overrides(args: list[str]) -> None:
    """Compose the config once (first value of each sweep) so bad keys fail before any output."""
    try:
        parsed = OverridesParser.create().parse_overrides(args)
    except Exception as err:
        _fail(_one_line(err))
    plain = []
    for override in parsed:
        key = override.get_key_element()
        if key.lstrip("+~").startswith("hydra"):
            continue
        if override.is_sweep_override():
            values = list(override.sweep_string_iterator())
            if not values:
                continue
            plain.append(f"{key}={values[0]}")
        else:
            plain.append(override.input_line)
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


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> None:
    _report(runner.train, cfg, Path(HydraConfig.get().runtime.output_dir))


def _resume(run_dir: str, args: list[str]) -> None:
    """``resume=RUN_DIR``: continue a run from its latest checkpoint, in the same directory."""
    path = Path(run_dir).expanduser()
    config_file = path / ".hydra" / "config.yaml"
    if not path.is_dir():
        _fail(f"cannot resume: run directory {path} does not exist")
    if not config_file.is_file():
        _fail(f"cannot resume: {config_file} not found (is {path} a bnpvi run directory?)")
    cfg = OmegaConf.load(config_file)
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or key not in RESUMABLE_KEYS:
            _fail(f"cannot change {key!r} when resuming; only {', '.join(sorted(RESUMABLE_KEYS))} may be set")
        OmegaConf.update(cfg, key, OmegaConf.create({"v": value})["v"] if value else None)
    handler = logging.StreamHandler(sys.stdout)
    file_handler = logging.FileHandler(path / "train.log")
    for h in (handler, file_handler):
        h.setFormatter(logging.Formatter("%(message)s"))
        logging.getLogger().addHandler(h)
    logging.getLogger().setLevel(logging.INFO)
    _report(runner.resume, path, cfg)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    register_configs()
    resume = [a for a in args if a.startswith("resume=")]
    if resume:
        others = [a for a in args if not a.startswith("resume=")]
        if len(resume) > 1 or any(a.startswith("-") for a in others):
            _fail("resume=RUN_DIR takes no flags and may be given once")
        return _resume(resume[0].split("=", 1)[1], others)
    if not any(a.split("=")[0] in HYDRA_FLAGS for a in args):
        _validate_overrides([a for a in args if a not in ("-m", "--multirun")])
    sys.argv = [PROG] + args
    _hydra_main()


if __name__ == "__main__":
    main()
