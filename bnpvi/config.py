"""Structured-config schemas: one per option of every Hydra group of ``bnpvi-train``.

Each option's YAML file (``conf/<group>/<option>.yaml``) extends its schema
(``defaults: [/schema/<group>/<option>@_here_]``) and writes the option's default
values; the schema says which keys exist, what type they have and what each one
means, so a mistyped or unknown key fails at start-up with a message naming it.
Defaults live in the YAML files alone; descriptions live here alone: every key is
declared with :func:`key`, whose one-line description ``bnpvi-train --help`` shows
beside the key's default, and an option's description is the first paragraph of
its schema's docstring. The schemas are stored under the group ``schema/``, so they
are never offered as options of the groups themselves.

Options that build an object name it with ``_target_`` (Hydra ``instantiate``):
the allocation model (``model``) and the observation family (``obs``); the other
options name themselves with ``name``. Neither is a key for the user to set.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

class ConfigError(ValueError):
    """A composed config with a key or option its schemas do not know (:func:`check_config`); one line."""


INTERNAL_KEYS = ("_target_", "name")
"""Keys an option sets for itself (what it builds, or its name): not described, not for the command line."""


def key(description: str, default: Any = MISSING) -> Any:
    """A schema field with its one-line ``description``; its default lives in the option's YAML file
    (``default`` is for keys some YAML files leave out)."""
    return field(default=default, metadata={"help": description})


def describe(schema: type, name: str) -> str:
    """The one-line description of key ``name`` of ``schema`` ("" when it has none)."""
    for f in dataclasses.fields(schema):
        if f.name == name:
            return f.metadata.get("help", "")
    return ""


def summary_of(schema: type) -> str:
    """The first paragraph of ``schema``'s docstring, on one line: the description of its option."""
    doc = (schema.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.replace("``", "`").split())


# ---------------------------------------------------------------- model
@dataclass
class DPMixConfig:
    """DP mixture (stick-breaking prior; Hughes 2016 thesis §3.2)."""

    _target_: str = "bnpvi.alloc.DPMixAlloc"
    gamma: float = key("DP concentration γ: larger values favour more clusters")
    temperature: Optional[float] = key("deterministic annealing: the first lap's temperature T_0 ≥ 1; every data term of "
                                       "the ELBO is divided by T, falling geometrically to 1 over temperature_laps laps "
                                       "(1: none; null: with births the family's own, 30 for gauss and diag_gauss; else 1)")
    temperature_laps: int = key("laps over which the temperature falls from model.temperature to 1 (at most a third of "
                                "alg.n_laps, fixed when the run starts); a lap that accepts a birth does not count (at "
                                "most temperature_laps such laps)")


@dataclass
class FiniteMixConfig:
    """Finite mixture with a symmetric Dirichlet(γ/K) prior on the weights (K fixed)."""

    _target_: str = "bnpvi.alloc.FiniteMixAlloc"
    gamma: float = key("total prior concentration γ (each weight gets γ/K)")
    temperature: float = key("deterministic annealing: the first lap's temperature T_0 ≥ 1; every data term of the ELBO "
                             "is divided by T, falling geometrically to 1 over temperature_laps laps (1: none)")
    temperature_laps: int = key("laps over which the temperature falls from model.temperature to 1 (at most a third of "
                                "alg.n_laps, fixed when the run starts); a lap that accepts a birth does not count (at "
                                "most temperature_laps such laps)")


@dataclass
class FiniteHMMConfig:
    """Finite sticky HMM: symmetric Dirichlet rows plus a sticky self-transition bias (K fixed)."""

    _target_: str = "bnpvi.alloc.FiniteHMMAlloc"
    alpha: float = key("total concentration α of each transition row (each entry α/K)")
    start_alpha: float = key("total concentration α_0 of the start distribution")
    sticky_kappa: float = key("κ ≥ 0 added to each row's self-transition (not obs.kappa)")


@dataclass
class HDPHMMConfig:
    """Sticky HDP-HMM: transition rows Dirichlet around shared top-level probabilities (Hughes 2016 thesis Ch. 6)."""

    _target_: str = "bnpvi.alloc.HDPHMMAlloc"
    gamma: float = key("top-level concentration γ: larger values favour more states")
    alpha: float = key("concentration α of each transition row around the top level")
    start_alpha: float = key("concentration α_0 of the start distribution around the top level")
    sticky_kappa: float = key("κ ≥ 0 added to each row's self-transition (not obs.kappa)")


