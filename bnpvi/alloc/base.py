"""The allocation-model seam (docs/architecture.md; Hughes 2016 thesis §2.4).

An allocation model p(z, π) owns everything that is not the observation family:

* its **local step**: given a batch and the observation family's expected
  log-likelihood E log p(x_n | φ_k) of every atom, the optimal q(z) of the batch
  (one softmax for mixtures, forward-backward for HMMs, per-document iterations
  for topic models), returned as a :class:`Local`;
* the **summaries** it adds to a batch's SuffStats (counts, entropies,
  transition tables ...), declared with their cluster axes in :meth:`layout`;
* its **global step**, from whole-data summaries to its variational parameters
  (closed form, or an optimisation warm-started from the previous ones);
* its **ELBO terms** (allocation and entropy) for given summaries and parameters;
* what the **moves** need from it (merge terms, restricted local steps).

Variational parameters are plain dicts of arrays, saved whole in checkpoints.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from bnpvi.errors import BnpviError, check_int
from bnpvi.stats import FieldSpec, Responsibilities, SuffStats

Params = Mapping[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class Local:
    """The result of a local step on one batch.

    Attributes
    ----------
    resp : Responsibilities or None
        Atom-level marginals r_nk = q(z_n = k): what the observation family summarises.
        None when the local step never holds them whole (a topic model's one-word atoms:
        the family's summaries then come as ``tables["word_topic"]``, see ``Model.summarize``).
    tables : dict of str to ndarray
        The allocation model's own per-batch results (e.g. an HMM's transition counts
        and entropy tables), empty for mixtures.
    """

    resp: Responsibilities | None
    tables: dict = field(default_factory=dict)


class AllocModel(ABC):
    """Base class of allocation models (see the module docstring).

    Class attributes
    ----------------
    name : str
        The ``model`` config option.
    finite : bool
        True when the prior depends on K (a finite Dirichlet): K is fixed and moves
        that change it are not offered.
    data_kinds : tuple of str
        Kinds of batch files the model can be trained on ("points", "bow", "seq").
    full_first_pass : bool
        True when one batch may say nothing about some clusters, so memoized VB must
        summarise every batch at the initial globals before its first global step.
        Sequence batches hold whole sequences, which visit only some states; a global
        step after the first of them would send the unseen states back to the prior.
    moves : tuple of str
        The proposal moves the model supports (others listed in the config are skipped
        with a warning).
    init_kmeans_iters : int
        Bregman k-means iterations after the k-means++ seeding when ``init.kmeans_iters`` is null.
    abundant_K : int
        The initial number of clusters when ``init.K`` is null and births are off.
    birth_kind : str
        How a birth makes new clusters: "split" (a poorly fit cluster's atoms re-divided
        among fresh clusters, judged after a lap), "interval" (an HMM: fresh states cut
        from one interval of a sequence, judged at the batch) or "topic" (a topic split
        into pieces, every batch re-summarised under the candidate, judged after a lap).
    merge_kind : str
        How a merge's candidate is made: "tracked" (the two clusters' summaries added, the non-linear
        terms tracked during the lap) or "whole" (the local step re-run on every batch with the pair
        merged, ``local_step_merged``, under the merged cluster's log-likelihoods from ``merged_log_liks``; for
        models whose merged summaries do not follow from the pair's own).
    moves_start_lap : int
        No move is planned before this lap (whatever ``moves.*.start_lap`` say): laps in which the
        clusters are still too vague for a proposal to mean anything (an MMSB's memberships from their
        random start).
    merge_refine_laps : int
        ``merge_kind = "whole"``: whole-data laps that refine a lap's best merge candidate before it is judged.
    merges_per_lap : int or None
        At most this many merge pairs tracked per lap, below ``moves.merge.max_pairs`` (None: no cap).
    deletes_per_lap : int or None
        At most this many deletes tracked per lap, below ``moves.delete.max_per_lap`` (None: no cap).
    births_per_lap : int or None
        At most this many birth proposals per lap, below ``moves.birth.max_per_lap`` (None: no cap).
    birth_abundance : int
        ``moves.birth.abundance`` when that is null: a birth's target holding a share s of the data gets
        max(n_new, ⌈birth_abundance · s⌉) fresh clusters (0: n_new whatever s).
    whole_delete : bool
        True when a delete must re-run the local step on every batch without the target
        (``local_step_without``) instead of re-dividing the target's mass among a few
        clusters (``restricted_local_step``).
    whole_totals : bool
        True when a whole-data candidate (a whole delete, a ``merge_kind = "whole"`` merge) keeps only the
        running sum of its batch summaries, and an accepted one's are made again from each batch's globals
        (``bnpvi.moves.whole``): for models whose batch summaries are as large as the globals (an MMSB's node
        usage over all nodes) and whose ``local_step_without`` and ``local_step_merged`` need nothing but the
        globals and the log-likelihoods. Whole merges always keep running sums.
    pairs_in_local_step : bool
        True when a merge's tracked terms for the planned pairs are computed inside the local step
        (``local_step(..., pairs=...)``), because its responsibilities are never held whole.
    sort_needs_check : bool
        True when the ELBO depends on the order of the clusters beyond what sorting by
        size improves (an HDP's surrogate bound): a sort is then kept only if it does not
        lower the ELBO.
    has_sparse_step : bool
        True when the local step can keep at most L responsibilities per atom
        (:meth:`use_sparse`, config ``alg.sparse_L``; Hughes 2016 thesis Ch. 7).
    warm_is_params : bool
        True when :meth:`warm_start` returns complete global parameters, at which :meth:`elbo` can
        be evaluated: an ELBO that the global step started there can only raise (merges screen
        their candidates with it, ``bnpvi.moves.merge.SCREEN_RTOL``).

    Attributes
    ----------
    sparse_L : int or None
        L of the L-sparse local step, None for the dense one (the default).
    """

    name: str = ""
    finite: bool = False
    data_kinds: tuple[str, ...] = ("points", "bow", "seq")
    full_first_pass: bool = False
    moves: tuple[str, ...] = ("birth", "merge", "delete")
    birth_kind: str = "split"
    abundant_K: int = 8
    init_kmeans_iters: int = 0
    whole_delete: bool = False
    whole_totals: bool = False
    merge_kind: str = "tracked"
    moves_start_lap: int = 1
    merges_per_lap: int | None = None
    merge_refine_laps: int = 0
    deletes_per_lap: int | None = None
    births_per_lap: int | None = None
    birth_abundance: int = 0
    pairs_in_local_step: bool = False
    sort_needs_check: bool = False
    has_sparse_step: bool = False
    warm_is_params: bool = False
    sparse_L: int | None = None
    temperature_laps: int = 0

    def temperature_at(self, lap: int) -> float:
        """T of lap ``lap`` (0-based) of a run: the data terms of that lap's model are divided by it
        (``bnpvi.obs.tempered``); 1, no tempering, unless the model anneals (mixtures)."""
        return 1.0

    def without_annealing(self) -> "AllocModel":
        """This allocation model at temperature 1 in every lap (a warm start goes on from trained clusters)."""
        return self

    def take_family_temperature(self, obs, births: bool) -> None:
        """Where ``model.temperature`` was left null, take T_0 from the observation family ``obs``
        (``ObsFamily.default_temperature``) when ``births`` run; only DP mixtures do."""

    def limit_temperature_laps(self, laps: int) -> None:
        """Let the temperature fall over at most ``laps`` laps (``model.temperature_laps`` is the most)."""
        self.temperature_laps = min(self.temperature_laps, max(0, int(laps)))

    def use_sparse(self, L: int | None) -> None:
        """Make the local step L-sparse (None: dense); ``alg.sparse_L``."""
        if L is None:
            self.sparse_L = None
            return
        if not self.has_sparse_step:
            raise BnpviError(f"alg.sparse_L: model={self.name} has no L-sparse local step "
                             "(mixtures and topic models have); use alg.sparse_L=null")
        self.sparse_L = check_int(L, "alg.sparse_L", 1)

    @abstractmethod
    def layout(self) -> dict[str, tuple[tuple, FieldSpec]]:
        """The summaries this model adds: name -> (trailing shape, FieldSpec). Always has ``N``."""

    @abstractmethod
    def local_step(self, batch, log_lik: np.ndarray, params: Params) -> Local:
        """Optimal q(z) of ``batch`` given E log p(x_n | φ_k) (N_atoms, K) and the parameters."""

    def warm_state(self, local: Local) -> np.ndarray | None:
        """What a later local step of the same batch may start from (``local_step(..., warm=...)``), a
        (groups, K) array whose columns follow the clusters; None (the default) when the model's local
        step always starts afresh."""
        return None

    @abstractmethod
    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        """This model's summaries of a batch (the fields of :meth:`layout`)."""

    @abstractmethod
    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """Variational parameters for whole-data summaries ``stats`` (warm-started from ``warm``)."""

    @abstractmethod
    def elbo(self, stats: SuffStats, params: Params) -> float:
        """The allocation and entropy terms of the ELBO for summaries ``stats`` under ``params``."""

    @abstractmethod
    def decode(self, batch, log_lik: np.ndarray, params: Params) -> np.ndarray:
        """The most likely cluster of every atom (mixtures: argmax r_nk; HMMs: the Viterbi path)."""

    @abstractmethod
    def export(self, params: Params) -> dict[str, np.ndarray]:
        """Readable summaries of the parameters for the model file (e.g. weights E[π_k])."""

    def atoms(self, batch):
        """The batch as the observation family sees it: its atoms (the batch itself; a topic model
        returns one atom per (document, word type) entry)."""
        return batch

    def expected_log_lik(self, obs, post, batch):
        """E log p(x_n | φ_k) of the atoms of ``batch`` in the form ``local_step`` takes: by default the
        family's dense (atoms, K) array."""
        return obs.expected_log_lik(post, self.atoms(batch))

    def warm_start(self, params: Params, sources: Sequence[Sequence[int]]) -> dict | None:
        """Parameters to warm-start the global step after a cluster edit (see ``SuffStats.remap``).

        Models whose global step is in closed form need none and return None.
        """
        return None

    def check_data(self, kind: str) -> str | None:
        """A one-line reason why data of this kind cannot be modelled, or None."""
        if kind in self.data_kinds:
            return None
        names = {"points": "points", "bow": "bag-of-words documents", "seq": "sequences", "graph": "a graph"}
        wanted = " or ".join(names[k] for k in self.data_kinds)
        return f"model={self.name} needs {wanted}, but the data file holds {names.get(kind, kind)}"
