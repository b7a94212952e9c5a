"""The work done on one batch (:class:`BatchJob`): a pure function of (model, globals, move plans, batch).

Local step, summaries, and whatever the planned moves track. It changes nothing;
the driver alone applies its result to the memo caches and the aggregate, so the
same call could run in another process on a batch that process read itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bnpvi.stats import SuffStats


@dataclass(frozen=True)
class BatchJob:
    """One batch's work: the batch, what the moves track in it (``MoveSchedule.batch_plans``) and where its
    local step starts (``Algorithm.warm_for``); with ``piece`` = (i, n), only part i of the batch cut into n
    (``BatchStore.read_batch``)."""

    b: int
    plans: dict = field(default_factory=dict)
    warm: object = None
    piece: tuple[int, int] | None = None


@dataclass(frozen=True, eq=False)
class BatchResult:
    """Summaries of one batch under the given globals, and the moves' tracked data (by move name)."""

    stats: SuffStats
    tracked: dict = field(default_factory=dict)
    warm: object = None  # AllocModel.warm_state of the local step


def process_batch(model, globals_, batch, plans: dict | None = None, schedule=None, warm=None) -> BatchResult:
    """Local step and summaries of ``batch`` under ``globals_``; moves in ``plans`` track their data.

    Parameters
    ----------
    model : bnpvi.model.Model
    globals_ : bnpvi.model.Globals
    batch : a batch of the store
    plans : dict, optional
        Per-move plans for this batch (``MoveSchedule.batch_plans``); empty or None for none.
    schedule : MoveSchedule, optional
        Dispatches ``plans`` to the moves' ``track`` (needed when ``plans`` is not empty).
    warm : ndarray, optional
        Where the local step starts (``AllocModel.warm_state`` of the batch's previous visit).
    """
    pairs = plans.get("merge") if plans and model.alloc.pairs_in_local_step else None
    log_lik, local = model.local_step(batch, globals_, warm=warm, pairs=pairs)
    stats = model.summarize(batch, local)
    tracked = schedule.track(model, globals_, batch, log_lik, local, plans, stats) if plans else {}
    return BatchResult(stats, tracked, model.alloc.warm_state(local))
