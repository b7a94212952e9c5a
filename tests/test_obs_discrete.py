"""Discrete observation families: multinomial/Dirichlet (Hughes 2016 thesis §2.2) and Bernoulli/Beta.

Every identity is checked against an independent computation: the sequential Pólya-urn /
Beta-Bernoulli predictive chain rule, Monte Carlo over q(φ) with scipy densities, naive dense
formulas. Bag-of-words batches are built directly from CSR arrays.
"""
import itertools

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import gammaln

from bnpvi.alloc import DPMixAlloc
from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.errors import BnpviError
from bnpvi.learn.work import process_batch
from bnpvi.model import Model
from bnpvi.obs.bregman import kmeanspp_seeds
from bnpvi.obs import FAMILIES, Bern, Mult, make_obs
from bnpvi.stats import Responsibilities

V = 15
D_BERN = 12
NAMES = ["mult", "bern"]


def resp_of(R):
    """Dense responsibilities as the families take them."""
    R = np.asarray(R, dtype=np.float64)
    return Responsibilities(np.ascontiguousarray(R), R.shape[1])


# --------------------------------------------------------------------------- helpers
def word_batch(docs, vocab=V, start=0):
    """A WordCountBatch from a list of {word id: count} dicts (CSR arrays built by hand)."""
    ids, counts, ranges = [], [], [0]
    for doc in docs:
        for w in sorted(doc):
            ids.append(w)
            counts.append(float(doc[w]))
        ranges.append(len(ids))
    return WordCountBatch(np.array(ids, dtype=np.int32), np.array(counts, dtype=np.float64),
                          np.array(ranges, dtype=np.int64), vocab, start)


def make_docs(seed=0, n=30, vocab=V, unused=(V - 1,)):
    """Random documents with 1-8 distinct words (counts 1-4); doc 0 is a single word; ``unused`` ids never appear."""
    rng = np.random.default_rng(seed)
    allowed = np.setdiff1d(np.arange(vocab), unused)
    docs = [{int(allowed[3]): 1}]
    for _ in range(n - 1):
        words = rng.choice(allowed, size=rng.integers(1, 9), replace=False)
        docs.append({int(w): int(rng.integers(1, 5)) for w in words})
    return docs


def make_binary(seed=0, n=30, D=D_BERN):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.9, size=D)
    return (rng.random((n, D)) < p).astype(np.float64)


def family(name, **cfg):
    if name == "mult":
        return make_obs({"name": "mult", "lam": 0.3, **cfg}, V, None)
    return make_obs({"name": "bern", "lam1": 0.4, "lam0": 0.7, **cfg}, D_BERN, None)


def data(name, seed=0, n=30):
    """(batch, dense X) for the family ``name``."""
    if name == "mult":
        batch = word_batch(make_docs(seed, n))
        return batch, batch.csr().toarray()
    X = make_binary(seed, n)
    return PointBatch(X), X


def soft_resp(n, K, seed=1):
    return np.random.default_rng(seed).dirichlet(np.full(K, 0.7), size=n)


def zero_stats(fam, K):
    return {key: np.zeros((K, *shape)) for key, shape in fam.stat_shapes().items()}


def sample_q(name, post, k, n_draws, rng):
    """Draws of μ_k from q: (S, V) Dirichlet rows or (S, D) independent Betas."""
    if name == "mult":
        return rng.dirichlet(post["lam"][k], size=n_draws)
    return rng.beta(post["lam1"][k], post["lam0"][k], size=(n_draws, post["lam1"].shape[1]))


def log_q(name, post, k, mu):
    """log q(μ) of draws (scipy densities)."""
    if name == "mult":
        return st.dirichlet.logpdf(mu.T, post["lam"][k])
    return st.beta.logpdf(mu, post["lam1"][k], post["lam0"][k]).sum(axis=1)


def log_lik(name, x, mu):
    """log p(x | μ) for draws μ (S, ·); mult without the multinomial coefficient."""
    if name == "mult":
        return np.log(mu) @ x
    return np.log(mu) @ x + np.log1p(-mu) @ (1.0 - x)


def polya_urn(X, lam):
    """Σ over tokens of ln p(w | previous tokens) = ln (n_w + λ̄)/(n + Vλ̄), tokens in document order."""
    counts = np.zeros(X.shape[1])
    total = 0.0
    for x in X:
        for w in np.flatnonzero(x):
            for _ in range(int(x[w])):
                total += np.log((counts[w] + lam) / (counts.sum() + X.shape[1] * lam))
                counts[w] += 1
    return total


