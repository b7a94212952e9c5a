"""Truncation-free stochastic VI (Wang & Blei 2012 (NIPS), Alg. 2): K grows from zero inside the stochastic sweep.

Each minibatch of ``alg.batch_docs`` documents (points) gets one sample of its locally collapsed
q(z) (:mod:`bnpvi.learn.tfsvi_local`), which may open new components; then every global parameter
takes a stochastic step towards the sample's rescaled summaries (Eq. 10-11):

    λ_k ← (1 − ξ) λ_k + ξ (η + (n/|S|) Σ_{i∈S} t(x_i, z_i)),   m_k ← (1 − ξ) m_k + ξ (n/|S|) s_k,

kept, as ``sovb`` keeps them, as effective summaries (the family's posterior is prior + effective
summaries) and running stick counts m (q(π̄_k) = Beta(1 + m_k, a + Σ_{l>k} m_l), ``tfsvi_local.sticks``),
with n the number of documents (points) of the training data, |S| the minibatch's and the rate
ξ_t = |S| / n_t, n_t the documents seen so far, at most n (Wang & Blei 2012 §3; after the first pass
ξ = |S|/n). New components enter at the prior (effective summaries and m equal to 0) just before the step.

Minibatches: a lap visits the store's batches in a random order; each batch is read whole (memory
O(batch)), its documents shuffled and cut into minibatches of ``alg.batch_docs`` (the last one of a
batch may be smaller). A checkpoint falls between two batches.

Housekeeping (left open by the paper; config keys, docs/tfsvi.md): every ``alg.prune_every`` documents,
components whose effective count N_k (documents for a DP mixture, tokens for a topic model) is below
``alg.prune_below`` are removed (Wang & Blei 2012 §3: every 20K documents, below 1 document / word);
after every minibatch (``alg.reorder=minibatch``) or only when pruning (``prune``) the sticks are
re-ordered by decreasing m_k (§2.3). Every change of the component set — growth, pruning, re-ordering —
is an ``Edit`` applied by :meth:`Algorithm.apply`, so the cluster ids follow it.

There is no objective that the steps increase (q(z) is a sample, not the ELBO's maximiser; supplement
S.1): the trace's ``elbo`` column stays empty and runs stop at ``alg.n_laps``; held-out scores
(``heldout_loglik``, every ``eval_every`` laps) are the measure of progress.
"""
from __future__ import annotations

import logging

import numpy as np

from bnpvi.errors import BnpviError, check_int, check_number
from bnpvi.learn.base import Algorithm
from bnpvi.learn.tfsvi_local import make_sampler
from bnpvi.model import Globals
from bnpvi.moves import Edit
from bnpvi.stats import SuffStats

log = logging.getLogger("bnpvi")

REORDER = ("minibatch", "prune")
AMPLIFY = ("corpus", "seen")


def keep_cache(b, cache):
    """tfsvi keeps no memo caches: an edit leaves them alone."""
    return cache


def grown(stats: SuffStats, K: int) -> SuffStats:
    """``stats`` with zero rows appended up to K clusters on every cluster axis: the effective summaries of
    new components, which start at the prior (fields that cannot be padded in general (``pad="none"``)
    are unused and 0 in tfsvi's effective summaries)."""
    extra = K - stats.K
    fields = {}
    for name, value in stats.fields.items():
        for axis in stats.specs[name].axes:
            shape = list(value.shape)
            shape[axis] = extra
            value = np.concatenate([value, np.zeros(shape)], axis=axis)
        fields[name] = value
    return SuffStats(fields, stats.specs)