@dataclass
class FiniteMMSBConfig:
    """Finite assortative MMSB: node memberships Dirichlet(alpha/K) (Stephenson 2015 §3)."""

    _target_: str = "bnpvi.alloc.FiniteMMSBAlloc"
    alpha: float = key("total concentration α of each node's memberships (each entry α/K)")
    epsilon: float = key("ε, the fixed edge probability between different communities")


@dataclass
class HDPMMSBConfig:
    """HDP assortative MMSB: node memberships Dirichlet around shared top-level probabilities (Stephenson 2015)."""

    _target_: str = "bnpvi.alloc.HDPMMSBAlloc"
    gamma: float = key("top-level concentration γ: larger values favour more communities")
    alpha: float = key("concentration α of each node's memberships around the top level")
    epsilon: float = key("ε, the fixed edge probability between different communities")
    moves_start_lap: int = key("no merge or delete before this lap (the memberships settle first)")


@dataclass
class TopicLocalConfig:
    """The document-level local step of the topic models (Hughes 2016 thesis Alg. 5.1-5.2)."""

    max_iters: int = key("cap on a document's iterations")
    conv_thr: float = key("a document stops when no N_dk moves by more than this")
    n_restarts: int = key("sparse restart proposals per document (0: none)")
    restart_iters: int = key("local iterations of each restart proposal")
    warm_start: bool = key("memo: start each document from its topic counts of the batch's last visit")


@dataclass
class HDPTopicConfig(TopicLocalConfig):
    """HDP topic model: document topic weights Dirichlet around shared top-level probabilities (thesis Ch. 5)."""

    _target_: str = "bnpvi.alloc.HDPTopicAlloc"
    gamma: float = key("top-level concentration γ: larger values favour more topics")
    alpha: float = key("concentration α of each document's topic weights around the top level")
    learn_alpha: bool = key("learn α by empirical Bayes (maximise the ELBO over α at every global step)")


@dataclass
class LDAConfig(TopicLocalConfig):
    """Latent Dirichlet allocation: K topics, document weights Dirichlet(α/K, ..., α/K) (K fixed)."""

    _target_: str = "bnpvi.alloc.LDAAlloc"
    alpha: float = key("total concentration α of each document's topic weights (each topic α/K)")


# ---------------------------------------------------------------- obs
@dataclass
class GaussConfig:
    """Full-covariance Gaussian, Normal-Wishart prior; unset values are data-driven."""

    _target_: str = "bnpvi.obs.Gauss.from_config"
    sF: float = key("prior expected covariance = sF x the data covariance scale")
    prior_cov: str = key("eye | diag | cov: which data covariance scale")
    nu: Optional[float] = key("Wishart degrees of freedom ν̄ (null: D + 2)")
    kappa: float = key("prior pseudo-count κ̄ of the mean")
    mean: Optional[List[float]] = key("prior mean m̄ (null: the data mean)")


@dataclass
class DiagGaussConfig(GaussConfig):
    """Diagonal-covariance Gaussian, Normal-Gamma prior per dimension."""

    _target_: str = "bnpvi.obs.DiagGauss.from_config"


@dataclass
class ZeroMeanGaussConfig:
    """Zero-mean full-covariance Gaussian, Wishart prior."""

    _target_: str = "bnpvi.obs.ZeroMeanGauss.from_config"
    sF: float = key("prior expected covariance = sF x the data covariance scale")
    prior_cov: str = key("eye | diag | cov: which data covariance scale")
    nu: Optional[float] = key("Wishart degrees of freedom ν̄ (null: D + 2)")


@dataclass
class ARGaussConfig:
    """First-order vector autoregression x_t ~ N(A x_{t-1}, Λ⁻¹), matrix-normal-Wishart prior (sequences only)."""

    _target_: str = "bnpvi.obs.ARGauss.from_config"
    nu: Optional[float] = key("Wishart degrees of freedom ν̄ (null: D + 2)")
    sF: float = key("prior expected noise covariance = sF x the first-difference covariance scale")
    sV: float = key("column precision of A = sV x the first-difference covariance scale")
    prior_cov: str = key("eye | diag | cov: which scale of the covariance of x_t - x_{t-1}")
    mean_matrix: str = key("eye | zero: prior mean of A")


