"""Python face of the compiled hidden-Markov-model kernels (csrc/hmm.pyx).

:func:`forward_backward` is the local step of an HMM (all of its summaries in one
pass) and :func:`viterbi` the most likely state path. Both validate their inputs
(dtype, shape, C-contiguity, ``seq_range``, NaN / +inf, rows of ``log_lik`` with
no finite entry, sequences of probability 0) and raise :class:`KernelInputError`
with a one-line message; they never cast or copy inputs silently.

The compiled kernels process the sequences in chunks that depend only on the
input (never on the number of threads) and add per-chunk partial tables in chunk
order, so every result is bit-identical from call to call and for any
``n_threads``. NumPy references with the same formulas live in
:mod:`bnpvi.kernels.reference`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from bnpvi.kernels._checks import KernelInputError, check_array, compiled, row_preview, thread_count
from bnpvi.kernels.blas import blas_single_thread

_ext = compiled("_hmm", "HMM kernels")

__all__ = ["ForwardBackward", "forward_backward", "merge_pair_terms", "viterbi"]

BLAS_MIN_K = 12
"""From this many states on, forward-backward's K × K products use SciPy's BLAS."""


def _use_blas(K: int) -> bool:
    return K >= BLAS_MIN_K and _ext.have_blas()


@dataclass(frozen=True)
class ForwardBackward:
    """Summaries of q*(z) for one batch of sequences (see :func:`forward_backward`).

    Attributes
    ----------
    resp : (T, K) ndarray
        Marginals r_t(k) = q*(z_t = k); rows sum to 1.
    start_counts : (K,) ndarray
        M0_k = Σ_d r_d1(k).
    trans_counts : (K, K) ndarray
        M_jk = Σ_d Σ_{t<T_d} s_dt(j, k), expected transition counts.
    start_entropy : (K,) ndarray
        −Σ_d r_d1(k) ln r_d1(k).
    trans_entropy : (K, K) ndarray
        −Σ_d Σ_{t<T_d} s_dt(j, k) ln(s_dt(j, k) / r_dt(j)); every entry ≥ 0.
    log_norm : (S,) ndarray
        log Z_d of every sequence.
    backward, scaled_next : (T, K) ndarrays, or None
        The scaled backward messages g_t and v_t = E_{t+1} ⊙ g_{t+1} / n_{t+1} (v is 0 at
        each sequence's last step), kept on request (``keep_messages``): with them
        s_t(j, k) = (r_t(j) / g_t(j)) Π̃_jk v_t(k) (:func:`merge_pair_terms`).
    """

    resp: np.ndarray
    start_counts: np.ndarray
    trans_counts: np.ndarray
    start_entropy: np.ndarray
    trans_entropy: np.ndarray
    log_norm: np.ndarray
    backward: np.ndarray | None = None
    scaled_next: np.ndarray | None = None


# --------------------------------------------------------------------------- checks
def _check_inputs(log_lik, seq_range, log_start, log_trans) -> tuple[int, int, int]:
    check_array(log_lik, "log_lik", 2)
    check_array(seq_range, "seq_range", 1, np.int64)
    check_array(log_start, "log_start", 1)
    check_array(log_trans, "log_trans", 2)
    T, K = log_lik.shape
    if K < 1:
        raise KernelInputError(f"log_lik must have at least one column (state), got shape {log_lik.shape}")
    if log_start.shape != (K,):
        raise KernelInputError(f"log_start must have shape ({K},) to match log_lik {log_lik.shape}, got {log_start.shape}")
    if log_trans.shape != (K, K):
        raise KernelInputError(f"log_trans must have shape ({K}, {K}) to match log_lik {log_lik.shape}, got {log_trans.shape}")
    if seq_range.shape[0] < 1:
        raise KernelInputError("seq_range must hold S + 1 sequence boundaries, got an empty array")
    if seq_range[0] != 0:
        raise KernelInputError(f"seq_range[0] must be 0, got {int(seq_range[0])}")
    if seq_range[-1] != T:
        raise KernelInputError(f"seq_range[-1] must be T = {T} (the rows of log_lik), got {int(seq_range[-1])}")
    step = np.diff(seq_range)
    if step.size and step.min() <= 0:
        s = int(np.flatnonzero(step <= 0)[0])
        raise KernelInputError(
            f"seq_range must strictly increase (no empty sequence): seq_range[{s}] = {int(seq_range[s])}, "
            f"seq_range[{s + 1}] = {int(seq_range[s + 1])}"
        )
    for a, name in ((log_start, "log_start"), (log_trans, "log_trans")):
        bad = ~(a < np.inf)  # NaN or +inf; −inf (probability 0) is allowed
        if bad.any():
            at = np.unravel_index(int(np.flatnonzero(bad)[0]), a.shape)
            where = at[0] if a.ndim == 1 else tuple(int(i) for i in at)
            what = "a NaN" if np.isnan(a[at]) else "+inf"
            raise KernelInputError(f"{name} has {what} at {where} (only finite values and -inf are allowed)")
    return T, K, seq_range.shape[0] - 1


def _raise_bad_sequence(log_lik, seq_range, log_trans, d: int, code: int):
    t0, t1 = int(seq_range[d]), int(seq_range[d + 1])
    if code == 1:
        rows = log_lik[t0:t1]
        nan = np.isnan(rows).any(axis=1)
        pinf = np.isposinf(rows).any(axis=1)
        none = ~np.isfinite(rows).any(axis=1)
        t = int(np.flatnonzero(nan | pinf | none)[0])
        row = rows[t]
        if nan[t]:
            why = f"a NaN at column {int(np.flatnonzero(np.isnan(row))[0])}"
        elif pinf[t]:
            why = f"+inf at column {int(np.flatnonzero(np.isposinf(row))[0])}"
        else:
            why = "no finite entry (every state has probability 0)"
        raise KernelInputError(f"log_lik row {t0 + t} (sequence {d}) has {why}: {row_preview(row)}")
    if code == 2:
        raise KernelInputError(
            f"sequence {d} (rows {t0}:{t1}) has probability 0 under log_start, log_trans and log_lik "
            "(log Z = -inf: no state path has non-zero weight, or its weight underflows)"
        )
    raise KernelInputError(
        f"sequence {d} (rows {t0}:{t1}): a forward normaliser overflowed; exp(log_trans) must be "
        f"(sub-)stochastic, got max log_trans = {float(np.max(log_trans)):.4g}"
    )


# -------------------------------------------------------------------------- kernels
def forward_backward(log_lik: np.ndarray, seq_range: np.ndarray, log_start: np.ndarray,
                     log_trans: np.ndarray, *, n_threads=None, keep_messages: bool = False) -> ForwardBackward:
    """Forward-backward on every sequence of a batch: the local step of an HMM.

    Sequence d is rows ``seq_range[d]:seq_range[d+1]`` of C = ``log_lik``; with
    a = ``log_start`` and W = ``log_trans``, the optimal factor is the Markov chain
    (Hughes 2016 thesis Eq. 6.48)

        q*(z_d) ∝ exp(a_{z_1} + Σ_{t<T_d} W_{z_t z_{t+1}} + Σ_t C_{t z_t}).

    It is computed by the scaled forward-backward recursions (Rabiner 1989 §V.A):
    with c_t = max_k C_tk, E_t = exp(C_t − c_t), Π̃ = exp(W) (sub-stochastic rows,
    never renormalised) and ã = exp(a − max a),

    * forward: f̃_1 = ã ⊙ E_1, f̃_t = (Π̃ᵀ f_{t−1}) ⊙ E_t, n_t = Σ_k f̃_t(k), f_t = f̃_t / n_t;
    * backward: g_T = 1, g_t = Π̃ (E_{t+1} ⊙ g_{t+1}) / n_{t+1};
    * marginals r_t = f_t ⊙ g_t; pairwise s_t(j, k) = f_t(j) Π̃_jk E_{t+1}(k) g_{t+1}(k) / n_{t+1};
    * log Z_d = max a + Σ_t (c_t + ln n_t).

    The summaries (thesis §6.3.3, Eq. 6.24-6.25) are summed over the sequences; the
    (T, K, K) pairwise array is never formed. The entropy of q*(z) is
    Σ start_entropy + Σ trans_entropy, and equals
    Σ_d log Z_d − Σ_k M0_k a_k − Σ_jk M_jk W_jk − Σ_tk r_tk C_tk.

    Parameters
    ----------
    log_lik : (T, K) ndarray of float64, C-contiguous
        C_tk = E_q log p(x_t | state k). May hold −inf, but every row needs a finite entry.
    seq_range : (S + 1,) ndarray of int64, C-contiguous
        Sequence boundaries: 0, ..., T, strictly increasing (no empty sequence).
    log_start : (K,) ndarray of float64, C-contiguous
        a_k = E_q ln π_0k; −inf marks a state that never starts a sequence.
    log_trans : (K, K) ndarray of float64, C-contiguous
        W_jk = E_q ln π_jk; −inf marks an impossible transition.
    n_threads : int, optional
        OpenMP threads over sequences; default all available for large inputs, 1 for
        small ones. Results do not depend on it (bit for bit).
    keep_messages : bool, default False
        Also return the backward messages (for :func:`merge_pair_terms`).

    Returns
    -------
    ForwardBackward
        resp (T, K), start_counts (K,), trans_counts (K, K), start_entropy (K,),
        trans_entropy (K, K), log_norm (S,), and with ``keep_messages`` backward and
        scaled_next (T, K).

    Raises
    ------
    KernelInputError (a ValueError)
        Wrong dtype / shape / layout, a malformed ``seq_range``, a NaN or +inf in
        any input, a row of ``log_lik`` with no finite entry, or a sequence of
        probability 0 (every path has weight 0, or it underflows after scaling).

    Notes
    -----
    For K ≥ ``BLAS_MIN_K`` the K × K products use SciPy's BLAS,
    limited to one BLAS thread for the duration of the call
    (process-wide, restored afterwards), so results do not depend on BLAS's
    thread settings either. The plain loops used otherwise agree up to rounding.
    """
    T, K, S = _check_inputs(log_lik, seq_range, log_start, log_trans)
    rows = T if keep_messages else 0
    out = ForwardBackward(np.empty((T, K)), np.empty(K), np.empty((K, K)), np.empty(K),
                          np.empty((K, K)), np.empty(S), np.empty((rows, K)), np.empty((rows, K)))
    nt = thread_count(n_threads, T * K * K)
    use_blas = _use_blas(K)
    with blas_single_thread(use_blas):
        bad, code = _ext.forward_backward(log_lik, seq_range, log_start, log_trans, out.resp, out.start_counts,
                                          out.trans_counts, out.start_entropy, out.trans_entropy, out.log_norm,
                                          nt, use_blas, out.backward, out.scaled_next)
    if bad >= 0:
        _raise_bad_sequence(log_lik, seq_range, log_trans, bad, code)
    if not keep_messages:
        out = dataclasses.replace(out, backward=None, scaled_next=None)
    return out


def _xlogx_ratio(sigma: np.ndarray, denom: np.ndarray) -> np.ndarray:
    """−σ ln(σ / d) elementwise, 0 where σ = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -sigma * np.log(sigma / denom)
    return np.where(sigma > 0.0, out, 0.0)


def merge_pair_terms(fb: ForwardBackward, seq_range: np.ndarray, log_trans: np.ndarray,
                     pairs: np.ndarray, block: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Entropy terms of the chain in which states a and b are one state, for each pair (a, b).

    Merging a and b sums rows and columns a, b of every pairwise marginal s_t
    (Hughes 2016 thesis §6.5.1). Only the merged state's start entry, row and column of
    the entropy table change (every other entry keeps its numerator and denominator):

        start  = −Σ_d ρ_d1 ln ρ_d1,                       ρ_t = r_t(a) + r_t(b),
        row ℓ  = −Σ_t σ ln(σ/ρ_t),     σ = s_t(a, ℓ) + s_t(b, ℓ),
        col ℓ  = −Σ_t σ ln(σ/r_t(ℓ)),  σ = s_t(ℓ, a) + s_t(ℓ, b),
        self   = −Σ_t σ ln(σ/ρ_t),     σ = Σ_{j,k ∈ {a,b}} s_t(j, k),

    over the steps t < T_d of every sequence, with s_t(j, k) = (r_t(j) / g_t(j)) Π̃_jk v_t(k)
    from the kept messages of :func:`forward_backward`. Vectorised over time steps in
    blocks of ``block`` rows; O(T K) per pair.

    Returns
    -------
    start : (P,) ndarray
    table : (P, 2, K) ndarray
        Row (``[:, 0]``) and column (``[:, 1]``) of the merged state, indexed by the
        other states ℓ in the original numbering; entry a of both holds the self term
        and entry b is 0.
    """
    if fb.backward is None:
        raise ValueError("merge_pair_terms needs forward_backward(..., keep_messages=True)")
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    T, K = fb.resp.shape
    P = pairs.shape[0]
    trans = np.exp(log_trans)
    start, self_terms = np.zeros(P), np.zeros(P)
    table = np.zeros((P, 2, K))
    firsts = fb.resp[np.asarray(seq_range[:-1], dtype=np.intp)]
    for lo in range(0, T, block):
        r = fb.resp[lo:lo + block]
        g = fb.backward[lo:lo + block]
        v = fb.scaled_next[lo:lo + block]
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(g > 0.0, r / g, 0.0)
        for m, (a, b) in enumerate(pairs):
            rho = r[:, a] + r[:, b]
            row = v * (f[:, a, None] * trans[a] + f[:, b, None] * trans[b])
            col = f * (trans[:, a] * v[:, a, None] + trans[:, b] * v[:, b, None])
            table[m, 0] += _xlogx_ratio(row, rho[:, None]).sum(axis=0)
            table[m, 1] += _xlogx_ratio(col, r).sum(axis=0)
            both = (f[:, a] * (trans[a, a] * v[:, a] + trans[a, b] * v[:, b])
                    + f[:, b] * (trans[b, a] * v[:, a] + trans[b, b] * v[:, b]))
            self_terms[m] += _xlogx_ratio(both, rho).sum()
    for m, (a, b) in enumerate(pairs):
        table[m, :, a] = self_terms[m]
        table[m, :, b] = 0.0
        rho = firsts[:, a] + firsts[:, b]
        start[m] = _xlogx_ratio(rho, np.ones_like(rho)).sum()
    return start, np.maximum(table, 0.0)


def viterbi(log_lik: np.ndarray, seq_range: np.ndarray, log_start: np.ndarray,
            log_trans: np.ndarray, *, n_threads=None) -> np.ndarray:
    """Most likely state path of every sequence (Viterbi; Rabiner 1989 §III.B).

    The mode of q*(z_d) of :func:`forward_backward` (Hughes 2016 thesis §6.6):
    δ_1 = a + C_1, δ_t(k) = C_tk + max_j [δ_{t−1}(j) + W_jk] with back-pointers,
    ties going to the lowest state index.

    Parameters
    ----------
    log_lik, seq_range, log_start, log_trans, n_threads
        As for :func:`forward_backward`.

    Returns
    -------
    path : (T,) ndarray of int64
        The state of every time step.

    Raises
    ------
    KernelInputError (a ValueError)
        As for :func:`forward_backward` (a sequence of probability 0 is one whose
        every path scores −inf).
    """
    T, K, S = _check_inputs(log_lik, seq_range, log_start, log_trans)
    path = np.empty(T, dtype=np.int64)
    nt = thread_count(n_threads, T * K * K)
    bad, code = _ext.viterbi(log_lik, seq_range, log_start, log_trans, path, nt)
    if bad >= 0:
        _raise_bad_sequence(log_lik, seq_range, log_trans, bad, code)
    return path
