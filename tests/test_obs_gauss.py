"""Gaussian observation families: zero-mean Wishart, Normal-Wishart and diagonal Normal-Gamma.

Also the smoothed-atom divergences used for seeding, and the numerical safeguards (statistics
relative to the prior mean, the SPD ridge, the bound on ν̄).

Every identity is checked against an independent computation: Monte Carlo over q(φ),
the sequential Student-t predictive chain rule, explicit matrix formulas in raw coordinates.
"""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats as st

from bnpvi.data.batch import PointBatch
from bnpvi.errors import BnpviError
from bnpvi.obs import FAMILIES, DataMoments, DiagGauss, Gauss, ZeroMeanGauss, make_obs
from bnpvi.stats import Responsibilities

NAMES = ["gauss", "diag_gauss", "zm_gauss"]
D = 3
LOG_2PI = np.log(2 * np.pi)


def resp_of(R):
    """Dense responsibilities as the families take them."""
    R = np.asarray(R, dtype=np.float64)
    return Responsibilities(np.ascontiguousarray(R), R.shape[1])


# --------------------------------------------------------------------------- helpers
def make_data(seed=0, n=40, offset=4.0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D))
    X = rng.normal(size=(n, D)) @ A.T + offset * np.arange(1, D + 1)
    return X


def moments_of(X):
    return DataMoments(X.shape[0], X.mean(0), np.cov(X.T, bias=True))


def make_family(name, X, **overrides):
    """A family with a non-trivial prior (prior mean away from the data mean, κ̄ not tiny)."""
    cfg = {"name": name, "nu": D + 1.5, "kappa": 0.7, "sF": 0.5, "prior_cov": "cov",
           "mean": [0.5, -1.0, 2.0]}
    cfg.update(overrides)
    return make_obs(cfg, D, moments_of(X))


def soft_resp(n, K, seed=1):
    return np.random.default_rng(seed).dirichlet(np.full(K, 0.7), size=n)


def zero_stats(fam, K):
    return {key: np.zeros((K, *shape)) for key, shape in fam.stat_shapes().items()}


def prior_raw(fam):
    """(m̄, κ̄, ν̄, B̄ as a full matrix) in raw coordinates."""
    p = fam.prior_params()
    B = np.diag(p["b"]) if "b" in p else p["B"]
    return p.get("m", np.zeros(D)), float(p.get("kappa", np.nan)), float(p["nu"]), B


def sample_q(fam, post, k, n_draws, rng):
    """Draws of (m (S, D), Λ (S, D, D)) from q(φ_k); diag: Λ diagonal."""
    nu = post["nu"][k]
    if isinstance(fam, DiagGauss):
        lam = rng.gamma(nu / 2.0, 2.0 / post["b"][k], size=(n_draws, D))
        Lam = lam[:, :, None] * np.eye(D)
        m = post["m"][k] + rng.normal(size=(n_draws, D)) / np.sqrt(post["kappa"][k] * lam)
        return m, Lam
    Lam = st.wishart(df=nu, scale=np.linalg.inv(post["B"][k])).rvs(size=n_draws, random_state=rng)
    if isinstance(fam, ZeroMeanGauss):
        return np.zeros((n_draws, D)), Lam
    chol = np.linalg.cholesky(post["kappa"][k] * Lam)
    z = rng.normal(size=(n_draws, D, 1))
    m = post["m"][k] + np.linalg.solve(np.swapaxes(chol, 1, 2), z)[..., 0]
    return m, Lam


def log_normal_prec(x, m, Lam):
    """log N(x | m, Λ⁻¹) for draws (S, D), (S, D, D); x (D,)."""
    d = x - m
    _, logdet = np.linalg.slogdet(Lam)
    return -0.5 * D * LOG_2PI + 0.5 * logdet - 0.5 * np.einsum("sd,sde,se->s", d, Lam, d)


