"""Compiled local-step kernels vs their NumPy references, validation, determinism.

The dense local step of Hughes 2016 thesis §3.4.2 (Eq. 3.47-3.51: softmax, entropy from the
log normaliser, 0 ln 0 = 0) and the fixed-L container of L-sparse responsibilities (thesis §7.1.2).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
import pytest
from scipy.special import logsumexp, softmax

from bnpvi.kernels import mixture
from bnpvi.kernels import reference as ref
from bnpvi.stats.resp import Responsibilities
from setups import KINDS, TINY, assert_close, bits_of, make_weights


NS = [1, 7, 1000]
KS = [1, 2, 8, 257]


# ------------------------------------------------------------------------ dense step
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("N", NS)
def test_dense_local_step_matches_reference(N, K, kind):
    log_lik, log_prior = make_weights(N, K, kind)
    resp, log_norm, entropy = mixture.dense_local_step(log_lik, log_prior)
    r_ref, ln_ref, h_ref = ref.dense_local_step(log_lik, log_prior)

    for a in (resp, log_norm, entropy):
        assert np.all(np.isfinite(a)), "NaN/inf in the output"
    assert_close(resp, r_ref, atol=TINY, what="resp")
    assert_close(log_norm, ln_ref, what="log_norm")
    assert_close(entropy, h_ref, what="entropy")
    # independent oracles (SciPy), not just our own reference
    W = log_lik + log_prior
    assert_close(log_norm, logsumexp(W, axis=1), what="log_norm vs scipy")
    assert_close(resp, softmax(W, axis=1), atol=TINY, what="resp vs scipy")
    np.testing.assert_allclose(resp.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    assert np.all(resp >= 0.0) and np.all(entropy >= 0.0)
    # entropy from the log normaliser equals −Σ r ln r, except that −r ln r loses the
    # ~(1 − r) terms of r that round to 1 (≤ 1 ulp per row), which log1p keeps
    np.testing.assert_allclose(entropy, ref.entropy_of(resp), rtol=1e-10, atol=1e-15 * N)


@pytest.mark.parametrize("N", NS)
def test_zero_weight_cluster_is_exactly_zero(N):
    log_lik, log_prior = make_weights(N, 8, "unit")
    log_prior[[0, 5]] = -np.inf
    resp, log_norm, entropy = mixture.dense_local_step(log_lik, log_prior)
    assert np.all(resp[:, [0, 5]] == 0.0)
    assert np.all(entropy[[0, 5]] == 0.0) and not np.signbit(entropy[[0, 5]]).any()
    assert np.all(np.isfinite(resp)) and np.all(np.isfinite(entropy)) and np.all(np.isfinite(log_norm))


def test_single_cluster():
    log_lik = -1e5 * np.random.default_rng(1).random((50, 1))
    resp, log_norm, entropy = mixture.dense_local_step(log_lik, np.zeros(1))
    assert np.all(resp == 1.0) and np.all(log_norm == log_lik[:, 0]) and entropy[0] == 0.0


def test_known_values():
    # two equal weights: r = 1/2 each, H_k = N ln 2 / 2 per column; log_norm = W + ln 2
    log_lik = np.full((4, 2), -1e5)
    resp, log_norm, entropy = mixture.dense_local_step(log_lik, np.zeros(2))
    assert np.all(resp == 0.5)
    assert_close(log_norm, -1e5 + np.log(2.0))
    assert_close(entropy, [2 * np.log(2.0)] * 2)


def test_underflow_boundary_keeps_subnormals():
    # exp(t) for t just above ln(2^-1075) ≈ −745.133 is subnormal, not 0; below it is 0
    import math

    t = np.array([0.0, -708.5, -740.0, -745.0, -745.13, -745.1332, -745.1333, -745.2, -746.0, -np.inf])
    resp, log_norm, entropy = mixture.dense_local_step(t[None, :].copy(), np.zeros(t.size))
    e = np.array([math.exp(x) for x in t])
    assert np.all(e[1:6] > 0.0) and np.all(e[6:] == 0.0)
    expect = e * (1.0 / (1.0 + math.fsum(e[1:])))
    assert np.array_equal(resp[0], expect)  # same libm exp, bit for bit
    assert np.all(resp[0, 1:6] > 0.0) and np.all(resp[0, 6:] == 0.0)
    assert np.all(entropy[6:] == 0.0) and np.all(entropy[1:6] > 0.0)


def test_no_overflow_with_huge_positive_weights():
    log_lik = np.array([[7e307, 7e307 - 1e300], [1e308, -1e308]])
    resp, log_norm, entropy = mixture.dense_local_step(log_lik, np.zeros(2))
    assert np.all(np.isfinite(resp)) and np.all(np.isfinite(log_norm)) and np.all(np.isfinite(entropy))


def test_empty_batch():
    resp, log_norm, entropy = mixture.dense_local_step(np.empty((0, 3)), np.zeros(3))
    assert resp.shape == (0, 3) and log_norm.shape == (0,)
    assert np.array_equal(entropy, np.zeros(3))


# ------------------------------------------------------------------------ entropy_of
def make_resp(N: int, K: int, seed: int = 0) -> np.ndarray:
    """Responsibilities with exact zeros, ones, subnormal and tiny entries."""
    rng = np.random.default_rng([seed, N, K])
    r = rng.dirichlet(np.full(K, 0.3), size=N)
    r[rng.random((N, K)) < 0.25] = 0.0
    if K > 1:
        r[rng.random((N, K)) < 0.05] = 1e-300
        r[rng.random((N, K)) < 0.05] = 5e-324
    r[rng.random(N) < 0.1] = 0.0
    r[rng.random(N) < 0.1, 0] = 1.0
    return r


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("N", NS)
def test_entropy_of_matches_reference(N, K):
    r = make_resp(N, K)
    h = mixture.entropy_of(r)
    assert np.all(np.isfinite(h))
    assert_close(h, ref.entropy_of(r), what="entropy_of")


@pytest.mark.parametrize("kind", ["unit", "scale1e4", "gaps1e3", "neginf_prior"])
def test_entropy_of_softmax_output(kind):
    log_lik, log_prior = make_weights(1000, 257, kind)
    resp, _, entropy = mixture.dense_local_step(log_lik, log_prior)
    h = mixture.entropy_of(resp)
    assert_close(h, ref.entropy_of(resp))
    np.testing.assert_allclose(h, entropy, rtol=1e-10, atol=1e-12)


def test_entropy_of_known_values():
    r = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.25, 0.75, 0.0]])
    h = mixture.entropy_of(r)
    expect = [-(0.5 * np.log(0.5) + 0.25 * np.log(0.25)), -(0.5 * np.log(0.5) + 0.75 * np.log(0.75)), 0.0]
    assert_close(h, expect)
    assert h[2] == 0.0 and not np.signbit(h[2])


# ------------------------------------------------------------------ pair entropy
@pytest.mark.parametrize("K", [2, 8, 257])
@pytest.mark.parametrize("N", NS)
def test_pair_merge_entropy_matches_reference(N, K):
    r = make_resp(N, K)
    rng = np.random.default_rng(K)
    a, b = np.triu_indices(K, 1)
    pairs = np.stack([a, b], axis=1).astype(np.int64)
    if len(pairs) > 500:
        pairs = pairs[rng.choice(len(pairs), 500, replace=False)]
    pairs = np.ascontiguousarray(pairs)
    h = mixture.pair_merge_entropy(r, pairs)
    assert h.shape == (len(pairs),) and np.all(np.isfinite(h))
    assert_close(h, ref.pair_merge_entropy(r, pairs))
    # symmetric in (a, b), and equal to entropy_of the merged column
    assert np.array_equal(h, mixture.pair_merge_entropy(r, np.ascontiguousarray(pairs[:, ::-1])))
    a0, b0 = pairs[0]
    merged = np.ascontiguousarray((r[:, a0] + r[:, b0])[:, None])
    assert_close(h[:1], mixture.entropy_of(merged))


@pytest.mark.parametrize("K", [1, 7, 40])
def test_mult_reassign_gains_match_reference(K):
    """Whole counts of 1, 2-16 and above, fractional counts, responsibilities with exact zeros and ones, an
    empty document, and λ at its floor: the compiled gains equal the NumPy reference, for any thread count."""
    rng = np.random.default_rng(K)
    N, V, lam0 = 400, 300, 0.1
    X = sp.random(N, V, density=0.03, random_state=K, format="csr")
    X.data = np.ceil(X.data * 5)
    X.data[::7] = 2.5
    X.data[::13] = 40.0
    X = sp.csr_matrix(X.toarray() * (np.arange(N) != 3)[:, None])  # document 3 is empty
    R = rng.dirichlet(np.full(K, 0.2), size=N)
    R[R < 1e-3] = 0.0
    R /= R.sum(axis=1, keepdims=True)
    R[5] = np.eye(K)[0]
    lam = lam0 + np.asarray((X.T @ R).T)
    lam[:, ::5] += rng.random((K, len(range(0, V, 5)))) * 3
    total = lam.sum(axis=1)
    want = ref.mult_reassign_gains(X, R, lam, total, lam0, V * lam0)
    got = mixture.mult_reassign_gains(X, R, lam, total, lam0, V * lam0, n_threads=1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-9)
    assert np.array_equal(got, mixture.mult_reassign_gains(X, R, lam, total, lam0, V * lam0, n_threads=2))
    with pytest.raises(mixture.KernelInputError, match="do not fit"):
        mixture.mult_reassign_gains(X, R, lam[:, :-1], total, lam0, V * lam0)


def test_pair_merge_entropy_bounds():
    # merged entropy ≤ H_a + H_b (the sum is only an upper bound, never the value)
    log_lik, log_prior = make_weights(1000, 8, "unit")
    resp, _, entropy = mixture.dense_local_step(log_lik, log_prior)
    pairs = np.array([[0, 1], [2, 7], [3, 4]], dtype=np.int64)
    h = mixture.pair_merge_entropy(resp, pairs)
    assert np.all(h <= entropy[pairs[:, 0]] + entropy[pairs[:, 1]] + 1e-9)
    assert np.all(h < entropy[pairs[:, 0]] + entropy[pairs[:, 1]])


def test_pair_merge_entropy_empty_pairs():
    h = mixture.pair_merge_entropy(make_resp(10, 3), np.empty((0, 2), dtype=np.int64))
    assert h.shape == (0,)


# --------------------------------------------------------------------- determinism
@pytest.mark.parametrize("N,K", [(1000, 257), (20000, 64), (100003, 3)])
def test_deterministic_and_thread_count_free(N, K):
    log_lik, log_prior = make_weights(N, K, "unit", seed=3)
    first = bits_of(mixture.dense_local_step(log_lik, log_prior))
    assert first == bits_of(mixture.dense_local_step(log_lik, log_prior))
    for nt in (1, 2, 3, 4):
        assert first == bits_of(mixture.dense_local_step(log_lik, log_prior, n_threads=nt)), nt
    resp = np.frombuffer(first[0], dtype=np.float64).reshape(N, K)
    pairs = np.array([[0, 1], [1, K - 1]], dtype=np.int64) if K > 2 else np.array([[0, 1]], dtype=np.int64)
    h1 = mixture.entropy_of(resp, n_threads=1).tobytes()
    p1 = mixture.pair_merge_entropy(resp, pairs, n_threads=1).tobytes()
    for nt in (None, 2, 3):
        assert mixture.entropy_of(resp, n_threads=nt).tobytes() == h1
        assert mixture.pair_merge_entropy(resp, pairs, n_threads=nt).tobytes() == p1


# --------------------------------------------------------------------- out= arrays
def test_out_arrays_and_in_place():
    log_lik, log_prior = make_weights(1000, 8, "scale1e4")
    expect = mixture.dense_local_step(log_lik, log_prior)
    out = (np.full((1000, 8), np.nan), np.full(1000, np.nan), np.full(8, np.nan))
    got = mixture.dense_local_step(log_lik, log_prior, out=out)
    assert all(g is o for g, o in zip(got, out))
    assert bits_of(got) == bits_of(expect)
    # reuse dirty buffers, and only some of them
    got = mixture.dense_local_step(log_lik, log_prior, out=(None, out[1], out[2]))
    assert bits_of(got) == bits_of(expect)
    # in place: resp overwrites log_lik
    work = log_lik.copy()
    got = mixture.dense_local_step(work, log_prior, out=(work, None, None))
    assert got[0] is work and bits_of(got) == bits_of(expect)
    h = np.full(8, np.nan)
    assert mixture.entropy_of(expect[0], out=h) is h
    assert h.tobytes() == mixture.entropy_of(expect[0]).tobytes()


# ---------------------------------------------------------------------- validation
def _ok():
    return make_weights(7, 3, "unit")


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda ll, lp: (ll.astype(np.float32), lp), "dtype float64"),
        (lambda ll, lp: (ll.astype(np.int64), lp), "dtype float64"),
        (lambda ll, lp: (ll, lp.astype(np.float32)), "dtype float64"),
        (lambda ll, lp: (np.asfortranarray(np.tile(ll, (1, 2))), np.tile(lp, 2)), "C-contiguous"),
        (lambda ll, lp: (np.tile(ll, (1, 2))[:, ::2], lp), "C-contiguous"),
        (lambda ll, lp: (ll, np.tile(lp, 2)[::2]), "C-contiguous"),
        (lambda ll, lp: (ll, lp[:2].copy()), "shape"),
        (lambda ll, lp: (ll[0].copy(), lp), "2-D"),
        (lambda ll, lp: (ll, lp[None, :].copy()), "1-D"),
        (lambda ll, lp: (np.empty((7, 0)), np.empty(0)), "at least one column"),
        (lambda ll, lp: (ll.tolist(), lp), "numpy.ndarray"),
    ],
)
def test_dense_local_step_rejects_bad_input(mutate, match):
    log_lik, log_prior = mutate(*_ok())
    with pytest.raises(ValueError, match=match):
        mixture.dense_local_step(log_lik, log_prior)


@pytest.mark.parametrize(
    "value, where, match",
    [
        (np.nan, "lik", "NaN"),
        (np.inf, "lik", r"\+inf"),
        (np.nan, "prior", "NaN"),
        (-np.inf, "row", "no finite entry"),
    ],
)
def test_dense_local_step_rejects_bad_values(value, where, match):
    log_lik, log_prior = _ok()
    if where == "lik":
        log_lik[4, 1] = value
    elif where == "prior":
        log_prior[2] = value
    else:
        log_lik[4, :] = value
    with pytest.raises(ValueError, match=match) as info:
        mixture.dense_local_step(log_lik, log_prior)
    assert isinstance(info.value, mixture.KernelInputError)
    assert "row 4" in str(info.value) or where == "prior"


def test_dense_local_step_rejects_bad_out():
    log_lik, log_prior = _ok()
    with pytest.raises(ValueError, match="shape"):
        mixture.dense_local_step(log_lik, log_prior, out=(np.empty((7, 4)), None, None))
    with pytest.raises(ValueError, match="dtype"):
        mixture.dense_local_step(log_lik, log_prior, out=(None, np.empty(7, np.float32), None))
    with pytest.raises(ValueError, match="overlaps"):
        mixture.dense_local_step(log_lik, log_prior, out=(None, None, log_prior))
    big = np.empty((8, 3))
    with pytest.raises(ValueError, match="overlaps log_lik"):
        mixture.dense_local_step(big[:7], log_prior, out=(big[1:], None, None))
    ro = np.empty((7, 3))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mixture.dense_local_step(log_lik, log_prior, out=(ro, None, None))
    with pytest.raises(ValueError, match="tuple of 3"):
        mixture.dense_local_step(log_lik, log_prior, out=np.empty((7, 3)))
    with pytest.raises(ValueError, match="n_threads"):
        mixture.dense_local_step(log_lik, log_prior, n_threads=0)


@pytest.mark.parametrize("bad", [-1e-18, np.nan, np.inf, -np.inf])
def test_entropy_of_rejects_bad_values(bad):
    r = make_resp(20, 4)
    r[13, 2] = bad
    with pytest.raises(ValueError, match="row 13"):
        mixture.entropy_of(r)
    with pytest.raises(ValueError, match="row 13"):
        mixture.pair_merge_entropy(r, np.array([[0, 2]], dtype=np.int64))
    # a pair not touching column 2 is fine
    assert np.isfinite(mixture.pair_merge_entropy(r, np.array([[0, 1]], dtype=np.int64))).all()


def test_entropy_kernels_reject_bad_layout():
    r = make_resp(20, 4)
    with pytest.raises(ValueError, match="dtype float64"):
        mixture.entropy_of(r.astype(np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        mixture.entropy_of(np.asfortranarray(r))
    with pytest.raises(ValueError, match="2-D"):
        mixture.entropy_of(r[0].copy())
    with pytest.raises(ValueError, match="shape"):
        mixture.entropy_of(r, out=np.empty(5))
    pairs = np.array([[0, 1], [2, 3]], dtype=np.int64)
    with pytest.raises(ValueError, match="dtype int64"):
        mixture.pair_merge_entropy(r, pairs.astype(np.int32))
    with pytest.raises(ValueError, match="C-contiguous"):
        mixture.pair_merge_entropy(r, np.asfortranarray(pairs))
    with pytest.raises(ValueError, match=r"\(M, 2\)"):
        mixture.pair_merge_entropy(r, np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="outside"):
        mixture.pair_merge_entropy(r, np.array([[0, 4]], dtype=np.int64))
    with pytest.raises(ValueError, match="outside"):
        mixture.pair_merge_entropy(r, np.array([[-1, 2]], dtype=np.int64))
    with pytest.raises(ValueError, match="itself"):
        mixture.pair_merge_entropy(r, np.array([[0, 1], [3, 3]], dtype=np.int64))


# ----------------------------------------------------------------------- container
def test_responsibilities_dense():
    log_lik, log_prior = make_weights(1000, 8, "neginf_prior")
    R = Responsibilities.from_weights(np.asfortranarray(log_lik), log_prior.tolist())
    resp, log_norm, entropy = mixture.dense_local_step(log_lik, log_prior)
    assert bits_of((R.values, R.log_norm, R.entropy())) == bits_of((resp, log_norm, entropy))
    assert (R.n_atoms, R.K, R.is_sparse) == (1000, 8, False)
    assert R.matrix() is R.values
    assert_close(R.counts(), resp.sum(axis=0))
    pairs = np.array([[0, 1], [2, 3]])
    assert np.array_equal(R.pair_entropy(pairs), mixture.pair_merge_entropy(resp, pairs.astype(np.int64)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        R.values = resp


def sparse_example(seed=5, N=50, K=9, L=3):
    """Top-L rows in the fixed-L layout (Hughes 2016 thesis §7.1.2), with a padded row; and the dense equivalent."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((N, K))
    idx = np.argsort(rng.random((N, K)), axis=1)[:, :L].astype(np.int32)
    vals = rng.dirichlet(np.ones(L), size=N)
    idx[0] = [4, 4, 4]  # only one usable cluster: pad with value 0 and a repeated index
    vals[0] = [1.0, 0.0, 0.0]
    dense[np.arange(N)[:, None], idx] = vals
    dense[0] = 0.0
    dense[0, 4] = 1.0
    return Responsibilities(vals, K, indices=idx), dense


