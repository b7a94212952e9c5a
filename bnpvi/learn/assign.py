"""A data file under fixed globals, part by part: a mixture's assignments, a topic model's document weights.

Every part is a batch of the file's training atoms (in file order), then a block of its held-out
atoms when it has them, with the atoms' source indices; each gets the model's compiled local step
under the given globals and no global step, and only one part's local results are held at a time.

* Mixtures (:func:`assign_file`): each atom's most responsible cluster and its r_nk, from the
  local step the model was trained with (dense, or L-sparse).
* Topic models (:func:`weigh_file`): each document's E[π_d] over the K topics (:func:`topic_weights`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

HELDOUT_BLOCK = 20000
"""Held-out atoms (points, documents) per part."""


@dataclass(frozen=True)
class Assignments:
    """The assignments of consecutive atoms of one part of a data file.

    Attributes
    ----------
    index : (n,) ndarray of int64
        Each atom's source index (:meth:`bnpvi.data.base.BatchStore.source_index`).
    cluster : (n,) ndarray of int64
        The stable id of its most responsible cluster.
    probability : (n,) ndarray of float64
        That cluster's responsibility r_nk.
    heldout : bool
        Whether the atoms are held-out ones.
    """

    index: np.ndarray
    cluster: np.ndarray
    probability: np.ndarray
    heldout: bool


@dataclass(frozen=True)
class TopicWeights:
    """The topic weights of consecutive documents of one part of a data file.

    Attributes
    ----------
    index : (n,) ndarray of int64
        Each document's source index.
    proportions : (n, K) ndarray of float64
        E[π_dk] of every document and topic (:func:`topic_weights`).
    heldout : bool
        Whether the documents are held-out ones.
    """

    index: np.ndarray
    proportions: np.ndarray
    heldout: bool


def marks_heldout(store) -> bool:
    """Whether the file has a held-out part whose atoms the file's parts include: held-out points or
    documents (held-out groups of a sequence file are scored, not assigned)."""
    return getattr(store, "has_heldout", False) and getattr(store, "kind", None) != "seq"


def file_parts(store, block: int = HELDOUT_BLOCK) -> Iterator[tuple[object, np.ndarray, bool]]:
    """(batch, source indices of its atoms, held out?) of every training batch of ``store`` in file order,
    then of its held-out atoms ``block`` at a time when it has them."""
    lo = 0
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        yield batch, store.source_index(lo, lo + batch.n_atoms), False
        lo += batch.n_atoms
    if marks_heldout(store):
        for lo in range(0, store.n_heldout, block):
            batch = store.read_heldout(lo, min(store.n_heldout, lo + block))
            yield batch, store.source_index(lo, lo + batch.n_atoms, heldout=True), True


def best_labels(model, globals_, batch) -> np.ndarray:
    """The position of every atom's most responsible cluster under a mixture's ``globals_``:
    argmax_k E ln π_k + E ln p(x_n | φ_k), the argmax of r_nk (Hughes 2016 thesis Eq. 3.47-3.49) without
    forming the responsibilities (equal to :func:`best_clusters`' positions, ties to the first)."""
    return model.obs.argmax_clusters(globals_.obs, model.alloc.atoms(batch), model.alloc.expected_log_pi(globals_.alloc))


def best_clusters(model, globals_, batch) -> tuple[np.ndarray, np.ndarray]:
    """The position of every atom's most responsible cluster and its r_nk under a mixture's ``globals_``."""
    return model.local_step(batch, globals_)[1].resp.best()


def assign_file(model, globals_, store, uids: np.ndarray) -> Iterator[Assignments]:
    """The assignments of every atom of ``store`` (:func:`file_parts`) under a mixture's globals; clusters
    named by their ``uids``."""
    uids = np.asarray(uids, dtype=np.int64)
    for batch, index, heldout in file_parts(store):
        cluster, prob = best_clusters(model, globals_, batch)
        yield Assignments(index, uids[cluster], prob, heldout)


def topic_weights(model, globals_, batch) -> np.ndarray:
    """(n_docs, K) E[π_dk] = θ_dk / Σ_l θ_dl of every document of ``batch``, from a topic model's local step
    under ``globals_`` (θ_d = N_d + α β̂, Hughes 2016 thesis Eq. 5.12; the sum in the denominator includes
    the HDP's mass α β̂_> beyond K, so rows sum to a little less than 1)."""
    local = model.local_step(batch, globals_)[1]
    theta = local.tables["doc_counts"] + local.tables["prior"]
    return theta / (theta.sum(axis=1, keepdims=True) + float(local.tables["prior_rest"]))


def weigh_file(model, globals_, store) -> Iterator[TopicWeights]:
    """The topic weights of every document of ``store`` (:func:`file_parts`) under a topic model's globals.

    A bag-of-words document is an atom, named by its source index; a document of grouped vectors
    (a sequence file, each sequence one document) is a sequence, named by its position in the file.
    """
    for batch, index, heldout in file_parts(store):
        if hasattr(batch, "seq_range"):
            index = batch.first_seq + np.arange(batch.n_seqs, dtype=np.int64)
        yield TopicWeights(index, topic_weights(model, globals_, batch), heldout)
