"""Structured-config schemas: one per option of every Hydra group of ``bnpvi-train``.

Each option's YAML file (``conf/<group>/<option>.yaml``) extends its schema
(``defaults: [<option>_schema]``) and writes the option's default values; the
schema says which keys exist and what type they have, so a mistyped or unknown
key fails at start-up with a message naming it, and ``--help`` shows only the
keys of the chosen options. Defaults live in the YAML files alone.

Options that build an object name it with ``_target_`` (Hydra ``instantiate``):
the allocation model (``model``) and the observation family (``obs``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


# ---------------------------------------------------------------- model
@dataclass
class DPMixConfig:
    """DP mixture (stick-breaking prior; Hughes 2016 thesis §3.2)."""

    _target_: str = "bnpvi.alloc.DPMixAlloc"
    gamma: float = MISSING  # DP concentration γ: larger values favour more clusters


@dataclass
class FiniteMixConfig:
    """Finite mixture with a symmetric Dirichlet(γ/K) prior on the weights (K fixed)."""

    _target_: str = "bnpvi.alloc.FiniteMixAlloc"
    gamma: float = MISSING  # total prior concentration γ (each weight gets γ/K)


@dataclass
class FiniteHMMConfig:
    """Finite sticky HMM: symmetric Dirichlet rows plus a sticky self-transition bias (K fixed)."""

    _target_: str = "bnpvi.alloc.FiniteHMMAlloc"
    alpha: float = MISSING  # total concentration α of each transition row (each entry α/K)
    start_alpha: float = MISSING  # total concentration α_0 of the start distribution
    sticky_kappa: float = MISSING  # κ ≥ 0 added to each row's self-transition (not obs.kappa)


@dataclass
class HDPHMMConfig:
    """Sticky HDP-HMM: transition rows Dirichlet around shared top-level probabilities (Hughes 2016 thesis Ch. 6)."""

    _target_: str = "bnpvi.alloc.HDPHMMAlloc"
    gamma: float = MISSING  # top-level concentration γ: larger values favour more states
    alpha: float = MISSING  # concentration α of each transition row around the top level
    start_alpha: float = MISSING  # concentration α_0 of the start distribution around the top level
    sticky_kappa: float = MISSING  # κ ≥ 0 added to each row's self-transition (not obs.kappa)


@dataclass
class TopicLocalConfig:
    """The document-level local step of the topic models (Hughes 2016 thesis Alg. 5.1-5.2)."""

    max_iters: int = MISSING  # cap on a document's iterations
    conv_thr: float = MISSING  # a document stops when no N_dk moves by more than this
    n_restarts: int = MISSING  # sparse restart proposals per document (0: none)
    restart_iters: int = MISSING  # local iterations of each restart proposal
    warm_start: bool = MISSING  # memo: start each document from its topic counts of the batch's last visit


@dataclass
class HDPTopicConfig(TopicLocalConfig):
    """HDP topic model: document topic weights Dirichlet around shared top-level probabilities (thesis Ch. 5)."""

    _target_: str = "bnpvi.alloc.HDPTopicAlloc"
    gamma: float = MISSING  # top-level concentration γ: larger values favour more topics
    alpha: float = MISSING  # concentration α of each document's topic weights around the top level
    learn_alpha: bool = MISSING  # learn α by empirical Bayes (maximise the ELBO over α at every global step)


@dataclass
class LDAConfig(TopicLocalConfig):
    """Latent Dirichlet allocation: K topics, document weights Dirichlet(α/K, ..., α/K) (K fixed)."""

    _target_: str = "bnpvi.alloc.LDAAlloc"
    alpha: float = MISSING  # total concentration α of each document's topic weights (each topic α/K)


# ---------------------------------------------------------------- obs
@dataclass
class GaussConfig:
    """Full-covariance Gaussian, Normal-Wishart prior; unset values are data-driven."""

    _target_: str = "bnpvi.obs.Gauss.from_config"
    sF: float = MISSING  # prior expected covariance = sF x the data covariance scale
    prior_cov: str = MISSING  # eye | diag | cov: which data covariance scale
    nu: Optional[float] = MISSING  # Wishart degrees of freedom ν̄ (null: D + 2)
    kappa: float = MISSING  # prior pseudo-count κ̄ of the mean
    mean: Optional[List[float]] = MISSING  # prior mean m̄ (null: the data mean)


@dataclass
class DiagGaussConfig(GaussConfig):
    """Diagonal-covariance Gaussian, Normal-Gamma prior per dimension."""

    _target_: str = "bnpvi.obs.DiagGauss.from_config"


@dataclass
class ZeroMeanGaussConfig:
    """Zero-mean full-covariance Gaussian, Wishart prior."""

    _target_: str = "bnpvi.obs.ZeroMeanGauss.from_config"
    sF: float = MISSING
    prior_cov: str = MISSING
    nu: Optional[float] = MISSING


@dataclass
class ARGaussConfig:
    """First-order vector autoregression x_t ~ N(A x_{t-1}, Λ⁻¹), matrix-normal-Wishart prior (sequences only)."""

    _target_: str = "bnpvi.obs.ARGauss.from_config"
    nu: Optional[float] = MISSING  # Wishart degrees of freedom ν̄ (null: D + 2)
    sF: float = MISSING  # prior expected noise covariance = sF x the first-difference covariance scale
    sV: float = MISSING  # column precision of A = sV x the first-difference covariance scale
    prior_cov: str = MISSING  # eye | diag | cov: which scale of the covariance of x_t - x_{t-1}
    mean_matrix: str = MISSING  # eye | zero: prior mean of A


@dataclass
class MultConfig:
    """Multinomial over a vocabulary (bag of words), symmetric Dirichlet prior."""

    _target_: str = "bnpvi.obs.Mult.from_config"
    lam: float = MISSING  # Dirichlet pseudo-count λ̄ of every word in every cluster


@dataclass
class BernConfig:
    """Independent Bernoulli per dimension (binary vectors), Beta prior."""

    _target_: str = "bnpvi.obs.Bern.from_config"
    lam1: float = MISSING  # Beta(λ̄₁, λ̄₀): pseudo-count of a 1
    lam0: float = MISSING  # ... and of a 0


# ---------------------------------------------------------------- alg
@dataclass
class AlgConfig:
    """Keys every algorithm has."""

    name: str = MISSING
    n_laps: int = MISSING  # maximum number of passes through the data
    converge_thr: float = MISSING  # stop when |ΔELBO| / N over a lap is below this (topic models: N tokens) ...
    count_thr: float = MISSING  # ... and no count N_k moved by more than this many atoms (topic models: documents)
    n_batches: Optional[int] = MISSING  # split a file converted without fixed batches into this many
    sparse_L: Optional[int] = MISSING  # keep at most L responsibilities per atom (null: dense; mixtures, topics)


@dataclass
class SOVBConfig(AlgConfig):
    """Stochastic VB: step t has rate (rate_delay + t)^(-rate_exponent)."""

    rate_delay: float = MISSING
    rate_exponent: float = MISSING  # in (0.5, 1]


# ---------------------------------------------------------------- init
@dataclass
class InitConfig:
    """Initialisation from K atoms chosen by Bregman k-means++ (kmeanspp) or at random (random)."""

    name: str = MISSING
    K: Optional[int] = MISSING  # initial number of clusters (null: 1 when births are on, else 8)
    n_samples: int = MISSING  # atoms sampled for seeding
    kmeans_iters: Optional[int] = MISSING  # Bregman k-means iterations after seeding (null: the model's default)


@dataclass
class KmeansppConfig(InitConfig):
    n_trials: Optional[int] = MISSING  # candidates per seed (null: 2 + ln K)


# ---------------------------------------------------------------- data
@dataclass
class ToyConfig:
    """The built-in toy set that fits the model (points for mixtures, bars documents for topic models,
    sequences for HMMs)."""

    name: str = MISSING
    seed: int = MISSING
    n_batches: Optional[int] = MISSING  # batches of the generated file (null: 5 points, 4 documents, 8 sequences)
    n_atoms: int = MISSING  # points: how many
    n_docs: int = MISSING  # topic models: documents of the bars corpus (10 % held out)
    n_seqs: int = MISSING  # sequences: how many ...
    seq_length: int = MISSING  # ... and how long


@dataclass
class HDF5Config:
    """A file written by ``bnpvi-data convert``."""

    name: str = MISSING
    path: str = MISSING


# ---------------------------------------------------------------- moves
@dataclass
class BirthConfig:
    """Birth proposals (Hughes 2016 thesis §4.2): split a poorly fit cluster, seeded by k-means on
    its data in the lap's first batch and judged after the lap has refreshed every batch. For HMMs
    (thesis §6.5.2): new states cut from a run of one state in a sequence, judged at the batch;
    n_new, min_batch_mass, eps, max_atoms and kmeans_iters do not apply there."""

    start_lap: int = MISSING  # first lap with births
    stop_lap: Optional[int] = None  # last lap with births (null: no limit)
    max_per_lap: int = MISSING  # births proposed per lap (distinct targets; HMMs: spread over the batches)
    n_new: int = MISSING  # J': fresh clusters per birth (fewer if the target has little data)
    min_batch_mass: float = MISSING  # skip targets with less mass N_bk in the batch
    eps: float = MISSING  # atoms with r_nk > eps form the k-means subset
    max_atoms: int = MISSING  # cap on that subset
    kmeans_iters: int = MISSING  # Bregman k-means iterations on the subset
    refine_iters: int = MISSING  # local step / global step rounds of the proposal on the seeding batch
    refine_laps: int = MISSING  # mixtures, topic models: laps a rejected proposal may live, refined by its whole-data summaries
    Kmax: int = MISSING  # no births beyond this many clusters
    retry_change: float = MISSING  # retry a failed target once its size changed by this fraction
    min_block: int = MISSING  # HMMs: births cut new states from a run of one state this long or longer
    max_stuck: int = MISSING  # when every cluster failed: retry the least recently tried for this many laps


@dataclass
class MergeConfig:
    """Merge proposals (thesis §4.1): pairs chosen by m-score at lap start, exact test at lap end."""

    start_lap: int = MISSING
    max_pairs: int = MISSING  # candidate pairs tracked per lap
    max_per_cluster: int = MISSING  # candidate partners per cluster
    retry_change: float = MISSING  # retry a rejected pair once a member's size changed by this fraction


@dataclass
class DeleteConfig:
    """Delete proposals (thesis §4.3): move a small cluster's mass to the others, exact test at lap end."""

    start_lap: int = MISSING
    max_per_lap: int = MISSING  # deletes tracked per lap (judged in turn; a change drops the others)
    max_fails: int = MISSING  # stop targeting a cluster after this many rejections (until it changes)
    max_size_frac: float = MISSING  # only clusters holding at most this fraction of the data
    absorb: int = MISSING  # size of the absorbing set A: the clusters most alike to the target
    retry_change: float = MISSING
    max_skip: int = MISSING  # after laps of rejected deletes, wait 0, 1, 3, ... up to this many laps (0: never)