def test_responsibilities_sparse_form_never_densifies_and_matches_dense():
    R, dense = sparse_example()
    N, K = dense.shape
    assert R.is_sparse and (R.n_atoms, R.K) == (N, K)
    matrix = R.matrix()
    assert sp.issparse(matrix)
    np.testing.assert_array_equal(matrix.toarray(), dense)
    assert_close(R.counts(), dense.sum(axis=0))
    assert_close(R.entropy(), mixture.entropy_of(dense))
    weights = np.random.default_rng(1).normal(size=(N, K))
    assert_close(R.column_sums(weights), (dense * weights).sum(axis=0))
    np.testing.assert_array_equal(R.column(4), dense[:, 4])
    assert_close(R.pair_entropy([[0, 4], [1, 8]]), mixture.pair_merge_entropy(dense, np.array([[0, 4], [1, 8]])))


@pytest.mark.parametrize("family", ["gauss", "diag_gauss", "zm_gauss", "bern"])
def test_observation_summaries_from_sparse_equal_dense(family):
    from bnpvi.data.batch import PointBatch
    from bnpvi.obs import make_obs
    R, dense = sparse_example(N=60)
    rng = np.random.default_rng(2)
    X = (rng.random((60, 4)) < 0.4).astype(float) if family == "bern" else rng.normal(size=(60, 4))
    obs = make_obs({"name": family}, 4, None)
    got = obs.summarize(PointBatch(X), R)
    want = obs.summarize(PointBatch(X), Responsibilities(dense, dense.shape[1]))
    for name in want:
        assert_close(got[name], want[name])


