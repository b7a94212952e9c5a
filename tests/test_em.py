"""alg=em: MAP point estimates of finite mixtures and finite HMMs (soft EM, hard Bregman k-means).

Each family's point estimate is the maximiser of Σ r log p(x | φ) + ln p(φ) that its own log-likelihood
and log prior define; whole runs never lower the trace's log_posterior on any family, soft or hard; on
well-separated data EM agrees with VB; the toy sequences are segmented; priors without an interior mode,
moves and other models are refused in one line; a resumed EM run ends where the uninterrupted one ends;
the estimators take alg="em".
"""
import itertools
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal, wishart

import bnpvi
from bnpvi.alloc import FiniteHMMAlloc
from bnpvi.alloc.point import PointHMM
from bnpvi.data.batch import PointBatch, SeqBatch
from bnpvi.data.store import write_documents, write_points
from bnpvi.data.toy import make_toy_sequences
from bnpvi.errors import BnpviError
from bnpvi.io.model_file import read_model
from bnpvi.learn import runner
from bnpvi.metrics import adjusted_rand_index
from bnpvi.obs import make_obs
from bnpvi.stats import Responsibilities
from setups import RESUME_COMMON, assert_resume_is_exact, block_corpus

LAPS = ["alg.n_laps=50", "alg.converge_thr=-1"]


# ----------------------------------------------------------------- data files
def blobs(n=600, seed=0, D=2, spread=0.3):
    """Three well-separated Gaussian clusters in D dimensions, with their labels."""
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0] * D, [6.0] * D, [0.0] * (D - 1) + [6.0]])
    labels = rng.integers(0, 3, n)
    return centers[labels] + spread * rng.normal(size=(n, D)), labels


@pytest.fixture
def files(tmp_path):
    """Data files of every kind the families model, with labels."""
    X, labels = blobs()
    write_points(tmp_path / "blobs.h5", X, n_batches=3, labels=labels)
    ids, counts, doc_range, V, doc_labels = block_corpus(n_docs=300)
    write_documents(tmp_path / "docs.h5", ids, counts, doc_range, V, n_batches=3, labels=doc_labels)
    rng = np.random.default_rng(1)
    protos = rng.random((3, 20)) < 0.5
    bit_labels = rng.integers(0, 3, 600)
    bits = (protos[bit_labels] ^ (rng.random((600, 20)) < 0.05)).astype(np.float64)
    write_points(tmp_path / "bits.h5", bits, n_batches=3, labels=bit_labels)
    return tmp_path


def data_args(files, name):
    return ["data=hdf5", f"data.path={files / name}"]


@pytest.fixture
def train(tmp_path, compose_cfg):
    def run(*overrides):
        out = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
        summary = runner.train(compose_cfg(*overrides), out)
        return summary, pd.read_csv(out / "trace.csv"), out
    return run


def assert_never_decreases(values):
    values = np.asarray(values)
    assert np.all(np.diff(values) >= -1e-10 * np.abs(values[1:])), np.diff(values).min()


# ------------------------------------------------- point estimates of every family
FAMILY_DATA = {
    "gauss": lambda rng: PointBatch(rng.normal(size=(40, 3)) + 2.0),
    "diag_gauss": lambda rng: PointBatch(rng.normal(size=(40, 3)) + 2.0),
    "zm_gauss": lambda rng: PointBatch(rng.normal(size=(40, 3))),
    "bern": lambda rng: PointBatch((rng.random((40, 6)) < 0.3).astype(np.float64)),
    "mult": lambda rng: PointBatch(rng.poisson(2.0, size=(40, 7)).astype(np.float64)),
    "ar_gauss": lambda rng: SeqBatch(rng.normal(size=(40, 3)), np.array([0, 40]), Xprev=rng.normal(size=(40, 3))),
}
FAMILY_OPTIONS = {"gauss": {"nu": 6.0, "kappa": 0.5}, "diag_gauss": {"nu": 6.0, "kappa": 0.5},
                  "zm_gauss": {"nu": 6.0}, "bern": {"lam1": 1.5, "lam0": 2.0}, "mult": {"lam": 1.5},
                  "ar_gauss": {"nu": 6.0}}


def soft_objective(family, batch, resp, point, natural):
    """Σ_n Σ_k r_nk ln p(x_n | φ_k) + Σ_k ln p(φ_k): what the M-step maximises."""
    return float(np.sum(resp * family.log_lik_at(point, batch)) + family.log_prior_at(point, natural).sum())


