"""The runner: wires a composed config to data, model and algorithm, and drives the run.

It owns everything around the algorithm: the run directory's trace, checkpoints
(every ``checkpoint_every`` laps, on Ctrl-C/SIGTERM, and at the end), the final
model, the plot, evaluation against true labels and, for topic models on a file with
held-out documents, by document completion (:mod:`bnpvi.learn.heldout`), and resuming
from a checkpoint so that the resumed run ends exactly where the uninterrupted one would have.
A run starts from K seeds or from a saved run's globals (``init=from_run``); an interrupted run
writes its files for the state it stopped in; a run that cannot start leaves no run directory.
The batches' work runs in this process or on Dask workers (:func:`bnpvi.learn.pool.open_pool`),
which the run closes whatever way it ends.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from bnpvi.alloc.hmm import HMMAlloc
from bnpvi.alloc.mixture import MixtureAlloc
from bnpvi.alloc.mmsb import MMSBAlloc
from bnpvi.alloc.topic import TopicAlloc
from bnpvi.config import changed_keys, schema_of
from bnpvi.data.graph_toy import ensure_toy_graph
from bnpvi.data.heldout import check_seed
from bnpvi.data.store import BatchStore
from bnpvi.data.toy import ensure_toy, ensure_toy_bars, ensure_toy_sequences
from bnpvi.data.writes import write_text
from bnpvi.errors import BnpviError, check_int
from bnpvi.io.assignments import write_assignments
from bnpvi.io.checkpoint import load_checkpoint, save_checkpoint
from bnpvi.io.model_file import write_model
from bnpvi.io.plots import plot_trace
from bnpvi.io.run_dir import (RunDirLock, RunState, checkpoint_path, refuse_start, remove_if_empty,
                              remove_partial_writes, run_state)
from bnpvi.io.segmentation import Segmentation, path_scores_of_counts, write_segmentation_outputs
from bnpvi.io.topics import topic_word_probs, write_doc_topics, write_topics
from bnpvi.io.trace import (ANNEALING_COLUMNS, CLUSTER_COLUMNS, MOVE_COLUMNS, MOVES, SEQUENCE_SCORE_COLUMNS,
                            TRACE_COLUMNS, CsvTable, clusters_holding_mass)
from bnpvi.learn.allocator import reuse_freed_memory
from bnpvi.learn.assign import assign_file, marks_heldout, topic_weights
from bnpvi.learn.base import LapResult
from bnpvi.learn.build import build_model, make_alloc
from bnpvi.learn.cache import make_caches
from bnpvi.learn.em import EM
from bnpvi.learn.heldout import check_split, evaluates_heldout, heldout_loglik
from bnpvi.learn.init import fixed_K_start, initial_stats, saved_globals
from bnpvi.learn.links import evaluate_links, write_graph_outputs
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.pool import open_pool
from bnpvi.learn.progress import Progress
from bnpvi.learn.stop import StopRequest
from bnpvi.learn.sovb import StochasticVB
from bnpvi.learn.tfsvi import TruncationFreeSVI
from bnpvi.learn.vb import FullVB
from bnpvi.metrics import adjusted_rand_index_of_counts
from bnpvi.model import Model
from bnpvi.moves.base import finds_K
from bnpvi.moves.reassign import supported as reassign_supported
from bnpvi.obs import FAMILIES
from bnpvi.obs.base import missing_problem
from bnpvi.stats import ClusterIds, SuffStats

log = logging.getLogger("bnpvi")

GROWS = ("memo", "vb")
"""The algorithms whose runs continue on more data (:func:`grow`): their state is per batch or none."""

ALGORITHMS = {cls.name: cls for cls in (FullVB, MemoizedVB, StochasticVB, EM, TruncationFreeSVI)}

SOURCE_OPTIONS = {".csv": "", ".tsv": "", ".npy": "", ".npz": "", ".ldac": " [--vocab VOCAB.txt]", ".txt": " --text"}
"""Suffixes of the files ``bnpvi-data convert`` reads, and the options their conversion needs."""
SEQUENCE_OPTIONS = {".csv": " --sequence-column COLUMN", ".npz": " --sequences RANGES"}
"""... and for sequences: the column of sequence ids, or the array of sequence boundaries."""

DONE_SCORES = {"ari": "ARI", "hamming": "hamming", "hamming_many_to_one": "many-to-one", "heldout_loglik": "heldout",
               "heldout_auc": "held-out AUC", "heldout_ap": "AP"}
"""The scores of summary.json that the run's last line shows, with their labels."""


def convert_command(path: Path, alloc) -> str | None:
    """The ``bnpvi-data convert`` command that turns the source file ``path`` into a batch file for ``alloc``
    (None when ``path`` is no such file)."""
    suffix = path.suffix.lower()
    if suffix not in SOURCE_OPTIONS:
        return None
    options = SEQUENCE_OPTIONS.get(suffix, "") if alloc.data_kinds == ("seq",) else SOURCE_OPTIONS[suffix]
    return f"bnpvi-data convert {path} {path.with_suffix('.h5')}{options}"


class Interrupted(Exception):
    """Raised after a checkpoint was written because the user pressed Ctrl-C (or SIGTERM)."""


