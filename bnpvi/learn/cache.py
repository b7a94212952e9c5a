"""Memoized VI's per-batch caches of summaries: in memory, or in HDF5 files beside the checkpoints.

Both stores hold one :class:`~bnpvi.stats.SuffStats` per batch (None before the batch's first
visit), are read and written one batch at a time, and give back exactly what was put in, so a
run is the same to the last bit with either (``alg.cache=memory|disk``).

On disk (:class:`DiskCaches`) the driver's memory does not grow with the number of batches.
Checkpoints stay atomic by generations: writes go to the live file ``.caches.G.h5.tmp`` in the
checkpoints folder; a checkpoint seals it (flushed, synced, renamed ``caches.G.h5``) and records
in which generation each batch's cache is, and the next write starts generation G + 1. A sealed
file is never written again, so the files a checkpoint names are whole whatever happens after
its rename; a live file left by a killed run is a temporary file, removed on resume with the
other partial writes (:func:`bnpvi.io.run_dir.remove_partial_writes`); files that the latest
checkpoint no longer names are removed after it (:meth:`DiskCaches.committed`).
"""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Callable, Iterator

import h5py
import numpy as np

from bnpvi.errors import BnpviError
from bnpvi.io.h5tree import read_tree, write_tree
from bnpvi.stats import SuffStats

CACHE_KINDS = ("memory", "disk")
"""The values of ``alg.cache``."""
SEALED = re.compile(r"caches\.(\d+)\.h5")
"""The name of a sealed cache file; its number is the generation."""


def sealed_path(folder: Path, generation: int) -> Path:
    return Path(folder) / f"caches.{int(generation)}.h5"