@pytest.mark.parametrize("natural", [False, True], ids=["soft", "natural"])
@pytest.mark.parametrize("name", sorted(FAMILY_DATA))
def test_map_point_maximises_the_expected_log_joint(name, natural):
    rng = np.random.default_rng(0)
    batch = FAMILY_DATA[name](rng)
    family = make_obs({"name": name, **FAMILY_OPTIONS[name]}, batch.X.shape[1], None)
    resp = rng.dirichlet(np.ones(3), size=batch.n_atoms)
    stats = family.summarize(batch, Responsibilities(resp, 3))
    best = soft_objective(family, batch, resp, family.map_point(resp.sum(axis=0), stats, natural), natural)
    for _ in range(5):  # the modes of other summaries are other valid points, none better
        other = rng.dirichlet(np.ones(3), size=batch.n_atoms)
        other_stats = family.summarize(batch, Responsibilities(other, 3))
        point = family.map_point(other.sum(axis=0), other_stats, natural)
        assert soft_objective(family, batch, resp, point, natural) < best


def test_gauss_point_log_lik_and_prior_are_the_normal_and_normal_wishart_densities():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 3))
    family = make_obs({"name": "gauss", "nu": 6.0, "kappa": 0.5, "mean": [0.1, 0.2, 0.3]}, 3, None)
    resp = rng.dirichlet(np.ones(2), size=30)
    point = family.map_point(resp.sum(axis=0), family.summarize(PointBatch(X), Responsibilities(resp, 2)))
    moments = family.point_moments(point)
    for k in range(2):
        mean, cov = moments["means_"][k], moments["covariances_"][k]
        np.testing.assert_allclose(family.log_lik_at(point, PointBatch(X))[:, k],
                                   multivariate_normal(mean, cov).logpdf(X), rtol=1e-10)
        precision = np.linalg.inv(cov)
        expected = (multivariate_normal(family.m, cov / family.kappa).logpdf(mean)
                    + wishart(df=family.nu, scale=np.linalg.inv(family.B)).logpdf(precision))
        np.testing.assert_allclose(family.log_prior_at(point)[k], expected, rtol=1e-10)


# ------------------------------------------------------------ whole runs: monotone
RUNS = {
    "gauss": ("blobs.h5", ["init.K=5"]),
    "diag_gauss": ("blobs.h5", ["obs=diag_gauss", "init.K=5"]),
    "zm_gauss": ("blobs.h5", ["obs=zm_gauss", "init.K=5"]),
    "mult": ("docs.h5", ["obs=mult", "init.K=5"]),
    "bern": ("bits.h5", ["obs=bern", "init.K=5"]),
}


@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
@pytest.mark.parametrize("family", sorted(RUNS))
def test_log_posterior_never_decreases(files, train, family, hard):
    name, args = RUNS[family]
    _, trace, _ = train("model=finite_mix", "alg=em", f"alg.hard={str(hard).lower()}", *LAPS, *args,
                        *data_args(files, name))
    assert len(trace) == 50
    assert_never_decreases(trace["log_posterior"])
    np.testing.assert_array_equal(trace["elbo"], trace["log_posterior"])


@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
@pytest.mark.parametrize("family", ["gauss", "ar_gauss"])
def test_finite_hmm_log_posterior_never_decreases(train, family, hard):
    _, trace, _ = train("model=finite_hmm", "alg=em", f"alg.hard={str(hard).lower()}", f"obs={family}", "init.K=6",
                        *LAPS, "data.n_seqs=6", "data.seq_length=150", "data.n_batches=2")
    assert len(trace) == 50
    assert_never_decreases(trace["log_posterior"])


def test_hard_hmm_step_is_the_best_path_and_its_counts():
    """Viterbi training's local step: each sequence's path maximises ln p(x_d, z_d | π̂, φ̂) (checked against every
    path of two short sequences), its score is that maximum, and its counts are the path's."""
    rng = np.random.default_rng(6)
    K, lengths = 3, [5, 4]
    seq_range = np.concatenate([[0], np.cumsum(lengths)])
    batch = SeqBatch(rng.normal(size=(seq_range[-1], 2)), seq_range)
    log_lik = rng.normal(size=(seq_range[-1], K))
    params = {"start_probs": rng.dirichlet(np.ones(K)), "trans_probs": rng.dirichlet(np.ones(K), size=K)}
    local = PointHMM(FiniteHMMAlloc(3.0, 3.0), natural=True, hard=True).local_step(batch, log_lik, params)
    path = local.resp.best()[0]
    start, trans = np.zeros(K), np.zeros((K, K))
    for d, (a, b) in enumerate(zip(seq_range[:-1], seq_range[1:])):
        def score(z):
            return (np.log(params["start_probs"][z[0]]) + log_lik[np.arange(a, b), z].sum()
                    + sum(np.log(params["trans_probs"][i, j]) for i, j in zip(z[:-1], z[1:])))
        best = max(itertools.product(range(K), repeat=b - a), key=score)
        np.testing.assert_array_equal(path[a:b], best)
        np.testing.assert_allclose(local.tables["log_norm"][d], score(np.array(best)), rtol=1e-12)
        start[best[0]] += 1
        for i, j in zip(best[:-1], best[1:]):
            trans[i, j] += 1
    np.testing.assert_array_equal(local.tables["start"], start)
    np.testing.assert_array_equal(local.tables["trans"], trans)


