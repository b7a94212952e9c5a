"""Missing values: a NaN entry is unobserved and marginalised exactly (docs/missing.md).

The families that can (``diag_gauss``, ``bern``) give, for hard assignments, the exact log marginal likelihood
of the observed entries (checked against the chain rule of posterior predictives, one entry at a time); for
soft ones the ELBO identity L* = Σ r E ln p − KL holds with the masked likelihood; the masked local step and
divergences are the per-dimension ones summed over the observed dimensions; batched summaries add up; a
memoized run on data with missing entries never lowers its ELBO; files, converters, ``bnpvi-data info``,
the runner and the estimators keep NaN where it can be modelled and refuse it on one line where it cannot.
"""
import numpy as np
import pandas as pd
import pytest
from scipy.special import gammaln

import bnpvi
from bnpvi.cli.data import main as data_main
from bnpvi.data.batch import PointBatch
from bnpvi.data.points import HeldoutPoints
from bnpvi.data.store import BatchStore, write_points, write_sequences
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.obs import Bern, DiagGauss
from bnpvi.stats import Responsibilities

from setups import apply_cli, assert_one_line_error, one_line_error, settled_elbo

D = 4


def holes(X, share=0.3, seed=5):
    """X with about ``share`` of its entries NaN, and one row with every entry NaN."""
    X = np.array(X, dtype=np.float64)
    X[np.random.default_rng(seed).random(X.shape) < share] = np.nan
    X[2] = np.nan
    return X


def gauss_family(missing=True, D=D):
    return DiagGauss(nu=3.0, kappa=0.5, m=np.linspace(-1.0, 1.0, D), b=np.linspace(1.0, 2.0, D), missing=missing)


def bern_family(missing=True, D=D):
    return Bern(0.4, 0.7, D, missing=missing)


def points(name, n=14, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 1.5, (n, D)) if name == "diag_gauss" else (rng.random((n, D)) < 0.4).astype(np.float64)
    return holes(X)


FAMILY = {"diag_gauss": gauss_family, "bern": bern_family}


def resp(R):
    R = np.ascontiguousarray(R, dtype=np.float64)
    return Responsibilities(R, R.shape[1])


def one_hot(z, K):
    return np.eye(K)[np.asarray(z)]


def chain_log_marginal(name, fam, values, d):
    """ln p(x_1, ..., x_n) of one dimension's observed values under the prior, as Σ_i ln p(x_i | x_<i): the
    posterior predictive of each entry given the ones before it (Student-t for Normal-Gamma, the Beta mean for
    Beta-Bernoulli), updated one entry at a time."""
    total = 0.0
    if name == "bern":
        ones, zeros = fam.lam1, fam.lam0
        for x in values:
            total += np.log((ones if x == 1.0 else zeros) / (ones + zeros))
            ones, zeros = ones + x, zeros + 1.0 - x
        return total
    kappa, nu, m, b = fam.kappa, fam.nu, fam.m[d], fam.b[d]
    for x in values:
        scale2 = b * (kappa + 1.0) / (nu * kappa)  # x ~ t_ν(m, scale²)
        total += (gammaln((nu + 1.0) / 2.0) - gammaln(nu / 2.0) - 0.5 * np.log(nu * np.pi * scale2)
                  - (nu + 1.0) / 2.0 * np.log1p((x - m) ** 2 / (nu * scale2)))
        b += kappa * (x - m) ** 2 / (kappa + 1.0)
        m = (kappa * m + x) / (kappa + 1.0)
        kappa, nu = kappa + 1.0, nu + 1.0
    return total


# ------------------------------------------------------------------------------------ the families
@pytest.mark.parametrize("name", ["diag_gauss", "bern"])
def test_hard_assignments_give_the_exact_marginal_of_the_observed_entries(name):
    fam = FAMILY[name]()
    X = points(name)
    z = np.arange(X.shape[0]) % 3
    stats = fam.summarize(PointBatch(X), resp(one_hot(z, 3)))
    got = fam.log_marginal(np.bincount(z, minlength=3).astype(float), stats)
    for k in range(3):
        rows = X[z == k]
        want = sum(chain_log_marginal(name, fam, rows[~np.isnan(rows[:, d]), d], d) for d in range(D))
        np.testing.assert_allclose(got[k], want, rtol=1e-11, err_msg=f"cluster {k}")


