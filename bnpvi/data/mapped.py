"""Arrays in files, read a block at a time: :class:`RowReader` is what the converter's writers read (rows by
slices or by index arrays); :class:`JoinedRows` puts arrays one after another; :class:`MappedArray` maps an array stored in a file (an ``.npy`` file's data, or a
spool) and keeps only the block it reads resident; :class:`Spool` collects blocks in a scratch file and reads
them back as a :class:`MappedArray`; :func:`scratch_space` is the directory they live in.

Pages of a memory-mapped file that a process has touched count in its resident memory until it unmaps them
or tells the kernel it no longer needs them, so reading a large map from end to end would hold the whole file.
A :class:`MappedArray` copies what each read asks for and then returns the mapped pages to the kernel
(``madvise(MADV_DONTNEED)``; the file's data stays in the page cache, shared and reclaimable), so the
converter's memory is one block, whatever the size of the file.
"""
from __future__ import annotations

import contextlib
import mmap
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import numpy as np

from bnpvi.data.writes import writing

# Rows of a gather read between two releases of the mapped pages. Each row may fault in a page of its own,
# and the kernel maps the cached pages around a faulting one too (fault-around, 64 KiB), so a gather holds up
# to this many x 64 KiB: 256 rows, 16 MiB (4,096 rows held 1 GB more at 2e7 rows, no faster).
_GATHER_ROWS = 2**8


class RowReader:
    """An array read by rows along its leading axis: ``a[lo:hi]`` (step 1) and ``a[index]`` (a 1-D integer
    array, any order) return new arrays. Subclasses set ``shape`` and ``dtype`` and read with ``_take``
    (and ``_slice``, when contiguous rows are cheaper than any)."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            lo, hi, step = key.indices(self.shape[0])
            if step != 1:
                raise IndexError(f"a {type(self).__name__} reads slices of step 1 only")
            return self._slice(lo, hi)
        return self._take(np.asarray(key, dtype=np.int64))

    def _slice(self, lo: int, hi: int) -> np.ndarray:
        return self._take(np.arange(lo, hi, dtype=np.int64))

    def _take(self, index: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class JoinedRows(RowReader):
    """The rows of several arrays one after another (``numpy.vstack`` without copying them): what a file
    continued by new rows writes, read a block at a time from an open data file's dataset and the new rows.

    Parameters
    ----------
    parts : sequence of array-likes
        Arrays, h5py datasets or other :class:`RowReader` objects sliceable by rows, with the same trailing shape.
    """

    def __init__(self, parts):
        self.parts = list(parts)
        trailing = {tuple(part.shape[1:]) for part in self.parts}
        if len(trailing) != 1:
            raise ValueError(f"the parts of joined rows have trailing shapes {sorted(trailing)}")
        self.bounds = np.concatenate([[0], np.cumsum([part.shape[0] for part in self.parts])]).astype(np.int64)
        self.shape = (int(self.bounds[-1]), *trailing.pop())
        self.dtype = np.result_type(*(part.dtype for part in self.parts))

    def _slice(self, lo: int, hi: int) -> np.ndarray:
        pieces = [np.asarray(part[max(lo - a, 0):min(hi, b) - a], dtype=self.dtype)
                  for part, a, b in zip(self.parts, self.bounds[:-1], self.bounds[1:]) if lo < b and hi > a]
        return np.concatenate(pieces) if pieces else np.empty((0, *self.shape[1:]), dtype=self.dtype)

    def _take(self, index: np.ndarray) -> np.ndarray:
        out = np.empty((index.shape[0], *self.shape[1:]), dtype=self.dtype)
        part_of = np.searchsorted(self.bounds, index, side="right") - 1
        for p, part in enumerate(self.parts):
            where = np.flatnonzero(part_of == p)
            if where.size:  # h5py reads increasing, distinct rows
                rows, back = np.unique(index[where] - self.bounds[p], return_inverse=True)
                out[where] = np.asarray(part[rows], dtype=self.dtype)[back]
        return out


class MappedArray(RowReader):
    """A read-only array stored in a file from byte ``offset`` on, read through a memory map.

    Reading ``a[lo:hi]`` or ``a[index]`` (a 1-D integer array, any order) returns a copy and releases the
    mapped pages, so memory holds the block read, never the file. ``shape``, ``dtype``, ``ndim`` and ``len``
    are those of the stored array.

    Parameters
    ----------
    path : str or Path
    offset : int
        Where the array's data starts in the file.
    dtype : numpy dtype
    shape : tuple of int
    fortran_order : bool, default False
        Whether the data is stored column by column (as ``.npy`` files may).
    """

    def __init__(self, path, offset: int, dtype, shape: tuple[int, ...], fortran_order: bool = False):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self._map = None
        if self.dtype.itemsize * int(np.prod(self.shape)) == 0:
            self._array = np.empty(self.shape, dtype=self.dtype)
            return
        with open(self.path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._array = np.ndarray(self.shape, self.dtype, buffer=self._map, offset=int(offset),
                                 order="F" if fortran_order else "C")

    def _slice(self, lo: int, hi: int) -> np.ndarray:
        block = np.array(self._array[lo:hi])
        self._release()
        return block

    def _take(self, index: np.ndarray) -> np.ndarray:
        order = np.argsort(index, kind="stable")
        block = np.empty((index.shape[0],) + self.shape[1:], dtype=self.dtype)
        for lo in range(0, index.shape[0], _GATHER_ROWS):
            rows = order[lo:lo + _GATHER_ROWS]
            block[rows] = self._array[index[rows]]
            self._release()
        return block

    def _release(self) -> None:
        """Return the mapped pages to the kernel (where the platform can; elsewhere they stay until closed)."""
        if self._map is not None and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Unmap the file (idempotent); reading afterwards fails."""
        self._array = None
        if self._map is not None:
            self._map.close()
            self._map = None


class Spool:
    """Blocks of one dtype and row width appended to a file in a scratch directory, read back as a
    :class:`MappedArray` (:meth:`mapped`) once the last one is in.

    Parameters
    ----------
    directory : Path
        A scratch directory (:func:`scratch_space`).
    dtype : numpy dtype
    width : int, optional
        Columns of each row; None for a 1-D array.
    """

    def __init__(self, directory: Path, dtype, width: int | None = None):
        self.dtype = np.dtype(dtype)
        self.width = width
        self.path = Path(directory) / f"spool-{uuid.uuid4().hex[:12]}.bin"
        with writing(self.path):
            self._file = open(self.path, "wb")
        self.n_rows = 0

    def append(self, block) -> None:
        """Add the rows of ``block`` (converted to the spool's dtype)."""
        block = np.ascontiguousarray(block, dtype=self.dtype)
        with writing(self.path):
            self._file.write(block.tobytes())
        self.n_rows += block.shape[0]

    def mapped(self) -> MappedArray:
        """Every row appended, as a MappedArray (no more rows can be added)."""
        with writing(self.path):
            self._file.close()
        shape = (self.n_rows,) if self.width is None else (self.n_rows, self.width)
        return MappedArray(self.path, 0, self.dtype, shape)


@contextlib.contextmanager
def scratch_space(directory=None) -> Iterator[Path]:
    """A temporary directory for spools, in ``directory`` (default: the system's), removed on exit."""
    with tempfile.TemporaryDirectory(prefix=".bnpvi-spool-", dir=directory, ignore_cleanup_errors=True) as path:
        yield Path(path)
