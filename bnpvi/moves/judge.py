"""The one judgement every change of the cluster set passes: a candidate state against the current one.

A move proposes a :class:`Proposal` (the candidate's whole-data summaries, or its value and globals when it
has evaluated them itself, and how every memo cache becomes the candidate's); :func:`weigh` gives its exact
gain in whole-data ELBO and the verdict of its rule, :func:`install` applies an accepted one in one place,
and :func:`judge` does both and logs it (moves.csv). Every decision thus compares the exact ELBO of two
valid states, so memoized VI's ELBO never decreases at a lap's end (Hughes 2016 thesis §4.1, §4.4).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bnpvi.moves.base import Edit, accepts
from bnpvi.stats import SuffStats


def keeps(gain: float, elbo: float) -> bool:
    """The rule of a change that must not lower the ELBO at all (a sort by size)."""
    return gain >= 0.0


@dataclass(frozen=True, eq=False)
class Proposal:
    """A candidate state of the cluster set.

    Attributes
    ----------
    move, target : str
        Who proposes, and what (a cluster id, a pair "a+b"), as moves.csv logs it.
    sources : list of lists of int
        New cluster i is made of the current clusters ``sources[i]`` (``SuffStats.remap``).
    rewrite : callable (b, cache) -> SuffStats
        Batch b's memo cache under the candidate (``Edit.rewrite``).
    stats : SuffStats, or a callable () -> SuffStats, optional
        The candidate's whole-data summaries, evaluated by the run's global step (``run.evaluate``); a callable
        makes them only when they are evaluated.
    screened_gain : float, optional
        The candidate's gain computed more cheaply (a move's own sum of unchanged and changed terms);
        ``stats`` is evaluated, and its gain judged, only when this one would be accepted.
    evaluated : (float, Globals), optional
        The candidate's ELBO and globals, when the move evaluated them (no ``stats`` then).
    rule : callable (gain, elbo) -> bool
        When the gain accepts the candidate: :func:`~bnpvi.moves.base.accepts` (above float noise) by default.
    changes : set of int
        Ids of the clusters an acceptance changes (later proposals on them are dropped this lap).
    warm : callable, optional
        (b, warm start) -> batch b's new warm start (``Edit.warm``).
    fresh, kept, exact
        Logged with the event (``MoveEvent``).
    """

    move: str
    target: str
    sources: list
    rewrite: Callable[[int, SuffStats], SuffStats]
    stats: SuffStats | Callable[[], SuffStats] | None = None
    screened_gain: float | None = None
    evaluated: tuple | None = None
    rule: Callable[[float, float], bool] = accepts
    changes: set = field(default_factory=set)
    warm: Callable | None = None
    fresh: int = 0
    kept: int = 0
    exact: bool = True


@dataclass(frozen=True)
class Verdict:
    """A proposal's exact gain, whether its rule accepts it, and its globals (None when never evaluated)."""

    gain: float
    accepted: bool
    globals: object = None


def weigh(run, proposal: Proposal, current: float) -> Verdict:
    """The exact gain of ``proposal`` over the current ELBO ``current``, and its rule's verdict."""
    if proposal.evaluated is not None:
        value, globals_ = proposal.evaluated
    elif proposal.screened_gain is not None and not proposal.rule(proposal.screened_gain, current):
        return Verdict(proposal.screened_gain, False)
    else:  # the screened value is confirmed by the candidate's own global step, which acceptance installs
        stats = proposal.stats() if callable(proposal.stats) else proposal.stats
        value, globals_ = run.evaluate(stats, proposal.sources)
    gain = value - current
    return Verdict(gain, proposal.rule(gain, current), globals_)


def install(run, schedule, proposal: Proposal, verdict: Verdict) -> None:
    """Apply an accepted proposal to every memo cache, the aggregate, the ids and the globals (``run.apply``);
    its clusters are marked changed for the rest of the lap (``schedule`` None: no lap to mark)."""
    run.apply(Edit(proposal.sources, proposal.rewrite, verdict.globals, proposal.warm, frozenset(proposal.changes)))
    if schedule is not None:
        schedule.changed |= set(proposal.changes)


def log(schedule, proposal: Proposal, verdict: Verdict, gain: float | None = None) -> None:
    """Log the proposal's event (moves.csv; ``gain``: another gain to report, e.g. a joint proposal's)."""
    schedule.event(proposal.move, proposal.target, verdict.gain if gain is None else gain, verdict.accepted,
                   fresh=proposal.fresh, kept=proposal.kept, exact=proposal.exact)


def judge(run, schedule, proposal: Proposal, current: float) -> Verdict:
    """Weigh ``proposal``, install it if accepted, log it; returns the verdict."""
    verdict = weigh(run, proposal, current)
    if verdict.accepted:
        install(run, schedule, proposal, verdict)
    log(schedule, proposal, verdict)
    return verdict
