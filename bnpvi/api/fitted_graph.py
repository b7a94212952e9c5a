"""A loaded graph model (``hdp_mmsb``, ``finite_mmsb``): memberships, community strengths, link probabilities.

The nodes' memberships q(π_i) are global parameters of the aMMSB (Stephenson 2015 §6.1), so a
trained model speaks about the nodes it was trained on: :meth:`FittedGraphModel.predict_proba` of
node pairs is E[π_i]ᵀ E[Φ] E[π_j] (:func:`bnpvi.learn.links.link_probabilities`), and
:meth:`FittedGraphModel.apply` scores the pairs of a graph file on the same nodes: its held-out
pairs when it has them (with their AUC and average precision), else its edges.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from bnpvi.alloc.mmsb import MMSBAlloc
from bnpvi.api.fitted import FittedModel
from bnpvi.data.writes import new_h5, replacing
from bnpvi.errors import BnpviError
from bnpvi.learn.links import community_strengths, link_probabilities
from bnpvi.metrics import average_precision, roc_auc


class FittedGraphModel(FittedModel, alloc=MMSBAlloc):
    """A trained aMMSB under its final globals (:class:`~bnpvi.api.fitted.FittedModel`'s attributes, and:)

    Attributes
    ----------
    memberships_ : (N, K) ndarray
        E[π_i] of every node over the K communities (columns in the order of ``cluster_ids_``).
    strengths_ : (K,) ndarray
        E[φ_k], the probability of an edge between two nodes that both act in community k.
    """

    def __init__(self, model, globals_, cfg, tree: dict):
        super().__init__(model, globals_, cfg, tree)
        self.memberships_ = model.alloc.memberships(globals_.alloc)
        self.strengths_ = community_strengths(globals_)

    def predict(self) -> np.ndarray:
        """The main community of every node (stable ids)."""
        return self.cluster_ids_[np.argmax(self.memberships_, axis=1)]

    def predict_proba(self, pairs) -> np.ndarray:
        """E_q[x_ij] of node pairs ``pairs`` ((P, 2) node indices)."""
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
            raise BnpviError(f"pairs must be a (P, 2) array of node indices, got shape {pairs.shape}")
        if pairs.size and (pairs.min() < 0 or pairs.max() >= self.D):
            raise BnpviError(f"pairs hold node indices outside 0..{self.D - 1}")
        return link_probabilities(self.model, self.globals_, pairs[:, 0], pairs[:, 1])

    def apply(self, store, out: Path) -> dict:
        """Link probabilities of the file's held-out pairs (else of its edges) in ``out`` (``src``, ``dst``,
        ``probability``, and ``value`` for held-out pairs) and the .csv beside it (node names); scores: the
        held-out AUC and average precision."""
        out = Path(out)
        self.check_store(store)
        store.validate()
        src, dst, value = store.heldout_pairs()
        if not store.has_heldout:
            graph = store.read_all()
            src = np.repeat(np.arange(store.n_atoms), np.diff(graph.indptr))
            dst, value = graph.indices.astype(np.int64), None
        prob = link_probabilities(self.model, self.globals_, src, dst)
        names = store.node_names()
        with new_h5(out) as f:  # out appears only once the CSV is written too
            f.create_dataset("src", data=src)
            f.create_dataset("dst", data=dst)
            f.create_dataset("probability", data=prob)
            if value is not None:
                f.create_dataset("value", data=value)
            with replacing(out.with_suffix(".csv")) as csv_tmp, open(csv_tmp, "w", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(["src", "dst", "probability"] + (["value"] if value is not None else []))
                for n in range(src.shape[0]):
                    writer.writerow([names[src[n]], names[dst[n]], f"{prob[n]:.6g}"]
                                    + ([int(value[n])] if value is not None else []))
        scores = {}
        if value is not None:
            scores = {"heldout_auc": (roc_auc(value, prob), "(held-out pairs)"),
                      "heldout_ap": (average_precision(value, prob), "(held-out pairs)")}
        what = "held-out pairs" if value is not None else "edges"
        return {"written": f"link probabilities of {src.shape[0]} {what}", "scores": scores}
