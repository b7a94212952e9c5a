"""Batch work on a Dask cluster: a :class:`distributed.LocalCluster` of worker processes (``alg.workers`` > 1),
or a running scheduler (``alg.scheduler=ADDRESS``).

Every worker opens the HDF5 file itself, once, and sends back only its batches'
:class:`~bnpvi.learn.work.BatchResult`. A round goes to one actor per worker (:class:`BatchWorker`, made at
the first round): it holds the store, the model and the moves' tracking code between rounds (sent again
only when another one comes) and gets the round's globals and its batches' plans in one direct call, with
no scheduler in between. A round whose batches track no move gets only what their local steps read of the
globals (``Model.local_view``: for a topic model E ln φ without the summaries and λ̂, a third of the bytes).
When an actor round fails (a worker died), the round runs again as tasks through
the scheduler: what those share goes out once (scattered), the globals inside the tasks when they are
small (one round trip instead of two), scattered to every worker first when they are large
(``INLINE_BYTES``); the scheduler re-runs a dead worker's task elsewhere, with the same result, and the
actors are made again at the next round. The driver gets the results back in the order of the jobs. The
Dask import lives here alone; the cluster and the client close with :meth:`DaskPool.close`.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import threading
import time

import dask
import distributed
import numpy as np
from threadpoolctl import threadpool_limits

from bnpvi.errors import BnpviError
from bnpvi.kernels.blas import blas_single_thread
from bnpvi.learn.allocator import reuse_freed_memory
from bnpvi.learn.work import BatchJob, BatchResult, process_batch

log = logging.getLogger("bnpvi")

CONNECT_TIMEOUT = 10
"""Seconds to reach a scheduler, and for it to have a worker."""
SCATTER_TRIES = 5
"""Tries of a scatter that a dying worker cuts short (the scheduler drops the worker, the next try skips it)."""
BLAS_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Thread counts a worker process reads when its BLAS and OpenMP runtimes load."""

INLINE_BYTES = 1 << 20
"""Globals up to this size travel inside a round's tasks (one per worker thread: as many copies as a broadcast,
in one round trip); larger ones are scattered to the workers first (one more round trip, but not through the
scheduler: the topics of a topic model are megabytes)."""
ACTOR_SECONDS = [0.0]
"""Seconds this process's actors have spent on batches (a worker's running total, :func:`actor_seconds`)."""
WORKER_SETUP = "bnpvi-worker-setup"
"""The name of the :class:`WorkerSetup` plugin on the workers."""

_read_lock = threading.Lock()  # the threads of one worker share its handle of the store


def globals_bytes(globals_) -> int:
    """The bytes of the arrays of a model's globals (summaries, allocation and observation parameters)."""
    arrays = [*globals_.stats.fields.values(), *globals_.alloc.values(), *globals_.obs.values()]
    return sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


def worker_settings():
    """Dask's settings for the worker processes of a local cluster, as a context to start it in: no statistical
    profiler (sampling the workers' stacks every 10 ms takes the GIL from the batch work: 400,000 16-D points
    in 40 batches, 2 workers: 0.46-0.51 s per lap, not 0.56-0.57). Their allocator is set by
    :class:`WorkerSetup`, on workers started elsewhere too."""
    return dask.config.set({"distributed.worker.profile.enabled": False})


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def work_on_batches(store, model, globals_, schedule, plans: dict, batches: list[int], warm: list,
                    pieces: list) -> list[BatchResult]:
    """A task: each batch b of ``batches`` (or its piece, ``BatchJob.piece``) read from the worker's own handle
    of ``store``, and its work (``process_batch``, with BLAS on one thread as in this process:
    :mod:`bnpvi.learn.pool`), in turn."""
    results = []
    for b, start, piece in zip(batches, warm, pieces):
        with _read_lock:
            batch = store.read_batch(b, piece)
        with blas_single_thread():
            results.append(process_batch(model, globals_, batch, plans.get(b, {}), schedule, start))
    return results


