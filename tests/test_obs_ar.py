"""The auto-regressive Gaussian family (ar_gauss) and the lagged sequence store it reads.

Every identity is checked against an independent computation in raw coordinates: the sequential
multivariate-t predictive chain rule, Monte Carlo over q(A, Λ), explicit matrix-normal densities,
and the textbook (non-relative) posterior update.
"""
import logging

import numpy as np
import pytest
import scipy.stats as st
from hydra.utils import instantiate

from bnpvi.alloc import FiniteHMMAlloc
from bnpvi.data.batch import PointBatch, SeqBatch
from bnpvi.data.store import BatchStore, write_points, write_sequences
from bnpvi.data.toy import make_toy_ar_sequences, sample_ar_hmm, toy_ar_parameters
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.metrics import hamming_distance
from bnpvi.model import Model
from bnpvi.obs import FAMILIES, ARGauss, DataMoments, make_obs
from bnpvi.stats import ClusterIds, Responsibilities

D = 3
LOG_2PI = np.log(2 * np.pi)


def resp_of(R):
    R = np.asarray(R, dtype=np.float64)
    return Responsibilities(np.ascontiguousarray(R), R.shape[1])


def random_spd(rng, scale=1.0):
    G = rng.normal(size=(D, D))
    return scale * (G @ G.T / D + 0.5 * np.eye(D))


def make_family(seed=0):
    """A family with a non-trivial prior: M̄ neither I nor 0, full B̄ and V̄, ν̄ not an integer."""
    rng = np.random.default_rng(seed)
    return ARGauss(nu=D + 0.5, B=random_spd(rng), M=0.5 * np.eye(D) + 0.2 * rng.normal(size=(D, D)),
                   V=random_spd(rng, 2.0))


def make_batch(seed=0, lengths=(7, 5, 9)):
    """Sequences from a random stable 3-D AR-HMM with two states, with Xprev; returns (batch, labels)."""
    rng = np.random.default_rng(seed)
    A = np.stack([0.8 * np.linalg.qr(rng.normal(size=(D, D)))[0], np.diag([0.5, -0.6, 0.3])])
    covs = np.stack([random_spd(rng, 0.3), random_spd(rng, 0.5)])
    parts = [sample_ar_hmm(1, n, [0.5, 0.5], [[0.8, 0.2], [0.3, 0.7]], A, covs, rng) for n in lengths]
    X, Xprev = np.concatenate([p[0] for p in parts]), np.concatenate([p[3] for p in parts])
    seq_range = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    return SeqBatch(X + 1.0, seq_range, Xprev + 1.0), np.concatenate([p[2] for p in parts])


def soft_resp(n, K, seed=1):
    return np.random.default_rng(seed).dirichlet(np.full(K, 0.7), size=n)


def zero_stats(fam, K):
    return {key: np.zeros((K, *shape)) for key, shape in fam.stat_shapes().items()}


def stats_of(fam, batch, R):
    return R.sum(0), fam.summarize(batch, resp_of(R))


def sequential_log_marginal(fam, X, P):
    """log p(x_1..x_T | p_1..p_T) by the chain rule of multivariate-t predictives, textbook raw updates.

    x | p ~ t_{ν−D+1}(M p, B (1 + pᵀV⁻¹p)/(ν − D + 1)); then V ← V + ppᵀ, M ← (MV + xpᵀ)V⁻¹,
    B ← B + xxᵀ + M_old V_old M_oldᵀ − M V Mᵀ, ν ← ν + 1.
    """
    prior = fam.prior_params()
    nu, B, M, V = float(prior["nu"]), prior["B"], prior["M"], prior["V"]
    total = 0.0
    for x, p in zip(X, P):
        df = nu - D + 1
        shape = B * (1.0 + p @ np.linalg.solve(V, p)) / df
        total += st.multivariate_t.logpdf(x, loc=M @ p, shape=shape, df=df)
        V_new = V + np.outer(p, p)
        M_new = (M @ V + np.outer(x, p)) @ np.linalg.inv(V_new)
        B = B + np.outer(x, x) + M @ V @ M.T - M_new @ V_new @ M_new.T
        M, V, nu = M_new, V_new, nu + 1
    return total