def beta_bernoulli_chain(X, lam1, lam0):
    """Σ_n Σ_d ln p(x_nd | x_<n,d) with p(1 | ·) = (λ̄₁ + s)/(λ̄₁ + λ̄₀ + n)."""
    ones = np.zeros(X.shape[1])
    total = 0.0
    for n, x in enumerate(X):
        p1 = (lam1 + ones) / (lam1 + lam0 + n)
        total += np.sum(np.where(x == 1, np.log(p1), np.log1p(-p1)))
        ones += x
    return total


@pytest.fixture(params=NAMES)
def name(request):
    return request.param


# --------------------------------------------------------------------------- 1. exact marginal
def test_log_marginal_hard_equals_predictive_chain(name):
    batch, X = data(name, seed=3, n=25)
    fam = family(name)
    labels = np.random.default_rng(0).integers(0, 3, size=len(X))
    labels[:3] = [0, 1, 2]
    R = np.eye(3)[labels]
    lm = fam.log_marginal(R.sum(0), fam.summarize(batch, resp_of(R)))
    for k in range(3):
        Xk = X[labels == k]
        want = polya_urn(Xk, 0.3) if name == "mult" else beta_bernoulli_chain(Xk, 0.4, 0.7)
        assert lm[k] == pytest.approx(want, rel=1e-10)


def test_mult_log_marginal_excludes_exactly_the_multinomial_coefficient():
    """One document: L* + ln(C!/Π x_v!) is scipy's Dirichlet-multinomial pmf of the count vector."""
    fam = family("mult")
    for doc in ({4: 1}, {0: 3, 2: 1, 9: 5}):
        batch = word_batch([doc])
        x = batch.csr().toarray()[0]
        lm = fam.log_marginal(np.ones(1), fam.summarize(batch, resp_of(np.ones((1, 1)))))[0]
        coef = gammaln(x.sum() + 1) - gammaln(x + 1).sum()
        want = st.dirichlet_multinomial.logpmf(x, np.full(V, 0.3), int(x.sum()))
        assert lm + coef == pytest.approx(want, rel=1e-10)


def test_mult_log_marginal_ignores_document_counts_and_empty_documents():
    fam = family("mult")
    docs = make_docs(seed=4, n=10)
    with_empty = word_batch(docs[:5] + [{}] + docs[5:])
    R = np.ones((10, 1))
    R_empty = np.ones((11, 1))
    a = fam.log_marginal(R.sum(0), fam.summarize(word_batch(docs), resp_of(R)))
    b = fam.log_marginal(R_empty.sum(0), fam.summarize(with_empty, resp_of(R_empty)))
    assert a == b
    assert fam.log_marginal(np.array([7.0]), {"S": np.zeros((1, V))})[0] == 0.0


# --------------------------------------------------------------------------- 2. soft identity and KL
def test_log_marginal_equals_expected_loglik_minus_kl(name):
    batch, X = data(name, seed=5, n=40)
    fam = family(name)
    K = 4
    R = soft_resp(len(X), K, seed=2)
    N, stats = R.sum(0), fam.summarize(batch, resp_of(R))
    post = fam.posterior(N, stats)
    prior = fam.posterior(np.zeros(K), zero_stats(fam, K))
    lhs = fam.log_marginal(N, stats)
    rhs = np.sum(R * fam.expected_log_lik(post, batch), axis=0) - fam.kl(post, prior)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9)
    other = fam.posterior(N[::-1], {k: v[::-1] for k, v in stats.items()})
    assert np.all(fam.kl(other, post) > 0)
    assert np.all(fam.kl(post, post) == pytest.approx(0.0, abs=1e-10))
    # the general data term of a non-optimal q is lower by exactly KL(q ‖ q*)
    general = fam.elbo_data(N, stats, post_q=other)
    direct = np.sum(R * fam.expected_log_lik(other, batch)) - np.sum(fam.kl(other, prior))
    assert general == pytest.approx(direct, rel=1e-9)


def test_kl_matches_monte_carlo(name):
    batch, X = data(name, seed=6, n=20)
    fam = family(name, **({"lam": 0.8} if name == "mult" else {"lam1": 0.9, "lam0": 1.2}))
    R = soft_resp(len(X), 2, seed=3)
    stats = fam.summarize(batch, resp_of(R))
    q = fam.posterior(R.sum(0), stats)
    p = fam.posterior(0.5 * R.sum(0)[::-1], {k: 0.5 * v[::-1] for k, v in stats.items()})
    kl = fam.kl(q, p)
    rng = np.random.default_rng(11)
    for k in range(2):
        mu = sample_q(name, q, k, 20000, rng)
        vals = log_q(name, q, k, mu) - log_q(name, p, k, mu)
        se = vals.std() / np.sqrt(len(vals))
        assert kl[k] > 0
        assert abs(kl[k] - vals.mean()) < 5 * se + 1e-9, (name, k, kl[k], vals.mean(), se)