@dataclass
class MultConfig:
    """Multinomial over a vocabulary (bag of words), symmetric Dirichlet prior."""

    _target_: str = "bnpvi.obs.Mult.from_config"
    lam: float = key("Dirichlet pseudo-count λ̄ of every word in every cluster")
    lam_start: Optional[float] = key("pseudo-count of the first lap, annealed down to lam over anneal_laps laps "
                                     "(null: no annealing)", None)
    anneal_laps: int = key("laps over which the prior is annealed from lam_start to lam (0: none); a lap that "
                           "accepts a birth does not count (at most anneal_laps such laps)", 0)


@dataclass
class BernConfig:
    """Independent Bernoulli per dimension (binary vectors), Beta prior."""

    _target_: str = "bnpvi.obs.Bern.from_config"
    lam1: float = key("Beta(λ̄₁, λ̄₀) prior: pseudo-count of a 1")
    lam0: float = key("Beta(λ̄₁, λ̄₀) prior: pseudo-count of a 0")


@dataclass
class LinkConfig:
    """Community link strengths of a graph model: Bernoulli φ_k per community, Beta(lam1, lam0) prior."""

    _target_: str = "bnpvi.obs.LinkStrength.from_config"
    lam1: float = key("Beta(λ̄₁, λ̄₀) prior of a community's strength: pseudo-count of an edge")
    lam0: float = key("... pseudo-count of a non-edge (≥ 0; 0 is the source's improper prior)")


# ---------------------------------------------------------------- alg
@dataclass
class AlgConfig:
    """Keys every algorithm has."""

    name: str = MISSING
    n_laps: int = key("maximum number of passes through the data")
    converge_thr: float = key("stop when |ΔELBO| / N over a lap is below this (topic models: N tokens) "
                              "and no count moved by more than count_thr")
    count_thr: float = key("largest change of a count N_k, per atom (topic models: per document), "
                           "that still counts as converged")
    n_batches: Optional[int] = key("split a file converted without fixed batches into this many")
    sparse_L: Optional[int] = key("keep at most L responsibilities per atom (null: dense; mixtures, topics)")
    workers: int = key("worker processes for the batches' work: 1 works in this process, more start a local Dask "
                       "cluster (pip install 'bnpvi[cluster]'); may change on resume")
    threads_per_worker: int = key("threads of each worker, its BLAS and OpenMP threads capped to match "
                                  "(workers x threads <= cores); may change on resume")
    scheduler: Optional[str] = key("ADDRESS (tcp://host:8786) of a running Dask scheduler whose workers do the "
                                   "batches' work, instead of alg.workers; may change on resume")
    n_init: int = key("restarts: R runs from seeds seed..seed+R-1, the one of highest final ELBO kept (each in "
                      "restarts/seed-S/); with alg.workers > 1 or alg.scheduler, the workers run the restarts")


@dataclass
class VBConfig(AlgConfig):
    """Full-data VB: a local step over every batch, then one global step (Hughes 2016 thesis §3.5.1)."""


@dataclass
class MemoConfig(AlgConfig):
    """Memoized VB: a global step after every batch from exact cached summaries; births, merges and deletes
    (Hughes 2016 thesis §3.5.3)."""

    batches_per_round: Optional[int] = key("P: batches worked on at once under the same globals, one global step "
                                           "per round (null: alg.workers; 1: plain memo); kept on resume")
    cache: str = key("memory | disk: where the per-batch caches live (disk: HDF5 files beside the checkpoints, "
                     "read and written one batch at a time); may change on resume")


@dataclass
class EMConfig(AlgConfig):
    """EM: MAP point estimates of a finite mixture or a finite HMM, all batches per iteration (Hughes 2016 thesis
    §2.3.3, §2.4)."""

    hard: bool = key("hard EM (Bregman k-means, thesis Alg. 2.1; an HMM: Viterbi training) instead of soft EM")


