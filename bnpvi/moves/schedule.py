"""MoveSchedule: one lap of memoized VI with births, merges and deletes (Hughes 2016 thesis §4.4).

    lap start    each active move plans (merges first, then the delete, then births),
                 leaving alone the clusters an earlier move took
    each batch   the per-batch work tracks what each move planned; the schedule keeps
                 it, and a move may decide right after a batch if its rule says so
    lap end      merges (greedy, disjoint, exact), the delete, the births, and, when none of
                 them changed the clusters, the reassignments; then clusters
                 that are empty in every cache are dropped (never lowering the ELBO)

Every decision compares the exact whole-data ELBO of two valid states, so the ELBO
at the end of each lap never decreases. Plans are keyed by stable cluster ids.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from bnpvi.moves.base import MoveEvent, accepts_removal
from bnpvi.moves.birth import BirthMove
from bnpvi.moves.delete import DeleteMove
from bnpvi.moves.judge import Proposal, install, weigh
from bnpvi.moves.merge import MergeMove
from bnpvi.moves.protocols import check_offers
from bnpvi.moves.whole_merge import WholeMergeMove
from bnpvi.moves.reassign import ReassignMove
from bnpvi.moves.seq_birth import SequenceBirthMove
from bnpvi.moves.split import SplitMove
from bnpvi.moves.topic_birth import TopicBirthMove

MOVES = {cls.name: cls for cls in (SplitMove, MergeMove, DeleteMove, BirthMove, ReassignMove)}
"""Every move, in the order they plan and decide (:meth:`MoveSchedule.planning_order`)."""

MERGES = {"tracked": MergeMove, "whole": WholeMergeMove}
"""``AllocModel.merge_kind`` -> the merge move's class."""

BIRTHS = {"split": BirthMove, "interval": SequenceBirthMove, "topic": TopicBirthMove}
"""Birth moves by the allocation model's ``birth_kind``."""


