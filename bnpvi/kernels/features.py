"""Quadratic features of points: a quadratic form of a point as one dot product.

(y − m)ᵀP(y − m) = f(y)·w + c with f(y) = [y_d y_e for d ≤ e, y_d], so the forms of many
points under many (P_k, m_k) are one matrix product (``bnpvi.obs._wishart.quad_forms``) and the
best cluster of a point is the argmax of one product (:func:`bnpvi.kernels.mixture.quad_argmax`). The
features themselves: :func:`bnpvi.kernels.mixture.quad_features` (compiled), with its NumPy reference in
:mod:`bnpvi.kernels.reference`.
"""
from __future__ import annotations

__all__ = ["n_quad_features"]


def n_quad_features(D: int, linear: bool = True) -> int:
    """D(D+1)/2 products, plus the D coordinates when ``linear``."""
    return D * (D + 1) // 2 + (D if linear else 0)
