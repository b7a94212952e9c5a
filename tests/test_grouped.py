"""Grouped real vectors: HDP and LDA admixtures of Gaussian (and Bernoulli) clusters over groups (Hughes 2016
thesis Ch. 5 with another family than words): runs with births, merges and deletes, the estimators' list of
arrays, group completion, and its held-out score against a DP mixture of the same family."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import digamma, logsumexp

import bnpvi
from bnpvi.data.convert import convert
from bnpvi.data.heldout import group_halves
from bnpvi.data.store import BatchStore, write_sequences
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.learn.heldout import group_completion_loglik, groups_loglik
from setups import apply_cli

MEANS = np.random.default_rng(0).uniform(-10, 10, size=(6, 2))


def admixture(n_groups: int, seed: int, binary: bool = False):
    """Groups of 60-100 points, each from 2 of 6 clusters in random proportions: 2-D Gaussians of unit
    variance around MEANS, or (``binary``) 12-D Bernoulli vectors; (groups, labels per group)."""
    rng = np.random.default_rng(seed)
    probs = np.where(np.arange(12)[None, :] // 2 == np.arange(6)[:, None], 0.9, 0.05)
    groups, labels = [], []
    for _ in range(n_groups):
        used, weights = rng.choice(6, 2, replace=False), rng.dirichlet([1.0, 1.0])
        z = rng.choice(used, int(rng.integers(60, 101)), p=weights)
        groups.append((rng.random((z.size, 12)) < probs[z]).astype(float) if binary
                      else MEANS[z] + rng.normal(size=(z.size, 2)))
        labels.append(z)
    return groups, labels


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grouped")
    out = {}
    for name, binary in (("real", False), ("binary", True)):
        groups, labels = admixture(60, 1, binary)
        bounds = np.concatenate([[0], np.cumsum([len(g) for g in groups])])
        out[name] = write_sequences(folder / f"{name}.h5", np.vstack(groups), bounds, n_batches=3,
                                    labels=np.concatenate(labels))
    return out


@pytest.mark.parametrize("obs, data", [("gauss", "real"), ("diag_gauss", "real"), ("bern", "binary")])
def test_admixtures_from_one_cluster_find_the_six(compose_cfg, tmp_path, files, obs, data):
    """From one topic with births, merges and deletes: the 6 clusters, each point's most likely topic its true
    one (ARI), and an ELBO that never decreases."""
    cfg = compose_cfg("model=hdp_topic", f"obs={obs}", "data=hdf5", f"data.path={files[data]}", "init.K=1",
                      "moves=[birth,merge,delete]")
    summary = runner.train(cfg, tmp_path / "run")
    assert summary["K"] == 6 and summary["ari"] > 0.9, summary
    elbo = pd.read_csv(tmp_path / "run" / "trace.csv")["elbo"].to_numpy()
    assert np.all(np.diff(elbo) >= -1e-8 * np.abs(elbo[1:]))
    assert pd.read_csv(tmp_path / "run" / "moves.csv")["accepted"].any()


def test_group_halves_split_each_group_by_its_own_index():
    bounds = np.array([0, 5, 6, 13, 21, 30])
    observed = group_halves(bounds, seed=3)
    for g in range(5):
        part = observed[bounds[g]:bounds[g + 1]]
        assert part.sum() == (bounds[g + 1] - bounds[g]) // 2
    tail = group_halves(bounds[2:] - bounds[2], seed=3, start=2)  # the same groups, read from group 2 on
    assert np.array_equal(tail, observed[bounds[2]:])
    assert not np.array_equal(group_halves(bounds, seed=4), observed)


def reference_completion(model, globals_, X, bounds, seed):
    """Group completion by plain NumPy: coordinate ascent r_nk ∝ exp(C_nk + ψ(θ_dk)), θ_d = N_d + a to a fixed
    point (no restarts), then ln Σ_k π̂_dk exp(C_nk) over the target points."""
    C = model.obs.expected_log_lik(globals_.obs, bnpvi.data.batch.PointBatch(X))
    prior, _ = model.alloc.doc_prior(globals_.alloc)
    observed = group_halves(bounds, seed)
    total, count = 0.0, 0
    for g in range(len(bounds) - 1):
        rows = np.arange(bounds[g], bounds[g + 1])
        seen, target = rows[observed[rows]], rows[~observed[rows]]
        theta = prior.copy()
        for _ in range(2000):
            log_r = C[seen] + digamma(theta)[None, :]
            r = np.exp(log_r - logsumexp(log_r, axis=1, keepdims=True))
            theta = r.sum(axis=0) + prior
        pi = theta / theta.sum()
        total += logsumexp(C[target] + np.log(pi)[None, :], axis=1).sum()
        count += target.size
    return total / count


def test_group_completion_equals_its_reference(files):
    groups, _ = admixture(60, 1)
    est = bnpvi.HDPTopicModel(obs="gauss", random_state=0, n_batches=3, n_laps=30).fit(groups)
    held, _ = admixture(8, 9)
    X = np.vstack(held)
    bounds = np.concatenate([[0], np.cumsum([len(g) for g in held])])
    model = est.fitted_model_
    got = group_completion_loglik(model.model, model.globals_, X, bounds, seed=0, max_iters=2000, conv_thr=1e-10)
    assert got["n_points"] == sum(len(g) - len(g) // 2 for g in held)
    assert got["loglik_per_point"] == pytest.approx(reference_completion(model.model, model.globals_, X, bounds, 0),
                                                    rel=1e-9)


def test_the_admixture_predicts_held_out_groups_better_than_a_mixture(files, compose_cfg, tmp_path):
    """The estimator on a list of groups is the run of bnpvi-train on the same file; its group-completion score
    of new groups beats the DP mixture of the same family scored on the same target points (thesis Ch. 5)."""
    groups, _ = admixture(60, 1)
    est = bnpvi.HDPTopicModel(obs="gauss", random_state=0, n_batches=3).fit(groups)
    summary = runner.train(compose_cfg("model=hdp_topic", "obs=gauss", "data=hdf5", f"data.path={files['real']}"),
                           tmp_path / "run")
    assert est.elbo_ == summary["elbo"] and est.n_components_ == summary["K"] == 6
    held, _ = admixture(20, 9)
    weights = est.transform(held)
    assert weights.shape == (20, 6) and np.all(weights.sum(axis=1) <= 1.0 + 1e-12)
    assert np.sum(weights > 0.05, axis=1).max() <= 3  # each group uses its own few clusters
    mixture = bnpvi.DPMixture(obs="gauss", random_state=0, n_batches=3).fit(np.vstack(groups))
    bounds = np.concatenate([[0], np.cumsum([len(g) for g in held])])
    target = ~group_halves(bounds, 0)
    assert est.score(held) > mixture.score(np.vstack(held)[target]) + 0.5


def test_grouped_input_errors():
    est = bnpvi.HDPTopicModel(obs="gauss", n_laps=2)
    with pytest.raises(BnpviError, match="group 1 has shape"):
        est.fit([np.ones((3, 2)), np.ones((0, 2))])
    with pytest.raises(BnpviError, match="2 different dimensions"):
        est.fit([np.ones((3, 2)), np.ones((3, 3))])
    with pytest.raises(BnpviError, match="group 0 has 6 missing .* which obs=gauss cannot model"):
        est.fit([np.full((3, 2), np.nan)])
    with pytest.raises(BnpviError, match="group 1 holds an infinite value"):
        est.fit([np.ones((3, 2)), np.full((3, 2), np.inf)])
    with pytest.raises(BnpviError, match="vocabulary= is for word counts"):
        est.fit([np.ones((3, 2))], vocabulary=["a", "b"])
    groups, _ = admixture(10, 1)
    est.fit(groups)
    with pytest.raises(BnpviError, match="trained on D=2"):
        est.transform([np.ones((4, 3))])


def test_lda_of_grouped_vectors(files, tmp_path, compose_cfg):
    """LDA with 6 fixed diagonal-Gaussian topics: each point's most likely topic is its true cluster (ARI)."""
    cfg = compose_cfg("model=lda", "obs=diag_gauss", "init.K=6", "data=hdf5", f"data.path={files['real']}")
    summary = runner.train(cfg, tmp_path / "run")
    assert summary["K"] == 6 and summary["ari"] > 0.9, summary