def test_one_hot_responsibilities():
    R = Responsibilities.one_hot([2, 0, 2, 1], 4)
    np.testing.assert_array_equal(R.counts(), [1, 1, 2, 0])
    np.testing.assert_array_equal(R.entropy(), np.zeros(4))
    with pytest.raises(ValueError):
        Responsibilities.one_hot([4], 4)


def test_responsibilities_rejects_inconsistent_shapes():
    with pytest.raises(ValueError):
        Responsibilities(np.zeros((4, 3)), 3, log_norm=np.zeros(5))
    with pytest.raises(ValueError):
        Responsibilities(np.zeros((4, 3)), 3, entropy_sums=np.zeros(2))
    with pytest.raises(ValueError):
        Responsibilities(np.zeros((4, 3)), 4)
    with pytest.raises(ValueError):
        Responsibilities(np.zeros((4, 2)), 6, indices=np.zeros((4, 2), dtype=np.int64))


@pytest.mark.parametrize("given", [None, "ACTIVE"])
def test_openmp_threads_wait_passively_unless_the_environment_says_otherwise(given, tmp_path):
    """The console entry points (bnpvi.cli, imported before any kernel: ``import bnpvi`` loads none) set
    OMP_WAIT_POLICY=PASSIVE and keep a value the user set; importing a kernel leaves the environment alone
    (in a fresh process)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = ("import os, sys, bnpvi; print([m for m in sys.modules if m.startswith('bnpvi.kernels')]); "
            "import bnpvi.kernels.topic; print(os.environ.get('OMP_WAIT_POLICY')); "
            "import bnpvi.cli; print(os.environ['OMP_WAIT_POLICY'])")
    # run outside the source tree: `python -c` puts the working directory first on sys.path, and a checkout's
    # bnpvi/ has no compiled kernels when the package is installed elsewhere (as CI installs it)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    assert out.split() == ["[]", str(given), given or "PASSIVE"]


# ------------------------------------------------------------ quad_features
@pytest.mark.parametrize("N, D", [(5000, 16), (300, 64), (1, 1), (0, 4), (2000, 3)])
@pytest.mark.parametrize("linear", [True, False])
def test_quad_features_equals_reference(N, D, linear):
    Y = np.random.default_rng(N + D).standard_normal((N, D)) * 5.0
    expected = ref.quad_features(Y, linear)
    rows, cols = np.triu_indices(D)  # the definition, independently of the reference
    np.testing.assert_array_equal(expected[:, :rows.size], Y[:, rows] * Y[:, cols])
    for nt in (1, 2, None):
        got = mixture.quad_features(Y, linear, n_threads=nt)
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    out = np.full(expected.shape, np.nan)
    assert mixture.quad_features(Y, linear, out=out) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("args, match", [
    ((np.zeros((3, 2), dtype=np.float32),), "Y must have dtype float64"),
    ((np.zeros((4, 3))[:, :2],), "Y must be C-contiguous"),
    ((np.zeros((3, 2)), True, np.zeros((3, 4))), r"out must have shape \(3, 5\)"),
])
def test_quad_features_rejects_bad_input(args, match):
    Y, *rest = args
    kwargs = {"linear": rest[0], "out": rest[1]} if rest else {}
    with pytest.raises(mixture.KernelInputError, match=match):
        mixture.quad_features(Y, **kwargs)


# ------------------------------------------------------------ pair_logdets
def make_scatters(K: int, D: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((K, D, 2 * D))
    X = np.einsum("kdn,ken->kde", A, A)
    Y = rng.standard_normal((K, D)) * 2.0
    return np.eye(D) * 0.5, X, Y


@pytest.mark.parametrize("K, D", [(12, 16), (6, 64), (3, 1)])
@pytest.mark.parametrize("rank_one", [False, True])
def test_pair_logdets_equals_reference(K, D, rank_one):
    base, X, Y = make_scatters(K, D)
    pairs = np.array([(a, b) for a in range(K) for b in range(K) if a != b], dtype=np.int64)
    s = 50.0 + np.arange(pairs.shape[0], dtype=np.float64) if rank_one else None
    Y = Y if rank_one else None
    expected = ref.pair_logdets(base, X, pairs, Y, s)
    a, b = pairs[0]  # the definition, independently of the reference
    M = base + X[a] + X[b] - (np.outer(Y[a] + Y[b], Y[a] + Y[b]) / s[0] if rank_one else 0.0)
    assert expected[0] == pytest.approx(np.linalg.slogdet(M)[1], rel=1e-12)
    for nt in (1, 2):
        got = mixture.pair_logdets(base, X, pairs, Y, s, n_threads=nt)
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-12)
        if nt == 2:
            np.testing.assert_array_equal(got, one_thread)
        one_thread = got


def test_pair_logdets_marks_matrices_that_are_not_positive_definite():
    base, X, _ = make_scatters(4, 5)
    X[2] = -10.0 * np.eye(5)
    got = mixture.pair_logdets(base, X, np.array([[0, 1], [0, 2], [1, 2]], dtype=np.int64))
    assert np.isfinite(got[0]) and np.isnan(got[1]) and np.isnan(got[2])
    assert mixture.pair_logdets(base, X, np.zeros((0, 2), dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize("change, match", [
    (lambda a: dict(a, pairs=np.array([[0, 4]], dtype=np.int64)), r"outside \[0, 3\]"),
    (lambda a: dict(a, base=np.eye(3)), "with the same D"),
    (lambda a: dict(a, Y=np.zeros((4, 5))), "Y and s come together"),
    (lambda a: dict(a, Y=np.zeros((4, 5)), s=np.zeros(1)), "s must be positive"),
])
def test_pair_logdets_rejects_bad_input(change, match):
    base, X, _ = make_scatters(4, 5)
    args = change(dict(base=base, X=X, pairs=np.array([[0, 1]], dtype=np.int64)))
    with pytest.raises(mixture.KernelInputError, match=match):
        mixture.pair_logdets(**args)


# ------------------------------------------------------------ quad_argmax
def make_quad(N: int, D: int, K: int, linear: bool, seed: int = 0):
    """Points, and the weights and constants of K Gaussians' log densities over the quadratic features."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((N, D)) * 3.0
    A = rng.standard_normal((K, D, D))
    P = np.einsum("kde,kfe->kdf", A, A) / D + np.eye(D)
    rows, cols = np.triu_indices(D)
    quad = -0.5 * P[:, rows, cols] * np.where(rows == cols, 1.0, 2.0)
    W = np.hstack([quad, np.einsum("kde,ke->kd", P, rng.standard_normal((K, D)))]).T if linear else quad.T
    return Y, np.ascontiguousarray(W), rng.standard_normal(K)


