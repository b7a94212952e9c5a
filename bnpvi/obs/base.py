"""The observation-family seam (DESIGN.md "ObsModel"; spec 01 §1.4-1.5).

A family object holds only the *prior* hyperparameters (τ̄, ν̄ in the spec's
generic notation). The variational posterior q(φ_k) is always the conjugate
posterior of some "effective" summaries (N_k, S_k): for full-data and memoized
VB those are the whole-data summaries, for stochastic VB a running average of
rescaled batch summaries (spec 01 §1.5 "interpolate in prior + effective stats
coordinates"). So a family maps summaries to a ``Posterior`` and the model
never stores natural parameters that could drift from their summaries.

The general ELBO data term for a q that is *not* the optimum for the given
summaries follows from the optimum one (exact identity for conjugate
exponential families):

    L_data,k(q, N, S) = L_data,k*(N, S) − KL(q_k ‖ q*_k(N, S))

so every family implements ``log_marginal`` (L_data,k*) and ``kl``, nothing else.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Mapping

import numpy as np

from bnpvi.data.batch import PointBatch
from bnpvi.data.moments import DataMoments


Posterior = Mapping[str, np.ndarray]
"""K-leading arrays of posterior parameters of one family (e.g. kappa, nu, m, B_chol)."""


class ObsFamily(ABC):
    """A conjugate exponential-family likelihood with its prior.

    Subclasses are constructed from explicit prior hyperparameters; ``from_config``
    fills unset ones from ``DataMoments`` as spec 01 "Hyperparameter defaults" recommends.
    """

    name: str = ""

    @classmethod
    @abstractmethod
    def from_config(cls, cfg: Mapping, D: int, moments: DataMoments) -> "ObsFamily":
        """Build the family from the ``obs`` config node (unset values -> data-driven defaults)."""

    @abstractmethod
    def stat_shapes(self) -> dict[str, tuple]:
        """Trailing shapes of the family's SuffStats fields, e.g. {'Sx': (D,), 'Sxx': (D, D)}."""

    @abstractmethod
    def summarize(self, batch: PointBatch, resp: np.ndarray) -> dict[str, np.ndarray]:
        """Soft statistics S_k = Σ_n r_nk s(x_n) of a batch; resp is (N, K) dense."""

    @abstractmethod
    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """Conjugate posterior parameters for summaries (N (K,), stats) (prior + stats)."""

    @abstractmethod
    def expected_log_lik(self, post: Posterior, batch: PointBatch) -> np.ndarray:
        """(N_atoms, K) matrix E_q log p(x_n | φ_k), including all constants."""

    @abstractmethod
    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> np.ndarray:
        """(K,) L_data,k*(N_k, S_k): the ELBO data term at the optimal q (spec 01 §1.5).

        Includes Σ_n r_nk h(x_n) and every constant, so that it equals the log
        marginal likelihood of the cluster's data for hard assignments. Empty
        clusters (N_k = 0, S_k = 0) give exactly 0.
        """

    @abstractmethod
    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """(K,) KL(q_k ‖ p_k) between two posteriors of this family."""

    @abstractmethod
    def divergence(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N_atoms, J) Bregman divergence from each smoothed atom to each center.

        The smoothed atom is the one-observation posterior's point estimate and a
        center is the point estimate of a posterior (spec 01 §1.5 "Bregman",
        §4.4); used by k-means++ seeding and births. Non-negative, finite.
        """

    def point_log_lik(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N_atoms, J) log p(x_n | point estimate of center j); Bregman k-means assignment."""
        return self.expected_log_lik(centers, batch)

    # ------------------------------------------------------------ derived
    def elbo_data(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post_q: Posterior | None = None) -> float:
        """L_data for summaries (N, S); at the optimum if post_q is None, else for q = post_q."""
        value = float(np.sum(self.log_marginal(N, stats)))
        if post_q is not None:
            value -= float(np.sum(self.kl(post_q, self.posterior(N, stats))))
        return value

    def prior_params(self) -> dict[str, np.ndarray]:
        """Hyperparameters as arrays (stored in checkpoints and the final model)."""
        return {}
