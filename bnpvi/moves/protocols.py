"""What each move asks of the allocation model, declared: one :class:`typing.Protocol` per move kind.

Every allocation model provides the local and global steps, the ELBO and ``warm_start`` (``AllocModel``);
a move needs more, and only the models that offer it declare it (``AllocModel.moves``). A move class names
its protocol (``Move.protocol``) and :class:`~bnpvi.moves.schedule.MoveSchedule` checks it when a run's
moves are built, so a model that offers a move without its methods fails at the start, naming them.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from bnpvi.alloc.base import Local
from bnpvi.errors import BnpviError
from bnpvi.stats import SuffStats


@runtime_checkable
class MixtureBirths(Protocol):
    """Births that re-divide one cluster's mass among fresh clusters (Hughes 2016 thesis §4.2)."""

    births_per_lap: int | None
    birth_abundance: int

    def restricted_local_step(self, mass: np.ndarray, log_lik: np.ndarray, log_prior: np.ndarray) -> Local:
        """Atom n's ``mass[n]`` shared among J clusters by softmax_j(log_lik_nj + log_prior_j) (Eq. 4.12-4.16)."""

    def group_terms(self, local: Local, membership: np.ndarray) -> dict[str, np.ndarray]:
        """Per group of clusters (a (K, G) 0/1 ``membership``), its merged entropy terms."""

    def log_marginal(self, N: np.ndarray):
        """The allocation term at its optimal globals, L_alloc*(N) (Eq. 3.44)."""


@runtime_checkable
class SubclusterSplits(Protocol):
    """Splits of a cluster into the two sub-clusters it carries (bnpvi.moves.split)."""

    def restricted_local_step(self, mass: np.ndarray, log_lik: np.ndarray, log_prior: np.ndarray) -> Local:
        """Atom n's ``mass[n]`` shared between the two sub-clusters by softmax_j(log_lik_nj + log_prior_j)
        (Hughes 2016 thesis Eq. 4.12-4.16)."""


@runtime_checkable
class TopicBirths(Protocol):
    """Births of topics judged by re-inferring the documents that use the target (thesis §5.5.3)."""

    births_per_lap: int | None

    def topic_fit(self, local: Local, log_lik) -> tuple[np.ndarray, np.ndarray]:
        """Per topic, the batch's tokens and their fit (the b-score's parts, Eq. 4.24)."""

    def split_params(self, params, target: int, weights: np.ndarray) -> dict:
        """The candidate's sticks: topic ``target``'s share divided by ``weights``."""

    def local_step_split(self, batch, log_lik, params, targets, local: Local) -> Local:
        """The document step under a birth's globals, started from the current one."""

    def warm_state(self, local: Local) -> np.ndarray | None:
        """Where the batch's next local step starts."""


@runtime_checkable
class SequenceBirths(Protocol):
    """Births of HMM states from intervals of a batch's sequences, judged in the batch's work (thesis §6.5)."""

    births_per_lap: int | None


@runtime_checkable
class TrackedMerges(Protocol):
    """Merges whose entropy terms the local step tracks per pair (thesis §4.1)."""

    merges_per_lap: int | None
    warm_is_params: bool

    def merge_terms(self, local: Local, pairs: np.ndarray) -> dict[str, np.ndarray]:
        """Per pair (a, b), the merged cluster's tracked terms in this batch."""

    def merge_score(self, stats: SuffStats, params, pairs: np.ndarray) -> np.ndarray:
        """ΔL_alloc of merging each pair, the tracked terms excluded (Eq. 4.8)."""


@runtime_checkable
class WholeMerges(Protocol):
    """Merges judged by a whole-data local step with the pair merged (a graph's communities)."""

    merges_per_lap: int | None
    merge_refine_laps: int

    def merge_ranking(self, params, pairs: np.ndarray, store) -> np.ndarray:
        """How much each pair behaves as one."""

    def merged_log_liks(self, model, globals_, pairs: np.ndarray, store) -> np.ndarray:
        """The likelihood terms of each pair's merged candidate."""

    def local_step_merged(self, batch, log_lik: np.ndarray, params, a: int, b: int, merged) -> Local:
        """The local step with a and b merged."""


@runtime_checkable
class TrackedDeletes(Protocol):
    """Deletes that re-divide a cluster's mass among receivers, tracked per batch (thesis §4.3)."""

    deletes_per_lap: int | None

    def restricted_local_step(self, mass: np.ndarray, log_lik: np.ndarray, log_prior: np.ndarray) -> Local:
        """Atom n's ``mass[n]`` shared among the receivers."""

    def expected_log_pi(self, params) -> np.ndarray:
        """E[ln π_k] per cluster."""


@runtime_checkable
class WholeDeletes(Protocol):
    """Deletes judged by the local step without the target on every batch (topics, states, communities)."""

    deletes_per_lap: int | None
    whole_totals: bool

    def local_step_without(self, batch, log_lik: np.ndarray, params, target: int, local: Local | None = None) -> Local:
        """The local step over the other K − 1 clusters."""

    def warm_state(self, local: Local) -> np.ndarray | None:
        """Where the batch's next local step starts."""


@runtime_checkable
class Reassigns(Protocol):
    """Single-atom reassignments of a mixture (bnpvi.moves.reassign)."""

    def expected_log_pi(self, params) -> np.ndarray:
        """E[ln π_k] per cluster."""

    def log_marginal(self, N: np.ndarray):
        """The allocation term at its optimal globals, L_alloc*(N)."""


def check_offers(alloc, move) -> None:
    """Refuse ``move`` (a Move) on an allocation model that lacks the members of its protocol."""
    protocol = move.protocol(alloc)
    if not isinstance(alloc, protocol):
        members = set(protocol.__annotations__) | {name for name, value in vars(protocol).items()
                                                    if callable(value) and not name.startswith("_")}
        missing = sorted(name for name in members if not hasattr(alloc, name))
        raise BnpviError(f"moves.{move.name} needs {', '.join(missing)} of the allocation model, which "
                         f"{type(alloc).__name__} does not have; leave {move.name} out of moves")
