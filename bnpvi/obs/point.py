"""An observation family seen through its MAP point estimates: the family face of EM (``alg=em``).

EM is the block coordinate ascent of VB with q(φ_k) restricted to a point mass at φ̂_k: the
"posterior" of summaries (N_k, S_k) becomes the mode of the conjugate posterior (the M-step,
Hughes 2016 thesis Eq. 2.61-2.65) and E_q log p(x_n | φ_k) becomes log p(x_n | φ̂_k). So a
``PointFamily`` answers the family seam with ``ObsFamily.map_point`` and ``ObsFamily.log_lik_at``,
and every consumer of that seam (the local step, decoding, assignments, the model file,
applying a run to new data) runs EM's model unchanged. The statistics, summaries and the
Bregman divergences of the k-means++ start are the wrapped family's own.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from bnpvi.errors import BnpviError
from bnpvi.obs.base import ObsFamily, Posterior


class PointFamily(ObsFamily):
    """``family`` with point estimates in place of posteriors.

    Parameters
    ----------
    family : ObsFamily
    natural : bool
        Take modes and prior densities in the natural coordinates (hard EM, Hughes 2016 thesis
        Eq. 2.64) where the family's natural form differs from the prior's own coordinates.

    Raises
    ------
    BnpviError
        The prior has no interior mode (``ObsFamily.map_prior_problem``; one line naming the key).
    """

    def __init__(self, family: ObsFamily, natural: bool = False):
        problem = family.map_prior_problem(natural)
        if problem:
            raise BnpviError(problem)
        self.family = family
        self.natural = bool(natural)
        self.name = family.name
        self.data_kinds = family.data_kinds
        self.needs_xprev = family.needs_xprev
        self.handles_missing, self.missing = family.handles_missing, family.missing
        self.D = family.D

    @classmethod
    def from_config(cls, D: int, moments=None, **options) -> "PointFamily":
        raise TypeError("a PointFamily wraps a family built from its own config (bnpvi.learn.em.point_model)")

    def stat_shapes(self) -> dict[str, tuple]:
        return self.family.stat_shapes()

    def summarize(self, batch, resp) -> dict[str, np.ndarray]:
        return self.family.summarize(batch, resp)

    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """The MAP point estimates φ̂_k of summaries (N, stats) (the M-step)."""
        return self.family.map_point(N, stats, self.natural)

    def expected_log_lik(self, post: Posterior, batch) -> np.ndarray:
        """log p(x_n | φ̂_k): the expectation under a point mass."""
        return self.family.log_lik_at(post, batch)

    def log_prior(self, point: Posterior) -> np.ndarray:
        """(K,) ln p(φ̂_k) in the coordinates the modes are taken in."""
        return self.family.log_prior_at(point, self.natural)

    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post=None) -> np.ndarray:
        raise BnpviError("alg=em has point estimates, not an ELBO: its objective is the log posterior "
                         "(bnpvi.learn.em.log_posterior)")

    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        raise BnpviError("alg=em has point estimates, not posteriors: there is no KL between them")

    def divergence(self, batch, centers: Posterior) -> np.ndarray:
        return self.family.divergence(batch, centers)

    def atom_divergences(self, batch):
        return self.family.atom_divergences(batch)

    def check_data(self, kind: str) -> str | None:
        return self.family.check_data(kind)

    def prior_params(self) -> dict[str, np.ndarray]:
        return self.family.prior_params()

    def cluster_moments(self, post: Posterior) -> dict[str, np.ndarray]:
        return self.family.point_moments(post)
