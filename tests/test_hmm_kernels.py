"""Compiled HMM forward-backward and Viterbi vs brute force, the NumPy references,
identities, determinism and validation.

Hughes 2016 thesis §6.3.3 (Eq. 6.24-6.25, 6.48): the summaries of q*(z) of every
sequence are checked against enumeration of all K^T state paths.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from bnpvi.kernels import KernelInputError
from bnpvi.kernels import hmm
from bnpvi.kernels import reference as ref

RTOL = 1e-12
FIELDS = ["resp", "start_counts", "trans_counts", "start_entropy", "trans_entropy", "log_norm"]


@pytest.fixture(params=["loops", "blas"])
def path_kind(request, monkeypatch):
    """Run a test with the plain loops and with the BLAS products."""
    if request.param == "blas":
        if not hmm._use_blas(10**6):
            pytest.skip("SciPy BLAS not available")
        monkeypatch.setattr(hmm, "BLAS_MIN_K", 1)
    else:
        monkeypatch.setattr(hmm, "BLAS_MIN_K", 10**9)
    return request.param


# ---------------------------------------------------------------------- inputs
def seq_range_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def make_chain(lengths, K, rng, neginf=0.0, scale=2.0):
    """(log_lik, seq_range, log_start, log_trans): sub-stochastic rows, optional −inf.

    With ``neginf`` > 0 that fraction of the entries is −inf, except along one random
    path per sequence, so that every sequence keeps a positive probability.
    """
    T = int(np.sum(lengths))
    sr = seq_range_of(lengths)
    C = scale * rng.standard_normal((T, K))
    a = np.log(rng.dirichlet(np.ones(K)))
    W = np.log(rng.dirichlet(np.ones(K), size=K) * rng.uniform(0.3, 1.0, size=(K, 1)))
    if neginf and K > 1:
        z = rng.integers(0, K, T)
        keep_C = np.zeros((T, K), dtype=bool)
        keep_C[np.arange(T), z] = True
        inner = np.setdiff1d(np.arange(T - 1), sr[1:-1] - 1)  # steps t with t + 1 in the same sequence
        keep_W = np.zeros((K, K), dtype=bool)
        keep_W[z[inner], z[inner + 1]] = True
        keep_a = np.zeros(K, dtype=bool)
        keep_a[z[sr[:-1]]] = True
        for arr, keep in ((C, keep_C), (W, keep_W), (a, keep_a)):
            arr[(rng.random(arr.shape) < neginf) & ~keep] = -np.inf
    return np.ascontiguousarray(C), sr, a, np.ascontiguousarray(W)


def brute_force(C, seq_range, a, W):
    """Every summary and the MAP path by enumerating all K^T_d paths of each sequence."""
    T, K = C.shape
    S = len(seq_range) - 1
    out = dict(resp=np.zeros((T, K)), start_counts=np.zeros(K), trans_counts=np.zeros((K, K)),
               start_entropy=np.zeros(K), trans_entropy=np.zeros((K, K)), log_norm=np.zeros(S),
               entropy=np.zeros(S), viterbi=np.zeros(T, dtype=np.int64), unique=np.zeros(S, dtype=bool))
    for d in range(S):
        t0, t1 = seq_range[d], seq_range[d + 1]
        L = t1 - t0
        paths = np.array(list(itertools.product(range(K), repeat=L)))
        score = a[paths[:, 0]] + C[t0 + np.arange(L), paths].sum(axis=1)
        if L > 1:
            score = score + W[paths[:, :-1], paths[:, 1:]].sum(axis=1)
        lz = logsumexp(score)
        q = np.exp(score - lz)
        out["log_norm"][d] = lz
        out["entropy"][d] = -np.sum(q[q > 0] * np.log(q[q > 0]))
        for t in range(L):
            np.add.at(out["resp"][t0 + t], paths[:, t], q)
        r1 = out["resp"][t0]
        out["start_counts"] += r1
        out["start_entropy"] -= np.where(r1 > 0, r1 * np.log(np.where(r1 > 0, r1, 1.0)), 0.0)
        for t in range(L - 1):
            s = np.zeros((K, K))
            np.add.at(s, (paths[:, t], paths[:, t + 1]), q)
            out["trans_counts"] += s
            rows = s.sum(axis=1, keepdims=True)
            ok = s > 0
            out["trans_entropy"][ok] -= (s * np.log(np.where(ok, s, 1.0) / np.where(rows > 0, rows, 1.0)))[ok]
        order = np.argsort(score)[::-1]
        out["viterbi"][t0:t1] = paths[order[0]]
        out["unique"][d] = len(score) == 1 or score[order[0]] - score[order[1]] > 1e-9
    return out


def as_dict(res) -> dict:
    if isinstance(res, hmm.ForwardBackward):
        return {f: getattr(res, f) for f in FIELDS}
    return dict(zip(FIELDS, res))


def assert_summaries_close(got: dict, want: dict, rtol=RTOL, atol=1e-13, what=""):
    for f in FIELDS:
        np.testing.assert_allclose(got[f], want[f], rtol=rtol, atol=atol, err_msg=f"{what}: {f}")


BRUTE_CASES = [
    # (lengths, K, fraction of −inf entries)
    ([1], 1, 0.0),
    ([3, 1, 2], 1, 0.0),
    ([1, 1, 1], 3, 0.0),
    ([6], 2, 0.0),
    ([2, 5, 1, 3], 2, 0.0),
    ([4, 1, 6, 2], 3, 0.0),
    ([5, 3, 1, 5], 3, 0.25),
    ([6, 6, 1], 3, 0.35),
    ([2, 1, 4, 6, 3], 2, 0.3),
]


# ------------------------------------------------------------------ brute force
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lengths, K, neginf", BRUTE_CASES)
def test_forward_backward_matches_brute_force(lengths, K, neginf, seed, path_kind):
    rng = np.random.default_rng([seed, K, len(lengths), int(100 * neginf)])
    C, sr, a, W = make_chain(lengths, K, rng, neginf)
    want = brute_force(C, sr, a, W)
    assert np.all(np.isfinite(want["log_norm"]))
    got = hmm.forward_backward(C, sr, a, W)
    assert_summaries_close(as_dict(got), want, what="compiled vs brute force")
    assert_summaries_close(as_dict(ref.forward_backward(C, sr, a, W)), want, what="reference vs brute force")
    # the entropy of q*(z) is the sum of the two entropy summaries
    np.testing.assert_allclose(got.start_entropy.sum() + got.trans_entropy.sum(), want["entropy"].sum(),
                               rtol=RTOL, atol=1e-13)
    assert np.all(got.trans_entropy >= 0.0) and np.all(got.start_entropy >= 0.0)
    assert np.all(got.trans_counts[np.isneginf(W)] == 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lengths, K, neginf", BRUTE_CASES)
def test_viterbi_matches_brute_force(lengths, K, neginf, seed):
    rng = np.random.default_rng([seed, K, len(lengths), int(100 * neginf), 7])
    C, sr, a, W = make_chain(lengths, K, rng, neginf)
    want = brute_force(C, sr, a, W)
    path = hmm.viterbi(C, sr, a, W)
    assert path.dtype == np.int64 and path.shape == (C.shape[0],)
    assert np.array_equal(path, ref.viterbi(C, sr, a, W))
    for d in np.flatnonzero(want["unique"]):
        rows = slice(sr[d], sr[d + 1])
        assert np.array_equal(path[rows], want["viterbi"][rows]), d
    assert want["unique"].sum() >= len(lengths) - 1  # the check above really ran


def test_viterbi_ties_go_to_the_lowest_state():
    K = 4
    C = np.zeros((7, K))
    sr = seq_range_of([3, 1, 3])
    path = hmm.viterbi(C, sr, np.zeros(K), np.zeros((K, K)))
    assert np.array_equal(path, np.zeros(7, dtype=np.int64))
    # a tie between states 1 and 3 only
    C[:, [0, 2]] = -5.0
    assert np.array_equal(hmm.viterbi(C, sr, np.zeros(K), np.zeros((K, K))), np.ones(7, dtype=np.int64))


# ------------------------------------------------------------------ reference
def big_batch(K, kind, seed=0, T=2000):
    rng = np.random.default_rng([seed, K, ["unit", "neginf", "sticky", "wide"].index(kind)])
    lengths = list(rng.integers(1, 120, size=40))
    lengths[:5] = [1, 1, 2, 1, 3]
    lengths.append(max(1, T - int(np.sum(lengths))))
    if kind == "neginf":
        return make_chain(lengths, K, rng, neginf=0.3)
    C, sr, a, W = make_chain(lengths, K, rng, scale=3.0)
    if kind == "sticky":  # long runs of one state, near-deterministic transitions
        P = np.full((K, K), 0.01 / max(K - 1, 1)) + np.eye(K) * 0.99
        W = np.ascontiguousarray(np.log(P if K > 1 else np.ones((1, 1))))
    elif kind == "wide":  # log_lik spread over ±1e3
        C = np.ascontiguousarray(rng.uniform(-1e3, 1e3, C.shape))
    return C, sr, a, W


@pytest.mark.parametrize("kind", ["unit", "neginf", "sticky", "wide"])
@pytest.mark.parametrize("K", [1, 2, 7, 60])
def test_forward_backward_matches_reference(K, kind, path_kind):
    C, sr, a, W = big_batch(K, kind)
    got = as_dict(hmm.forward_backward(C, sr, a, W))
    want = as_dict(ref.forward_backward(C, sr, a, W))
    for f in FIELDS:
        assert np.all(np.isfinite(got[f])), f
    # atol: entries that are sums of positive numbers of size ≤ 1 (absolute rounding);
    # trans_entropy: conditionals that round to 1 make tiny terms of low relative accuracy
    # (the compiled trans_entropy is a difference of sums over all pairs: ~1e-16 of
    # their magnitude per pair, which matters only where the entropy is ~0)
    n_pairs = C.shape[0] - (len(sr) - 1)
    for f in FIELDS:
        atol = {"resp": 1e-14, "trans_entropy": 1e-14 * n_pairs,
                "start_entropy": 1e-14 * len(sr), "trans_counts": 1e-14 * n_pairs}.get(f, 0.0)
        np.testing.assert_allclose(got[f], want[f], rtol=RTOL, atol=atol, err_msg=f)


@pytest.mark.parametrize("kind", ["unit", "neginf", "wide"])
@pytest.mark.parametrize("K", [2, 7, 60])
def test_viterbi_matches_reference(K, kind):
    C, sr, a, W = big_batch(K, kind, seed=4)
    assert np.array_equal(hmm.viterbi(C, sr, a, W), ref.viterbi(C, sr, a, W))


def test_blas_and_loops_agree(monkeypatch):
    if not hmm._use_blas(10**6):
        pytest.skip("SciPy BLAS not available")
    C, sr, a, W = big_batch(40, "unit", seed=2)
    monkeypatch.setattr(hmm, "BLAS_MIN_K", 10**9)
    loops = as_dict(hmm.forward_backward(C, sr, a, W))
    monkeypatch.setattr(hmm, "BLAS_MIN_K", 1)
    blas = as_dict(hmm.forward_backward(C, sr, a, W))
    assert_summaries_close(blas, loops, atol=1e-14, what="BLAS vs loops")


# ----------------------------------------------------------------- identities
@pytest.mark.parametrize("kind", ["unit", "neginf", "sticky"])
@pytest.mark.parametrize("K", [3, 30])
def test_marginal_consistency(K, kind, path_kind):
    # Σ_k s_t(j, k) = r_t(j): the rows of M plus the last steps' marginals give N_j;
    # Σ_j s_t(j, k) = r_{t+1}(k): the columns of M plus M0 give N_k
    C, sr, a, W = big_batch(K, kind, seed=5)
    out = hmm.forward_backward(C, sr, a, W)
    N = out.resp.sum(axis=0)
    last = out.resp[sr[1:] - 1].sum(axis=0)
    np.testing.assert_allclose(out.trans_counts.sum(axis=1) + last, N, rtol=1e-12)
    np.testing.assert_allclose(out.trans_counts.sum(axis=0) + out.start_counts, N, rtol=1e-12)
    np.testing.assert_allclose(out.start_counts, out.resp[sr[:-1]].sum(axis=0), rtol=1e-14)
    np.testing.assert_allclose(out.resp.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    assert np.all(out.resp >= 0.0) and np.all(out.trans_counts >= 0.0)


@pytest.mark.parametrize("shift", [1234.5, -1e4, 2.0**-10])
def test_shift_of_log_lik(shift, path_kind):
    # log_lik on a grid of 2⁻²⁰, so that C + shift is exact: then C_t − c_t, and with it
    # every summary, is bit-identical, and log Z_d moves by T_d · shift
    C, sr, a, W = big_batch(12, "neginf", seed=6)
    C = np.round(C * 2.0**20) / 2.0**20
    base = hmm.forward_backward(C, sr, a, W)
    moved = hmm.forward_backward(C + shift, sr, a, W)
    for f in ["resp", "start_counts", "trans_counts", "start_entropy", "trans_entropy"]:
        assert np.array_equal(getattr(moved, f), getattr(base, f)), f
    np.testing.assert_allclose(moved.log_norm, base.log_norm + shift * np.diff(sr), rtol=1e-12,
                               atol=1e-15 * (np.abs(base.log_norm) + abs(shift) * np.diff(sr)).max())
    assert not np.array_equal(moved.log_norm, base.log_norm)
    assert np.array_equal(hmm.viterbi(C + shift, sr, a, W), hmm.viterbi(C, sr, a, W))


@pytest.mark.parametrize("kind", ["unit", "neginf", "sticky"])
@pytest.mark.parametrize("K", [1, 3, 30])
def test_entropy_identity(K, kind, path_kind):
    # H[q*] = Σ_d log Z_d − Σ_k M0_k a_k − Σ_jk M_jk W_jk − Σ_tk r_tk C_tk (cells with
    # zero mass add 0, also where a potential is −inf)
    C, sr, a, W = big_batch(K, kind, seed=8)
    out = hmm.forward_backward(C, sr, a, W)

    def dot(m, p):
        return np.sum(np.where(m > 0, m * np.where(np.isfinite(p), p, 0.0), 0.0))

    H = out.log_norm.sum() - dot(out.start_counts, a) - dot(out.trans_counts, W) - dot(out.resp, C)
    total = out.start_entropy.sum() + out.trans_entropy.sum()
    scale = np.abs(out.log_norm).sum() + np.abs(out.resp * np.where(np.isfinite(C), C, 0)).sum()
    np.testing.assert_allclose(total, H, rtol=0, atol=1e-11 * scale)
    if K > 1 and kind != "sticky":
        assert total > 1.0


def test_single_state_and_length_one_sequences():
    rng = np.random.default_rng(3)
    C = rng.standard_normal((9, 1))
    sr = seq_range_of([4, 1, 4])
    out = hmm.forward_backward(C, sr, np.array([-0.5]), np.array([[-0.25]]))
    assert np.all(out.resp == 1.0)
    np.testing.assert_allclose(out.trans_counts, [[6.0]], rtol=1e-14)
    assert out.start_counts[0] == 3.0 and out.start_entropy[0] == 0.0
    assert abs(out.trans_entropy[0, 0]) < 1e-14
    want = np.array([C[0:4].sum() - 0.5 - 0.75, C[4, 0] - 0.5, C[5:9].sum() - 0.5 - 0.75])
    np.testing.assert_allclose(out.log_norm, want, rtol=1e-14)
    # only length-1 sequences: no pairwise terms, resp = softmax(a + C_t)
    K = 4
    C = rng.standard_normal((5, K))
    a = np.log(rng.dirichlet(np.ones(K)))
    W = np.log(rng.dirichlet(np.ones(K), size=K))
    out = hmm.forward_backward(C, seq_range_of([1] * 5), a, W)
    assert np.all(out.trans_counts == 0.0) and np.all(out.trans_entropy == 0.0)
    np.testing.assert_allclose(out.resp, np.exp(C + a - logsumexp(C + a, axis=1, keepdims=True)), rtol=1e-13)
    np.testing.assert_allclose(out.log_norm, logsumexp(C + a, axis=1), rtol=1e-14)
    assert np.array_equal(hmm.viterbi(C, seq_range_of([1] * 5), a, W), np.argmax(C + a, axis=1))


def test_sub_stochastic_rows_are_not_renormalised():
    # exp(W) rows summing to 1/2: log Z of a length-L sequence drops by (L−1) ln 2
    K = 3
    rng = np.random.default_rng(9)
    C = rng.standard_normal((6, K))
    a = np.log(rng.dirichlet(np.ones(K)))
    W = np.log(rng.dirichlet(np.ones(K), size=K))
    sr = seq_range_of([6])
    full = hmm.forward_backward(C, sr, a, W)
    half = hmm.forward_backward(C, sr, a, W + np.log(0.5))
    np.testing.assert_allclose(half.log_norm, full.log_norm - 5 * np.log(2.0), rtol=1e-13)
    np.testing.assert_allclose(half.resp, full.resp, rtol=1e-12, atol=1e-15)


def test_empty_batch():
    out = hmm.forward_backward(np.empty((0, 3)), np.zeros(1, dtype=np.int64), np.zeros(3), np.zeros((3, 3)))
    assert out.resp.shape == (0, 3) and out.log_norm.shape == (0,)
    assert np.all(out.trans_counts == 0.0) and np.all(out.start_entropy == 0.0)
    assert hmm.viterbi(np.empty((0, 3)), np.zeros(1, dtype=np.int64), np.zeros(3), np.zeros((3, 3))).shape == (0,)


def test_result_is_frozen():
    C, sr, a, W = make_chain([3, 2], 2, np.random.default_rng(0))
    out = hmm.forward_backward(C, sr, a, W)
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.resp = None


# ------------------------------------------------------------------ extremes
@pytest.mark.parametrize("lengths", [[1000] * 100, [100_000]], ids=["100x1000", "1x100000"])
def test_extreme_log_lik_gives_no_nan(lengths):
    rng = np.random.default_rng(11)
    K = 100
    T = int(np.sum(lengths))
    C = rng.uniform(-1e4, 1e4, (T, K))
    C[rng.random((T, K)) < 0.05] = -np.inf
    C[np.arange(T), rng.integers(0, K, T)] = rng.uniform(-1e4, 1e4, T)
    a = np.log(rng.dirichlet(np.ones(K)))
    W = np.log(rng.dirichlet(np.full(K, 0.5), size=K))
    sr = seq_range_of(lengths)
    out = hmm.forward_backward(C, sr, a, W)
    for f in FIELDS:
        assert np.all(np.isfinite(getattr(out, f))), f
    np.testing.assert_allclose(out.resp.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(out.trans_entropy >= 0.0) and np.all(out.trans_counts >= 0.0)
    np.testing.assert_allclose(out.trans_counts.sum() + len(lengths), T, rtol=1e-12)
    path = hmm.viterbi(C, sr, a, W)
    assert path.min() >= 0 and path.max() < K
    # steps this peaked are certain: the marginal's mode is the Viterbi state
    assert np.mean(path == out.resp.argmax(axis=1)) > 0.99


# --------------------------------------------------------------- determinism
def _bits(out) -> list[bytes]:
    return [getattr(out, f).tobytes() for f in FIELDS]


@pytest.mark.parametrize("K, lengths", [(3, [50] * 400 + [7] * 13), (30, [200] * 60 + [1]), (60, [30] * 100)])
def test_bit_identical_for_any_thread_count(K, lengths):
    rng = np.random.default_rng([K, len(lengths)])
    C, sr, a, W = make_chain(lengths, K, rng, neginf=0.1)
    first = _bits(hmm.forward_backward(C, sr, a, W, n_threads=1))
    assert first == _bits(hmm.forward_backward(C, sr, a, W, n_threads=1))
    for nt in (2, 3, None):
        assert first == _bits(hmm.forward_backward(C, sr, a, W, n_threads=nt)), nt
    path = hmm.viterbi(C, sr, a, W, n_threads=1)
    for nt in (2, 3, None):
        assert np.array_equal(path, hmm.viterbi(C, sr, a, W, n_threads=nt))


def test_blas_thread_limit_is_restored():
    import threadpoolctl
    if not hmm._use_blas(60):
        pytest.skip("SciPy BLAS not available")
    before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    C, sr, a, W = big_batch(60, "unit", seed=1, T=300)
    hmm.forward_backward(C, sr, a, W)
    C[7, 3] = np.nan
    with pytest.raises(KernelInputError):
        hmm.forward_backward(C, sr, a, W)
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"] == before
    from bnpvi.kernels import blas
    assert blas._blas_users == 0


# ---------------------------------------------------------------- validation
def _ok():
    return make_chain([3, 1, 4], 3, np.random.default_rng(0))


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda C, sr, a, W: (C.astype(np.float32), sr, a, W), "log_lik must have dtype float64"),
        (lambda C, sr, a, W: (C, sr.astype(np.int32), a, W), "seq_range must have dtype int64"),
        (lambda C, sr, a, W: (C, sr, a.astype(np.float32), W), "log_start must have dtype float64"),
        (lambda C, sr, a, W: (C, sr, a, W.astype(np.int64)), "log_trans must have dtype float64"),
        (lambda C, sr, a, W: (np.asfortranarray(C), sr, a, W), "log_lik must be C-contiguous"),
        (lambda C, sr, a, W: (C, sr, a, np.asfortranarray(W)), "log_trans must be C-contiguous"),
        (lambda C, sr, a, W: (C, np.repeat(sr, 2)[::2], a, W), "seq_range must be C-contiguous"),
        (lambda C, sr, a, W: (C.ravel().copy(), sr, a, W), "log_lik must be 2-D"),
        (lambda C, sr, a, W: (C, sr, a[:2].copy(), W), r"log_start must have shape \(3,\)"),
        (lambda C, sr, a, W: (C, sr, a, W[:, :2].copy()), r"log_trans must have shape \(3, 3\)"),
        (lambda C, sr, a, W: (np.empty((8, 0)), sr, np.empty(0), np.empty((0, 0))), "at least one column"),
        (lambda C, sr, a, W: (C, np.empty(0, dtype=np.int64), a, W), "seq_range must hold"),
        (lambda C, sr, a, W: (C, sr + 1, a, W), r"seq_range\[0\] must be 0"),
        (lambda C, sr, a, W: (C, np.array([0, 3, 4, 7], dtype=np.int64), a, W), r"seq_range\[-1\] must be T = 8"),
        (lambda C, sr, a, W: (C, np.array([0, 3, 3, 8], dtype=np.int64), a, W), "strictly increase"),
        (lambda C, sr, a, W: (C, np.array([0, 5, 3, 8], dtype=np.int64), a, W), r"seq_range\[1\] = 5"),
        (lambda C, sr, a, W: (C.tolist(), sr, a, W), "numpy.ndarray"),
        (lambda C, sr, a, W: (C, sr, np.where(np.arange(3) == 1, np.nan, a), W), "log_start has a NaN at 1"),
        (lambda C, sr, a, W: (C, sr, a, np.where(np.eye(3) > 0, W, np.inf)), r"log_trans has \+inf at \(0, 1\)"),
    ],
)
@pytest.mark.parametrize("kernel", ["forward_backward", "viterbi"])
def test_rejects_bad_input(kernel, mutate, match):
    args = mutate(*_ok())
    with pytest.raises(KernelInputError, match=match) as info:
        getattr(hmm, kernel)(*args)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "value, match",
    [
        (np.nan, r"log_lik row 5 \(sequence 2\) has a NaN at column 1"),
        (np.inf, r"log_lik row 5 \(sequence 2\) has \+inf at column 1"),
        ("row", r"log_lik row 5 \(sequence 2\) has no finite entry"),
    ],
)
@pytest.mark.parametrize("kernel", ["forward_backward", "viterbi"])
def test_rejects_bad_log_lik_values(kernel, value, match):
    C, sr, a, W = _ok()
    if value == "row":
        C[5] = -np.inf
    else:
        C[5, 1] = value
    with pytest.raises(KernelInputError, match=match) as info:
        getattr(hmm, kernel)(C, sr, a, W)
    assert "\n" not in str(info.value)
    C[5] = 0.0
    getattr(hmm, kernel)(C, sr, a, W)  # fine once repaired


@pytest.mark.parametrize("kernel", ["forward_backward", "viterbi"])
def test_rejects_zero_probability_sequences(kernel):
    C, sr, a, W = _ok()  # sequences: rows 0:3, 3:4, 4:8
    # sequence 2 can only be in state 0 at steps 5 and 6, but 0 → 0 is impossible
    W[0, 0] = -np.inf
    C[5, 1:] = -np.inf
    C[6, 1:] = -np.inf
    with pytest.raises(KernelInputError, match=r"sequence 2 \(rows 4:8\) has probability 0") as info:
        getattr(hmm, kernel)(C, sr, a, W)
    assert "\n" not in str(info.value)
    # every start impossible: sequence 0 is named
    with pytest.raises(KernelInputError, match="sequence 0 "):
        getattr(hmm, kernel)(*_ok()[:2], np.full(3, -np.inf), _ok()[3])


def test_rejects_overflowing_transitions():
    C, sr, a, W = _ok()
    W[1, 2] = 800.0  # exp(W) = inf: far from (sub-)stochastic
    with pytest.raises(KernelInputError, match=r"sequence 0 \(rows 0:3\): a forward normaliser overflowed") as info:
        hmm.forward_backward(C, sr, a, W)
    assert "max log_trans = 800" in str(info.value)


def test_rejects_bad_n_threads():
    with pytest.raises(KernelInputError, match="n_threads"):
        hmm.forward_backward(*_ok(), n_threads=0)
    with pytest.raises(KernelInputError, match="n_threads"):
        hmm.viterbi(*_ok(), n_threads=1.5)
