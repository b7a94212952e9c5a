"""Sequence files (kind ``"seq"``): one row of X per time step, whole sequences per batch.

Sequence s is time steps ``seq_range[s]:seq_range[s+1]``; batch offsets count
sequences, so a batch never splits one. The optional ``Xprev`` holds the
observation before each step, for auto-regressive models. A file without it is
read by a *lagged* store (:meth:`SeqStore.lagged`): every step but the first of
each sequence, with the step before it as Xprev (never across sequences).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from bnpvi.data.base import (chunk_1d, chunk_rows, heldout_info, sized_offsets, split_offsets, write_batch_file,
                             write_blocks)
from bnpvi.data.batch import SeqBatch
from bnpvi.data.checks import (EntryCheck, as_rows, check_finite, check_label_names, check_labels, check_n_batches,
                               check_points_layout, check_seq_range)
from bnpvi.data.moments import DataMoments
from bnpvi.data.points import RowStore, _MomentSum, note_missing
from bnpvi.errors import BnpviError

_log = logging.getLogger("bnpvi.data")


@dataclass(frozen=True)
class HeldoutSequences:
    """Whole sequences (groups) kept apart for evaluation, stored in the ``heldout`` group of a sequence
    file (``bnpvi-data convert --heldout F``): a topic model of grouped real vectors scores them by group
    completion (:func:`bnpvi.learn.heldout.group_completion_loglik`).

    Attributes
    ----------
    X : (T_h, D) array
        Their time steps, one sequence after another.
    seq_range : (n_h + 1,) int
        Held-out sequence s is rows ``seq_range[s]:seq_range[s+1]`` of X.
    index, train_index : int arrays
        Source index of each held-out sequence, and of each training sequence in the order written.
    fraction, seed : optional
        The fraction F asked for and the seed that chose them (stored as attributes).
    """

    X: np.ndarray
    seq_range: np.ndarray
    index: np.ndarray
    train_index: np.ndarray
    fraction: float | None = None
    seed: int | None = None


class SeqStore(RowStore, kind="seq"):
    """Reader of a sequence file: batch b is sequences ``offsets[b]:offsets[b+1]`` as a SeqBatch.

    ``n_atoms`` is the number of time steps T and ``batch_sizes()`` counts time
    steps; ``offsets`` and ``n_batches`` count whole sequences. ``iter_blocks``
    and the moments run over the rows of X, as for points; the moments add the
    covariance of the first differences (``DataMoments.diff_cov``).

    A lagged store (:meth:`lagged`) drops the first step of every sequence:
    ``n_atoms``, ``batch_sizes()``, ``read_batch``, ``labels()``, ``iter_blocks``
    and the moments all count the steps kept (T − n_seqs), numbered in file order;
    ``offsets`` and ``n_seqs`` still count the file's sequences, including those of
    length 1, which hold no step any more.

    Attributes
    ----------
    n_seqs : int
        Number of sequences in the file.
    has_xprev : bool
        Whether the file holds Xprev.
    is_lagged : bool
        Whether Xprev is made from the step before (see :meth:`lagged`).
    """

    unit = "sequences"
    unit_count = "n_seqs"

    def __init__(self, *args, lagged: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        steps = np.asarray(self._handle()["seq_range"][self._offsets], dtype=np.int64)
        if np.any(np.diff(steps) <= 0):
            b = int(np.flatnonzero(np.diff(steps) <= 0)[0])
            raise BnpviError(f"data file {self._path} has an inconsistent seq_range (batch {b} would hold time "
                             f"steps {steps[b]}..{steps[b + 1]})")
        self._steps = steps
        self._lagged = bool(lagged)

    def lagged(self) -> "SeqStore":
        """The same file and split read for a first-order auto-regressive family, when it holds no Xprev.

        The regressor of step t is x_{t−1} of the same sequence, so the first step of
        every sequence is dropped (it has none) and sequences of length 1 vanish
        (their number is logged). This store stays open; the new one opens its own handle.

        Returns
        -------
        SeqStore
            With ``is_lagged`` True.

        Raises
        ------
        BnpviError
            A batch holds only sequences of length 1 (it would be empty).
        ValueError
            The file holds Xprev (read it as it is).
        """
        if self.has_xprev:
            raise ValueError(f"data file {self._path} holds Xprev; read it as it is")
        empty = np.flatnonzero(np.diff(self._steps) == np.diff(self._offsets))
        if empty.size:
            raise BnpviError(f"data file {self._path}: batch {int(empty[0])} holds only sequences of length 1, "
                             "which have no previous step to regress on (use fewer batches)")
        short = sum(int(np.count_nonzero(np.diff(sr) == 1)) for _, sr in self._seq_pieces())
        _log.info("%s has no Xprev: regressing each step on the one before; dropped the first step of each of "
                  "its %d sequences (%d of length 1 entirely)", self._path, self.n_seqs, short)
        return SeqStore(self._path, self._attrs, self._layout, self._offsets, self._batches_fixed,
                        self._has_labels, lagged=True)

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
        layout["n_heldout"] = 0
        if "heldout" in f:
            g = f["heldout"]
            X = g.get("X") if isinstance(g, h5py.Group) else None
            sr = g.get("seq_range") if isinstance(g, h5py.Group) else None
            if not isinstance(X, h5py.Dataset) or X.ndim != 2 or X.shape[1] != layout["D"] or X.shape[0] < 1 \
                    or not isinstance(sr, h5py.Dataset) or sr.ndim != 1 or sr.shape[0] < 2:
                raise fail(f"has a 'heldout' group without (T_h, D={layout['D']}) time steps X and their seq_range")
            layout["n_heldout"] = int(sr.shape[0]) - 1
        return {**layout, "n_units": n_seqs, "has_xprev": has_xprev}

    @property
    def n_seqs(self) -> int:
        return self._layout["n_units"]

    @property
    def has_xprev(self) -> bool:
        return self._layout["has_xprev"]

    @property
    def is_lagged(self) -> bool:
        return self._lagged

    def read_heldout(self, lo: int = 0, hi: int | None = None) -> SeqBatch:
        """Held-out sequences ``lo:hi`` (all by default) as a SeqBatch (no Xprev; ``first_seq`` = lo); seq_range
        and every value checked."""
        if not self.has_heldout:
            raise BnpviError(f"{self._path} holds no held-out sequences (make them with "
                             "`bnpvi-data convert SRC DST --heldout F`)")
        hi = self.n_heldout if hi is None else int(hi)
        g = self._handle()["heldout"]
        sr = np.asarray(g["seq_range"][int(lo):hi + 1], dtype=np.int64)
        first, last = int(sr[0]), int(sr[-1])
        if np.any(np.diff(sr) <= 0) or first < 0 or last > g["X"].shape[0]:
            raise BnpviError(f"data file {self._path} has an inconsistent heldout/seq_range (held-out sequences "
                             f"{lo}..{hi})")
        X = self._read_rows(first, last, "heldout/X")
        self._check_finite("heldout/X", first, X)
        return SeqBatch(X=X, seq_range=sr - first, first_seq=int(lo))

    @property
    def n_atoms(self) -> int:
        """Time steps: T, or T − n_seqs for a lagged store."""
        return self._layout["n_atoms"] - (self.n_seqs if self._lagged else 0)

    def batch_sizes(self) -> np.ndarray:
        """(B,) int64 array: time steps in each batch of the current split (those kept, when lagged)."""
        return np.diff(self._steps) - (np.diff(self._offsets) if self._lagged else 0)

    def labels(self) -> np.ndarray | None:
        """(n_atoms,) int64 true labels, one per step (kept step, when lagged), or None."""
        labels = super().labels()
        if labels is None or not self._lagged:
            return labels
        return labels[_later_steps(np.asarray(self._handle()["seq_range"][()], dtype=np.int64))]

    def _read(self, lo: int, hi: int) -> SeqBatch:
        """Sequences ``lo:hi`` as one SeqBatch (seq_range rebased to 0; lagged: see ``lag_sequences``)."""
        sr = np.asarray(self._handle()["seq_range"][lo:hi + 1], dtype=np.int64)
        first, last = int(sr[0]), int(sr[-1])
        X = self._read_rows(first, last)
        if self._lagged:
            X, Xprev, seq_range = lag_sequences(X, sr - first)
            return SeqBatch(X=X, seq_range=seq_range, Xprev=Xprev, start=first - lo, first_seq=lo)
        Xprev = self._read_rows(first, last, "Xprev") if self.has_xprev else None
        return SeqBatch(X=X, seq_range=sr - first, Xprev=Xprev, start=first, first_seq=lo)

    def source_index(self, lo: int, hi: int, heldout: bool = False) -> np.ndarray:
        """(hi - lo,) int64: time steps ``lo:hi`` of the training part, numbered as the file holds them (its
        held-out part records the source index of whole sequences, not of steps)."""
        return np.arange(int(lo), int(hi), dtype=np.int64)

    def _seq_pieces(self) -> Iterator[tuple[int, np.ndarray]]:
        return self._range_pieces("seq_range", "sequence", "is empty", self._limit())

    def _row_blocks(self, limit: int) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """Yield ``(start, X, later, above)`` over the rows of X in file order, in blocks of bounded size.

        ``later`` (bool) marks the rows that are not the first step of their sequence and
        ``above`` holds the row before each row (x_{t−1} where ``later``). seq_range is read
        (and checked) piece by piece alongside, so memory stays bounded.
        """
        T = self._layout["n_atoms"]
        rows = max(1, limit // self.D)
        starts = (sr[:-1] for _, sr in self._seq_pieces())
        pending = np.empty(0, dtype=np.int64)
        last = None
        for start in range(0, T, rows):
            stop = min(T, start + rows)
            X = self._read_rows(start, stop)
            while pending.size == 0 or pending[-1] < stop:
                piece = next(starts, None)
                if piece is None:
                    break
                pending = np.concatenate([pending, piece])
            cut = int(np.searchsorted(pending, stop))
            later = np.ones(X.shape[0], dtype=bool)
            later[pending[:cut] - start] = False
            pending = pending[cut:]
            above = np.concatenate([X[:1] if last is None else last, X[:-1]])
            last = X[-1:]
            yield start, X, later, above

    def _blocks(self, limit: int, name: str = "X") -> Iterator[tuple[int, np.ndarray]]:
        """Row blocks of X (as for points); a lagged store's hold only the steps kept, numbered as kept."""
        if not self._lagged:
            yield from super()._blocks(limit, name)
            return
        dropped = 0
        for start, X, later, _ in self._row_blocks(limit):
            if later.any():
                yield start - dropped, X[later]
            dropped += int(np.count_nonzero(~later))

    def _scan(self, check: bool, moments: bool) -> DataMoments | None:
        """One pass: seq_range strictly increasing and every value of X and Xprev finite (``check``);
        moments of the steps (kept ones, when lagged) and of their first differences (``moments``).

        A first difference is x_t − Xprev_t when the file holds Xprev, else x_t − x_{t−1} within
        a sequence. Blocks are combined as for points (Chan et al.'s parallel update).
        """
        total, diffs = (_MomentSum(self.D), _MomentSum(self.D)) if moments else (None, None)
        for start, X, later, above in self._row_blocks(self._limit()):
            if check:
                self._check_finite("X", start, X)
            if self.has_xprev:
                above = self._read_rows(start, start + X.shape[0], "Xprev")
                if check:
                    self._check_finite("Xprev", start, above)
            if total is None:
                continue
            kept = X[later] if self._lagged else X
            diff = X - above if self.has_xprev else (X - above)[later]
            for running, rows in ((total, kept), (diffs, diff)):
                if rows.shape[0]:
                    running.add(rows)
        if total is None:
            return None
        where = f"data file {self._path}"
        return replace(total.moments(where), diff_cov=diffs.moments(where).cov if diffs.n else None)

    def _locate(self, name: str, row: int, col: int) -> str:
        if name.startswith("heldout/"):
            return f"in {name} at row {row} (column {col})"
        seq = next(start + int(np.searchsorted(sr, row, side="right")) - 1
                   for start, sr in self._seq_pieces() if row < sr[-1])
        return f"in {name} at time step {row} (sequence {seq}, batch {self._batch_of(seq)}, column {col})"

    def _info_extras(self) -> dict:
        extremes = np.array([(d.min(), d.max()) for d in (np.diff(sr) for _, sr in self._seq_pieces())])
        return {"n_seqs": self.n_seqs, "seq_length_min": int(extremes[:, 0].min()),
                "seq_length_max": int(extremes[:, 1].max()), "xprev": self.has_xprev, "missing": self.n_missing,
                **heldout_info(self)}

    def _describe(self) -> str:
        lagged = ", lagged" if self._lagged else ""
        return f"N={self.n_atoms}, D={self.D}, n_seqs={self.n_seqs}, xprev={self.has_xprev}{lagged}"


