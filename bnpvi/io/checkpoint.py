"""Checkpoints: the whole state of a run in one HDF5 file, written atomically.

Layout (format version 2): attrs ``format``, ``format_version``; groups ``alg``
(the algorithm's whole state: laps, batch position, the global parameters saved
whole, cluster ids, memo caches, moves in flight ...), ``trace`` and ``clusters``
(the table rows so far, one dataset per column), ``run`` (elapsed time,
convergence) and datasets ``rng`` (the generator state as JSON), ``meta`` (D, N,
...) and ``config``.
"""
from __future__ import annotations

from pathlib import Path

import h5py

from bnpvi.errors import BnpviError
from bnpvi.io.h5tree import read_tree, write_atomic
from bnpvi.io.run_dir import checkpoint_path

FORMAT = "bnpvi-checkpoint"
FORMAT_VERSION = 2


def save_checkpoint(run_dir: Path, state: dict) -> Path:
    """Write ``state`` as the run's latest checkpoint (temp file + rename)."""
    path = checkpoint_path(run_dir)
    write_atomic(path, state, attrs={"format": FORMAT, "format_version": FORMAT_VERSION})
    return path


def load_checkpoint(run_dir: Path) -> dict:
    """The latest checkpoint of ``run_dir``; a clear BnpviError if it is missing or corrupt."""
    path = checkpoint_path(run_dir)
    if not path.is_file():
        raise BnpviError(f"no checkpoint to resume from: {path} does not exist")
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != FORMAT:
                raise BnpviError(f"{path} is not a bnpvi checkpoint")
            version = int(f.attrs.get("format_version", -1))
            if version != FORMAT_VERSION:
                raise BnpviError(f"{path} has checkpoint format version {version}; this bnpvi reads {FORMAT_VERSION}")
            state = read_tree(f)
    except BnpviError:
        raise
    except Exception as err:  # h5py raises OSError/KeyError/ValueError on damaged files
        raise BnpviError(f"checkpoint {path} is unreadable (corrupt?): {err}") from err
    for key in ("alg", "trace", "rng", "meta"):
        if key not in state:
            raise BnpviError(f"checkpoint {path} is incomplete: no '{key}'")
    return state
