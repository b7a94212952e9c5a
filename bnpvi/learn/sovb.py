"""Stochastic VB (spec 01 §4.2, Alg. 3.2): natural-gradient steps on rescaled batch summaries."""
from __future__ import annotations

from bnpvi.errors import BnpviError
from bnpvi.learn.base import Algorithm


class StochasticVB(Algorithm):
    """Stochastic VB cycling over the fixed batches in a random order each lap.

    Step t uses the rate ξ_t = (δ + t)^(−κ) (``alg.rate_delay`` δ ≥ 0,
    ``alg.rate_exponent`` κ ∈ (0.5, 1]) and interpolates the effective summaries,
    which are affine in the natural parameters (spec 01 §1.5, Eq. 3.52):
    eff ← (1 − ξ_t) eff + ξ_t (N / N_b) · stats_b.

    The ELBO reported at the end of a lap is exact for the current globals: one
    extra pass computes every batch's responsibilities and evaluates the general
    ELBO (``MixtureModel.elbo_general``) without changing the globals.
    """

    name = "sovb"

    def __init__(self, model, store, cfg, rng):
        super().__init__(model, store, cfg, rng)
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

    def visit(self, b, batch) -> None:
        stats = self.model.summarize(batch, self.model.local_step(batch))
        rate = self.rate()
        target = stats.scaled(self.n_atoms / batch.n_atoms)
        self.model.set_globals(self.model.eff.scaled(1.0 - rate) + target.scaled(rate))
        self.t += 1

    def finish_lap(self):
        self.sort_clusters([])
        total = self.model.empty_stats()
        for b in range(self.n_batches):
            batch = self.store.read_batch(b)
            total = total + self.model.summarize(batch, self.model.local_step(batch))
        return self.model.elbo_general(total), total.N.copy()

    def state(self) -> dict:
        return {**super().state(), "t": self.t}

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.t = int(state["t"])
