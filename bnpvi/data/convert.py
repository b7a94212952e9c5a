"""Read user data, check it, and write a batch file: :func:`convert` picks the reader of the source's kind.

Each kind of source has its own reader module, registered in :data:`READERS`:

* raw text (:mod:`bnpvi.data.text_in`, with ``text=True``): one document per line, or a CSV/TSV
  column, tokenised into a ``"bow"`` file;
* sequences (:mod:`bnpvi.data.sequences_in`, with ``sequences`` or ``sequence_column``): NPZ with
  ``X``, optional ``Xprev`` and a named array of sequence boundaries, or CSV with a column of
  sequence ids, into a ``"seq"`` file;
* bag of words (:mod:`bnpvi.data.documents_in`): LDA-C text (``.ldac``) and sparse NPZ, into a
  ``"bow"`` file;
* points (:mod:`bnpvi.data.points_in`, everything else): CSV, NPY, and NPZ with an array ``X``,
  into a ``"points"`` file.

Each reader's result (``Points``, ``Documents``, ``Sequences``) knows its batch unit, how to reorder
whole units, how to hold a part out and how to write itself, so this module never asks which kind
it has; a new kind adds its reader module and one entry in :data:`READERS`.

Every problem with the input is a one-line :class:`~bnpvi.errors.BnpviError`
that names the file: missing file, unknown extension, empty file, non-numeric
values, NaN or inf (with the first bad row, counted from 0), a wrongly shaped
array, a missing or wrongly sized label array or labels file, an unknown column; for ``.ldac``
the line (counted from 1) and what is wrong with it; for sparse NPZ the document (counted from 0);
for sequences the first bad sequence, or the CSV row whose sequence id reappears after another one;
an option that does not apply to the source's kind.

Labels come from a column or array (``labels``) or a labels file (``labels_file``, one per line);
labels that are not integers are stored as codes with their names (:mod:`bnpvi.data.labels`).
With ``heldout=F`` a bag-of-words corpus (a point set, a set of sequences) keeps a random fraction F of
its documents (points, whole sequences) apart for evaluation (:mod:`bnpvi.data.heldout`), in the file's
``heldout`` group; the batches hold only the training ones.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.data import documents_in, points_in, sequences_in, text_in
from bnpvi.data.base import split_offsets
from bnpvi.data.checks import positive_int
from bnpvi.data.documents_in import Documents, read_documents, read_vocab
from bnpvi.data.heldout import check_fraction, check_seed, choose_heldout
from bnpvi.data.ldac import read_ldac
from bnpvi.data.mapped import scratch_space
from bnpvi.data.points_in import Points, read_points, read_table
from bnpvi.data.sequences_in import Sequences, read_sequences
from bnpvi.data.sources import Reader, check_output
from bnpvi.data.text_in import read_text
from bnpvi.errors import BnpviError

__all__ = ["READERS", "convert", "reader_for", "Points", "Documents", "Sequences", "read_points", "read_table",
           "read_documents", "read_ldac", "read_vocab", "read_sequences", "read_text"]

#: The readers, in the order they are asked whether they read a source (the first that claims it does);
#: points read whatever no other reader claims.
READERS: tuple[Reader, ...] = (text_in.READER, sequences_in.READER, documents_in.READER, points_in.READER)


def reader_for(src, options: dict) -> Reader:
    """The reader of ``src`` given the read ``options`` (those not None), after checking that they apply to it.

    Raises
    ------
    TypeError
        An option no reader takes.
    BnpviError
        An option that another kind of source takes (checked when ``src`` is a file; a missing file is left
        to the reader to report).
    """
    unknown = sorted(set(options) - set().union(*(reader.options for reader in READERS)))
    if unknown:
        raise TypeError(f"convert() got unexpected option(s): {', '.join(unknown)}")
    src = Path(src).expanduser()
    reader = next(reader for reader in READERS if reader.claims(src, options))
    for name in options:
        if name not in reader.options and src.is_file():  # a missing file: the reader says so
            takers = _listed(lambda other: name in other.options)
            where = takers[0].files if len(takers) == 1 else " and ".join(other.holds for other in takers)
            flag = f"--{name.replace('_', '-')} applies only to {where}"
            if reader.suffixes and src.suffix.lower() not in reader.suffixes:
                raise BnpviError(f"{src}: {flag}")
            raise BnpviError(f"{src} holds {reader.holds}, not {' or '.join(other.holds for other in takers)}; {flag}")
    return reader


def _listed(keep) -> list[Reader]:
    """The readers that ``keep(reader)``, as messages list them: the most general (points) first."""
    return [reader for reader in reversed(READERS) if keep(reader)]


def convert(src, dst, n_batches: int | None = None, shuffle_seed: int | None = None, overwrite: bool = False,
            batches_fixed: bool | None = None, heldout=None, heldout_seed: int = 0, append_to=None,
            **options) -> Path:
    """Read ``src``, check it, and write the batch file ``dst``.

    Parameters
    ----------
    src : str or Path
        Input file.
    dst : str or Path
        Output batch file, a name ending in ``.h5``; written atomically, so a failure leaves nothing behind.
    n_batches : int, optional
        Number of contiguous batches, as equal in rows (documents, sequences) as
        possible; a batch always holds whole documents and sequences. None means
        one batch that training may re-split (``alg.n_batches``).
    shuffle_seed : int, optional
        Permute the rows, documents or whole sequences (labels follow) with this
        seed before batching; the steps within a sequence keep their order.
    overwrite : bool, default False
        Replace an existing ``dst``; otherwise an existing ``dst`` is an error.
    batches_fixed : bool, optional
        Store the split as fixed (training may not re-split it). Default: fixed
        exactly when ``n_batches`` was given.
    heldout : float, optional
        Bag of words, points and sequences: keep a random fraction F (0 < F < 1) of the documents (points,
        whole sequences) apart for evaluation - round(F N) of them, at least 1 and at most N - 1,
        chosen by :func:`~bnpvi.data.heldout.choose_heldout` in source order
        before any shuffle. They are stored (in source order, with labels) in
        the ``heldout`` group of ``dst`` with the source index of every training
        and held-out document; the batches hold only the training documents, and
        ``n_batches`` counts only those.
    heldout_seed : int, default 0
        Seed of the held-out choice (non-negative).
    append_to : str or Path, optional
        A batch file of the same kind (a run's data): ``dst`` then holds its batches, unchanged, and the
        source's units after them in new batches (``n_batches`` of them, by default as many as make them
        about the size of the file's), so that ``bnpvi-train resume=RUN_DIR data.path=DST`` continues a run
        on its data and more (:func:`bnpvi.learn.runner.grow`). Points, sequences and bag of words (the same
        vocabulary size, and the same vocabulary where both hold one); not with ``heldout`` nor raw text.
    **options
        Read options of the source's reader (None means not given):
        ``labels`` (a column or array name), ``labels_file`` (one label per line) for every kind;
        ``columns`` (the data columns of a CSV: ``"a,b,c"``, names or 0-based indices) for points and
        sequences; ``weights`` (a CSV column of per-row weights, removed from the data) for points;
        ``vocab`` (a vocabulary file or the words), ``vocab_size`` for bag of words;
        ``sequences`` (NPZ: the array of sequence boundaries) or ``sequence_column`` (CSV: the column
        of sequence ids) for sequences; ``text=True`` with ``text_column``, ``stop_words``, ``min_df``,
        ``max_df``, ``max_vocab``, ``lowercase``, ``token_pattern`` for raw text. See
        :func:`~bnpvi.data.points_in.read_points`, :func:`~bnpvi.data.documents_in.read_documents`,
        :func:`~bnpvi.data.sequences_in.read_sequences` and :func:`~bnpvi.data.text_in.read_text`.

    Returns
    -------
    Path
        ``dst``.

    Raises
    ------
    BnpviError
        Bad input, ``dst`` exists (without ``overwrite``) or does not end in ``.h5``, ``n_batches`` out of
        1..N (1..n_seqs for sequences; the training documents with ``heldout``),
        an option of another kind of source, a bad held-out fraction or
        seed.
    TypeError
        An unknown option.
    """
    src, dst = Path(src).expanduser(), Path(dst).expanduser()
    check_output(src, dst, overwrite)
    if batches_fixed is None:
        batches_fixed = n_batches is not None
    count = None if n_batches is None else positive_int(n_batches, "the number of batches")
    if shuffle_seed is not None:
        shuffle_seed = check_seed(shuffle_seed, "the shuffle seed")
    if heldout is not None:
        heldout = check_fraction(heldout)
        heldout_seed = check_seed(heldout_seed, "the held-out seed")
    options = {name: value for name, value in options.items() if value is not None}
    reader = reader_for(src, options)
    if append_to is not None and (heldout is not None or options.get("text")):
        raise BnpviError(f"--append-to adds points, sequences or bag-of-words documents to a file as they are; "
                         f"not with {'--heldout' if heldout is not None else '--text'}")
    with scratch_space(dst.parent) as scratch:
        data = reader.read(src, scratch=scratch,
                           **{name: value for name, value in options.items() if name in reader.options})
        if append_to is not None:
            return appended(data, src, Path(append_to).expanduser(), dst, count, shuffle_seed)
        return _write(data, src, dst, 1 if count is None else count, batches_fixed, shuffle_seed, heldout,
                      heldout_seed)


def appended(data, src: Path, base: Path, dst: Path, count: int | None, shuffle_seed: int | None) -> Path:
    """Write ``dst``: the batches of the batch file ``base``, then the units of ``data`` (read from ``src``;
    shuffled by ``shuffle_seed``) in ``count`` new batches (default: about the size of ``base``'s)."""
    from bnpvi.data.store import BatchStore

    if shuffle_seed is not None:
        data = data.permuted(np.random.default_rng(shuffle_seed).permutation(data.n_units))
    with BatchStore.open(base) as store:  # open while it is written: the joined units read from it
        joined, sizes = appended_to(data, store, base, src, count)
        source = f"{base} and {src} appended in {sizes.shape[0] - store.n_batches} new batches"
        return joined.write(dst, batch_sizes=sizes, source=source)


def appended_to(data, store, base, src, count: int | None = None) -> tuple[object, np.ndarray]:
    """The units of the open batch file ``store`` (named ``base``) then those of ``data`` (from ``src``)
    (``Points.after``, ``Sequences.after``, ``Documents.after``: points and steps read from the file as they are
    written, so the store stays open until then; documents in memory), and their batch sizes: the
    file's batches, then ``count`` new ones (default: as many as make them about the size of the file's).
    One-line BnpviErrors for another kind of data or a bad ``count``."""
    n = data.n_units
    kind = {"points": "points", "seq": "sequences", "bow": "bag-of-words documents"}.get(store.kind)
    if kind is None or kind != data.holds:
        raise BnpviError(f"--append-to {base}: it holds {kind or store.kind}, {src} holds {data.holds}")
    sizes = np.diff(store.offsets)
    count = min(n, max(1, round(n / sizes.mean()))) if count is None else count
    if count > n:
        raise BnpviError(f"{src} has {n} {data.unit}; the number of new batches must be between 1 and {n}, "
                         f"got {count}")
    return data.after(store, base), np.concatenate([sizes, np.diff(split_offsets(n, count))])


def _write(data, src: Path, dst: Path, count: int, batches_fixed: bool, shuffle_seed: int | None, heldout,
           heldout_seed: int) -> Path:
    """Hold out, shuffle (both by one index array of the units to write, :mod:`bnpvi.data.reorder`: 8 bytes a
    unit) and write what a reader read."""
    n = data.n_units
    source = str(src)
    order = held = None  # the source units written for training, in order (None: all, as they come)
    if heldout is not None:
        if n < 2:
            raise BnpviError(f"{src} has N={n} {data.unit[:-1]}; --heldout needs at least 2")
        order, heldout_index = choose_heldout(n, heldout, heldout_seed)
        held = data.permuted(heldout_index)
        source += (f" ({heldout_index.shape[0]} of {n} {data.unit} held out: fraction {heldout:g}, "
                   f"seed {heldout_seed})")
        if count > order.shape[0]:
            raise BnpviError(f"{src} has N={n} {data.unit}, {order.shape[0]} of them for training after holding "
                             f"out {heldout_index.shape[0]}; the number of batches must be between 1 and "
                             f"{order.shape[0]}, got {count}")
    elif count > n:
        raise BnpviError(f"{src} has {data.count_name}={n} {data.unit}; the number of batches must be between 1 "
                         f"and {n}, got {count}")
    if shuffle_seed is not None:
        rng = np.random.default_rng(shuffle_seed)
        if order is None:
            order = rng.permutation(n)
        else:  # in place, the same as order[rng.permutation(len(order))]
            rng.shuffle(order)
        source += f" ({data.unit} shuffled, seed {shuffle_seed})"
    write_options = {}
    if held is not None:
        write_options["heldout"] = held.heldout_part(heldout_index, order, heldout, heldout_seed)
    if order is not None:
        data = data.permuted(order)
    return data.write(dst, n_batches=count, batches_fixed=batches_fixed, source=source, **write_options)