def soft_fit(name, n, seed):
    """(family, X with holes, soft responsibilities R over 3 clusters, their summaries, the posterior)."""
    fam = FAMILY[name]()
    X = points(name, n=n)
    R = np.random.default_rng(seed).dirichlet(np.full(3, 0.8), size=X.shape[0])
    stats = fam.summarize(PointBatch(X), resp(R))
    return fam, X, R, stats, fam.posterior(R.sum(axis=0), stats)


@pytest.mark.parametrize("name", ["diag_gauss", "bern"])
def test_the_elbo_identity_holds_with_the_masked_likelihood(name):
    """L_data,k* = Σ_n r_nk E_q* ln p(x_n | φ_k) − KL(q*_k ‖ p_0), summed over each atom's observed entries."""
    fam, X, R, stats, post = soft_fit(name, 20, 2)
    batch, N = PointBatch(X), R.sum(axis=0)
    prior = fam.posterior(np.zeros(3), {key: np.zeros_like(v) for key, v in stats.items()})
    want = np.sum(R * fam.expected_log_lik(post, batch), axis=0) - fam.kl(post, prior)
    np.testing.assert_allclose(fam.log_marginal(N, stats), want, rtol=1e-10)
    assert np.all(fam.expected_log_lik(post, PointBatch(X[2:3])) == 0.0)  # a row with nothing observed


def one_dim(name, fam, d):
    """The complete-data family of dimension d alone."""
    if name == "bern":
        return Bern(fam.lam1, fam.lam0, 1)
    return DiagGauss(fam.nu, fam.kappa, fam.m[d:d + 1], fam.b[d:d + 1])


def dim_posterior(post, d):
    """The posterior of dimension d alone (per-cluster κ̂, ν̂ from the per-dimension ones)."""
    out = {}
    for key, value in post.items():
        value = np.asarray(value)
        out[key] = value[:, d] if key in ("kappa", "nu") and value.ndim == 2 else \
            value[:, d:d + 1] if value.ndim == 2 else value
    return out