def sealed_generations(folder: Path) -> set[int]:
    """Generations of the sealed cache files in ``folder``."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    return {int(m.group(1)) for m in (SEALED.fullmatch(p.name) for p in folder.iterdir()) if m}


def remove_sealed(folder: Path, keep: set[int]) -> None:
    """Remove the sealed cache files of ``folder`` whose generation is not in ``keep``."""
    for generation in sealed_generations(folder) - set(keep):
        sealed_path(folder, generation).unlink(missing_ok=True)


def saved_caches(tree: dict, folder: Path) -> Iterator[tuple[int, SuffStats]]:
    """(batch, cache) of a checkpoint's ``caches`` entry, one at a time: the caches themselves (saved by
    :class:`MemoryCaches`) or where they are (the generation of each batch, saved by :class:`DiskCaches`)."""
    if "generation" not in tree:
        for b in sorted(int(k) for k in tree):
            yield b, SuffStats.from_tree(tree[str(b)])
        return
    generation = np.asarray(tree["generation"], dtype=np.int64)
    for g in sorted(set(generation.tolist()) - {-1}):
        path = sealed_path(folder, g)
        if not path.is_file():
            raise BnpviError(f"the checkpoint's memo caches are in {path}, which is missing")
        with h5py.File(path, "r") as f:
            for b in np.flatnonzero(generation == g):
                yield int(b), SuffStats.from_tree(read_tree(f[str(b)]))


class MemoryCaches:
    """The caches in a list (``alg.cache=memory``); a checkpoint holds them whole.

    Parameters
    ----------
    n_batches : int
    folder : Path, optional
        The run's checkpoints folder: where a run resumed from disk caches finds them.
    """

    def __init__(self, n_batches: int, folder: Path | None = None):
        self._items: list[SuffStats | None] = [None] * int(n_batches)
        self.folder = folder

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, b: int) -> SuffStats | None:
        return self._items[b]

    def __setitem__(self, b: int, stats: SuffStats) -> None:
        self._items[b] = stats

    def __iter__(self) -> Iterator[SuffStats | None]:
        return iter(self._items)

    def rewrite(self, edit: Callable[[int, SuffStats], SuffStats]) -> None:
        """Every cache b replaced by ``edit(b, cache)`` (an accepted move, a sort), one at a time: each old
        cache is freed as its new one is made, so a rewrite never holds two copies of all the caches."""
        for b, cache in enumerate(self._items):
            if cache is not None:
                self._items[b] = edit(b, cache)

    def state(self) -> dict:
        return {str(b): c.to_tree() for b, c in enumerate(self._items) if c is not None}

    def load(self, tree: dict) -> None:
        for b, stats in saved_caches(tree, self.folder):
            self._items[b] = stats

    def committed(self) -> None:
        """After a checkpoint: cache files of a disk-cache run resumed in memory are no longer needed."""
        if self.folder is not None:
            remove_sealed(self.folder, set())

    def close(self) -> None:
        """Nothing to release."""


class DiskCaches:
    """The caches in HDF5 files of the checkpoints folder, one group per batch (``alg.cache=disk``;
    generations: module docstring).

    Parameters
    ----------
    n_batches : int
    folder : Path
        The run's checkpoints folder.
    """

    def __init__(self, n_batches: int, folder: Path):
        self.folder = Path(folder)
        self.generation = np.full(int(n_batches), -1, dtype=np.int64)  # where each batch's cache is; -1: none
        self.next_generation = max(sealed_generations(self.folder), default=-1) + 1
        self.live: int | None = None  # generation of the live file, once a write opened it
        self._files: dict[int, h5py.File] = {}

    def __len__(self) -> int:
        return self.generation.shape[0]

    def _live_path(self, generation: int) -> Path:
        return self.folder / f".caches.{generation}.h5.tmp"

    def _file(self, generation: int) -> h5py.File:
        if generation not in self._files:
            self._files[generation] = h5py.File(sealed_path(self.folder, generation), "r")
        return self._files[generation]

    def __getitem__(self, b: int) -> SuffStats | None:
        g = int(self.generation[b])
        return None if g < 0 else SuffStats.from_tree(read_tree(self._file(g)[str(b)]))

    def __setitem__(self, b: int, stats: SuffStats) -> None:
        if self.live is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.live, self.next_generation = self.next_generation, self.next_generation + 1
            self._files[self.live] = h5py.File(self._live_path(self.live), "w")
        f = self._files[self.live]
        if str(b) in f:  # HDF5 reuses the freed space for the new group
            del f[str(b)]
        write_tree(f.create_group(str(b)), stats.to_tree())
        self.generation[b] = self.live

    def __iter__(self) -> Iterator[SuffStats | None]:
        return (self[b] for b in range(len(self)))

    def rewrite(self, edit: Callable[[int, SuffStats], SuffStats]) -> None:
        """Every cache b replaced by ``edit(b, cache)``, one batch at a time."""
        for b in range(len(self)):
            cache = self[b]
            if cache is not None:
                self[b] = edit(b, cache)

    def seal(self) -> None:
        """Make the live file a sealed one: flushed, synced to disk and renamed (module docstring)."""
        if self.live is None:
            return
        generation, self.live = self.live, None
        self._files.pop(generation).close()
        tmp = self._live_path(generation)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, sealed_path(self.folder, generation))
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename is on disk before the checkpoint that names the file
        finally:
            os.close(fd)

    def state(self) -> dict:
        """Seals the live file; where each batch's cache is, for the checkpoint."""
        self.seal()
        return {"generation": self.generation.copy()}

    def load(self, tree: dict) -> None:
        if "generation" in tree:
            saved = np.asarray(tree["generation"], dtype=np.int64)
            if saved.shape[0] > len(self):
                raise BnpviError(f"the checkpoint's memo caches are of {saved.shape[0]} batches; the data file has "
                                 f"{len(self)}")
            self.generation[:saved.shape[0]] = saved  # a run grown by new batches: theirs have no cache yet
            for g in set(self.generation.tolist()) - {-1}:
                if not sealed_path(self.folder, g).is_file():
                    raise BnpviError(f"the checkpoint's memo caches are in {sealed_path(self.folder, g)}, "
                                     "which is missing")
            return
        for b, stats in saved_caches(tree, self.folder):  # a run with caches in memory, resumed on disk
            self[b] = stats
        self.seal()  # not a partial write: the resume removes those once it has started

    def committed(self) -> None:
        """After a checkpoint: remove the sealed files no batch's cache is in any more."""
        keep = set(self.generation.tolist()) - {-1}
        for g in [g for g in self._files if g not in keep and g != self.live]:
            self._files.pop(g).close()
        remove_sealed(self.folder, keep)

    def close(self) -> None:
        """Close the files. The live one is removed: no checkpoint names it (a run that ends writes its last
        checkpoint first, which seals it; ``checkpoints=false`` writes none), and a folder left empty goes too."""
        for f in self._files.values():
            f.close()
        self._files = {}
        if self.live is not None:
            self._live_path(self.live).unlink(missing_ok=True)
            self.live = None
            with contextlib.suppress(OSError):  # not empty: the checkpoints are there
                self.folder.rmdir()


def make_caches(kind: str, n_batches: int, folder: Path) -> MemoryCaches | DiskCaches:
    """The caches ``alg.cache`` names; ``folder`` is the run's checkpoints folder."""
    if kind == "memory":
        return MemoryCaches(n_batches, folder)
    if kind == "disk":
        return DiskCaches(n_batches, folder)
    raise BnpviError(f"alg.cache must be one of {', '.join(CACHE_KINDS)}, got {kind!r}")
