"""Progress of a long conversion on a terminal: one tqdm bar per pass over the data (reading, checking,
writing), advanced a block at a time and taken down when the pass ends.

Nothing is shown unless a caller asks for it (:func:`shown_on`: ``bnpvi-data convert`` does when stderr is a
terminal); the passes only call :func:`meter`, which costs nothing when no bar is shown.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

from tqdm import tqdm

_STREAM: ContextVar = ContextVar("bnpvi_data_progress_stream", default=None)


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes and closed streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def shown_on(stream) -> Iterator[None]:
    """Show the bars of the passes run inside on ``stream`` (None: show none)."""
    token = _STREAM.set(stream)
    try:
        yield
    finally:
        _STREAM.reset(token)


@contextlib.contextmanager
def meter(what: str, total: int | None, unit: str = "rows") -> Iterator[Callable[[int], None]]:
    """``advance(n)`` for a pass over ``total`` units (None: unknown) described as ``what``: it moves the pass's
    bar by n units when bars are shown (:func:`shown_on`), and does nothing otherwise."""
    stream = _STREAM.get()
    if stream is None:
        yield lambda n: None
        return
    with tqdm(total=total, desc=what, unit=unit, unit_scale=True, file=stream, leave=False,
              dynamic_ncols=True) as bar:
        yield bar.update
