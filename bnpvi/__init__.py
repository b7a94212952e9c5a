"""bnpvi: Bayesian nonparametric clustering by memoized variational inference."""
from bnpvi.errors import BnpviError

__version__ = "0.1.0"
__all__ = ["BnpviError", "__version__", "load"]


def __getattr__(name: str):
    """``bnpvi.load`` (:func:`bnpvi.api.load`), imported on first use so that ``import bnpvi`` stays light."""
    if name == "load":
        from bnpvi.api import load

        return load
    raise AttributeError(f"module 'bnpvi' has no attribute {name!r}")