def log_q_density(fam, post, k, m, Lam):
    """log q(m, Λ) of draws under posterior row k (scipy densities + explicit Normal part)."""
    nu = post["nu"][k]
    if isinstance(fam, DiagGauss):
        lam = np.diagonal(Lam, axis1=1, axis2=2)
        out = st.gamma.logpdf(lam, a=nu / 2.0, scale=2.0 / post["b"][k]).sum(1)
        return out + st.norm.logpdf(m, loc=post["m"][k], scale=1.0 / np.sqrt(post["kappa"][k] * lam)).sum(1)
    out = st.wishart(df=nu, scale=np.linalg.inv(post["B"][k])).logpdf(np.moveaxis(Lam, 0, -1))
    if isinstance(fam, ZeroMeanGauss):
        return out
    kap = post["kappa"][k]
    return out + log_normal_prec(post["m"][k], m, kap * Lam)  # log N(m | m̂, (κ̂Λ)⁻¹)


def exact_log_marginal(fam, X):
    """Sequential Student-t predictive chain rule, raw coordinates, independent of the family code."""
    m, kappa, nu, B = prior_raw(fam)
    total = 0.0
    for x in X:
        if isinstance(fam, DiagGauss):  # 1-D Normal-Gamma per dimension: t_ν(m, b(κ+1)/(κν))
            b = np.diag(B)
            total += st.t.logpdf(x, df=nu, loc=m, scale=np.sqrt(b * (kappa + 1) / (kappa * nu))).sum()
            m_new = (kappa * m + x) / (kappa + 1)
            B = np.diag(b + kappa / (kappa + 1) * (x - m) ** 2)
            m, kappa, nu = m_new, kappa + 1, nu + 1
        elif isinstance(fam, ZeroMeanGauss):
            df = nu - D + 1
            total += st.multivariate_t.logpdf(x, loc=np.zeros(D), shape=B / df, df=df)
            B, nu = B + np.outer(x, x), nu + 1
        else:
            df = nu - D + 1
            total += st.multivariate_t.logpdf(x, loc=m, shape=B * (kappa + 1) / (kappa * df), df=df)
            m_new = (kappa * m + x) / (kappa + 1)
            B = B + kappa / (kappa + 1) * np.outer(x - m, x - m)
            m, kappa, nu = m_new, kappa + 1, nu + 1
    return total


def naive_point_estimate(fam, X, w):
    """Point estimate (mean, covariance) of the posterior of weights w over rows of X, raw formulas."""
    m0, kappa0, nu0, B0 = prior_raw(fam)
    N = w.sum()
    nu = nu0 + N
    if isinstance(fam, ZeroMeanGauss):
        return np.zeros(D), (B0 + (X * w[:, None]).T @ X) / nu
    kappa = kappa0 + N
    m = (kappa0 * m0 + w @ X) / kappa
    B = B0 + (X * w[:, None]).T @ X + kappa0 * np.outer(m0, m0) - kappa * np.outer(m, m)
    if isinstance(fam, DiagGauss):
        B = np.diag(np.diag(B))
    return m, B / nu


def gauss_kl(ma, Sa, mb, Sb):
    Sb_inv = np.linalg.inv(Sb)
    d = mb - ma
    return 0.5 * (np.trace(Sb_inv @ Sa) + d @ Sb_inv @ d - D + np.linalg.slogdet(Sb)[1] - np.linalg.slogdet(Sa)[1])


@pytest.fixture(params=NAMES)
def name(request):
    return request.param


# --------------------------------------------------------------------------- 1. E log lik
def test_expected_log_lik_matches_monte_carlo(name):
    X = make_data()
    fam = make_family(name, X)
    R = soft_resp(len(X), 3)
    post = fam.posterior(R.sum(0), fam.summarize(PointBatch(X), resp_of(R)))
    x_eval = X[:4] + np.array([0.3, -0.2, 0.1])
    E = fam.expected_log_lik(post, PointBatch(x_eval))
    assert E.shape == (4, 3)
    rng = np.random.default_rng(7)
    for k in (0, 2):
        m, Lam = sample_q(fam, post, k, 20000, rng)
        for i, x in enumerate(x_eval):
            vals = log_normal_prec(x, m, Lam)
            se = vals.std() / np.sqrt(len(vals))
            assert abs(E[i, k] - vals.mean()) < 5 * se + 1e-9, (name, k, i, E[i, k], vals.mean(), se)