# --------------------------------------------------------------------------- 3. E log lik
def test_expected_log_lik_matches_monte_carlo(name):
    batch, X = data(name, seed=7, n=30)
    fam = family(name)
    R = soft_resp(len(X), 3)
    post = fam.posterior(R.sum(0), fam.summarize(batch, resp_of(R)))
    E = fam.expected_log_lik(post, batch)
    assert E.shape == (len(X), 3)
    rng = np.random.default_rng(7)
    for k in (0, 2):
        mu = sample_q(name, post, k, 20000, rng)
        for n in (0, 1, 5):  # row 0 of the mult corpus is the single-word document
            vals = log_lik(name, X[n], mu)
            se = vals.std() / np.sqrt(len(vals))
            assert abs(E[n, k] - vals.mean()) < 5 * se + 1e-9, (name, k, n, E[n, k], vals.mean(), se)


def test_mult_uses_sparse_products_only():
    """Works on a vocabulary far too large to densify the (N, V) data comfortably."""
    big_V = 200_000
    docs = [{0: 2, 199_999: 1}, {5: 1}, {123_456: 3, 7: 1}]
    batch = word_batch(docs, vocab=big_V)
    fam = Mult(0.1, big_V)
    R = soft_resp(3, 2)
    stats = fam.summarize(batch, resp_of(R))
    assert stats["S"].shape == (2, big_V)
    np.testing.assert_allclose(stats["S"][:, 123_456], 3 * R[2])
    post = fam.posterior(R.sum(0), stats)
    E = fam.expected_log_lik(post, batch)
    np.testing.assert_allclose(E[1], post["E_log_mu"][:, 5])
    assert np.all(np.isfinite(fam.divergence(batch, post)))


