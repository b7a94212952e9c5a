"""A run directory: claimed by one process for the life of its run, and the state a run left in it.

A run claims its directory before it writes anything there (:class:`RunDirLock`, an advisory ``flock`` on
``.bnpvi.lock``): a second ``bnpvi-train`` started into the same directory is refused instead of writing
every lap twice. The kernel releases the lock when the holding process ends in any way (a SIGKILL too), so
a killed run never leaves a stale claim behind. :func:`run_state` says what a directory holds: nothing, the
files of a run that stopped before its first checkpoint (which may be started again in place), a run that
can be resumed, or a finished run that kept no checkpoint.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
from enum import Enum
from pathlib import Path

from bnpvi.errors import BnpviError

LOCK = ".bnpvi.lock"
LATEST = "latest.h5"
RUN_RECORD = ".hydra"
"""The folder of the config a run was started with (written by ``bnpvi-train`` once it holds the claim)."""
LOG = "train.log"
RESTARTS = "restarts"
"""The folder of a run's restarts (``alg.n_init`` > 1, :mod:`bnpvi.learn.restarts`), one run directory each."""
PROGRESS_FILES = ("trace.csv", "clusters.csv", "moves.csv")
"""The files a run writes from its first lap on, before its first checkpoint."""


def checkpoint_path(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints" / LATEST


def remove_partial_writes(run_dir: Path) -> list[Path]:
    """Remove the temporary files that a run killed while writing left in ``run_dir`` and its checkpoints
    folder (:func:`bnpvi.data.writes.replacing` writes ``.NAME.*.tmp`` beside ``NAME``); the paths removed."""
    run_dir = Path(run_dir)
    removed = [path for folder in (run_dir, checkpoint_path(run_dir).parent) for path in folder.glob(".*.tmp")]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


class RunState(Enum):
    """What a run directory holds."""

    EMPTY = "empty"
    UNFINISHED = "unfinished"
    """The files of a run that stopped before its first checkpoint and before its final files."""
    RESUMABLE = "resumable"
    FINISHED = "finished"
    """Final files (``summary.json``) and no checkpoint: a run with ``checkpoints=false``."""


def run_state(run_dir: Path) -> RunState:
    """The :class:`RunState` of ``run_dir``."""
    run_dir = Path(run_dir)
    if checkpoint_path(run_dir).is_file() or any(checkpoint_path(folder).is_file()
                                                 for folder in _restart_folders(run_dir)):
        return RunState.RESUMABLE
    if (run_dir / "summary.json").is_file():
        return RunState.FINISHED
    if any((run_dir / name).exists() for name in PROGRESS_FILES) or (run_dir / RUN_RECORD / "config.yaml").is_file():
        return RunState.UNFINISHED
    return RunState.EMPTY


def _restart_folders(run_dir: Path) -> list[Path]:
    """The run directories of ``run_dir``'s restarts (none for a run of one)."""
    folder = run_dir / RESTARTS
    return [path for path in folder.iterdir() if path.is_dir()] if folder.is_dir() else []


def refuse_start(run_dir: Path) -> None:
    """Raise the one-line error of a fresh start into ``run_dir`` when it holds a run to keep (one that can be
    resumed, or the final files of one that kept no checkpoint)."""
    state = run_state(run_dir)
    if state is RunState.RESUMABLE:
        raise BnpviError(f"run directory {run_dir} already holds a run; use resume={run_dir} to continue it, "
                         "or choose another hydra.run.dir")
    if state is RunState.FINISHED:
        raise BnpviError(f"run directory {run_dir} already holds a finished run that kept no checkpoint "
                         "(checkpoints=false); choose another hydra.run.dir")


def clear_unfinished(run_dir: Path) -> None:
    """Remove what a run that stopped before its first checkpoint left in ``run_dir`` (its progress files,
    its config record, partial writes; its log is emptied), so that a new run can start there."""
    run_dir = Path(run_dir)
    for name in PROGRESS_FILES:
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / RUN_RECORD, ignore_errors=True)
    shutil.rmtree(run_dir / RESTARTS, ignore_errors=True)
    remove_partial_writes(run_dir)
    log = run_dir / LOG
    if log.is_file():
        os.truncate(log, 0)


def remove_if_empty(run_dir: Path, stop_at: Path | None = None) -> None:
    """Remove ``run_dir`` and the folders above it that are left empty, up to ``stop_at`` (default: the
    working directory; nothing is removed outside it). An empty ``train.log`` counts as nothing."""
    run_dir = Path(run_dir).resolve()
    log = run_dir / LOG
    if log.is_file() and log.stat().st_size == 0:
        log.unlink()
    stop = Path.cwd().resolve() if stop_at is None else Path(stop_at).resolve()
    for folder in (run_dir, *run_dir.parents):
        if folder == stop or stop not in folder.parents:
            return
        try:
            folder.rmdir()
        except OSError:  # not empty (or already gone)
            return


class RunDirLock:
    """The claim of one process on a run directory, held until :meth:`release` (or the process ends).

    Taken with ``flock(LOCK_EX | LOCK_NB)`` on ``run_dir/.bnpvi.lock``; the file is removed on release. The
    lock file is checked to be the one locked (not one a releasing process just removed), so two processes
    never both hold a directory.
    """

    def __init__(self, run_dir: Path, fd: int):
        self.run_dir = Path(run_dir)
        self._fd: int | None = fd

    @classmethod
    def claim(cls, run_dir: Path) -> "RunDirLock":
        """Claim ``run_dir`` (created if needed).

        Raises
        ------
        BnpviError
            Another process holds it ("... is in use by another bnpvi run (process PID)").
        """
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LOCK
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if err.errno in (errno.EWOULDBLOCK, errno.EACCES):
                    raise BnpviError(f"run directory {run_dir} is in use by another bnpvi run (process {holder}); "
                                     "wait for it to end, or choose another hydra.run.dir") from None
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:  # removed by the process that held it, between our open and our lock
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return cls(run_dir, fd)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the directory up (the lock file goes); a second call does nothing."""
        if self._fd is None:
            return
        try:
            (self.run_dir / LOCK).unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None
