"""Nested dicts of arrays <-> HDF5 groups, and atomic file replacement."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np


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


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write to; when the block ends without an error the file
    there is synced to disk and renamed to ``path``, otherwise it is removed.

    A crash at any moment leaves either the previous file or the new one, never a partial one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, tree: dict, attrs: dict | None = None) -> None:
    """Write ``tree`` to an HDF5 file atomically (:func:`replacing`)."""
    with replacing(path) as tmp:
        with h5py.File(tmp, "w") as f:
            write_tree(f, tree)
            for key, value in (attrs or {}).items():
                f.attrs[key] = value
