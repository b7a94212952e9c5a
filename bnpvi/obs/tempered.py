"""An observation family at temperature T ≥ 1: deterministic annealing of the first laps of a run.

Tempering divides every data term of the ELBO by T,

    L_T = Σ_k L_data,k / T + L_alloc + H[q(z)],

so the local step becomes r_nk ∝ exp(E ln π_k + E ln p(x_n | φ_k) / T): each atom is shared more evenly
among clusters whose fit of it differs by less than about T nats, while the weights E ln π_k keep their
full say. Only the likelihood is tempered ("mass-constrained" deterministic annealing, Rose 1998, §III;
for variational Bayes, Katahira, Watanabe & Okada 2008): a cluster copied into two identical halves
then gains nothing, so births do not multiply clusters at a high temperature. The posterior q(φ_k) of
given summaries is the family's own (the factor 1/T multiplies the whole φ-dependent part of L_T), so
summaries, caches and checkpoints do not depend on T; T = 1 is the model itself.
"""
from __future__ import annotations

import numpy as np


class Tempered:
    """``base`` with every ELBO-scale quantity divided by ``temperature``; all else is ``base``'s own.

    Parameters
    ----------
    base : ObsFamily
        The family in force (possibly itself an annealed prior, ``ObsFamily.annealed``).
    temperature : float
        T > 1.
    """

    def __init__(self, base, temperature: float):
        self.base = base
        self.temperature = float(temperature)

    def __getattr__(self, name):
        if name == "base":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.base, name)

    def __getstate__(self):
        return {"base": self.base, "temperature": self.temperature}

    def __setstate__(self, state):
        self.base, self.temperature = state["base"], state["temperature"]

    def expected_log_lik(self, post, batch) -> np.ndarray:
        return self.base.expected_log_lik(post, batch) / self.temperature

    def argmax_clusters(self, post, batch, log_weights: np.ndarray) -> np.ndarray:
        """argmax_k log_weights_k + E ln p(x_n | φ_k) / T, as the base family's argmax of T · log_weights_k + E ln p."""
        return self.base.argmax_clusters(post, batch, self.temperature * np.asarray(log_weights))

    def log_marginal(self, N, stats, post=None) -> np.ndarray:
        return self.base.log_marginal(N, stats, post) / self.temperature

    def merged_log_marginal(self, N, stats, pairs) -> np.ndarray:
        return self.base.merged_log_marginal(N, stats, pairs) / self.temperature

    def reassign_gains(self, N, stats, batch, resp) -> np.ndarray:
        return self.base.reassign_gains(N, stats, batch, resp) / self.temperature

    def kl(self, post_q, post_p) -> np.ndarray:
        return self.base.kl(post_q, post_p) / self.temperature

    def elbo_data(self, N, stats, post_q=None) -> float:
        return self.base.elbo_data(N, stats, post_q) / self.temperature
