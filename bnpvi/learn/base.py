"""The algorithm seam: an object the runner drives batch by batch and lap by lap.

Every algorithm visits the batches of a lap in an order fixed at the lap's start,
can stop after any batch and save its whole state (``state``/``load_state``) so
that a resumed run continues bit for bit, and reports the whole-data ELBO at the
end of each lap.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from bnpvi.stats import SuffStats


@dataclass(frozen=True)
class LapResult:
    """What the runner records at the end of a lap."""

    lap: int
    elbo: float
    K: int
    counts: np.ndarray  # whole-data N_k after the lap's sort, largest first
    moves: dict = field(default_factory=dict)  # e.g. {"birth_tried": 3, "birth_accepted": 1, ...}


class Algorithm(ABC):
    """Base class: the batch schedule, lap bookkeeping and saved state.

    Parameters
    ----------
    model : MixtureModel
    store : BatchStore
    cfg : the ``alg`` config node
    rng : numpy.random.Generator
        The run's generator; its state is checkpointed by the runner.
    """

    name = ""
    shuffles = True  # whether each lap visits the batches in a fresh random order

    def __init__(self, model, store, cfg, rng: np.random.Generator):
        self.model = model
        self.store = store
        self.cfg = cfg
        self.rng = rng
        self.n_batches = store.n_batches
        self.lap = 0  # number of completed laps
        self.pos = 0  # batches of the current lap done
        self.batches_seen = 0
        self.order = np.arange(self.n_batches)

    def step(self) -> LapResult | None:
        """Process the next batch; at the end of a lap return its LapResult."""
        if self.pos == 0:
            self.order = self.rng.permutation(self.n_batches) if self.shuffles else np.arange(self.n_batches)
            self.start_lap()
        b = int(self.order[self.pos])
        self.visit(b, self.store.read_batch(b))
        self.pos += 1
        self.batches_seen += 1
        if self.pos < self.n_batches:
            return None
        self.pos = 0
        self.lap += 1
        elbo, counts = self.finish_lap()
        return LapResult(self.lap, elbo, self.model.K, counts, self.lap_moves())

    def start_lap(self) -> None:
        """Hook run before the first batch of every lap."""

    @abstractmethod
    def visit(self, b: int, batch) -> None:
        """Local step (and whatever the algorithm does) on batch ``b``."""

    @abstractmethod
    def finish_lap(self) -> tuple[float, np.ndarray]:
        """End-of-lap work; returns the whole-data ELBO and the sorted counts."""

    def lap_moves(self) -> dict:
        """Counts of moves tried and accepted in the lap just finished."""
        return {}

    def sort_clusters(self, extra: list[SuffStats | None]) -> list[SuffStats | None]:
        """Sort the model by size (spec 01 §3.6) and permute ``extra`` stats the same way."""
        order = self.model.size_order()
        self.model.reorder(order)
        return [None if s is None else s.reorder(order) for s in extra]

    # ------------------------------------------------------------- saved state
    def state(self) -> dict:
        """Everything needed to continue exactly (the model is saved by the runner)."""
        return {"lap": self.lap, "pos": self.pos, "batches_seen": self.batches_seen,
                "order": np.asarray(self.order, dtype=np.int64)}

    def load_state(self, state: dict) -> None:
        self.lap = int(state["lap"])
        self.pos = int(state["pos"])
        self.batches_seen = int(state["batches_seen"])
        self.order = np.asarray(state["order"], dtype=np.int64)