def raw_posterior(fam, X, P, w):
    """(ν, B, M, V) of the posterior for weights w over the steps, textbook raw formulas."""
    prior = fam.prior_params()
    nu0, B0, M0, V0 = float(prior["nu"]), prior["B"], prior["M"], prior["V"]
    V = V0 + (P * w[:, None]).T @ P
    M = (M0 @ V0 + (X * w[:, None]).T @ P) @ np.linalg.inv(V)
    B = B0 + M0 @ V0 @ M0.T + (X * w[:, None]).T @ X - M @ V @ M.T
    return nu0 + w.sum(), B, M, V


def sample_q(post, k, n_draws, rng):
    """Draws (A (S, D, D), Λ (S, D, D)) from q_k: Λ ~ W(ν, B⁻¹ scale), A = M + C Z Gᵀ (CCᵀ = Λ⁻¹, GGᵀ = V⁻¹)."""
    Lam = st.wishart(df=post["nu"][k], scale=np.linalg.inv(post["B"][k])).rvs(size=n_draws, random_state=rng)
    C = np.linalg.cholesky(np.linalg.inv(Lam))
    G = np.linalg.cholesky(np.linalg.inv(post["V"][k]))
    A = post["M"][k] + C @ rng.normal(size=(n_draws, D, D)) @ G.T
    return A, Lam


def log_mn_wishart(post, k, A, Lam):
    """log q_k(A, Λ): scipy's Wishart density + the matrix-normal density written out."""
    nu, B, M, V = post["nu"][k], post["B"][k], post["M"][k], post["V"][k]
    out = st.wishart(df=nu, scale=np.linalg.inv(B)).logpdf(np.moveaxis(Lam, 0, -1))
    R = A - M
    quad = np.einsum("sij,sjk,kl,sil->s", Lam, R, V, R)
    return (out - 0.5 * D * D * LOG_2PI + 0.5 * D * np.linalg.slogdet(Lam)[1] + 0.5 * D * np.linalg.slogdet(V)[1]
            - 0.5 * quad)


# --------------------------------------------------------------------------- summaries
def test_summaries_match_definition_and_add_over_batches(tmp_path):
    X, seq_range, labels, _ = make_toy_ar_sequences(n_seqs=9, length=40, seed=1)
    path = write_sequences(tmp_path / "ar.h5", X, seq_range, labels=labels, batches_fixed=False)
    fam = make_obs({"name": "ar_gauss", "mean_matrix": "zero"}, 2, None)
    R = soft_resp(9 * 39, 3)
    with BatchStore.open(path, n_batches=4) as plain:
        split = plain.lagged()
    with BatchStore.open(path, n_batches=1) as plain:
        whole = plain.lagged()
    batches = [split.read_batch(b) for b in range(split.n_batches)]
    assert sum(b.n_atoms for b in batches) == whole.n_atoms == R.shape[0]
    full = fam.summarize(whole.read_batch(0), resp_of(R))
    parts = [fam.summarize(b, resp_of(R[b.start:b.start + b.n_atoms])) for b in batches]
    for key in fam.stat_shapes():
        np.testing.assert_allclose(sum(p[key] for p in parts), full[key], rtol=1e-12, atol=1e-12)
    batch = whole.read_batch(0)  # M̄ = 0: the statistics are the raw ones
    np.testing.assert_allclose(full["Sxx"], np.einsum("nk,nd,ne->kde", R, batch.X, batch.X), rtol=1e-12)
    np.testing.assert_allclose(full["Spx"], np.einsum("nk,nd,ne->kde", R, batch.Xprev, batch.X), rtol=1e-12)
    np.testing.assert_allclose(full["Spp"], np.einsum("nk,nd,ne->kde", R, batch.Xprev, batch.Xprev), rtol=1e-12)
    split.close()
    whole.close()


