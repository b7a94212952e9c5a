"""Stochastic VB (Hughes 2016 thesis §3.5.2, Alg. 3.2): natural-gradient steps on rescaled batch summaries."""
from __future__ import annotations

from bnpvi.errors import BnpviError
from bnpvi.learn.base import Algorithm
from bnpvi.learn.work import BatchJob


class StochasticVB(Algorithm):
    """Stochastic VB cycling over the fixed batches in a random order each lap.

    Step t uses the rate ξ_t = (δ + t)^(−κ) (``alg.rate_delay`` δ ≥ 0,
    ``alg.rate_exponent`` κ ∈ (0.5, 1]) and interpolates the effective summaries,
    which are affine in the natural parameters (thesis Eq. 3.52):
    eff ← (1 − ξ_t) eff + ξ_t (N / N_b) · stats_b, with N and N_b the numbers of
    atoms of the data set and of the batch.

    The ELBO reported at the end of a lap is exact for the current globals: one
    extra pass computes every batch's responsibilities and evaluates the general
    ELBO (``Model.elbo`` at summaries the globals were not made from) without
    changing the globals; its batches run as many at once as the pool has slots,
    their summaries added in batch order. The steps themselves run one at a time.
    """

    name = "sovb"

    def __init__(self, model, store, cfg, rng, globals_, ids, pool=None):
        super().__init__(model, store, cfg, rng, globals_, ids, pool)
        self.delay = float(cfg.get("rate_delay"))
        self.exponent = float(cfg.get("rate_exponent"))
        if self.delay < 0:
            raise BnpviError(f"alg.rate_delay must be >= 0, got {self.delay}")
        if not 0.5 < self.exponent <= 1.0:
            raise BnpviError(f"alg.rate_exponent must be in (0.5, 1], got {self.exponent}")
        self.n_atoms = store.n_atoms
        self.t = 0

    def rate(self) -> float:
        """ξ_t = (δ + t)^(−κ) for step t = 1, 2, ..."""
        return (self.delay + self.t + 1.0) ** (-self.exponent)

    def visit_next(self) -> int:
        b = self.next_batches(1)[0]
        stats = self.pool.run(self.model, self.globals, [BatchJob(b)])[0].stats
        rate = self.rate()
        target = stats.scaled(self.n_atoms / float(stats["n_atoms"]))  # N / N_b
        eff = self.globals.stats.scaled(1.0 - rate) + target.scaled(rate)
        self.globals = self.model.global_step(eff, self.globals.alloc)
        self.t += 1
        return 1

    def finish_lap(self):
        self.sort_clusters()
        total = self.model.empty_stats(self.globals.K)
        slots = self.pool.slots
        for start in range(0, self.n_batches, slots):
            jobs = [BatchJob(b) for b in range(start, min(start + slots, self.n_batches))]
            for result in self.pool.run(self.model, self.globals, jobs):
                total = total + result.stats
        return self.model.elbo(total, self.globals), total.N.copy()

    def state(self) -> dict:
        return {**super().state(), "t": self.t}

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.t = int(state["t"])