@dataclass
class ReassignConfig:
    """Reassign proposals (our own move, mixtures with obs=mult or gauss): single atoms moved to the cluster that
    explains them best without their own data, greedily while the exact whole-data ELBO rises."""

    start_lap: int = MISSING
    max_atoms: int = MISSING  # candidate atoms kept per batch and lap (those with the largest screened gain)


@dataclass
class MovesConfig:
    """Proposal moves, switched on by listing them: ``moves=[birth,merge,delete]``."""

    birth: Optional[BirthConfig] = None
    merge: Optional[MergeConfig] = None
    delete: Optional[DeleteConfig] = None
    reassign: Optional[ReassignConfig] = None


# ---------------------------------------------------------------- top level
@dataclass
class TrainConfig:
    """Top level of ``bnpvi-train``; each group node is typed by its option's schema."""

    model: Any = MISSING
    obs: Any = MISSING
    alg: Any = MISSING
    init: Any = MISSING
    data: Any = MISSING
    moves: MovesConfig = field(default_factory=MovesConfig)  # proposal moves (memo only)
    seed: int = MISSING  # seeds every random choice of the run
    checkpoint_every: int = MISSING  # laps between checkpoints (one is always written at the end)
    eval_every: int = MISSING  # laps between evaluations (sequences: Hamming; topic models: held-out log-likelihood)
    heldout_split: str = MISSING  # halves | types: document-completion split of the held-out documents
    heldout_seed: int = MISSING  # seed of that split (the held-out documents themselves are chosen by the file)
    resume: Optional[str] = None  # RUN_DIR of a run to continue from its latest checkpoint


