"""The move seam: plan (driver), track (inside the per-batch work), decide (driver).

A move that changes the set of clusters (Hughes 2016 thesis Ch. 4) is split in three:

* **plan**, by the driver at the start of a lap: which clusters to try, and every
  random number the proposal will need (drawn from the run's generator, never
  inside per-batch work, so a result does not depend on where a batch ran);
* **track**, inside the pure per-batch work (``bnpvi.learn.work``): from a batch's
  local step, whatever the proposal needs (merged entropies, the summaries of a
  proposal's responsibilities ...); a function of (model, globals, plan, batch)
  only;
* **decide**, by the driver after the lap (or, where a move's rule says so, after
  a batch): build the candidate's whole-data summaries, judge it by the exact ELBO,
  and, if accepted, return an :class:`Edit` that the driver applies to every memo
  cache, the aggregate, the cluster ids and the global parameters in one place.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

import numpy as np

from bnpvi.alloc.base import Local
from bnpvi.moves.saved import Saved
from bnpvi.stats import Responsibilities, SuffStats

FAINT_MASS = 1e-6
"""An atom holding at most this much of a move's target (0 < r_nt ≤ FAINT_MASS) gives all of it to one
cluster of the proposal: the move needs neither its likelihood nor its data, only the target's summaries of
the batch less those of the atoms it scored (:func:`faint_stats`). The proposal stays one whose summaries
are exact, judged like any other. Dense responsibilities leave some mass of every cluster on most atoms: on
64-D image patches (K = 18, a batch of 15,000) 88 % of the atoms hold some of a cluster, 18.5 % more than
1e-10 and 12 % more than 1e-6, while all of a cluster's atoms under 1e-6 hold at most 2e-4 of its mass."""


def faint_stats(model, held: SuffStats, atoms, r_scored: np.ndarray) -> SuffStats:
    """A target's summaries over a batch's faint atoms: ``held``, its summaries of the whole batch (one
    cluster), less those of the scored ``atoms`` at their masses ``r_scored``."""
    scored = Responsibilities(np.ascontiguousarray(r_scored, dtype=np.float64).reshape(-1, 1), 1)
    return held - model.summarize(atoms, Local(scored))


def alloc_part(model, stats: SuffStats) -> SuffStats:
    """The allocation model's summaries of ``stats`` (every field but the observation family's; no copies):
    with the data terms of the clusters a move changes, all that its candidate's ELBO needs
    (``Model.alloc_value``)."""
    names = [name for name in stats.specs if name not in model.obs_fields]
    return SuffStats(stats.select(names), {name: stats.specs[name] for name in names})


FINDS_K = ("split", "birth")
"""The moves that add clusters: a run with any of them starts from one cluster (``init.K`` null) and from its
seeds' hard summaries rather than their cells (``bnpvi.learn.init.fixed_K_start``)."""


def finds_K(moves) -> bool:
    """Whether the run's ``moves`` node (or None) switches on a move that adds clusters (``FINDS_K``)."""
    return moves is not None and any(moves.get(name) is not None for name in FINDS_K)


def per_lap(limit, cap: int | None) -> int:
    """A move's proposals per lap: its config's ``limit``, at most the allocation model's ``cap`` (None: no cap)."""
    return int(limit) if cap is None else min(int(limit), cap)

ACCEPT_RTOL = 1e-10
"""A move must raise the ELBO by more than this fraction of |L| (guards against float noise)."""


@dataclass(frozen=True, eq=False)
class Edit:
    """A change of the cluster set, applied by the driver in one place.

    Attributes
    ----------
    sources : list of lists of int
        New cluster i is made of the current clusters ``sources[i]`` (see
        ``SuffStats.remap``); ids and warm starts follow it.
    rewrite : callable (b, cache) -> SuffStats
        The new memo cache of batch b, given its current one (padded to the current K).
    globals : Globals
        The new global parameters; ``globals.stats`` is the new aggregate.
    """

    sources: list
    rewrite: Callable[[int, SuffStats], SuffStats]
    globals: object
    warm: Callable | None = None
    """(b, warm start) -> batch b's new warm start (``AllocModel.warm_state``); by default its columns are
    remapped as ``sources`` says (a new cluster's column is the sum of its sources', 0 for a fresh one)."""
    changed: frozenset = frozenset()
    """Ids of the kept clusters whose summaries the edit changes (a sort or a drop changes none)."""


@dataclass
class MoveEvent:
    """One proposal: lap, move, cluster ids, ELBO gain, accepted or not; for a birth, how many
    fresh clusters it proposed and how many its cleanup kept (0 for other moves); whether the
    gain is the exact whole-data ELBO difference (False: a lower bound on it, e.g. an HMM
    merge after another merge of the same lap, Hughes 2016 thesis §6.5.1)."""

    lap: int
    move: str
    target: str
    gain: float
    accepted: bool
    fresh: int = 0
    kept: int = 0
    exact: bool = True


