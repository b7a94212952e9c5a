"""What every estimator shares: its keywords, its ``train`` config, and a fit that is a ``bnpvi-train`` run.

A family's ``fit`` checks its data and hands :meth:`Estimator.train_on` a writer of the data's
batch file; ``train_on`` composes the ``train`` config of ``model=<the estimator's option>`` with
the estimator's keywords (:mod:`bnpvi.api.keywords`), writes the file (``n_batches`` batches, 1
when unset), trains with :func:`bnpvi.learn.restarts.train` and loads the run's model with
:func:`bnpvi.api.load`, so a fit is the ``bnpvi-train`` run of the same config on the same file, to
the last bit. In memory (a temporary directory removed after) unless ``output_dir`` is given,
quiet unless ``verbose`` (then a progress bar over each lap's batches and one log line per lap, on stderr).
"""
from __future__ import annotations

import csv
import inspect
import logging
import os
import shutil
import tempfile
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, ClassVar, Iterator

import numpy as np
from omegaconf import DictConfig, OmegaConf
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from bnpvi.api.fitted import FittedModel, load
from bnpvi.api.fitted_topics import count_matrix
from bnpvi.api.keywords import compose_train, estimator_obs, keyword_paths, model_moves, set_keys
from bnpvi.config import SCHEMAS
from bnpvi.data.convert import appended_to
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError
from bnpvi.learn.progress import Progress
from bnpvi.learn.restarts import train
from bnpvi.learn.runner import GROWS, grow
from bnpvi.obs import FAMILIES, ObsFamily

DATA_FILE = "data.h5"
"""The name of the training data's batch file in a run directory made by ``fit``."""

PARTIAL_LAPS = 3
"""Laps of the whole data that each ``partial_fit`` call after the first runs by default."""


@contextmanager
def _logging(verbose: bool) -> Iterator[None]:
    """The runner's log lines on stderr (``verbose``) or none, for the length of a fit."""
    logger = logging.getLogger("bnpvi")
    level, handler = logger.level, None
    logger.setLevel(logging.INFO if verbose else logging.ERROR)
    if verbose and not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    try:
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


@contextmanager
def _run_directory(output_dir, kept: Path | None = None) -> Iterator[tuple[Path, Path]]:
    """The run directory of a fit and its data file: ``output_dir`` (a new one) and data.h5 in it, or both in
    ``kept`` (a temporary directory the estimator removes when it goes: ``partial_fit``'s), or in a temporary
    directory removed after."""
    if kept is not None and output_dir is None:
        yield kept / "run", kept / DATA_FILE
        return
    if output_dir is not None:
        run_dir = Path(output_dir).expanduser().resolve()
        if (run_dir / DATA_FILE).exists():
            raise BnpviError(f"output_dir {run_dir} already holds a fit; choose a new directory "
                             f"(or continue that run with bnpvi-train resume={run_dir})")
        run_dir.mkdir(parents=True, exist_ok=True)
        yield run_dir, run_dir / DATA_FILE
        return
    with tempfile.TemporaryDirectory(prefix="bnpvi-fit-") as tmp:
        yield Path(tmp) / "run", Path(tmp) / DATA_FILE


def _elbo_trace(path: Path) -> np.ndarray:
    """(laps,) float64: trace.csv's ELBO after every lap (NaN where the algorithm has none, alg=tfsvi)."""
    with path.open(newline="", encoding="utf-8") as handle:
        return np.array([float(row["elbo"]) if row["elbo"] else np.nan for row in csv.DictReader(handle)])


def draw_emissions(rng: np.random.Generator, means: np.ndarray, covariances: np.ndarray | None,
                   states: np.ndarray) -> np.ndarray:
    """(n, D) observations of the clusters or states ``states`` (positions) under point estimates: a Gaussian of
    mean ``means[k]`` and covariance ``covariances[k]``, or, without covariances (Bernoulli families),
    independent 1s with probability ``means[k]``."""
    n, D = states.shape[0], means.shape[1]
    if covariances is None:
        return (rng.random((n, D)) < means[states]).astype(np.float64)
    factors = np.linalg.cholesky(covariances)
    return means[states] + np.einsum("nij,nj->ni", factors[states], rng.standard_normal((n, D)))


