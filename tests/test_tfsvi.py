"""alg=tfsvi through the runner: bars found from 0 components, pruning and re-ordering keep the model, exact
resume, and the refused combinations."""

import numpy as np
import pandas as pd
import pytest

from bnpvi.data.bars import bar_topics
from bnpvi.errors import BnpviError
from bnpvi.io.model_file import read_model
from bnpvi.learn import runner

from setups import assert_resume_is_exact, corpus


def hellinger(lam, truth):
    """(K, T) Hellinger distances between every component's E[θ_k] and every true topic."""
    phi = lam / lam.sum(axis=1, keepdims=True)
    return np.sqrt(0.5 * ((np.sqrt(phi[:, None, :]) - np.sqrt(truth[None, :, :])) ** 2).sum(axis=-1))


@pytest.mark.shared_data
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dp_mixture_from_zero_finds_one_cluster_per_bar(compose_cfg, tmp_path, shared_data, seed):
    """The reference corpus of documents with one of 6 bars each (10 % held out): exactly 6 clusters hold more
    than 2 % of the documents, each closest to a different bar."""
    from bnpvi.data.convert import convert

    src = shared_data / "bars_one_per_doc" / "dataset.npz"
    path = convert(src, tmp_path / "bars.h5", n_batches=4, shuffle_seed=0, heldout=0.1)
    cfg = compose_cfg("model=dp_mix", "obs=mult", "alg=tfsvi", "data=hdf5", f"data.path={path}", "alg.n_laps=3",
                      f"seed={seed}")
    summary = runner.train(cfg, tmp_path / "run")
    counts = np.asarray(summary["counts"])
    big = counts > 0.02 * counts.sum()
    assert big.sum() == 6
    truth = np.load(src)["true_topics"]
    lam = read_model(tmp_path / "run" / "model.h5")["posterior"]["lam"]
    closest = hellinger(lam[big], truth).argmin(axis=1)
    assert sorted(closest.tolist()) == list(range(6))
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert trace["elbo"].isna().all() and summary["elbo"] is None  # no objective (Wang & Blei 2012 S.1)
    # held-out documents scored every lap: ln Σ_k exp(E ln π_k + E ln p(x | θ_k)) per document
    assert np.all(np.isfinite(trace["heldout_loglik"])) and summary["heldout_points"] == 200


def test_hdp_topics_from_zero_find_every_toy_bar(compose_cfg, tmp_path):
    """The package's toy bars (10 bars, 1-3 per document): every bar within Hellinger 0.1 of a topic, as the
    memo topic tests match them; held-out document completion scored every lap."""
    cfg = compose_cfg("model=hdp_topic", "alg=tfsvi", "alg.n_laps=6", "alg.prune_every=1800", "seed=1")
    summary = runner.train(cfg, tmp_path / "run")
    lam = read_model(tmp_path / "run" / "model.h5")["posterior"]["lam"]
    assert np.all(hellinger(lam, bar_topics(10, n_bars=10)).min(axis=0) < 0.1)
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert np.all(np.isfinite(trace["heldout_loglik"])) and np.isfinite(summary["heldout_loglik"])
    assert trace["K"].iloc[-1] == summary["K"] >= 10


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """240 documents, each from one of 3 topics over 30 words (40, 80 and 120 documents), in 2 batches."""
    from bnpvi.data.batch import WordCountBatch
    from bnpvi.data.bow import write_documents

    docs = WordCountBatch.concat([corpus(seed=s, n_docs=40 * (s + 1), K_true=1, length=(20, 60)) for s in range(3)])
    path = tmp_path_factory.mktemp("docs") / "docs.h5"
    write_documents(path, docs.word_ids, docs.word_counts, docs.doc_range, docs.vocab_size, n_batches=2,
                    batches_fixed=False)
    return path


def started(compose_cfg, tmp_path, *overrides):
    """A tfsvi run after one lap, ready to be edited."""
    run = runner.start(compose_cfg("alg=tfsvi", *overrides), tmp_path / "run")
    while run.alg.step() is None:
        pass
    return run


