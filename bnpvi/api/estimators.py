"""scikit-learn estimators of mixtures, over the config and the runner of ``bnpvi-train``.

``DPMixture(gamma=5, n_laps=50).fit(X)`` composes the ``train`` config (``model=dp_mix``) with the
estimator's keywords, writes ``X`` to an HDF5 batch file of ``n_batches`` batches (1 when unset),
trains with :func:`bnpvi.learn.runner.train` and loads the run's model with :func:`bnpvi.api.load`,
so a fit is the ``bnpvi-train`` run of the same config on the same file, to the last bit.
Prediction is :class:`bnpvi.api.FittedModel`'s.

Keywords (all keyword-only; ``None`` keeps the value of ``conf/``):

- ``obs`` ("gauss"), ``alg`` ("memo"), ``init`` ("kmeanspp"): the options of those groups;
  ``moves`` (DPMixture only; None: the alg's default, all moves for memo, none otherwise), a list
  such as ``["birth", "merge"]`` or ``[]``.
- every leaf key of those options, named as in :mod:`bnpvi.api.keywords` (``gamma``, ``n_laps``,
  ``K`` = init.K, ``n_batches``, ``sparse_L``, ``sF``, ``birth_max_per_lap``, ...; the table is the
  class attribute ``config_keys``). A key the chosen options lack is a TypeError at ``fit``.
- ``random_state``: the run's ``seed`` (None: the config's, 0).
- ``verbose``: log every lap as ``bnpvi-train`` does (default False: no log lines).
- ``output_dir``: None trains in a temporary directory removed after ``fit``; a path makes it the
  run directory (with ``data.h5`` and ``.hydra/config.yaml``), which ``bnpvi-train resume=DIR``
  continues and :func:`bnpvi.load` reads.
"""
from __future__ import annotations

import inspect
import logging
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Iterator

import numpy as np
from omegaconf import DictConfig, OmegaConf
from sklearn.base import BaseEstimator, ClusterMixin, DensityMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from bnpvi.api.fitted import load
from bnpvi.api.keywords import GROUPS, compose_train, keyword_paths, point_obs, set_keys
from bnpvi.config import SCHEMAS
from bnpvi.data.store import write_points
from bnpvi.errors import BnpviError
from bnpvi.learn.runner import train

DATA_FILE = "data.h5"
"""The name of the training data's batch file in a run directory made by ``fit``."""


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
def _run_directory(output_dir) -> Iterator[tuple[Path, Path]]:
    """The run directory of a fit and its data file: ``output_dir`` (a new one) and data.h5 in it, or both in a
    temporary directory removed after."""
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


class _Mixture(ClusterMixin, DensityMixin, BaseEstimator):
    """What both mixture estimators share; a subclass names its ``model`` option and whether it has moves."""

    model_option: ClassVar[str]
    config_keys: ClassVar[dict[str, str]]
    """Keyword -> config key (``"birth_max_per_lap"`` -> ``"moves.birth.max_per_lap"``)."""

    def __init_subclass__(cls, model: str, moves: bool, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.model_option = model
        cls.config_keys = keyword_paths(model, GROUPS if moves else tuple(g for g in GROUPS if g != "moves"))
        choices = {"obs": "gauss", "alg": "memo", "init": "kmeanspp", **({"moves": None} if moves else {})}
        cls.__init__ = _keyword_init({**choices, "random_state": None, "verbose": False, "output_dir": None,
                                      **dict.fromkeys(cls.config_keys)})

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
        choices = {"model": self.model_option, "obs": self.obs, "alg": self.alg, "init": self.init}
        for group, option in choices.items():
            allowed = point_obs() if group == "obs" else list(SCHEMAS[group])
            if option not in allowed:
                raise ValueError(f"{owner}: {group}={option!r} is not one of {allowed}")
        overrides = [f"{group}={option}" for group, option in choices.items()] + ["data=hdf5"]
        moves = getattr(self, "moves", None)
        if moves is not None:
            if not isinstance(moves, (list, tuple)) or not all(move in SCHEMAS["moves"] for move in moves):
                raise ValueError(f"{owner}: moves={moves!r} must be a list of {list(SCHEMAS['moves'])}")
            overrides.append(f"moves=[{','.join(moves)}]")
        cfg = compose_train(overrides)
        values = {name: getattr(self, name) for name in self.config_keys if getattr(self, name) is not None}
        set_keys(cfg, values, self.config_keys, owner)
        if self.random_state is not None:
            set_keys(cfg, {"random_state": self.random_state}, {"random_state": "seed"}, owner)
        return cfg

    # -------------------------------------------------------------------- fit
    def fit(self, X, y=None):
        """Train on the rows of ``X`` (N, D); ``y`` is ignored. Returns self."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        cfg = self.train_config()
        with _logging(self.verbose), _run_directory(self.output_dir) as (run_dir, data):
            cfg.data.path = str(write_points(data, X, n_batches=cfg.alg.n_batches or 1,
                                             source=f"{type(self).__name__}.fit"))
            if self.output_dir is not None:  # what bnpvi-train resume=DIR reads
                (run_dir / ".hydra").mkdir(exist_ok=True)
                OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
            train(cfg, run_dir)
            fitted = load(run_dir)
        self.fitted_model_ = fitted
        self.n_components_ = fitted.n_components_
        self.elbo_ = fitted.elbo_
        self.weights_ = fitted.weights_
        self.cluster_ids_ = fitted.cluster_ids_
        for name, value in fitted.model.obs.cluster_moments(fitted.globals_.obs).items():
            setattr(self, name, value)
        self.labels_ = fitted.predict(X)
        return self

    # ---------------------------------------------------------------- predict
    def _checked(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, reset=False)

    def predict(self, X) -> np.ndarray:
        """(N,) int64: the id (in :attr:`cluster_ids_`) of every row's most responsible cluster."""
        X = self._checked(X)
        return self.fitted_model_.predict(X)

    def predict_proba(self, X) -> np.ndarray:
        """(N, K) responsibilities, columns in the order of :attr:`cluster_ids_`."""
        X = self._checked(X)
        return self.fitted_model_.predict_proba(X)

    def score_samples(self, X) -> np.ndarray:
        """(N,) lower bound on the log predictive density of every row (:meth:`FittedModel.score_samples`)."""
        X = self._checked(X)
        return self.fitted_model_.score_samples(X)

    def score(self, X, y=None) -> float:
        """The mean of :meth:`score_samples` (nats per point); ``y`` is ignored."""
        return float(np.mean(self.score_samples(X)))


class DPMixture(_Mixture, model="dp_mix", moves=True):
    """Dirichlet-process mixture (``model=dp_mix``): K adapts by birth, merge and delete moves under memoized VI.

    Fitted attributes: ``n_components_`` (K), ``elbo_`` (the final whole-data ELBO), ``weights_`` (E[π_k]),
    ``means_`` and ``covariances_`` (``ObsFamily.cluster_moments``), ``cluster_ids_`` (the stable id of every
    cluster, the columns of :meth:`predict_proba`), ``labels_`` (:meth:`predict` of the training rows),
    ``fitted_model_`` (the :class:`FittedModel`). Keywords: see :mod:`bnpvi.api.estimators`.
    """


class FiniteMixture(_Mixture, model="finite_mix", moves=False):
    """Finite mixture of ``K`` clusters (``model=finite_mix``, symmetric Dirichlet(γ/K) weights; no moves).

    Fitted attributes and keywords as :class:`DPMixture`'s, without ``moves`` and the moves' keys.
    """
