"""The algorithm seam: an object the runner drives batch by batch and lap by lap.

Every algorithm visits the batches of a lap in an order fixed at the lap's start, a batch
or a round of batches at a time (their work runs in a :mod:`~bnpvi.learn.pool`), can stop
after any step and save its whole state (``state``/``load_state``) so
that a resumed run continues bit for bit, and reports the whole-data ELBO at the
end of each lap. It owns the global parameters (one ``Globals`` object), the
cluster ids and, for memoized VI, the memo caches; every change of the cluster set
(sorting, accepted moves) goes through :meth:`Algorithm.apply`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace

import numpy as np

from bnpvi.learn.cache import MemoryCaches
from bnpvi.learn.pool import LocalPool
from bnpvi.moves.base import Edit
from bnpvi.moves.judge import Proposal, Verdict, install, keeps, weigh
from bnpvi.stats import ClusterIds, SuffStats


@dataclass(frozen=True)
class LapResult:
    """What the runner records at the end of a lap."""

    lap: int
    elbo: float
    K: int
    counts: np.ndarray  # whole-data N_k after the lap's sort, largest first
    moves: dict = field(default_factory=dict)  # e.g. {"birth_tried": 3, "birth_accepted": 1, ...}


SORT_RETRY = 10
"""Laps before a rejected sort by size (``AllocModel.sort_needs_check``) is tried again unchanged."""


class Algorithm(ABC):
    """Base class: the batch schedule, lap bookkeeping, cluster edits and saved state.

    Parameters
    ----------
    model : bnpvi.model.Model
    store : BatchStore
    cfg : the ``alg`` config node
    rng : numpy.random.Generator
        The run's generator; its state is checkpointed by the runner.
    globals_ : Globals
        The initial global parameters.
    ids : ClusterIds
        Ids of the initial clusters.
    pool : LocalPool or DaskPool, optional
        Where the batches' work runs (default: in this process, one batch per step).
    """

    name = ""
    shuffles = True  # whether each lap visits the batches in a fresh random order
    objective = "elbo"  # what finish_lap returns; any other name is also a trace column of its own (em: log_posterior)
    starts_empty = False  # whether a run starts with no clusters (tfsvi opens them as it goes; init.K refused)
    uses_pool = True  # whether the batches' work runs in a pool (alg.workers, alg.scheduler)
    anneals_prior = True  # whether an annealed prior (``Model.at_lap``) applies in its first laps

    def __init__(self, model, store, cfg, rng: np.random.Generator, globals_, ids: ClusterIds, pool=None):
        self.configured = model  # the run's model, its prior as configured
        self.model = model  # the model in force this lap (``Model.at_lap``: an annealed prior in the first laps)
        self.store = store
        self.cfg = cfg
        self.rng = rng
        self.globals = globals_
        self.ids = ids
        self.pool = LocalPool(store) if pool is None else pool
        self.caches = MemoryCaches(0)
        self.warm: list = [None] * store.n_batches  # per batch: AllocModel.warm_state of its last local step
        self.n_batches = store.n_batches
        self.lap = 0  # number of completed laps
        self.pos = 0  # batches of the current lap done
        self.batches_seen = 0
        self.order = np.arange(self.n_batches)
        self.rejected_sort: tuple[int, np.ndarray] | None = None  # (lap, wanted id order) of the last rejected sort
        self.anneal_paused = 0  # laps in which the annealed prior's clock stood still (``anneal_step``)

    def step(self) -> LapResult | None:
        """Process the next batch (or round of batches); at the end of a lap return its LapResult."""
        if self.pos == 0:
            self.use_model(self.configured.at_lap(self.anneal_step))
            self.order = self.rng.permutation(self.n_batches) if self.shuffles else np.arange(self.n_batches)
            self.start_lap()
        done = self.visit_next()
        self.pos += done
        self.batches_seen += done
        if self.pos < self.n_batches:
            return None
        self.pos = 0
        self.lap += 1
        elbo, counts = self.finish_lap()
        moves = self.lap_moves()
        if moves.get("birth_accepted") and self.model is not self.configured \
                and self.anneal_paused < self.configured.anneal_laps:
            self.anneal_paused += 1
        return LapResult(self.lap, elbo, self.globals.K, counts, moves)

    @property
    def anneal_step(self) -> int:
        """The annealed prior's clock (``Model.at_lap``): the laps done, less those that accepted a birth
        while the prior was annealed (at most ``anneal_laps`` of them). The prior tightens only while the
        clusters are not growing, so clusters born from one cluster settle under the loose prior as an
        abundant start's do (docs/births.md), and it is settled by lap 2 ``anneal_laps`` at the latest."""
        return self.lap - self.anneal_paused

    def start_lap(self) -> None:
        """Hook run before the first batch of every lap."""

    @abstractmethod
    def visit_next(self) -> int:
        """Local steps (and whatever the algorithm does) on the batches from position ``pos`` of the lap's
        order on; returns how many it did (at least one, at most those left in the lap)."""

    def next_batches(self, count: int) -> list[int]:
        """The next ``count`` batches of the lap's order (fewer at the lap's end)."""
        return [int(b) for b in self.order[self.pos:self.pos + count]]

    @abstractmethod
    def finish_lap(self) -> tuple[float, np.ndarray]:
        """End-of-lap work; returns the whole-data ELBO and the sorted counts."""

    def lap_moves(self) -> dict:
        """Counts of moves tried and accepted in the lap just finished."""
        return {}

    def checkpointed(self) -> None:
        """Hook run after a checkpoint of :meth:`state` was written (memo: cache files no longer needed go)."""

    def close(self) -> None:
        """Release what the algorithm holds open (memo: its cache files)."""

    # ----------------------------------------------------------- the globals
    def use_model(self, model) -> bool:
        """Make ``model`` (the same allocation model and family, another prior: ``Model.at_lap``) the one in
        force: the globals keep their summaries and allocation parameters, the observation posterior is
        made under the new prior. Returns whether anything changed."""
        if model is self.model:
            return False
        self.model = model
        self.globals = model.restore(self.globals.stats, self.globals.alloc)
        return True

    def _of_globals(self, name: str, make):
        """``make()``, made once per globals and model (each move asks for the current ELBO and data terms)."""
        made = self.__dict__.get(name)
        if made is None or made[0] is not self.globals or made[1] is not self.model:
            made = (self.globals, self.model, make())
            self.__dict__[name] = made
        return made[2]

    def elbo(self) -> float:
        """The ELBO of the current globals at the summaries they were made from."""
        return self._of_globals("_elbo", lambda: self.model.elbo(self.globals.stats, self.globals))

    def data_terms(self) -> np.ndarray:
        """L_data,k* of every current cluster (``Model.data_terms``): the part of the current ELBO that a move
        which changes a few clusters keeps for all the others."""
        return self._of_globals("_data_terms", lambda: self.model.data_terms(self.globals.stats,
                                                                               post=self.globals.obs))

    def evaluate(self, stats: SuffStats, sources) -> tuple[float, object]:
        """ELBO and globals of candidate summaries whose clusters come from ``sources`` (see ``SuffStats.remap``)."""
        return self.model.evaluate(stats, self.model.alloc.warm_start(self.globals.alloc, sources))

    def warm_for(self, b: int):
        """Where batch b's local step starts: the ``AllocModel.warm_state`` of its previous visit (a topic
        model's document-topic counts N_d, Hughes 2016 thesis §5.3 "key differences"; O(documents x K)
        per batch), or None (the model's own start)."""
        warm = self.warm[b]
        return warm if warm is not None and warm.shape[1] == self.globals.K else None

    def apply(self, edit: Edit) -> None:
        """The one place where a change of the cluster set takes effect: caches, globals, ids, warm starts."""
        K = self.globals.K
        self.warm = [None if w is None or w.shape[1] != K else
                     (edit.warm(b, w) if edit.warm is not None else remap_columns(w, edit.sources))
                     for b, w in enumerate(self.warm)]
        self.caches.rewrite(lambda b, cache: edit.rewrite(b, cache.pad_to(K)))
        self.globals = edit.globals
        self.ids.remap(edit.sources)

    def _sort_rejected(self, wanted: np.ndarray) -> bool:
        """Whether the same sort (same ids in the same wanted order) was rejected less than
        ``SORT_RETRY`` laps ago; it is then not tried again yet (each try costs a global step)."""
        if self.rejected_sort is None:
            return False
        lap, order = self.rejected_sort
        return self.lap - lap < SORT_RETRY and np.array_equal(order, wanted)

    def sort_clusters(self) -> None:
        """Sort clusters by size, largest first (Hughes 2016 thesis §3.4.3; stable, so ties keep their order).

        Where the bound depends on the order in other ways (the HDP's surrogate,
        ``AllocModel.sort_needs_check``) the sorted order is kept only if the ELBO does not drop.
        """
        order = np.argsort(-self.globals.stats.N, kind="stable")
        if np.array_equal(order, np.arange(order.size)):
            return
        wanted = self.ids.uids[order]
        if self._sort_rejected(wanted):
            return
        sources = [[int(k)] for k in order]
        sorted_stats = self.globals.stats.reorder(order)
        globals_ = self.model.global_step(sorted_stats, self.model.alloc.warm_start(self.globals.alloc, sources))
        proposal = Proposal("sort", "", sources, lambda b, cache: cache.reorder(order), rule=keeps)
        if self.model.alloc.sort_needs_check:
            evaluated = replace(proposal, evaluated=(self.model.elbo(sorted_stats, globals_), globals_))
            verdict = weigh(self, evaluated, self.elbo())
        else:
            verdict = Verdict(0.0, True, globals_)
        if not verdict.accepted:
            self.rejected_sort = (self.lap, wanted)
            return
        install(self, None, proposal, verdict)

    # ------------------------------------------------------------- saved state
    def state(self) -> dict:
        """Everything needed to continue exactly: schedule, globals (saved whole), ids."""
        return {"lap": self.lap, "pos": self.pos, "batches_seen": self.batches_seen,
                "order": np.asarray(self.order, dtype=np.int64),
                "globals": {"stats": self.globals.stats.to_tree(), "alloc": dict(self.globals.alloc)},
                "ids": self.ids.state(), "warm": {str(b): w for b, w in enumerate(self.warm) if w is not None},
                "anneal_paused": np.int64(self.anneal_paused),
                "rejected_sort": {} if self.rejected_sort is None else {"lap": np.int64(self.rejected_sort[0]),
                                                                       "order": self.rejected_sort[1]}}

    def load_state(self, state: dict) -> None:
        self.lap = int(state["lap"])
        self.pos = int(state["pos"])
        self.batches_seen = int(state["batches_seen"])
        self.order = np.asarray(state["order"], dtype=np.int64)
        saved = state["globals"]
        self.anneal_paused = int(state.get("anneal_paused", 0))
        self.model = self.configured.at_lap(self.anneal_step)  # mid-lap: that lap's; at a lap's start: the same globals
        self.globals = self.model.restore(SuffStats.from_tree(saved["stats"]), saved["alloc"])
        self.ids = ClusterIds.from_state(state["ids"])
        warm = state.get("warm", {})
        self.warm = [np.asarray(warm[str(b)]) if str(b) in warm else None for b in range(self.n_batches)]
        saved = state.get("rejected_sort") or {}
        self.rejected_sort = (int(saved["lap"]), np.asarray(saved["order"], dtype=np.int64)) if saved else None


def remap_columns(table: np.ndarray, sources) -> np.ndarray:
    """Columns of a (groups, K) table for a new cluster set: column i is the sum of the columns ``sources[i]``
    (0 for a fresh cluster), as ``SuffStats.remap`` does for additive summaries."""
    out = np.zeros((table.shape[0], len(sources)))
    for i, s in enumerate(sources):
        if s:
            out[:, i] = table[:, list(s)].sum(axis=1)
    return out
