"""LDA-C corpora: one document per line, ``n id:count id:count ...`` (the format of Blei's lda-c).

:func:`read_ldac` parses the file in blocks of whole lines with NumPy (no Python object per token),
so memory is a small multiple of the block size plus the output arrays, and names the first bad
line (counted from 1) with what is wrong with it: :func:`_ldac_line_problem` is the reference grammar,
and the vectorised parser only flags the candidate lines.

scikit-learn's ``load_svmlight_file`` reads the same ``label id:value`` layout, but it rejects
ids that are not sorted and unique within a line (both allowed here: repeated ids are summed),
skips blank lines and ``#`` comments (shifting every later line number), accepts negative,
fractional and exponent counts, and names no line in its errors; checking its output to the same
standard would need this byte scan anyway, so the parser stays.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from bnpvi.data.checks import check_documents
from bnpvi.errors import BnpviError

# Bytes per block of an .ldac file parsed at once (a block always ends at a line end).
_LDAC_BLOCK = 2**22
_MAX_DIGITS = 18  # numbers of up to 18 digits fit int64
_SPACE = b" \t\r\x0b\x0c"
_INT32_MAX = int(np.iinfo(np.int32).max)
_DIGIT, _COLON, _SPACE_CLASS, _NEWLINE, _OTHER = range(5)
_BYTE_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_BYTE_CLASS[ord("0"):ord("9") + 1] = _DIGIT
_BYTE_CLASS[ord(":")] = _COLON
_BYTE_CLASS[list(_SPACE)] = _SPACE_CLASS
_BYTE_CLASS[ord("\n")] = _NEWLINE


def _ldac_line_problem(line: bytes, V: int | None) -> str | None:
    """What is wrong with one LDA-C line (``n id:count id:count ...``), or None.

    This is the reference grammar: the vectorized parser only flags candidate
    lines, and this function says what is wrong with the first one.
    """
    toks = line.translate(None, b"\n").replace(b"\t", b" ").replace(b"\r", b" ").replace(b"\x0b", b" ") \
        .replace(b"\x0c", b" ").split(b" ")
    toks = [t for t in toks if t]
    if not toks:
        return "empty line (expected 'n id:count id:count ...'; blank lines are allowed only at the end)"

    def show(tok: bytes) -> str:
        return repr(tok.decode("utf-8", "replace"))

    first = toks[0]
    if b":" in first:
        return f"starts with {show(first)}; expected the number of distinct words n first"
    if not first.isdigit():
        return f"n must be a non-negative integer, got {show(first)}"
    if len(first) > _MAX_DIGITS:
        return f"n {show(first)} is too large"
    n = int(first)
    ids = []
    for tok in toks[1:]:
        id_s, sep, count_s = tok.partition(b":")
        if not sep or not id_s or not count_s or b":" in count_s:
            return f"malformed token {show(tok)} (expected id:count)"
        if not id_s.isdigit():
            if id_s[:1] == b"-" and id_s[1:].isdigit():
                return f"negative word id in {show(tok)}"
            return f"malformed word id in {show(tok)} (expected a non-negative integer)"
        if not count_s.isdigit():
            if count_s[:1] == b"-" and count_s[1:].replace(b".", b"", 1).isdigit():
                return f"negative count in {show(tok)}"
            try:
                value = float(count_s)
            except ValueError:
                return f"malformed count in {show(tok)} (expected a positive integer)"
            return f"non-integer count in {show(tok)} (counts must be positive integers written as digits)" \
                if value == value else f"malformed count in {show(tok)}"
        if len(id_s) > _MAX_DIGITS or len(count_s) > _MAX_DIGITS:
            return f"number too large in {show(tok)}"
        word, count = int(id_s), int(count_s)
        if count == 0:
            return f"zero count in {show(tok)} (counts must be positive; leave the word out instead)"
        if V is not None and word >= V:
            return f"word id {word} outside the vocabulary (V={V}; ids run from 0 to {V - 1})"
        if word > _INT32_MAX - 1:
            return f"word id {word} is too large (at most {_INT32_MAX - 1})"
        ids.append(word)
    if not ids:
        return f"document has no words (n={n}); empty documents are not allowed - drop the line"
    if n != len(ids) and n != len(set(ids)):
        return f"n={n} but the line has {len(ids)} id:count pairs"
    return None


class _LdacBlock:
    """Vectorized parse of a block of whole LDA-C lines (no per-token Python objects).

    Attributes after construction: ``ids``, ``counts`` (int64 per pair), ``lengths``
    (pairs per line that has tokens), ``token_lines`` (block line of each such
    line), ``n_lines`` (lines in the block), ``bad_line`` (first line of the block
    that breaks the grammar or a limit, or None).
    """

    def __init__(self, data: bytes, V: int | None):
        buf = np.frombuffer(data, dtype=np.uint8)
        size = buf.shape[0]
        cls = _BYTE_CLASS[buf]
        nl_pos = np.flatnonzero(cls == _NEWLINE)
        self.n_lines = nl_pos.shape[0] + (1 if size and buf[-1] != 10 else 0)
        candidates = []

        def line_of(pos):
            return np.searchsorted(nl_pos, pos)

        other = cls == _OTHER
        if other.any():
            candidates.append(int(line_of(int(np.argmax(other)))))
        is_digit = cls == _DIGIT
        colons = np.flatnonzero(cls == _COLON)
        if colons.size:
            left_ok = (colons > 0) & is_digit[np.maximum(colons - 1, 0)]
            right_ok = (colons < size - 1) & is_digit[np.minimum(colons + 1, size - 1)]
            bad = ~(left_ok & right_ok)
            if bad.any():
                candidates.append(int(line_of(colons[np.argmax(bad)])))

        edges = np.diff(is_digit.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        del edges, is_digit, cls
        if starts.size == 0:
            self.ids = self.counts = self.lengths = self.token_lines = np.zeros(0, dtype=np.int64)
            self.bad_line = min(candidates) if candidates else None
            return
        widths = ends - starts
        long_runs = widths > _MAX_DIGITS
        if long_runs.any():
            candidates.append(int(line_of(starts[np.argmax(long_runs)])))
        # value of each digit run, one digit position at a time (numbers are short)
        values = (buf[starts] - np.uint8(48)).astype(np.int64)
        for j in range(1, min(int(widths.max()), _MAX_DIGITS)):
            more = np.flatnonzero(widths > j)
            values[more] = values[more] * 10 + (buf[starts[more] + j] - np.uint8(48))

        tok_line = line_of(starts)
        n_tok = starts.shape[0]
        prev = np.where(starts > 0, buf[np.maximum(starts - 1, 0)], 10)
        nxt = np.where(ends < size, buf[np.minimum(ends, size - 1)], 10)
        before_colon, after_colon = nxt == 58, prev == 58
        line_start = np.empty(n_tok, dtype=bool)
        line_start[0] = True
        np.not_equal(tok_line[1:], tok_line[:-1], out=line_start[1:])
        index = np.arange(n_tok)
        k = index - np.maximum.accumulate(np.where(line_start, index, 0))
        is_id = (k % 2) == 1
        is_count = (k > 0) & ~is_id
        ok = np.where(k == 0, ~before_colon & ~after_colon,
                      np.where(is_id, before_colon & ~after_colon, after_colon & ~before_colon))
        if not ok.all():
            candidates.append(int(tok_line[np.argmax(~ok)]))
        line_first = np.flatnonzero(line_start)
        line_tokens = np.diff(np.r_[line_first, n_tok])
        lines = tok_line[line_first]
        bad = (line_tokens % 2) == 0  # implied by ok + the colon rule; a cheap guard
        if bad.any():
            candidates.append(int(lines[np.argmax(bad)]))
        # blank lines before the last line with words
        blank_before = np.setdiff1d(np.arange(int(lines[-1])), lines, assume_unique=True)
        if blank_before.size:
            candidates.append(int(blank_before[0]))

        ids, counts = values[is_id], values[is_count]
        n_pairs = (line_tokens - 1) // 2
        if len(ids) == len(counts):
            bad = (counts <= 0) | (ids >= (_INT32_MAX if V is None else V))
            if bad.any():
                candidates.append(int(np.repeat(lines, n_pairs)[np.argmax(bad)]))
            n_stated = values[line_start]
            mismatch = np.flatnonzero((n_stated != n_pairs) | (n_pairs == 0))
            if mismatch.size:
                pair_start = np.r_[0, np.cumsum(n_pairs)]
                for i in mismatch:  # rare: a repeated id (n may count distinct ids) or an error
                    if n_pairs[i] == 0 or n_stated[i] != np.unique(ids[pair_start[i]:pair_start[i + 1]]).size:
                        candidates.append(int(lines[i]))
                        break
        self.ids, self.counts, self.lengths, self.token_lines = ids, counts, n_pairs, lines
        self.bad_line = min(candidates) if candidates else None


def _ldac_blocks(fh, block_bytes: int):
    """Yield blocks of whole lines (each ends with a newline, except possibly the last)."""
    rest = b""
    while True:
        chunk = fh.read(block_bytes)
        if not chunk:
            if rest:
                yield rest
            return
        data = rest + chunk if rest else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[:cut + 1]
        rest = data[cut + 1:]


def read_ldac(path, vocab_size: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Read an LDA-C corpus: one document per line, ``n id:count id:count ...``.

    ``n`` is the number of id:count pairs that follow; ids count from 0, counts
    are positive integers. A word id repeated within a line is allowed (its
    counts are added up; n may then count either the pairs or the distinct ids).
    Tabs, ``\\r\\n`` line ends, repeated spaces and blank lines at the end of the
    file are accepted. The file is parsed in blocks with NumPy, so memory is a
    small multiple of the block size plus the output arrays.

    Parameters
    ----------
    path : str or Path
    vocab_size : int, optional
        V. Every id must be below it. Default: the largest id + 1.

    Returns
    -------
    word_ids : (nnz,) int32
    word_counts : (nnz,) float64
    doc_range : (N+1,) int64
    vocab_size : int

    Raises
    ------
    BnpviError
        ``"FILE, line L: problem"`` (lines counted from 1) for the first bad line:
        malformed tokens, negative, zero or non-integer counts, an id outside the
        vocabulary, n that does not match the pairs, a document without words, a
        blank line before the end; or an empty file.
    """
    path = Path(path).expanduser()
    parts = list(ldac_documents(path, vocab_size))
    if not parts:
        raise BnpviError(f"{path} is empty (no documents)")
    ids, counts, lengths = (np.concatenate(column) for column in zip(*parts))
    doc_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    V = int(ids.max()) + 1 if vocab_size is None else int(vocab_size)
    ids, counts, doc_range, V = check_documents(ids, counts.astype(np.float64), doc_range, V, str(path),
                                                duplicates="sum")
    return ids, counts, doc_range, V


