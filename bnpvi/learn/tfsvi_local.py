"""The local step of truncation-free stochastic VI: one collapsed Gibbs sample of a minibatch.

Wang & Blei 2012 (NIPS) §2.1-2.2, Alg. 2: q(z) of a minibatch is locally collapsed — the current
q(θ) and q(π̄) play the prior of a Gibbs sampler over the minibatch's assignments — and one sample
of it stands for q̂(z) (supplement S.2.1, footnote 3). The sampler may open components that the
global q does not have yet; those start at the prior. Every random number comes from the run's
generator (its state is checkpointed), and the sweeps themselves are compiled
(:mod:`bnpvi.kernels.gibbs`).

The global sticks are kept as running stick counts m_k (documents per component for a DP mixture,
Antoniak table counts per topic for the HDP): q(π̄_k) = Beta(u_k, v_k) with u_k = 1 + m_k and
v_k = a + Σ_{l>k} m_l, which reproduces the paper's stick updates exactly (:func:`sticks`).

A sampler returns a :class:`MinibatchSample`: the summaries of the sampled assignments in the
model's own layout (for K' ≥ K components, the global ones first) and the stick counts.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from bnpvi.alloc.mixture import DPMixAlloc, counts_after
from bnpvi.alloc.topic import HDPTopicAlloc
from bnpvi.errors import BnpviError
from bnpvi.kernels import gibbs
from bnpvi.stats import SuffStats

log = logging.getLogger("bnpvi")


@dataclass(frozen=True, eq=False)
class MinibatchSample:
    """One Gibbs sample of a minibatch, summarised.

    Attributes
    ----------
    stats : SuffStats
        Summaries of the sampled (hard) assignments over K' components, the K global ones first
        (fields other than N, the family's statistics and the atom/document totals are 0).
    tables : (K',) ndarray
        The stick counts of the sample: documents per component (DP), Antoniak table counts (HDP).
    """

    stats: SuffStats
    tables: np.ndarray

    @property
    def K(self) -> int:
        return self.stats.K


def sticks(m: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    """q(π̄_k) = Beta(u_k, v_k) of running stick counts m: u_k = 1 + m_k, v_k = a + Σ_{l>k} m_l (the stick updates
    of Wang & Blei 2012 §2.3 and supplement S.2.1 kept in this form: averaging m averages u and v)."""
    m = np.maximum(np.asarray(m, dtype=np.float64), 0.0)
    if m.size == 0:
        return np.zeros(0), np.zeros(0)
    return 1.0 + m, a + counts_after(m)


def _local_words(word_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The minibatch's distinct words and every entry's index among them."""
    words, loc = np.unique(np.asarray(word_ids, dtype=np.int64), return_inverse=True)
    return words, np.ascontiguousarray(loc, dtype=np.int64)


def _topic_words(obs, eff: SuffStats) -> np.ndarray:
    """λ_kw = η + S_kw of q(θ_k) from the effective word counts (the multinomial family's posterior, without
    its E ln θ, which the sampler does not need)."""
    return obs.lam + np.maximum(eff["S"], 0.0)


def _word_rows(lam: np.ndarray, words: np.ndarray, eta: float, V: int, Kcap: int) -> tuple[np.ndarray, np.ndarray]:
    """λ_kw at the minibatch's words and Σ_w λ_kw for Kcap rows: the K global ones, then the prior η."""
    K = lam.shape[0]
    local = np.full((Kcap, words.shape[0]), eta)
    local[:K] = lam[:, words]
    total = np.full(Kcap, V * eta)
    total[:K] = lam.sum(axis=1)
    return local, total


class DocMixtureSampler:
    """DP mixture of multinomials, one component per document (Wang & Blei 2012 §2.3).

    Parameters
    ----------
    model : Model with a ``dp_mix`` allocation and the ``mult`` family
    sweeps : int
        Gibbs sweeps after the sequential first pass (which places the documents one at a time given
        those already placed).
    max_new : int
        At most this many components opened per minibatch (the sampler's capacity).
    new_weight : str
        "rest": a new component's weight is the whole stick mass beyond the current ones,
        Π_l v_l/(u_l + v_l) (Wang & Blei 2012 §2.3); "stick": that times E[π̄] = 1/(1 + a) of the prior stick.
    """

    def __init__(self, model, sweeps: int, max_new: int, new_weight: str):
        self.model, self.sweeps, self.max_new = model, sweeps, max_new
        self.a = float(model.alloc.gamma)
        self.log_new_factor = 0.0 if new_weight == "rest" else -float(np.log1p(self.a))

    def alloc_params(self, m: np.ndarray) -> dict:
        u, v = sticks(m, self.a)
        return {"eta1": u, "eta0": v}

    def sample(self, eff: SuffStats, m: np.ndarray, batch, rng: np.random.Generator) -> MinibatchSample:
        """One sample of the minibatch ``batch`` given the effective summaries ``eff`` and stick counts ``m``."""
        obs, K = self.model.obs, eff.K
        words, word_loc = _local_words(batch.word_ids)
        n = batch.n_atoms
        Kcap = K + min(self.max_new, n)
        lam, lam_total = _word_rows(_topic_words(obs, eff), words, obs.lam, obs.V, Kcap)
        u, v = sticks(m, self.a)
        stick_u, stick_v = np.ones(Kcap), np.full(Kcap, self.a)
        stick_u[:K], stick_v[:K] = u, v
        table, table_total, docs_in = np.zeros((Kcap, words.shape[0])), np.zeros(Kcap), np.zeros(Kcap)
        z = np.full(n, -1, dtype=np.int64)
        counts = np.ascontiguousarray(batch.word_counts, dtype=np.float64)
        doc_range = np.ascontiguousarray(batch.doc_range, dtype=np.int64)
        T = K
        for _ in range(1 + self.sweeps):
            T = gibbs.dp_doc_sweep(word_loc, counts, doc_range, lam, lam_total, table, table_total, docs_in,
                                   stick_u, stick_v, z, rng.random(n), T, K, obs.lam, obs.V, self.log_new_factor)
        stats = self.model.hard_stats(batch, z, T)
        return MinibatchSample(stats, stats.N.copy())


class PointMixtureSampler(DocMixtureSampler):
    """DP mixture of points, one component per point (Wang & Blei 2012 §2.2), for the families with a
    closed-form posterior predictive (``gibbs.FAMILY_CODES``: bern, diag_gauss, zm_gauss, gauss).

    The sampler's components start from the global effective statistics (the family's posterior is its
    prior plus them) and gain the minibatch's points; parameters as :class:`DocMixtureSampler`.
    """

    VAGUE_KAPPA = 0.01

    def __init__(self, model, sweeps: int, max_new: int, new_weight: str):
        super().__init__(model, sweeps, max_new, new_weight)
        if model.obs.missing:
            raise BnpviError("alg=tfsvi cannot use data with missing (NaN) entries: its sampler's predictive is of "
                             "whole points; use alg=memo, vb or sovb, which marginalise them")
        kappa = getattr(model.obs, "kappa", None)
        if kappa is not None and kappa < self.VAGUE_KAPPA:
            log.warning("alg=tfsvi with obs.kappa=%g: a new component's predictive pays (D/2) ln(1/kappa) nats for "
                        "its vague mean, so the sampler rarely opens one; obs.kappa=1 suits it (docs/tfsvi.md)",
                        kappa)

    def _prior(self) -> tuple:
        """(κ̄, ν̄, B̄, λ̄₁, λ̄₀) of the family, unused entries 0 (diag_gauss: B̄ = diag(b̄))."""
        obs = self.model.obs
        D = obs.D
        if obs.name == "bern":
            return 0.0, 0.0, np.zeros((D, D)), obs.lam1, obs.lam0
        B = np.diag(obs.b) if obs.name == "diag_gauss" else np.asarray(obs.B, dtype=np.float64)
        return float(getattr(obs, "kappa", 0.0)), float(obs.nu), np.ascontiguousarray(B), 0.0, 0.0

    def _points(self, batch) -> np.ndarray:
        """The minibatch as the family's statistics see it (checked by the family): relative to the prior mean for
        gauss and diag_gauss."""
        obs = self.model.obs
        Y = obs._binary(batch)[0] if obs.name == "bern" else obs._data(batch) if obs.name == "zm_gauss" else \
            obs._relative(batch)
        return np.ascontiguousarray(Y, dtype=np.float64)

    def sample(self, eff: SuffStats, m: np.ndarray, batch, rng: np.random.Generator) -> MinibatchSample:
        obs, K = self.model.obs, eff.K
        Y = self._points(batch)
        n, D = Y.shape
        Kcap = K + min(self.max_new, n)
        N = np.zeros(Kcap + 1)
        Sx, Sxx = np.zeros((Kcap + 1, D)), np.zeros((Kcap + 1, D, D))
        N[:K] = np.maximum(eff.N, 0.0)
        if obs.name == "bern":
            Sx[:K] = eff["S"]
        else:
            if "Sx" in eff:
                Sx[:K] = eff["Sx"]
            if obs.name == "diag_gauss":
                Sxx[:K, np.arange(D), np.arange(D)] = eff["Sxx"]
            else:
                Sxx[:K] = np.tril(eff["Sxx"])
        u, v = sticks(m, self.a)
        stick_u, stick_v = np.ones(Kcap), np.full(Kcap, self.a)
        stick_u[:K], stick_v[:K] = u, v
        docs_in = np.zeros(Kcap)
        z = np.full(n, -1, dtype=np.int64)
        T = K
        for _ in range(1 + self.sweeps):
            T = gibbs.dp_point_sweep(obs.name, Y, N, Sx, Sxx, *self._prior(), docs_in, stick_u, stick_v, z,
                                     rng.random(n), T, K, self.log_new_factor)
        stats = self.model.hard_stats(batch, z, T)
        return MinibatchSample(stats, stats.N.copy())


class TopicSampler:
    """HDP topic model, one topic per token (Wang & Blei 2012 supplement S.2.2).

    The sticks are sampled with the tokens: π̄_k ~ Beta(u_k + s_k, v_k + s_>k) from the minibatch's
    table counts s (the supplement prints the second parameter as "v_k − a + ...": with the Beta
    kernel's exponent v − 1 it is v_k + s_>k), the sticks of topics beyond the sample's from the prior.
    A sweep is: table counts, sticks, then every token; the first pass places the tokens one at a time
    given those already placed, and the final sample's table counts go to the global step.

    Parameters
    ----------
    model : Model with the ``hdp_topic`` allocation and the ``mult`` family (a = ``model.gamma``,
        b = ``model.alpha``, η = ``obs.lam``)
    sweeps, max_new : as :class:`DocMixtureSampler`
    """

    def __init__(self, model, sweeps: int, max_new: int):
        self.model, self.sweeps, self.max_new = model, sweeps, max_new
        self.a, self.b = float(model.alloc.gamma), float(model.alloc.alpha)

    def alloc_params(self, m: np.ndarray) -> dict:
        u, v = sticks(m, self.a)
        return {"rho": u / (u + v), "omega": u + v}

    def _draw_sticks(self, u: np.ndarray, v: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """π_k = π̄_k Π_{l<k}(1 − π̄_l) with π̄_k ~ Beta(u_k, v_k), and the mass beyond them."""
        bars = rng.beta(u, v) if u.size else np.zeros(0)
        rest = np.concatenate([[1.0], np.cumprod(1.0 - bars)])
        return bars * rest[:-1], float(rest[-1])

    def sample(self, eff: SuffStats, m: np.ndarray, batch, rng: np.random.Generator) -> MinibatchSample:
        obs, K = self.model.obs, eff.K
        words, word_loc = _local_words(batch.word_ids)
        reps = np.asarray(batch.word_counts, dtype=np.int64)
        if np.any(reps != batch.word_counts):
            raise BnpviError("alg=tfsvi samples every token, so word counts must be whole numbers")
        n_docs = batch.n_atoms
        entry_doc = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(batch.doc_range))
        tok_word = np.ascontiguousarray(np.repeat(word_loc, reps))
        tok_doc = np.ascontiguousarray(np.repeat(entry_doc, reps))
        n_tok = tok_word.shape[0]
        Kcap = K + self.max_new
        lam, lam_total = _word_rows(_topic_words(obs, eff), words, obs.lam, obs.V, Kcap)
        u0, v0 = sticks(m, self.a)
        pi = np.zeros(Kcap)
        pi[:K], rest = self._draw_sticks(u0, v0, rng)
        z = np.full(n_tok, -1, dtype=np.int64)
        doc_topic, topic_word, topic_total = np.zeros((n_docs, Kcap)), np.zeros((Kcap, words.shape[0])), np.zeros(Kcap)
        T = K
        for sweep in range(1 + self.sweeps):
            if sweep:
                tables = gibbs.antoniak_tables(doc_topic, pi, self.b, rng.random(n_tok), T)
                u, v = np.ones(T), np.full(T, self.a)
                u[:K], v[:K] = u0, v0
                pi[:T], rest = self._draw_sticks(u + tables, v + counts_after(tables), rng)
            T, rest = gibbs.hdp_token_sweep(tok_word, tok_doc, z, doc_topic, topic_word, topic_total, lam, lam_total,
                                            pi, rest, rng.random(n_tok), rng.random(n_tok), T, self.b, self.a, obs.V)
        tables = gibbs.antoniak_tables(doc_topic, pi, self.b, rng.random(n_tok), T)
        keep = np.concatenate([np.arange(K), K + np.flatnonzero(topic_total[K:T] > 0)])
        stats = self.model.empty_stats(keep.shape[0])
        S = np.zeros((keep.shape[0], obs.V))
        S[:, words] = topic_word[keep]
        stats = stats.with_fields(N=topic_total[keep].copy(), S=S, n_atoms=np.float64(n_docs),
                                  n_docs=np.float64(n_docs))
        return MinibatchSample(stats, tables[keep])


def make_sampler(model, cfg):
    """The sampler of ``model`` for ``alg=tfsvi`` (``alg.sweeps``, ``alg.max_new``, ``alg.new_weight``), or a
    one-line BnpviError naming what is not supported."""
    alloc, family = model.alloc, model.obs.name
    if isinstance(alloc, HDPTopicAlloc) and family == "mult":
        return TopicSampler(model, _sweeps(cfg, 10), int(cfg.max_new))
    if isinstance(alloc, DPMixAlloc) and family == "mult":
        return DocMixtureSampler(model, _sweeps(cfg, 3), int(cfg.max_new), str(cfg.new_weight))
    if isinstance(alloc, DPMixAlloc) and family in gibbs.FAMILY_CODES:
        return PointMixtureSampler(model, _sweeps(cfg, 3), int(cfg.max_new), str(cfg.new_weight))
    raise BnpviError(f"alg=tfsvi runs model=dp_mix with obs={', '.join(['mult', *gibbs.FAMILY_CODES])} and "
                     f"model=hdp_topic with obs=mult; got model={alloc.name} obs={family}")


def _sweeps(cfg, default: int) -> int:
    """``alg.sweeps``, or the model's default when it is null."""
    value = cfg.get("sweeps")
    return default if value is None else int(value)
