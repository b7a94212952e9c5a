"""The observation-family seam (docs/architecture.md; Hughes 2016 thesis §2.2, §2.5.3, §3.3.3).

A family object holds only the *prior* hyperparameters (τ̄, ν̄ in the thesis's
generic notation, Eq. 2.41). The variational posterior q(φ_k) is always the conjugate
posterior of some "effective" summaries (N_k, S_k): for full-data and memoized
VB those are the whole-data summaries, for stochastic VB a running average of
rescaled batch summaries (Hughes 2016 thesis Eq. 3.52 interpolates in these
prior + effective-statistics coordinates). So a family maps summaries to a ``Posterior`` and the model
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
import scipy.sparse as sp

from bnpvi.data.batch import PointBatch
from bnpvi.data.checks import count_missing
from bnpvi.data.moments import DataMoments
from bnpvi.errors import BadValues, BnpviError
from bnpvi.obs.bregman import atom_posteriors
from bnpvi.stats.resp import Responsibilities


PAIR_BLOCK = 500_000
"""Float64 values of merged statistics formed at a time by :meth:`ObsFamily.merged_log_marginal` (4 MB)."""

Posterior = Mapping[str, np.ndarray]
"""K-leading arrays of posterior parameters of one family (e.g. kappa, nu, m, B_chol)."""


MISSING_FAMILIES = ("diag_gauss", "bern")
"""The families that marginalise missing entries (``ObsFamily.handles_missing``), named in refusals."""


def has_missing(moments: DataMoments | None) -> bool:
    """Whether whole-data ``moments`` count missing (NaN) entries: the family is built to keep their counts."""
    return moments is not None and moments.n_missing > 0


def missing_problem(obs, n_missing: int, where: str = "the data") -> str | None:
    """A one-line reason why family ``obs`` cannot model data with ``n_missing`` missing entries, or None."""
    if n_missing <= 0 or obs.handles_missing:
        return None
    return (f"{where} has {n_missing:,} missing (NaN) entries, which obs={obs.name} cannot model: use "
            f"obs={' or obs='.join(MISSING_FAMILIES)} (they marginalise missing entries), or fill them in first")


def refuse_missing(obs, X: np.ndarray, where: str) -> None:
    """:class:`~bnpvi.errors.BadValues` (:func:`missing_problem`) when ``X`` has missing (NaN) entries that family ``obs`` (an instance
    or a family class) cannot model."""
    problem = missing_problem(obs, count_missing(X), where)
    if problem:
        raise BadValues(problem)


def raise_unexpected_missing(name: str) -> None:
    """The error of a family built for complete data that meets a batch with missing entries while summarising."""
    raise BnpviError(f"obs={name} was built for data without missing entries, but a batch has some (a run's data "
                     "cannot gain missing entries: fit again on all of it)")


def per_dim(values: np.ndarray) -> np.ndarray:
    """A per-cluster (K,) parameter as a (K, 1) column, or a per-dimension (K, D) one as it is: either way it
    broadcasts against (K, D) arrays."""
    values = np.asarray(values)
    return values[:, None] if values.ndim == 1 else values


def observed_entries(Y: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix | None]:
    """(Y with 0 at its NaN entries, the (N, D) sparse 0/1 matrix M of its missing entries), or (Y, None) when it
    has no NaN (one cheap pass). The observed mask is O = 1 − M: sums over observed entries are the complete
    sums less a sparse product with M, which costs a tenth of a dense product at 10 % missing."""
    if not np.isnan(np.sum(Y)):
        return Y, None
    missing = np.isnan(Y)
    at = np.flatnonzero(missing)  # row-major: the column indices of each row's entries in order
    indptr = np.concatenate([[0], np.cumsum(np.count_nonzero(missing, axis=1))])
    M = sp.csr_matrix((np.ones(at.size), at % Y.shape[1], indptr), shape=Y.shape)
    return np.where(missing, 0.0, Y), M


def observed_sum(M: sp.csr_matrix | None, values: np.ndarray) -> np.ndarray:
    """(N, K) Σ_d o_nd v_kd of per-dimension cluster terms ``values`` (K, D) over each atom's observed d, as
    Σ_d v_kd − M·vᵀ; Σ_d v_kd on every row (a (1, K) row) when every entry is observed (M None)."""
    total = np.sum(values, axis=1)[None, :]
    if M is None:
        return total
    return total - M @ values.T


def observed_counts(R, M: sp.csr_matrix | None, D: int) -> np.ndarray:
    """(K, D) No_kd = Σ_n r_nk o_nd: the responsibility mass that observes each dimension (each column of R's
    sums, less Rᵀ M at the missing entries)."""
    counts = np.repeat(np.asarray(R.sum(axis=0), dtype=np.float64).reshape(-1, 1), D, axis=1)
    if M is None:
        return counts
    lost = M.T @ R
    return counts - (lost.toarray() if sp.issparse(lost) else np.asarray(lost)).T


def observed_per_row(M: sp.csr_matrix | None, D: int):
    """How many entries of each atom are observed: D, or the (N,) array D − Σ_d m_nd."""
    return D if M is None else D - np.asarray(M.sum(axis=1)).ravel()


class ObsFamily(ABC):
    """A conjugate exponential-family likelihood with its prior.

    Subclasses are constructed from explicit prior hyperparameters; ``from_config``
    fills unset ones with data-driven defaults from ``DataMoments``.
    """

    name: str = ""
    data_kinds: tuple[str, ...] = ("points", "seq")
    """Kinds of batch files the family models: "points" (rows, also the time steps of
    sequences: "seq") or "bow" (bag-of-words documents)."""
    needs_xprev: bool = False
    """Whether the family regresses each step on the one before (``SeqBatch.Xprev``): sequences only,
    read with ``SeqStore.lagged()`` when the file holds no Xprev."""
    anneal_laps: int = 0
    """How many laps at the start of a run use an annealed prior (:meth:`annealed`); 0 for most families."""
    temperature: float = 1.0
    """T of the data terms: 1 but in the tempered first laps of a run (``bnpvi.obs.tempered.Tempered``)."""
    local_fields: tuple[str, ...] | None = None
    """The entries of the posterior that the local step reads (``expected_log_lik``, ``word_table``), or None
    for all of them: a round of batch work on other processes gets only these (``Model.local_view``)."""
    default_temperature: float = 1.0
    """T_0 of a DP mixture of this family when ``model.temperature`` is null: 1 (no annealing) unless the
    family's runs were measured to gain from deterministic annealing (docs/births.md)."""
    handles_missing: bool = False
    """Whether the family marginalises missing (NaN) entries of the data exactly (docs/missing.md)."""
    missing: bool = False
    """Whether this family was built for data with missing entries (its summaries then hold what they need)."""

    @classmethod
    @abstractmethod
    def from_config(cls, D: int, moments: DataMoments | None = None, **options) -> "ObsFamily":
        """Build the family for D-dimensional data from the ``obs`` config keys ``options``.

        Unset (None) values get data-driven defaults from ``moments``. This is the
        ``_target_`` of the family's config option (``hydra.utils.instantiate(cfg.obs,
        D=..., moments=...)``).
        """

    @abstractmethod
    def stat_shapes(self) -> dict[str, tuple]:
        """Trailing shapes of the family's SuffStats fields, e.g. {'Sx': (D,), 'Sxx': (D, D)}."""

    @abstractmethod
    def summarize(self, batch: PointBatch, resp: Responsibilities) -> dict[str, np.ndarray]:
        """Soft statistics S_k = Σ_n r_nk s(x_n) of a batch, from dense or sparse responsibilities
        (``resp.matrix()``), never densified."""

    @abstractmethod
    def posterior(self, N: np.ndarray, stats: Mapping[str, np.ndarray]) -> Posterior:
        """Conjugate posterior parameters for summaries (N (K,), stats) (prior + stats)."""

    @abstractmethod
    def expected_log_lik(self, post: Posterior, batch: PointBatch) -> np.ndarray:
        """(N_atoms, K) matrix E_q log p(x_n | φ_k), including all constants."""

    def argmax_clusters(self, post: Posterior, batch: PointBatch, log_weights: np.ndarray) -> np.ndarray:
        """(N_atoms,) int: argmax_k log_weights_k + E_q log p(x_n | φ_k), ties to the first (a mixture's most
        responsible cluster with log_weights_k = E ln π_k, Hughes 2016 thesis Eq. 3.47-3.49)."""
        scores = self.expected_log_lik(post, batch)
        scores += log_weights
        return np.argmax(scores, axis=1)

    @abstractmethod
    def log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post: Posterior | None = None) -> np.ndarray:
        """(K,) L_data,k*(N_k, S_k): the ELBO data term at the optimal q.

        ``post``: :meth:`posterior` of these (N, S) when the caller has it (a global step's), so that families
        whose term is a function of the posterior (the Wishart ones: a Cholesky per cluster) skip making it
        again; the others ignore it.

        The per-cluster term of Hughes 2016 thesis Eq. 3.42 (with its sign corrected).
        Includes Σ_n r_nk h(x_n) and every constant, so that it equals the log
        marginal likelihood of the cluster's data for hard assignments, except
        where a family documents that it leaves out a term of the data alone
        (``Mult``: each document's multinomial coefficient). Empty
        clusters (N_k = 0, S_k = 0) give exactly 0.
        """

    def merged_log_marginal(self, N: np.ndarray, stats: Mapping[str, np.ndarray], pairs: np.ndarray) -> np.ndarray:
        """(P,) L_data*(A ∪ B) of each pair (a, b) of ``pairs``: :meth:`log_marginal` of the summed summaries
        N_a + N_b, S_a + S_b (Hughes 2016 thesis Eq. 4.6), in blocks of ~PAIR_BLOCK values. Families
        with a cheaper exact route (a compiled pass that never forms the merged statistics) override it."""
        a, b = pairs[:, 0], pairs[:, 1]
        per_pair = max(1, sum(int(np.prod(np.shape(v)[1:])) for v in stats.values()))
        step = max(1, PAIR_BLOCK // per_pair)
        out = np.empty(pairs.shape[0])
        for lo in range(0, pairs.shape[0], step):
            s = slice(lo, lo + step)
            merged = {name: v[a[s]] + v[b[s]] for name, v in stats.items()}
            out[s] = self.log_marginal(N[a[s]] + N[b[s]], merged)
        return out

    has_reassign_gains: bool = False
    """Whether :meth:`reassign_gains` is implemented (the reassign move runs only then)."""

    def reassign_gains(self, N: np.ndarray, stats: Mapping[str, np.ndarray], batch, resp: np.ndarray) -> np.ndarray:
        """(N_atoms, K): the change of Σ_k L_data,k* (:meth:`log_marginal`) when atom n's responsibilities
        ``resp[n]`` are replaced by a one-hot on cluster j, under the whole-data counts ``N`` and summaries
        ``stats`` (which include atom n with ``resp[n]``); see ``bnpvi.moves.reassign``."""
        raise NotImplementedError(f"obs={self.name} has no single-atom reassignment gains")

    def add_weighted(self, stats: dict[str, np.ndarray], batch, weights: np.ndarray) -> None:
        """``stats`` += the family's summaries of ``batch`` at (signed) per-atom weights ``weights`` (N_atoms, K),
        in place: the reassign move keeps a running copy of the whole-data summaries as it moves atoms one
        at a time. Families whose summaries of a few atoms touch few entries (``Mult``) override it."""
        for name, value in self.summarize(batch, Responsibilities(np.asarray(weights, dtype=np.float64),
                                                                  weights.shape[1])).items():
            stats[name] += value

    @abstractmethod
    def kl(self, post_q: Posterior, post_p: Posterior) -> np.ndarray:
        """(K,) KL(q_k ‖ p_k) between two posteriors of this family."""

    @abstractmethod
    def divergence(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N_atoms, J) Bregman divergence from each smoothed atom to each center.

        The smoothed atom is the one-observation posterior's point estimate and a
        center is the point estimate of a posterior (Hughes 2016 thesis Eq. 2.35 and the
        smoothing of Alg. 2.2); used by k-means++ seeding and births. Non-negative, finite.
        """

    def atom_divergences(self, batch: PointBatch):
        """``idx ↦`` (N_atoms, J) :meth:`divergence` from every smoothed atom of ``batch`` to the smoothed
        atoms ``idx`` (the centers of k-means++ seeding, thesis Alg. 2.2).

        The default builds the one-observation posteriors of ``idx`` and calls :meth:`divergence`; a family
        may prepare the batch once and answer each call faster (full-covariance Gaussians).
        """
        return lambda idx: self.divergence(batch, atom_posteriors(self, batch, idx))

    def point_log_lik(self, batch: PointBatch, centers: Posterior) -> np.ndarray:
        """(N_atoms, J) log p(x_n | point estimate of center j); Bregman k-means assignment."""
        return self.expected_log_lik(centers, batch)

    # ------------------------------------------------ MAP point estimates (alg=em)
    def map_point(self, N: np.ndarray, stats: Mapping[str, np.ndarray], natural: bool = False) -> Posterior:
        """The mode φ̂_k of the conjugate posterior of summaries (N, stats): the MAP point estimate of EM's
        M-step, in the prior's own coordinates, or in the natural coordinates (Hughes 2016 thesis Eq. 2.64)
        when ``natural`` and the family's natural form differs. K-leading arrays, as :meth:`posterior`."""
        raise BnpviError(f"obs={self.name} has no MAP point estimate (alg=em)")

    def map_prior_problem(self, natural: bool = False) -> str | None:
        """A one-line reason why the prior has no interior mode for :meth:`map_point` (naming the key), or None."""
        return None

    def log_lik_at(self, point: Posterior, batch: PointBatch) -> np.ndarray:
        """(N_atoms, K) log p(x_n | φ̂_k) at point estimates, with the constants of :meth:`expected_log_lik`."""
        raise BnpviError(f"obs={self.name} has no MAP point estimate (alg=em)")

    def log_prior_at(self, point: Posterior, natural: bool = False) -> np.ndarray:
        """(K,) ln p(φ̂_k), the prior density at the point estimates in the coordinates of :meth:`map_point`."""
        raise BnpviError(f"obs={self.name} has no MAP point estimate (alg=em)")

    def point_moments(self, point: Posterior) -> dict[str, np.ndarray]:
        """:meth:`cluster_moments` of point estimates (``means_``, ``covariances_``); none by default."""
        return {}

    # ------------------------------------------------------------ derived
    def elbo_data(self, N: np.ndarray, stats: Mapping[str, np.ndarray], post_q: Posterior | None = None) -> float:
        """L_data for summaries (N, S); at the optimum if post_q is None, else for q = post_q."""
        value = float(np.sum(self.log_marginal(N, stats)))
        if post_q is not None:
            value -= float(np.sum(self.kl(post_q, self.posterior(N, stats))))
        return value

    def check_data(self, kind: str) -> str | None:
        """A one-line reason why a data file of this kind cannot be modelled by the family, or None."""
        if kind in self.data_kinds:
            return None
        if self.needs_xprev:
            held = "bag-of-words documents" if kind == "bow" else "points"
            return (f"obs={self.name} needs sequences (each step is regressed on the one before), but the data file "
                    f"holds {held}")
        if kind == "bow":
            return (f"obs={self.name} models vectors of numbers, but the data file holds bag-of-words documents "
                    "(use obs=mult)")
        return (f"obs={self.name} models bag-of-words counts, but the data file holds real-valued "
                f"{'sequences' if kind == 'seq' else 'points'} (convert documents from .ldac or sparse .npz)")

    def annealed(self, lap: int) -> "ObsFamily":
        """The family whose prior is in force in lap ``lap`` (0-based) of a run: ``self`` from lap
        ``anneal_laps`` on (always, for a family that does not anneal its prior)."""
        return self

    def without_annealing(self) -> "ObsFamily":
        """The same family with its configured prior in every lap (a warm start continues under it)."""
        return self

    def prior_params(self) -> dict[str, np.ndarray]:
        """Hyperparameters as arrays (stored in checkpoints and the final model)."""
        return {}

    def cluster_moments(self, post: Posterior) -> dict[str, np.ndarray]:
        """Readable per-cluster point estimates of q(φ_k), named as scikit-learn's mixtures name them
        (``means_`` (K, D), and ``covariances_`` (K, D, D) for Gaussian families); none by default."""
        return {}