@pytest.mark.parametrize("name", ["diag_gauss", "bern"])
def test_the_masked_local_step_and_divergences_sum_the_observed_dimensions(name):
    fam, X, _, _, post = soft_fit(name, 16, 4)
    batch = PointBatch(X)
    loglik, divergence = np.zeros((X.shape[0], 3)), np.zeros((X.shape[0], 3))
    for d in range(D):
        rows = ~np.isnan(X[:, d])
        single, single_post = one_dim(name, fam, d), dim_posterior(post, d)
        column = PointBatch(np.ascontiguousarray(X[rows, d:d + 1]))
        loglik[rows] += single.expected_log_lik(single_post, column)
        divergence[rows] += single.divergence(column, single_post)
    np.testing.assert_allclose(fam.expected_log_lik(post, batch), loglik, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(fam.divergence(batch, post), divergence, rtol=1e-9, atol=1e-9)
    own = fam.posterior(np.ones(1), fam.summarize(batch.take([0]), resp(np.ones((1, 1)))))
    assert fam.divergence(batch.take([0]), own)[0, 0] == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("name", ["diag_gauss", "bern"])
def test_batched_summaries_add_up_to_the_whole_data_ones(name):
    fam = FAMILY[name]()
    X = points(name, n=30)
    R = np.random.default_rng(6).dirichlet(np.full(4, 0.5), size=X.shape[0])
    whole = fam.summarize(PointBatch(X), resp(R))
    parts = [fam.summarize(PointBatch(X[lo:lo + 10]), resp(R[lo:lo + 10])) for lo in (0, 10, 20)]
    for key, value in whole.items():
        np.testing.assert_allclose(sum(part[key] for part in parts), value, rtol=1e-12, atol=1e-12)
    complete = PointBatch(np.nan_to_num(X))  # a batch without missing entries still counts every dimension
    np.testing.assert_allclose(fam.summarize(complete, resp(R))["No"], np.repeat(R.sum(axis=0)[:, None], D, 1),
                               rtol=1e-12)


@pytest.mark.parametrize("name", ["diag_gauss", "bern"])
def test_on_complete_data_the_missing_form_is_the_complete_one(name):
    X = np.nan_to_num(points(name, n=25))
    R = np.random.default_rng(8).dirichlet(np.full(3, 0.8), size=X.shape[0])
    batch, N = PointBatch(X), R.sum(axis=0)
    values = []
    for missing in (False, True):
        fam = FAMILY[name](missing)
        stats = fam.summarize(batch, resp(R))
        post = fam.posterior(N, stats)
        values.append((fam.log_marginal(N, stats), fam.expected_log_lik(post, batch), fam.divergence(batch, post)))
    for plain, masked in zip(*values):
        np.testing.assert_allclose(masked, plain, rtol=1e-11, atol=1e-11)


def test_a_family_built_for_complete_data_scores_missing_entries_but_does_not_summarise_them():
    fam = gauss_family(missing=False)
    X = points("diag_gauss")
    post = fam.posterior(np.ones(2), {"Sx": np.zeros((2, D)), "Sxx": np.zeros((2, D))})
    assert np.all(np.isfinite(fam.expected_log_lik(post, PointBatch(X))))
    with one_line_error("was built for data without missing entries"):
        fam.summarize(PointBatch(X), resp(np.full((X.shape[0], 2), 0.5)))


# --------------------------------------------------------------------------------- files and CLI
def test_points_files_keep_missing_entries_count_them_and_take_pairwise_moments(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    X = holes(rng.normal(5.0, 2.0, (200, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 1.0]]))
    X[:60] = np.nan_to_num(X[:60], nan=1.0)  # the first blocks are complete: the sums switch form mid-file
    path = write_points(tmp_path / "m.h5", X, n_batches=4)
    n_missing = int(np.isnan(X).sum())
    monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", 90)
    with BatchStore.open(path) as store:
        assert store.n_missing == n_missing and store.info()["missing"] == n_missing
        moments = store.scan()
        np.testing.assert_array_equal(np.isnan(store.read_batch(3).X), np.isnan(X[150:]))
    assert moments.n_missing == n_missing
    np.testing.assert_allclose(moments.mean, np.nanmean(X, axis=0), rtol=1e-12)
    pairwise = np.empty((3, 3))  # each entry over the rows that observe both columns (ddof 0)
    for i in range(3):
        for j in range(3):
            both = ~np.isnan(X[:, i]) & ~np.isnan(X[:, j])
            a, b = X[both, i], X[both, j]
            pairwise[i, j] = np.mean((a - a.mean()) * (b - b.mean()))
    np.testing.assert_allclose(moments.cov, pairwise, rtol=1e-9)
    assert np.all(np.linalg.eigvalsh(moments.cov) > 0)


def test_a_column_with_nothing_observed_is_refused_when_the_moments_are_taken(tmp_path):
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[:, 1] = np.nan
    path = write_points(tmp_path / "m.h5", X)
    with BatchStore.open(path) as store, one_line_error("column 1 has no observed value"):
        store.scan()


def test_convert_keeps_empty_cells_as_missing_and_info_counts_them(tmp_path, capsys):
    (tmp_path / "m.csv").write_text("a,b,c\n1,2,3\n4,,6\n7,NA,\n1,1,1\n")
    assert data_main(["convert", str(tmp_path / "m.csv"), str(tmp_path / "m.h5")]) == 0
    assert "missing=3 entries (25 %)" in capsys.readouterr().out
    assert data_main(["info", str(tmp_path / "m.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    assert "missing: 3 entries (25 %)" in out and "all values finite or missing" in out
    with BatchStore.open(tmp_path / "m.h5") as store:
        np.testing.assert_array_equal(np.isnan(store.read_batch(0).X).sum(axis=0), [0, 2, 1])


# ------------------------------------------------------------------------------------------ runs
def blob_points(n=600, seed=0, share=0.3):
    rng = np.random.default_rng(seed)
    centers = np.array([[-4.0, -4.0, 0.0, 2.0], [4.0, 0.0, -3.0, 0.0], [0.0, 5.0, 3.0, -3.0]])
    labels = rng.integers(0, 3, n)
    return holes(centers[labels] + rng.normal(size=(n, D)), share), labels


@pytest.mark.parametrize("family", ["diag_gauss", "bern"])
def test_a_memo_run_on_data_with_missing_entries_never_lowers_its_elbo(compose_cfg, tmp_path, family):
    X, labels = blob_points()
    if family == "bern":
        X = np.where(np.isnan(X), np.nan, (X > 0).astype(np.float64))
    path = write_points(tmp_path / "m.h5", X, n_batches=3, labels=labels)
    cfg = compose_cfg("data=hdf5", f"data.path={path}", f"obs={family}", "init.K=1", "alg.n_laps=25")
    summary = runner.train(cfg, tmp_path / "run")
    elbo = settled_elbo(pd.read_csv(tmp_path / "run" / "trace.csv"))
    assert elbo.size > 5 and np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    if family == "diag_gauss":
        assert summary["K"] == 3 and summary["ari"] > 0.9


def test_an_hmm_over_steps_with_missing_entries_gives_an_empty_step_no_emission(compose_cfg, tmp_path):
    rng = np.random.default_rng(3)
    z = np.repeat(rng.integers(0, 3, 40), 25)
    X = holes(np.array([-4.0, 0.0, 4.0])[z][:, None] + rng.normal(size=(z.size, 3)), 0.2)
    path = write_sequences(tmp_path / "s.h5", X, np.arange(0, z.size + 1, 250), labels=z, n_batches=2)
    cfg = compose_cfg("model=hdp_hmm", "data=hdf5", f"data.path={path}", "obs=diag_gauss", "init.K=1",
                      "alg.n_laps=20")
    summary = runner.train(cfg, tmp_path / "run")
    elbo = settled_elbo(pd.read_csv(tmp_path / "run" / "trace.csv"))
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    assert summary["K"] >= 3
    fitted = bnpvi.load(tmp_path / "run")
    assert np.all(fitted.model.obs.expected_log_lik(fitted.globals_.obs, PointBatch(X[2:3])) == 0.0)


@pytest.mark.parametrize("obs, alg, problem", [
    ("gauss", "memo", "obs=gauss cannot model: use obs=diag_gauss or obs=bern"),
    ("diag_gauss", "tfsvi", "alg=tfsvi cannot use data with missing"),
])
def test_a_run_refuses_missing_entries_it_cannot_model_on_one_line(compose_cfg, tmp_path, obs, alg, problem):
    X, _ = blob_points(60)
    path = write_points(tmp_path / "m.h5", X)
    cfg = compose_cfg("data=hdf5", f"data.path={path}", f"obs={obs}", f"alg={alg}")
    with one_line_error(problem):
        runner.train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "model.h5").exists()


def test_em_fits_data_with_missing_entries_per_dimension(compose_cfg, tmp_path):
    X, labels = blob_points(600, share=0.2)
    path = write_points(tmp_path / "m.h5", X, n_batches=2, labels=labels)
    cfg = compose_cfg("data=hdf5", f"data.path={path}", "obs=diag_gauss", "model=finite_mix", "alg=em", "init.K=3",
                      "obs.kappa=1.0")
    summary = runner.train(cfg, tmp_path / "run")
    objective = pd.read_csv(tmp_path / "run" / "trace.csv")["elbo"].to_numpy()  # EM's log posterior
    assert np.all(np.diff(objective) >= -1e-9 * np.abs(objective[1:])) and summary["ari"] > 0.9


def heldout_file(path, X, share):
    """A points file of X's first 400 rows, complete, and the rest held out with ``share`` of entries missing."""
    held = holes(X[400:], share)
    return write_points(path, X[:400], heldout=HeldoutPoints(held, np.arange(400, X.shape[0]), np.arange(400)))


def test_applying_a_model_scores_missing_entries_where_its_family_can(compose_cfg, tmp_path):
    X, _ = blob_points(500, share=0.0)
    X[2] = 1.0  # blob_points' row without any observed entry, observed here
    path = heldout_file(tmp_path / "h.h5", X, 0.2)
    for obs in ("diag_gauss", "gauss"):
        cfg = compose_cfg("data=hdf5", f"data.path={path}", f"obs={obs}", "init.K=3", "moves=[]")
        if obs == "gauss":  # the held-out part's missing entries are refused before training
            with one_line_error("h.h5 has .* missing \\(NaN\\) entries, which obs=gauss cannot model"):
                runner.train(cfg, tmp_path / obs)
            cfg = compose_cfg("data=hdf5", f"data.path={write_points(tmp_path / 'c.h5', X)}", "obs=gauss",
                              "init.K=3", "moves=[]")
        summary = runner.train(cfg, tmp_path / obs)
        proc = apply_cli(tmp_path / obs, path, tmp_path / f"{obs}.h5")
        if obs == "gauss":
            assert_one_line_error(proc, "which obs=gauss cannot model")
            assert not (tmp_path / "gauss.h5").exists()
        else:
            assert proc.returncode == 0, proc.stderr
            assert np.isfinite(summary["heldout_loglik"]) and f"{summary['heldout_loglik']:.6f}" in proc.stdout


# ------------------------------------------------------------------------------------ estimators
def test_estimators_take_nan_where_the_family_marginalises_it():
    X, labels = blob_points(450, share=0.2)
    est = bnpvi.DPMixture(obs="diag_gauss", random_state=0).fit(X)
    assert est.__sklearn_tags__().input_tags.allow_nan
    assert not bnpvi.DPMixture().__sklearn_tags__().input_tags.allow_nan
    assert est.n_components_ == 3
    from sklearn.metrics import adjusted_rand_score
    assert adjusted_rand_score(labels, est.predict(X)) > 0.9
    assert np.isfinite(est.score(X)) and np.all(np.isfinite(est.predict_proba(X)))
    with one_line_error("fit: X has .* missing \\(NaN\\) entries, which obs=gauss cannot model"):
        bnpvi.DPMixture(random_state=0).fit(X)
    plain = bnpvi.DPMixture(random_state=0).fit(np.nan_to_num(X))
    with one_line_error("predict: X has 1 missing"):
        plain.predict(np.r_[[[np.nan, 0.0, 0.0, 0.0]], np.zeros((2, D))])


def test_partial_fit_adds_missing_entries_only_to_a_run_that_had_some():
    X, _ = blob_points(600, share=0.2)
    complete = np.nan_to_num(X)
    est = bnpvi.DPMixture(obs="diag_gauss", random_state=0).partial_fit(complete[:300])
    with one_line_error("was trained on data without any"):
        est.partial_fit(X[300:])
    est = bnpvi.DPMixture(obs="diag_gauss", random_state=0).partial_fit(X[:300])
    est.partial_fit(complete[300:])
    assert est.n_components_ == 3


def test_hmm_and_grouped_topic_estimators_take_nan():
    rng = np.random.default_rng(0)
    seqs = [holes(np.repeat(rng.integers(0, 2, 10), 20)[:, None] * 4.0 + rng.normal(size=(200, 2)), 0.2)
            for _ in range(4)]
    hmm = bnpvi.HDPHMM(obs="diag_gauss", random_state=0).fit(seqs)
    assert [len(path) for path in hmm.predict(seqs)] == [200] * 4 and np.isfinite(hmm.score(seqs))
    with one_line_error("sequence 0 has .* which obs=gauss cannot model"):
        bnpvi.HDPHMM(random_state=0).fit(seqs)
    groups = [holes(rng.normal(rng.integers(0, 3) * 4.0, 1.0, (30, 2)), 0.2) for _ in range(12)]
    topics = bnpvi.HDPTopicModel(obs="diag_gauss", random_state=0).fit(groups)
    assert np.isfinite(topics.score(groups)) and topics.transform(groups).shape[0] == 12
