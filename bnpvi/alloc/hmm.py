"""The finite (sticky) hidden Markov model as an allocation model (Hughes 2016 thesis Ch. 6 with K fixed).

Sequence d of a batch has states z_d1 ~ Cat(π_0), z_dt | z_d,t−1 = j ~ Cat(π_j), and
each time step's observation depends on its state alone (the observation family
never sees time). With K states,

    π_0 ~ Dir(α_0/K, ..., α_0/K),    π_j ~ Dir(α/K, ..., α/K + κ, ..., α/K)   (κ on entry j),

the symmetric finite version of the sticky HDP-HMM's rows (thesis Eq. 6.5-6.7;
Fox et al. 2011 for the sticky κ). The mean-field family keeps q(z_d) a Markov
chain (Eq. 6.14), so the local step is forward-backward (compiled,
``bnpvi.kernels.hmm``) and the summaries are, per batch (§6.2.2):

    N_k = Σ_{d,t} r_dt(k),  start_k = Σ_d r_d1(k),  trans_jk = Σ_{d,t<T_d} s_dt(j,k),
    start_entropy_k = −Σ_d r_d1(k) ln r_d1(k),
    trans_entropy_jk = −Σ_{d,t<T_d} s_dt(j,k) ln(s_dt(j,k) / r_dt(j))      (Eq. 6.24-6.25).

Global step: θ_0 = start + α_0/K, θ_j = trans_j + α/K + κ e_j (Eq. 6.40 with the
finite prior). ELBO allocation terms (Eq. 6.26 with the finite prior, no top level):

    Σ_{j=0}^{K} [c_Dir(prior_j) − c_Dir(θ_j) + Σ_ℓ (M_jℓ + prior_jℓ − θ_jℓ) P_jℓ] + Σ start_entropy + Σ trans_entropy,

with P_jℓ = E ln π_jℓ; the middle sum vanishes at the optimal θ.
"""
from __future__ import annotations

from abc import abstractmethod

import numpy as np
from scipy.special import digamma

from bnpvi.alloc.base import AllocModel, Local, Params
from bnpvi.errors import BnpviError, check_number
from bnpvi.kernels import hmm as fb
from bnpvi.special import c_dir
from bnpvi.stats import ENTROPY, ENTROPY_TABLE, PER_CLUSTER, TABLE, TOTAL, Responsibilities, SuffStats


def expected_log_probs(theta: np.ndarray) -> np.ndarray:
    """P_jℓ = E ln π_jℓ = ψ(θ_jℓ) − ψ(Σ_m θ_jm) for Dirichlet rows θ_j (thesis Eq. 6.17)."""
    return digamma(theta) - digamma(theta.sum(axis=-1, keepdims=True))