def test_hard_em_converges_to_fixed_assignments(files, train):
    summary, trace, out = train("model=finite_mix", "alg=em", "alg.hard=true", "init.K=3", *data_args(files, "blobs.h5"))
    assert summary["converged"] and summary["ari"] == 1.0
    assert (out / "assignments.h5").exists()


# ---------------------------------------------------------------- agreement with VB
def test_em_means_equal_vb_posterior_means_on_well_separated_data(files, train):
    """With weak priors (κ̄ = 1e-4 on the mean, flat Dirichlet weights, the default Wishart) and clusters 20
    standard deviations apart, every responsibility is 0 or 1 to double precision under both algorithms, so
    EM's means (ν̂-independent) and VB's posterior means m̂ are the same function of the same summaries."""
    common = ["model=finite_mix", "init.K=3", "model.gamma=3", *data_args(files, "blobs.h5")]
    em, _, em_dir = train(*common, "alg=em")
    vb, _, vb_dir = train(*common, "alg=vb")
    assert em["ari"] == vb["ari"] == 1.0
    em_model, vb_model = read_model(em_dir / "model.h5"), read_model(vb_dir / "model.h5")
    np.testing.assert_array_equal(em_model["uids"], vb_model["uids"])
    np.testing.assert_allclose(em_model["posterior"]["m"], vb_model["posterior"]["m"], atol=1e-3)
    X, labels = blobs()
    fitted_em, fitted_vb = bnpvi.load(em_dir), bnpvi.load(vb_dir)
    assert adjusted_rand_index(fitted_em.predict(X), fitted_vb.predict(X)) == 1.0


def test_a_run_directory_loads_in_a_fresh_process(files, train):
    """The saved config's ``${bnpvi_init_K:}`` (alg=em's default γ) resolves wherever the run is loaded."""
    _, _, out = train("model=finite_mix", "alg=em", "init.K=3", *data_args(files, "blobs.h5"))
    code = f"import bnpvi; print(bnpvi.load({str(out)!r}).n_components_)"
    # away from the source tree, whose bnpvi/ has no compiled kernels where the package is installed (CI)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=out.parent)
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr


def test_finite_hmm_segments_the_toy_sequences(train):
    summary, _, out = train("model=finite_hmm", "alg=em", "init.K=8")
    assert summary["hamming"] < 0.02
    assert (out / "segmentation.h5").exists()


# ------------------------------------------------------------------- refusals
@pytest.mark.parametrize("args, message", [
    (["model=finite_mix", "init.K=10", "model.gamma=5"], "model.gamma/K = 5/10 = 0.5; set model.gamma >= 10"),
    (["model=finite_hmm", "init.K=4", "model.alpha=2"], "model.alpha/K = 2/4"),
    (["model=finite_hmm", "init.K=4", "model.start_alpha=1"], "model.start_alpha/K = 1/4"),
    (["model=finite_mix", "obs=mult", "obs.lam=0.5"], "every Dirichlet parameter >= 1 .*obs.lam = 0.5"),
    (["model=finite_mix", "obs=bern", "obs.lam0=0.3"], "every Beta parameter >= 1 .*obs.lam0 = 0.3"),
    (["model=finite_mix", "obs.nu=2"], "obs=gauss needs obs.nu > D = 2"),
    (["model=finite_mix", "moves=[merge]"], r"moves=\['merge'\] need alg=memo, not alg=em"),
    (["model=dp_mix"], "alg=em fits model=finite_mix or model=finite_hmm, not model=dp_mix"),
    (["model=hdp_hmm"], "alg=em fits model=finite_mix or model=finite_hmm, not model=hdp_hmm"),
    (["model=finite_mix", "alg.sparse_L=2"], "alg=em computes every responsibility"),
])
def test_refusals_are_one_line(files, compose_cfg, tmp_path, args, message):
    data = {"mult": "docs.h5", "bern": "bits.h5"}
    extra = next((data_args(files, f) for key, f in data.items() if f"obs={key}" in args), [])
    with pytest.raises(BnpviError, match=message) as err:
        runner.train(compose_cfg("alg=em", *args, *extra), tmp_path / "run")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------- the priors EM brings