VANISHING_MASS = 0.01
"""A cluster holding less than this many atoms in all (its mass shrinking lap by lap towards 0, as unused
clusters of an abundant start do under dense responsibilities) is removed by a delete that does not lower the
ELBO beyond float noise (``accepts_removal``): its exact gain is then a few 1e-6 nats either way, below what
``accepts`` can tell from rounding, and such clusters stayed in the model, counted in K, to the last lap."""


def accepts(gain: float, elbo: float) -> bool:
    """Whether a proposal with this exact gain is accepted at an ELBO of ``elbo``."""
    return bool(gain > ACCEPT_RTOL * max(1.0, abs(elbo)))


def accepts_removal(gain: float, elbo: float) -> bool:
    """Whether the removal of an empty or vanishing cluster (``VANISHING_MASS``) with this exact gain is accepted:
    unless it lowers the ELBO beyond float noise."""
    return bool(gain >= -ACCEPT_RTOL * max(1.0, abs(elbo)))


def ordered_sum(items) -> SuffStats:
    """Sum in the given order (batch order), so that a resumed run adds in the same order."""
    items = list(items)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


class Move(Saved, ABC):
    """One kind of proposal (birth, merge, delete); see the module docstring.

    Parameters
    ----------
    cfg : the move's config node (``moves.<name>``)

    The driver ("run") passed to the hooks exposes ``model``, ``globals``, ``caches``,
    ``ids`` (ClusterIds), ``n_batches``, ``lap`` (completed laps), ``pos`` (batches done
    in this lap), ``round`` (the batches of the current round of memoized VI: all their
    caches are swapped before the first of their ``after_batch``), ``elbo()``,
    ``evaluate(stats, sources)`` and ``apply(edit)``; the schedule exposes ``event(...)``.
    """

    name = ""
    saved = {}  # the attributes of the move's checkpoint state, with their types (bnpvi.moves.saved)
    requires: type | None = None
    """The protocol (:mod:`bnpvi.moves.protocols`) the allocation model must follow for this move."""

    def __init__(self, cfg):
        self.cfg = cfg

    def protocol(self, alloc) -> type:
        """What this move needs of ``alloc`` (``requires``, unless the move serves several kinds of model)."""
        return self.requires

    def active(self, lap: int) -> bool:
        """Whether the move runs in lap ``lap`` (counted from 1)."""
        if lap < self.cfg.start_lap:
            return False
        stop = getattr(self.cfg, "stop_lap", None)
        return stop is None or lap <= stop

    @abstractmethod
    def reset(self) -> None:
        """Forget the current lap's plan and tracked data."""

    @abstractmethod
    def pending(self, run) -> bool:
        """Whether the move would propose something at the next lap (a run does not converge while any does)."""

    def reserved(self) -> set[int]:
        """Ids of clusters this move keeps for proposals it carries into the next lap (none by default);
        every move plans around them."""
        return set()

    @abstractmethod
    def plan(self, run, rng: np.random.Generator, excluded: set[int]) -> set[int]:
        """Plan this lap's proposals (clusters by id); returns the ids it uses, which others must leave alone."""

    @abstractmethod
    def batch_plan(self, run, b: int):
        """What batch ``b``'s work must track for this move (positions, seeds), or None."""

    def ends_round(self, plan) -> bool:
        """Whether a round of memoized VI must end after the batch given ``plan``: the plans of the
        batches after it depend on what it tracks (none do by default)."""
        return False

    uses_batch_stats = False
    """Whether ``track`` takes the batch's summaries of this visit as ``stats=`` (made just before it)."""

    @abstractmethod
    def track(self, model, globals_, batch, log_lik: np.ndarray, local, plan):
        """Inside the per-batch work: the data this move needs from one batch (pure)."""

    @abstractmethod
    def collect(self, run, schedule, b: int, tracked) -> None:
        """Keep what batch ``b``'s work tracked (driver)."""

    def before_edit(self, run, edit: Edit) -> None:
        """Called just before ``edit`` is applied (the caches, ids and globals still the current ones): a move
        that keeps state per cluster carries it through (none by default)."""

    def after_batch(self, run, schedule, b: int) -> bool:
        """Decisions a move takes in the middle of a lap (none by default); returns whether it
        rewrote batch ``b``'s cache."""
        return False

    @abstractmethod
    def decide(self, run, schedule) -> None:
        """At the end of the lap: judge the proposals and apply the accepted ones (``run.apply``)."""

    def check_complete(self, run, tracked: dict, what: str) -> None:
        if len(tracked) != run.n_batches:
            raise RuntimeError(f"internal error: {what} tracked in {len(tracked)} of {run.n_batches} batches")