def open_store(cfg: DictConfig, alloc, saved_path: str | None = None) -> BatchStore:
    """The data set named by the ``data`` node, split as ``alg.n_batches`` asks.

    ``saved_path`` is the absolute path a resumed run's checkpoint recorded for its data file: it is read
    when ``data.path`` is relative and names no file from the directory this process runs in.

    ``data=toy`` is the built-in toy set that fits the model: 2-D points from 8
    Gaussians for mixtures, a bars corpus for topic models, 8-state sticky sequences
    for HMMs (auto-regressive ones
    when the ``obs`` family regresses on the previous step). When the ``obs`` family
    regresses each step on the one before (``needs_xprev``) and a sequence file holds
    no Xprev, the store is lagged (``SeqStore.lagged``: each sequence's first step dropped).
    """
    data = cfg.data
    family = FAMILIES.get(schema_of("obs", cfg.obs)[0])
    needs_xprev = family is not None and family.needs_xprev
    if data.name == "toy":
        seed = int(data.seed)
        if "points" in alloc.data_kinds:
            n_batches = 5 if data.n_batches is None else int(data.n_batches)
            path = ensure_toy(n_atoms=int(data.n_atoms), seed=seed, n_batches=n_batches)
        elif "graph" in alloc.data_kinds:
            n_batches = 20 if data.n_batches is None else int(data.n_batches)
            path = ensure_toy_graph(n_nodes=int(OmegaConf.select(data, "n_nodes", default=200)), seed=seed,
                                    n_batches=n_batches)
        elif "bow" in alloc.data_kinds:
            n_batches = 4 if data.n_batches is None else int(data.n_batches)
            path = ensure_toy_bars(n_docs=int(data.n_docs), seed=seed, n_batches=n_batches)
        else:
            n_batches = 8 if data.n_batches is None else int(data.n_batches)
            path = ensure_toy_sequences(n_seqs=int(data.n_seqs), length=int(data.seq_length), seed=seed,
                                        n_batches=n_batches, ar=needs_xprev)
    elif data.name == "hdf5":
        if data.get("path") in (None, "", "???"):
            raise BnpviError("data=hdf5 needs data.path=FILE (a file written by `bnpvi-data convert`)")
        path = Path(str(data.path)).expanduser()
        if not path.is_absolute() and not path.exists() and saved_path is not None and Path(saved_path).exists():
            path = Path(saved_path)
        command = convert_command(path, alloc)
        if command is not None:
            raise BnpviError(f"data.path={path} is a {path.suffix} file, but bnpvi-train reads batch files: run "
                             f"`{command}` (see bnpvi-data convert --help), then data.path={path.with_suffix('.h5')}")
    else:
        raise BnpviError(f"unknown data {data.name!r}; choose toy or hdf5")
    store = BatchStore.open(path, n_batches=cfg.alg.get("n_batches"))
    if needs_lag(store, family):
        with store:  # the plain store is closed once the lagged one is made
            lagged = store.lagged()
        store = lagged
    if store.n_atoms < 2:
        store.close()
        raise BnpviError(f"data file {store.path} has {store.n_atoms} atom(s); need at least 2")
    if getattr(store, "has_weights", False) and cfg.alg.get("name") == "tfsvi":
        store.close()
        raise BnpviError(f"data file {store.path} has per-row weights, which alg=tfsvi does not take (its sampled "
                         "q(z) has no weighted form); use alg=memo, vb, sovb or em")
    return store


def needs_lag(store: BatchStore, family) -> bool:
    """Whether ``store`` is read lagged (``SeqStore.lagged``: each sequence's first step dropped) for the
    observation ``family`` (class or instance): it regresses each step on the one before and the sequence
    file holds no Xprev."""
    return family is not None and family.needs_xprev and store.kind == "seq" and not store.has_xprev


def initial_K(cfg: DictConfig, moves=None, alloc=None) -> int:
    """``init.K``, or when it is null: 1 if births or splits are on (they find K), else the model's
    ``abundant_K`` (8; 50 for topic models, whose merges and deletes then remove the extra topics)."""
    if cfg.init.get("K") is not None:
        return int(cfg.init.K)
    if finds_K(moves):
        return 1
    return alloc.abundant_K if alloc is not None else 8