class BatchWorker:
    """The run's work on one worker, as a Dask actor: the store, the model and the moves' tracking code held
    between rounds, and a round's batches worked on in one direct call (no scheduler in between: on a 2-core
    machine a round of tasks through the scheduler takes ~15 ms more than its work, a round of actor calls ~4.5 ms)."""

    def __init__(self, store):
        self.store = store
        self.held: dict[str, object] = {}

    def hold(self, name: str, value) -> None:
        self.held[name] = value

    def work(self, globals_, plans: dict, batches: list[int], warm: list, pieces: list) -> list[BatchResult]:
        start = time.perf_counter()
        results = work_on_batches(self.store, self.held["model"], globals_, self.held.get("tracker"), plans, batches,
                                  warm, pieces)
        ACTOR_SECONDS[0] += time.perf_counter() - start
        return results


def actor_seconds() -> float:
    """Seconds the actors of this worker process have spent on batches (``scripts/bench_scale.py`` reads it)."""
    return ACTOR_SECONDS[0]


def read_first_batch(store) -> None:
    """Run on every worker before the first lap: the data file can be opened and read there."""
    with store:
        store.read_batch(0)


class WorkerSetup(distributed.WorkerPlugin):
    """Caps a worker's BLAS and OpenMP threads at its number of task threads, and holds its allocator to reuse
    freed memory (:mod:`bnpvi.learn.allocator`: Dask's fixed ``MALLOC_TRIM_THRESHOLD_`` made a batch's
    temporaries be faulted in anew each time); also on a restarted worker."""

    def setup(self, worker) -> None:
        reuse_freed_memory()
        self.limits = threadpool_limits(limits=worker.state.nthreads)

    def teardown(self, worker) -> None:
        self.limits.restore_original_limits()


class IgnoreCtrlC(distributed.WorkerPlugin):
    """A worker of the run's own local cluster ignores SIGINT: Ctrl-C in a terminal reaches every process of
    the group, and the driver, which stops after the current round and closes the cluster, is the one to act."""

    def setup(self, worker) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def quiet_dask_logging() -> None:
    """Keep Dask's INFO records (workers registered, comms opened and closed) out of a run's output: the
    ``distributed`` logger, at INFO from Dask's own config, is set to WARNING unless a more verbose level was
    chosen for it (``hydra.verbose=distributed``: DEBUG)."""
    dask_log = logging.getLogger("distributed")
    if dask_log.level in (logging.NOTSET, logging.INFO):
        dask_log.setLevel(logging.WARNING)