@pytest.mark.parametrize("N, D, K, linear", [(5000, 16, 25, True), (3000, 5, 7, False), (1, 3, 1, True),
                                             (1100, 8, 40, True), (0, 4, 3, True)])
def test_quad_argmax_matches_reference(N, D, K, linear):
    Y, W, c = make_quad(N, D, K, linear)
    expected = ref.quad_argmax(Y, W, c)
    for nt in (1, 2):
        labels, n_exact = mixture.quad_argmax(Y, W, c, n_threads=nt)
        assert labels.dtype == np.int64 and labels.shape == (N,)
        np.testing.assert_array_equal(labels, expected)
        assert 0 <= n_exact <= N


def test_quad_argmax_decides_near_ties_in_float64():
    """Two clusters 1e-9 apart in every weight: float32 cannot tell them apart, the labels still follow float64."""
    Y, W, c = make_quad(4000, 6, 4, True, seed=3)
    nudge = 1e-9 * np.random.default_rng(0).standard_normal(W.shape[0])
    W = np.ascontiguousarray(np.column_stack([W, W[:, 0] + nudge]))  # cluster 4 ~ cluster 0
    c = np.append(c, c[0])
    expected = ref.quad_argmax(Y, W, c)
    assert np.any(expected == 4) and np.any(expected == 0)
    labels, n_exact = mixture.quad_argmax(Y, W, c)
    np.testing.assert_array_equal(labels, expected)
    assert n_exact >= np.count_nonzero(np.isin(expected, [0, 4]))


