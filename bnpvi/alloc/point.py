"""Finite allocation models with MAP point estimates: the allocation face of EM (``alg=em``).

A finite mixture's weights π and a finite HMM's start and transition rows get Dirichlet
priors; EM replaces q(π) by a point mass at the mode of the conjugate posterior:

* on the simplex (soft EM, the default), π_k ∝ N_k + α_k − 1, which needs α_k ≥ 1;
* in the natural (softmax) coordinates (hard EM), π_k = (N_k + γ/K)/(N + γ) (Hughes 2016 thesis
  Eq. 2.77), the ``natural`` flag (:func:`bnpvi.special.dirichlet_mode`).

Each local step also returns the batch's share of the objective (summary ``loglik``, a total):

* soft: Σ_n ln Σ_k π_k p(x_n | φ̂_k) (a mixture) or Σ_d ln p(x_d | π̂, φ̂) (an HMM's forward pass),
  the log-likelihood of the parameters the step ran under;
* hard: Σ_n max_k [ln π_k + ln p(x_n | φ̂_k)] with z_n the argmax (thesis Eq. 2.75-2.76), or an HMM's
  Σ_d max_z ln p(x_d, z | π̂, φ̂) with z_d the Viterbi path: the data part of the objective J of thesis
  Eq. 2.74 at the new assignments.

Adding ln p(π̂) (:meth:`log_prior`) and the family's ln p(φ̂_k) gives the log posterior
(``bnpvi.learn.em.log_posterior``), which an EM step never lowers.
"""
from __future__ import annotations

import numpy as np

from bnpvi.alloc.base import Local, Params
from bnpvi.alloc.hmm import FiniteHMMAlloc, HMMAlloc
from bnpvi.alloc.mixture import MixtureAlloc
from bnpvi.data.batch import atom_weights
from bnpvi.errors import BnpviError
from bnpvi.special import dirichlet_log_density, dirichlet_mode
from bnpvi.stats import PER_CLUSTER, TOTAL, Responsibilities, SuffStats

LOGLIK = {"loglik": ((), TOTAL)}
"""The summary field of a batch's share of the objective."""


def _log(p: np.ndarray) -> np.ndarray:
    """ln p with ln 0 = −inf (a weight or transition the MAP set to 0) and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def small_parameter(K: int, problems) -> str | None:
    """A one-line error for the first Dirichlet parameter below 1 of ``problems`` ((key, total) pairs: each
    entry is total/K), or None."""
    for key, total in problems:
        if total / K < 1.0:
            return (f"alg=em needs every Dirichlet parameter >= 1 (else the MAP lies on the boundary or does not "
                    f"exist): {key}/K = {total:g}/{K} = {total / K:.3g}; set {key} >= {K}")
    return None


class PointMixture(MixtureAlloc):
    """A finite mixture (π ~ Dir(γ/K, ..., γ/K), ``FiniteMixAlloc``) with point weights; name "finite_mix".

    Parameters
    ----------
    gamma : float
        γ > 0 (config ``model.gamma``).
    natural : bool
        Modes in the natural coordinates (hard EM, thesis Eq. 2.77).
    hard : bool
        Hard assignments z_n = argmax_k (Bregman k-means, thesis Alg. 2.1) instead of responsibilities.
    """

    name = "finite_mix"
    finite = True
    moves = ()
    has_sparse_step = False

    def __init__(self, gamma: float, natural: bool = False, hard: bool = False):
        super().__init__(gamma)
        self.shift = 0.0 if natural else 1.0
        self.hard = bool(hard)

    def prior_problem(self, K: int) -> str | None:
        """Why the weights' prior has no MAP for K clusters (one line naming the key), or None."""
        return small_parameter(K, [("model.gamma", self.gamma)])

    def layout(self):
        return {"N": ((), PER_CLUSTER), **LOGLIK}

    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """π̂ = the mode of Dir(N + γ/K) (module docstring)."""
        N = np.maximum(stats.N, 0.0)
        return {"weights": dirichlet_mode(N, self.gamma / N.shape[0], self.shift)}

    def expected_log_pi(self, params: Params) -> np.ndarray:
        """ln π̂_k (the expectation under a point mass)."""
        return _log(params["weights"])

    def log_prior(self, params: Params) -> float:
        """ln Dir(π̂ | γ/K) in the coordinates of the mode."""
        weights = params["weights"]
        return float(dirichlet_log_density(weights, self.gamma / weights.shape[0], self.shift))

    def local_step(self, batch, log_lik: np.ndarray, params: Params) -> Local:
        """Responsibilities r_nk ∝ π̂_k p(x_n | φ̂_k) (the compiled softmax) or, hard, one-hot argmaxes."""
        log_pi = self.expected_log_pi(params)
        scores = log_lik + log_pi
        impossible = ~np.isfinite(scores.max(axis=1))
        if impossible.any():
            raise BnpviError(f"atom {int(np.flatnonzero(impossible)[0]) + getattr(batch, 'start', 0)} has probability 0 "
                             "under every cluster's point estimate (a prior parameter of 1 lets a probability reach 0; "
                             "raise it)")
        weights = atom_weights(batch)  # the objective counts atom n w_n times, as its summaries do
        if not self.hard:
            resp = Responsibilities.from_weights(log_lik, log_pi)
            loglik = np.sum(resp.log_norm) if weights is None else weights @ resp.log_norm
            return Local(resp, {"loglik": float(loglik)})
        labels = np.argmax(scores, axis=1)
        best = scores[np.arange(labels.size), labels]
        loglik = best.sum() if weights is None else weights @ best
        return Local(Responsibilities.one_hot(labels, log_pi.shape[0]), {"loglik": float(loglik)})

    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        return {"N": local.resp.counts(), "loglik": np.float64(local.tables["loglik"])}

    def elbo(self, stats: SuffStats, params: Params) -> float:
        raise BnpviError("alg=em has point estimates, not an ELBO (bnpvi.learn.em.log_posterior)")

    def export(self, params: Params) -> dict[str, np.ndarray]:
        return {"weights": np.asarray(params["weights"])}


