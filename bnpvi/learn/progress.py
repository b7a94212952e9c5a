"""Progress of a run while it trains: on a terminal, a bar over the batches of the current lap, with the last
lap's K, ELBO and seconds; elsewhere nothing more than the runner's one log line per lap.

The bar is shown (:class:`Progress`) when its stream (stderr) is a terminal and the ``bnpvi`` logger prints
INFO lines - so ``hydra/job_logging=disabled`` silences it as it silences the lap lines, and
``hydra.verbose=true`` keeps it - or when asked for (the estimators' ``verbose``). While it is up, the log
lines meant for the console go through tqdm, so they print above the bar instead of through it.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from dataclasses import dataclass

from tqdm import tqdm

from bnpvi.data.progress import is_terminal

_log = logging.getLogger("bnpvi")


class LapBar:
    """The bar of one run: ``lap L`` and its batches done; after each lap, that lap's K, ELBO and seconds.

    Parameters
    ----------
    bar : tqdm or None
        The tqdm bar, or None for a run that shows none (every call is then a no-op).
    closing : contextlib.ExitStack, optional
        What :meth:`close` closes: the bar and the redirection of the console's log lines.
    """

    def __init__(self, bar: tqdm | None, closing: contextlib.ExitStack | None = None):
        self._bar = bar
        self._closing = closing

    def advance(self, alg, rows: list[dict] | None = None) -> None:
        """Show where ``alg`` is after a step (``alg.lap`` laps and ``alg.pos`` batches of the next one done);
        ``rows``: the trace so far when the step ended a lap (its last row is that lap's).

        The bar redraws at most every 0.1 s within a lap (tqdm's ``mininterval``), and always at its end.
        """
        bar = self._bar
        if bar is None:
            return
        if rows:
            last = rows[-1]
            seconds = last["elapsed_s"] - (rows[-2]["elapsed_s"] if len(rows) > 1 else 0.0)
            bar.set_postfix_str(f"K={last['K']} elbo={last['elbo']:.8g} {seconds:.2f} s/lap", refresh=False)
            bar.n = bar.total
            bar.refresh()
            return
        if bar.n == bar.total:  # the first batch of a new lap
            bar.set_description_str(f"lap {alg.lap + 1}", refresh=False)
            bar.reset(total=alg.n_batches)
        bar.update(alg.pos - bar.n)

    def close(self) -> None:
        """Take the bar down (it stays on the terminal as the run left it) and the log lines back."""
        if self._closing is not None:
            self._closing.close()
            self._closing = None


@dataclass(frozen=True)
class Progress:
    """Whether and where a run shows its bar.

    Attributes
    ----------
    show : bool, optional
        True: always; False: never; None (default): when ``stream`` is a terminal and the ``bnpvi`` logger
        prints INFO lines.
    stream : file, optional
        Where the bar goes (default: ``sys.stderr`` at the time the run starts).
    """

    show: bool | None = None
    stream: object = None

    def shown(self) -> bool:
        """Whether the bar is shown."""
        if self.show is not None:
            return self.show
        return _log.isEnabledFor(logging.INFO) and is_terminal(self.stream if self.stream is not None else sys.stderr)

    def bar(self, alg) -> LapBar:
        """The bar of a run driving ``alg`` (a no-op one when it is not shown); close it when the run stops."""
        if not self.shown():
            return LapBar(None)
        stream = self.stream if self.stream is not None else sys.stderr
        closing = contextlib.ExitStack()
        consoles = [logger for logger in (logging.root, _log)
                    if any(type(handler) is logging.StreamHandler and handler.stream in (sys.stdout, sys.stderr)
                           for handler in logger.handlers)]
        if consoles:
            from tqdm.contrib.logging import logging_redirect_tqdm  # here: it imports asyncio (30 ms a command)

            closing.enter_context(logging_redirect_tqdm(consoles))
        bar = closing.enter_context(tqdm(total=alg.n_batches, initial=alg.pos, desc=f"lap {alg.lap + 1}",
                                         unit="batch", file=stream, dynamic_ncols=True))
        return LapBar(bar, closing)