# --------------------------------------------------------------------------- 4. additivity, empty clusters
def test_summarize_is_additive(name):
    batch, X = data(name, seed=8, n=37)
    fam = family(name)
    R = soft_resp(len(X), 5)
    whole = fam.summarize(batch, resp_of(R))
    a = fam.summarize(batch.take(np.arange(20)), resp_of(R[:20]))
    b = fam.summarize(batch.take(np.arange(20, 37)), resp_of(R[20:]))
    both = type(batch).concat([batch.take(np.arange(20)), batch.take(np.arange(20, 37))])
    assert set(whole) == set(fam.stat_shapes())
    for key, shape in fam.stat_shapes().items():
        assert whole[key].shape == (5, *shape)
        np.testing.assert_allclose(a[key] + b[key], whole[key], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fam.summarize(both, resp_of(R))[key], whole[key], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(whole[key], R.T @ X, rtol=1e-12)  # the definition, densely


def test_unused_word_keeps_its_prior():
    batch, X = data("mult")
    assert X[:, V - 1].sum() == 0
    fam = family("mult")
    R = soft_resp(len(X), 3)
    post = fam.posterior(R.sum(0), fam.summarize(batch, resp_of(R)))
    np.testing.assert_array_equal(post["lam"][:, V - 1], 0.3)


def test_empty_clusters(name):
    batch, X = data(name)
    fam = family(name)
    zs = zero_stats(fam, 3)
    assert np.array_equal(fam.log_marginal(np.zeros(3), zs), np.zeros(3))
    R = np.zeros((len(X), 3))
    R[:, 0] = 1.0
    stats = fam.summarize(batch, resp_of(R))
    stats["S"][1] = -1e-13  # memoized residue: clipped
    lm = fam.log_marginal(np.array([len(X), -1e-13, 0.0]), stats)
    assert lm[0] < 0 and lm[1] == 0.0 and lm[2] == 0.0
    post = fam.posterior(np.array([len(X), -1e-13, 0.0]), stats)
    prior = fam.posterior(np.zeros(3), zs)
    for key, value in fam.prior_params().items():
        np.testing.assert_array_equal(prior[key], np.broadcast_to(value, prior[key].shape), err_msg=key)
        np.testing.assert_array_equal(post[key][1:], prior[key][1:], err_msg=key)
    assert np.all(fam.kl(prior, prior) == 0.0)


def test_bern_cluster_of_all_zeros_is_not_empty():
    fam = family("bern")
    lm = fam.log_marginal(np.array([3.0]), {"S": np.zeros((1, D_BERN))})
    assert lm[0] == pytest.approx(beta_bernoulli_chain(np.zeros((3, D_BERN)), 0.4, 0.7), rel=1e-12)
    assert lm[0] < 0


# --------------------------------------------------------------------------- 5. divergence
def naive_divergence(name, X, lam_centers, fam):
    """Dense C_n·KL(p̃_n ‖ μ_j) (mult) or Σ_d KL(Bern(p̃_nd) ‖ Bern(μ_jd)) (bern)."""
    out = np.zeros((len(X), len(lam_centers[0])))
    for n, x in enumerate(X):
        for j in range(out.shape[1]):
            if name == "mult":
                pt = (x + fam.lam) / (x.sum() + V * fam.lam)
                mu = lam_centers[0][j] / lam_centers[0][j].sum()
                out[n, j] = x.sum() * np.sum(pt * np.log(pt / mu))
            else:
                pt = (x + fam.lam1) / (1 + fam.lam1 + fam.lam0)
                mu = lam_centers[0][j] / (lam_centers[0][j] + lam_centers[1][j])
                out[n, j] = np.sum(pt * np.log(pt / mu) + (1 - pt) * np.log((1 - pt) / (1 - mu)))
    return out


def test_divergence_to_own_atom_is_minimal(name):
    batch, X = data(name, seed=9, n=25)
    fam = family(name)
    J = 6
    assert len({tuple(x) for x in X[:J]}) == J
    centers = fam.posterior(np.ones(J), fam.summarize(batch.take(np.arange(J)), resp_of(np.eye(J))))
    Dv = fam.divergence(batch, centers)
    assert Dv.shape == (len(X), J)
    assert np.all(np.isfinite(Dv)) and np.all(Dv >= 0)
    own = np.diag(Dv[:J])
    assert np.all(own < 1e-9), own
    off = Dv[:J][~np.eye(J, dtype=bool)]
    assert np.all(off > 1e-6)
    np.testing.assert_array_equal(np.argmin(Dv[:J], axis=1), np.arange(J))


def test_divergence_equals_naive_dense(name):
    batch, X = data(name, seed=10, n=12)
    fam = family(name)
    R = soft_resp(len(X), 3, seed=9)
    centers = fam.posterior(R.sum(0), fam.summarize(batch, resp_of(R)))
    Dv = fam.divergence(batch, centers)
    lam_centers = (centers["lam"],) if name == "mult" else (centers["lam1"], centers["lam0"])
    np.testing.assert_allclose(Dv, naive_divergence(name, X, lam_centers, fam), rtol=1e-9, atol=1e-12)
    assert np.all(Dv > 0)


def test_mult_divergence_handles_unsorted_duplicate_ids_and_empty_docs():
    fam = family("mult")
    batch = WordCountBatch(np.array([3, 1, 3, 2], dtype=np.int32), np.array([1.0, 2.0, 2.0, 1.0]),
                           np.array([0, 3, 3, 4], dtype=np.int64), V)
    X = np.zeros((3, V))
    X[0, 3], X[0, 1], X[2, 2] = 3.0, 2.0, 1.0
    R = soft_resp(6, 2)
    centers = fam.posterior(R.sum(0), fam.summarize(word_batch(make_docs(n=6)), resp_of(R)))
    Dv = fam.divergence(batch, centers)
    np.testing.assert_allclose(Dv, naive_divergence("mult", X, (centers["lam"],), fam), rtol=1e-9, atol=1e-12)
    assert np.all(Dv[1] == 0.0)  # an empty document is at distance 0 from everything
    np.testing.assert_array_equal(batch.word_ids, [3, 1, 3, 2])  # the batch's arrays are not reordered


# --------------------------------------------------------------------------- 6. bad input, config
@pytest.mark.parametrize("bad", [0.5, 2.0, -1.0, np.inf])
def test_bern_rejects_non_binary_data(bad):
    fam = family("bern")
    X = make_binary(n=10)
    X[3, 1] = np.nan  # a missing entry before the bad one is not what is named
    X[7, 4] = bad
    R = soft_resp(10, 2)
    post = fam.posterior(np.ones(2), zero_stats(fam, 2))
    for call in (lambda b: fam.summarize(b, resp_of(R)), lambda b: fam.expected_log_lik(post, b),
                 lambda b: fam.divergence(b, post)):
        with pytest.raises(BnpviError, match="row 107") as err:
            call(PointBatch(X, start=100))
        assert "\n" not in str(err.value)


def test_bad_data_shapes_and_counts():
    fam = family("mult")
    with pytest.raises(BnpviError, match="V=15"):
        fam.summarize(word_batch([{0: 1}], vocab=V + 1), resp_of(np.ones((1, 1))))
    bad = WordCountBatch(np.array([0, 2], dtype=np.int32), np.array([1.0, -2.0]),
                         np.array([0, 1, 2], dtype=np.int64), V)
    with pytest.raises(BnpviError, match="document 1"):
        fam.expected_log_lik(fam.posterior(np.ones(1), zero_stats(fam, 1)), bad)
    out_of_range = WordCountBatch(np.array([V], dtype=np.int32), np.array([1.0]), np.array([0, 1], dtype=np.int64), V)
    with pytest.raises(BnpviError, match="word ids"):
        fam.summarize(out_of_range, resp_of(np.ones((1, 1))))
    with pytest.raises(BnpviError, match="D=12"):
        family("bern").summarize(PointBatch(np.zeros((2, 3))), resp_of(np.ones((2, 1))))


def test_bad_config_raises():
    for name, key in (("mult", "lam"), ("bern", "lam1"), ("bern", "lam0")):
        for value in (0.0, -1.0, "lots", float("inf")):
            with pytest.raises(BnpviError, match=f"obs.{key}") as err:
                make_obs({"name": name, key: value}, 5, None)
            assert "\n" not in str(err.value)
    with pytest.raises(BnpviError, match="obs.lam"):
        Mult(0.0, 5)
    with pytest.raises(BnpviError, match="obs.lam0"):
        Bern(0.1, -0.3, 5)


def test_defaults_registry_and_yaml(compose_cfg):
    assert FAMILIES["mult"] is Mult and FAMILIES["bern"] is Bern
    mult = make_obs({"name": "mult"}, 7, None)
    bern = make_obs({"name": "bern", "lam1": None}, 4, None)
    assert mult.prior_params() == {"lam": 0.1} and mult.stat_shapes() == {"S": (7,)}
    assert bern.prior_params() == {"lam1": 0.1, "lam0": 0.3} and bern.stat_shapes() == {"S": (4,)}
    from hydra.utils import instantiate
    for name, cls, expected in (("mult", Mult, {"lam": 0.1}), ("bern", Bern, {"lam1": 0.1, "lam0": 0.3})):
        fam = instantiate(compose_cfg(f"obs={name}").obs, D=5, moments=None)  # the shipped YAML defaults
        assert type(fam) is cls and fam.prior_params() == expected


# --------------------------------------------------------------------------- 7. end to end
def topic_corpus(rng, n_per=40, vocab=30, topics=3):
    """Documents from 3 topics, each putting 90% of its mass on its own block of 10 words."""
    docs, labels = [], []
    for t in range(topics):
        p = np.full(vocab, 0.1 / (vocab - 10))
        p[10 * t:10 * t + 10] = 0.09
        for _ in range(n_per):
            x = rng.multinomial(rng.integers(5, 25), p)
            docs.append({int(w): int(x[w]) for w in np.flatnonzero(x)})
            labels.append(t)
    return word_batch(docs, vocab=vocab), np.array(labels)


def pattern_data(rng, n_per=40, D=24, topics=3):
    X, labels = [], []
    for t in range(topics):
        p = np.full(D, 0.05)
        p[8 * t:8 * t + 8] = 0.9
        X.append((rng.random((n_per, D)) < p).astype(np.float64))
        labels += [t] * n_per
    return PointBatch(np.concatenate(X)), np.array(labels)


def best_accuracy(labels, pred, K):
    return max(np.mean(np.array(perm)[pred] == labels) for perm in itertools.permutations(range(K)))


@pytest.mark.parametrize("name", NAMES)
def test_full_vb_monotone_and_separates_topics(name):
    rng = np.random.default_rng(42)
    if name == "mult":
        batch, labels = topic_corpus(rng)
        obs = Mult(0.1, 30)
    else:
        batch, labels = pattern_data(rng)
        obs = Bern(0.1, 0.3, 24)
    K = 3
    seeds = kmeanspp_seeds(obs, batch, K, rng)
    model = Model(DPMixAlloc(1.0), obs)
    globals_ = model.global_step(model.hard_stats(batch.take(seeds), np.arange(K), K))
    trace = []
    for _ in range(10):
        stats = process_batch(model, globals_, batch).stats
        after_local = model.elbo(stats, globals_)
        if trace:
            assert after_local >= trace[-1] - 1e-9 * abs(trace[-1])
        globals_ = model.global_step(stats)
        trace.append(model.elbo(stats, globals_))
        assert trace[-1] >= after_local - 1e-9 * abs(after_local)
    assert np.all(np.isfinite(trace))
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    pred = model.decode(batch, globals_)
    assert best_accuracy(labels, pred, K) > 0.9
