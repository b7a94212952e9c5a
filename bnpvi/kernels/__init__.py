"""The compiled kernels (csrc/), one Python face per extension, each beside its NumPy reference: ``mixture``
(local steps of mixtures), ``topic``, ``hmm``, ``mmsb``, ``gibbs``. Importing this package loads none of them."""
from bnpvi.kernels._checks import KernelInputError

__all__ = ["KernelInputError"]