SCHEMAS = {
    "model": {"dp_mix": DPMixConfig, "finite_mix": FiniteMixConfig, "finite_hmm": FiniteHMMConfig,
              "hdp_hmm": HDPHMMConfig, "hdp_topic": HDPTopicConfig, "lda": LDAConfig},
    "obs": {"gauss": GaussConfig, "diag_gauss": DiagGaussConfig, "zm_gauss": ZeroMeanGaussConfig,
            "mult": MultConfig, "bern": BernConfig, "ar_gauss": ARGaussConfig},
    "alg": {"vb": AlgConfig, "memo": AlgConfig, "sovb": SOVBConfig},
    "init": {"kmeanspp": KmeansppConfig, "random": InitConfig},
    "data": {"toy": ToyConfig, "hdf5": HDF5Config},
    "moves": {"birth": BirthConfig, "merge": MergeConfig, "delete": DeleteConfig, "reassign": ReassignConfig},
}
"""Group -> option -> schema; each is stored as ``<group>/<option>_schema``."""


def run_dir(resume, default):
    """Hydra's output directory: ``default`` for a fresh run, the absolute RUN_DIR of ``resume=RUN_DIR``."""
    return default if resume is None else str(Path(str(resume)).expanduser().resolve())


def hydra_subdir(resume, stamp) -> str:
    """Where Hydra saves the job's config: ``.hydra``, or ``.hydra/resumed-<stamp>`` when resuming (so the
    config a run was started with is never overwritten)."""
    return ".hydra" if resume is None else f".hydra/resumed-{stamp}"