def test_quad_argmax_exact_ties_go_to_the_first():
    Y, W, c = make_quad(500, 4, 3, True, seed=4)
    W, c = np.hstack([W, W]), np.concatenate([c, c])
    labels, _ = mixture.quad_argmax(Y, W, c)
    np.testing.assert_array_equal(labels, ref.quad_argmax(Y, W, c))
    assert labels.max() < 3


def test_quad_argmax_shift_is_subtracted_first():
    Y, W, c = make_quad(2000, 5, 9, True, seed=6)
    shift = np.linspace(-300.0, 300.0, 5)
    labels, _ = mixture.quad_argmax(Y + shift, W, c, shift)
    np.testing.assert_array_equal(labels, ref.quad_argmax(Y + shift - shift, W, c))


def test_quad_argmax_rows_too_large_for_float32():
    Y, W, c = make_quad(300, 4, 5, True, seed=5)
    Y[7] *= 1e18  # products 1e37·9: beyond float32's range, scored in float64
    labels, n_exact = mixture.quad_argmax(Y, W, c)
    np.testing.assert_array_equal(labels, ref.quad_argmax(Y, W, c))
    assert n_exact >= 1


@pytest.mark.parametrize("mutate, match", [
    (lambda Y, W, c: (Y.astype(np.float32), W, c), "X must have dtype float64"),
    (lambda Y, W, c: (Y, W[:-1], c), r"weights must have shape \(10 or 14, K >= 1\) for D = 4"),
    (lambda Y, W, c: (Y, W, c[:-1]), r"const must have shape \(5,\)"),
    (lambda Y, W, c: (Y, np.where(W == W[0, 0], np.nan, W), c), "weights and const must be finite"),
    (lambda Y, W, c: (np.where(np.arange(Y.size).reshape(Y.shape) == 9, np.inf, Y), W, c),
     "X row 2 has a NaN or an infinity"),
    (lambda Y, W, c: (Y, W, c, np.zeros(3)), r"shift must be a finite \(4,\) array"),
])
def test_quad_argmax_rejects_bad_input(mutate, match):
    with pytest.raises(mixture.KernelInputError, match=match):
        mixture.quad_argmax(*mutate(*make_quad(20, 4, 5, True)))
