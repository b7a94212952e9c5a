"""Model = allocation model x observation family, joined by their summaries (docs/architecture.md).

The model itself holds no state: the global parameters are one :class:`Globals`
object, made by :meth:`Model.global_step` from effective summaries (whole-data
summaries for full and memoized VB, a running average for stochastic VB; Hughes
2016 thesis §3.5) and, for allocation models whose global step is an
optimisation, warm-started from the previous parameters. A checkpoint saves a
Globals whole (its summaries and the allocation parameters), so a resume is exact
even when the global step is not a pure function of the summaries. Summaries and
allocation parameters are kept C-contiguous, the layout a checkpoint gives back:
NumPy adds up a reduction (Σ_i E ln π_iℓ of the HDP's top level, say) in an order
that depends on the layout, so a resumed run would otherwise differ in the last bits.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bnpvi.alloc.base import AllocModel, Local, Params
from bnpvi.data.batch import atom_weights
from bnpvi.obs.base import ObsFamily
from bnpvi.obs.tempered import Tempered
from bnpvi.stats import PER_CLUSTER, TOTAL, Responsibilities, SuffStats


@dataclass(frozen=True, eq=False)
class Globals:
    """The global variational parameters q(π) q(φ) of a model.

    Attributes
    ----------
    stats : SuffStats
        The effective summaries they were made from.
    alloc : dict of str to ndarray
        The allocation model's variational parameters.
    obs : dict of str to ndarray
        The observation posterior q(φ_k) (a function of ``stats``).
    """

    stats: SuffStats
    alloc: dict
    obs: dict

    @property
    def K(self) -> int:
        return self.stats.K


class Model:
    """An allocation model and an observation family; stateless.

    Parameters
    ----------
    alloc : AllocModel
    obs : ObsFamily
    """

    def __init__(self, alloc: AllocModel, obs: ObsFamily):
        self.alloc = alloc
        self.obs = obs
        layout = dict(alloc.layout())
        clash = set(layout) & set(obs.stat_shapes())
        if clash:
            raise ValueError(f"allocation and observation summaries share the names {sorted(clash)}")
        layout.update({name: (shape, PER_CLUSTER) for name, shape in obs.stat_shapes().items()})
        layout["n_atoms"] = ((), TOTAL)
        self.layout = layout
        self.obs_fields = tuple(obs.stat_shapes())
        self._by_lap: dict[int, Model] = {}

    @property
    def anneal_laps(self) -> int:
        """How many laps at the start of a run use an annealed model: the family's annealed prior
        (``ObsFamily.annealed``) or the allocation model's temperature (``AllocModel.temperature_at``)."""
        return max(self.obs.anneal_laps, self.alloc.temperature_laps)

    @property
    def temperature(self) -> float:
        """T of this model's data terms (``bnpvi.obs.tempered``): 1 unless it is a tempered lap's model."""
        return self.obs.temperature

    def at_lap(self, lap: int) -> "Model":
        """The model in force in lap ``lap`` (0-based) of a run: this one, or during the first
        ``anneal_laps`` laps the same allocation model with the family's annealed prior and, where the
        allocation model anneals its temperature, every data term divided by T (``Tempered``)."""
        obs = self.obs.annealed(lap)
        T = self.alloc.temperature_at(lap)
        if obs is self.obs and T == 1.0:
            return self
        if lap not in self._by_lap:
            self._by_lap[lap] = Model(self.alloc, obs if T == 1.0 else Tempered(obs, T))
        return self._by_lap[lap]

    def without_annealing(self) -> "Model":
        """This model with the family's configured prior and temperature 1 in every lap (a warm start goes
        on from trained clusters)."""
        obs, alloc = self.obs.without_annealing(), self.alloc.without_annealing()
        return self if obs is self.obs and alloc is self.alloc else Model(alloc, obs)

    def empty_stats(self, K: int) -> SuffStats:
        return SuffStats.zeros(K, self.layout)

    # ------------------------------------------------------------ global step
    def global_step(self, stats: SuffStats, warm: Params | None = None) -> Globals:
        """q(π), q(φ) from summaries (Hughes 2016 thesis Eq. 3.41, 3.43; 6.38-6.47)."""
        obs_post = self.obs.posterior(np.maximum(stats.N, 0.0), stats.select(self.obs_fields))
        alloc = {k: np.asarray(v, order="C") for k, v in self.alloc.global_step(stats, warm).items()}
        return Globals(stats, alloc, obs_post)

    def restore(self, stats: SuffStats, alloc_params: Params) -> Globals:
        """Globals from a checkpoint: the saved summaries and allocation parameters, taken as they are."""
        obs_post = self.obs.posterior(np.maximum(stats.N, 0.0), stats.select(self.obs_fields))
        return Globals(stats, {k: np.asarray(v) for k, v in alloc_params.items()}, obs_post)

    # ------------------------------------------------------------- local step
    def local_view(self, globals_: Globals) -> Globals:
        """What a local step and the summaries of a batch read of ``globals_`` (``local_step``, ``summarize``):
        the allocation parameters and the family's ``local_fields``, with the counts N as the only summary.
        The batch work of a round without moves gets these on other processes (a topic model's summaries
        and λ̂ are two more K × V arrays that no local step reads)."""
        fields = self.obs.local_fields
        if fields is None:
            return globals_
        N = globals_.stats.N
        return Globals(SuffStats({"N": N}, {"N": self.layout["N"][1]}), globals_.alloc,
                       {name: globals_.obs[name] for name in fields})

    def local_step(self, batch, globals_: Globals, warm: np.ndarray | None = None,
                   pairs: np.ndarray | None = None) -> tuple[np.ndarray, Local]:
        """E log p(x_n | φ_k) (``AllocModel.expected_log_lik``) and the allocation model's local step under
        ``globals_``, started from ``warm`` (what ``AllocModel.warm_state`` kept from the batch's previous
        visit) and tracking merge ``pairs`` (``AllocModel.pairs_in_local_step``) when given."""
        log_lik = self.alloc.expected_log_lik(self.obs, globals_.obs, batch)
        extra = {name: v for name, v in (("warm", warm), ("pairs", pairs)) if v is not None}
        return log_lik, self.weighted(batch, self.alloc.local_step(batch, log_lik, globals_.alloc, **extra))

    @staticmethod
    def weighted(batch, local: Local) -> Local:
        """``local`` with the batch's atom weights on its responsibilities (``Responsibilities.with_weights``), so
        that its counts, entropies, merge and group entropies and the summaries made from it are weighted:
        the one place a point's weight w_n enters (the local step itself does not depend on it)."""
        weights = atom_weights(batch)
        if weights is None or local.resp is None or local.resp.weights is not None:
            return local
        return replace(local, resp=local.resp.with_weights(weights))

    def summarize(self, batch, local: Local) -> SuffStats:
        """A batch's summaries: the allocation model's, the family's (of w_n r_nk), and the number of atoms."""
        local = self.weighted(batch, local)
        fields = dict(self.alloc.summarize(local))
        if "word_topic" in local.tables:  # the local step accumulated Σ_u c_u r_uk by word (one-word atoms)
            fields.update(self.obs.word_stats(local.tables["word_topic"]))
        else:
            fields.update(self.obs.summarize(self.alloc.atoms(batch), local.resp.mass()))
        fields["n_atoms"] = np.float64(batch.n_atoms)
        return SuffStats(fields, {name: spec for name, (_, spec) in self.layout.items()})

    def hard_stats(self, batch, labels, K: int) -> SuffStats:
        """Summaries of hard assignments of the batch's atoms (initialisation; no allocation tables)."""
        resp = Responsibilities.one_hot(labels, K).with_weights(atom_weights(batch))
        stats = self.empty_stats(K)
        fields = dict(stats.fields)
        fields["N"] = resp.counts()
        fields.update(self.obs.summarize(batch, resp.mass()))
        fields["n_atoms"] = np.float64(batch.n_atoms)
        return SuffStats(fields, stats.specs)

    def decode(self, batch, globals_: Globals) -> np.ndarray:
        """The most likely cluster of every atom of ``batch``."""
        return self.alloc.decode(batch, self.alloc.expected_log_lik(self.obs, globals_.obs, batch), globals_.alloc)

    def decode_marginals(self, batch, globals_: Globals) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`decode` of ``batch`` and the cluster of largest marginal r_nk of every atom.

        Both from one expected log-likelihood; the marginals are the local step's. For an
        HMM the first is the Viterbi path (the joint mode of q*(z_d)) and the second the
        marginal-MAP path argmax_k r_t(k) of forward-backward (Hughes 2016 thesis §6.6).

        Returns
        -------
        decoded, marginal_map : (N_atoms,) ndarrays of int64
        """
        log_lik, local = self.local_step(batch, globals_)
        return self.alloc.decode(batch, log_lik, globals_.alloc), local.resp.best()[0]

    # ------------------------------------------------------------------ ELBO
    def data_terms(self, stats: SuffStats, rows=None, post=None) -> np.ndarray:
        """L_data,k*(N_k, S_k) of every cluster (or of clusters ``rows``): the observation part of the ELBO
        at globals made from ``stats``, one term per cluster (Hughes 2016 thesis Eq. 3.24). ``post``: the
        posterior q(φ) of all of ``stats`` when known (see ``ObsFamily.log_marginal``)."""
        N = np.maximum(stats.N, 0.0)
        fields = stats.select(self.obs_fields)
        if rows is not None:
            N, fields = N[rows], {name: v[rows] for name, v in fields.items()}
            post = None
        return self.obs.log_marginal(N, fields, post)

    def alloc_value(self, stats: SuffStats, warm: Params | None = None) -> float:
        """The allocation and entropy part of the ELBO at the allocation model's global step for ``stats``:
        with :meth:`data_terms`, the value :meth:`evaluate` returns."""
        return self.alloc.elbo(stats, self.alloc.global_step(stats, warm))

    def elbo(self, stats: SuffStats, globals_: Globals) -> float:
        """The exact ELBO of responsibilities summarised by ``stats`` under the globals ``globals_``.

        L = Σ_k L_data,k*(N_k, S_k) − KL(q(φ) ‖ q*(φ | stats)) + allocation and entropy terms
        (Hughes 2016 thesis Eq. 3.24, 3.42); the KL is 0, and skipped, when ``globals_``
        were made from ``stats`` itself (full and memoized VB, every move's candidate).
        """
        same = globals_.stats is stats  # globals made from these summaries by this model: q(φ) is q*(φ | stats)
        value = float(np.sum(self.data_terms(stats, post=globals_.obs if same else None)))
        if not same:
            N = np.maximum(stats.N, 0.0)
            value -= float(np.sum(self.obs.kl(globals_.obs, self.obs.posterior(N, stats.select(self.obs_fields)))))
        return value + self.alloc.elbo(stats, globals_.alloc)

    def evaluate(self, stats: SuffStats, warm: Params | None = None) -> tuple[float, Globals]:
        """The global step for ``stats`` and the ELBO there: how every candidate is judged."""
        candidate = self.global_step(stats, warm)
        return self.elbo(stats, candidate), candidate
