"""Quadratic features of points: a quadratic form of a point as one dot product.

(y − m)ᵀP(y − m) = f(y)·w + c with f(y) = [y_d y_e for d ≤ e, y_d], so the forms of many
points under many (P_k, m_k) are one matrix product (``bnpvi.obs._wishart.quad_forms``) and the
best cluster of a point is the argmax of one product (:func:`bnpvi.kernels.quad_argmax`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["n_quad_features", "quad_features"]


def n_quad_features(D: int, linear: bool = True) -> int:
    """D(D+1)/2 products, plus the D coordinates when ``linear``."""
    return D * (D + 1) // 2 + (D if linear else 0)


def quad_features(Y: np.ndarray, linear: bool = True) -> np.ndarray:
    """(N, F) rows [y_d y_e for d ≤ e (row-major upper triangle), y_d (when ``linear``)]."""
    N, D = Y.shape
    out = np.empty((N, n_quad_features(D, linear)))
    col = 0
    for d in range(D):
        np.multiply(Y[:, d:d + 1], Y[:, d:], out=out[:, col:col + D - d])
        col += D - d
    if linear:
        out[:, col:] = Y
    return out