class PointHMM(HMMAlloc):
    """A finite HMM (``FiniteHMMAlloc``) with point start and transition probabilities; name "finite_hmm".

    The local step is the compiled forward-backward of ``HMMAlloc`` with ln π̂ as its potentials
    (they sum to 1, so its log normaliser ln Z_d is the sequence's log-likelihood); hard EM (Viterbi
    training) takes each sequence's Viterbi path instead, a one-hot q(z_d) at the maximiser of
    ln p(x_d, z_d | π̂, φ̂), the hard objective's data part (thesis Eq. 2.74 with the HMM's p(z)).

    Parameters
    ----------
    base : FiniteHMMAlloc
    natural : bool
        Modes in the natural coordinates.
    hard : bool
        Viterbi paths instead of forward-backward marginals.
    """

    finite = True
    moves = ()

    def __init__(self, base: FiniteHMMAlloc, natural: bool = False, hard: bool = False):
        self.base = base
        self.name = base.name
        self.shift = 0.0 if natural else 1.0
        self.hard = bool(hard)

    def local_step(self, batch, log_lik: np.ndarray, params: Params) -> Local:
        """Forward-backward (soft) or the Viterbi paths with their counts and scores (hard)."""
        if not self.hard:
            return super().local_step(batch, log_lik, params)
        log_start, log_trans = self._potentials(params)
        log_lik = np.ascontiguousarray(log_lik, dtype=np.float64)
        seq_range = self._sequences(batch)
        path = self.decode(batch, log_lik, params)
        K, T = log_start.shape[0], path.shape[0]
        first = np.zeros(T, dtype=bool)
        first[seq_range[:-1]] = True
        steps = np.flatnonzero(~first)  # t with a predecessor z_{t-1} in the same sequence
        gain = log_lik[np.arange(T), path]
        gain[first] += log_start[path[first]]
        gain[steps] += log_trans[path[steps - 1], path[steps]]
        zeros = np.zeros(K)
        tables = {"start": np.bincount(path[first], minlength=K).astype(np.float64),
                  "trans": np.bincount(path[steps - 1] * K + path[steps], minlength=K * K).reshape(K, K).astype(np.float64),
                  "start_entropy": zeros, "trans_entropy": np.zeros((K, K)),
                  "log_norm": np.add.reduceat(gain, seq_range[:-1])}  # per sequence: max_z ln p(x_d, z | π̂, φ̂)
        return Local(Responsibilities.one_hot(path, K), tables)

    def prior_problem(self, K: int) -> str | None:
        """Why a row's prior has no MAP for K states (one line naming the key), or None (κ ≥ 0 only adds)."""
        return small_parameter(K, [("model.start_alpha", self.base.start_alpha), ("model.alpha", self.base.alpha)])

    def layout(self):
        return {**super().layout(), **LOGLIK}

    def _potentials(self, params: Params) -> tuple[np.ndarray, np.ndarray]:
        return (np.ascontiguousarray(_log(params["start_probs"])),
                np.ascontiguousarray(_log(params["trans_probs"])))

    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        return {**super().summarize(local), "loglik": np.float64(np.sum(local.tables["log_norm"]))}

    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """The modes of Dir(start + α_0/K) and of each row Dir(trans_j + α/K + κ e_j).

        Summaries without any start count (an initialisation's seeds, which know nothing of time; every
        E-step counts each sequence's start) give uniform probabilities instead: with zero counts the mode
        of a sticky row is all self-transition, under which a sequence could never change state.
        """
        start, trans = np.maximum(stats["start"], 0.0), np.maximum(stats["trans"], 0.0)
        K = start.shape[0]
        if not start.any():
            return {"start_probs": np.full(K, 1.0 / K), "trans_probs": np.full((K, K), 1.0 / K)}
        prior_start, prior_trans = self.base.prior(K)
        return {"start_probs": dirichlet_mode(start, prior_start, self.shift),
                "trans_probs": dirichlet_mode(trans, prior_trans, self.shift)}

    def log_prior(self, params: Params) -> float:
        """ln Dir(π̂_0 | α_0/K) + Σ_j ln Dir(π̂_j | α/K + κ e_j) in the coordinates of the mode."""
        start, trans = params["start_probs"], params["trans_probs"]
        prior_start, prior_trans = self.base.prior(start.shape[0])
        return float(dirichlet_log_density(start, prior_start, self.shift)
                     + np.sum(dirichlet_log_density(trans, prior_trans, self.shift)))

    def elbo(self, stats: SuffStats, params: Params) -> float:
        raise BnpviError("alg=em has point estimates, not an ELBO (bnpvi.learn.em.log_posterior)")

    def prior_terms(self, start, trans, params) -> float:
        raise BnpviError("alg=em has no moves")

    def quick_params(self, start, trans, params, sources) -> dict:
        raise BnpviError("alg=em has no moves")

    def export(self, params: Params) -> dict[str, np.ndarray]:
        return {"start_probs": np.asarray(params["start_probs"]), "trans_probs": np.asarray(params["trans_probs"])}
