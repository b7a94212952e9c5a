"""L-sparse mode of the compiled topic-model local step: the NumPy reference, the dense step at
L = K, monotone objective, row invariants and summaries, determinism, memory and validation.

Hughes 2016 thesis §7.3, Alg. 7.4 (L-sparse document step: top-L responsibilities, active-set
pruning, selection on the first 5 iterations until the supports are stable and every 10th);
Hughes & Sudderth 2016, fast and accurate local steps (sparse), §5, Alg. 2; Hughes, Kim &
Sudderth 2015 (AISTATS), sparse restarts and §5.1 (merged-pair entropy).
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy.special import entr
from setups import ALL_FIELDS, assert_same_bits, assert_summaries, make_table_batch, mixed_lengths, some_pairs

from bnpvi.kernels import KernelInputError
from bnpvi.kernels import reference as ref
from bnpvi.kernels import topic

REF_FIELDS = ["resp", "doc_counts", "iters", "objective", "restarts_accepted", "entropy", "word_topic",
              "pair_entropy"]


def batch(K, rng, table_mode, warm, lengths=None, alpha=2.0):
    """(args, kwargs, counts, V) of a call in table mode or with the dense (nnz, K) log_lik."""
    lengths = mixed_lengths(rng) if lengths is None else lengths
    table, wid, counts, dr, prior, rest = make_table_batch(lengths, K, rng, alpha=alpha)
    kw = dict(word_ids=wid) if table_mode else {}
    C = table if table_mode else np.ascontiguousarray(table[wid])
    if warm:
        kw["init_counts"] = rng.gamma(0.5, 4.0, (len(lengths), K)) * (rng.random((len(lengths), K)) < 0.6)
    return (C, counts, dr, prior, rest), kw, counts, table.shape[0]


def assert_close(got, want, fields, what, rtol=1e-10):
    for f in fields:
        a, b = getattr(got, f), want[f]
        assert (a is None) == (b is None), f"{what}: {f}"
        if a is None:
            continue
        if f in ("iters", "restarts_accepted"):
            assert np.array_equal(a, b), f"{what}: {f}"
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12, err_msg=f"{what}: {f}")


# ------------------------------------------------------------------- reference
@pytest.mark.parametrize("table_mode", [False, True])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.01, 0.4])
@pytest.mark.parametrize("K, L", [(2, 1), (7, 1), (7, 3), (7, 7), (30, 1), (30, 4), (30, 30), (100, 2)])
def test_matches_reference(K, L, eps, warm, table_mode):
    # (30, 1) and (100, 2) also select by the threshold algorithm (many active topics per slot)
    rng = np.random.default_rng([K, L, int(100 * eps), warm, table_mode])
    args, kw, _, _ = batch(K, rng, table_mode, warm)
    kw.update(n_restarts=3, conv_thr=0.01, pairs=some_pairs(K, rng), sparse_L=L, active_eps=eps, force_sparse=True)
    got = topic._doc_topic_step(*args, **kw)
    want = dict(zip(REF_FIELDS, ref.doc_topic_step(*args, **kw)))
    assert_close(got, want, REF_FIELDS, f"K={K} L={L} eps={eps}")
    assert got.iters.max() > 1


@pytest.mark.parametrize("select_always", [False, True])
def test_matches_reference_on_long_documents(select_always):
    # the schedule (re-select on iterations 1-5, 10, 20, ...) and pruning both matter here
    rng = np.random.default_rng([5, select_always])
    args, kw, _, _ = batch(20, rng, True, False, lengths=[150, 0, 90, 200, 1], alpha=0.3)
    kw.update(n_restarts=5, conv_thr=1e-4, max_iters=60, sparse_L=3, select_always=select_always)
    got = topic._doc_topic_step(*args, **kw)
    want = dict(zip(REF_FIELDS, ref.doc_topic_step(*args, **kw)))
    assert_close(got, want, REF_FIELDS, "long documents")
    assert got.iters.max() > 20


def test_stable_supports_stop_the_early_reselections():
    # once a re-selection puts under 1 % of a document's tokens on topics that entered the
    # supports, iterations 2-5 only re-weight: the reference re-selecting there differs
    rng = np.random.default_rng([16, 1])
    args, kw, _, _ = batch(20, rng, True, False, lengths=[150, 0, 90, 200, 1], alpha=0.3)
    kw.update(n_restarts=5, conv_thr=1e-4, max_iters=60, sparse_L=3)
    got = topic._doc_topic_step(*args, **kw)
    want = dict(zip(REF_FIELDS, ref.doc_topic_step(*args, **kw)))
    assert_close(got, want, REF_FIELDS, "stable supports")
    never_stable = ref.doc_topic_step(*args, stable_mass=0.0, **kw)
    assert not np.allclose(got.doc_counts, never_stable[1], rtol=1e-8)


# ----------------------------------------------------------------- dense at L = K
@pytest.mark.parametrize("table_mode", [False, True])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("K", [1, 5, 30])
def test_forced_sparse_at_L_equal_K_is_the_dense_step(K, warm, table_mode):
    rng = np.random.default_rng([K, warm, table_mode, 3])
    args, kw, _, _ = batch(K, rng, table_mode, warm)
    kw.update(n_restarts=4, conv_thr=0.01, pairs=some_pairs(K, rng) if K > 1 else None)
    dense = topic.doc_topic_step(*args, **kw)
    sparse = topic._doc_topic_step(*args, sparse_L=K, active_eps=0.0, force_sparse=True, select_always=True, **kw)
    for f in ("iters", "restarts_accepted"):
        assert np.array_equal(getattr(sparse, f), getattr(dense, f)), f
    for f in ("resp", "doc_counts", "entropy", "word_topic", "pair_entropy", "objective"):
        if getattr(dense, f) is not None:
            np.testing.assert_allclose(getattr(sparse, f), getattr(dense, f), rtol=1e-8, atol=1e-10, err_msg=f)
    if K == 30:
        assert dense.restarts_accepted.sum() > 0


@pytest.mark.parametrize("L", [5, 6, 100])
def test_public_L_at_least_K_runs_the_dense_step(L):
    rng = np.random.default_rng([L, 8])
    args, kw, _, _ = batch(5, rng, True, False)
    kw.update(n_restarts=2, pairs=some_pairs(5, rng))
    assert_same_bits(topic.doc_topic_step(*args, sparse_L=L, **kw), topic.doc_topic_step(*args, **kw), ALL_FIELDS)


def test_sparse_mode_differs_from_dense_below_K():
    rng = np.random.default_rng(11)
    args, kw, _, _ = batch(12, rng, True, False)
    dense = topic.doc_topic_step(*args, **kw)
    sparse = topic.doc_topic_step(*args, sparse_L=2, **kw)
    assert not np.allclose(sparse.resp, dense.resp)
    assert ((sparse.resp > 0).sum(axis=1) <= 2).all()


# ----------------------------------------------------------- monotone objective
@pytest.mark.parametrize("select_always", [False, True])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("K, L", [(6, 1), (10, 2), (25, 4)])
def test_objective_never_decreases_without_pruning(K, L, warm, select_always):
    rng = np.random.default_rng([K, L, warm, select_always, 4])
    args, kw, _, _ = batch(K, rng, False, warm, alpha=0.5)
    kw.update(sparse_L=L, active_eps=0.0, select_always=select_always, conv_thr=0.0)
    trace = np.array([topic._doc_topic_step(*args, max_iters=t, **kw).objective for t in range(25)])
    assert np.all(np.diff(trace, axis=0) >= -1e-11 * (1.0 + np.abs(trace[1:])))
    assert np.any(np.diff(trace, axis=0) > 1e-6)
    with_restarts = topic._doc_topic_step(*args, max_iters=24, n_restarts=5, **kw)
    assert np.all(with_restarts.objective >= trace[-1])
    assert with_restarts.restarts_accepted.sum() > 0


def test_objective_equals_direct_formula():
    # L_d = Σ_u c_u Σ_k r_uk (C_uk − ln r_uk) + Σ_k lnΓ(θ_dk) + lnΓ(a_>) − lnΓ(Σ_k θ_dk + a_>)
    from scipy.special import gammaln
    rng = np.random.default_rng(6)
    (C, counts, dr, prior, rest), kw, _, _ = batch(15, rng, False, False)
    res = topic.doc_topic_step(C, counts, dr, prior, rest, sparse_L=3, n_restarts=3, **kw)
    for d in range(dr.size - 1):
        r, c, CC = res.resp[dr[d]:dr[d + 1]], counts[dr[d]:dr[d + 1]], C[dr[d]:dr[d + 1]]
        theta = res.doc_counts[d] + prior
        want = c @ (r * CC).sum(axis=1) + c @ entr(r).sum(axis=1) + gammaln(theta).sum() + gammaln(rest) \
            - gammaln(theta.sum() + rest)
        np.testing.assert_allclose(res.objective[d], want, rtol=1e-11, err_msg=f"document {d}")


# --------------------------------------------------------- rows and summaries
@pytest.mark.parametrize("table_mode", [False, True])
@pytest.mark.parametrize("K, L", [(3, 1), (9, 2), (40, 5)])
def test_rows_and_summaries(K, L, table_mode):
    rng = np.random.default_rng([K, L, table_mode, 7])
    args, kw, counts, V = batch(K, rng, table_mode, False)
    pairs = some_pairs(K, rng)
    res = topic.doc_topic_step(*args, sparse_L=L, n_restarts=3, pairs=pairs, **kw)
    r, dr = res.resp, args[2]
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=1e-13)
    assert r.min() >= 0.0 and ((r > 0).sum(axis=1) <= L).all()
    assert ((r > 0).sum(axis=1) == L).mean() > 0.5
    N = np.stack([counts[dr[d]:dr[d + 1]] @ r[dr[d]:dr[d + 1]] for d in range(dr.size - 1)])
    np.testing.assert_allclose(res.doc_counts, N, rtol=1e-12, atol=1e-12)
    assert_summaries(res, counts, kw.get("word_ids"), pairs, V)
    # a merged pair never has more entropy than its two topics
    assert np.all(res.pair_entropy <= res.entropy[pairs[:, 0]] + res.entropy[pairs[:, 1]] + 1e-9)


def test_pruned_topics_leave_the_documents():
    # a large ε leaves each document few active topics: every row's topics are among them
    rng = np.random.default_rng(12)
    args, kw, _, _ = batch(30, rng, True, False)
    dr = args[2]
    res = topic.doc_topic_step(*args, sparse_L=4, active_eps=3.0, **kw)
    loose = topic.doc_topic_step(*args, sparse_L=4, active_eps=0.0, **kw)
    assert (res.doc_counts > 0).sum() < (loose.doc_counts > 0).sum()
    for d in range(dr.size - 1):
        used = (res.resp[dr[d]:dr[d + 1]] > 0).any(axis=0)
        assert np.array_equal(used, res.doc_counts[d] > 0)


# ----------------------------------------------------------------- determinism
@pytest.mark.parametrize("table_mode", [False, True])
@pytest.mark.parametrize("warm", [False, True])
def test_threads_and_keep_resp_change_no_bit(warm, table_mode):
    block_docs, block_rows = topic._sparse.BLOCK
    rng = np.random.default_rng([warm, table_mode, 13])
    lengths = list(rng.integers(0, 50, size=int(1.3 * block_docs))) + [block_rows + 5, 0, 3]
    args, kw, counts, V = batch(20, rng, table_mode, warm, lengths=lengths, alpha=0.7)
    kw.update(sparse_L=3, n_restarts=3, pairs=some_pairs(20, rng, M=9))
    first = topic.doc_topic_step(*args, n_threads=1, **kw)
    assert_summaries(first, counts, kw.get("word_ids"), kw["pairs"], V)
    for nt in (1, 2):
        lean = topic.doc_topic_step(*args, n_threads=nt, keep_resp=False, **kw)
        assert lean.resp is None
        assert_same_bits(lean, first, ALL_FIELDS[1:], f"keep_resp=False, n_threads={nt}")
        assert_same_bits(topic.doc_topic_step(*args, n_threads=nt, **kw), first, ALL_FIELDS, f"n_threads={nt}")


def test_table_mode_equals_dense_mode_bit_for_bit():
    rng = np.random.default_rng(14)
    (table, counts, dr, prior, rest), kw, _, _ = batch(25, rng, True, False)
    wid = kw["word_ids"]
    for extra in ({}, dict(init_counts=rng.gamma(0.5, 4.0, (dr.size - 1, 25)))):
        a = topic.doc_topic_step(table, counts, dr, prior, rest, sparse_L=4, n_restarts=3, word_ids=wid, **extra)
        b = topic.doc_topic_step(np.ascontiguousarray(table[wid]), counts, dr, prior, rest, sparse_L=4,
                                 n_restarts=3, **extra)
        assert_same_bits(a, b, ["resp", "doc_counts", "iters", "objective", "restarts_accepted", "entropy"])


def test_scratch_does_not_grow_with_rows_times_K():
    K, V = 3000, 50
    rng = np.random.default_rng(15)
    lengths = [40] * 300
    table, wid, counts, dr, prior, rest = make_table_batch(lengths, K, rng, V=V)
    tracemalloc.start()
    try:
        topic.doc_topic_step(table, counts, dr, prior, rest, word_ids=wid, keep_resp=False, sparse_L=4, max_iters=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    rows_by_K = int(dr[-1]) * K * 8
    outputs = (len(lengths) + V) * K * 8
    assert peak < outputs + rows_by_K // 10, (peak, outputs, rows_by_K)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("value", [0, -2, 2.0, True, "3", 2**31])
def test_bad_sparse_L(value):
    rng = np.random.default_rng(0)
    args, kw, _, _ = batch(4, rng, True, False)
    with pytest.raises(KernelInputError, match="sparse_L must be None or an int"):
        topic.doc_topic_step(*args, sparse_L=value, **kw)


@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf"), "0.1", None, True])
def test_bad_active_eps(value):
    rng = np.random.default_rng(0)
    args, kw, _, _ = batch(4, rng, True, False)
    with pytest.raises(KernelInputError, match="active_eps must be a finite number >= 0"):
        topic.doc_topic_step(*args, sparse_L=2, active_eps=value, **kw)
