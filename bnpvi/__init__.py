"""bnpvi: Bayesian nonparametric clustering by memoized variational inference."""
import importlib

from bnpvi.errors import BnpviError

__version__ = "0.1.0"
_ESTIMATORS = ("DPMixture", "FiniteMixture", "HDPTopicModel", "LDA", "HDPHMM", "FiniteHMM", "HDPMMSB", "FiniteMMSB")
__all__ = ["BnpviError", *_ESTIMATORS, "__version__", "load"]

_LAZY = {"load": "bnpvi.api.fitted", **dict.fromkeys(_ESTIMATORS, "bnpvi.api.estimators")}
"""Names imported on first use, so that ``import bnpvi`` stays light (no Hydra, scikit-learn or kernels)."""


def __getattr__(name: str):
    """``bnpvi.load`` (:func:`bnpvi.api.load`) and the estimators (:mod:`bnpvi.api.estimators`), imported on
    first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bnpvi' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (``__all__``), the lazy names included."""
    return sorted(__all__)