@dataclass
class SOVBConfig(AlgConfig):
    """Stochastic VB: natural-gradient steps on rescaled batch summaries (Hughes 2016 thesis §3.5.2)."""

    rate_delay: float = key("δ ≥ 0 of the step rate (δ + t)^(-κ)")
    rate_exponent: float = key("κ in (0.5, 1] of the step rate (δ + t)^(-κ)")


@dataclass
class TFSVIConfig(AlgConfig):
    """Truncation-free stochastic VI from 0 components: a collapsed Gibbs sample of each minibatch, then a
    stochastic step (Wang & Blei 2012, Alg. 2; docs/tfsvi.md)."""

    batch_docs: int = key("documents (points) per minibatch, |S|; the step rate is |S| / (documents seen, at most all)")
    sweeps: Optional[int] = key("Gibbs sweeps per minibatch after the sequential first pass (null: 3 for dp_mix, "
                                "10 for hdp_topic)")
    max_new: int = key("at most this many components opened per minibatch")
    prune_every: int = key("documents (points) between two prunings")
    prune_below: float = key("pruning removes the components whose effective count N_k is below this "
                             "(documents for dp_mix, tokens for hdp_topic)")
    reorder: str = key("minibatch | prune: re-order the sticks by size after every minibatch, or only when pruning")
    amplify: str = key("corpus | seen: a minibatch's summaries count n/|S| times, n the training documents (Eq. 11 as "
                       "printed), or n_t/|S| with n_t those seen so far (the first lap a sequential Gibbs start)")
    new_weight: str = key("rest | stick (dp_mix): a new component's weight is the whole remaining stick mass, or "
                          "that times the prior stick's mean 1/(1+gamma)")


# ---------------------------------------------------------------- init
@dataclass
class InitConfig:
    """Keys of the initialisations that seed K clusters from atoms."""

    name: str = MISSING
    K: Optional[int] = key("initial number of clusters (null: 1 when births are on, else 8; 50 for topic models)")
    n_samples: int = key("atoms sampled for seeding")
    kmeans_iters: Optional[int] = key("Bregman k-means iterations after seeding (null: 10 for topic models, else 0)")


@dataclass
class KmeansppConfig(InitConfig):
    """K atoms chosen by greedy Bregman k-means++ (Hughes 2016 thesis Alg. 2.2)."""

    n_trials: Optional[int] = key("candidates per seed (null: 2 + ln K)")


@dataclass
class RandomInitConfig(InitConfig):
    """K atoms chosen uniformly at random."""


@dataclass
class FromRunConfig:
    """K, cluster ids and global parameters of a finished (or interrupted) run: a warm start, on the same data
    or new data of the same kind; the model, the observation family and the dimension must match."""

    name: str = MISSING
    path: str = key("RUN_DIR of the run to start from (its model.h5)")


# ---------------------------------------------------------------- data
@dataclass
class ToyConfig:
    """The built-in toy set that fits the model (points for mixtures, bars documents for topic models,
    sequences for HMMs), generated once and cached."""

    name: str = MISSING
    seed: int = key("seed of the generated data")
    n_batches: Optional[int] = key("batches of the generated file (null: 5 points, 4 documents, 8 sequences)")
    n_atoms: int = key("mixtures: number of points")
    n_docs: int = key("topic models: documents of the bars corpus (10 % held out)")
    n_seqs: int = key("HMMs: number of sequences")
    seq_length: int = key("HMMs: steps per sequence")
    n_nodes: int = key("graph models: nodes of the generated 6-community graph (10 % of the edges held out)")


@dataclass
class HDF5Config:
    """A file written by ``bnpvi-data convert`` (data.path=FILE alone picks this option)."""

    name: str = MISSING
    path: str = key("the .h5 file")


