"""L-sparse local step of mixtures: compiled top-L selection vs its reference, optimality, sparse summaries.

Hughes 2016 thesis §7.1 (Eq. 7.4-7.5, Alg. 7.2): the best q(z_n) with at most L nonzero
entries is the softmax of the L largest weights W_nk = E log p(x_n|φ_k) + E ln π_k.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from bnpvi.kernels import mixture
from bnpvi.kernels import KernelInputError
from bnpvi.kernels import reference as ref
from bnpvi.stats.resp import Responsibilities
from setups import KINDS, TINY, assert_close, bits_of, make_weights


def densify(values, indices, K):
    out = np.zeros((values.shape[0], K))
    np.add.at(out, (np.arange(values.shape[0])[:, None], indices), values)
    return out


def compiled_equals_reference(log_lik, log_prior, L):
    """The compiled top-L step against the NumPy reference: same indices, values, normalisers, entropy."""
    got = mixture.sparse_local_step(log_lik, log_prior, L)
    want = ref.sparse_local_step(log_lik, log_prior, L)
    np.testing.assert_array_equal(got[1], want[1], err_msg=f"indices, L={L}")
    assert_close(got[0], want[0], atol=TINY, what=f"values, L={L}")
    assert_close(got[2], want[2], what=f"log_norm, L={L}")
    assert_close(got[3], want[3], atol=1e-12 * max(1.0, float(np.abs(want[3]).max())), what=f"entropy, L={L}")
    return got


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N,K", [(1, 1), (7, 2), (1000, 8), (300, 257)])
def test_top_l_matches_a_stable_full_sort(N, K, kind):
    log_lik, log_prior = make_weights(N, K, kind)
    for L in sorted({1, 2, 3, K // 2, K} & set(range(1, K + 1))):
        got = compiled_equals_reference(log_lik, log_prior, L)
        values, indices = got[0], got[1]
        assert np.all(values >= 0) and np.allclose(values.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert all(len(set(row)) == L for row in indices.tolist()), "indices repeat within a row"
        assert indices.min() >= 0 and indices.max() < K


def test_ties_go_to_the_lower_index_and_inf_entries_only_fill():
    log_lik = np.array([[1.0, 2.0, 2.0, 0.5, 2.0],
                        [-np.inf, 0.0, -np.inf, -np.inf, -np.inf]])
    values, indices, log_norm, _ = mixture.sparse_local_step(log_lik, np.zeros(5), 2)
    np.testing.assert_array_equal(indices, [[1, 2], [1, 0]])
    np.testing.assert_array_equal(values, [[0.5, 0.5], [1.0, 0.0]])
    assert_close(log_norm, [2.0 + np.log(2.0), 0.0])


@pytest.mark.parametrize("kind", KINDS)
def test_l_equal_k_is_the_dense_step(kind):
    log_lik, log_prior = make_weights(500, 12, kind, seed=4)
    values, indices, log_norm, entropy = mixture.sparse_local_step(log_lik, log_prior, 12)
    resp, ln_dense, h_dense = mixture.dense_local_step(log_lik, log_prior)
    assert_close(densify(values, indices, 12), resp, atol=TINY)
    assert_close(log_norm, ln_dense)
    assert_close(entropy, h_dense, atol=1e-12 * max(1.0, float(np.abs(h_dense).max())))
    # through the container, L >= K is the dense step itself, bit for bit
    R = Responsibilities.from_weights(log_lik, log_prior, sparse_L=12)
    assert not R.is_sparse and bits_of((R.values, R.log_norm, R.entropy())) == bits_of((resp, ln_dense, h_dense))


def test_top_l_is_optimal_among_l_sparse_responsibilities():
    """f_n(r) = Σ_k r_k (W_k − ln r_k) is at most logsumexp over the top L for any L-sparse r (thesis §7.1.2)."""
    rng = np.random.default_rng(3)
    N, K = 400, 30
    log_lik, log_prior = make_weights(N, K, "unit", seed=9)
    W = log_lik + log_prior
    previous = np.full(N, -np.inf)
    for L in range(1, K + 1):
        values, indices, log_norm, _ = mixture.sparse_local_step(log_lik, log_prior, L)
        picked = np.take_along_axis(W, indices.astype(np.intp), axis=1)
        assert_close(log_norm, logsumexp(picked, axis=1))
        assert np.all(log_norm >= previous - 1e-12), "the optimum must not fall as L grows"
        previous = log_norm
        support = np.argsort(rng.random((N, K)), axis=1)[:, :L]
        r = rng.dirichlet(np.ones(L), size=N)
        f_random = np.sum(r * (np.take_along_axis(W, support, axis=1) - np.log(r)), axis=1)
        assert np.all(f_random <= log_norm + 1e-12)
    assert_close(previous, logsumexp(W, axis=1))


@pytest.mark.parametrize("L", [1, 2, 4, 8])
def test_distance_from_dense_is_twice_the_mass_outside_the_top_l(L):
    log_lik, log_prior = make_weights(1000, 40, "unit", seed=2)
    dense = softmax(log_lik + log_prior, axis=1)
    values, indices, _, _ = mixture.sparse_local_step(log_lik, log_prior, L)
    outside = 1.0 - np.take_along_axis(dense, indices.astype(np.intp), axis=1).sum(axis=1)
    distance = np.abs(densify(values, indices, 40) - dense).sum(axis=1)
    np.testing.assert_allclose(distance, 2.0 * outside, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("N,K", [(1000, 257), (20000, 64)])
def test_sparse_kernels_are_thread_count_free(N, K):
    log_lik, log_prior = make_weights(N, K, "unit", seed=3)
    one = mixture.sparse_local_step(log_lik, log_prior, 4, n_threads=1)
    two = mixture.sparse_local_step(log_lik, log_prior, 4, n_threads=2)
    assert bits_of(one) == bits_of(two)
    pairs = np.array([[0, 1], [2, 5], [7, 3]], dtype=np.int64)
    args = (one[0], one[1], one[3], pairs)
    assert bits_of([mixture.sparse_pair_entropy(*args, n_threads=1)]) == \
        bits_of([mixture.sparse_pair_entropy(*args, n_threads=2)])


def test_sparse_pair_entropy_equals_the_densified_merge():
    log_lik, log_prior = make_weights(2000, 10, "unit", seed=6)
    values, indices, _, entropy = mixture.sparse_local_step(log_lik, log_prior, 3)
    a, b = np.triu_indices(10, 1)
    pairs = np.stack([a, b], axis=1).astype(np.int64)
    pairs = np.concatenate([pairs, pairs[::-1, ::-1], pairs[:3]])  # both orders and repeats
    dense = densify(values, indices, 10)
    got = mixture.sparse_pair_entropy(values, indices, entropy, pairs)
    assert_close(got, ref.pair_merge_entropy(dense, pairs), atol=1e-10)
    R = Responsibilities(values, 10, indices=indices)
    assert_close(R.pair_entropy(pairs), got)


@pytest.mark.parametrize("call,match", [
    (lambda ll, lp: mixture.sparse_local_step(ll, lp, 0), "L must be an int in"),
    (lambda ll, lp: mixture.sparse_local_step(ll, lp, 9), "L must be an int in"),
    (lambda ll, lp: mixture.sparse_local_step(ll, lp, 2.0), "L must be an int in"),
    (lambda ll, lp: mixture.sparse_local_step(ll, lp[:3], 2), "log_prior must have shape"),
])
def test_sparse_step_rejects_bad_arguments(call, match):
    log_lik, log_prior = make_weights(5, 8, "unit")
    with pytest.raises(KernelInputError, match=match):
        call(log_lik, log_prior)


@pytest.mark.parametrize("bad,why", [(np.nan, "NaN at column 2"), (np.inf, r"\+inf at column 2"),
                                     (-np.inf, "no finite entry")])
def test_sparse_step_names_the_bad_row(bad, why):
    log_lik = np.zeros((4, 3))
    log_lik[1, 2] = bad
    if bad == -np.inf:
        log_lik[1] = -np.inf
    with pytest.raises(KernelInputError, match=f"row 1 of the weights .* has {why}"):
        mixture.sparse_local_step(log_lik, np.zeros(3), 2)


def test_underflowed_entries_are_zero_and_add_no_entropy():
    log_lik = np.array([[0.0, -800.0, -2000.0, -1.0]])
    values, indices, _, entropy = mixture.sparse_local_step(log_lik, np.zeros(4), 3)
    np.testing.assert_array_equal(indices, [[0, 3, 1]])
    assert values[0, 2] == 0.0 and entropy[1] == 0.0 and np.all(np.isfinite(entropy))


# ------------------------------------------------- blocked top-L selection (Hughes 2016 thesis Alg. 7.2)
def hard_weights(N: int, K: int, seed: int = 0):
    """(log_lik, log_prior) whose rows stress the blocked selection of the compiled kernel: distinct
    weights, many exact ties (log_prior takes the values 0, −0.5, ..., −2 and −0.0, so sums are exact),
    +0.0 / −0.0, increasing and decreasing rows, −inf cells and whole −inf blocks, rows with one or two
    finite weights, huge offsets and magnitudes near the float limit. The first rows are one of each
    kind, the others a random kind with its columns permuted."""
    rng = np.random.default_rng([seed, N, K])
    log_prior = 0.5 * rng.integers(-4, 1, K)
    log_prior[(log_prior == 0.0) & (rng.random(K) < 0.5)] = -0.0
    if K > 2:
        log_prior[rng.choice(K, size=K // 5, replace=False)] = -np.inf
    finite = np.flatnonzero(np.isfinite(log_prior))
    few = np.full(K, -np.inf)
    few[rng.choice(finite, size=min(2, finite.size), replace=False)] = rng.standard_normal(min(2, finite.size))
    kinds = [
        3.0 * rng.standard_normal(K),
        rng.integers(0, 3, K).astype(float),
        np.where(rng.random(K) < 0.5, -0.0, 0.0),
        np.arange(K, dtype=float),
        -np.arange(K, dtype=float),
        np.where(rng.random(K) < 0.5, -np.inf, rng.standard_normal(K)),
        np.where((np.arange(K) // 8) % 2 == 0, -np.inf, rng.standard_normal(K)),
        few,
        1e300 + 1e285 * rng.standard_normal(K),
        -1e300 + 1e285 * rng.standard_normal(K),
        1.7e308 * rng.uniform(-1.0, 1.0, K),
    ]
    log_lik = np.array([kinds[i] if i < len(kinds) else rng.permutation(kinds[rng.integers(len(kinds))])
                        for i in range(N)])
    log_lik[np.isneginf(log_lik + log_prior).all(axis=1), finite[0]] = 0.0  # every row needs a finite weight
    return log_lik, log_prior


@pytest.mark.parametrize("K", [1, 5, 8, 17, 64, 203])
def test_top_l_of_hard_rows_matches_a_stable_full_sort(K):
    log_lik, log_prior = hard_weights(300, K)
    for L in sorted({1, 2, 3, 4, 8, 16, 24, 25, K} & set(range(1, K + 1))):
        compiled_equals_reference(log_lik, log_prior, L)


@pytest.mark.parametrize("L", [1, 4, 16, 30])
def test_top_l_of_hard_rows_is_thread_count_free(L):
    log_lik, log_prior = hard_weights(2000, 203, seed=1)
    one = bits_of(mixture.sparse_local_step(log_lik, log_prior, L, n_threads=1))
    for nt in (2, 3, 4):
        assert bits_of(mixture.sparse_local_step(log_lik, log_prior, L, n_threads=nt)) == one, nt


@pytest.mark.parametrize("bad,why", [(np.nan, "NaN"), (np.inf, r"\+inf")])
@pytest.mark.parametrize("K,L", [(7, 1), (7, 4), (64, 1), (64, 4), (203, 4), (203, 16), (203, 30)])
def test_sparse_step_finds_a_bad_weight_in_any_column(K, L, bad, why):
    """A NaN or +inf is found even in a block of small weights that the selection never reads again."""
    rng = np.random.default_rng([K, L])
    log_lik, log_prior = make_weights(400, K, "unit", seed=5)
    for col in sorted({0, K // 2, K - 1, int(rng.integers(K))}):
        weights = log_lik.copy()
        for n in (150, 390):
            weights[n, col // 8 * 8:col // 8 * 8 + 8] = -50.0
            weights[n, (col + 8) % K] = 50.0
            weights[n, col] = bad
        for nt in (1, 2):
            with pytest.raises(KernelInputError, match=f"row 150 of the weights .* has {why} at column {col}"):
                mixture.sparse_local_step(weights, log_prior, L, n_threads=nt)
