"""Compiled topic-model local step vs the NumPy reference, its digamma, the objective's
monotonicity and identity, sparse restarts, table mode and the summaries (entropies,
word-topic counts, merged-pair entropies), determinism and validation.

Hughes 2016 thesis, Alg. 5.1 / Eq. 5.44-5.46 (the document-level coordinate ascent) and
Eq. 5.47 (entropy summary); Hughes, Kim & Sudderth 2015 (AISTATS), sparse restarts and
§5.1 (merged-pair entropy).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.special import digamma, gammaln, logsumexp

from bnpvi.kernels import KernelInputError
from bnpvi.kernels import reference as ref
from bnpvi.kernels import topic
from setups import (ALL_FIELDS, FIELDS, assert_same_bits, assert_summaries, doc_range_of, make_batch, make_table_batch,
                    mixed_lengths, noise, some_pairs)

RTOL = 1e-10
ROOT = 1.4616321449683623  # the positive root of ψ


# ---------------------------------------------------------------------- inputs
def as_dict(res) -> dict:
    if isinstance(res, topic.DocTopicResult):
        return {f: getattr(res, f) for f in FIELDS}
    return dict(zip(FIELDS, res))


def assert_matches(got, want, what=""):
    got, want = as_dict(got), as_dict(want)
    for f in ["iters", "restarts_accepted"]:
        assert np.array_equal(got[f], want[f]), f"{what}: {f}"
    for f in ["resp", "doc_counts", "objective"]:
        np.testing.assert_allclose(got[f], want[f], rtol=RTOL, atol=1e-300, err_msg=f"{what}: {f}")


# ------------------------------------------------------------------- reference
@pytest.mark.parametrize("restarts", [0, 3])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("K", [1, 2, 7, 40])
def test_matches_reference(K, warm, restarts):
    rng = np.random.default_rng([K, warm, restarts])
    lengths = mixed_lengths(rng)
    C, counts, dr, prior, rest = make_batch(lengths, K, rng, rest=restarts == 0 or K % 2 == 0)
    init = rng.gamma(0.5, 4.0, (len(lengths), K)) * (rng.random((len(lengths), K)) < 0.6) if warm else None
    kw = dict(init_counts=init, n_restarts=restarts, conv_thr=0.01)
    got = topic.doc_topic_step(C, counts, dr, prior, rest, **kw)
    want = ref.doc_topic_step(C, counts, dr, prior, rest, **kw)
    assert_matches(got, want, f"K={K}")
    for f in FIELDS:
        assert np.all(np.isfinite(getattr(got, f))), f
    assert got.iters.dtype == np.int64 and got.restarts_accepted.dtype == np.int64
    np.testing.assert_allclose(got.resp.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(got.doc_counts.sum(axis=1), np.add.reduceat(np.r_[counts, 0.0], dr[:-1]) *
                               (np.diff(dr) > 0), rtol=1e-13)
    if restarts and K > 2:
        assert got.restarts_accepted.sum() > 0  # the restarts' code really ran
    # a run stopped by the iteration cap, and a looser threshold
    for kw in (dict(max_iters=3, conv_thr=0.0), dict(conv_thr=0.5, n_restarts=restarts, restart_iters=1)):
        assert_matches(topic.doc_topic_step(C, counts, dr, prior, rest, init_counts=init, **kw),
                       ref.doc_topic_step(C, counts, dr, prior, rest, init_counts=init, **kw), f"K={K} {kw}")


@pytest.mark.parametrize("scale", [30.0, 300.0])
def test_matches_reference_on_wide_log_lik(scale):
    # C spread over hundreds of nats: exp(C − m) underflows for most entries
    rng = np.random.default_rng(int(scale))
    lengths = mixed_lengths(rng)
    C, counts, dr, prior, rest = make_batch(lengths, 12, rng, scale=scale)
    for kw in (dict(), dict(n_restarts=4, conv_thr=1e-3)):
        assert_matches(topic.doc_topic_step(C, counts, dr, prior, rest, **kw),
                       ref.doc_topic_step(C, counts, dr, prior, rest, **kw), f"scale {scale}")


def test_rows_whose_weights_underflow_in_the_efficient_form():
    # topic 0 explains row 0 best, but its weight exp(ψ(N_0 + a_0) − max ψ) ≈ e^-1000 and
    # exp(C_01 − C_00) = e^-800: s_u = Σ_k L_uk p_k underflows to 0, so the row must be done
    # by log-sum-exp (dividing by s_u would give NaN)
    C = np.array([[0.0, -800.0], [0.0, -2.0], [-1.0, 0.0]])
    counts = np.array([2.0, 1.0, 3.0])
    dr = doc_range_of([3])
    prior = np.array([1e-3, 1.0])
    init = np.array([[0.0, 6.0]])
    for kw in (dict(init_counts=init), dict(init_counts=init, max_iters=0), dict(init_counts=init, n_restarts=1)):
        got = topic.doc_topic_step(C, counts, dr, prior, 0.5, **kw)
        want = ref.doc_topic_step(C, counts, dr, prior, 0.5, **kw)
        assert_matches(got, want, str(kw))
        assert np.all(np.isfinite(got.resp)) and got.resp[0, 1] > 0.999


# --------------------------------------------------------------------- digamma
def test_digamma_matches_scipy():
    x = np.concatenate([
        np.logspace(-3, 6, 200_001),
        ROOT + np.linspace(-0.6, 0.6, 20_001),
        ROOT + np.array([-1e-3, -1e-7, -1e-12, 0.0, 1e-12, 1e-7, 1e-3, 0.25, -0.25, 0.2500001, -0.2500001]),
        np.arange(1.0, 40.0), np.arange(0.5, 40.0), [9.999999999, 10.0, 10.000000001],
    ])
    got = topic._dense._digamma_array(np.ascontiguousarray(x))
    want = digamma(x)
    rel = np.abs(got - want) / np.abs(want)
    assert rel.max() < 1e-12, (x[np.argmax(rel)], rel.max())
    # what this implementation reaches (~5e-15); shifting only to x >= 6 before the same
    # seven asymptotic terms would give ~3e-13
    assert rel.max() < 1e-13, (x[np.argmax(rel)], rel.max())
    assert got[np.flatnonzero(x == 1.0)[0]] == pytest.approx(-np.euler_gamma, rel=1e-15)
    assert topic._dense._digamma_array(np.array([0.0]))[0] == -np.inf


@pytest.mark.parametrize("n", [1, 3, 4, 7, 1001])
def test_digamma_four_at_a_time_is_the_scalar_digamma_bit_for_bit(n):
    """The local step's weights take ψ four values at a time (vectors; AVX2 where the machine has it):
    the same bits as one value at a time, for every range of x (tiny, near the root, around 10, huge)
    and lengths with a tail."""
    rng = np.random.default_rng(n)
    pool = np.concatenate([np.logspace(-300, 8, 4001), ROOT + np.linspace(-0.3, 0.3, 601), [0.0, 9.999999999, 10.0],
                           np.arange(0.5, 12.0, 0.5), rng.uniform(0.0, 20.0, 2000)])
    for _ in range(20):
        x = np.ascontiguousarray(rng.choice(pool, size=n))
        got = topic._dense._digamma_weights_array(x)
        want = topic._dense._digamma_array(x)
        assert np.array_equal(got, want, equal_nan=True), x[got != want]


# ---------------------------------------------------------------- objective
def direct_objective(res, C, counts, dr, prior, rest):
    """Σ_u c_u Σ_k r_uk (C_uk − ln r_uk) − c_Dir(θ_d, a_>) + Σ_k (N_dk + a_k − θ_dk) E ln π_dk
    + (a_> − a_>) E ln π_d> per document, with θ_d = N_d + a and 0 ln 0 = 0."""
    D = len(dr) - 1
    out = np.empty(D)
    for d in range(D):
        r = res.resp[dr[d]:dr[d + 1]]
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = np.where(r > 0, r * (C[dr[d]:dr[d + 1]] - np.log(r)), 0.0)
        N = res.doc_counts[d]
        theta = N + prior
        full = np.r_[theta, rest] if rest > 0 else theta
        c_dir = gammaln(full.sum()) - gammaln(full).sum()
        e_log_pi = digamma(full) - digamma(full.sum())
        slack = np.sum((N + prior - theta) * e_log_pi[:len(theta)])
        if rest > 0:
            slack += (rest - rest) * e_log_pi[-1]
        out[d] = counts[dr[d]:dr[d + 1]] @ ent.sum(axis=1) - c_dir + slack
    return out


@pytest.mark.parametrize("restarts", [0, 4])
@pytest.mark.parametrize("rest", [True, False])
@pytest.mark.parametrize("K", [1, 5, 30])
def test_objective_equals_direct_formula(K, rest, restarts):
    rng = np.random.default_rng([K, rest, restarts, 3])
    lengths = mixed_lengths(rng)
    C, counts, dr, prior, prior_rest = make_batch(lengths, K, rng, rest=rest, scale=4.0)
    for kw in (dict(), dict(max_iters=0), dict(max_iters=2, conv_thr=0.0)):
        res = topic.doc_topic_step(C, counts, dr, prior, prior_rest, n_restarts=restarts, **kw)
        want = direct_objective(res, C, counts, dr, prior, prior_rest)
        np.testing.assert_allclose(res.objective, want, rtol=1e-11, atol=1e-11, err_msg=str(kw))


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("K, rest", [(2, True), (8, False), (25, True)])
def test_objective_never_decreases_over_iterations(K, rest, warm):
    # the state after n iterations from the same start (conv_thr = 0: exactly n) is the
    # n-th iterate of the block coordinate ascent: L_d must not decrease from n to n + 1
    rng = np.random.default_rng([K, rest, warm, 4])
    lengths = mixed_lengths(rng, D=30)
    C, counts, dr, prior, prior_rest = make_batch(lengths, K, rng, rest=rest, scale=3.0)
    init = rng.gamma(0.5, 5.0, (len(lengths), K)) if warm else None
    trace = []
    for n in range(0, 26):
        res = topic.doc_topic_step(C, counts, dr, prior, prior_rest, init_counts=init, max_iters=n, conv_thr=0.0)
        assert np.all(res.iters[np.diff(dr) > 0] == n)
        trace.append(res.objective)
    trace = np.array(trace)
    drop = trace[:-1] - trace[1:]
    assert np.all(drop <= 1e-12 * np.abs(trace[1:])), drop.max()
    # and the ascent does move: most non-empty documents gain more than rounding
    gain = trace[-1] - trace[0]
    long_docs = np.diff(dr) > 1
    assert np.mean(gain[long_docs] > 1e-6) > 0.8


# ------------------------------------------------------------------- restarts
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("K", [4, 20])
def test_restarts_never_lower_the_objective(K, warm):
    rng = np.random.default_rng([K, warm, 5])
    lengths = mixed_lengths(rng, D=60)
    C, counts, dr, prior, rest = make_batch(lengths, K, rng, alpha=0.5)
    init = rng.gamma(0.5, 5.0, (len(lengths), K)) if warm else None
    base = topic.doc_topic_step(C, counts, dr, prior, rest, init_counts=init)
    accepted_any = 0
    for n in (1, 3, 8):
        res = topic.doc_topic_step(C, counts, dr, prior, rest, init_counts=init, n_restarts=n)
        assert np.all(res.objective >= base.objective)
        assert np.array_equal(res.iters, base.iters)
        assert np.all(res.restarts_accepted <= n)
        same = res.restarts_accepted == 0
        assert np.array_equal(res.objective[same], base.objective[same])
        assert np.array_equal(res.doc_counts[same], base.doc_counts[same])
        assert np.all(res.objective[~same] > base.objective[~same])
        accepted_any += int(res.restarts_accepted.sum())
    assert accepted_any > 0


def stuck_document():
    """Type 0 (50 tokens) belongs to topic 0; type 1 (3 tokens) fits junk topic 2 a little
    better (4 nats a token), but moving it to topic 0 saves the cost of a second topic."""
    C = np.array([[0.0, -10.0, -10.0], [-4.0, -10.0, 0.0]])
    return C, np.array([50.0, 3.0]), doc_range_of([2]), np.full(3, 0.05), 0.1


@pytest.mark.parametrize("warm", [False, True])
def test_restart_moves_a_type_off_a_junk_topic(warm):
    C, counts, dr, prior, rest = stuck_document()
    init = np.array([[50.0, 0.0, 3.0]]) if warm else None
    # without restarts, coordinate ascent stays on the junk topic even when run to convergence
    stuck = topic.doc_topic_step(C, counts, dr, prior, rest, init_counts=init, max_iters=10_000, conv_thr=1e-12)
    assert stuck.iters[0] < 10_000 and stuck.doc_counts[0, 2] > 1.0
    res = topic.doc_topic_step(C, counts, dr, prior, rest, init_counts=init, max_iters=10_000, conv_thr=1e-12,
                               n_restarts=1)
    assert res.restarts_accepted[0] == 1
    assert res.doc_counts[0, 2] < 1e-6 and res.doc_counts[0, 0] == pytest.approx(53.0, rel=1e-9)
    assert res.objective[0] > stuck.objective[0] + 0.5
    assert res.resp[1, 0] > 0.999
    np.testing.assert_allclose(res.objective, direct_objective(res, C, counts, dr, prior, rest), rtol=1e-12)
    assert_matches(res, ref.doc_topic_step(C, counts, dr, prior, rest, init_counts=init, max_iters=10_000,
                                           conv_thr=1e-12, n_restarts=1))


def test_a_restart_that_returns_to_the_same_state_is_rejected():
    # both topics are strongly supported: the proposal without topic 1 goes back to the
    # current state, and its objective differs from it by rounding only
    C = np.array([[0.0, -30.0], [-30.0, 0.0]])
    counts, dr, prior = np.array([40.0, 6.0]), doc_range_of([2]), np.array([0.3, 0.2])
    base = topic.doc_topic_step(C, counts, dr, prior, 0.5, conv_thr=1e-12)
    for iters in (5, 50):
        res = topic.doc_topic_step(C, counts, dr, prior, 0.5, conv_thr=1e-12, n_restarts=1, restart_iters=iters)
        assert res.restarts_accepted[0] == 0
        assert np.array_equal(res.resp, base.resp) and res.objective[0] == base.objective[0]
    # the restart machinery saw the same objective (the proposal's state is the current one)
    alone = topic.doc_topic_step(C, counts, dr, prior, 0.5, init_counts=np.array([[40.0, 0.0]]), conv_thr=1e-12)
    np.testing.assert_allclose(alone.objective, base.objective, rtol=1e-14)


def test_restarts_need_two_used_topics():
    # one used topic (or K = 1): nothing is tried, the result is that of no restarts
    C = np.array([[0.0, -9.0, -9.0], [0.0, -8.0, -7.0]])
    counts, dr, prior = np.array([5.0, 2.0]), doc_range_of([2]), np.full(3, 0.1)
    base = topic.doc_topic_step(C, counts, dr, prior, 0.3)
    assert np.sum(base.doc_counts > 0.1) == 1
    res = topic.doc_topic_step(C, counts, dr, prior, 0.3, n_restarts=5)
    assert res.restarts_accepted[0] == 0 and np.array_equal(res.resp, base.resp)
    one = topic.doc_topic_step(C[:, :1].copy(), counts, dr, prior[:1].copy(), 0.3, n_restarts=5)
    assert one.restarts_accepted[0] == 0


def test_restart_candidates_smallest_first():
    # two junk topics (N ≈ 2.3 on topic 1, N ≈ 1.7 on topic 2): one trial goes to the smaller
    C = np.array([[0.0, -10.0, -10.0], [-4.0, 0.0, -10.0], [-4.0, -10.0, 0.0]])
    counts, dr, prior = np.array([50.0, 3.5, 3.0]), doc_range_of([3]), np.full(3, 0.05)
    kw = dict(max_iters=10_000, conv_thr=1e-10)
    base = topic.doc_topic_step(C, counts, dr, prior, 0.1, **kw)
    assert base.doc_counts[0, 1] > base.doc_counts[0, 2] > 1.0
    res = topic.doc_topic_step(C, counts, dr, prior, 0.1, n_restarts=1, **kw)
    assert res.restarts_accepted[0] == 1
    assert res.doc_counts[0, 2] < 1e-6 and res.doc_counts[0, 1] > 1.0
    both = topic.doc_topic_step(C, counts, dr, prior, 0.1, n_restarts=2, **kw)
    assert both.restarts_accepted[0] == 2 and both.doc_counts[0, 1] < 1e-6
    assert both.objective[0] > res.objective[0] > base.objective[0]


def test_restart_candidates_tie_goes_to_the_lower_topic():
    # topics 1 and 2 are identical, so they hold exactly the same count: the one trial
    # removes topic 1, whose tokens go to topic 2
    C = np.array([[0.0, -10.0, -10.0], [-5.0, 0.0, 0.0]])
    counts, dr, prior = np.array([50.0, 6.0]), doc_range_of([2]), np.full(3, 0.05)
    kw = dict(max_iters=10_000, conv_thr=1e-10)
    base = topic.doc_topic_step(C, counts, dr, prior, 0.1, **kw)
    assert base.doc_counts[0, 1] == base.doc_counts[0, 2] > 0.5
    res = topic.doc_topic_step(C, counts, dr, prior, 0.1, n_restarts=1, **kw)
    assert res.restarts_accepted[0] == 1
    assert res.doc_counts[0, 1] < 1e-6 and res.doc_counts[0, 2] > 5.0


# ------------------------------------------------------------------ edge cases
def test_documents_without_rows_and_empty_batches():
    rng = np.random.default_rng(6)
    K = 4
    C, counts, dr, prior, rest = make_batch([0, 3, 0, 0, 2, 0], K, rng)
    res = topic.doc_topic_step(C, counts, dr, prior, rest, n_restarts=2)
    empty = np.diff(dr) == 0
    assert np.all(res.doc_counts[empty] == 0.0) and np.all(res.iters[empty] == 0)
    lg = gammaln(prior).sum() + gammaln(rest) - gammaln(prior.sum() + rest)
    np.testing.assert_allclose(res.objective[empty], lg, rtol=1e-14)
    lda = topic.doc_topic_step(C, counts, dr, prior, 0.0)
    np.testing.assert_allclose(lda.objective[empty], gammaln(prior).sum() - gammaln(prior.sum()), rtol=1e-14)
    # no rows at all, and no documents at all
    none = topic.doc_topic_step(np.empty((0, K)), np.empty(0), np.zeros(3, dtype=np.int64), prior, rest)
    assert none.resp.shape == (0, K) and none.doc_counts.shape == (2, K) and np.all(none.doc_counts == 0.0)
    np.testing.assert_allclose(none.objective, lg, rtol=1e-14)
    nothing = topic.doc_topic_step(np.empty((0, K)), np.empty(0), np.zeros(1, dtype=np.int64), prior, rest)
    assert nothing.doc_counts.shape == (0, K) and nothing.objective.shape == (0,)


def test_single_topic_is_closed_form():
    rng = np.random.default_rng(7)
    C, counts, dr, prior, rest = make_batch([3, 1, 5], 1, rng)
    res = topic.doc_topic_step(C, counts, dr, prior, rest, n_restarts=3)
    assert np.all(res.resp == 1.0)
    tot = np.add.reduceat(counts, dr[:-1])
    np.testing.assert_allclose(res.doc_counts[:, 0], tot, rtol=1e-14)
    want = (np.add.reduceat(counts * C[:, 0], dr[:-1]) + gammaln(tot + prior[0]) + gammaln(rest)
            - gammaln(tot + prior[0] + rest))
    np.testing.assert_allclose(res.objective, want, rtol=1e-13)


def test_warm_start_at_the_fixed_point_converges_at_once():
    rng = np.random.default_rng(8)
    C, counts, dr, prior, rest = make_batch([20, 35, 8], 6, rng)
    first = topic.doc_topic_step(C, counts, dr, prior, rest, max_iters=1000, conv_thr=1e-10)
    again = topic.doc_topic_step(C, counts, dr, prior, rest, init_counts=first.doc_counts, conv_thr=1e-6)
    assert np.all(again.iters == 1)
    np.testing.assert_allclose(again.doc_counts, first.doc_counts, rtol=1e-8, atol=1e-8)


def test_result_is_frozen():
    C, counts, dr, prior, rest = make_batch([3, 2], 2, np.random.default_rng(0))
    res = topic.doc_topic_step(C, counts, dr, prior, rest)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.resp = None


# ------------------------------------------------------- table mode and summaries
@pytest.mark.parametrize("scale", [1.0, 300.0])
@pytest.mark.parametrize("restarts", [0, 4])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("K", [1, 6, 40])
def test_table_mode_equals_dense_mode_bit_for_bit(K, warm, restarts, scale):
    rng = np.random.default_rng([K, warm, restarts, int(scale), 10])
    lengths = mixed_lengths(rng, D=50)
    table, wid, counts, dr, prior, rest = make_table_batch(lengths, K, rng, scale=scale)
    init = rng.gamma(0.5, 4.0, (len(lengths), K)) * (rng.random((len(lengths), K)) < 0.6) if warm else None
    pairs = some_pairs(K, rng) if K > 1 else None
    kw = dict(init_counts=init, n_restarts=restarts, conv_thr=0.01, pairs=pairs)
    dense = topic.doc_topic_step(np.ascontiguousarray(table[wid]), counts, dr, prior, rest, **kw)
    tab = topic.doc_topic_step(table, counts, dr, prior, rest, word_ids=wid, **kw)
    assert_same_bits(tab, dense, ["resp", "doc_counts", "objective", "iters", "restarts_accepted", "entropy",
                                  "pair_entropy"], f"K={K}")
    assert dense.word_topic is None and tab.word_topic.shape == table.shape
    if restarts and K > 2 and scale == 1.0:
        assert tab.restarts_accepted.sum() > 0  # the restarts' code really ran
    if scale == 1.0:  # (at scale 300 the efficient form flushes some r < 1e-270 to 0, the reference not)
        assert_matches(tab, ref.doc_topic_step(table, counts, dr, prior, rest, word_ids=wid, **kw), f"K={K}")


@pytest.mark.parametrize("restarts", [0, 3])
@pytest.mark.parametrize("rest", [True, False])
@pytest.mark.parametrize("K, scale", [(1, 1.0), (2, 1.0), (9, 1.0), (9, 300.0), (50, 3.0)])
def test_summaries_equal_their_formulas(K, scale, rest, restarts):
    # empty documents (mixed_lengths), LDA (rest = False), r that underflow to 0 (scale 300)
    rng = np.random.default_rng([K, int(scale), rest, restarts, 11])
    lengths = mixed_lengths(rng, D=60)
    table, wid, counts, dr, prior, prior_rest = make_table_batch(lengths, K, rng, scale=scale, rest=rest)
    pairs = some_pairs(K, rng) if K > 1 else np.empty((0, 2), dtype=np.int64)
    kw = dict(n_restarts=restarts, conv_thr=0.01)
    res = topic.doc_topic_step(table, counts, dr, prior, prior_rest, word_ids=wid, pairs=pairs, **kw)
    assert_summaries(res, counts, wid, pairs, table.shape[0], f"K={K}")
    assert res.pair_entropy.shape == (pairs.shape[0],)
    if scale > 100:
        assert np.any(res.resp == 0.0)  # the underflow case really occurs
    unused = np.setdiff1d(np.arange(table.shape[0]), wid)
    assert unused.size and np.all(res.word_topic[unused] == 0.0)
    np.testing.assert_allclose(res.word_topic.sum(axis=0), res.doc_counts.sum(axis=0), rtol=1e-12)
    if scale < 100:  # the reference's summaries, of its own r (which agrees with ours to RTOL; at scale 300
        # r ≈ 1 − 1e-18 rounds differently, and entropies near 0 are then not comparable)
        want = ref.doc_topic_step(table, counts, dr, prior, prior_rest, word_ids=wid, pairs=pairs, **kw)
        for f, w in zip(ALL_FIELDS[5:], want[5:]):
            np.testing.assert_allclose(getattr(res, f), w, rtol=RTOL, atol=max(noise(f, counts), 1e-300), err_msg=f)
    # dense mode: the same entropies, no word-topic counts
    dense = topic.doc_topic_step(np.ascontiguousarray(table[wid]), counts, dr, prior, prior_rest, **kw)
    assert dense.word_topic is None and dense.pair_entropy is None
    assert dense.entropy.tobytes() == res.entropy.tobytes()


def test_summaries_of_rows_done_directly():
    # one-row documents whose s_u = Σ_k L_uk p_k ≈ e^-600 < 1e-250: r comes from log-sum-exp,
    # and so must ln r (max_iters = 0 keeps the first weights w̃ ≈ (-603, 0, -23)); alone in
    # its document, a wrong ln r of the tiny r_u0 would show in H_0
    C = np.array([[0.0, -600.0, -590.0], [0.0, -600.0, -580.0]])
    counts = np.array([2.0, 3.0])
    dr = doc_range_of([1, 0, 1])
    prior = np.array([1.0 / 600.0, 1.0, 0.05])
    init = np.array([[0.0, 10.0, 0.0]] * 3)
    pairs = np.array([[0, 1], [0, 2], [2, 1]], dtype=np.int64)
    for kw in (dict(max_iters=0), dict(max_iters=0, n_restarts=2), dict()):
        res = topic.doc_topic_step(C, counts, dr, prior, 0.3, init_counts=init, pairs=pairs, **kw)
        assert_summaries(res, counts, pairs=pairs, what=str(kw))
        assert_matches(res, ref.doc_topic_step(C, counts, dr, prior, 0.3, init_counts=init, **kw), str(kw))
    w = digamma(init[0] + prior)
    assert np.all(logsumexp(C + w - w.max(), axis=1) < np.log(1e-250))  # ln s_u: the rows are done directly
    first = topic.doc_topic_step(C, counts, dr, prior, 0.3, init_counts=init, pairs=pairs, max_iters=0)
    assert 0.01 < first.resp[0, 0] < 0.99 and 0.01 < first.resp[1, 2] < 0.99 and 0.0 < first.resp[0, 2] < 1e-4
    assert np.all(first.entropy > 0.0) and np.all(first.pair_entropy > 0.0)


def test_summaries_where_r_is_one_or_zero():
    # r_uk = 1 and r_uj = 0 exactly (C 800 nats apart): those add exactly 0; K = 1: all r = 1
    C = np.array([[0.0, -800.0, -1.0], [-800.0, 0.0, -800.0], [0.0, -0.5, -900.0]])
    counts, dr = np.array([4.0, 2.0, 1.0]), doc_range_of([3])
    pairs = np.array([[0, 1], [1, 2], [0, 2]], dtype=np.int64)
    res = topic.doc_topic_step(C, counts, dr, np.full(3, 0.4), 0.2, pairs=pairs)
    assert res.resp[1, 1] == 1.0 and res.resp[1, 0] == 0.0 and res.resp[2, 2] == 0.0
    assert_summaries(res, counts, pairs=pairs)
    one = topic.doc_topic_step(C[:, :1].copy(), counts, dr, np.array([0.4]), 0.2)
    assert one.entropy.tolist() == [0.0]


@pytest.mark.parametrize("table_mode", [False, True])
@pytest.mark.parametrize("K, restarts", [(3, 0), (12, 3)])
def test_keep_resp_false_and_threads_change_no_bit(K, restarts, table_mode):
    # ~1300 documents of ~0-60 rows (three blocks of <= 512 documents), then one document
    # longer than a block's rows (alone in its block)
    block_docs, block_rows = topic._dense.BLOCK
    rng = np.random.default_rng([K, restarts, table_mode, 12])
    lengths = list(rng.integers(0, 60, size=int(2.5 * block_docs))) + [block_rows + 7, 0, 5]
    table, wid, counts, dr, prior, rest = make_table_batch(lengths, K, rng, V=400, alpha=0.7)
    assert int(dr[-1]) > 2 * block_rows
    init = rng.gamma(0.5, 5.0, (len(lengths), K))
    if table_mode:
        args, extra = (table, counts, dr, prior, rest), dict(word_ids=wid)
    else:
        args, extra = (np.ascontiguousarray(table[wid]), counts, dr, prior, rest), {}
    pairs = some_pairs(K, rng, M=7)
    for kw in (dict(n_restarts=restarts, pairs=pairs), dict(init_counts=init, n_restarts=restarts)):
        kw.update(extra)
        first = topic.doc_topic_step(*args, n_threads=1, **kw)
        assert_summaries(first, counts, kw.get("word_ids"), kw.get("pairs"), table.shape[0])
        for nt in (1, 2, 3):
            lean = topic.doc_topic_step(*args, n_threads=nt, keep_resp=False, **kw)
            assert lean.resp is None
            assert_same_bits(lean, first, ALL_FIELDS[1:], f"keep_resp=False, n_threads={nt}")
            assert_same_bits(topic.doc_topic_step(*args, n_threads=nt, **kw), first, ALL_FIELDS, f"n_threads={nt}")


# --------------------------------------------------------------- determinism
def _bits(res) -> list[bytes]:
    return [getattr(res, f).tobytes() for f in FIELDS]


@pytest.mark.parametrize("K, restarts", [(3, 0), (30, 4)])
def test_bit_identical_for_any_thread_count(K, restarts):
    rng = np.random.default_rng([K, restarts, 9])
    lengths = list(rng.integers(0, 80, size=300))
    C, counts, dr, prior, rest = make_batch(lengths, K, rng, alpha=0.7)
    init = rng.gamma(0.5, 5.0, (len(lengths), K))
    for kw in (dict(n_restarts=restarts), dict(init_counts=init, n_restarts=restarts)):
        first = _bits(topic.doc_topic_step(C, counts, dr, prior, rest, n_threads=1, **kw))
        assert first == _bits(topic.doc_topic_step(C, counts, dr, prior, rest, n_threads=1, **kw))
        for nt in (2, 3, None):
            assert first == _bits(topic.doc_topic_step(C, counts, dr, prior, rest, n_threads=nt, **kw)), nt


# ---------------------------------------------------------------- validation
def _ok():
    return make_batch([3, 0, 4], 3, np.random.default_rng(0))


def _set(a, index, value):
    a = a.copy()
    a[index] = value
    return a


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda C, c, dr, a, r: (C.astype(np.float32), c, dr, a, r), "log_lik must have dtype float64"),
        (lambda C, c, dr, a, r: (C, c.astype(np.int64), dr, a, r), "counts must have dtype float64"),
        (lambda C, c, dr, a, r: (C, c, dr.astype(np.int32), a, r), "doc_range must have dtype int64"),
        (lambda C, c, dr, a, r: (C, c, dr, a.astype(np.float32), r), "prior must have dtype float64"),
        (lambda C, c, dr, a, r: (np.asfortranarray(C), c, dr, a, r), "log_lik must be C-contiguous"),
        (lambda C, c, dr, a, r: (C, np.repeat(c, 2)[::2], dr, a, r), "counts must be C-contiguous"),
        (lambda C, c, dr, a, r: (C.ravel().copy(), c, dr, a, r), "log_lik must be 2-D"),
        (lambda C, c, dr, a, r: (C.tolist(), c, dr, a, r), "numpy.ndarray"),
        (lambda C, c, dr, a, r: (np.empty((7, 0)), c, dr, np.empty(0), r), "at least one column"),
        (lambda C, c, dr, a, r: (C, c[:5].copy(), dr, a, r), r"counts must have shape \(7,\)"),
        (lambda C, c, dr, a, r: (C, c, dr, a[:2].copy(), r), r"prior must have shape \(3,\)"),
        (lambda C, c, dr, a, r: (C, c, np.empty(0, dtype=np.int64), a, r), "doc_range must hold"),
        (lambda C, c, dr, a, r: (C, c, dr + 1, a, r), r"doc_range\[0\] must be 0"),
        (lambda C, c, dr, a, r: (C, c, np.array([0, 3, 6], dtype=np.int64), a, r),
         r"doc_range\[-1\] must be nnz = 7"),
        (lambda C, c, dr, a, r: (C, c, np.array([0, 5, 3, 7], dtype=np.int64), a, r),
         r"must not decrease: doc_range\[1\] = 5, doc_range\[2\] = 3"),
        (lambda C, c, dr, a, r: (_set(C, (4, 1), np.nan), c, dr, a, r), r"log_lik has a NaN at \(4, 1\)"),
        (lambda C, c, dr, a, r: (_set(C, (2, 0), -np.inf), c, dr, a, r), r"log_lik has -inf at \(2, 0\)"),
        (lambda C, c, dr, a, r: (_set(C, (6, 2), np.inf), c, dr, a, r), r"log_lik has \+inf at \(6, 2\)"),
        (lambda C, c, dr, a, r: (C, _set(c, 3, 0.0), dr, a, r), r"counts\[3\] must be a finite number > 0.*got 0.0"),
        (lambda C, c, dr, a, r: (C, _set(c, 1, -2.0), dr, a, r), r"counts\[1\] must be .*got -2.0"),
        (lambda C, c, dr, a, r: (C, _set(c, 0, np.nan), dr, a, r), r"counts\[0\] must be .*got a NaN"),
        (lambda C, c, dr, a, r: (C, c, dr, _set(a, 2, 0.0), r), r"prior\[2\] must be a finite number > 0"),
        (lambda C, c, dr, a, r: (C, c, dr, _set(a, 1, np.inf), r), r"prior\[1\] must be .*got \+inf"),
        (lambda C, c, dr, a, r: (C, c, dr, a, -0.5), "prior_rest must be a finite number >= 0, got -0.5"),
        (lambda C, c, dr, a, r: (C, c, dr, a, np.nan), "prior_rest must be a finite number >= 0"),
        (lambda C, c, dr, a, r: (C, c, dr, a, "1"), "prior_rest must be a finite number >= 0"),
        (lambda C, c, dr, a, r: (C, c, dr, a, True), "prior_rest must be a finite number >= 0"),
    ],
)
def test_rejects_bad_input(mutate, match):
    args = mutate(*_ok())
    with pytest.raises(KernelInputError, match=match) as info:
        topic.doc_topic_step(*args)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(init_counts=np.zeros((2, 3))), r"init_counts must have shape \(3, 3\)"),
        (dict(init_counts=np.zeros((3, 3), dtype=np.float32)), "init_counts must have dtype float64"),
        (dict(init_counts=np.asfortranarray(np.zeros((3, 3)))), "init_counts must be C-contiguous"),
        (dict(init_counts=_set(np.zeros((3, 3)), (1, 2), -1.0)),
         r"init_counts must be finite and >= 0, got -1.0 at \(1, 2\)"),
        (dict(init_counts=_set(np.zeros((3, 3)), (0, 0), np.nan)), "init_counts must be finite and >= 0, got a NaN"),
        (dict(max_iters=-1), "max_iters must be an int in"),
        (dict(max_iters=2.0), "max_iters must be an int in"),
        (dict(max_iters=2**40), "max_iters must be an int in"),
        (dict(conv_thr=-0.1), "conv_thr must be a finite number >= 0"),
        (dict(conv_thr=np.inf), "conv_thr must be a finite number >= 0"),
        (dict(n_restarts=-1), "n_restarts must be an int in"),
        (dict(n_restarts=True), "n_restarts must be an int in"),
        (dict(restart_iters=0), r"restart_iters must be an int in \[1, "),
        (dict(n_threads=0), "n_threads"),
        (dict(n_threads=1.5), "n_threads"),
    ],
)
def test_rejects_bad_options(kw, match):
    with pytest.raises(KernelInputError, match=match) as info:
        topic.doc_topic_step(*_ok(), **kw)
    assert "\n" not in str(info.value)


def _table_ok():
    table, wid, counts, dr, prior, rest = make_table_batch([3, 0, 4], 3, np.random.default_rng(0), V=10)
    return (table, counts, dr, prior, rest), wid


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(word_ids=lambda w: _set(w, 4, 10)),
         r"word_ids\[4\] = 10 is out of range: log_lik is a table of 10 word types, so 0 <= word_ids < 10"),
        (dict(word_ids=lambda w: _set(w, 2, -1)), r"word_ids\[2\] = -1 is out of range"),
        (dict(word_ids=lambda w: w.astype(np.int32)), "word_ids must have dtype int64, got int32"),
        (dict(word_ids=lambda w: w.astype(np.float64)), "word_ids must have dtype int64"),
        (dict(word_ids=lambda w: w[:6].copy()),
         r"word_ids must have shape \(7,\) to match counts \(7,\), got \(6,\)"),
        (dict(word_ids=lambda w: np.repeat(w, 2)[::2]), "word_ids must be C-contiguous"),
        (dict(word_ids=lambda w: w[:, None].copy()), "word_ids must be 1-D"),
        (dict(table=lambda t: np.ascontiguousarray(t[:, :2])),
         r"prior must have shape \(2,\) to match log_lik \(10, 2\), got \(3,\)"),
        (dict(table=lambda t: _set(t, (8, 1), np.nan)), r"log_lik has a NaN at \(8, 1\)"),
        (dict(counts=lambda c: c[:6].copy()),
         r"word_ids must have shape \(6,\) to match counts \(6,\), got \(7,\)"),
        (dict(pairs=np.array([[0, 1], [2, 3]])), r"pairs\[1, 1\] = 3 is out of range: topics are 0 \.\. 2"),
        (dict(pairs=np.array([[0, 1], [-1, 2]])), r"pairs\[1, 0\] = -1 is out of range"),
        (dict(pairs=np.array([[0, 1], [2, 2]])), r"pairs\[1\] = \(2, 2\) pairs topic 2 with itself"),
        (dict(pairs=np.array([[0, 1, 2]])), r"pairs must have shape \(M, 2\) \(pairs of topics\), got \(1, 3\)"),
        (dict(pairs=np.array([0, 1])), "pairs must be 2-D"),
        (dict(pairs=np.array([[0, 1]], dtype=np.int32)), "pairs must have dtype int64"),
        (dict(pairs=[[0, 1]]), "pairs must be a numpy.ndarray"),
        (dict(keep_resp=0), "keep_resp must be True or False, got 0"),
        (dict(keep_resp=None), "keep_resp must be True or False"),
    ],
)
def test_rejects_bad_table_mode_and_pairs(change, match):
    (table, counts, dr, prior, rest), wid = _table_ok()
    if "table" in change:
        table = change["table"](table)
    if "counts" in change:
        counts = change["counts"](counts)
        dr = doc_range_of([3, 0, 3])
    kw = dict(word_ids=change["word_ids"](wid) if "word_ids" in change else wid)
    kw.update({k: v for k, v in change.items() if k in ("pairs", "keep_resp")})
    with pytest.raises(KernelInputError, match=match) as info:
        topic.doc_topic_step(table, counts, dr, prior, rest, **kw)
    assert "\n" not in str(info.value)


def test_extreme_prior_is_reported():
    # every weight ψ(N⁰ + a) = −inf: no state to start from
    C, counts, dr, prior, rest = _ok()
    with pytest.raises(KernelInputError, match=r"document 0 \(rows 0:3\): the local step is not finite") as info:
        topic.doc_topic_step(C, counts, dr, np.full(3, 1e-320), rest, init_counts=np.zeros((3, 3)))
    assert "\n" not in str(info.value)