# --------------------------------------------------------------------------- 2. exact marginal
def test_log_marginal_hard_equals_predictive_chain(name):
    X = make_data(seed=3, n=15)
    fam = make_family(name, X)
    stats = fam.summarize(PointBatch(X), resp_of(np.ones((len(X), 1))))
    got = fam.log_marginal(np.array([float(len(X))]), stats)[0]
    want = exact_log_marginal(fam, X)
    assert got == pytest.approx(want, rel=1e-8)


@pytest.mark.parametrize("name", ["gauss", "diag_gauss"])  # a zero-mean model is not translation invariant
def test_log_marginal_far_from_origin_is_translation_invariant(name):
    """Statistics relative to m̄: shifting data and prior mean by 1e6 changes nothing."""
    X = make_data(seed=4, n=30)
    R = soft_resp(len(X), 2)
    shift = np.array([1e6, -2e6, 3e6])
    fam0 = make_family(name, X, mean=[0.0, 0.0, 0.0])
    fam1 = make_family(name, X + shift, mean=list(shift))
    lm0 = fam0.log_marginal(R.sum(0), fam0.summarize(PointBatch(X), resp_of(R)))
    lm1 = fam1.log_marginal(R.sum(0), fam1.summarize(PointBatch(X + shift), resp_of(R)))
    np.testing.assert_allclose(lm1, lm0, rtol=1e-9)


# --------------------------------------------------------------------------- 3. soft identity and KL
def test_log_marginal_equals_expected_loglik_minus_kl(name):
    X = make_data(seed=5)
    fam = make_family(name, X)
    K = 4
    R = soft_resp(len(X), K, seed=2)
    N, stats = R.sum(0), fam.summarize(PointBatch(X), resp_of(R))
    post = fam.posterior(N, stats)
    prior = fam.posterior(np.zeros(K), zero_stats(fam, K))
    lhs = fam.log_marginal(N, stats)
    rhs = np.sum(R * fam.expected_log_lik(post, PointBatch(X)), axis=0) - fam.kl(post, prior)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9)
    # the generic data term of a non-optimal q is strictly lower (KL > 0)
    other = fam.posterior(N[::-1], {k: v[::-1] for k, v in stats.items()})
    assert np.all(fam.kl(other, post) > 0)
    assert np.all(fam.kl(post, post) == pytest.approx(0.0, abs=1e-10))


def test_kl_matches_monte_carlo(name):
    X = make_data(seed=6)
    fam = make_family(name, X)
    R = soft_resp(len(X), 2, seed=3)
    stats = fam.summarize(PointBatch(X), resp_of(R))
    q = fam.posterior(R.sum(0), stats)
    half = {k: 0.5 * v for k, v in stats.items()}
    p = fam.posterior(0.5 * R.sum(0)[::-1], {k: v[::-1] for k, v in half.items()})
    kl = fam.kl(q, p)
    rng = np.random.default_rng(11)
    for k in range(2):
        m, Lam = sample_q(fam, q, k, 20000, rng)
        vals = log_q_density(fam, q, k, m, Lam) - log_q_density(fam, p, k, m, Lam)
        se = vals.std() / np.sqrt(len(vals))
        assert kl[k] > 0
        assert abs(kl[k] - vals.mean()) < 5 * se + 1e-9, (name, k, kl[k], vals.mean(), se)


# --------------------------------------------------------------------------- 4. empty clusters
def test_empty_clusters(name):
    X = make_data()
    fam = make_family(name, X)
    zs = zero_stats(fam, 3)
    assert np.array_equal(fam.log_marginal(np.zeros(3), zs), np.zeros(3))
    # an empty row among non-empty ones is exactly 0 too; tiny negative memo counts are clipped
    R = np.zeros((len(X), 3))
    R[:, 0] = 1.0
    stats = fam.summarize(PointBatch(X), resp_of(R))
    lm = fam.log_marginal(np.array([len(X), -1e-13, 0.0]), stats)
    assert lm[0] < 0 and lm[1] == 0.0 and lm[2] == 0.0
    post = fam.posterior(np.zeros(3), zs)
    for key, value in fam.prior_params().items():
        np.testing.assert_array_equal(post[key], np.broadcast_to(value, post[key].shape), err_msg=key)


