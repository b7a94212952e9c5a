"""What every kind of batch file shares, and the :class:`BatchStore` base class that opens them all.

Common to all kinds: the root attributes (format, format_version, kind, N, D,
n_batches, batches_fixed, source, created), ``batch_offsets`` (B+1 increasing
offsets in the kind's batch unit: rows, documents or sequences), optional
``labels`` (one integer per atom) with optional ``label_names`` (the name of each
label code, :mod:`bnpvi.data.labels`), and atomic writing. Each kind is a subclass
of :class:`BatchStore` declared with ``kind=...``, which registers it in
:data:`STORE_KINDS`; :meth:`BatchStore.open` returns the subclass named by the
file's ``kind`` attribute. :mod:`bnpvi.data.store` imports every kind.
"""
from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, ClassVar, Iterator

import h5py
import numpy as np

from bnpvi.data.checks import positive_int
from bnpvi.data.moments import DataMoments
from bnpvi.data.progress import meter
from bnpvi.data.writes import check_written, new_h5
from bnpvi.errors import BnpviError

FORMAT = "bnpvi-batches"
FORMAT_VERSION = 1

# Largest block (in stored values) that one-pass scans (scan, moments, validate, iter_blocks), the writers and the
# converters read at once (block_values).
_SCAN_VALUES = 2**20
# Bytes per chunk of 1-D datasets.
_CHUNK_BYTES = 2**20

#: kind attribute -> reader class, filled by ``class XStore(BatchStore, kind="x")``.
STORE_KINDS: dict[str, type["BatchStore"]] = {}