@pytest.mark.parametrize("model", ["hdp_topic", "dp_mix"])
def test_pruning_and_reordering_keep_every_kept_component(compose_cfg, tmp_path, documents, model):
    data = ["data.n_docs=400"] if model == "hdp_topic" else ["obs=mult", "data=hdf5", f"data.path={documents}"]
    run = started(compose_cfg, tmp_path, f"model={model}", *data, "alg.batch_docs=20", "alg.reorder=prune")
    try:
        alg = run.alg
        before = {int(u): (alg.globals.obs["lam"][k].copy(), alg.m[k], alg.globals.stats.N[k])
                  for k, u in enumerate(alg.ids.uids)}
        assert len(before) >= 2
        alg._keep(np.arange(alg.eff.K)[::-1])  # scramble the order; re-ordering must undo it
        alg.prune_below = float(np.median(alg.eff.N))
        alg.prune()
        alg.sort()
        after = alg.make_globals(alg.eff, alg.m)
        assert np.all(np.diff(alg.m) <= 0) and np.all(after.stats.N >= alg.prune_below)
        assert 0 < after.K < len(before) and alg.ids.uids.shape[0] == after.K
        for k, u in enumerate(alg.ids.uids):
            lam, m, N = before[int(u)]
            np.testing.assert_array_equal(after.obs["lam"][k], lam)  # the predictive under q(θ_k)
            assert (alg.m[k], after.stats.N[k]) == (m, N)
        u, v = after.alloc.values() if "eta1" in after.alloc else (None, None)
        if u is not None:  # dp_mix: q(π̄_k) = Beta(1 + m_k, a + Σ_{l>k} m_l)
            np.testing.assert_allclose(u, 1.0 + alg.m)
            np.testing.assert_allclose(v, alg.sampler.a + np.append(np.cumsum(alg.m[::-1])[::-1][1:], 0.0))
    finally:
        run.close()


@pytest.mark.parametrize("model", ["hdp_topic", "dp_mix", "dp_mix_gauss"])
def test_resume_mid_lap_is_exact(compose_cfg, tmp_path, documents, model):
    """Cut after the first batch of lap 2 (pruning every 150 documents: in flight at the cut) and resumed."""
    data = {"hdp_topic": ["data.n_docs=400"], "dp_mix": ["obs=mult", "data=hdf5", f"data.path={documents}"],
            "dp_mix_gauss": ["obs=gauss", "obs.kappa=1", "data.n_atoms=600"]}[model]
    cfg = compose_cfg("alg=tfsvi", f"model={model.split('_gauss')[0]}", *data, "alg.n_laps=4", "checkpoint_every=1",
                      "seed=7",
                      "alg.batch_docs=30", "alg.prune_every=150")
    summary, trace = assert_resume_is_exact(cfg, tmp_path)
    assert summary["K"] > 0 and (model != "hdp_topic" or trace["heldout_loglik"].notna().all())


@pytest.mark.parametrize("overrides, message", [
    (["moves=[merge]"], r"moves=\['merge'\] need alg=memo, not alg=tfsvi"),
    (["init.K=5"], "init.K=5: alg=tfsvi starts from 0 components"),
    (["model=finite_mix"], "alg=tfsvi runs model=dp_mix with obs=mult, .*got model=finite_mix obs=gauss"),
    (["model=hdp_topic", "alg.reorder=never"], "alg.reorder must be one of minibatch, prune"),
    (["model=hdp_topic", "alg.batch_docs=0"], "alg.batch_docs must be an integer >= 1"),
    (["model=hdp_topic", "alg.scheduler=tcp://nowhere:1"], "alg=tfsvi works in this process; use alg.workers=1"),
])
def test_refused_with_one_line(compose_cfg, tmp_path, overrides, message):
    with pytest.raises(BnpviError, match=message) as err:
        runner.train(compose_cfg("alg=tfsvi", *overrides), tmp_path / "run")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss"])
def test_toy_points_from_zero(compose_cfg, tmp_path, obs):
    """`bnpvi-train model=dp_mix obs=gauss alg=tfsvi` on the toy points (8 Gaussians) with obs.kappa=1: the big
    clusters are the true ones (ARI > 0.9)."""
    cfg = compose_cfg("model=dp_mix", f"obs={obs}", "obs.kappa=1", "alg=tfsvi", "alg.n_laps=6",
                      "alg.prune_every=5000", "seed=2")
    summary = runner.train(cfg, tmp_path / "run")
    assert summary["ari"] > 0.9 and summary["K"] >= 8