# --------------------------------------------------------------------------- 5. additivity
def test_summarize_is_additive(name):
    X = make_data(n=37)
    fam = make_family(name, X)
    R = soft_resp(len(X), 5)
    whole = fam.summarize(PointBatch(X), resp_of(R))
    a = fam.summarize(PointBatch(X[:20]), resp_of(R[:20]))
    b = fam.summarize(PointBatch(X[20:], start=20), resp_of(R[20:]))
    assert set(whole) == set(fam.stat_shapes())
    for key, shape in fam.stat_shapes().items():
        assert whole[key].shape == (5, *shape)
        np.testing.assert_allclose(a[key] + b[key], whole[key], rtol=1e-12, atol=1e-12)


def test_summarize_matches_definition(name):
    X = make_data(n=12)
    fam = make_family(name, X)
    R = soft_resp(len(X), 3)
    got = fam.summarize(PointBatch(X), resp_of(R))
    m0 = np.zeros(D) if name == "zm_gauss" else fam.prior_params()["m"]
    Y = X - m0
    outer = np.einsum("nk,nd,ne->kde", R, Y, Y)
    np.testing.assert_allclose(got["Sxx"], np.diagonal(outer, axis1=1, axis2=2) if name == "diag_gauss" else outer,
                               rtol=1e-12)
    if "Sx" in got:
        np.testing.assert_allclose(got["Sx"], R.T @ Y, rtol=1e-12)


# --------------------------------------------------------------------------- 6. divergence
def test_divergence_to_own_atom_is_minimal(name):
    X = make_data(n=25)
    fam = make_family(name, X)
    J = 6
    centers = fam.posterior(np.ones(J), fam.summarize(PointBatch(X[:J]), resp_of(np.eye(J))))
    Dv = fam.divergence(PointBatch(X), centers)
    assert Dv.shape == (len(X), J)
    assert np.all(np.isfinite(Dv)) and np.all(Dv >= 0)
    own = np.diag(Dv[:J])
    assert np.all(own < 1e-9), own
    off = Dv[:J][~np.eye(J, dtype=bool)]
    assert np.all(off > 1e-6)


def test_divergence_equals_naive_kl(name):
    X = make_data(n=8)
    fam = make_family(name, X)
    R = soft_resp(len(X), 3, seed=9)
    centers = fam.posterior(R.sum(0), fam.summarize(PointBatch(X), resp_of(R)))
    Dv = fam.divergence(PointBatch(X), centers)
    for n in range(len(X)):
        w = np.zeros(len(X))
        w[n] = 1.0
        ma, Sa = naive_point_estimate(fam, X, w)
        for j in range(3):
            mb, Sb = naive_point_estimate(fam, X, R[:, j])
            assert Dv[n, j] == pytest.approx(gauss_kl(ma, Sa, mb, Sb), rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("dim", [3, 20])
def test_atom_divergences_equal_divergence_to_atom_posteriors(name, dim):
    """The seeding's fast path (rank-one centers for the full-covariance families) equals the
    divergence to the atoms' own one-observation posteriors, the default path of every family."""
    from bnpvi.obs.bregman import atom_posteriors

    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, dim)) @ rng.normal(size=(dim, dim)) + 2.0
    fam = make_obs({"name": name, "nu": dim + 1.5, "kappa": 0.7, "sF": 0.5, "prior_cov": "cov"}, dim,
                   DataMoments(len(X), X.mean(0), np.cov(X.T, bias=True)))
    batch = PointBatch(X)
    idx = np.array([5, 0, 17, 5, 59])
    want = fam.divergence(batch, atom_posteriors(fam, batch, idx))
    got = fam.atom_divergences(batch)(idx)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    assert np.all(got[idx, np.arange(idx.size)] < 1e-8)