class HMMAlloc(AllocModel):
    """What finite and HDP hidden Markov models share: forward-backward, the summaries, Viterbi.

    Subclasses give the Dirichlet parameters θ_0 (start) and θ_j (rows) in ``params``
    ("theta_start", "theta_trans"); a row may carry one more entry than there are states
    (the HDP's mass on inactive states), which enters only the digamma normaliser of
    P_jℓ = E ln π_jℓ, so the exponentiated weights are sub-stochastic and are never
    renormalised (Hughes 2016 thesis §6.3.3).
    """

    data_kinds = ("seq",)
    full_first_pass = True
    moves = ("birth", "merge", "delete")
    birth_kind = "interval"
    births_per_lap = 3  # a birth runs forward-backward over its whole batch several times (moves/seq_birth.py)
    whole_delete = True  # a state's removal changes every transition row: deletes re-run forward-backward

    def layout(self):
        return {"N": ((), PER_CLUSTER), "start": ((), PER_CLUSTER), "trans": ((), TABLE),
                "start_entropy": ((), ENTROPY), "trans_entropy": ((), ENTROPY_TABLE), "n_seqs": ((), TOTAL)}

    # -------------------------------------------------------------- local step
    @staticmethod
    def _sequences(batch) -> np.ndarray:
        seq_range = getattr(batch, "seq_range", None)
        if seq_range is None:
            raise BnpviError("an HMM needs sequences: convert the data with `bnpvi-data convert --sequences NAME` "
                             "(NPZ) or `--sequence-column NAME` (CSV)")
        return np.ascontiguousarray(seq_range, dtype=np.int64)

    def _potentials(self, params: Params) -> tuple[np.ndarray, np.ndarray]:
        K = params["theta_trans"].shape[0]
        log_start = np.ascontiguousarray(expected_log_probs(params["theta_start"])[:K])
        log_trans = np.ascontiguousarray(expected_log_probs(params["theta_trans"])[:, :K])
        return log_start, log_trans

    def local_step(self, batch, log_lik: np.ndarray, params: Params) -> Local:
        """Forward-backward on every sequence of the batch (thesis §6.3.3, Eq. 6.48); the scaled messages
        are kept for the merge terms."""
        log_start, log_trans = self._potentials(params)
        return self._forward_backward(batch, log_lik, log_start, log_trans, keep_messages=True)

    def _forward_backward(self, batch, log_lik, log_start, log_trans, keep_messages: bool = False) -> Local:
        seq_range = self._sequences(batch)
        out = fb.forward_backward(np.ascontiguousarray(log_lik, dtype=np.float64), seq_range,
                                  np.ascontiguousarray(log_start), np.ascontiguousarray(log_trans),
                                  keep_messages=keep_messages)
        tables = {"start": out.start_counts, "trans": out.trans_counts, "start_entropy": out.start_entropy,
                  "trans_entropy": out.trans_entropy, "log_norm": out.log_norm}
        if keep_messages:
            tables.update(messages=out, seq_range=seq_range, log_trans=log_trans)
        return Local(Responsibilities(out.resp, log_start.shape[0]), tables)

    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        t = local.tables
        return {"N": local.resp.counts(), "start": t["start"], "trans": t["trans"],
                "start_entropy": t["start_entropy"], "trans_entropy": t["trans_entropy"],
                "n_seqs": np.float64(t["log_norm"].shape[0])}

    # ------------------------------------------------------------------ ELBO
    def elbo(self, stats: SuffStats, params: Params) -> float:
        """The allocation terms (``prior_terms``) plus the entropy of q(z): Σ start_entropy + Σ trans_entropy."""
        total = self.prior_terms(np.maximum(stats["start"], 0.0), np.maximum(stats["trans"], 0.0), params)
        return total + float(np.sum(stats["start_entropy"])) + float(np.sum(stats["trans_entropy"]))

    @abstractmethod
    def prior_terms(self, start: np.ndarray, trans: np.ndarray, params: Params) -> float:
        """The allocation terms of the ELBO without the entropy, for counts M_0 = ``start``, M = ``trans``,
        exact for any parameters."""

    @abstractmethod
    def quick_params(self, start: np.ndarray, trans: np.ndarray, params: Params, sources) -> dict:
        """Parameters for these counts after the edit ``sources`` of ``params``' clusters, cheaply
        (the closed-form part of the global step; used to rank merge candidates)."""

    # ------------------------------------------------------------------ moves
    def merge_terms(self, local: Local, pairs: np.ndarray) -> dict[str, np.ndarray]:
        """Per pair (a, b): the merged state's start entropy, and its entropy-table row and column in
        the batch's numbering (``bnpvi.kernels.hmm.merge_pair_terms``; thesis §6.5.1)."""
        t = local.tables
        start, table = fb.merge_pair_terms(t["messages"], t["seq_range"], t["log_trans"], pairs)
        return {"start_entropy": start, "trans_entropy": table}

    def local_step_without(self, batch, log_lik: np.ndarray, params: Params, target: int,
                           local: Local | None = None) -> Local:
        """Forward-backward with state ``target`` removed (its row and column of the potentials dropped):
        the optimal q(z) over the other K − 1 states, exact for every sequence (a delete, thesis §6.5.3);
        ``local`` (the batch's current local step) is not needed."""
        log_start, log_trans = self._potentials(params)
        keep = np.delete(np.arange(log_start.shape[0]), target)
        return self._forward_backward(batch, log_lik[:, keep], log_start[keep], log_trans[np.ix_(keep, keep)])

    def merge_score(self, stats: SuffStats, params: Params, pairs: np.ndarray) -> np.ndarray:
        """ΔL of merging each pair without the entropy terms, at the merged counts' quick parameters.

        Unlike a mixture's, an HMM's entropy can rise under a merge, so this only ranks
        candidates (thesis §6.5.1); the decision uses the exact or lower-bound ELBO.
        """
        names = ("N", "start", "trans")  # the linear fields the allocation terms need
        counts = SuffStats({n: np.maximum(stats[n], 0.0) for n in names}, {n: stats.specs[n] for n in names})
        K = counts.K
        base = self.prior_terms(counts["start"], counts["trans"],
                                self.quick_params(counts["start"], counts["trans"], params, [[k] for k in range(K)]))
        scores = np.empty(len(pairs))
        for m, (a, b) in enumerate(np.asarray(pairs, dtype=np.intp)):
            sources = [[k] for k in range(K) if k != b]
            sources[a] = [a, b]
            merged = counts.merge(a, b)
            scores[m] = self.prior_terms(merged["start"], merged["trans"],
                                         self.quick_params(merged["start"], merged["trans"], params, sources)) - base
        return scores

    def decode(self, batch, log_lik: np.ndarray, params: Params) -> np.ndarray:
        """The Viterbi path of every sequence (the mode of q*(z_d); thesis §6.6, Stephenson 2015 §7.1)."""
        log_start, log_trans = self._potentials(params)
        return fb.viterbi(np.ascontiguousarray(log_lik, dtype=np.float64), self._sequences(batch),
                          log_start, log_trans)

    def path_log_prob(self, batch, log_lik: np.ndarray, params: Params, path: np.ndarray) -> float:
        """Σ_d [E ln π_0,z_1 + Σ_t E ln π_{z_t−1 z_t} + Σ_t E ln p(x_t | φ_z_t)] of the state paths ``path`` (positions
        0..K−1, one per step of every sequence of ``batch``): what the Viterbi path maximises (:meth:`decode`)."""
        log_start, log_trans = self._potentials(params)
        seq_range = self._sequences(batch)
        later = np.ones(path.shape[0], dtype=bool)
        later[seq_range[:-1]] = False
        steps = np.flatnonzero(later)
        return float(log_start[path[seq_range[:-1]]].sum() + log_trans[path[steps - 1], path[steps]].sum()
                     + log_lik[np.arange(path.shape[0]), path].sum())


