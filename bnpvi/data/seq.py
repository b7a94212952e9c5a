"""Sequence files (kind ``"seq"``): one row of X per time step, whole sequences per batch.

Sequence s is time steps ``seq_range[s]:seq_range[s+1]``; batch offsets count
sequences, so a batch never splits one. The optional ``Xprev`` holds the
observation before each step, for auto-regressive models.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.base import chunk_1d, chunk_rows, split_offsets, write_batch_file
from bnpvi.data.batch import SeqBatch
from bnpvi.data.checks import check_labels, check_n_batches, check_points, check_seq_range
from bnpvi.data.moments import DataMoments
from bnpvi.data.points import RowStore
from bnpvi.errors import BnpviError


class SeqStore(RowStore, kind="seq"):
    """Reader of a sequence file: batch b is sequences ``offsets[b]:offsets[b+1]`` as a SeqBatch.

    ``n_atoms`` is the number of time steps T and ``batch_sizes()`` counts time
    steps; ``offsets`` and ``n_batches`` count whole sequences. ``iter_blocks``
    and the moments run over the rows of X, as for points.

    Attributes
    ----------
    n_seqs : int
        Number of sequences.
    has_xprev : bool
        Whether the file holds Xprev.
    """

    unit = "sequences"
    unit_count = "n_seqs"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        steps = np.asarray(self._handle()["seq_range"][self._offsets], dtype=np.int64)
        if np.any(np.diff(steps) <= 0):
            b = int(np.flatnonzero(np.diff(steps) <= 0)[0])
            raise BnpviError(f"data file {self._path} has an inconsistent seq_range (batch {b} would hold time "
                             f"steps {steps[b]}..{steps[b + 1]})")
        self._steps = steps

    @classmethod
    def _read_layout(cls, f: h5py.File, attrs: dict, fail) -> dict:
        layout = super()._read_layout(f, attrs, fail)
        T = layout["n_atoms"]
        if not isinstance(f.get("seq_range"), h5py.Dataset):
            raise fail("is missing the dataset 'seq_range'")
        sr = f["seq_range"]
        if sr.ndim != 1 or sr.dtype.kind not in "iu" or sr.shape[0] < 2:
            raise fail(f"has an invalid seq_range (shape {sr.shape}, dtype {sr.dtype}); expected n_seqs+1 >= 2 "
                       "integers")
        n_seqs = int(sr.shape[0]) - 1
        first, last = int(sr[0]), int(sr[n_seqs])
        if first != 0 or last != T:
            raise fail(f"has an inconsistent seq_range (need seq_range[0] = 0 and seq_range[n_seqs] = T={T}; "
                       f"got {first} and {last})")
        if "n_seqs" in attrs and (not isinstance(attrs["n_seqs"], int) or attrs["n_seqs"] != n_seqs):
            raise fail(f"is inconsistent: attribute n_seqs={attrs['n_seqs']} but seq_range describes {n_seqs} "
                       "sequences")
        has_xprev = "Xprev" in f
        if has_xprev:
            xprev = f["Xprev"]
            if not isinstance(xprev, h5py.Dataset) or xprev.shape != (T, layout["D"]) or xprev.dtype.kind not in "biuf":
                raise fail(f"has an invalid Xprev dataset (expected ({T}, {layout['D']}) numbers, like X)")
        return {**layout, "n_units": n_seqs, "has_xprev": has_xprev}

    @property
    def n_seqs(self) -> int:
        return self._layout["n_units"]

    @property
    def has_xprev(self) -> bool:
        return self._layout["has_xprev"]

    def batch_sizes(self) -> np.ndarray:
        """(B,) int64 array: time steps in each batch of the current split."""
        return np.diff(self._steps)

    def _read(self, lo: int, hi: int) -> SeqBatch:
        """Sequences ``lo:hi`` as one SeqBatch (seq_range rebased to 0)."""
        sr = np.asarray(self._handle()["seq_range"][lo:hi + 1], dtype=np.int64)
        first, last = int(sr[0]), int(sr[-1])
        Xprev = self._read_rows(first, last, "Xprev") if self.has_xprev else None
        return SeqBatch(X=self._read_rows(first, last), seq_range=sr - first, Xprev=Xprev, start=first, first_seq=lo)

    def _seq_pieces(self) -> Iterator[tuple[int, np.ndarray]]:
        return self._range_pieces("seq_range", "sequence", "is empty", self._limit())

    def _scan(self, check: bool, moments: bool) -> DataMoments | None:
        """seq_range strictly increasing and every value of Xprev finite (``check``), then X as for points."""
        if check:
            for _ in self._seq_pieces():  # each piece is checked as it is read
                pass
            if self.has_xprev:
                for start, block in self._blocks(self._limit(), "Xprev"):
                    self._check_finite("Xprev", start, block)
        return super()._scan(check, moments)

    def _locate(self, name: str, row: int, col: int) -> str:
        seq = next(start + int(np.searchsorted(sr, row, side="right")) - 1
                   for start, sr in self._seq_pieces() if row < sr[-1])
        return f"in {name} at time step {row} (sequence {seq}, batch {self._batch_of(seq)}, column {col})"

    def _info_extras(self) -> dict:
        extremes = np.array([(d.min(), d.max()) for d in (np.diff(sr) for _, sr in self._seq_pieces())])
        return {"n_seqs": self.n_seqs, "seq_length_min": int(extremes[:, 0].min()),
                "seq_length_max": int(extremes[:, 1].max()), "xprev": self.has_xprev}

    def _describe(self) -> str:
        return f"N={self.n_atoms}, D={self.D}, n_seqs={self.n_seqs}, xprev={self.has_xprev}"


def write_sequences(path, X, seq_range, Xprev=None, n_batches: int = 1, labels=None, batches_fixed: bool = True,
                    source: str = "", compression: str | None = None) -> Path:
    """Write sequences to a batch file of kind ``"seq"``, atomically.

    Parameters
    ----------
    path : str or Path
        Destination file; its directory must exist. An existing file is replaced.
    X : array_like, shape (T, D)
        Finite real observations of every time step, sequences one after another.
    seq_range : array_like of int, shape (n_seqs + 1,)
        Sequence s is rows ``seq_range[s]:seq_range[s+1]``; 0 first, T last,
        strictly increasing (no empty sequence).
    Xprev : array_like, shape (T, D), optional
        The observation before each time step (for auto-regressive models); finite.
    n_batches : int, default 1
        Number of batches of whole sequences, as equal in sequence count as possible (1..n_seqs).
    labels : array_like of int, shape (T,), optional
        True state of every time step, stored for evaluation only.
    batches_fixed : bool, default True
        Whether the batch split is part of the data set (a reader may not re-split it).
    source : str, default ""
        Free-text provenance stored in the ``source`` attribute.
    compression : str, optional
        HDF5 compression filter for X and Xprev; none by default.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BnpviError
        One line naming ``path``: invalid X, seq_range, Xprev, labels or
        n_batches, or the file cannot be written. Nothing is left at ``path``
        (nor a temporary file) on failure.
    """
    path = Path(path).expanduser()
    where = f"cannot write {path}"
    X = check_points(X, where)
    T, D = X.shape
    seq_range = check_seq_range(seq_range, T, where)
    n_seqs = seq_range.shape[0] - 1
    if Xprev is not None:
        Xprev = check_points(Xprev, where, name="Xprev")
        if Xprev.shape != X.shape:
            raise BnpviError(f"{where}: Xprev has shape {Xprev.shape} but X has shape {X.shape}")
    if labels is not None:
        labels = check_labels(labels, T, where, atoms=f"X has {T} rows (time steps)")
    n_batches = check_n_batches(n_batches, n_seqs, where, f"n_seqs={n_seqs}")

    def datasets(f: h5py.File) -> None:
        chunks = (chunk_rows(T, D), D)
        f.create_dataset("X", data=X, chunks=chunks, compression=compression)
        if Xprev is not None:
            f.create_dataset("Xprev", data=Xprev, chunks=chunks, compression=compression)
        f.create_dataset("seq_range", data=seq_range, chunks=(chunk_1d(n_seqs + 1, 8),))

    return write_batch_file(path, where, "seq", T, D, split_offsets(n_seqs, n_batches), labels, batches_fixed,
                            source, datasets, {"n_seqs": np.int64(n_seqs)})