class DaskPool:
    """Batch work on Dask workers (module docstring); start one with :meth:`start`.

    Attributes
    ----------
    workers : int
        Worker processes when the pool started (the default P of memoized VI).
    slots : int
        Task threads over all workers then (batches worked on at once).
    """

    def __init__(self, client, cluster=None):
        self.client, self.cluster = client, cluster
        client.register_plugin(WorkerSetup(), name=WORKER_SETUP)
        threads = [w["nthreads"] for w in client.scheduler_info(n_workers=-1)["workers"].values()]
        self.workers, self.slots = len(threads), sum(threads)
        self._store = None
        self._shared: dict[str, tuple[object, object]] = {}  # name -> (object, its future)
        self._schedule = self._tracker = None  # the run's MoveSchedule and its copy for the workers
        self._rounds = itertools.count()
        self._actors: list | None = None  # one BatchWorker per worker, made at the first round
        self._actor_futures: list = []  # an actor lives while its future does
        self._held: list[dict[str, object]] = []  # what each actor holds (name -> the driver's object)

    def share_store(self, store) -> None:
        """Send the batch store to the workers (its path and split: each opens the file itself)."""
        self._store_value = store
        self._store = self._scatter(store)

    @classmethod
    def start(cls, store, workers: int = 1, threads_per_worker: int = 1, scheduler: str | None = None) -> "DaskPool":
        """A pool on ``workers`` local worker processes of ``threads_per_worker`` threads each, or on the workers of
        the running ``scheduler``; one-line errors for a scheduler that cannot be reached or has no worker, and
        for workers that cannot read the data file."""
        client, cluster = connect(workers, threads_per_worker, scheduler, store)
        pool = cls(client, cluster)
        try:
            pool.share_store(store)
        except BaseException:
            pool.close()
            raise
        return pool

    def _scatter(self, value):
        """``value`` on every worker (a list: each item); its future(s)."""
        for attempt in range(1, SCATTER_TRIES + 1):
            try:
                return self.client.scatter(value, broadcast=True, hash=False)
            except OSError:  # a worker died under it
                if attempt == SCATTER_TRIES:
                    raise
                log.debug("scatter cut short by a lost worker; trying again")
                time.sleep(0.2 * attempt)

    def _shared_future(self, name: str, value):
        """The future of ``value`` on the workers, scattered when ``value`` is not the object shared last as ``name``."""
        held = self._shared.get(name)
        if held is None or held[0] is not value:
            held = (value, self._scatter(value))
            self._shared[name] = held
        return held[1]

    def run(self, model, globals_, jobs: list[BatchJob], schedule=None) -> list[BatchResult]:
        """The results of ``jobs`` under ``globals_``, in order (``schedule`` dispatches the moves' tracking).

        A round goes to the workers' actors (:class:`BatchWorker`) when every worker has one thread (the
        actors of a worker share one thread, so workers of several get tasks, one per thread). If an actor
        round fails (an actor's worker died: Dask raises OSError, CommClosedError, RuntimeError ... as it
        goes), the round is run again as tasks, which the scheduler re-runs elsewhere as workers die and
        which raise the work's own errors, and the actors are made again, on the workers there are then,
        at the next round."""
        if schedule is not None and schedule is not self._schedule:  # the moves track with a copy without state
            self._schedule, self._tracker = schedule, schedule.tracker()
        tracker = self._tracker if schedule is not None else None
        if not any(job.plans for job in jobs):  # nothing tracked: what the local steps read is all they get
            globals_ = model.local_view(globals_)
        if self.slots == self.workers:  # a worker's actors share one thread
            try:
                return self._actor_round(model, globals_, jobs, tracker)
            except Exception as err:  # noqa: BLE001 (the tasks below raise any error that is the work's own)
                log.debug("an actor round failed (%s); the round runs as tasks", type(err).__name__)
                self._actors = None
        return self._task_round(model, globals_, jobs, tracker)

    def _actor_round(self, model, globals_, jobs: list[BatchJob], tracker) -> list[BatchResult]:
        if self._actors is None:
            workers = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
            futures = [self.client.submit(BatchWorker, self._store_value, actor=True, workers=[w], pure=False)
                       for w in workers]  # one on each: the actors of a worker share one thread
            self._actors = [f.result(timeout=CONNECT_TIMEOUT) for f in futures]
            self._held = [{} for _ in workers]
            self._actor_futures = futures
        calls = []
        for actor, held in zip(self._actors, self._held):
            for name, value in (("model", model), ("tracker", tracker)):
                if held.get(name) is not value:
                    calls.append(actor.hold(name, value))
                    held[name] = value
        for call in calls:
            call.result()
        n = min(len(self._actors), len(jobs))
        groups = [jobs[i::n] for i in range(n)]
        calls = [actor.work(globals_, {job.b: job.plans for job in group if job.plans}, [job.b for job in group],
                            [job.warm for job in group], [job.piece for job in group])
                 for actor, group in zip(self._actors, groups)]
        done = [call.result() for call in calls]
        return [done[i % n][i // n] for i in range(len(jobs))]

    def _task_round(self, model, globals_, jobs: list[BatchJob], tracker) -> list[BatchResult]:
        model_f = self._shared_future("model", model)
        tracker_f = None if tracker is None else self._shared_future("tracker", tracker)
        round_ = next(self._rounds)
        groups = [jobs[i::self.slots] for i in range(min(self.slots, len(jobs)))]
        for attempt in range(1, SCATTER_TRIES + 1):
            shared = self._scatter(globals_) if globals_bytes(globals_) > INLINE_BYTES else globals_
            suffix = "" if attempt == 1 else f"-again{attempt}"
            futures = [self.client.submit(work_on_batches, self._store, model_f, shared, tracker_f,
                                          {job.b: job.plans for job in group if job.plans}, [job.b for job in group],
                                          [job.warm for job in group], [job.piece for job in group],
                                          key=f"bnpvi-round-{round_}-{i}{suffix}",
                                          pure=False)
                       for i, group in enumerate(groups)]
            try:
                done = self.client.gather(futures)
                break
            except distributed.client.FutureCancelledError:
                # a scattered input (globals, model, moves, store) went with a worker killed while it was being
                # sent, and the scheduler forgot the tasks that needed it: send everything again, run the round
                # again (the work is a pure function of its inputs, so the results are the same)
                if attempt == SCATTER_TRIES:
                    raise
                log.debug("round %d lost an input with a worker; sending it again", round_)
                self._shared.clear()
                self._store = self._scatter(self._store_value)
                model_f = self._shared_future("model", model)
                if tracker_f is not None:
                    tracker_f = self._shared_future("tracker", self._tracker)
                time.sleep(0.2 * attempt)
        return [done[i % len(groups)][i // len(groups)] for i in range(len(jobs))]

    def close(self) -> None:
        """Close the client, and the local cluster if the pool started one (a running scheduler's workers get
        their thread counts back for the runs that come after)."""
        try:
            if self.cluster is None:
                with contextlib.suppress(OSError, TimeoutError):  # a scheduler that is gone keeps nothing
                    self.client.unregister_worker_plugin(WORKER_SETUP)
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def connect(workers: int, threads_per_worker: int, scheduler: str | None, store=None) -> tuple:
    """A client of ``workers`` new local worker processes of ``threads_per_worker`` threads each (and the
    cluster, to close after the client), or of the running ``scheduler`` (no cluster); one-line errors for
    more threads than cores, a scheduler that cannot be reached or has no worker, and workers that cannot
    read ``store``'s data file (when given)."""
    cluster = client = None
    quiet_dask_logging()
    try:
        if scheduler is None:
            cores = available_cores()
            if workers * threads_per_worker > cores:
                raise BnpviError(f"alg.workers={workers} x alg.threads_per_worker={threads_per_worker} threads "
                                 f"exceed the {cores} cores of this machine")
            with worker_settings():
                cluster = distributed.LocalCluster(
                    n_workers=workers, threads_per_worker=threads_per_worker, processes=True,
                    dashboard_address=None, silence_logs=logging.ERROR,
                    env=dict.fromkeys(BLAS_VARIABLES, str(threads_per_worker)))
            client = distributed.Client(cluster)
            client.register_plugin(IgnoreCtrlC(), name="bnpvi-ignore-ctrl-c")
        else:
            client = _connect(scheduler)
        _check_workers(client, store, scheduler)
    except BaseException:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        raise
    return client, cluster


def _connect(address: str):
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as err:
        raise BnpviError(f"cannot reach the Dask scheduler at alg.scheduler={address}: "
                         f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None


def _check_workers(client, store, scheduler: str | None) -> None:
    """One line if the scheduler has no worker, or a worker cannot read the data file."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except TimeoutError:
        raise BnpviError(f"the Dask scheduler at alg.scheduler={scheduler} has no workers "
                         f"(none joined within {CONNECT_TIMEOUT} s)") from None
    if store is None:
        return
    for worker, outcome in client.run(read_first_batch, store, on_error="return").items():
        if isinstance(outcome, BaseException):
            raise BnpviError(f"Dask worker {worker} cannot read the data file {store.path}: "
                             f"{str(outcome).splitlines()[0] if str(outcome) else type(outcome).__name__}")

