import itertools

import numpy as np
import pytest
from scipy.special import digamma
from scipy import stats as st

from bnpvi.alloc import DPMixAlloc, FiniteMixAlloc
from bnpvi.alloc.mixture import counts_after
from bnpvi.errors import BnpviError


def test_dp_single_cluster_equals_log_joint():
    # K = 1: L_alloc* = ln γ − c_B(1 + N, γ) = log p(z ≡ 1) = log E[u^N] (spec 01 §11)
    gamma, N = 3.0, 17.0
    value = DPMixAlloc(gamma).log_marginal(np.array([N]))
    from scipy.special import betaln
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
    from scipy.special import gammaln
    expected = (gammaln(2 * alpha) - 2 * gammaln(alpha)) - (gammaln(N.sum() + 2 * alpha) - gammaln(N + alpha).sum())
    assert a.log_marginal(N) == pytest.approx(expected, rel=1e-12)
    theta = a.posterior(N)["theta"]
    np.testing.assert_allclose(a.expected_log_pi(a.posterior(N)), digamma(theta) - digamma(theta.sum()))


def test_counts_after_and_bad_gamma():
    np.testing.assert_array_equal(counts_after(np.array([1.0, 2.0, 3.0])), [5.0, 3.0, 0.0])
    with pytest.raises(BnpviError, match="gamma"):
        DPMixAlloc(-1.0)
