"""Structured-config schemas (dataclasses) for every Hydra group in ``bnpvi/conf``.

They make a mistyped or unknown key fail at start-up with a message naming it, and
document every option with its default. The YAML files in ``bnpvi/conf/<group>/``
pick values; these classes say which keys exist and what type they have.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


@dataclass
class ModelConfig:
    """Allocation model: ``dp_mix`` (stick-breaking DP) or ``finite_mix`` (symmetric Dirichlet)."""

    name: str = MISSING
    gamma: float = 10.0  # DP concentration γ (finite_mix: Dirichlet(γ/K, ..., γ/K))


@dataclass
class ObsConfig:
    """Observation family and its prior (spec 01 §1.5; unset values are data-driven)."""

    name: str = MISSING  # gauss | diag_gauss | zm_gauss | mult | bern
    sF: float = 1.0  # prior expected covariance = sF x data covariance scale
    prior_cov: str = "diag"  # eye | diag | cov: which data covariance scale
    nu: Optional[float] = None  # Wishart/Gamma degrees of freedom ν̄ (default D + 2)
    kappa: float = 1e-4  # prior pseudo-count κ̄ of the mean
    mean: Optional[List[float]] = None  # prior mean m̄ (default: the data mean)
    lam: float = 0.1  # mult: symmetric Dirichlet λ̄ on each topic's word frequencies
    lam1: float = 0.1  # bern: Beta(λ̄₁, λ̄₀) prior on each dimension's frequency of a 1
    lam0: float = 0.3


@dataclass
class AlgConfig:
    """Learning algorithm: ``vb`` (full data), ``memo`` (memoized), ``sovb`` (stochastic)."""

    name: str = MISSING
    n_laps: int = 100  # maximum number of passes through the data
    converge_thr: float = 1e-6  # stop when |ΔELBO| / N over a lap is below this ...
    count_thr: float = 0.01  # ... and no cluster's count N_k changed by more than this
    n_batches: Optional[int] = None  # split a file converted without fixed batches into this many
    rate_delay: float = 1.0  # sovb: δ in ξ_t = (δ + t)^(-κ)
    rate_exponent: float = 0.6  # sovb: κ in (0.5, 1]


@dataclass
class InitConfig:
    """Initialisation (spec 01 §4.4)."""

    name: str = MISSING  # kmeanspp (Bregman k-means++) | random (K random atoms)
    K: int = 8  # initial number of clusters
    n_samples: int = 20000  # atoms sampled for seeding
    n_trials: Optional[int] = None  # k-means++ candidates per seed (default 2 + ln K)
    kmeans_iters: int = 0  # Bregman k-means iterations after seeding


@dataclass
class DataConfig:
    """Data: ``toy`` (built-in 8-Gaussian set, generated once and cached) or ``hdf5`` (a converted file)."""

    name: str = MISSING
    path: Optional[str] = None  # hdf5: the file written by `bnpvi-data convert`
    n_atoms: int = 5000  # toy: number of points
    seed: int = 0  # toy: generator seed
    n_batches: int = 5  # toy: fixed batches in the generated file


@dataclass
class BirthConfig:
    """Birth proposals (spec 01 §6): split a poorly fit cluster, seeded by k-means on its data
    in the lap's first batch and judged after the lap has refreshed every batch."""

    start_lap: int = 2  # first lap with births
    stop_lap: Optional[int] = None  # last lap with births (None: no limit)
    max_per_lap: int = 3  # births proposed per lap (distinct targets)
    n_new: int = 8  # J': fresh clusters per birth (fewer if the target has little data)
    min_batch_mass: float = 10.0  # skip targets with less mass N_bk in the batch
    eps: float = 0.1  # atoms with r_nk > eps form the k-means subset
    max_atoms: int = 5000  # cap on that subset
    kmeans_iters: int = 10  # Bregman k-means iterations on the subset
    refine_iters: int = 3  # restricted local step / global step rounds of the proposal
    Kmax: int = 200  # no births beyond this many clusters
    retry_change: float = 0.1  # retry a failed target once its size changed by this fraction


@dataclass
class MergeConfig:
    """Merge proposals (spec 01 §5): pairs chosen by m-score at lap start, exact test at lap end."""

    start_lap: int = 2
    max_pairs: int = 100  # M: candidate pairs tracked per lap
    max_per_cluster: int = 5  # candidate partners per cluster
    retry_change: float = 0.1  # retry a rejected pair once a member's size changed by this fraction


@dataclass
class DeleteConfig:
    """Delete proposals (spec 01 §7): move a small cluster's mass to the others, exact test at lap end."""

    start_lap: int = 2
    max_fails: int = 2  # stop targeting a cluster after this many rejections (until it changes)
    max_size_frac: float = 0.05  # only clusters holding at most this fraction of the data
    absorb: int = 5  # size of the absorbing set A: the clusters most alike to the target
    retry_change: float = 0.1


@dataclass
class MovesConfig:
    """Proposal moves, switched on by listing them: ``moves=[birth,merge,delete]``."""

    birth: Optional[BirthConfig] = None
    merge: Optional[MergeConfig] = None
    delete: Optional[DeleteConfig] = None


@dataclass
class TrainConfig:
    """Top level of ``bnpvi-train``."""

    model: ModelConfig = MISSING
    obs: ObsConfig = MISSING
    alg: AlgConfig = MISSING
    init: InitConfig = MISSING
    data: DataConfig = MISSING
    moves: MovesConfig = field(default_factory=MovesConfig)  # proposal moves (memo only)
    seed: int = 0  # seeds every random choice of the run
    checkpoint_every: int = 10  # laps between checkpoints (one is always written at the end)
    resume: Optional[str] = None  # RUN_DIR of a run to continue from its latest checkpoint


def register_configs() -> None:
    """Put the schema in Hydra's ConfigStore (called before composing).

    ``train.yaml`` lists ``train_schema`` first in its defaults, so every group
    option is merged into a typed node (``AlgConfig`` ...) and an unknown key in a
    YAML file or on the command line fails with the key's name.
    """
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def check_config(cfg) -> None:
    """Raise if ``cfg`` has a key the schema does not know (e.g. one appended with ``+key=``)."""
    plain = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    plain.pop("hydra", None)
    OmegaConf.merge(OmegaConf.structured(TrainConfig), plain)