def label_counts(model: Model, globals_, store: BatchStore, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct true ``labels`` (C,) and the (C, K) table of atoms per true label and most likely cluster
    (mixtures: argmax r_nk; HMMs: Viterbi; clusters by position), decoded one batch at a time: memory holds one
    batch's labels, not every atom's."""
    ids, table = np.zeros(0, dtype=np.int64), np.zeros((0, globals_.K), dtype=np.int64)
    pos = 0
    for b in range(store.n_batches):
        est = model.decode(store.read_batch(b), globals_)
        batch_ids, rows = np.unique(labels[pos:pos + est.shape[0]], return_inverse=True)
        pos += est.shape[0]
        if not np.isin(batch_ids, ids).all():  # labels not seen in the batches before: rows for them
            merged = np.union1d(ids, batch_ids)
            grown = np.zeros((merged.size, globals_.K), dtype=np.int64)
            grown[np.searchsorted(merged, ids)] = table
            ids, table = merged, grown
        cells = np.searchsorted(ids, batch_ids)[rows.ravel()] * globals_.K + est
        table += np.bincount(cells, minlength=table.size).reshape(table.shape)
    return ids, table


def doc_topic_proportions(model: Model, globals_, store: BatchStore) -> np.ndarray:
    """E[π_d] over the K topics of every training document (:func:`~bnpvi.learn.assign.topic_weights`)."""
    return np.concatenate([topic_weights(model, globals_, store.read_batch(b)) for b in range(store.n_batches)])


def segment_all(model: Model, globals_, store: BatchStore, labels: np.ndarray | None) -> Segmentation:
    """The Viterbi and marginal-MAP paths of every sequence in file order, one batch at a time
    (only one batch's T x K marginals are held; the paths are O(T) integers)."""
    viterbi, marginal, lengths = [], [], []
    n_seqs = 0
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        if batch.first_seq != n_seqs:
            raise BnpviError(f"batch {b} of {store.path} starts at sequence {batch.first_seq}, expected {n_seqs}")
        path, best = model.decode_marginals(batch, globals_)
        viterbi.append(path)
        marginal.append(best)
        lengths.append(np.diff(batch.seq_range))
        n_seqs += batch.n_seqs
    seq_range = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.int64)
    return Segmentation(np.concatenate(viterbi), np.concatenate(marginal), seq_range, labels)


class Run:
    """One training run in one run directory (fresh or resumed)."""

    def __init__(self, cfg: DictConfig, run_dir: Path, checkpoint: dict | None = None,
                 claim: RunDirLock | None = None, grows: bool = False):
        """``claim`` (the hold on ``run_dir``) is the run's once it is made, and released by :meth:`close`;
        ``grows``: the data file holds the checkpoint's batches and new ones after them (:func:`grow`)."""
        self.cfg = cfg
        self.grows = grows
        self.run_dir = Path(run_dir)
        self.claim: RunDirLock | None = None
        for key, minimum in (("alg.n_laps", 1), ("checkpoint_every", 1), ("eval_every", 1)):
            if int(OmegaConf.select(cfg, key)) < minimum:
                raise BnpviError(f"{key} must be at least {minimum}, got {OmegaConf.select(cfg, key)}")
        if int(OmegaConf.select(cfg, "alg.n_init", default=1)) != 1:
            raise BnpviError("alg.n_init > 1 trains several runs: start it with bnpvi.learn.restarts")
        if cfg.alg.name not in ALGORITHMS:
            raise BnpviError(f"unknown alg {cfg.alg.name!r}; choose one of {sorted(ALGORITHMS)}")
        # a config saved before these keys existed evaluates with their defaults
        self.heldout_split = check_split(OmegaConf.select(cfg, "heldout_split", default="halves"), "heldout_split")
        self.heldout_seed = check_seed(OmegaConf.select(cfg, "heldout_seed", default=0), "heldout_seed")
        alloc = make_alloc(cfg)
        saved_path = None if checkpoint is None else checkpoint["meta"].get("data_path")
        self.store = open_store(cfg, alloc, None if saved_path is None else str(saved_path))
        self.pool = self.alg = None
        try:
            self._prepare(cfg, alloc, checkpoint)
        except BaseException:
            self.close()
            raise
        self.claim = claim

    def _prepare(self, cfg: DictConfig, alloc, checkpoint: dict | None) -> None:
        """Everything after opening the data file: model, moves, the pool, and the algorithm's start (or restored)
        state."""
        self.moments = moments = self.store.scan()
        self.model = build_model(cfg, alloc, self.store.kind, self.store.D, moments)
        recorded = getattr(self.store, "n_missing_total", 0)  # the held-out part's too; the scan counts the rest
        problem = missing_problem(self.model.obs, max(recorded, 0 if moments is None else moments.n_missing),
                                  f"data file {self.store.path}")
        if problem:
            raise BnpviError(problem)
        self.moves = self._moves()
        self.model.alloc.take_family_temperature(self.model.obs, self.moves is not None and "birth" in self.moves)
        self.model.alloc.limit_temperature_laps(self._temperature_laps(checkpoint))
        if cfg.init.name == "from_run" or not ALGORITHMS[cfg.alg.name].anneals_prior:
            self.model = self.model.without_annealing()  # a warm start goes on from trained clusters, unannealed
        # the saved globals, and a fixed-K start from its seeds' cells (initial_stats), describe all the data:
        # memo's lap 1 keeps them until every batch has been summarised under them
        if cfg.init.name == "from_run" or fixed_K_start(self.model.alloc, self.moves):
            self.model.alloc.full_first_pass = True
        self.labels = self.store.labels()
        # sequences in the HMM sense (a topic model's grouped vectors are documents, scored by ARI per token)
        self.sequences = self.store.kind == "seq" and not isinstance(self.model.alloc, TopicAlloc)
        self.heldout = evaluates_heldout(self.model, self.store)
        if self.store.kind == "seq" and getattr(self.store, "has_heldout", False) and not self.heldout:
            log.warning("%s holds %d held-out sequences, which only a topic model of grouped vectors scores; "
                         "this run leaves them out", self.store.path, self.store.n_heldout)
        self._heldout_last: tuple | None = None  # (globals, result) of the latest held-out evaluation
        # a graph model on a file with held-out pairs: link prediction every eval_every laps (and its PR curves)
        self.links = isinstance(self.model.alloc, MMSBAlloc) and getattr(self.store, "has_heldout", False)
        self.pr_curves: list[tuple] = []
        self.meta = {"D": self.store.D, "n_atoms": self.store.n_atoms, "n_batches": self.store.n_batches,
                     "batch_sizes": np.asarray(self.store.batch_sizes(), dtype=np.int64),
                     "data_mean": np.zeros(0) if moments is None else moments.mean,
                     "n_missing": np.int64(0 if moments is None else moments.n_missing),
                     "data_path": str(Path(self.store.path).resolve())}
        self.rng = np.random.default_rng(int(cfg.seed))
        self.converged = False
        self.prev_counts: np.ndarray | None = None
        self._start: float | None = None  # perf_counter() when this process started training
        columns = TRACE_COLUMNS + (SEQUENCE_SCORE_COLUMNS if self.sequences and self.labels is not None else []) \
            + (["heldout_loglik"] if self.heldout else []) + (["heldout_auc", "heldout_ap"] if self.links else []) \
            + (["prior_lam"] if self.model.obs.anneal_laps else []) \
            + (["temperature"] if self.model.alloc.temperature_laps else []) \
            + (ANNEALING_COLUMNS if self.model.anneal_laps else []) + self._objective_column()
        in_process = int(cfg.alg.get("workers", 1)) == 1 and not cfg.alg.get("scheduler")
        if not (ALGORITHMS[cfg.alg.name].uses_pool or in_process):
            raise BnpviError(f"alg={cfg.alg.name} works in this process; use alg.workers=1 and no alg.scheduler")
        self.pool = open_pool(cfg.alg, self.store)
        if checkpoint is None:
            self.alg = self._algorithm(*self._initial_globals())
            self.trace = CsvTable(self.run_dir / "trace.csv", columns)
            self.clusters = CsvTable(self.run_dir / "clusters.csv", CLUSTER_COLUMNS)
            self._open_move_log()
            self.elapsed_before = 0.0
        else:
            self._restore(checkpoint, columns)

    def _temperature_laps(self, checkpoint: dict | None) -> int:
        """The most laps the temperature may take to fall (``model.temperature_laps``): a third of ``alg.n_laps``,
        so that a short run ends at T = 1 with laps left to settle (laps that accept a birth hold the temperature,
        up to as many again). A resumed run keeps the count it started with, whatever ``alg.n_laps`` it is resumed
        with: the temperature never rises again (a checkpoint without the count: ``model.temperature_laps``)."""
        if checkpoint is not None:
            return int(checkpoint.get("run", {}).get("temperature_laps", self.model.alloc.temperature_laps))
        n_laps = OmegaConf.select(self.cfg, "alg.n_laps", default=None)
        return self.model.alloc.temperature_laps if n_laps is None else (int(n_laps) - 1) // 3

    def _objective_column(self) -> list[str]:
        """The trace column of the algorithm's own objective when it is not the ELBO (alg=em: log_posterior)."""
        objective = ALGORITHMS[self.cfg.alg.name].objective
        return [] if objective == "elbo" else [objective]

    def _initial_globals(self) -> tuple:
        """The globals and cluster ids the run starts from: a saved run's (``init=from_run``) or the
        summaries of K seeds."""
        cls = ALGORITHMS[self.cfg.alg.name]
        if cls.starts_empty:  # tfsvi: no components yet, it opens them as it goes
            if self.cfg.init.name == "from_run" or self.cfg.init.get("K") is not None:
                given = "init=from_run" if self.cfg.init.name == "from_run" else f"init.K={self.cfg.init.K}"
                raise BnpviError(f"{given}: alg={cls.name} starts from 0 components and opens them as it goes; "
                                 "drop it")
            return cls.empty_globals(self.model, self.cfg.alg), ClusterIds.first(0)
        if self.cfg.init.name == "from_run":
            return saved_globals(self.model, self.store, self.cfg.init.path)
        K = initial_K(self.cfg, self.moves, self.model.alloc)
        stats = initial_stats(self.model, self.store, self.cfg.init, self.rng, K,
                              cells=fixed_K_start(self.model.alloc, self.moves))
        return self.model.global_step(stats), ClusterIds.first(stats.K)

    def _moves(self):
        """The ``moves`` node when any move is switched on (memoized VI of a nonparametric model only)."""
        moves = self.cfg.get("moves")
        chosen = sorted(m for m in (moves or {}) if moves.get(m) is not None)
        if not chosen:
            return None
        if self.cfg.alg.name != "memo":
            raise BnpviError(f"moves={chosen} need alg=memo, not alg={self.cfg.alg.name}")
        if self.model.alloc.finite:
            raise BnpviError(f"moves={chosen} change K, but model={self.model.alloc.name} is a finite model "
                             "whose prior depends on K; use moves=[] (or a nonparametric model)")
        if "reassign" in chosen and not reassign_supported(self.model):  # on by default with alg=memo: no warning
            log.debug("moves.reassign applies to mixtures with obs=mult or obs=gauss; skipped for model=%s obs=%s",
                      self.model.alloc.name, self.model.obs.name)
            chosen.remove("reassign")
        kept = [m for m in chosen if m in self.model.alloc.moves]
        if kept != chosen:
            log.warning("model=%s has no %s move yet; running with moves=%s", self.model.alloc.name,
                        " or ".join(m for m in chosen if m not in kept), kept)
        return OmegaConf.masked_copy(moves, kept) if kept else None

    def _algorithm(self, globals_, ids, saved_rounds: int | None = None):
        """The algorithm from ``globals_`` and ``ids``; for memo, its caches (``alg.cache``) and P, the one saved
        with a resumed run (``saved_rounds``) if it has one."""
        cls = ALGORITHMS[self.cfg.alg.name]
        extra = {"moves": self.moves} if self.moves is not None else {}
        if cls is MemoizedVB:
            cache = OmegaConf.select(self.cfg, "alg.cache", default="memory")
            extra.update(caches=make_caches(cache, self.store.n_batches, checkpoint_path(self.run_dir).parent),
                         batches_per_round=self._batches_per_round(saved_rounds))
        return cls(self.model, self.store, self.cfg.alg, self.rng, globals_, ids, pool=self.pool, **extra)

    def _batches_per_round(self, saved: int | None) -> int:
        """P of memoized VI: the one saved with a resumed run (a different ``alg.batches_per_round`` is refused),
        else ``alg.batches_per_round``, else the pool's number of workers."""
        given = OmegaConf.select(self.cfg, "alg.batches_per_round", default=None)
        if saved is not None:
            if given is not None and int(given) != saved:
                raise BnpviError(f"alg.batches_per_round={given} differs from the {saved} batches per round this run "
                                 "was started with; a resumed run keeps its rounds (leave the key out)")
            return saved
        return self.pool.workers if given is None else check_int(given, "alg.batches_per_round", 1)

    def _open_move_log(self) -> None:
        schedule = getattr(self.alg, "moves", None)
        events = schedule.event_rows() if schedule is not None else []
        self.move_log = CsvTable(self.run_dir / "moves.csv", MOVE_COLUMNS, events) if schedule is not None else None
        self.events_logged = len(events)

    # ---------------------------------------------------------------- state
    def state(self) -> dict:
        run = {"elapsed_s": self.elapsed(), "converged": int(self.converged),
               "temperature_laps": np.int64(self.model.alloc.temperature_laps)}
        if self.prev_counts is not None:
            run["prev_counts"] = self.prev_counts
        return {"alg": self.alg.state(), "trace": self.trace.to_arrays(),
                "clusters": self.clusters.to_arrays(), "run": run,
                "rng": json.dumps(self.rng.bit_generator.state), "meta": self.meta,
                "config": OmegaConf.to_yaml(self.cfg)}

    def _restore(self, ckpt: dict, columns: list[str]) -> None:
        meta = ckpt["meta"]
        if int(meta["D"]) != self.store.D:
            raise BnpviError(f"data dimension D={self.store.D} of {self.store.path} does not match the "
                             f"checkpoint's D={int(meta['D'])}")
        if self.grows:
            self._check_grown(meta)
        elif int(meta["n_atoms"]) != self.store.n_atoms or int(meta["n_batches"]) != self.store.n_batches:
            raise BnpviError(
                f"data file {self.store.path} has N={self.store.n_atoms} in {self.store.n_batches} batches; "
                f"the checkpoint was made with N={int(meta['n_atoms'])} in {int(meta['n_batches'])} batches")
        elif not np.array_equal(np.asarray(meta["data_mean"]), self.meta["data_mean"]):
            raise BnpviError(f"data file {self.store.path} has changed since the checkpoint was written")
        self.rng.bit_generator.state = json.loads(ckpt["rng"])
        state = ckpt["alg"]
        saved = state["globals"]
        self.alg = self._algorithm(self.model.restore(SuffStats.from_tree(saved["stats"]), saved["alloc"]),
                                   ClusterIds.from_state(state["ids"]), int(state.get("batches_per_round", 1)))
        self.alg.load_state(state)
        self.trace = CsvTable(self.run_dir / "trace.csv", columns, CsvTable.rows_from_arrays(ckpt["trace"], columns))
        self.clusters = CsvTable(self.run_dir / "clusters.csv", CLUSTER_COLUMNS,
                                 CsvTable.rows_from_arrays(ckpt.get("clusters", {}), CLUSTER_COLUMNS))
        self._open_move_log()
        run = ckpt.get("run", {})
        self.elapsed_before = float(run.get("elapsed_s", 0.0))
        self.converged = bool(int(run.get("converged", 0)))
        self.prev_counts = np.asarray(run["prev_counts"]) if "prev_counts" in run else None
        if self.grows:  # new data: nothing has converged, and the moves look at every cluster again
            if self.alg.pos != 0:
                raise BnpviError(f"cannot continue {self.run_dir} on more data: its checkpoint is in the middle of "
                                 f"lap {self.alg.lap + 1}; finish that lap first (bnpvi-train resume=DIR)")
            self.converged, self.prev_counts = False, None
            if getattr(self.alg, "moves", None) is not None:
                self.alg.moves.settled = False

    def _check_grown(self, meta: dict) -> None:
        """The data file holds the checkpoint's batches, of the same sizes, and at least one batch more; and it has
        missing entries only if the run's data had some."""
        if self.cfg.alg.name not in GROWS:
            raise BnpviError(f"a run of alg={self.cfg.alg.name} cannot be continued on more data "
                             f"({self.store.path}); alg=memo or vb can")
        old_batches, sizes = int(meta["n_batches"]), np.asarray(self.store.batch_sizes())
        saved = np.asarray(meta["batch_sizes"]) if "batch_sizes" in meta else None
        same = sizes.shape[0] > old_batches and (np.array_equal(sizes[:old_batches], saved) if saved is not None
                                                 else int(sizes[:old_batches].sum()) == int(meta["n_atoms"]))
        if not same:
            raise BnpviError(f"data file {self.store.path} does not continue the run's data: it must hold the "
                             f"run's {old_batches} batches ({int(meta['n_atoms'])} atoms) first, then new batches "
                             f"(it has {sizes.shape[0]} batches, {int(sizes.sum())} atoms)")
        if self.model.obs.missing and not int(meta.get("n_missing", 0)):
            raise BnpviError(f"data file {self.store.path} has missing (NaN) entries in its new batches, but the run "
                             "was trained on data without any, so its summaries lack the counts they need: fit "
                             "again on all of the data")

    def elapsed(self) -> float:
        """Seconds of training so far, summed over the processes that ran this run."""
        return self.elapsed_before + (0.0 if self._start is None else time.perf_counter() - self._start)

    @property
    def keeps_checkpoints(self) -> bool:
        """``checkpoints`` (configs saved before the key: true)."""
        return bool(OmegaConf.select(self.cfg, "checkpoints", default=True))

    def checkpoint(self) -> Path:
        """Write the run's state (:meth:`state`) as its latest checkpoint, once the data file is checked to be
        the one the run opened (a replaced file stops the run, keeping the last checkpoint)."""
        self.store.check_unchanged()
        path = save_checkpoint(self.run_dir, self.state())
        self.alg.checkpointed()
        return path

    # ------------------------------------------------------------ evaluation
    def scores(self, segmentation: Segmentation | None = None) -> dict:
        """Agreement with the true labels: for sequences the one-to-one and many-to-one Hamming distances of the
        Viterbi paths and the number of states they visit (:func:`~bnpvi.io.segmentation.path_scores`; with a
        given ``segmentation`` also of its marginal-MAP paths), ARI otherwise; from labels counted a batch at a
        time (:func:`label_counts`)."""
        if self.labels is None:
            return {}
        if segmentation is not None:
            return segmentation.scores()
        ids, table = label_counts(self.model, self.alg.globals, self.store, self.labels)
        if self.sequences:
            return path_scores_of_counts(ids, table)
        return {"ari": adjusted_rand_index_of_counts(table)}

    def heldout_score(self, globals_) -> tuple[float, int, str]:
        """The held-out score under ``globals_``, how many tokens (points) it averages and their name
        (:func:`~bnpvi.learn.heldout.heldout_loglik`): a topic model's log-likelihood per token by document
        completion (``heldout_split``, ``heldout_seed``; Hughes, Kim & Sudderth 2015 (AISTATS) §6, Eq. 22) or per
        point by group completion, a mixture's per-point bound. Deterministic
        and draws nothing from the run's generator; the latest result is reused for the same globals."""
        if self._heldout_last is not None and self._heldout_last[0] is globals_:
            return self._heldout_last[1]
        result = heldout_loglik(self.model, globals_, self.store, seed=self.heldout_seed, mode=self.heldout_split)
        self._heldout_last = (globals_, result)
        return result

    # ------------------------------------------------------------------ loop
    def _atom_mass(self) -> float:
        """What ``elbo_per_atom`` divides by: the number of atoms, or of a weighted points file the total weight
        Σ_n w_n (so that it is the value of the same rows duplicated)."""
        return self.store.weight_total() if getattr(self.store, "has_weights", False) else self.store.n_atoms

    def _record(self, result: LapResult) -> None:
        elbo = result.elbo
        row = {"lap": result.lap, "batches_seen": self.alg.batches_seen, "elapsed_s": round(self.elapsed(), 4),
               "elbo": elbo, "K": clusters_holding_mass(result.counts), "K_total": result.K,
               "elbo_per_atom": elbo / self._atom_mass()}
        row.update(result.moves)
        for column in self._objective_column():
            row[column] = elbo
        prev = self.trace.rows[-1] if self.trace.rows else None
        thr, count_thr = float(self.cfg.alg.converge_thr), float(self.cfg.alg.count_thr)
        schedule = getattr(self.alg, "moves", None)
        if schedule is not None:
            schedule.settled = False
        if "prior_lam" in self.trace.columns:
            row["prior_lam"] = float(self.alg.model.obs.lam)
        if "temperature" in self.trace.columns:
            row["temperature"] = self.alg.model.temperature
        annealed = self.alg.model is not self.alg.configured
        if "annealed" in self.trace.columns:  # and the lap's ELBO under the configured model, as finish() saves it
            configured, globals_ = self.alg.configured, self.alg.globals
            row["annealed"] = int(annealed)
            row["elbo_settled"] = (configured.elbo(globals_.stats, configured.restore(globals_.stats, globals_.alloc))
                                   if annealed else elbo)
        # this lap's ELBO and the last one's under the configured prior
        settled_prior = self.alg.anneal_step >= self.model.anneal_laps + 2
        if settled_prior and prev is not None and self.prev_counts is not None \
                and self.prev_counts.shape == result.counts.shape:
            mass = max(float(result.counts.sum()), 1e-300)  # atoms; a topic model's tokens
            small_change = abs(elbo - prev["elbo"]) / mass < thr
            stable_counts = np.max(np.abs(result.counts - self.prev_counts)) < count_thr * mass / self.store.n_atoms
            no_moves = not any(v for k, v in result.moves.items() if k.endswith("_accepted"))
            if small_change and stable_counts and no_moves:  # otherwise converged: do the moves still have work?
                row["waiting_for_moves"] = len(schedule.pending(self.alg)) if schedule is not None else 0
                self.converged = row["waiting_for_moves"] == 0
                if schedule is not None:
                    schedule.settled = True
            else:
                self.converged = False
        paused = time.perf_counter()
        due = result.lap % int(self.cfg.eval_every) == 0
        if "hamming" in self.trace.columns:
            scores = self.scores() if due else {}
            row.update({column: scores.get(column, np.nan) for column in SEQUENCE_SCORE_COLUMNS})
        if self.heldout:  # every eval_every laps and at the last one
            last = self.converged or result.lap >= int(self.cfg.alg.n_laps)
            row["heldout_loglik"] = (self.heldout_score(self.alg.globals)[0] if due or last
                                     else np.nan)
        if self.links:
            last = self.converged or result.lap >= int(self.cfg.alg.n_laps)
            row["heldout_auc"] = row["heldout_ap"] = np.nan
            if due or last:
                links = evaluate_links(self.model, self.alg.globals, self.store)
                row["heldout_auc"], row["heldout_ap"] = links["heldout_auc"], links["heldout_ap"]
                self.pr_curves.append((result.lap, links["precision"], links["recall"]))
        if self._start is not None:  # evaluation is not training time
            self._start += time.perf_counter() - paused
        self.prev_counts = result.counts
        self.trace.append(row)
        self.clusters.extend([{"lap": result.lap, "uid": int(u), "count": float(n)}
                              for u, n in zip(self.alg.ids.uids, result.counts)])
        if self.move_log is not None:
            self.move_log.extend(self.alg.moves.event_rows(self.events_logged))
            self.events_logged = len(self.alg.moves.events)
        moves = "".join(f"  {m} {result.moves[m + '_accepted']}/{result.moves[m + '_tried']}"
                        for m in MOVES if result.moves.get(m + "_tried"))
        score = "".join(f"  {name} {row[column]:.4f}" for name, column in (("hamming", "hamming"),
                                                                           ("many-to-one", "hamming_many_to_one"),
                                                                           ("heldout", "heldout_loglik"))
                        if np.isfinite(row.get(column, np.nan)))
        if annealed:
            how = (f" prior λ {row['prior_lam']:.4g}" if "prior_lam" in row else "") \
                + (f" T {row['temperature']:.3g}" if row.get("temperature", 1.0) > 1.0 else "")
            score += f"  annealed{how}, settled elbo {row['elbo_settled']:.10g}"
            if prev is None or not prev.get("annealed"):
                log.info("laps marked 'annealed' fit a tempered model (model.temperature: every data term divided by "
                         "T; obs.anneal_laps: a looser prior λ): the elbo they print is that model's bound, which drops "
                         "as the model cools and is not comparable with later laps until T = 1 and λ is the configured "
                         "prior; 'settled elbo' is the lap's ELBO under the configured model, the curve the plots draw")
        K = f"{row['K']:3d}" + (f" of {result.K}" if result.K != row["K"] else "")
        log.info("lap %4d  %s %.10g  K %s  %8.2f s%s%s", result.lap, ALGORITHMS[self.cfg.alg.name].objective, elbo,
                 K, row["elapsed_s"], score, moves)

    def train(self, progress: Progress | None = None, hard_stop: bool = False) -> dict:
        """Run laps until convergence or ``alg.n_laps``, showing ``progress`` (default: a bar on a terminal,
        :mod:`bnpvi.learn.progress`); write the final outputs.

        The first checkpoint comes after lap 1 (then every ``checkpoint_every`` laps), so a run killed early
        can be resumed. Ctrl-C / SIGTERM stop after the current batch and write the files; a signal while the
        final files are written waits for them; a second one stops at once (:mod:`bnpvi.learn.stop`; ends the
        process when ``hard_stop``)."""
        cfg = self.cfg
        n_laps, every, keep = int(cfg.alg.n_laps), int(cfg.checkpoint_every), self.keeps_checkpoints
        stop = StopRequest(hard_stop)
        with stop.installed():
            reuse_freed_memory()
            self._start = time.perf_counter()
            bar = (progress or Progress()).bar(self.alg)
            try:
                while not self.converged and self.alg.lap < n_laps:
                    result = self.alg.step()
                    if result is not None:
                        self._record(result)
                        due = result.lap % every == 0 or result.lap == 1
                        if keep and due and not self.converged and result.lap < n_laps:
                            self.checkpoint()
                    bar.advance(self.alg, None if result is None else self.trace.rows)
                    if stop.signal is not None:
                        break
            finally:
                bar.close()
            if stop.signal is None:
                return self.finish()
            where = f"interrupted at lap {self.alg.lap} batch {self.alg.pos}"
            hint = (f"continue with: bnpvi-train resume={self.run_dir}" if keep else
                    "checkpoints=false: this run cannot be continued")
            self.finish(f"{where} (signal {stop.signal}); {hint}")
        raise Interrupted(f"{where}; checkpoint {checkpoint_path(self.run_dir)}; {hint}" if keep else
                          f"{where}; {hint}")

    def finish(self, stop_reason: str | None = None) -> dict:
        """Write the checkpoint, the model files and summary.json for the current globals; ``stop_reason``
        when the run stops for another reason than convergence or the lap limit (an interruption: the
        files then describe the run where it stopped, which is where a resume continues)."""
        self.store.check_unchanged()
        if self.keeps_checkpoints:
            self.checkpoint()
        final_elbo = self.trace.rows[-1]["elbo"] if self.trace.rows else None
        if self.alg.use_model(self.alg.configured):  # stopped while the prior was annealed: save the configured model
            final_elbo = self.alg.elbo()
            log.warning("the run stopped at step %d of the %d laps of its annealed model (obs.anneal_laps, "
                        "model.temperature_laps); the model is saved under the configured prior at temperature 1, "
                        "ELBO %.10g", self.alg.anneal_step, self.model.anneal_laps, final_elbo)
        globals_ = self.alg.globals
        if stop_reason is None:
            stop_reason = ("converged: ELBO change below alg.converge_thr, counts stable, no move accepted or "
                           "left to try" if self.converged else
                           f"lap limit alg.n_laps={int(self.cfg.alg.n_laps)} reached")
        summary = {"elbo": final_elbo if final_elbo is not None and np.isfinite(final_elbo) else None,  # tfsvi: none
                   "K": clusters_holding_mass(globals_.stats.N), "K_total": globals_.K, "laps": self.alg.lap,
                   "converged": self.converged, "stop_reason": stop_reason,
                   "elapsed_s": round(self.elapsed(), 4), "n_atoms": self.store.n_atoms, "D": self.store.D,
                   "counts": np.round(globals_.stats.N, 6).tolist(), "uids": self.alg.ids.uids.tolist()}
        plots = bool(OmegaConf.select(self.cfg, "plots", default=True))  # configs saved before the key: on
        hmm = self.sequences and isinstance(self.model.alloc, HMMAlloc)  # a mixture of time steps has no segments
        segmentation = segment_all(self.model, globals_, self.store, self.labels) if hmm else None
        summary.update(self.scores(segmentation))
        if self.heldout:
            score, count, unit = self.heldout_score(globals_)
            summary.update({"heldout_loglik": score, f"heldout_{unit}": count})
        if isinstance(self.model.alloc, MMSBAlloc):
            summary.update(write_graph_outputs(self.run_dir, self.model, globals_, self.store, self.alg.ids.uids,
                                               self.pr_curves if self.links else None, plots))
        if isinstance(self.model.alloc, MixtureAlloc):
            write_assignments(self.run_dir / "assignments.h5",
                              assign_file(self.model, globals_, self.store, self.alg.ids.uids), self.alg.ids.uids,
                              heldout=marks_heldout(self.store))
        if segmentation is not None:
            write_segmentation_outputs(self.run_dir, segmentation, self.alg.ids.uids,
                                       self.model.alloc.export(globals_.alloc), plot=plots,
                                       label_names=self.store.label_names())
        if isinstance(self.model.alloc, TopicAlloc):
            write_doc_topics(self.run_dir / "doc_topics.h5", doc_topic_proportions(self.model, globals_, self.store),
                             self.alg.ids.uids)
            if "lam" in globals_.obs:
                summary["coherence_npmi"] = write_topics(self.run_dir, topic_word_probs(globals_.obs),
                                                         globals_.stats.N, self.alg.ids.uids, self.store.vocab(),
                                                         self.store)
        origin = self.store.text_origin() if self.store.kind == "bow" else None
        write_model(self.run_dir / "model.h5", self.model, globals_, self.alg.ids, self.cfg, summary,
                    self.store.kind, self.store.D, self.moments,
                    vocab=self.store.vocab() if self.store.kind == "bow" else None,
                    text=None if origin is None else origin.settings)
        if self.trace.rows and plots:
            plot_trace(self.trace.rows, self.run_dir / "elbo_K.png")
        write_text(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        score = "".join(f"  {label} {summary[name]:.4f}" for name, label in DONE_SCORES.items() if name in summary)
        if "states_used" in summary:
            score += f"  ({summary['states_used']} states for {summary['true_states']} true)"
        elbo = "none yet" if summary["elbo"] is None else f"{summary['elbo']:.10g}"
        K = f"{summary['K']}" + (f" of {globals_.K}" if globals_.K != summary["K"] else "")
        log.info("done: %d laps, elbo %s, K %s%s, %.2f s (%s)", self.alg.lap, elbo, K, score,
                 summary["elapsed_s"], stop_reason)
        return summary

    def close(self) -> None:
        """Close what the run holds open: the algorithm's cache files, the pool (a Dask cluster), the data file."""
        try:
            if self.alg is not None:
                self.alg.close()
        finally:
            try:
                if self.pool is not None:
                    self.pool.close()
            finally:
                try:
                    self.store.close()
                finally:
                    if self.claim is not None:
                        self.claim.release()


def _discard(run_dir: Path) -> None:
    """Remove what a run that could not start wrote in ``run_dir`` (its tables and checkpoints folder; the
    directory itself and what else it holds stay)."""
    for name in ("trace.csv", "clusters.csv", "moves.csv"):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(checkpoint_path(run_dir).parent, ignore_errors=True)


def claimed(run_dir: Path, claim: RunDirLock | None, begin) -> Run:
    """``begin(claim)`` with ``run_dir`` claimed (by ``claim``, or here); if it raises, a claim made here is
    released and a directory made here removed where it is left empty."""
    own, made = claim is None, not run_dir.exists()
    claim = RunDirLock.claim(run_dir) if own else claim
    try:
        return begin(claim)
    except BaseException:
        if own:
            claim.release()
            if made:
                remove_if_empty(run_dir, run_dir.parent)
        raise


def start(cfg: DictConfig, run_dir: Path, claim: RunDirLock | None = None) -> Run:
    """A fresh run in ``run_dir`` (claimed with ``claim``, else here: :class:`~bnpvi.io.run_dir.RunDirLock`),
    ready to train; refused where the directory holds a run to keep; a start-up error leaves nothing behind
    that looks like a run."""
    run_dir = Path(run_dir)

    def begin(claim: RunDirLock) -> Run:
        refuse_start(run_dir)
        try:
            run = Run(cfg, run_dir, claim=claim)
        except BaseException:
            _discard(run_dir)
            raise
        log.info("run directory: %s", run_dir)
        return run
    return claimed(run_dir, claim, begin)


def another_file(checkpoint: dict, cfg: DictConfig) -> bool:
    """Whether ``cfg`` names another data file than the one ``checkpoint`` was made on (a resume on more data,
    :func:`grow`; the file must then continue the run's, which :class:`Run` checks)."""
    saved = checkpoint["meta"].get("data_path")
    path = OmegaConf.select(cfg, "data.path", default=None)
    if saved is None or path is None or cfg.data.get("name", "hdf5") != "hdf5":
        return False
    path = Path(str(path)).expanduser()
    if not path.is_absolute() and not path.exists():  # the run's own file, named from where it started
        return False
    return path.resolve() != Path(str(saved)).resolve()


def record_grown(run_dir: Path, cfg: DictConfig) -> None:
    """The run's saved config (``.hydra/config.yaml``, what a later resume starts from) names the grown data
    file and the laps of ``cfg``, once the run has opened on it: a later resume goes on on all the data."""
    saved = run_dir / ".hydra" / "config.yaml"
    if saved.exists():
        record = OmegaConf.load(saved)
        record.data.path, record.alg.n_laps = cfg.data.path, cfg.alg.n_laps
        temporary = saved.with_name(f".{saved.name}.tmp")
        OmegaConf.save(record, temporary)
        os.replace(temporary, saved)


def check_same_config(checkpoint: dict, cfg: DictConfig, run_dir: Path, grows: bool = False) -> None:
    """Refuse to resume with a config that differs from the one ``checkpoint`` was made with, but for the
    resumable keys (:data:`bnpvi.config.RESUMABLE_KEYS`), and ``data.path`` when the run ``grows`` on a file
    that continues its data: a resume goes on with the model it stopped in."""
    saved = checkpoint.get("config")
    changes = [] if saved is None else changed_keys(str(saved), cfg)
    changes = [change for change in changes if not (grows and change[0] == "data.path")]
    if changes:
        key, then, now = changes[0]
        more = f" (and {len(changes) - 1} other key(s))" if len(changes) > 1 else ""
        raise BnpviError(f"cannot resume {run_dir}: its saved config (.hydra/config.yaml) has {key}={now}, but its "
                         f"checkpoint was made with {key}={then}{more}; the checkpoint's config is the run's")


def reopen(run_dir: Path, cfg: DictConfig, claim: RunDirLock | None = None) -> Run:
    """The run in ``run_dir`` at its latest checkpoint, ready to continue (claimed as :func:`start` does); a
    refused resume (no or a damaged checkpoint, another config, changed data) changes nothing in ``run_dir``
    but for the partial files a killed run left, which are removed."""
    run_dir = Path(run_dir)

    def begin(claim: RunDirLock) -> Run:
        remove_partial_writes(run_dir)
        if run_state(run_dir) is RunState.UNFINISHED:
            raise BnpviError(f"cannot resume {run_dir}: the run stopped before its first checkpoint; start it again "
                             f"in place (the same command without resume=, with hydra.run.dir={run_dir})")
        checkpoint = load_checkpoint(run_dir)
        grows = another_file(checkpoint, cfg)
        check_same_config(checkpoint, cfg, run_dir, grows)
        if grows:
            checkpoint["meta"]["data_path"] = str(Path(cfg.data.path).expanduser().resolve())
        run = Run(cfg, run_dir, checkpoint, claim=claim, grows=grows)
        if grows:
            record_grown(run_dir, cfg)
        log.info("%s %s at lap %d, batch %d", "continuing on more data" if grows else "resuming", run_dir,
                 run.alg.lap, run.alg.pos)
        return run
    return claimed(run_dir, claim, begin)


def grow(run_dir: Path, data_path: Path, n_laps: int, progress: Progress | None = None) -> dict:
    """Continue the run in ``run_dir`` on the data file ``data_path``, which holds the run's batches (the same
    atoms, in the same batches) and new batches after them, for ``n_laps`` more laps (fewer if it converges).

    The run must have a checkpoint at the end of a lap. Memoized VI keeps every old batch's cached summaries
    and adds each new batch's the first time it is visited, so after one lap the aggregate again summarises
    every atom and the ELBO is the whole-data ELBO of all of them; its moves go on as before (full VB simply
    visits every batch). The prior's data-driven defaults come from the grown file. What was a run to its
    end becomes a run of more laps: ``alg.n_laps`` of the saved config grows by ``n_laps``.
    """
    run_dir = Path(run_dir)
    n_laps = check_int(n_laps, "n_laps", 1)

    def begin(claim: RunDirLock) -> Run:
        checkpoint = load_checkpoint(run_dir)
        cfg = OmegaConf.create(str(checkpoint["config"]))
        lap = int(checkpoint["alg"]["lap"])
        cfg.data.path, cfg.alg.n_laps = str(Path(data_path).resolve()), lap + n_laps
        checkpoint["meta"]["data_path"] = cfg.data.path
        run = Run(cfg, run_dir, checkpoint, claim=claim, grows=True)
        record_grown(run_dir, cfg)
        log.info("continuing %s at lap %d on %d atoms in %d batches", run_dir, lap, run.store.n_atoms,
                 run.store.n_batches)
        return run
    return run_to_end(claimed(run_dir, None, begin), progress)


def run_to_end(run: Run, progress: Progress | None = None, hard_stop: bool = False) -> dict:
    """Train ``run`` until it stops (showing ``progress``, stopping as ``hard_stop`` says: :meth:`Run.train`),
    then close it (its data file, pool, and its claim on the run directory); the summary."""
    try:
        return run.train(progress, hard_stop)
    finally:
        run.close()


def train(cfg: DictConfig, run_dir: Path, progress: Progress | None = None) -> dict:
    """A fresh run in ``run_dir`` (:func:`start`), trained to its end."""
    return run_to_end(start(cfg, run_dir), progress)


def resume(run_dir: Path, cfg: DictConfig) -> dict:
    """Continue the run in ``run_dir`` from its latest checkpoint (:func:`reopen`) to its end."""
    return run_to_end(reopen(run_dir, cfg))
