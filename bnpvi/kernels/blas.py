"""Keep BLAS on one thread while compiled kernels call it from their own threads."""
from __future__ import annotations

import contextlib
import threading

from threadpoolctl import ThreadpoolController

__all__ = ["blas_single_thread"]

_controller = None
_blas_lock = threading.Lock()
_blas_users = 0
_blas_limiter = None


@contextlib.contextmanager
def blas_single_thread(use_blas: bool = True):
    """Keep BLAS on one thread during a kernel call that uses it, any block of small BLAS calls, or a batch's
    work wherever it runs (:mod:`bnpvi.learn.pool`).

    The kernel's own OpenMP threads call BLAS concurrently (BLAS threads on top would
    oversubscribe the cores), and BLAS results may depend on BLAS's thread count
    (OpenBLAS splits the sum over the atoms of Rᵀ Y between its threads), which would break
    bit-identical results for every ``n_threads`` and every number of workers. The limit is
    process-wide (threadpoolctl) and held while any such call runs, also when
    several Python threads call the kernels at once.
    """
    global _controller, _blas_users, _blas_limiter
    if not use_blas:
        yield
        return
    with _blas_lock:
        if _blas_users == 0:
            if _controller is None:
                _controller = ThreadpoolController()
            _blas_limiter = _controller.limit(limits=1, user_api="blas")
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None