def ldac_documents(path: Path, vocab_size: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The documents of an LDA-C file a block of whole lines at a time, each line checked (see :func:`read_ldac`).

    Yields
    ------
    ids, counts : (n_pairs,) int64
        The id:count pairs of the block's documents, as written (repeated ids not yet summed).
    lengths : (n_docs,) int64
        The pairs of each document of the block.
    """
    V = None if vocab_size is None else int(vocab_size)
    line0 = 0  # lines before the current block
    pending_blank = None  # first blank line after the last line with words so far (0-based, whole file)
    try:
        fh = open(path, "rb")
    except OSError as err:
        raise BnpviError(f"{path}: cannot read: {err.strerror or err}") from None
    with fh:
        for data in _ldac_blocks(fh, _LDAC_BLOCK):
            block = _LdacBlock(data, V)
            if block.token_lines.size and pending_blank is not None:
                _raise_ldac_line(path, pending_blank, None, V, blank=True)
            if block.bad_line is not None:
                _raise_ldac_line(path, line0 + block.bad_line, data, V, first_line=line0)
            if block.token_lines.size:
                last = int(block.token_lines[-1])
                pending_blank = line0 + last + 1 if last + 1 < block.n_lines else None
                yield block.ids, block.counts, block.lengths
            elif pending_blank is None and block.n_lines:
                pending_blank = line0
            line0 += data.count(b"\n")


def _raise_ldac_line(path: Path, line: int, data: bytes | None, V, first_line: int = 0, blank: bool = False):
    """Raise the BnpviError for 0-based file line ``line``.

    Its text is taken from ``data``, a block of whole lines starting at file line ``first_line``.
    """
    if blank:
        problem = "empty line (expected 'n id:count id:count ...'; blank lines are allowed only at the end)"
    else:
        lines = data.split(b"\n")
        problem = _ldac_line_problem(lines[line - first_line], V) or "malformed line"
    raise BnpviError(f"{path}, line {line + 1}: {problem}")