# ------------------------------------------------------------------ sizes
def chunk_rows(N: int, D: int) -> int:
    """Rows per HDF5 chunk of X: about 1 MiB per chunk, at most N.

    Parameters
    ----------
    N, D : int
        Shape of X.

    Returns
    -------
    int
        ``min(N, max(1, 2**20 // (8 * D)))``.
    """
    return int(min(N, max(1, 2**20 // (8 * D))))


def chunk_1d(n: int, itemsize: int) -> int:
    """Entries per HDF5 chunk of a 1-D dataset: about 1 MiB per chunk, at least 1, at most n."""
    return int(max(1, min(n, _CHUNK_BYTES // max(1, int(itemsize)))))


def sized_offsets(batch_sizes, N: int, where: str) -> np.ndarray:
    """(B + 1,) int64 offsets of batches of the given sizes; one-line BnpviError unless they are positive
    integers that sum to N."""
    sizes = np.asarray(batch_sizes)
    if sizes.ndim != 1 or sizes.size == 0 or sizes.dtype.kind not in "iu" or np.any(sizes < 1) or sizes.sum() != N:
        raise BnpviError(f"{where}: batch_sizes must be positive integers that sum to N={N}")
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])


def split_offsets(N: int, n_batches: int) -> np.ndarray:
    """Offsets of ``n_batches`` contiguous, as-equal-as-possible ranges of N units (rows, documents, sequences).

    The sizes are those of ``np.array_split`` (the first ``N % B`` batches hold
    one unit more).

    Parameters
    ----------
    N : int
        Number of units, at least 1.
    n_batches : int
        Number of batches, 1..N.

    Returns
    -------
    offsets : (n_batches + 1,) int64 ndarray
        ``offsets[0] = 0``, ``offsets[-1] = N``, strictly increasing.
    """
    N, n_batches = int(N), int(n_batches)
    if not 1 <= n_batches <= N:
        raise ValueError(f"n_batches={n_batches} must be between 1 and N={N}")
    base, extra = divmod(N, n_batches)
    sizes = np.full(n_batches, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


# ------------------------------------------------------------------ write
def range_groups(ranges: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """Split units ``0..len(ranges)-2`` (documents, sequences: unit u is entries ``ranges[u]:ranges[u+1]``,
    ``ranges`` increasing) into consecutive groups ``(lo, hi)`` of at most ``limit`` entries each, except a
    single unit longer than ``limit``, which forms a group of its own."""
    n_units = ranges.shape[0] - 1
    lo = 0
    while lo < n_units:
        hi = int(np.searchsorted(ranges, ranges[lo] + limit, side="right")) - 1
        hi = min(n_units, max(hi, lo + 1))
        yield lo, hi
        lo = hi


def block_values() -> int:
    """Values read or written at once by the one-pass scans and the block-by-block writers and converters
    (2**20: 8 MiB of float64)."""
    return _SCAN_VALUES


def block_rows(shape: tuple[int, ...], chunk: int | None = None) -> int:
    """Rows of an array of ``shape`` read or written at once: about 2**20 values, whole HDF5 chunks of
    ``chunk`` rows when the dataset has them."""
    rows = max(1, _SCAN_VALUES // max(1, int(np.prod(shape[1:]))))
    return rows if not chunk else max(chunk, rows // chunk * chunk)


def write_blocks(group: h5py.Group, name: str, source, dtype, check: Callable | None = None,
                 **options) -> h5py.Dataset:
    """Create the dataset ``name`` of ``source``'s shape and fill it a block of rows at a time.

    Parameters
    ----------
    group : h5py.Group
    name : str
    source : array-like
        Anything sliceable along its leading axis with ``shape`` and ``dtype``: an array, a
        :class:`~bnpvi.data.mapped.MappedArray`, a :class:`~bnpvi.data.reorder.Reordered` view.
    dtype : numpy dtype
        The stored dtype; every block is converted to it.
    check : callable, optional
        ``check(block, first_row)`` raises on bad values before the block is written.
    **options
        Of ``create_dataset`` (``chunks``, ``compression``).

    Returns
    -------
    h5py.Dataset
    """
    shape = tuple(int(s) for s in source.shape)
    dataset = group.create_dataset(name, shape=shape, dtype=dtype, **options)
    step = block_rows(shape, None if dataset.chunks is None else dataset.chunks[0])
    with meter(f"writing {dataset.name.lstrip('/')}", shape[0]) as advance:
        for lo in range(0, shape[0], step):
            block = np.asarray(source[lo:lo + step])
            if check is not None:
                check(block, lo)
            dataset[lo:lo + block.shape[0]] = block.astype(dtype, copy=False)
            check_written(dataset)
            advance(block.shape[0])
    return dataset


def write_batch_file(path: Path, where: str, kind: str, N: int, D: int, offsets: np.ndarray, labels,
                     batches_fixed: bool, source: str, datasets: Callable[[h5py.File], None],
                     attrs: dict | None = None, label_names=None) -> Path:
    """Write one batch file atomically: the kind's ``datasets(f)``, then the parts every kind shares.

    Parameters
    ----------
    path : Path
        Destination; its directory must exist. An existing file is replaced.
    where : str
        Prefix of error messages (``"cannot write PATH"``).
    kind : str
        The ``kind`` attribute.
    N, D : int
        Atoms and their dimension (the ``N`` and ``D`` attributes).
    offsets : (B+1,) int64 ndarray
        Batch offsets in the kind's batch unit.
    labels : (N,) int64 ndarray or None
        True labels, already checked.
    batches_fixed : bool
    source : str
    datasets : callable
        Creates the kind's datasets in the open file; returns None or further root attributes of the kind
        that only writing can tell (a sum of the values, say).
    attrs : dict, optional
        Further root attributes of the kind.
    label_names : list of str, optional
        The name of each label code (checked), stored as ``label_names``.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BnpviError
        The directory is missing, ``path`` is a directory, or the file cannot be
        written ("cannot write PATH: no space left on device", :mod:`bnpvi.data.writes`). Nothing is
        left at ``path`` (nor a temporary file) on failure.
    """
    if not path.parent.is_dir():
        raise BnpviError(f"{where}: directory {path.parent} does not exist")
    if path.is_dir():
        raise BnpviError(f"{where}: it is a directory")

    def fill(f: h5py.File) -> None:
        written = datasets(f) or {}
        f.create_dataset("batch_offsets", data=offsets)
        if labels is not None:
            f.create_dataset("labels", data=labels, chunks=(chunk_1d(N, 8),))
        if label_names is not None:
            f.create_dataset("label_names", data=np.array(label_names, dtype=object),
                             dtype=h5py.string_dtype("utf-8"))
        f.attrs.update({"format": FORMAT, "format_version": np.int64(FORMAT_VERSION), "kind": kind,
                        "N": np.int64(N), "D": np.int64(D), "n_batches": np.int64(len(offsets) - 1),
                        "batches_fixed": bool(batches_fixed), "source": str(source),
                        "created": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        f.attrs.update(attrs or {})
        f.attrs.update(written)

    with new_h5(path) as f:
        fill(f)
    return path


# ------------------------------------------------------------------- read
def plain_number(value):
    """An HDF5 attribute as int or float (None stays None)."""
    if value is None:
        return None
    value = np.asarray(value).reshape(-1)[0]
    return int(value) if value.dtype.kind in "iu" else float(value)


def heldout_info(store) -> dict:
    """``info()`` keys of a file's held-out part: how many, and the fraction and seed that chose them."""
    out = {"heldout": store.n_heldout, "heldout_fraction": None, "heldout_seed": None}
    if store.has_heldout:
        attrs = store._handle()["heldout"].attrs
        out["heldout_fraction"] = plain_number(attrs.get("fraction"))
        out["heldout_seed"] = plain_number(attrs.get("seed"))
    return out


def piece_range(lo: int, hi: int, i: int, n: int) -> tuple[int, int]:
    """Units ``lo:hi`` cut into ``n`` contiguous parts of sizes that differ by at most one: part i's bounds."""
    size = hi - lo
    return lo + (i * size) // n, lo + ((i + 1) * size) // n


class BatchStore:
    """Read-only access to a batch file, one batch at a time; the base class of the per-kind readers.

    Open with :meth:`open`, which returns the reader of the file's kind
    (:class:`~bnpvi.data.points.PointStore`, :class:`~bnpvi.data.bow.BowStore`,
    :class:`~bnpvi.data.seq.SeqStore`); usable as a context manager. Only the
    batch offsets live in memory. The store pickles (path and split only) and
    reopens the file lazily in the receiving process, so worker processes can
    read their own batches.

    Attributes
    ----------
    path : Path
        The file, as given to :meth:`open`.
    kind : str
        The file's kind (``"points"``, ``"bow"``, ``"seq"``).
    n_atoms : int
        N: rows of X, documents, or time steps.
    D : int
        Dimension of an atom (columns of X, or the vocabulary size V).
    n_batches : int
        Number of batches in the current split (the stored one or the override).
    unit : str
        What batch offsets count: ``"rows"``, ``"documents"`` or ``"sequences"``.
    offsets : (B+1,) int64 ndarray
        Batch boundaries of the current split, in units of :attr:`unit`.
    batches_fixed : bool
        The file's ``batches_fixed`` attribute.
    has_labels : bool
        Whether the file holds true labels.
    """

    kind: ClassVar[str] = ""
    #: What batch offsets count (a batch always holds whole units).
    unit: ClassVar[str] = "atoms"
    #: The name of the number of units in messages.
    unit_count: ClassVar[str] = "N"
    #: Datasets of the group ``heldout`` with the source index of every training and every held-out atom.
    source_index_names: ClassVar[tuple[str, str]] = ("train_index", "index")

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind = kind
            STORE_KINDS[kind] = cls

    def __init__(self, path: Path, attrs: dict, layout: dict, offsets: np.ndarray, batches_fixed: bool,
                 has_labels: bool, handle: h5py.File | None = None):
        self._path = Path(path)
        self._attrs = dict(attrs)
        self._layout = dict(layout)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._offsets.setflags(write=False)
        self._batches_fixed = bool(batches_fixed)
        self._has_labels = bool(has_labels)
        self._file = handle
        self._pid = os.getpid()
        self._closed = False
        self._stat = _file_stat(self._path)
        self._digest = _edge_digest(self._path)

    # ------------------------------------------------------------ opening
    @classmethod
    def open(cls, path, n_batches: int | None = None) -> "BatchStore":
        """Open a batch file, check its structure, and fix the batch split.

        Parameters
        ----------
        path : str or Path
            A file written by ``write_points``, ``write_documents`` or
            ``write_sequences`` (``bnpvi-data convert``).
        n_batches : int, optional
            Batch count to use instead of the stored one. Allowed when the file's
            batches are not fixed (the units - rows, documents or sequences - are
            then split into ``n_batches`` contiguous ranges, as equal in count as
            possible, in memory; the file is not touched), or when it equals the
            stored count.

        Returns
        -------
        BatchStore
            The reader of the file's kind (a subclass of ``cls``).

        Raises
        ------
        BnpviError
            One line naming the file: not found, not HDF5, not a bnpvi batch file,
            unsupported format version or kind, missing or misshapen datasets,
            inconsistent offsets or attributes, N=0, or an ``n_batches`` that
            conflicts with fixed batches or exceeds the number of units.
        """
        path = Path(path).expanduser()
        if not path.exists():
            raise BnpviError(f"data file not found: {path}")
        if path.is_dir():
            raise BnpviError(f"data file {path} is a directory, not a file")
        try:
            f = h5py.File(path, "r")
        except OSError as err:
            if not h5py.is_hdf5(path):
                raise BnpviError(f"data file {path} is not an HDF5 file") from None
            raise BnpviError(f"data file {path} cannot be opened: {str(err).splitlines()[0]}") from None
        try:
            return cls._from_handle(path, f, n_batches)
        except BaseException:
            f.close()
            raise

    @classmethod
    def _from_handle(cls, path: Path, f: h5py.File, n_batches: int | None) -> "BatchStore":
        def fail(problem: str) -> BnpviError:
            return BnpviError(f"data file {path} {problem}")

        attrs = read_attrs(f)
        if not isinstance(attrs.get("format"), str) or attrs["format"] != FORMAT:
            raise fail("is not a bnpvi batch file (no format='bnpvi-batches' attribute; "
                       "write one with `bnpvi-data convert`)")
        version = attrs.get("format_version")
        if not isinstance(version, (int, float)) or version != FORMAT_VERSION:
            raise fail(f"has unsupported format_version {version!r} (this bnpvi reads version {FORMAT_VERSION})")
        kind = attrs.get("kind", "points")
        store_cls = STORE_KINDS.get(kind) if isinstance(kind, str) else None
        if store_cls is None:
            raise fail(f"holds data of kind {kind!r}; this bnpvi reads only {', '.join(map(repr, STORE_KINDS))}")
        if not issubclass(store_cls, cls):
            raise fail(f"holds data of kind {kind!r}, which {cls.__name__} does not read")
        layout = store_cls._read_layout(f, attrs, fail)
        offsets = store_cls._stored_offsets(f, attrs, layout["n_units"], fail)
        N = layout["n_atoms"]
        has_labels = "labels" in f
        if has_labels:
            lab = f["labels"]
            if not isinstance(lab, h5py.Dataset) or lab.shape != (N,) or lab.dtype.kind not in "iu":
                raise fail(f"has an invalid labels dataset (expected ({N},) integers)")
        if "label_names" in f:
            names = f["label_names"]
            if not has_labels or not isinstance(names, h5py.Dataset) or names.ndim != 1 \
                    or h5py.check_string_dtype(names.dtype) is None:
                raise fail("has an invalid label_names dataset (expected 1-D strings beside labels)")
        fixed = bool(attrs.get("batches_fixed", True))
        if n_batches is not None:
            offsets = store_cls._resplit(offsets, n_batches, layout["n_units"], fixed, fail)
        return store_cls(path, attrs, layout, offsets, fixed, has_labels, handle=f)

    @classmethod
    def _read_layout(cls, f: h5py.File, attrs: dict, fail) -> dict:
        """Check the kind's datasets and attributes (shapes, dtypes, ends), reading O(1) values.

        Returns
        -------
        dict
            ``n_atoms``, ``D``, ``n_units`` (what batch offsets count) and the
            kind's own sizes; compared on reopening to detect a changed file.
        """
        raise NotImplementedError

    @classmethod
    def _stored_offsets(cls, f: h5py.File, attrs: dict, n_units: int, fail) -> np.ndarray:
        if not isinstance(f.get("batch_offsets"), h5py.Dataset):
            raise fail("is missing the dataset 'batch_offsets'")
        off = f["batch_offsets"]
        if off.ndim != 1 or off.dtype.kind not in "iu" or off.shape[0] < 2:
            raise fail(f"has invalid batch_offsets (shape {off.shape}, dtype {off.dtype}); "
                       "expected B+1 integers")
        offsets = np.asarray(off[()], dtype=np.int64)
        if offsets[0] != 0 or offsets[-1] != n_units or np.any(np.diff(offsets) <= 0):
            raise fail(f"has inconsistent batch_offsets (need 0 = o_0 < o_1 < ... < o_B = {cls.unit_count}={n_units}; "
                       f"got first {offsets[0]}, last {offsets[-1]}, {int(np.sum(np.diff(offsets) <= 0))} "
                       "non-increasing step(s))")
        stored = offsets.shape[0] - 1
        if not isinstance(attrs.get("n_batches", stored), int) or attrs.get("n_batches", stored) != stored:
            raise fail(f"is inconsistent: attribute n_batches={attrs['n_batches']} but batch_offsets "
                       f"describe {stored} batches")
        return offsets

    @classmethod
    def _resplit(cls, offsets: np.ndarray, n_batches, n_units: int, fixed: bool, fail) -> np.ndarray:
        """The offsets of ``n_batches`` batches: the stored ones if the count is unchanged, else an even split."""
        requested = positive_int(n_batches, "alg.n_batches")
        if requested > n_units:
            raise fail(f"has only {cls.unit_count}={n_units} {cls.unit}; alg.n_batches={requested} "
                       "would leave empty batches")
        stored = offsets.shape[0] - 1
        if requested == stored:
            return offsets
        if fixed:
            raise fail(f"has {stored} fixed batches; alg.n_batches={requested} conflicts with them "
                       "(drop alg.n_batches, or convert the data again without --batches)")
        return split_offsets(n_units, requested)

    # --------------------------------------------------------- properties
    @property
    def path(self) -> Path:
        return self._path

    @property
    def n_atoms(self) -> int:
        return self._layout["n_atoms"]

    @property
    def D(self) -> int:
        return self._layout["D"]

    @property
    def n_batches(self) -> int:
        return int(self._offsets.shape[0] - 1)

    @property
    def batches_fixed(self) -> bool:
        return self._batches_fixed

    @property
    def has_labels(self) -> bool:
        return self._has_labels

    @property
    def offsets(self) -> np.ndarray:
        """(B+1,) int64 read-only array of batch boundaries of the current split, in units of :attr:`unit`."""
        return self._offsets

    @property
    def attrs(self) -> dict:
        """The file's root attributes as plain Python values (format, source, created, ...)."""
        return dict(self._attrs)

    # ---------------------------------------------------------------- I/O
    def _handle(self) -> h5py.File:
        if self._closed:
            raise ValueError(f"batch store {self._path} is closed")
        if self._file is None or self._pid != os.getpid():
            # first use in this process (unpickled or forked): open our own handle
            try:
                f = h5py.File(self._path, "r")
            except (OSError, FileNotFoundError):
                raise BnpviError(f"data file {self._path} cannot be reopened (moved or deleted?)") from None
            if not self._same_file(f):
                f.close()
                raise BnpviError(f"data file {self._path} has changed since it was opened")
            self._file, self._pid = f, os.getpid()
        return self._file

    def check_unchanged(self) -> None:
        """Check that the file at :attr:`path` is still the one this store opened (the run checks it at every
        checkpoint and before its final files): unchanged on disk, or rewritten with the same size and the
        same bytes where a file's identity lives (its first and last :data:`_EDGE` bytes: the root attributes
        with its ``created`` stamp, and the end of its data). The bytes are read by plain I/O: the HDF5
        library would answer from the handle this store keeps open.

        Raises
        ------
        BnpviError
            The file was removed, or replaced by another one (e.g. copied over in place).
        """
        stat = _file_stat(self._path)
        if stat is None:
            raise BnpviError(f"data file {self._path} was removed during the run; put it back and resume")
        if stat == self._stat:
            return
        if _edge_digest(self._path) != self._digest:
            raise BnpviError(f"data file {self._path} was replaced during the run (it is no longer the file the run "
                             "opened); the run stops here; its last checkpoint was made with the original file")
        self._stat = stat

    def _same_file(self, f: h5py.File) -> bool:
        attrs = read_attrs(f)
        try:
            layout = self._read_layout(f, attrs, BnpviError)
        except BnpviError:
            return False
        return layout == self._layout and attrs.get("created") == self._attrs.get("created")

    def _limit(self, max_values: int | None = None) -> int:
        """Values per block of a one-pass scan (``max_values``, default 2**20)."""
        return max(1, int(_SCAN_VALUES if max_values is None else max_values))

    def read_batch(self, b: int, piece: tuple[int, int] | None = None):
        """Read batch ``b`` (units ``offsets[b]:offsets[b+1]``) from the file, or one piece of it.

        Parameters
        ----------
        b : int
            Batch index, 0 <= b < n_batches.
        piece : (i, n), optional
            Only part i of the batch's units cut into n contiguous parts (``piece_range``).

        Returns
        -------
        PointBatch, WordCountBatch or SeqBatch
            The kind's batch, read as one contiguous slice of each dataset.

        Raises
        ------
        IndexError
            ``b`` out of range.
        """
        b = int(b)
        if not 0 <= b < self.n_batches:
            raise IndexError(f"batch {b} out of range 0..{self.n_batches - 1} in {self._path}")
        lo, hi = int(self._offsets[b]), int(self._offsets[b + 1])
        return self._read(*piece_range(lo, hi, *piece)) if piece is not None else self._read(lo, hi)

    def _read(self, lo: int, hi: int):
        """The batch of units ``lo:hi``."""
        raise NotImplementedError

    @property
    def has_heldout(self) -> bool:
        """Whether the file holds a held-out part (``bnpvi-data convert --heldout F``; its kind's
        ``read_heldout``)."""
        return self.n_heldout > 0

    @property
    def n_heldout(self) -> int:
        """Held-out units (points, documents, whole sequences, node pairs); 0 when the file holds none."""
        return int(self._layout.get("n_heldout", 0))

    def source_index(self, lo: int, hi: int, heldout: bool = False) -> np.ndarray:
        """(hi - lo,) int64: the source index of atoms ``lo:hi`` of the training part (or, with ``heldout``,
        of the held-out part): what the file's held-out split recorded (the group ``heldout``'s datasets
        named by :attr:`source_index_names`) when it has one, else ``lo:hi`` itself."""
        if not getattr(self, "has_heldout", False):
            return np.arange(int(lo), int(hi), dtype=np.int64)
        name = self.source_index_names[1 if heldout else 0]
        return np.asarray(self._handle()["heldout"][name][int(lo):int(hi)], dtype=np.int64)

    def batch_sizes(self) -> np.ndarray:
        """(B,) int64 array: atoms in each batch of the current split."""
        return np.diff(self._offsets)

    def dataset(self, name: str) -> h5py.Dataset:
        """The file's dataset ``name`` (``X``, ``seq_range``, ...), read a block at a time by whoever slices it
        (:class:`~bnpvi.data.mapped.JoinedRows`); valid while the store is open."""
        return self._handle()[name]

    def labels(self) -> np.ndarray | None:
        """(N,) int64 true labels (one per atom), or None when the file holds none."""
        if not self._has_labels:
            return None
        return np.asarray(self._handle()["labels"][()], dtype=np.int64)

    def label_names(self) -> list[str] | None:
        """The name of each label code (``label_names()[labels()]`` are the labels as given), or None when the
        labels are plain integers (or absent)."""
        f = self._handle()
        return [str(name) for name in f["label_names"].asstr()[()]] if "label_names" in f else None

    def iter_blocks(self, max_values: int | None = None) -> Iterator[tuple[int, object]]:
        """Yield ``(start, block)`` over all atoms in file order, in blocks of bounded size.

        ``start`` is the block's first atom. The default ``max_values`` is 2**20 (8 MiB of
        float64; a document check holds several such arrays), whatever the batch split, so
        one-pass scans use bounded memory even for a single huge batch. The block type is the kind's
        (see the subclasses).
        """
        return self._blocks(self._limit(max_values))

    def _blocks(self, limit: int) -> Iterator[tuple[int, object]]:
        raise NotImplementedError

    def _range_pieces(self, name: str, noun: str, empty: str, limit: int) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first, r[first:last + 1])`` of the 1-D boundary dataset ``name`` in pieces of at most
        ``limit`` units, each checked to be strictly increasing.

        ``noun`` names a unit and ``empty`` says what a zero-length one is in the error message.
        """
        dataset = self._handle()[name]
        n_units = dataset.shape[0] - 1
        for start in range(0, n_units, limit):
            stop = min(n_units, start + limit)
            r = np.asarray(dataset[start:stop + 1], dtype=np.int64)
            sizes = np.diff(r)
            if (sizes <= 0).any():
                i = int(np.flatnonzero(sizes <= 0)[0])
                problem = empty if sizes[i] == 0 else f"has a decreasing {name}"
                raise BnpviError(f"data file {self._path}: {noun} {start + i} {problem} "
                                 f"(batch {self._batch_of(start + i)})")
            yield start, r

    def _batch_of(self, unit: int) -> int:
        return int(np.searchsorted(self._offsets, unit, side="right") - 1)

    # -------------------------------------------------------------- scans
    def scan(self) -> DataMoments | None:
        """One pass over the file: check every stored value, and return the whole-data moments.

        What is checked and what the moments are depends on the kind (see
        :meth:`validate` and :meth:`moments`); the trainer calls this once at
        start-up.

        Returns
        -------
        DataMoments or None
            As :meth:`moments`.

        Raises
        ------
        BnpviError
            As :meth:`validate`.
        """
        return self._scan(check=True, moments=True)

    def moments(self) -> DataMoments | None:
        """Whole-data mean and (biased, 1/N) covariance in one pass, or None for kinds without them."""
        return self._scan(check=False, moments=True)

    def validate(self) -> None:
        """Check every stored value in one pass.

        Raises
        ------
        BnpviError
            Naming the file, the first bad atom (counted from 0), its batch and the problem.
        """
        self._scan(check=True, moments=False)

    def _scan(self, check: bool, moments: bool) -> DataMoments | None:
        """The one pass behind :meth:`scan`, :meth:`moments` and :meth:`validate`."""
        raise NotImplementedError

    # ----------------------------------------------------------- summary
    def info(self) -> dict:
        """Summary of the file for display.

        Keys: path, format, format_version, kind, N, D, n_batches, batches_fixed,
        batch_unit (what the batch sizes count), batch_size_min, batch_size_max,
        labels, label_names (list or None), source, created, plus the kind's own keys.
        """
        units = np.diff(self._offsets)
        out = {"path": str(self._path), "format": self._attrs.get("format"),
               "format_version": self._attrs.get("format_version"), "kind": self.kind, "N": self.n_atoms,
               "D": self.D, "n_batches": self.n_batches, "batches_fixed": self._batches_fixed,
               "batch_unit": self.unit, "batch_size_min": int(units.min()), "batch_size_max": int(units.max()),
               "labels": self._has_labels, "label_names": self.label_names(),
               "source": self._attrs.get("source", ""), "created": self._attrs.get("created", "")}
        out.update(self._info_extras())
        return out

    def _info_extras(self) -> dict:
        return {}

    def _describe(self) -> str:
        """The sizes shown by ``repr``."""
        return f"N={self.n_atoms}, D={self.D}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({str(self._path)!r}, {self._describe()}, n_batches={self.n_batches}, "
                f"batches_fixed={self._batches_fixed}, labels={self._has_labels})")

    # ------------------------------------------------------------ closing
    def close(self) -> None:
        """Close the file handle (idempotent). Reading afterwards raises ValueError."""
        if self._file is not None and self._pid == os.getpid():
            try:
                self._file.close()
            except Exception:  # pragma: no cover - h5py teardown quirks
                pass
        self._file = None
        self._closed = True

    def __enter__(self) -> "BatchStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_file"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._offsets.setflags(write=False)


def _file_stat(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, modification time in ns) of ``path``: what changes when a file is replaced or rewritten;
    None when it does not exist."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


_EDGE = 1 << 16


def _edge_digest(path: Path) -> bytes:
    """A digest of the first and the last :data:`_EDGE` bytes of ``path`` and of its size."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        digest.update(size.to_bytes(8, "little"))
        for start in sorted({0, max(0, size - _EDGE)}):
            fh.seek(start)
            digest.update(fh.read(_EDGE))
    return digest.digest()


def read_attrs(f: h5py.File | h5py.Group) -> dict:
    """The attributes of a file or group as plain Python values (str, int, float, bool)."""
    return {key: _plain(value) for key, value in f.attrs.items()}


def _plain(value):
    """HDF5 attribute value -> plain Python value (str, int, float, bool)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
