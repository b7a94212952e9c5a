"""bnpvi: Bayesian nonparametric clustering by memoized variational inference."""
from bnpvi.errors import BnpviError

__version__ = "0.1.0"
__all__ = ["BnpviError", "__version__"]