def register_configs() -> None:
    """Put the schemas in Hydra's ConfigStore and the resolvers of conf/train.yaml in OmegaConf
    (called before composing)."""
    OmegaConf.register_new_resolver("bnpvi_run_dir", run_dir, replace=True)
    OmegaConf.register_new_resolver("bnpvi_hydra_subdir", hydra_subdir, replace=True)
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for group, options in SCHEMAS.items():
        for option, schema in options.items():
            if group == "moves":  # each move lives at moves.<name>
                store.store(group=group, name=f"{option}_schema", node=schema, package=f"moves.{option}")
            else:
                store.store(group=group, name=f"{option}_schema", node=schema)


def schema_of(group: str, node) -> tuple[str | None, type | None]:
    """The schema of a composed group node: found by its ``_target_`` (model, obs) or ``name``."""
    for option, schema in SCHEMAS[group].items():
        target = getattr(schema, "_target_", None)
        if (target is not None and node.get("_target_") == target) or node.get("name") == option:
            return option, schema
    return None, None


def check_config(cfg) -> None:
    """Raise if ``cfg`` has a key its schemas do not know (e.g. one appended with ``+key=``)."""
    plain = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    plain.pop("hydra", None)
    OmegaConf.merge(OmegaConf.structured(TrainConfig), plain)
    for group in ("model", "obs", "alg", "init", "data"):
        node = plain.get(group)
        option, schema = schema_of(group, node) if node is not None else (None, None)
        if schema is None:
            raise ValueError(f"{group}: not one of the options {sorted(SCHEMAS[group])}")
        try:
            OmegaConf.merge(OmegaConf.structured(schema), node)
        except Exception as err:
            key = getattr(err, "key", None)
            if key is None:
                raise ValueError(f"{group}: {str(err).splitlines()[0]}") from None
            raise ValueError(f"unknown key {group}.{key} for {group}={option}") from None
