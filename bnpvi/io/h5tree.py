"""Nested dicts of arrays <-> HDF5 groups, and HDF5 files of them written atomically."""
from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from bnpvi.data.writes import new_h5


def write_tree(group: h5py.Group, tree: dict) -> None:
    """Write a nested dict: dicts become groups, strings/numbers/arrays datasets (arrays of str as UTF-8)."""
    for key, value in tree.items():
        if isinstance(value, dict):
            write_tree(group.create_group(key), value)
        elif isinstance(value, str) or (isinstance(value, np.ndarray) and value.dtype.kind in "OU"):
            group.create_dataset(key, data=value if isinstance(value, str) else value.astype(object),
                                 dtype=h5py.string_dtype())
        else:
            group.create_dataset(key, data=np.asarray(value))


def read_tree(group: h5py.Group) -> dict:
    """Inverse of ``write_tree`` (0-d datasets come back as NumPy scalars, strings as str)."""
    out = {}
    for key, item in group.items():
        if isinstance(item, h5py.Group):
            out[key] = read_tree(item)
        elif h5py.check_string_dtype(item.dtype) is not None:
            out[key] = item.asstr()[()]
        else:
            out[key] = item[()]
    return out


def write_atomic(path: Path, tree: dict, attrs: dict | None = None) -> None:
    """Write ``tree`` to an HDF5 file atomically (:func:`~bnpvi.data.writes.new_h5`; a failed write: one
    line, :func:`~bnpvi.data.writes.write_failure`)."""
    with new_h5(path) as f:
        write_tree(f, tree)
        for key, value in (attrs or {}).items():
            f.attrs[key] = value