class MoveSchedule:
    """Plans, tracks and decides the moves named in the ``moves`` config node.

    Parameters
    ----------
    cfg : the ``moves`` config node (one sub-node per move switched on)
    rng : numpy.random.Generator
        The run's generator: every random choice of the moves is drawn from it by the driver.
    birth_kind : str
        The allocation model's kind of birth (``AllocModel.birth_kind``).
    merge_kind : str
        The allocation model's kind of merge (``AllocModel.merge_kind``).
    """

    def __init__(self, cfg, rng: np.random.Generator, birth_kind: str = "split", merge_kind: str = "tracked"):
        classes = dict(MOVES, birth=BIRTHS[birth_kind], merge=MERGES[merge_kind])
        self.moves = [cls(cfg.get(name)) for name, cls in classes.items() if cfg.get(name) is not None]
        self.cfg, self.birth_kind, self.merge_kind = cfg, birth_kind, merge_kind
        self.rng = rng
        self.events: list[MoveEvent] = []
        self.lap = 0
        self.counts = self._zero_counts()
        self.changed: set[int] = set()  # ids of clusters an accepted move changed at this lap's end
        self.settled = False  # the latest lap met the convergence test and only waits for the moves

    def check_offers(self, alloc) -> None:
        """Refuse a move whose protocol ``alloc`` does not follow (:func:`~bnpvi.moves.protocols.check_offers`)."""
        for move in self.moves:
            check_offers(alloc, move)

    @staticmethod
    def _zero_counts() -> dict:
        return {f"{m}_{w}": 0 for m in MOVES for w in ("tried", "accepted")}

    def event(self, move: str, target: str, gain: float, accepted: bool, fresh: int = 0, kept: int = 0,
              exact: bool = True) -> None:
        """Log one proposal (moves.csv) and count it (trace.csv)."""
        self.counts[f"{move}_tried"] += 1
        self.counts[f"{move}_accepted"] += int(accepted)
        self.events.append(MoveEvent(self.lap, move, target, float(gain), bool(accepted), int(fresh), int(kept),
                                     bool(exact)))

    # ------------------------------------------------------------- the lap
    def start_lap(self, run) -> None:
        self.lap = run.lap + 1
        self.counts = self._zero_counts()
        excluded: set[int] = set().union(*(move.reserved() for move in self.moves if move.active(self.lap)))
        for move in self.planning_order():
            move.reset()
            # nothing is summarised before the first lap; some models need laps before a move means anything
            if run.lap > 0 and self.lap >= run.model.alloc.moves_start_lap and move.active(self.lap):
                excluded |= move.plan(run, self.rng, excluded)

    def planning_order(self) -> list:
        """The order in which the moves choose their clusters, each leaving out those chosen before it: the
        order of :data:`MOVES`, except that topic births choose first. A merge pair excludes both of its
        topics and a delete its target and receivers, so from one topic the merges tried (and rejected)
        after each birth kept every topic from the next birth for laps on end; births take at most
        ``max_per_lap`` topics from the others (docs/births.md)."""
        if self.birth_kind != "topic":
            return self.moves
        return sorted(self.moves, key=lambda move: move.name != "birth")

    def batch_plans(self, run, b: int) -> dict:
        """What batch ``b``'s work must track, per move (moves with nothing to track are left out)."""
        plans = {}
        for move in self.moves:
            plan = move.batch_plan(run, b)
            if plan is not None:
                plans[move.name] = plan
        return plans

    def tracker(self) -> "MoveSchedule":
        """A copy without state, for the per-batch work in other processes (``track`` depends only on each
        move's config and its plan)."""
        return MoveSchedule(self.cfg, None, self.birth_kind, self.merge_kind)

    def ends_round(self, plans: dict) -> bool:
        """Whether a round of memoized VI ends after the batch of ``plans`` (``Move.ends_round``)."""
        return any(move.ends_round(plans[move.name]) for move in self.moves if move.name in plans)

    def track(self, model, globals_, batch, log_lik, local, plans: dict, stats=None) -> dict:
        """Inside the per-batch work: each planned move's tracked data (``stats``: the batch's summaries of
        this visit, for the moves that use them, ``Move.uses_batch_stats``)."""
        return {move.name: move.track(model, globals_, batch, log_lik, local, plans[move.name],
                                      **({"stats": stats} if move.uses_batch_stats else {}))
                for move in self.moves if move.name in plans}

    def before_edit(self, run, edit) -> None:
        """Let every move carry its per-cluster state through ``edit`` (``Move.before_edit``)."""
        for move in self.moves:
            move.before_edit(run, edit)

    def after_batch(self, run, b: int, tracked: dict) -> bool:
        """Keep batch ``b``'s tracked data and take the mid-lap decisions; returns whether one of them
        rewrote the batch's cache (the driver then refreshes the batch, so that every move's
        tracked data describe its cache)."""
        for move in self.moves:
            if move.name in tracked:
                move.collect(run, self, b, tracked[move.name])
        rewritten = False
        for move in self.moves:
            rewritten |= bool(move.after_batch(run, self, b))
        return rewritten

    def end_lap(self, run) -> None:
        """Decide every move, in the planning order; a proposal whose clusters an earlier accepted move changed
        is dropped (its tracked data describe clusters that no longer exist). Topic births therefore decide
        first: any other accepted move would drop them all (each changes every document's q), and they cost
        several times the merges' and deletes' tracking (docs/births.md)."""
        self.changed = set()
        for move in self.planning_order():
            move.decide(run, self)
        self.drop_empty(run)

    def pending(self, run) -> list[str]:
        """The moves that would propose something at the next lap."""
        return [move.name for move in self.moves if move.pending(run)]

    @staticmethod
    def drop_empty(run) -> None:
        """Remove clusters with zero mass in every cache, if that does not lower the ELBO
        (beyond float noise). For a DP mixture the exact gain is ln(1 + N^>_k/γ) ≥ 0 (thesis §3.4.3).
        """
        K = run.globals.K
        used = np.zeros(K, dtype=bool)
        for cache in run.caches:  # one at a time (caches on disk)
            if cache is None:
                return
            used[:cache.K] |= cache.N != 0
        empty = np.flatnonzero(~used)
        if empty.size == 0 or empty.size == K:
            return
        drop = set(empty.tolist())
        sources = [[k] for k in range(K) if k not in drop]
        proposal = Proposal("drop", "", sources, lambda b, cache: cache.remove(empty),
                            stats=run.globals.stats.remove(empty), rule=accepts_removal)
        verdict = weigh(run, proposal, run.elbo())
        if verdict.accepted:
            install(run, None, proposal, verdict)

    # -------------------------------------------------------------- state
    def state(self) -> dict:
        events = {f: np.array([getattr(e, f) for e in self.events]) for f in ("lap", "gain", "accepted", "fresh", "kept",
                                                                       "exact")}
        for f in ("move", "target"):
            events[f] = "\n".join(getattr(e, f) for e in self.events)
        return {"lap": np.int64(self.lap), "settled": np.int64(self.settled), "counts": dict(self.counts),
                "events": events,
                "n_events": np.int64(len(self.events)), "moves": {m.name: m.state() for m in self.moves}}

    def load_state(self, state: dict) -> None:
        self.lap = int(state["lap"])
        self.settled = bool(int(state.get("settled", 0)))
        self.counts = {k: int(v) for k, v in state["counts"].items()}
        ev, n = state["events"], int(state["n_events"])
        text = {f: (ev[f].split("\n") if n else []) for f in ("move", "target")}
        self.events = [MoveEvent(int(ev["lap"][i]), text["move"][i], text["target"][i], float(ev["gain"][i]),
                                 bool(ev["accepted"][i]), int(ev["fresh"][i]), int(ev["kept"][i]),
                                 bool(ev["exact"][i])) for i in range(n)]
        for move in self.moves:
            move.load_state(state["moves"][move.name])

    def event_rows(self, start: int = 0) -> list[dict]:
        return [asdict(e) for e in self.events[start:]]