# ---------------------------------------------------------------- moves
@dataclass
class BirthConfig:
    """Birth proposals (Hughes 2016 thesis §4.2): split a poorly fit cluster, judged by the exact whole-data ELBO.

    Mixtures and topic models seed the split by k-means on the cluster's data in the lap's first batch and
    judge it after the lap has refreshed every batch. HMMs (thesis §6.5.2) cut new states from a run of one
    state in a sequence and judge them at the batch; n_new, min_batch_mass, eps, max_atoms and kmeans_iters
    do not apply there."""

    start_lap: int = key("first lap with births")
    stop_lap: Optional[int] = key("last lap with births (null: no limit)", default=None)
    max_per_lap: int = key("births proposed per lap (distinct targets; topic models: at most 6, HMMs: at most 3, "
                           "spread over the batches)")
    n_new: int = key("J': fresh clusters per birth (fewer if the target has little data)")
    abundance: Optional[int] = key("a target holding a share s of the data gets max(n_new, ceil(abundance * s)) fresh "
                                   "clusters, so that a birth of one cluster that holds everything starts as many as "
                                   "an abundant start (null: the model's own, AllocModel.birth_abundance: 100 for "
                                   "topic models, 0 elsewhere)", default=None)
    min_batch_mass: float = key("skip targets with less mass N_bk in the batch")
    eps: float = key("atoms with r_nk > eps form the k-means subset")
    max_atoms: int = key("at most this many atoms in the k-means subset")
    kmeans_iters: int = key("Bregman k-means iterations on the subset")
    seeding: str = key("kmeans: fresh clusters by Bregman k-means++ and k-means; dense (mixtures): also, on alternate laps "
                       "once a birth of the largest cluster failed, its n_new - 1 tightest groups of group_size "
                       "atoms and the rest of it (docs/births.md)")
    group_size: int = key("atoms in each group of seeding=dense")
    refine_iters: int = key("local step / global step rounds of the proposal on the seeding batch")
    refine_laps: int = key("mixtures, topic models: a rejected proposal lives on (refined by its whole-data "
                           "summaries) while, at its last lap's pace, it would win within this many laps; "
                           "twice this many laps at most")
    Kmax: int = key("no births beyond this many clusters")
    retry_change: float = key("retry a failed target once its size changed by this fraction")
    min_block: int = key("HMMs: births cut new states from a run of one state this long or longer")
    merge_cleanup: bool = key("HMMs: each fresh state of a proposal is also tried merged into the existing state, other "
                              "than the target, that its data fit best; kept where the exact ELBO rises")
    max_stuck: int = key("places left free by unblocked targets retry the least recently failed ones, until this many laps in a row fail")


@dataclass
class SplitConfig:
    """Sub-cluster splits (mixtures; bnpvi.moves.split): every cluster carries two sub-clusters refined in every
    lap, and its split into them is judged by the exact whole-data ELBO at every lap's end."""

    start_lap: int = key("first lap with splits")
    Kmax: int = key("no splits beyond this many clusters")


@dataclass
class MergeConfig:
    """Merge proposals (thesis §4.1): pairs chosen by m-score at lap start, exact test at lap end."""

    start_lap: int = key("first lap with merges")
    max_pairs: int = key("candidate pairs tracked per lap")
    max_per_cluster: int = key("candidate partners per cluster")
    retry_change: float = key("retry a rejected pair once a member's size changed by this fraction")


@dataclass
class DeleteConfig:
    """Delete proposals (thesis §4.3): move a small cluster's mass to the others, exact test at lap end."""

    start_lap: int = key("first lap with deletes")
    max_per_lap: int = key("deletes tracked per lap (judged in turn; a change drops the others)")
    max_fails: int = key("stop targeting a cluster after this many rejections (until it changes)")
    max_size_frac: float = key("only clusters holding at most this fraction of the data")
    absorb: int = key("size of the absorbing set A: the clusters most alike to the target")
    retry_change: float = key("retry a rejected target once its size changed by this fraction")
    max_skip: int = key("after laps of rejected deletes, wait 0, 1, 3, ... up to this many laps (0: never)")


@dataclass
class ReassignConfig:
    """Reassign proposals (our own move, mixtures with obs=mult or gauss): single atoms moved to the cluster that
    explains them best without their own data, greedily while the exact whole-data ELBO rises."""

    start_lap: int = key("first lap with reassigns")
    max_atoms: int = key("candidate atoms kept per batch and lap (those with the largest screened gain)")


@dataclass
class MovesConfig:
    """Proposal moves, switched on by listing them: ``moves=[birth,merge,delete]`` (alg=memo only)."""

    split: Optional[SplitConfig] = None
    birth: Optional[BirthConfig] = None
    merge: Optional[MergeConfig] = None
    delete: Optional[DeleteConfig] = None
    reassign: Optional[ReassignConfig] = None


