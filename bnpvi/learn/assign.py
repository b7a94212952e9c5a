"""Hard assignments of a data file's atoms under fixed globals: a mixture's local step, batch by batch.

Each atom gets the cluster of its largest responsibility r_nk and that r_nk, from the
compiled local step the model was trained with (dense, or L-sparse), under the given
globals and without a global step. Only one batch's responsibilities are held at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from bnpvi.alloc.mixture import MixtureAlloc
from bnpvi.errors import BnpviError


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


def check_mixture(model, what: str) -> None:
    """A one-line BnpviError unless ``model`` is a mixture (``what`` names the operation)."""
    if not isinstance(model.alloc, MixtureAlloc):
        raise BnpviError(f"{what} applies to mixtures (model=dp_mix or finite_mix) so far, not "
                         f"model={model.alloc.name}")


def best_clusters(model, globals_, batch) -> tuple[np.ndarray, np.ndarray]:
    """The position of every atom's most responsible cluster and its r_nk under ``globals_``."""
    return model.local_step(batch, globals_)[1].resp.best()


def marks_heldout(store) -> bool:
    """Whether the file has a held-out part, whose atoms :func:`assign_file` assigns too."""
    return getattr(store, "has_heldout", False)


def assign_file(model, globals_, store, uids: np.ndarray, block: int = 20000) -> Iterator[Assignments]:
    """The assignments of every training atom of ``store`` (batch by batch, in file order), then of every
    held-out one (``block`` at a time) when the file has them; clusters named by their ``uids``."""
    check_mixture(model, "assigning atoms to clusters")
    uids = np.asarray(uids, dtype=np.int64)
    lo = 0
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        cluster, prob = best_clusters(model, globals_, batch)
        yield Assignments(store.source_index(lo, lo + batch.n_atoms), uids[cluster], prob, False)
        lo += batch.n_atoms
    if marks_heldout(store):
        for lo in range(0, store.n_heldout, block):
            batch = store.read_heldout(lo, min(store.n_heldout, lo + block))
            cluster, prob = best_clusters(model, globals_, batch)
            yield Assignments(store.source_index(lo, lo + batch.n_atoms, heldout=True), uids[cluster], prob, True)
