"""Python face of the compiled HDP top-level stick optimiser (csrc/hdp_sticks.pyx), used by
:func:`bnpvi.alloc.hdp_top.optimize`; its NumPy references are ``hdp_top.surrogate`` and ``hdp_top.surrogate_grad``
(the value and gradient) and SciPy's L-BFGS-B on them (the optimum, in the tests)."""
from __future__ import annotations

import numpy as np

from bnpvi.kernels._checks import compiled

_ext = compiled("_hdp_sticks", "HDP stick optimiser")

__all__ = ["newton", "value_and_grad"]


def value_and_grad(x: np.ndarray, P1: np.ndarray, P0: np.ndarray, T: np.ndarray,
                   prior_norm: float) -> tuple[float, np.ndarray]:
    """(f, ∂f/∂x) of the surrogate at x = (logit ρ, ln ω) (2K,), P1, P0 (K,) and T (K+1,) as in ``hdp_top``."""
    return _ext.value_and_grad(x, P1, P0, T, prior_norm)


def newton(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, P1: np.ndarray, P0: np.ndarray, T: np.ndarray,
           prior_norm: float, scale: float, max_iter: int, gtol: float) -> int:
    """Maximise the surrogate from x (2K,, float64, overwritten) within [lo, hi] by damped projected Newton steps
    that each raise f; the number of steps, or −1 when f is not finite at x (x then unchanged)."""
    return _ext.newton(x, lo, hi, P1, P0, T, prior_norm, scale, max_iter, gtol)