# ---------------------------------------------------------------- top level
GROUPS = {
    "model": "the allocation model: mixture, topic model or HMM",
    "obs": "the observation family: the distribution of an atom given its cluster",
    "alg": "the inference algorithm",
    "init": "how the first clusters are made",
    "data": "the data set",
    "moves": "proposal moves that change K, a list: moves=[birth,merge,delete] (alg=memo only)",
}
"""Group -> its one-line description."""


@dataclass
class TrainConfig:
    """Top level of ``bnpvi-train``; each group node is typed by its option's schema."""

    model: Any = MISSING
    obs: Any = MISSING
    alg: Any = MISSING
    init: Any = MISSING
    data: Any = MISSING
    moves: MovesConfig = field(default_factory=MovesConfig)
    seed: int = key("seeds every random choice of the run")
    checkpoint_every: int = key("laps between checkpoints (one is always written at the end)")
    checkpoints: bool = key("write checkpoints; false: none, and the run cannot be resumed (the estimators' "
                            "fits without an output_dir)")
    eval_every: int = key("laps between evaluations (sequences: Hamming; held-out data: log-likelihood)")
    plots: bool = key("draw elbo_K.png (and segmentation.png for sequences) when the run ends")
    heldout_split: str = key("halves | types: document-completion split of held-out documents")
    heldout_seed: int = key("seed of that split (the held-out documents themselves are chosen by the file)")
    resume: Optional[str] = key("RUN_DIR of a run to continue from its latest checkpoint", default=None)


SCHEMAS = {
    "model": {"dp_mix": DPMixConfig, "finite_mix": FiniteMixConfig, "finite_hmm": FiniteHMMConfig,
              "hdp_hmm": HDPHMMConfig, "hdp_topic": HDPTopicConfig, "lda": LDAConfig,
              "hdp_mmsb": HDPMMSBConfig, "finite_mmsb": FiniteMMSBConfig},
    "obs": {"gauss": GaussConfig, "diag_gauss": DiagGaussConfig, "zm_gauss": ZeroMeanGaussConfig,
            "mult": MultConfig, "bern": BernConfig, "ar_gauss": ARGaussConfig,
            "link": LinkConfig},
    "alg": {"vb": VBConfig, "memo": MemoConfig, "sovb": SOVBConfig, "em": EMConfig, "tfsvi": TFSVIConfig},
    "init": {"kmeanspp": KmeansppConfig, "random": RandomInitConfig, "from_run": FromRunConfig},
    "data": {"toy": ToyConfig, "hdf5": HDF5Config},
    "moves": {"split": SplitConfig, "birth": BirthConfig, "merge": MergeConfig, "delete": DeleteConfig, "reassign": ReassignConfig},
}
"""Group -> option -> schema; each is stored as ``schema/<group>/<option>``."""


def run_dir(resume, default):
    """Hydra's output directory: ``default`` for a fresh run, the absolute RUN_DIR of ``resume=RUN_DIR``."""
    return default if resume is None else str(Path(str(resume)).expanduser().resolve())


RESUMABLE_KEYS = frozenset({"alg.n_laps", "alg.converge_thr", "alg.count_thr", "checkpoint_every", "alg.workers",
                            "alg.threads_per_worker", "alg.scheduler", "alg.cache", "alg.batches_per_round"})
"""The keys that may change when a run is resumed: when it stops, how often it checkpoints, where the work runs
and where memo's caches live. Any other would make the resumed run differ from an uninterrupted one
(``alg.batches_per_round`` is checked against the checkpoint by the runner, which refuses a different one)."""


def changed_keys(before, after, ignore=RESUMABLE_KEYS | {"resume"}) -> list[tuple[str, Any, Any]]:
    """The dotted keys whose values differ between the configs ``before`` and ``after`` (interpolations
    compared as written), with both values (``"<absent>"`` where a config lacks the key); keys in ``ignore``
    and below them are left out."""
    def flat(node, prefix=""):
        items = node.items() if isinstance(node, dict) else ()
        out = {}
        for name, value in items:
            dotted = f"{prefix}{name}"
            if isinstance(value, dict) and value:
                out.update(flat(value, dotted + "."))
            else:
                out[dotted] = value
        return out

    a, b = (flat(OmegaConf.to_container(OmegaConf.create(c) if isinstance(c, (dict, str)) else c, resolve=False))
            for c in (before, after))
    skipped = tuple(ignore)
    return [(k, a.get(k, "<absent>"), b.get(k, "<absent>")) for k in sorted(a.keys() | b.keys())
            if a.get(k, "<absent>") != b.get(k, "<absent>")
            and not any(k == s or k.startswith(s + ".") for s in skipped)]