def test_held_out_groups_are_scored_by_the_run_and_by_apply(compose_cfg, tmp_path, caplog):
    """A sequence file with whole groups held out (``--heldout``): the run's held-out score is group completion
    of those groups, in any block size; bnpvi-apply on the file gives it again; an HMM run says it leaves
    them out."""
    groups, _ = admixture(40, 2)
    bounds = np.concatenate([[0], np.cumsum([len(g) for g in groups])])
    np.savez(tmp_path / "groups.npz", X=np.vstack(groups), seq_range=bounds)
    path = convert(tmp_path / "groups.npz", tmp_path / "groups.h5", n_batches=2, sequences="seq_range", heldout=0.25)
    cfg = compose_cfg("model=hdp_topic", "obs=gauss", "data=hdf5", f"data.path={path}", "eval_every=2")
    summary = runner.train(cfg, tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert trace["heldout_loglik"].notna().sum() >= 2
    fitted = bnpvi.load(tmp_path / "run")
    with BatchStore.open(path) as store:
        assert store.n_heldout == 10
        held = store.read_heldout()
        expected = group_completion_loglik(fitted.model, fitted.globals_, held.X, held.seq_range)
        in_blocks = groups_loglik(fitted.model, fitted.globals_, store, block_groups=3)
    assert summary["heldout_points"] == expected["n_points"] == in_blocks["n_points"]
    assert summary["heldout_loglik"] == pytest.approx(expected["loglik_per_point"], rel=1e-12)
    assert in_blocks["loglik_per_point"] == pytest.approx(expected["loglik_per_point"], rel=1e-12)
    proc = apply_cli(tmp_path / "run", path, tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    assert f"{summary['heldout_loglik']:.6g}"[:6] in proc.stdout, proc.stdout
    with caplog.at_level("WARNING", logger="bnpvi"):
        runner.train(compose_cfg("model=hdp_hmm", "obs=gauss", "data=hdf5", f"data.path={path}", "alg.n_laps=2"),
                     tmp_path / "hmm")
    assert "holds 10 held-out sequences, which only a topic model of grouped vectors scores" in caplog.text