def run_seed(random_state) -> int:
    """The run's ``seed`` for scikit-learn's ``random_state``: an int as it is; a ``RandomState`` or ``Generator``,
    or None (NumPy's global ``RandomState``, fresh randomness as in scikit-learn), a seed drawn from it (the run
    records it in its config, so a fit with ``output_dir`` can be repeated)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31 - 1))
    return int(check_random_state(random_state).randint(2**31 - 1))


def refuse_partial(cfg: DictConfig, owner: str) -> None:
    """A one-line BnpviError where ``partial_fit`` cannot go on from the run ``cfg`` makes."""
    if cfg.alg.name not in GROWS:
        raise BnpviError(f"{owner}.partial_fit continues memoized or full VB on more data (alg=memo or vb), not "
                         f"alg={cfg.alg.name}")
    if int(cfg.alg.n_init) != 1:
        raise BnpviError(f"{owner}.partial_fit trains one run: n_init={int(cfg.alg.n_init)} is for fit")


def refuse_empty(data, name: str, units: str) -> None:
    """A one-line BnpviError for an empty list, tuple or 1-D array given to ``fit`` as ``name`` (scikit-learn's
    checks would call it a 1-D array; an empty 2-D array is theirs to refuse)."""
    if (isinstance(data, (list, tuple)) or getattr(data, "ndim", None) == 1) and len(data) == 0:
        raise BnpviError(f"fit: {name} is empty: no {units} to train on")


def _keyword_init(defaults: dict[str, object]):
    """An ``__init__`` that stores its keyword arguments (``defaults`` are the others), with the explicit
    signature scikit-learn reads the parameter names from."""

    def __init__(self, **params):
        for name in params:
            if name not in defaults:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}")
        for name, default in defaults.items():
            setattr(self, name, params.get(name, default))

    keyword = inspect.Parameter.KEYWORD_ONLY
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(name, keyword, default=default) for name, default in defaults.items()])
    return __init__


class Estimator(BaseEstimator):
    """The base of the estimators; a subclass names its ``model`` option and its default ``obs`` family:
    ``class DPMixture(_Mixture, model="dp_mix", obs="gauss")``.

    Keywords (all keyword-only; ``None`` keeps the value of ``conf/``): ``obs``, ``alg`` ("memo"),
    ``init`` ("kmeanspp"): the options of those groups; ``n_components`` (``init.K``) for a model of fixed K
    (``fixed_K=True``: FiniteMixture, LDA, FiniteHMM), ``K`` (the initial K) for the others; ``moves``
    (models with moves only; None: the alg's default, all moves for memo, none otherwise), a list such as
    ``["birth", "merge"]`` or ``[]``; every leaf key of those options (the class attribute ``config_keys``);
    ``random_state`` (the run's ``seed``: an int, or a seed drawn from a ``RandomState``/``Generator``, or for
    None from NumPy's global one, fresh randomness as in scikit-learn; :func:`run_seed`); ``verbose`` (one log
    line per lap as ``bnpvi-train`` prints, on stderr, and on a terminal a progress bar over each lap's
    batches with the last lap's K, ELBO and seconds); and ``output_dir`` (None: train in a temporary
    directory removed after ``fit``; a path makes it the run directory, with ``data.h5`` and
    ``.hydra/config.yaml``, which ``bnpvi-train resume=DIR`` continues and :func:`bnpvi.load` reads).
    """

    model_option: ClassVar[str]
    config_keys: ClassVar[dict[str, str]]
    """Keyword -> config key (``"birth_max_per_lap"`` -> ``"moves.birth.max_per_lap"``)."""

    extra_keywords: ClassVar[dict[str, object]] = {}
    """A family's own keywords beyond the config's, with their defaults (the topic models' text options)."""

    def __init_subclass__(cls, model: str | None = None, obs: str | None = None, fixed_K: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if model is None:  # a family's base class
            return
        cls.model_option = model
        cls.config_keys = keyword_paths(model)
        if fixed_K:  # a model of K clusters: scikit-learn's and hmmlearn's name for it
            cls.config_keys = {("n_components" if key == "K" else key): path for key, path in cls.config_keys.items()}
        clash = set(cls.extra_keywords) & set(cls.config_keys)
        if clash:
            raise TypeError(f"{cls.__name__}: keywords {sorted(clash)} are config keys too")
        choices = {"obs": obs, "alg": "memo", "init": "kmeanspp", **({"moves": None} if model_moves(model) else {})}
        cls.__init__ = _keyword_init({**choices, "random_state": None, "verbose": False, "output_dir": None,
                                      **cls.extra_keywords, **dict.fromkeys(cls.config_keys)})

    def __sklearn_tags__(self):
        """scikit-learn's tags, with ``allow_nan`` where the chosen family marginalises missing entries."""
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.family().handles_missing
        return tags

    def checked_counts(self, docs, reset: bool):
        """``docs`` as a canonical CSR count matrix after scikit-learn's checks (which set or compare
        ``n_features_in_``) and :func:`~bnpvi.api.fitted_topics.count_matrix`'s; for training (``reset``), without
        empty documents."""
        X = validate_data(self, docs, accept_sparse="csr", dtype=np.float64, reset=reset,
                          ensure_min_samples=2 if reset else 1)
        X = count_matrix(X, X.shape[1], "fit" if reset else type(self).__name__)
        empty = np.flatnonzero(np.diff(X.indptr) == 0)
        if reset and empty.size:
            raise BnpviError(f"fit: document {int(empty[0])} has no words (documents counted from 0); drop "
                             "empty documents before fitting")
        return X

    def family(self) -> type:
        """The class of the chosen observation family (``obs``): what it can model, before any data is read."""
        return FAMILIES.get(self.obs, ObsFamily)  # an unknown option is refused when the estimator trains

    # ----------------------------------------------------------------- config
    def train_config(self) -> DictConfig:
        """The composed ``train`` config of this estimator's keywords (data.path left unset).

        Raises
        ------
        TypeError
            A keyword whose config key the chosen options lack.
        ValueError
            An unknown option or a value its key refuses (one line).
        """
        owner = type(self).__name__
        choices = self.checked_choices()
        overrides = [f"{group}={option}" for group, option in choices.items()] + ["data=hdf5"]
        moves = getattr(self, "moves", None)
        if moves is not None:
            allowed = model_moves(self.model_option)
            if not isinstance(moves, (list, tuple)) or not all(move in allowed for move in moves):
                raise ValueError(f"{owner}: moves={moves!r} must be a list of {allowed}")
            overrides.append(f"moves=[{','.join(moves)}]")
        cfg = compose_train(overrides)
        values = {name: getattr(self, name) for name in self.config_keys if getattr(self, name) is not None}
        set_keys(cfg, values, self.config_keys, owner)
        set_keys(cfg, {"random_state": run_seed(self.random_state)}, {"random_state": "seed"}, owner)
        return cfg

    def checked_choices(self) -> dict:
        """The config groups this estimator chooses (model, obs, alg, init) and their options; ValueError (one
        line) naming an option its group lacks."""
        choices = {"model": self.model_option, "obs": self.obs, "alg": self.alg, "init": self.init}
        for group, option in choices.items():
            allowed = estimator_obs(self.model_option) if group == "obs" else list(SCHEMAS[group])
            if option not in allowed:
                raise ValueError(f"{type(self).__name__}: {group}={option!r} is not one of {allowed}")
        return choices

    # -------------------------------------------------------------------- fit
    def train_on(self, write: Callable[[Path, int, str], Path], partial: bool = False) -> FittedModel:
        """Train on the data that ``write(path, n_batches, source)`` writes to a batch file; sets the attributes
        every estimator has (``fitted_model_``, ``n_components_``, ``n_components_total_``, ``elbo_``,
        ``cluster_ids_``, ``n_iter_``, ``converged_``: :class:`~bnpvi.api.fitted.FittedModel`'s; ``lower_bound_``,
        scikit-learn's name of the final ELBO; ``elbo_trace_``, the ELBO after every lap) and returns the loaded
        model. ``partial``: the first call of ``partial_fit``, whose run directory and data file are kept for
        the next (:meth:`grow_on`)."""
        cfg = self.train_config()
        kept = None
        if partial:
            refuse_partial(cfg, type(self).__name__)
            kept = Path(tempfile.mkdtemp(prefix="bnpvi-partial-")) if self.output_dir is None else None
            if kept is not None:
                weakref.finalize(self, shutil.rmtree, kept, True)
        with _logging(self.verbose), _run_directory(self.output_dir, kept) as (run_dir, data):
            cfg.plots = self.output_dir is not None  # nothing to see in a removed run
            cfg.checkpoints = self.output_dir is not None or partial  # nor to resume, unless partial_fit goes on
            cfg.data.path = str(write(data, cfg.alg.n_batches or 1, f"{type(self).__name__}.fit"))
            if self.output_dir is not None:  # what bnpvi-train resume=DIR reads
                (run_dir / ".hydra").mkdir(exist_ok=True)
                OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
            train(cfg, run_dir, Progress(show=None if self.verbose else False))
            fitted = load(run_dir)
            self.elbo_trace_ = _elbo_trace(run_dir / "trace.csv")
        self.partial_run_ = (run_dir, data) if partial else None
        return self._fitted(fitted)

    def partial_train_on(self, write: Callable[[Path, int, str], Path], more, n_laps: int) -> FittedModel:
        """``partial_fit``'s training: the first call is :meth:`train_on` ``write`` with its run kept; a later
        one writes the run's data file anew with the units of ``more`` (``Points``, ``Sequences`` or
        ``Documents``) after its batches, in new batches of about the size of the run's
        (:func:`bnpvi.data.convert.appended_to`, as ``bnpvi-data convert --append-to`` does), and continues the
        run on it for ``n_laps`` laps (fewer if it converges; :func:`bnpvi.learn.runner.grow`). Sets the
        attributes :meth:`train_on` sets and returns the loaded model."""
        if getattr(self, "partial_run_", None) is None:
            return self.train_on(write, partial=True)
        run_dir, data = self.partial_run_
        grown = data.with_name(f".{data.stem}.grown.h5")
        with BatchStore.open(data) as store:  # open while the grown file is written: its old rows come from it
            joined, sizes = appended_to(more, store, data, f"{type(self).__name__}.partial_fit")
            joined.write(grown, batch_sizes=sizes, source=f"{type(self).__name__}.partial_fit")
        os.replace(grown, data)
        with _logging(self.verbose):
            grow(run_dir, data, n_laps, Progress(show=None if self.verbose else False))
            fitted = load(run_dir)
            self.elbo_trace_ = _elbo_trace(run_dir / "trace.csv")
        return self._fitted(fitted)

    def _fitted(self, fitted: FittedModel) -> FittedModel:
        """Set the attributes of a fit from its loaded model; returns it."""
        self.fitted_model_ = fitted
        self.n_components_ = fitted.n_components_
        self.n_components_total_ = fitted.n_components_total_
        self.elbo_ = self.lower_bound_ = fitted.elbo_
        self.cluster_ids_ = fitted.cluster_ids_
        self.n_iter_, self.converged_ = fitted.n_iter_, fitted.converged_
        return fitted
