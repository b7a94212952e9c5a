"""Ctrl-C and SIGTERM during a run: the first one asks the run to stop after the current batch and to write
its files, the second one stops at once.

The handlers stay installed until the run's final files are written, so a signal that arrives while they are
written waits for them (``docs/resume.md``). A second signal ends the process at once when the run is the
process's whole job (``bnpvi-train``: ``hard_stop``); raising ``KeyboardInterrupt`` from a handler could land in
a callback that Python ignores errors of (a weakref's), and the run would go on. In a library call (the
estimators, a notebook) it raises ``KeyboardInterrupt``, which the caller may catch.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger("bnpvi")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
HARD_STOP_STATUS = 130


class StopRequest:
    """The signal that asked the run to stop (None while none did), set by the handlers :meth:`installed`
    puts in place."""

    def __init__(self, hard_stop: bool = False, prog: str = "bnpvi"):
        self.signal: int | None = None
        self.hard_stop = hard_stop
        self.prog = prog

    def _handle(self, signum, frame) -> None:
        if self.signal is None:
            self.signal = signum
            log.info("stopping after the current batch (signal %d) ...", signum)
            return
        if self.hard_stop:  # written straight to the descriptor: no lock of a stream is taken in a handler
            os.write(2, f"{self.prog}: interrupted again (signal {signum}): stopped at once; the last "
                        "checkpoint is kept\n".encode())
            os._exit(HARD_STOP_STATUS)
        raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator["StopRequest"]:
        """Handle SIGINT and SIGTERM in the block; the previous handlers come back after it. Outside the main
        thread (a Dask worker's task: a restart, :mod:`bnpvi.learn.restarts`) signals are not Python's to
        handle, and the block runs as it is."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
