"""How bnpvi writes its files: in place of the old ones atomically, and stopping on one line when a write fails.

Every file a run or a command writes goes through here: :func:`replacing` (a temporary file renamed over the
target when it is complete), :func:`new_h5` (an HDF5 file written into such a temporary file) and, for files
appended to as a run goes (trace.csv), :func:`writing`. A failed write (a full disk, a quota, a read-only
file system) removes the temporary file and raises :func:`write_failure`'s one-line
:class:`~bnpvi.errors.BnpviError` naming the file; the file that was there stays as it was.

HDF5 itself must never meet the failure: once one of its writes has failed, the library crashes the process
(a segmentation fault when the file or any object of it is closed or freed, even at exit; h5py 3.16, HDF5
2.0). So :func:`new_h5` hands HDF5 a file object (:class:`_Guarded`) that does the writing in Python: its
first failed write is kept, and what HDF5 writes from then on is held in memory, so that HDF5 closes the file
as if nothing had happened; the kept error is raised after. Writers that stream a file block by block call
:func:`check_written` after each block, so memory holds at most a block of what the disk refused.
"""
from __future__ import annotations

import io
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import h5py

from bnpvi.errors import BnpviError

_GUARDS: dict[str, "_Guarded"] = {}
"""The guarded file of each HDF5 file :func:`new_h5` has open, by the name HDF5 knows it by."""


def write_failure(path, err: OSError) -> BnpviError:
    """The one-line error of a failed write of ``path``: "cannot write PATH: no space left on device"."""
    reason = err.strerror or str(err) or type(err).__name__
    return BnpviError(f"cannot write {path}: {reason[:1].lower()}{reason[1:]}")


@contextmanager
def writing(path) -> Iterator[None]:
    """A block that writes ``path`` in place (an append): an OSError in it becomes :func:`write_failure`."""
    try:
        yield
    except OSError as err:
        raise write_failure(path, err) from None


@contextmanager
def replacing(path) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write to; when the block ends without an error the file
    there is synced to disk and renamed to ``path``, otherwise it is removed (an OSError, such as a full
    disk, then becomes :func:`write_failure`'s one line).

    A crash at any moment leaves either the previous file or the new one, never a partial one.
    """
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"  # created by the writer, as umask says
        try:
            yield tmp
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def write_text(path, text: str) -> None:
    """``text`` as the file ``path`` (UTF-8), atomically (:func:`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextmanager
def new_h5(path, **options) -> Iterator[h5py.File]:
    """A new HDF5 file open for writing (``options`` of ``h5py.File``) that replaces ``path`` when the block ends
    (:func:`replacing`), and that HDF5 never finds a write of failed in (module docstring): the first OSError its
    writes met is raised when HDF5 has closed the file, as :func:`write_failure`'s one line."""
    path = Path(path)
    with replacing(path) as tmp:
        guard = _Guarded(tmp, path)
        try:
            with h5py.File(guard, "w", **options) as f:
                _GUARDS[f.filename] = guard
                try:
                    yield f
                finally:
                    del _GUARDS[f.filename]
        finally:
            guard.close()
        if guard.error is not None:
            raise write_failure(path, guard.error)


def check_written(obj: h5py.Group | h5py.Dataset) -> None:
    """Raise :func:`write_failure` if a write of ``obj``'s file (open by :func:`new_h5`) has failed: what HDF5
    writes after it is held in memory, so a writer that streams blocks stops at the next one."""
    guard = _GUARDS.get(obj.file.filename)
    if guard is not None and guard.error is not None:
        raise write_failure(guard.target, guard.error)


class _Guarded(io.RawIOBase):
    """The file object HDF5 writes ``path`` (the temporary file of ``target``) through (h5py's ``fileobj``
    driver): it never reports a failure.

    Writes go to the file until one fails; that error is kept (:attr:`error`) and from then on the bytes not
    written are held in memory, where reads find them, so the file reads back as HDF5 wrote it.
    """

    def __init__(self, path: Path, target: Path):
        self.target = target
        self.error: OSError | None = None
        self._raw = open(path, "w+b", buffering=0)
        self._pos = 0
        self._held: list[tuple[int, bytes]] = []  # (offset, bytes) the disk refused, in the order written

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _size(self) -> int:
        return max([os.fstat(self._raw.fileno()).st_size] + [at + len(data) for at, data in self._held])

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        self._pos = pos + (self._pos if whence == io.SEEK_CUR else self._size() if whence == io.SEEK_END else 0)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        done = 0
        if self.error is None:
            try:
                self._raw.seek(self._pos)
                while done < len(view):
                    done += self._raw.write(view[done:])
            except OSError as err:
                self.error = err
        if done < len(view):
            self._held.append((self._pos + done, bytes(view[done:])))
        self._pos += len(view)
        return len(view)

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        start, end = self._pos, self._pos + len(view)
        self._raw.seek(start)
        n = self._raw.readinto(view) or 0
        view[n:] = bytes(len(view) - n)
        for at, data in self._held:
            lo, hi = max(at, start), min(at + len(data), end)
            if lo < hi:
                view[lo - start:hi - start] = data[lo - at:hi - at]
        self._pos = end
        return len(view)

    def truncate(self, size: int | None = None) -> int:
        size = self._pos if size is None else size
        if self.error is None:
            try:
                self._raw.truncate(size)
            except OSError as err:
                self.error = err
        return size

    def flush(self) -> None:
        pass  # unbuffered

    def close(self) -> None:
        self._held.clear()
        self._raw.close()
        super().close()


def save_figure(fig, path, **options) -> None:
    """A Matplotlib figure as the image file ``path`` (its format from the suffix; ``options`` of ``savefig``,
    dpi 100 unless given), atomically."""
    path = Path(path)
    with replacing(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **{"dpi": 100, **options})
