"""How the commands report bad input: one stderr line, exit status 2.

:func:`run_reporting` runs the small commands (bnpvi-data, bnpvi-apply, bnpvi-report), and ends one whose
output has no reader any more (``bnpvi-data info f.h5 | head -3``) quietly; :func:`config_error` turns an
error from composing ``bnpvi-train``'s Hydra config into one line, telling the errors apart by their
types (Hydra's and OmegaConf's), never by their text.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

from bnpvi.errors import BnpviError


CLOSED_PIPE_STATUS = 141
"""The exit status of a command whose stdout was closed before it was done: 128 + SIGPIPE, as the shell reports
``cat`` or ``yes`` ended early by ``| head``."""


def run_reporting(prog: str, action: Callable[[], None]) -> int:
    """Run ``action``; 0 on success, 2 on bad input (a BnpviError or an OSError, reported on one line as
    ``PROG: error: ...``), 130 on Ctrl-C, :data:`CLOSED_PIPE_STATUS` without a word when stdout has no reader
    any more (:func:`closed_stdout`)."""
    try:
        action()
        sys.stdout.flush()  # a reader gone early shows here, not in the interpreter's last flush
    except BrokenPipeError:
        return closed_stdout()
    except BnpviError as err:
        print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{prog}: error: {err.strerror or err}" + (f": {err.filename}" if err.filename else ""),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0


def closed_stdout() -> int:
    """End quietly after stdout's reader went away (``| head``): stdout is pointed at /dev/null, so that the
    interpreter's last flush of what is still buffered does not fail again and print; returns
    :data:`CLOSED_PIPE_STATUS`."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's stand-in): nothing flushes to it later
        return CLOSED_PIPE_STATUS
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return CLOSED_PIPE_STATUS


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def config_error(err: BaseException) -> str | None:
    """One line for ``err``, raised while composing the config or building the model from it; None when it
    is none of the errors bad input causes (a bug, to be raised as it is).

    Recognised: an unknown option of a group (Hydra's MissingConfigException), a command line that does not
    parse (OverrideParseException), an unknown key or a value of the wrong type or none (OmegaConf's errors, also as
    the cause of Hydra's ConfigCompositionException), a ConfigError of :func:`bnpvi.config.check_config`,
    and a BnpviError, also as the cause of the
    InstantiationException Hydra raises when a model or family refuses its settings; any other error of Hydra
    or OmegaConf by its first line.
    """
    # here, not with the module: bnpvi-data and bnpvi-report use only run_reporting (Hydra: 0.25 s a command)
    from hydra.errors import (ConfigCompositionException, HydraException, InstantiationException,
                              MissingConfigException, OverrideParseException)
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

    from bnpvi.config import SCHEMAS, ConfigError, unknown_key

    if isinstance(err, (ConfigCompositionException, InstantiationException)) and err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, (BnpviError, ConfigError)):
        return " ".join(str(err).split())
    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        group, _, option = err.missing_cfg_file.partition("/")
        if group in SCHEMAS:
            return f"{group}={option} is not an option of {group} (the options: {', '.join(SCHEMAS[group])})"
    if isinstance(err, OverrideParseException):
        return f"cannot parse the command line: {_first_line(str(err))}"
    if isinstance(err, (ConfigAttributeError, ConfigKeyError)) and err.full_key:
        return unknown_key(err.full_key, err.object_type_str)
    if isinstance(err, MissingMandatoryValue) and err.full_key:
        return f"{err.full_key} has no default: set it ({err.full_key}=...)"
    if isinstance(err, OmegaConfBaseException) and err.full_key:
        return f"bad value for {err.full_key}: {_first_line(err.msg or str(err))}"
    if isinstance(err, (HydraException, OmegaConfBaseException)):
        return _first_line(str(err)) or type(err).__name__
    return None
