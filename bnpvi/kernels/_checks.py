"""What every kernel face shares: its error, its checks of input arrays, its thread count and the loader
of its compiled extension."""
from __future__ import annotations

import importlib

import numpy as np

from bnpvi.errors import BnpviError

PARALLEL_MIN_WORK = 1 << 20
"""Below this many (row, column) cells the kernels run on one thread by default."""


class KernelInputError(BnpviError, ValueError):
    """Invalid input to a kernel (dtype, shape, layout, NaN / inf values)."""


def compiled(name: str, what: str):
    """The built extension module ``bnpvi.kernels.<name>``, or an ImportError that says how to build it."""
    try:
        return importlib.import_module(f"bnpvi.kernels.{name}")
    except ImportError as err:  # pragma: no cover - only without a build
        raise ImportError(
            f"bnpvi's compiled {what} (bnpvi.kernels.{name}) are not built: install with "
            "`pip install .`, or run `python setup.py build_ext --inplace` in a checkout"
        ) from err


def check_array(a, name: str, ndim: int, dtype=np.float64) -> np.ndarray:
    """``a`` itself when it is a C-contiguous ndarray of ``dtype`` with ``ndim`` dimensions, else a
    KernelInputError naming ``name``."""
    if not isinstance(a, np.ndarray):
        raise KernelInputError(f"{name} must be a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != dtype:
        raise KernelInputError(f"{name} must have dtype {np.dtype(dtype).name}, got {a.dtype}")
    if a.ndim != ndim:
        raise KernelInputError(f"{name} must be {ndim}-D, got shape {a.shape}")
    if not a.flags.c_contiguous:
        raise KernelInputError(f"{name} must be C-contiguous (use np.ascontiguousarray)")
    return a


def thread_count(n_threads, work: int) -> int:
    """The OpenMP threads of a call: ``n_threads`` when given (a positive int), else 1 for less than
    :data:`PARALLEL_MIN_WORK` cells of ``work`` and all the runtime offers for more."""
    if n_threads is None:
        if work < PARALLEL_MIN_WORK:
            return 1
        return max(1, int(compiled("_local_step", "kernels").max_threads()))
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise KernelInputError(f"n_threads must be None or a positive int, got {n_threads!r}")
    return int(n_threads)


def row_preview(row: np.ndarray, n: int = 6) -> str:
    """The first ``n`` entries of ``row`` for a message."""
    body = np.array2string(row[:n], precision=4, separator=", ")
    return body if row.size <= n else body[:-1] + ", ...]"