@pytest.mark.parametrize("dim, K", [(3, 40), (8, 30), (20, 5)])  # compiled features pass; dense scores (K < F/D)
def test_argmax_clusters_is_argmax_of_expected_log_lik(name, dim, K):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(3000, dim)) @ rng.normal(size=(dim, dim)) + 2.0
    fam = make_obs({"name": name, "nu": dim + 1.5, "kappa": 0.7, "sF": 0.5, "prior_cov": "cov"}, dim,
                   DataMoments(len(X), X.mean(0), np.cov(X.T, bias=True)))
    batch = PointBatch(X)
    post = fam.posterior(np.full(K, 3000 / K), fam.summarize(batch, resp_of(soft_resp(3000, K, seed=2))))
    log_w = np.log(rng.dirichlet(np.ones(K)))
    want = np.argmax(fam.expected_log_lik(post, batch) + log_w, axis=1)
    np.testing.assert_array_equal(fam.argmax_clusters(post, batch, log_w), want)


def test_point_log_lik_is_expected_log_lik_of_centers(name):
    X = make_data(n=10)
    fam = make_family(name, X)
    centers = fam.posterior(np.ones(3), fam.summarize(PointBatch(X[:3]), resp_of(np.eye(3))))
    got = fam.point_log_lik(PointBatch(X), centers)
    assert got.shape == (10, 3) and np.all(np.isfinite(got))


# --------------------------------------------------------------------------- 7. config
def test_bad_config_raises(name):
    X = make_data()
    mom = moments_of(X)
    bad_nu = 0.0 if name == "diag_gauss" else D - 1.0  # diag: each dimension is a 1-D Wishart
    for bad in ({"nu": bad_nu}, {"nu": -5.0}, {"nu": "lots"}, {"prior_cov": "full"}, {"sF": 0.0}):
        with pytest.raises(BnpviError) as err:
            make_obs({"name": name, **bad}, D, mom)
        message = str(err.value)
        assert "\n" not in message and f"obs.{next(iter(bad))}" in message
    if name != "zm_gauss":  # zm_gauss ignores kappa and mean
        for bad in ({"kappa": 0.0}, {"kappa": -1.0}, {"mean": [1.0, 2.0]}):
            with pytest.raises(BnpviError, match=f"obs.{next(iter(bad))}"):
                make_obs({"name": name, **bad}, D, mom)
    with pytest.raises(BnpviError, match="gauss"):
        make_obs({"name": "gaussian"}, D, mom)


def test_defaults_and_prior_scale(name):
    X = make_data(n=200)
    mom = moments_of(X)
    var = np.diag(mom.cov)
    fam = make_obs({"name": name}, D, mom)
    p = fam.prior_params()
    assert p["nu"] == D + 2
    if name == "gauss":  # B̄ = (ν̄ − D − 1)·sF·diag(var), m̄ = data mean
        np.testing.assert_allclose(p["B"], np.diag(var))
        np.testing.assert_allclose(p["m"], mom.mean)
        assert p["kappa"] == 1e-4
    elif name == "diag_gauss":  # per dimension b̄_d = (ν̄ − 2)·sF·var_d
        np.testing.assert_allclose(p["b"], D * var)
    else:  # zero mean: second moment about the origin
        np.testing.assert_allclose(p["B"], np.diag(var + mom.mean**2))
    fam = make_obs({"name": name, "prior_cov": "eye", "sF": 2.0, "nu": D - 0.5 if name != "diag_gauss" else 1.5},
                   D, mom)
    scale = np.mean(var + (mom.mean**2 if name == "zm_gauss" else 0.0))
    p = fam.prior_params()
    got = p["b"] if name == "diag_gauss" else np.diag(p["B"])
    np.testing.assert_allclose(got, p["nu"] * 2.0 * scale)  # ν̄ ≤ d + 1: B̄ = ν̄·sF·C


def test_omegaconf_node_and_registry():
    omegaconf = pytest.importorskip("omegaconf")
    X = make_data()
    cfg = omegaconf.OmegaConf.create({"name": "gauss", "nu": None, "kappa": 0.5, "mean": [0.0, 1.0, 2.0]})
    fam = make_obs(cfg, D, moments_of(X))
    assert isinstance(fam, Gauss) and fam.prior_params()["kappa"] == 0.5
    assert FAMILIES["gauss"] is Gauss and FAMILIES["diag_gauss"] is DiagGauss and FAMILIES["zm_gauss"] is ZeroMeanGauss


