"""The jobs of a Hydra sweep, read back from its ``multirun.yaml``.

``bnpvi-train`` removes the directory of a run that cannot start, so a sweep job that failed at
start-up (or that never started, because the sweep was stopped) leaves no trace but its place in
the sweep. Knowing every job's overrides lets the report name it.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

MULTIRUN_FILE = "multirun.yaml"
"""The file Hydra writes at the top of a sweep directory: the sweep's config and command line."""
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def is_sweep_dir(path: Path) -> bool:
    return (Path(path) / MULTIRUN_FILE).is_file()


def plain_value(value):
    """An override's value as the report shows it: a list as ``[a,b]``, anything else as it is."""
    return f"[{','.join(map(str, value))}]" if isinstance(value, (list, tuple)) else value


def sweep_jobs(sweep_dir: Path) -> list[dict] | None:
    """The settings of every job of the sweep in ``sweep_dir``, in Hydra's job order (job ``i`` is element
    ``i``): override key -> value.

    Hydra's basic sweeper runs the cartesian product of the swept values, keys in the order of the command
    line (a key given twice keeps its first place and its last value). None when the jobs cannot be known
    from the file: another sweeper chose them, or the sweep resumed runs, which continue in their own
    directories.

    Raises
    ------
    ValueError
        The file cannot be read or parsed (the message says why).
    """
    path = Path(sweep_dir) / MULTIRUN_FILE
    try:
        config = OmegaConf.load(path)
        if OmegaConf.select(config, "hydra.sweeper._target_") != BASIC_SWEEPER:
            return None
        params = OmegaConf.select(config, "hydra.sweeper.params") or {}
        lines = [f"{key}={value}" for key, value in params.items()]
        lines += list(OmegaConf.select(config, "hydra.overrides.task") or [])
        values = {}
        for override in OverridesParser.create().parse_overrides(lines):
            key = override.key_or_group
            values[key] = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    except Exception as err:  # a damaged or foreign multirun.yaml
        raise ValueError(f"cannot read the sweep's jobs from {path}: {' '.join(str(err).split())}") from err
    if "resume" in values:
        return None
    return [{key: plain_value(value) for key, value in zip(values, combination)}
            for combination in itertools.product(*values.values())]