def test_em_brings_its_own_default_priors_and_the_command_line_wins(compose_cfg):
    def model_and_obs(*args):
        cfg = compose_cfg(*args)
        return dict(cfg.model), dict(cfg.obs)
    assert model_and_obs("model=finite_mix", "alg=em", "init.K=25")[0]["gamma"] == 25
    assert model_and_obs("model=finite_mix", "alg=em")[0]["gamma"] == 8  # init.K null: the 8 clusters it starts with
    assert model_and_obs("model=finite_mix", "alg=em", "init.K=25", "model.gamma=40")[0]["gamma"] == 40
    assert model_and_obs("model=finite_mix", "alg=vb", "init.K=25")[0]["gamma"] == 10  # other algorithms: conf/model's
    hmm = model_and_obs("model=finite_hmm", "alg=em", "init.K=6")[0]
    assert (hmm["alpha"], hmm["start_alpha"], hmm["sticky_kappa"]) == (6, 6, 50.0)
    assert model_and_obs("model=finite_mix", "alg=em", "obs=mult")[1]["lam"] == 2.0
    assert model_and_obs("model=finite_mix", "alg=vb", "obs=mult")[1]["lam"] == 0.1
    bern = model_and_obs("model=finite_mix", "alg=em", "obs=bern", "obs.lam0=3")[1]
    assert (bern["lam1"], bern["lam0"]) == (2.0, 3.0)


def test_em_starts_from_a_vb_run(files, train):
    common = ["model=finite_mix", "model.gamma=3", *data_args(files, "blobs.h5")]
    _, _, vb_dir = train(*common, "alg=vb", "init.K=3")
    summary, trace, _ = train(*common, "alg=em", "init=from_run", f"init.path={vb_dir}")
    assert summary["ari"] == 1.0
    assert_never_decreases(trace["log_posterior"])


# ---------------------------------------------------------------------- resume
@pytest.mark.parametrize("args", [["model=finite_mix", "init.K=6", "data.n_atoms=1500"],
                                  ["model=finite_mix", "alg.hard=true", "init.K=6", "data.n_atoms=1500"],
                                  ["model=finite_hmm", "init.K=8", "data.n_seqs=8", "data.seq_length=200",
                                   "data.n_batches=4"],
                                  ["model=finite_hmm", "alg.hard=true", "init.K=8", "data.n_seqs=8",
                                   "data.seq_length=200", "data.n_batches=4"]],
                         ids=["soft", "hard", "finite_hmm", "finite_hmm_hard"])
def test_resume_mid_lap_is_exact(compose_cfg, tmp_path, args):
    _, trace = assert_resume_is_exact(compose_cfg(*RESUME_COMMON, "alg=em", *args), tmp_path)
    assert_never_decreases(trace["log_posterior"])


# ------------------------------------------------------------------ estimators
def test_estimators_take_alg_em():
    X, labels = blobs(n=400, seed=4)
    est = bnpvi.FiniteMixture(alg="em", n_components=3, random_state=0).fit(X)
    assert adjusted_rand_index(labels, est.predict(X)) == 1.0
    # the score is the exact mean log-likelihood of the point estimates
    weights, moments = est.fitted_model_.weights_, est.fitted_model_.model.obs.cluster_moments(
        est.fitted_model_.globals_.obs)
    density = sum(w * multivariate_normal(m, c).pdf(X) for w, m, c in
                  zip(weights, moments["means_"], moments["covariances_"]))
    np.testing.assert_allclose(est.score(X), np.mean(np.log(density)), rtol=1e-10)
    Xs, seq_range, seq_labels = make_toy_sequences(n_seqs=6, length=200, seed=5)
    seqs = [Xs[a:b] for a, b in zip(seq_range[:-1], seq_range[1:])]
    hmm = bnpvi.FiniteHMM(alg="em", n_components=8, random_state=0).fit(seqs)
    assert hmm.n_components_total_ == 8 and hmm.transmat_.shape == (8, 8)  # one state ends empty: n_components_ 7
    with pytest.raises(BnpviError, match="alg=em fits model=finite_mix or model=finite_hmm, not model=dp_mix"):
        bnpvi.DPMixture(alg="em").fit(X)