def test_posterior_ridge_for_indefinite_residue(caplog):
    """B̂ stays SPD: memo residue that makes B̂ slightly indefinite gets a tiny logged ridge."""
    X = make_data()
    fam = Gauss(nu=D + 2, kappa=1e-4, m=np.zeros(D), B=1e-16 * np.eye(D))
    x = np.array([1.0, 2.0, 3.0])
    stats = {"Sx": np.zeros((2, D)), "Sxx": np.stack([np.outer(x, x) - 1e-14 * np.eye(D), np.eye(D)])}
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(fam.B + stats["Sxx"][0])
    with caplog.at_level("WARNING", logger="bnpvi.obs"):
        post = fam.posterior(np.array([1.0, 1.0]), stats)
    assert "ridge" in caplog.text
    np.testing.assert_allclose(post["B_chol"] @ np.swapaxes(post["B_chol"], 1, 2), post["B"], atol=1e-15)
    np.testing.assert_array_equal(post["B"][1], fam.B + np.eye(D))  # healthy rows untouched
    assert np.all(np.isfinite(fam.log_marginal(np.array([1.0, 1.0]), stats)))
    assert np.all(np.isfinite(fam.expected_log_lik(post, PointBatch(X))))
    with pytest.raises(BnpviError, match="non-finite"):
        fam.posterior(np.array([1.0]), {"Sx": np.zeros((1, D)), "Sxx": np.full((1, D, D), np.nan)})


@pytest.fixture
def small_chunks(monkeypatch):
    """Blocks of the chunked Gaussian products smaller than the test data, so that chunks add up."""
    from bnpvi.obs import _wishart as W
    for name, value in (("_CHUNK_ELEMS", 1000), ("_CHUNK_ELEMS_SMALL", 100), ("_CHUNK_ELEMS_FEATURES", 500)):
        monkeypatch.setattr(W, name, value)


@pytest.mark.parametrize("K", [1, 3, 7, 8, 20])
def test_weighted_outer_sums_equal_their_definition_for_few_and_many_clusters(K, small_chunks):
    """Σ_n r_nk y_n y_nᵀ by per-cluster weighted rows (K < D) and by blocks of the distinct products
    y_nd y_ne (K ≥ D), dense and sparse, against the direct sum."""
    from bnpvi.obs import _wishart as W
    rng = np.random.default_rng(K)
    Y = rng.normal(size=(300, 8))
    R = rng.dirichlet(np.ones(K), size=300)
    expected = np.einsum("nk,nd,ne->kde", R, Y, Y)
    np.testing.assert_allclose(W.weighted_outer_sum(R, Y), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(W.weighted_outer_sum(sp.csr_matrix(R), Y), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("K", [1, 3, 8, 20])
@pytest.mark.parametrize("centred", [False, True])
def test_whitened_sq_norms_equal_their_definition_by_maps_and_by_features(K, centred, small_chunks):
    """‖L_k⁻¹(y_n − μ_k)‖² by whitening maps (few clusters) and by quadratic features (K > (D + 3)/2, one
    product with the upper triangle of B_k⁻¹), against a solve per cluster."""
    from bnpvi.obs import _wishart as W
    rng = np.random.default_rng(K)
    D = 6
    Y = rng.normal(size=(200, D)) + 3.0
    A = rng.normal(size=(K, D, D))
    L = np.linalg.cholesky(A @ np.swapaxes(A, 1, 2) + D * np.eye(D))
    mu = rng.normal(size=(K, D)) + 3.0 if centred else None
    centres = np.zeros((K, D)) if mu is None else mu
    expected = np.stack([np.sum(np.linalg.solve(L[k], (Y - centres[k]).T) ** 2, axis=0) for k in range(K)], axis=1)
    assert W._features_pay(D, K) == (K > 4)
    np.testing.assert_allclose(W.whitened_sq_norms(Y, L, mu), expected, rtol=1e-10)