def initial_clusters(*, _root_):
    """``init.K``, or the 8 clusters a finite model starts with when it is null or absent (``init=from_run``;
    ``AllocModel.abundant_K``): the resolver ``${bnpvi_init_K:}`` of alg=em's default priors (conf/alg_model/)."""
    init = _root_.get("init") or {}
    K = init.get("K") if "K" in init else None
    return 8 if K is None else K


def register_resolvers() -> None:
    """Put the resolvers that a saved run's model and obs nodes may use in OmegaConf (``${bnpvi_init_K:}``), so that
    a config read back from a run directory builds its model in any process."""
    OmegaConf.register_new_resolver("bnpvi_init_K", initial_clusters, replace=True)


def register_configs() -> None:
    """Put the schemas in Hydra's ConfigStore and the resolvers of conf/train.yaml in OmegaConf
    (called before composing)."""
    OmegaConf.register_new_resolver("bnpvi_run_dir", run_dir, replace=True)
    register_resolvers()
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for group, options in SCHEMAS.items():
        for option, schema in options.items():
            store.store(group=f"schema/{group}", name=option, node=schema)


def schema_of(group: str, node) -> tuple[str | None, type | None]:
    """The schema of a composed group node: found by its ``_target_`` (model, obs) or ``name``."""
    for option, schema in SCHEMAS[group].items():
        target = getattr(schema, "_target_", None)
        if (target is not None and node.get("_target_") == target) or node.get("name") == option:
            return option, schema
    return None, None


def user_keys(schema: type) -> list[str]:
    """The keys of ``schema`` a user sets (all but :data:`INTERNAL_KEYS`), in declaration order."""
    return [f.name for f in dataclasses.fields(schema) if f.name not in INTERNAL_KEYS]


def unknown_key(full_key: str, schema_name: str | None = None) -> str:
    """One line for a key that the schema named ``schema_name`` (default: the top level) does not have,
    listing the keys it does have."""
    if schema_name == MovesConfig.__name__:
        return f"unknown move {full_key} (the moves are {', '.join(SCHEMAS['moves'])})"
    for group, options in SCHEMAS.items():
        for option, schema in options.items():
            if schema.__name__ == schema_name:
                prefix = full_key.rsplit(".", 1)[0] if "." in full_key else group
                keys = ", ".join(f"{prefix}.{k}" for k in user_keys(schema))
                return f"unknown key {full_key} for {group}={option} (its keys: {keys})"
    top = [k for k in user_keys(TrainConfig) if k not in GROUPS]
    return f"unknown key {full_key} (the top-level keys are {', '.join(top)}; the groups {', '.join(GROUPS)})"


def check_config(cfg) -> None:
    """A one-line ConfigError if ``cfg`` has a key its schemas do not know (e.g. one appended with ``+key=``)."""
    plain = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    plain.pop("hydra", None)
    for name in plain:
        if name not in GROUPS and name not in user_keys(TrainConfig):
            raise ConfigError(unknown_key(str(name)))
    nodes = []
    for group in ("model", "obs", "alg", "init", "data"):
        node = plain.get(group)
        option, schema = schema_of(group, node) if node is not None else (None, None)
        if schema is None:
            raise ConfigError(f"{group}: not one of the options {', '.join(SCHEMAS[group])}")
        nodes.append((group, node, schema))
    for move, node in (plain.get("moves") or {}).items():
        if move not in SCHEMAS["moves"]:
            raise ConfigError(unknown_key(f"moves.{move}", MovesConfig.__name__))
        if node is not None:
            nodes.append((f"moves.{move}", node, SCHEMAS["moves"][move]))
    for prefix, node, schema in nodes:
        for name in node:
            if name not in INTERNAL_KEYS and name not in user_keys(schema):
                raise ConfigError(unknown_key(f"{prefix}.{name}", schema.__name__))
