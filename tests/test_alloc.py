"""Mixture allocation models: the DP stick-breaking and finite Dirichlet terms against their definitions."""
import itertools

import numpy as np
import pytest
from scipy import stats as st
from scipy.special import betaln, digamma, gammaln

from bnpvi.alloc import DPMixAlloc, FiniteMixAlloc
from bnpvi.alloc.mixture import MixtureAlloc, counts_after
from bnpvi.errors import BnpviError
from bnpvi.special import c_beta
from bnpvi.stats import ENTROPY, PER_CLUSTER, SuffStats


def mixture_stats(N, H=None):
    N = np.asarray(N, dtype=float)
    return SuffStats({"N": N, "H": np.zeros_like(N) if H is None else np.asarray(H, dtype=float)},
                     {"N": PER_CLUSTER, "H": ENTROPY})


def eq_3_31(gamma, N, eta1, eta0):
    """L_DP-alloc for any q(u) = Π Beta(η1, η0), term by term (Hughes 2016 thesis Eq. 3.31)."""
    total = digamma(eta1 + eta0)
    e_log_u, e_log_1mu = digamma(eta1) - total, digamma(eta0) - total
    return float(np.sum(c_beta(1.0, gamma) - c_beta(eta1, eta0)
                        + (N + 1.0 - eta1) * e_log_u + (counts_after(N) + gamma - eta0) * e_log_1mu))


def test_dp_single_cluster_equals_log_joint():
    # K = 1: L_alloc* = ln γ − c_B(1 + N, γ) = log p(z ≡ 1) = log E[u^N] (Hughes 2016 thesis Eq. 3.44 at K = 1)
    gamma, N = 3.0, 17.0
    value = DPMixAlloc(gamma).log_marginal(np.array([N]))
    assert value == pytest.approx(betaln(1 + N, gamma) - betaln(1, gamma), rel=1e-12)


def test_dp_nested_truncation_and_empty_middle_cluster():
    a = DPMixAlloc(2.0)
    N = np.array([5.0, 3.0, 1.0])
    assert a.log_marginal(np.append(N, 0.0)) == pytest.approx(a.log_marginal(N), abs=1e-12)
    with_gap = np.array([5.0, 0.0, 3.0, 1.0])
    gain = a.log_marginal(N) - a.log_marginal(with_gap)
    assert gain == pytest.approx(np.log(1 + 4.0 / 2.0), rel=1e-10)


def test_dp_descending_order_is_best():
    a = DPMixAlloc(1.5)
    N = np.array([2.0, 9.0, 0.5, 4.0])
    best = max(itertools.permutations(N), key=lambda p: a.log_marginal(np.array(p)))
    np.testing.assert_array_equal(best, np.sort(N)[::-1])


def test_dp_expected_log_pi_matches_monte_carlo():
    a = DPMixAlloc(2.0)
    post = a.posterior(np.array([10.0, 4.0, 1.0]))
    rng = np.random.default_rng(0)
    u = st.beta(post["eta1"], post["eta0"]).rvs(size=(200000, 3), random_state=rng)
    log_pi = np.log(u) + np.concatenate([np.zeros((u.shape[0], 1)), np.cumsum(np.log1p(-u), axis=1)[:, :-1]], axis=1)
    np.testing.assert_allclose(a.expected_log_pi(post), log_pi.mean(axis=0), atol=5e-3)
    np.testing.assert_allclose(a.expected_pi(post), np.exp(log_pi).mean(axis=0), atol=3e-3)


@pytest.mark.parametrize("alloc", [DPMixAlloc(2.0), FiniteMixAlloc(2.0)])
def test_general_term_is_optimum_minus_kl(alloc):
    # For q = q*(N) the KL gap is 0; for another q it is positive.
    N = np.array([6.0, 2.0, 0.5])
    post = alloc.posterior(N)
    assert alloc.kl(post, post) == pytest.approx(0.0, abs=1e-12)
    assert alloc.kl(alloc.posterior(N[::-1].copy()), post) > 0


