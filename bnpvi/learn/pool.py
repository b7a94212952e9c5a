"""Where the per-batch work runs: in this process (:class:`LocalPool`), or on Dask workers
(:class:`bnpvi.learn.dask_pool.DaskPool`, ``alg.workers`` > 1 or ``alg.scheduler``).

A pool runs :func:`~bnpvi.learn.work.process_batch` on some batches under one set of global
parameters and returns their results in the order of the jobs; the driver alone applies them,
so a run's result does not depend on which pool ran it, nor on the order its jobs finished.
Every pool works on a batch with BLAS on one thread (:func:`~bnpvi.kernels.blas.blas_single_thread`):
a product that sums over a batch's atoms (the summaries Rᵀ Y) splits its sums by BLAS's thread
count, so the same batch on two BLAS threads in this process and on one in a worker would differ
in the last bits.
"""
from __future__ import annotations

from bnpvi.errors import BnpviError, check_int
from bnpvi.kernels.blas import blas_single_thread
from bnpvi.learn.work import BatchJob, BatchResult, process_batch


class LocalPool:
    """The work done in this process, one batch after the other, on batches read from ``store``."""

    workers = 1
    slots = 1  # batches worked on at once

    def __init__(self, store):
        self.store = store

    def run(self, model, globals_, jobs: list[BatchJob], schedule=None) -> list[BatchResult]:
        """The results of ``jobs`` under ``globals_``, in order (``schedule`` dispatches the moves' tracking)."""
        with blas_single_thread():
            return [process_batch(model, globals_, self.store.read_batch(job.b, job.piece), job.plans, schedule,
                                  job.warm) for job in jobs]

    def close(self) -> None:
        """Nothing to release."""


def open_pool(alg_cfg, store):
    """The pool that ``alg.workers``, ``alg.threads_per_worker`` and ``alg.scheduler`` ask for: this process
    (1 worker and no scheduler, the default) or Dask (:class:`bnpvi.learn.dask_pool.DaskPool`, imported only then)."""
    workers = check_int(alg_cfg.get("workers", 1), "alg.workers", 1)
    threads = check_int(alg_cfg.get("threads_per_worker", 1), "alg.threads_per_worker", 1)
    scheduler = alg_cfg.get("scheduler")
    if workers == 1 and scheduler is None:
        return LocalPool(store)
    try:
        from bnpvi.learn.dask_pool import DaskPool
    except ImportError:
        what = f"alg.scheduler={scheduler}" if scheduler is not None else f"alg.workers={workers}"
        raise BnpviError(f"{what} needs Dask's distributed scheduler: pip install 'bnpvi[cluster]'") from None
    return DaskPool.start(store, workers, threads, None if scheduler is None else str(scheduler))
