"""MixtureModel: an allocation model and an observation family joined by their summaries.

The global parameters are never stored as such: q(π) and q(φ) are the conjugate
posteriors of the *effective* summaries ``eff`` (whole-data summaries for full and
memoized VB, a running average for stochastic VB; spec 01 §1.5, §4). Setting the
globals from summaries is the global step; everything else is derived.
"""
from __future__ import annotations

import numpy as np

from bnpvi.stats import SuffStats
from bnpvi.stats.resp import Responsibilities


class MixtureModel:
    """Mixture of an allocation model (``bnpvi.alloc``) and an observation family (``bnpvi.obs``).

    Parameters
    ----------
    alloc : DPMixAlloc or FiniteMixAlloc
    obs : ObsFamily
    stats : SuffStats
        Effective summaries that define the initial global parameters.
    uids : array of int, optional
        Stable cluster identities (default 0..K-1); they follow every reordering.
    """

    def __init__(self, alloc, obs, stats: SuffStats, uids=None):
        self.alloc = alloc
        self.obs = obs
        self.uids = np.arange(stats.K, dtype=np.int64) if uids is None else np.asarray(uids, dtype=np.int64)
        self.next_uid = int(self.uids.max()) + 1 if self.uids.size else 0
        self.set_globals(stats)

    # ------------------------------------------------------------ global step
    def set_globals(self, stats: SuffStats) -> None:
        """Global step: q(π), q(φ) ← conjugate posteriors of ``stats`` (Eq. 3.41, 3.43)."""
        if stats.K != self.uids.shape[0]:
            raise ValueError(f"stats have K={stats.K} but the model has {self.uids.shape[0]} clusters")
        self.eff = stats
        N = np.maximum(stats.N, 0.0)
        self.obs_post = self.obs.posterior(N, stats.obs_fields())
        self.alloc_post = self.alloc.posterior(N)
        self.log_pi = self.alloc.expected_log_pi(self.alloc_post)

    @property
    def K(self) -> int:
        return self.eff.K

    def stat_shapes(self) -> dict[str, tuple]:
        return self.obs.stat_shapes()

    def empty_stats(self, K: int | None = None) -> SuffStats:
        return SuffStats.zeros(self.K if K is None else K, self.stat_shapes())

    def replace(self, stats: SuffStats, uids) -> None:
        """New clusters after a move: ids ``uids`` and globals from ``stats`` (one row per id)."""
        self.uids = np.asarray(uids, dtype=np.int64)
        self.set_globals(stats)

    def new_uids(self, count: int) -> np.ndarray:
        """``count`` fresh cluster ids (never reused within a run)."""
        ids = np.arange(self.next_uid, self.next_uid + count, dtype=np.int64)
        self.next_uid += count
        return ids

    def positions(self, uids) -> np.ndarray:
        """Current positions of the clusters with ids ``uids``."""
        where = {int(u): k for k, u in enumerate(self.uids)}
        return np.array([where[int(u)] for u in np.atleast_1d(uids)], dtype=np.intp)

    # ------------------------------------------------------------- local step
    def expected_log_lik(self, batch) -> np.ndarray:
        """(N, K) E_q log p(x_n | φ_k) under the current globals."""
        return self.obs.expected_log_lik(self.obs_post, batch)

    def local_step(self, batch) -> Responsibilities:
        """r_nk ∝ exp(E log p(x_n|φ_k) + E ln π_k) (spec 01 Eq. 3.47-3.49)."""
        return Responsibilities.from_weights(self.expected_log_lik(batch), self.log_pi)

    def summarize(self, batch, resp: Responsibilities) -> SuffStats:
        """SuffStats of a batch: N, H and the family's statistics."""
        dense = resp.to_dense()
        fields = {"N": resp.counts(), "H": resp.entropy}
        fields.update(self.obs.summarize(batch, dense))
        return SuffStats(fields, {"n_atoms": batch.n_atoms})

    # ------------------------------------------------------------------ ELBO
    def elbo(self, stats: SuffStats) -> float:
        """L*(N, S, H): the exact ELBO at the optimal globals for ``stats`` (spec 01 §3.3)."""
        N = np.maximum(stats.N, 0.0)
        return (
            float(np.sum(self.obs.log_marginal(N, stats.obs_fields())))
            + float(np.sum(stats.H))
            + self.alloc.log_marginal(N)
        )

    def elbo_general(self, stats: SuffStats) -> float:
        """ELBO of the *current* globals with responsibilities summarised by ``stats``.

        L = L*(stats) − KL(q_obs ‖ q*_obs(stats)) − KL(q_alloc ‖ q*_alloc(stats)); used by
        stochastic VB, whose globals are not the optimum for any data summary.
        """
        N = np.maximum(stats.N, 0.0)
        gap = float(np.sum(self.obs.kl(self.obs_post, self.obs.posterior(N, stats.obs_fields()))))
        gap += self.alloc.kl(self.alloc_post, self.alloc.posterior(N))
        return self.elbo(stats) - gap

    # ------------------------------------------------------------ reordering
    def size_order(self) -> np.ndarray:
        """Permutation sorting clusters by effective count, largest first (spec 01 §3.6).

        Stable, so ties keep their current order and a sorted model maps to the identity.
        """
        return np.argsort(-self.eff.N, kind="stable")

    def reorder(self, order) -> None:
        """Permute clusters: new cluster j is old cluster ``order[j]``."""
        order = np.asarray(order, dtype=np.intp)
        self.uids = self.uids[order]
        self.set_globals(self.eff.reorder(order))

    def expected_pi(self) -> np.ndarray:
        return self.alloc.expected_pi(self.alloc_post)