def test_finite_mix_optimum():
    a = FiniteMixAlloc(3.0)
    N = np.array([4.0, 1.0])
    alpha = 1.5
    expected = (gammaln(2 * alpha) - 2 * gammaln(alpha)) - (gammaln(N.sum() + 2 * alpha) - gammaln(N + alpha).sum())
    assert a.log_marginal(N) == pytest.approx(expected, rel=1e-12)
    theta = a.posterior(N)["theta"]
    np.testing.assert_allclose(a.expected_log_pi(a.posterior(N)), digamma(theta) - digamma(theta.sum()))


def test_counts_after_and_bad_gamma():
    np.testing.assert_array_equal(counts_after(np.array([1.0, 2.0, 3.0])), [5.0, 3.0, 0.0])
    with pytest.raises(BnpviError, match="gamma"):
        DPMixAlloc(-1.0)


def test_dp_elbo_term_equals_eq_3_31_for_any_q():
    """The general term (optimum minus KL) is the thesis' Eq. 3.31 for any Beta parameters, and Eq. 3.44 at the optimum."""
    gamma = 1.7
    alloc = DPMixAlloc(gamma)
    rng = np.random.default_rng(3)
    N = np.array([40.0, 12.5, 3.0, 0.2])
    H = rng.random(4)
    stats = mixture_stats(N, H)
    for _ in range(5):
        q = {"eta1": rng.uniform(0.5, 50, 4), "eta0": rng.uniform(0.5, 80, 4)}
        assert alloc.elbo(stats, q) == pytest.approx(eq_3_31(gamma, N, q["eta1"], q["eta0"]) + H.sum(), rel=1e-12)
    opt = alloc.global_step(stats)
    np.testing.assert_array_equal(opt["eta1"], 1 + N)
    np.testing.assert_array_equal(opt["eta0"], gamma + counts_after(N))
    assert alloc.elbo(stats, opt) == pytest.approx(eq_3_31(gamma, N, opt["eta1"], opt["eta0"]) + H.sum(), rel=1e-12)
    assert alloc.elbo(stats, opt) == alloc.log_marginal(N) + H.sum()  # the KL of q* with itself is exactly 0
    q = {"eta1": opt["eta1"] * 1.1, "eta0": opt["eta0"]}
    assert alloc.elbo(stats, q) < alloc.elbo(stats, opt)


def test_finite_elbo_term_for_any_q():
    gamma = 3.0
    alloc = FiniteMixAlloc(gamma)
    N = np.array([7.0, 2.0, 0.5])
    stats = mixture_stats(N)
    theta = np.array([3.0, 4.0, 1.5])
    prior = np.full(3, gamma / 3)
    e_log_pi = digamma(theta) - digamma(theta.sum())
    c = lambda a: gammaln(a.sum()) - gammaln(a).sum()  # noqa: E731
    expected = c(prior) - c(theta) + np.sum((N + prior - theta) * e_log_pi)
    assert alloc.elbo(stats, {"theta": theta}) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("K", [2, 9, 300])
def test_dp_merge_score_equals_the_change_of_the_whole_term_for_every_pair(K):
    """The DP's O(K²) route (changed terms only, tables in blocks of b) against re-evaluating Eq. 3.44."""
    rng = np.random.default_rng(K)
    N = rng.gamma(0.5, 300.0, size=K)
    N[rng.random(K) < 0.2] = 0.0
    alloc = DPMixAlloc(1.5)
    stats = mixture_stats(N)
    pairs = np.array([(a, b) for a in range(K) for b in range(a + 1, K)])
    got = alloc.merge_score(stats, alloc.global_step(stats), pairs)
    whole = MixtureAlloc.merge_score(alloc, stats, alloc.global_step(stats), pairs)
    np.testing.assert_allclose(got, whole, rtol=1e-9, atol=1e-9 * np.abs(whole).max())


def test_merge_score_is_the_alloc_change_of_each_merge():
    alloc = DPMixAlloc(2.0)
    N = np.array([9.0, 5.0, 3.0, 1.0])
    pairs = np.array([[0, 1], [1, 3], [0, 3], [2, 3]])
    scores = alloc.merge_score(mixture_stats(N), alloc.global_step(mixture_stats(N)), pairs)
    for (a, b), score in zip(pairs, scores):
        merged = np.delete(N, b)
        merged[a] += N[b]
        assert score == pytest.approx(alloc.log_marginal(merged) - alloc.log_marginal(N), rel=1e-12)
