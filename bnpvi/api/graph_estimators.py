"""scikit-learn estimators of graph models: HDPMMSB and FiniteMMSB (:mod:`bnpvi.api.estimator`).

``fit(A)`` takes a square 0/1 adjacency matrix (a NumPy array or a SciPy sparse matrix; symmetric
means undirected; the diagonal is ignored). Memberships, strengths and link probabilities are
:class:`~bnpvi.api.fitted_graph.FittedGraphModel`'s.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from bnpvi.api.estimator import Estimator, refuse_empty
from bnpvi.data.graph import write_graph
from bnpvi.errors import BnpviError


def adjacency_edges(A) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """(src, dst, N, directed) of a square 0/1 adjacency matrix, the diagonal left out."""
    A = sp.coo_matrix(A)
    if A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise BnpviError(f"fit: A must be a square adjacency matrix of at least 2 nodes, got shape {A.shape}")
    A.sum_duplicates()
    values = np.asarray(A.data, dtype=np.float64)
    if np.any((values != 0.0) & (values != 1.0)):
        raise BnpviError("fit: A must hold 0/1 entries (the model is binary)")
    keep = (values == 1.0) & (A.row != A.col)
    if not keep.any():
        raise BnpviError("fit: A has no edge")
    directed = (abs(A - A.T) > 0).nnz > 0
    return A.row[keep].astype(np.int64), A.col[keep].astype(np.int64), A.shape[0], bool(directed)


class _MMSB(Estimator):
    """What both graph estimators share."""

    def fit(self, A, y=None):
        """Train on the adjacency matrix ``A``; ``y`` is ignored. Returns self."""
        refuse_empty(A, "A", "nodes")
        src, dst, N, directed = adjacency_edges(A)
        fitted = self.train_on(lambda path, n_batches, source: write_graph(
            path, src, dst, N, [str(i) for i in range(N)], directed, n_batches=n_batches, source=source))
        self.n_nodes_ = N
        self.memberships_ = fitted.memberships_
        self.strengths_ = fitted.strengths_
        return self

    def predict(self, X=None) -> np.ndarray:
        """The main community (stable id) of every node; ``X`` is ignored (the nodes are the training ones)."""
        check_is_fitted(self)
        return self.fitted_model_.predict()

    def predict_proba(self, pairs) -> np.ndarray:
        """The link probability E[π_i]ᵀ E[Φ] E[π_j] of each node pair of ``pairs`` ((P, 2) node indices)."""
        check_is_fitted(self)
        return self.fitted_model_.predict_proba(pairs)


class HDPMMSB(_MMSB, model="hdp_mmsb", obs="link"):
    """HDP assortative mixed-membership stochastic blockmodel (``model=hdp_mmsb``): communities found from K = 20
    by merge and delete moves under memoized VI (Stephenson 2015).

    Fitted attributes: ``n_components_`` (K), ``elbo_``, ``memberships_`` (N, K) E[π_i], ``strengths_`` (K,)
    E[φ_k], ``cluster_ids_``, ``fitted_model_`` (the :class:`~bnpvi.api.fitted_graph.FittedGraphModel`).
    Keywords: see :class:`~bnpvi.api.estimator.Estimator`.
    """


class FiniteMMSB(_MMSB, model="finite_mmsb", obs="link"):
    """Finite assortative MMSB with ``K`` communities (``model=finite_mmsb``; no moves)."""