class TruncationFreeSVI(Algorithm):
    """Truncation-free SVI from 0 components (module docstring)."""

    name = "tfsvi"
    starts_empty = True  # the runner starts it from no components (init.K is refused)
    anneals_prior = False  # the paper's sampler under the configured prior from the first minibatch
    uses_pool = False  # minibatches are sampled one after another in this process

    def __init__(self, model, store, cfg, rng, globals_, ids, pool=None):
        super().__init__(model, store, cfg, rng, globals_, ids, pool)
        self.batch_docs = check_int(cfg.get("batch_docs"), "alg.batch_docs", 1)
        self.prune_every = check_int(cfg.get("prune_every"), "alg.prune_every", 1)
        self.prune_below = check_number(cfg.get("prune_below"), "alg.prune_below", strict=False)
        self.reorder = str(cfg.get("reorder"))
        if self.reorder not in REORDER:
            raise BnpviError(f"alg.reorder must be one of {', '.join(REORDER)}, got {self.reorder!r}")
        check_int(cfg.get("max_new"), "alg.max_new", 1)
        if cfg.get("sweeps") is not None:
            check_int(cfg.get("sweeps"), "alg.sweeps", 0)
        if str(cfg.get("new_weight")) not in ("rest", "stick"):
            raise BnpviError(f"alg.new_weight must be rest or stick, got {cfg.get('new_weight')!r}")
        self.amplify = str(cfg.get("amplify"))
        if self.amplify not in AMPLIFY:
            raise BnpviError(f"alg.amplify must be one of {', '.join(AMPLIFY)}, got {self.amplify!r}")
        self.sampler = make_sampler(model, cfg)
        self.n_docs = store.n_atoms
        self.eff = globals_.stats  # effective summaries (``globals.stats`` between batches)
        self.m = np.zeros(globals_.K)  # running stick counts
        self.seen = 0  # documents (points) sampled so far
        self.since_prune = 0

    @staticmethod
    def empty_globals(model, cfg) -> Globals:
        """Globals with no components, where every run starts (``cfg``: the ``alg`` node)."""
        return model.restore(model.empty_stats(0), make_sampler(model, cfg).alloc_params(np.zeros(0)))

    def make_globals(self, eff: SuffStats, m: np.ndarray, posterior: bool = True) -> Globals:
        """Globals from effective summaries and stick counts (the family's posterior: prior + ``eff``); without
        ``posterior`` the family's posterior is left empty (globals between two minibatches of a batch, which
        only the sampler reads, through ``eff`` and ``m``: computing q(θ)'s expectations after every
        minibatch would cost O(K V) digammas for a handful of documents)."""
        alloc = self.sampler.alloc_params(m)
        return self.model.restore(eff, alloc) if posterior else Globals(eff, alloc, {})

    # -------------------------------------------------------------- the sweep
    def visit_next(self) -> int:
        b = self.next_batches(1)[0]
        batch = self.store.read_batch(b)
        order = self.rng.permutation(batch.n_atoms)
        for lo in range(0, order.shape[0], self.batch_docs):
            self.absorb(self.sampler.sample(self.eff, self.m, batch.take(order[lo:lo + self.batch_docs]), self.rng))
        self.globals = self.make_globals(self.eff, self.m)
        return 1

    def rate(self, size: int) -> float:
        """ξ_t = |S| / n_t, n_t the documents seen (this minibatch's included), at most n (Wang & Blei 2012 §3)."""
        return size / min(self.seen, self.n_docs)

    def absorb(self, sample) -> None:
        """The global step towards one minibatch's sample (module docstring), then pruning and re-ordering."""
        K = self.eff.K
        if sample.K > K:  # new components enter at the prior
            self._edit([[k] for k in range(K)] + [[] for _ in range(sample.K - K)],
                       grown(self.eff, sample.K), np.concatenate([self.m, np.zeros(sample.K - K)]))
        size = int(sample.stats["n_atoms"])
        self.seen += size
        self.since_prune += size
        rate = self.rate(size)
        scale = rate * (self.n_docs if self.amplify == "corpus" else min(self.seen, self.n_docs)) / size
        self.eff = self.eff.scaled(1.0 - rate) + sample.stats.scaled(scale)
        self.m = (1.0 - rate) * self.m + scale * sample.tables
        self.globals = self.make_globals(self.eff, self.m, posterior=False)
        if self.since_prune >= self.prune_every:
            self.since_prune = 0
            self.prune()
            self.sort()
        elif self.reorder == "minibatch":
            self.sort()

    def prune(self) -> None:
        """Remove the components whose effective count N_k is below ``alg.prune_below``."""
        keep = np.flatnonzero(self.eff.N >= self.prune_below)
        if keep.shape[0] < self.eff.K:
            self._keep(keep)

    def sort(self) -> None:
        """Sticks re-ordered by decreasing stick count m_k (stable; Wang & Blei 2012 §2.3)."""
        order = np.argsort(-self.m, kind="stable")
        if not np.array_equal(order, np.arange(order.shape[0])):
            self._keep(order)

    def _keep(self, keep: np.ndarray) -> None:
        """Components ``keep`` (in that order) and no others."""
        sources = [[int(k)] for k in keep]
        self._edit(sources, self.eff.remap(sources), self.m[keep])

    def _edit(self, sources, eff: SuffStats, m: np.ndarray) -> None:
        """A change of the component set (new component i made of ``sources[i]``, see ``SuffStats.remap``) to the
        effective summaries ``eff`` and stick counts ``m``, through the cluster-edit seam (ids follow)."""
        self.apply(Edit(sources, keep_cache, self.make_globals(eff, m, posterior=False)))
        self.eff, self.m = eff, m

    def finish_lap(self):
        return float("nan"), self.globals.stats.N.copy()

    def elbo(self) -> float:
        return float("nan")

    # ---------------------------------------------------------- saved state
    def state(self) -> dict:
        return {**super().state(), "m": self.m.copy(), "seen": np.int64(self.seen),
                "since_prune": np.int64(self.since_prune)}

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self.eff = self.globals.stats
        self.m = np.asarray(state["m"], dtype=np.float64).reshape(-1)
        self.seen = int(state["seen"])
        self.since_prune = int(state["since_prune"])