class FiniteHMMAlloc(HMMAlloc):
    """Finite sticky HMM with symmetric Dirichlet rows (see the module docstring); name "finite_hmm".

    Parameters
    ----------
    alpha : float
        α > 0, total concentration of each transition row (each entry gets α/K).
    start_alpha : float
        α_0 > 0, total concentration of the start distribution.
    sticky_kappa : float
        κ ≥ 0, extra prior mass on each row's self-transition (0: not sticky).
        (Unrelated to the Gaussian families' ``obs.kappa``.)
    """

    name = "finite_hmm"
    finite = True

    def __init__(self, alpha: float = 1.0, start_alpha: float = 1.0, sticky_kappa: float = 0.0):
        self.alpha = check_number(alpha, "model.alpha")
        self.start_alpha = check_number(start_alpha, "model.start_alpha")
        self.sticky_kappa = check_number(sticky_kappa, "model.sticky_kappa", strict=False)

    def prior(self, K: int) -> tuple[np.ndarray, np.ndarray]:
        """Dirichlet parameters of the start row (K,) and the transition rows (K, K)."""
        start = np.full(K, self.start_alpha / K)
        trans = np.full((K, K), self.alpha / K) + self.sticky_kappa * np.eye(K)
        return start, trans

    # ------------------------------------------------------------ global step
    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """θ_0 = start + α_0/K, θ_j = trans_j + α/K + κ e_j (thesis Eq. 6.40, finite prior)."""
        return self.quick_params(np.maximum(stats["start"], 0.0), np.maximum(stats["trans"], 0.0), None, None)

    def quick_params(self, start: np.ndarray, trans: np.ndarray, params, sources) -> dict:
        """The global step from start and transition counts (exact here: closed form)."""
        prior_start, prior_trans = self.prior(start.shape[0])
        return {"theta_start": start + prior_start, "theta_trans": trans + prior_trans}

    def prior_terms(self, start: np.ndarray, trans: np.ndarray, params: Params) -> float:
        """The allocation terms without the entropy, for counts M_0 = ``start``, M = ``trans``."""
        prior_start, prior_trans = self.prior(start.shape[0])
        total = 0.0
        for counts, prior, theta in ((start, prior_start, params["theta_start"]),
                                     (trans, prior_trans, params["theta_trans"])):
            slack = (counts + prior - theta) * expected_log_probs(theta)
            total += float(np.sum(c_dir(prior) - c_dir(theta))) + float(np.sum(slack))
        return total

    def export(self, params: Params) -> dict[str, np.ndarray]:
        """E[π_0] (start probabilities) and E[π_j] (transition matrix, rows j)."""
        start, trans = params["theta_start"], params["theta_trans"]
        return {"start_probs": start / start.sum(), "trans_probs": trans / trans.sum(axis=1, keepdims=True)}