def _later_steps(seq_range: np.ndarray) -> np.ndarray:
    """(T,) bool: True for every step but the first of its sequence (``seq_range`` from 0 to T)."""
    later = np.ones(int(seq_range[-1]), dtype=bool)
    later[seq_range[:-1]] = False
    return later


def lag_sequences(X: np.ndarray, seq_range: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sequences as first-order auto-regressive data: each step with the step before it as Xprev.

    Parameters
    ----------
    X : (T, D) ndarray
    seq_range : (n_seqs + 1,) int64 ndarray
        Sequence s is rows ``seq_range[s]:seq_range[s+1]`` (0 first, T last, strictly increasing).

    Returns
    -------
    X : (T − n_seqs, D) ndarray
        Every step but the first of each sequence, in order.
    Xprev : (T − n_seqs, D) ndarray
        The step before each of them, in the same sequence.
    seq_range : int64 ndarray
        The kept steps' sequences, one shorter each; sequences of length 1 vanish.
    """
    later = _later_steps(seq_range)
    above = np.roll(later, -1)  # row t is x_{t−1} of a kept step iff row t + 1 is kept
    kept_range = np.unique(seq_range - np.arange(seq_range.shape[0], dtype=np.int64))
    return np.ascontiguousarray(X[later]), np.ascontiguousarray(X[above]), kept_range


def write_sequences(path, X, seq_range, Xprev=None, n_batches: int = 1, labels=None, batches_fixed: bool = True,
                    source: str = "", compression: str | None = None, label_names=None,
                    heldout: HeldoutSequences | None = None, batch_sizes=None) -> Path:
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
    label_names : sequence of str, optional
        The name of each label code (``labels`` are then codes).
    heldout : HeldoutSequences, optional
        Whole sequences kept apart for evaluation (group ``heldout``); X above is then the training
        sequences only.
    batch_sizes : sequence of int, optional
        The sequences of every batch, in order, in place of ``n_batches`` equal ones (as for
        :func:`~bnpvi.data.points.write_points`).

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
    X = as_rows(X)
    check_points_layout(X, where)
    T, D = X.shape
    seq_range = check_seq_range(seq_range, T, where)
    n_seqs = seq_range.shape[0] - 1
    if Xprev is not None:
        Xprev = as_rows(Xprev)
        check_points_layout(Xprev, where, name="Xprev")
        if Xprev.shape != X.shape:
            raise BnpviError(f"{where}: Xprev has shape {Xprev.shape} but X has shape {X.shape}")
    if labels is not None:
        labels = check_labels(labels[:], T, where, atoms=f"X has {T} rows (time steps)")
    if label_names is not None:
        label_names = check_label_names(label_names, labels, where)
    offsets = split_offsets(n_seqs, check_n_batches(n_batches, n_seqs, where, f"n_seqs={n_seqs}")) \
        if batch_sizes is None else sized_offsets(batch_sizes, n_seqs, where)
    if heldout is not None:
        held = as_rows(heldout.X)
        check_points_layout(held, f"{where}: held-out sequences")
        if held.shape[1] != D:
            raise BnpviError(f"{where}: the held-out sequences have D={held.shape[1]}, the training ones D={D}")
        held_range = check_seq_range(heldout.seq_range, held.shape[0], f"{where}: held-out sequences")

    def datasets(f: h5py.File) -> None:
        chunks = (chunk_rows(T, D), D)
        entries = EntryCheck(where)
        note_missing(write_blocks(f, "X", X, np.float64, entries, chunks=chunks, compression=compression), entries)
        if Xprev is not None:
            write_blocks(f, "Xprev", Xprev, np.float64, lambda block, first: check_finite(block, where, "Xprev", first),
                         chunks=chunks, compression=compression)
        f.create_dataset("seq_range", data=seq_range, chunks=(chunk_1d(n_seqs + 1, 8),))
        if heldout is not None:
            g = f.create_group("heldout")
            entries = EntryCheck(f"{where}: held-out sequences")
            note_missing(write_blocks(g, "X", held, np.float64, entries, compression=compression), entries)
            g.create_dataset("seq_range", data=held_range)
            g.create_dataset("index", data=np.asarray(heldout.index, dtype=np.int64))
            g.create_dataset("train_index", data=np.asarray(heldout.train_index, dtype=np.int64))
            for key in ("fraction", "seed"):
                if getattr(heldout, key) is not None:
                    g.attrs[key] = getattr(heldout, key)

    return write_batch_file(path, where, "seq", T, D, offsets, labels, batches_fixed,
                            source, datasets, {"n_seqs": np.int64(n_seqs)}, label_names)