def test_statistics_are_relative_to_the_prior_regression():
    batch, _ = make_batch()
    fam = make_family()
    R = soft_resp(batch.n_atoms, 2)
    got = fam.summarize(batch, resp_of(R))
    Y = batch.X - batch.Xprev @ fam.M.T
    np.testing.assert_allclose(got["Sxx"], np.einsum("nk,nd,ne->kde", R, Y, Y), rtol=1e-12)
    np.testing.assert_allclose(got["Spx"], np.einsum("nk,nd,ne->kde", R, batch.Xprev, Y), rtol=1e-12)
    post = fam.posterior(R.sum(0), got)
    for k in range(2):  # the relative update is the textbook one
        nu, B, M, V = raw_posterior(fam, batch.X, batch.Xprev, R[:, k])
        assert post["nu"][k] == pytest.approx(nu)
        np.testing.assert_allclose(post["M"][k], M, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(post["V"][k], V, rtol=1e-12)
        np.testing.assert_allclose(post["B"][k], B, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------- log marginal and ELBO
def test_log_marginal_hard_equals_predictive_chain():
    batch, _ = make_batch(seed=2, lengths=(4, 3))
    fam = make_family(seed=3)
    N, stats = stats_of(fam, batch, np.ones((batch.n_atoms, 1)))
    assert fam.log_marginal(N, stats)[0] == pytest.approx(sequential_log_marginal(fam, batch.X, batch.Xprev),
                                                          rel=1e-9)


def test_closed_form_elbo_equals_general_form_and_expected_log_lik_minus_kl():
    batch, _ = make_batch(seed=4)
    fam = make_family(seed=5)
    K = 3
    R = soft_resp(batch.n_atoms, K, seed=2)
    N, stats = stats_of(fam, batch, R)
    post = fam.posterior(N, stats)
    prior = fam.posterior(np.zeros(K), zero_stats(fam, K))
    closed = fam.log_marginal(N, stats)
    assert fam.elbo_data(N, stats) == pytest.approx(fam.elbo_data(N, stats, post_q=post), rel=1e-12)
    general = np.sum(R * fam.expected_log_lik(post, batch), axis=0) - fam.kl(post, prior)
    np.testing.assert_allclose(closed, general, rtol=1e-9)
    other = fam.posterior(N[::-1], {key: value[::-1] for key, value in stats.items()})
    assert fam.elbo_data(N, stats, post_q=other) < fam.elbo_data(N, stats)


def test_expected_log_lik_matches_monte_carlo():
    batch, _ = make_batch(seed=6)
    fam = make_family(seed=7)
    R = soft_resp(batch.n_atoms, 2, seed=3)
    post = fam.posterior(*stats_of(fam, batch, R))
    steps = [0, 5, 11]
    E = fam.expected_log_lik(post, batch)
    rng = np.random.default_rng(8)
    for k in range(2):
        A, Lam = sample_q(post, k, 100_000, rng)
        logdet = np.linalg.slogdet(Lam)[1]
        for t in steps:
            r = batch.X[t] - A @ batch.Xprev[t]
            vals = -0.5 * D * LOG_2PI + 0.5 * logdet - 0.5 * np.einsum("sd,sde,se->s", r, Lam, r)
            se = vals.std() / np.sqrt(vals.size)
            assert abs(E[t, k] - vals.mean()) < 5 * se, (k, t, E[t, k], vals.mean(), se)


def test_empty_clusters_are_exactly_zero_and_the_prior():
    batch, _ = make_batch()
    fam = make_family()
    R = np.zeros((batch.n_atoms, 3))
    R[:, 0] = 1.0
    N, stats = stats_of(fam, batch, R)
    lm = fam.log_marginal(np.array([N[0], -1e-13, 0.0]), stats)
    assert lm[0] < 0 and lm[1] == 0.0 and lm[2] == 0.0
    post = fam.posterior(np.zeros(3), zero_stats(fam, 3))
    for key, value in fam.prior_params().items():
        np.testing.assert_array_equal(post[key], np.broadcast_to(value, post[key].shape), err_msg=key)


# --------------------------------------------------------------------------- merges
def test_merge_of_summaries_is_the_pooled_posterior_and_gain_is_exact():
    batch, labels = make_batch(seed=9, lengths=(6, 5))
    fam = make_family(seed=10)
    R = np.eye(2)[labels]
    N, stats = stats_of(fam, batch, R)
    merged = fam.log_marginal(N.sum(keepdims=True), {key: value.sum(0, keepdims=True) for key, value in stats.items()})
    pooled = fam.log_marginal(*stats_of(fam, batch, np.ones((batch.n_atoms, 1))))
    assert merged[0] == pytest.approx(pooled[0], rel=1e-12)
    brute = [sequential_log_marginal(fam, batch.X[rows], batch.Xprev[rows]) for rows in (labels == 0, labels == 1)]
    whole = sequential_log_marginal(fam, batch.X, batch.Xprev)
    gain = merged[0] - fam.log_marginal(N, stats).sum()
    assert gain == pytest.approx(whole - sum(brute), rel=1e-8, abs=1e-8)


# --------------------------------------------------------------------------- KL and divergence
def test_kl_is_zero_on_itself_positive_otherwise_and_matches_monte_carlo():
    batch, _ = make_batch(seed=11)
    fam = make_family(seed=12)
    R = soft_resp(batch.n_atoms, 4, seed=5)
    N, stats = stats_of(fam, batch, R)
    q = fam.posterior(N, stats)
    np.testing.assert_allclose(fam.kl(q, q), 0.0, atol=1e-10)
    rng = np.random.default_rng(13)
    for _ in range(5):
        perm = rng.permutation(4)
        scale = rng.uniform(0.2, 2.0)
        p = fam.posterior(scale * N[perm], {key: scale * value[perm] for key, value in stats.items()})
        assert np.all(fam.kl(q, p) > 0)
    p = fam.posterior(0.5 * N[::-1], {key: 0.5 * value[::-1] for key, value in stats.items()})
    kl = fam.kl(q, p)
    for k in (0, 3):
        A, Lam = sample_q(q, k, 20_000, rng)
        vals = log_mn_wishart(q, k, A, Lam) - log_mn_wishart(p, k, A, Lam)
        se = vals.std() / np.sqrt(vals.size)
        assert abs(kl[k] - vals.mean()) < 5 * se + 1e-9, (k, kl[k], vals.mean(), se)


def test_matrix_normal_density_helper_is_scipys():
    batch, _ = make_batch()
    fam = make_family()
    post = fam.posterior(*stats_of(fam, batch, soft_resp(batch.n_atoms, 1)))
    A, Lam = sample_q(post, 0, 3, np.random.default_rng(0))
    wishart = st.wishart(df=post["nu"][0], scale=np.linalg.inv(post["B"][0])).logpdf(np.moveaxis(Lam, 0, -1))
    mn = [st.matrix_normal(post["M"][0], np.linalg.inv(L), np.linalg.inv(post["V"][0])).logpdf(a)
          for a, L in zip(A, Lam)]
    np.testing.assert_allclose(log_mn_wishart(post, 0, A, Lam), wishart + np.array(mn), rtol=1e-10)


def test_divergence_is_nonnegative_zero_for_own_center_and_the_predictive_kl():
    batch, _ = make_batch(seed=14)
    fam = make_family(seed=15)
    J = 5
    own = batch.take(np.arange(J))
    centers = fam.posterior(np.ones(J), fam.summarize(own, resp_of(np.eye(J))))
    Dv = fam.divergence(batch, centers)
    assert Dv.shape == (batch.n_atoms, J) and np.all(np.isfinite(Dv)) and np.all(Dv >= 0)
    assert np.all(np.diag(Dv[:J]) < 1e-9)
    assert np.all(Dv[:J][~np.eye(J, dtype=bool)] > 1e-6)
    R = soft_resp(batch.n_atoms, 2, seed=6)
    centers = fam.posterior(*stats_of(fam, batch, R))
    Dv = fam.divergence(batch, centers)
    for t in (0, 4, 13):
        w = np.zeros(batch.n_atoms)
        w[t] = 1.0
        x, p = batch.X, batch.Xprev[t]
        nu_a, B_a, M_a, _ = raw_posterior(fam, x, batch.Xprev, w)
        for j in range(2):
            nu_j, B_j, M_j, _ = raw_posterior(fam, x, batch.Xprev, R[:, j])
            Sa, Sj, d = B_a / nu_a, B_j / nu_j, (M_a - M_j) @ p
            want = 0.5 * (np.trace(np.linalg.solve(Sj, Sa)) + d @ np.linalg.solve(Sj, d) - D
                          + np.linalg.slogdet(Sj)[1] - np.linalg.slogdet(Sa)[1])
            assert Dv[t, j] == pytest.approx(want, rel=1e-7, abs=1e-10)


# --------------------------------------------------------------------------- lagged store
LENGTHS = (5, 1, 12, 7, 3, 1, 4)


def write_steps(path, Xprev=False, n_batches=3):
    """Sequences whose first column is the global step index; labels = step index too."""
    T = sum(LENGTHS)
    X = np.column_stack([np.arange(T, dtype=float), np.random.default_rng(0).normal(size=T)])
    seq_range = np.r_[0, np.cumsum(LENGTHS)].astype(np.int64)
    prev = X - 0.5 if Xprev else None
    return write_sequences(path, X, seq_range, Xprev=prev, n_batches=n_batches, labels=np.arange(T)), X, seq_range


def test_lagged_store_drops_first_steps_and_never_regresses_across_sequences(tmp_path, caplog):
    path, X, seq_range = write_steps(tmp_path / "s.h5")
    first = np.zeros(len(X), dtype=bool)
    first[seq_range[:-1]] = True
    with BatchStore.open(path) as plain, caplog.at_level(logging.INFO, logger="bnpvi.data"):
        store = plain.lagged()
    assert "7 sequences (2 of length 1 entirely)" in caplog.text
    assert store.is_lagged and store.n_atoms == len(X) - 7 and store.batch_sizes().sum() == store.n_atoms
    labels = store.labels()
    np.testing.assert_array_equal(labels, np.flatnonzero(~first))
    seen = 0
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        assert batch.n_atoms == store.batch_sizes()[b] and batch.start == seen
        steps = batch.X[:, 0].astype(int)
        np.testing.assert_array_equal(steps, labels[seen:seen + batch.n_atoms])  # frames and labels aligned
        np.testing.assert_array_equal(batch.Xprev, X[steps - 1])  # the step before, in the same sequence
        assert not first[steps].any()
        seq_of = np.searchsorted(seq_range, steps, side="right")
        assert np.all(seq_of == np.searchsorted(seq_range, steps - 1, side="right"))
        for s in range(batch.n_seqs):  # batch sequences are whole file sequences minus their first step
            rows = steps[batch.seq_range[s]:batch.seq_range[s + 1]]
            assert len(set(seq_of[batch.seq_range[s]:batch.seq_range[s + 1]])) == 1
            assert np.all(np.diff(rows) == 1)
        seen += batch.n_atoms
    assert sum(1 for _, block in store.iter_blocks(max_values=5) for _ in block) == store.n_atoms
    store.close()


def test_lagged_store_rejects_batches_of_single_steps(tmp_path):
    X = np.arange(12.0).reshape(6, 2)
    path = write_sequences(tmp_path / "ones.h5", X, [0, 3, 4, 5, 6], n_batches=2)  # batch 1: lengths 1, 1
    with BatchStore.open(path) as store, pytest.raises(BnpviError, match=r"ones\.h5: batch 1 holds only") as info:
        store.lagged()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("scan_values", [2**22, 5])
def test_sequence_moments_include_first_differences(tmp_path, monkeypatch, scan_values):
    monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", scan_values)
    path, X, seq_range = write_steps(tmp_path / "s.h5")
    with_prev, _, _ = write_steps(tmp_path / "p.h5", Xprev=True)
    later = np.ones(len(X), dtype=bool)
    later[seq_range[:-1]] = False
    diffs = (X[1:] - X[:-1])[later[1:]]
    with BatchStore.open(path) as store:
        plain = store.scan()
        lagged = store.lagged()
    with lagged:
        moments = lagged.scan()
    with BatchStore.open(with_prev) as store:
        given = store.moments()
    np.testing.assert_allclose(plain.mean, X.mean(0), rtol=1e-14)  # unchanged for unlagged stores
    np.testing.assert_allclose(plain.diff_cov, np.cov(diffs.T, bias=True), rtol=1e-10, atol=1e-14)
    assert moments.n_atoms == later.sum()
    np.testing.assert_allclose(moments.mean, X[later].mean(0), rtol=1e-14)
    np.testing.assert_allclose(moments.cov, np.cov(X[later].T, bias=True), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(moments.diff_cov, plain.diff_cov, rtol=1e-12, atol=1e-14)
    assert given.n_atoms == len(X)
    np.testing.assert_allclose(given.diff_cov, np.zeros((2, 2)), atol=1e-14)  # X − Xprev = 0.5 everywhere


def test_runner_lags_only_files_without_xprev_for_families_that_need_it(tmp_path, compose_cfg):
    plain, X, _ = write_steps(tmp_path / "s.h5")
    with_prev, _, _ = write_steps(tmp_path / "p.h5", Xprev=True)
    alloc = FiniteHMMAlloc()
    cases = [("ar_gauss", plain, True, len(X) - 7), ("ar_gauss", with_prev, False, len(X)),
             ("gauss", plain, False, len(X))]
    for obs, path, lagged, n_atoms in cases:
        cfg = compose_cfg("model=finite_hmm", f"obs={obs}", "data=hdf5", f"data.path={path}")
        with runner.open_store(cfg, alloc) as store:
            assert (store.is_lagged, store.n_atoms) == (lagged, n_atoms), (obs, path)
            assert store.read_batch(0).Xprev is not None or obs == "gauss"


# --------------------------------------------------------------------------- config and data checks
def test_points_file_is_a_one_line_error(tmp_path, compose_cfg):
    path = write_points(tmp_path / "points.h5", np.random.default_rng(0).normal(size=(50, 2)), n_batches=2)
    cfg = compose_cfg("obs=ar_gauss", "data=hdf5", f"data.path={path}")
    with pytest.raises(BnpviError) as info:
        runner.Run(cfg, tmp_path / "run")
    message = str(info.value)
    assert "\n" not in message and "obs=ar_gauss needs sequences" in message and "points" in message
    fam = make_family()
    assert "bag-of-words" in fam.check_data("bow") and fam.check_data("seq") is None
    X = np.ones((4, D))
    for batch in (PointBatch(X), SeqBatch(X, np.array([0, 4]))):  # no Xprev
        with pytest.raises(BnpviError, match="obs=ar_gauss needs the previous observation") as info:
            fam.expected_log_lik(fam.posterior(np.zeros(1), zero_stats(fam, 1)), batch)
        assert "\n" not in str(info.value)


def test_defaults_come_from_first_difference_moments(tmp_path, compose_cfg):
    X, seq_range, labels, _ = make_toy_ar_sequences(n_seqs=4, length=200, seed=2)
    path = write_sequences(tmp_path / "ar.h5", X, seq_range)
    cfg = compose_cfg("model=finite_hmm", "obs=ar_gauss", "data=hdf5", f"data.path={path}")
    with runner.open_store(cfg, FiniteHMMAlloc()) as store:
        moments = store.scan()
    later = np.ones(len(X), dtype=bool)
    later[seq_range[:-1]] = False
    diff_var = np.var((X[1:] - X[:-1])[later[1:]], axis=0)
    fam = instantiate(cfg.obs, D=2, moments=moments)  # the shipped YAML: nu null, sF = sV = 0.5, diag, eye
    p = fam.prior_params()
    assert isinstance(fam, ARGauss) and FAMILIES["ar_gauss"] is ARGauss and p["nu"] == 4.0
    np.testing.assert_allclose(p["B"], 0.5 * np.diag(diff_var), rtol=1e-10)  # (ν̄ − D − 1)·sF·C, ν̄ − D − 1 = 1
    np.testing.assert_allclose(p["V"], 0.5 * np.diag(diff_var), rtol=1e-10)
    np.testing.assert_array_equal(p["M"], np.eye(2))
    fam = make_obs({"name": "ar_gauss", "nu": 6.0, "sF": 2.0, "sV": 3.0, "prior_cov": "eye",
                    "mean_matrix": "zero"}, 2, moments)
    p = fam.prior_params()
    np.testing.assert_allclose(p["B"], 3.0 * 2.0 * diff_var.mean() * np.eye(2), rtol=1e-10)
    np.testing.assert_allclose(p["V"], 3.0 * diff_var.mean() * np.eye(2), rtol=1e-10)
    np.testing.assert_array_equal(p["M"], np.zeros((2, 2)))
    assert make_obs({"name": "ar_gauss"}, 2, DataMoments(3, np.zeros(2), np.eye(2))).prior_params()["V"][0, 0] == 0.5


@pytest.mark.parametrize("bad", [{"nu": D - 1.0}, {"nu": "lots"}, {"sF": 0.0}, {"sV": -1.0}, {"prior_cov": "full"},
                                 {"mean_matrix": "ones"}])
def test_bad_config_is_a_one_line_error(bad):
    with pytest.raises(BnpviError) as info:
        make_obs({"name": "ar_gauss", **bad}, D, None)
    assert "\n" not in str(info.value) and f"obs.{next(iter(bad))}" in str(info.value)


# --------------------------------------------------------------------------- end to end
def four_state_ar(n_seqs: int, length: int, seed: int):
    """Sequences of the first 4 states of the toy AR-HMM (persisting with probability 0.98)."""
    _, A, covs = toy_ar_parameters()
    trans = 0.98 * np.eye(4) + 0.02 / 3 * (1.0 - np.eye(4))
    start = np.eye(4)[np.arange(n_seqs) % 4]
    return sample_ar_hmm(n_seqs, length, start, trans, A[:4], covs[:4], np.random.default_rng(seed))


def test_ar_hmm_recovers_the_toy_ar_states_from_a_file_without_xprev(tmp_path, compose_cfg):
    """Memoized VI of a 4-state HMM with ar_gauss on 4 states of the toy AR set (states differ only
    in their dynamics)."""
    X, seq_range, labels, _ = four_state_ar(n_seqs=16, length=400, seed=0)
    path = write_sequences(tmp_path / "ar.h5", X, seq_range, labels=labels, n_batches=4)
    cfg = compose_cfg("model=finite_hmm", "obs=ar_gauss", "data=hdf5", f"data.path={path}")
    store = runner.open_store(cfg, FiniteHMMAlloc())
    model = Model(FiniteHMMAlloc(alpha=0.5, start_alpha=5.0, sticky_kappa=50.0),
                  instantiate(cfg.obs, D=2, moments=store.scan()))
    rng = np.random.default_rng(0)
    init = {"name": "kmeanspp", "K": 4, "n_samples": 5000, "n_trials": None, "kmeans_iters": 0}
    alg = MemoizedVB(model, store, {}, rng, model.global_step(initial_stats(model, store, init, rng, 4)),
                     ClusterIds.first(4))
    elbos = []
    while alg.lap < 15:
        result = alg.step()
        if result is not None:
            elbos.append(result.elbo)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:]))
    estimate = np.concatenate([model.decode(store.read_batch(b), alg.globals) for b in range(store.n_batches)])
    truth = store.labels()
    assert hamming_distance(truth, estimate) < 0.1
    for k, A in enumerate(toy_ar_parameters()[1][:4]):  # each state's regression, found by its most frequent estimate
        np.testing.assert_allclose(alg.globals.obs["M"][np.bincount(estimate[truth == k]).argmax()], A, atol=0.1)
    store.close()


def test_a_mixture_of_the_time_steps_of_labelled_sequences_runs_and_is_scored(tmp_path, compose_cfg):
    """A mixture has no segments: its run scores the steps' labels by Hamming distance, without HMM decoding."""
    X, seq_range, labels, _ = make_toy_ar_sequences(n_seqs=4, length=100, seed=3)
    path = write_sequences(tmp_path / "ar.h5", X, seq_range, labels=labels)
    cfg = compose_cfg("model=finite_mix", "obs=ar_gauss", "init.K=3", "data=hdf5", f"data.path={path}",
                      "alg.n_laps=3")
    summary = runner.train(cfg, tmp_path / "run")
    assert 0.0 <= summary["hamming"] <= 1.0 and summary["K"] == 3
    assert not (tmp_path / "run" / "segmentation.h5").exists()
