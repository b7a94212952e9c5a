"""Held-out log-likelihood by document completion (bnpvi.learn.heldout; Hughes, Kim & Sudderth 2015 (AISTATS)
§6, Eq. 22; Hughes 2016 thesis Eq. 5.59): it approaches the score of the true topic weights, does not depend on how
the held-out documents are read, and the runner records it (trace, console, summary) without disturbing the run."""
import json
import logging
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bnpvi.alloc import hdp_top
from bnpvi.alloc.mixture import DPMixAlloc
from bnpvi.alloc.topic import HDPTopicAlloc, LDAAlloc
from bnpvi.data.bars import bar_topics, bars_batch_file
from bnpvi.data.batch import WordCountBatch
from bnpvi.data.bow import write_documents
from bnpvi.data.heldout import completion_split, hold_out
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.learn.heldout import completion_loglik
from bnpvi.model import Globals, Model
from bnpvi.obs.mult import Mult

from setups import assert_resume_is_exact

ALPHA = 1.0
SIDE = 5  # 10 bars over V = 25 pixels


def dirichlet_corpus(n_docs: int, tokens: int, seed: int = 0):
    """Documents from the bars topics (with a little noise, so every φ_kv > 0) and π_d ~ Dir(α/K, ..., α/K):
    the generative model of LDA with K = 10, all documents drawn at once."""
    phi = bar_topics(SIDE, noise=0.05)
    K, V = phi.shape
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(K, ALPHA / K), size=n_docs)
    counts = rng.multinomial(tokens, pi @ phi)
    d, v = np.nonzero(counts)
    doc_range = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=n_docs))]).astype(np.int64)
    return WordCountBatch(v.astype(np.int32), counts[d, v].astype(np.float64), doc_range, V, 0), phi, pi


def write_with_heldout(path, X, fraction=0.5, n_batches=None):
    """Half of the documents held out; the training ones in one batch that may be re-split, or in fixed batches."""
    train, _, held = hold_out(X, fraction, seed=0)
    write_documents(path, train.word_ids, train.word_counts, train.doc_range, train.vocab_size,
                    n_batches=n_batches or 1, batches_fixed=n_batches is not None, heldout=held)
    return held


def lda(lam, prior):
    """An LDA model and globals with the given λ̂ (K, V) and document prior (K,)."""
    model = Model(LDAAlloc(alpha=float(np.sum(prior))), Mult(0.1, lam.shape[1]))
    return model, Globals(model.empty_stats(lam.shape[0]), {"doc_prior": np.asarray(prior, float)}, {"lam": lam})


def hdp(lam, beta, alpha=ALPHA):
    """An HDP topic model and globals whose stick means are ``beta`` (K active entries; the rest is beyond K)."""
    K = lam.shape[0]
    model = Model(HDPTopicAlloc(gamma=1.0, alpha=alpha), Mult(0.1, lam.shape[1]))
    params = {"rho": hdp_top.sticks_from_means(beta), "omega": np.full(K, 2.0)}
    return model, Globals(model.empty_stats(K), params, {"lam": lam})


def oracle_score(store, pi_true, phi, seed=0, mode="halves"):
    """Σ c ln Σ_k π_dk φ_kv over the target tokens / their number, with the generating π_d and φ."""
    batch = store.read_heldout()
    _, target = completion_split(batch, seed, mode)
    t_doc = np.repeat(np.arange(batch.n_atoms), np.diff(target.doc_range))
    prob = np.einsum("ik,ki->i", pi_true[t_doc], phi[:, target.word_ids])
    return float(target.word_counts @ np.log(prob) / target.word_counts.sum())


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """Held-out files of 1000 Dirichlet documents (and 1000 training ones) of 100 and of 400 tokens."""
    out = {}
    for tokens in (100, 400):
        X, phi, pi = dirichlet_corpus(2000, tokens, seed=tokens)
        path = tmp_path_factory.mktemp("completion") / f"docs{tokens}.h5"
        held = write_with_heldout(path, X)
        out[tokens] = (path, phi, pi[held.doc_index])
    return out


# ------------------------------------------------------------------ the score itself
@pytest.mark.parametrize("kind", ["lda", "hdp"])
def test_score_approaches_that_of_the_true_topic_weights(corpora, kind):
    """With λ̂ = 10⁸ φ (so φ̂ = φ) and the generating prior α/K, only π̂_d is estimated, from the observed
    half (T/2 tokens). Its excess loss per target token is, to first order, the expected KL of a fitted
    K-category weight vector, ≈ (K − 1) / (2 · T/2) (the (K − 1)/2n of a regular K − 1 parameter fit, an upper
    scale since the Dirichlet(α/K) documents use few topics): 0.09 for T = 100, 0.0225 for T = 400. The
    fitted weights can only lose to the true ones in expectation (Gibbs' inequality), and over 50,000-200,000
    target tokens the mean is far tighter than the gap. Uniform weights, an unnormalised π̂ or the wrong
    documents' weights are off by 0.1-0.8 nats."""
    gaps = {}
    for tokens, (path, phi, pi_true) in corpora.items():
        K = phi.shape[0]
        if kind == "lda":
            model, globals_ = lda(1e8 * phi, np.full(K, ALPHA / K))
        else:  # the same prior as active mass α β̂_k, with 10⁻³ of β beyond K
            model, globals_ = hdp(1e8 * phi, np.full(K, (1 - 1e-3) / K))
        with BatchStore.open(path) as store:
            got = completion_loglik(model, globals_, store)
            oracle = oracle_score(store, pi_true, phi)
            assert got["n_tokens"] == store.n_heldout * tokens // 2
        gaps[tokens] = oracle - got["loglik_per_token"]
        assert 0.0 < gaps[tokens] < (K - 1) / tokens, (tokens, got, oracle)
    assert gaps[400] < 0.5 * gaps[100]  # ~1/T: the score approaches the true one as documents grow


def test_one_topic_gives_the_mean_log_probability_and_the_hdp_remainder_is_dropped(tmp_path):
    """K = 1: π̂ = 1 whatever the observed part, so the score is Σ c ln φ̂_v / T with φ̂ = λ̂ / Σ λ̂
    (not E ln φ); for the HDP with half of β beyond K the remainder is dropped (π̂ = 1, not
    θ_1 / (θ_1 + α β̂_>))."""
    X, phi, _ = dirichlet_corpus(200, 40, seed=3)
    write_with_heldout(tmp_path / "d.h5", X)
    rng = np.random.default_rng(0)
    lam = rng.uniform(0.2, 3.0, size=(1, phi.shape[1]))  # small λ̂: ln φ̂ and E ln φ differ a lot
    with BatchStore.open(tmp_path / "d.h5") as store:
        _, target = completion_split(store.read_heldout(), 0, "halves")
        expect = float(target.word_counts @ np.log(lam[0] / lam.sum())[target.word_ids] / target.word_counts.sum())
        for model, globals_ in (lda(lam, [0.5]), hdp(lam, np.array([0.5]))):
            got = completion_loglik(model, globals_, store)
            assert got["loglik_per_token"] == pytest.approx(expect, rel=1e-13)
            assert got["n_tokens"] == int(target.word_counts.sum())


def test_hdp_equals_lda_with_the_same_active_prior(corpora):
    """π̂ renormalises over the K active topics, so a large remainder α β̂_> changes nothing: the HDP's score is
    LDA's with doc prior α β̂_1..K, bit for bit (the local step uses α β̂_> only in its objective)."""
    path, phi, _ = corpora[100]
    K = phi.shape[0]
    beta = np.linspace(1.0, 2.0, K)
    beta *= 0.6 / beta.sum()  # 40 % of β beyond K
    model, globals_ = hdp(50.0 * phi + 0.1, beta, alpha=2.0)
    prior, rest = model.alloc.doc_prior(globals_.alloc)
    assert rest == pytest.approx(0.8)
    with BatchStore.open(path) as store:
        for mode in ("halves", "types"):
            got = completion_loglik(model, globals_, store, seed=5, mode=mode)
            assert got == completion_loglik(*lda(50.0 * phi + 0.1, prior), store, seed=5, mode=mode)


def test_score_does_not_depend_on_block_size_or_batching(tmp_path, corpora):
    """The same value bit for bit reading 1, 7, 333 or all held-out documents at a time, from a file whose training
    documents are in one batch or in four, or opened with another batch count; the split seed and mode matter."""
    path, phi, _ = corpora[100]
    model, globals_ = lda(30.0 * phi + 0.1, np.full(phi.shape[0], 0.1))
    with BatchStore.open(path) as store:
        ref = completion_loglik(model, globals_, store)
        for block in (1, 7, 333, 10**6):
            assert completion_loglik(model, globals_, store, block_docs=block) == ref
        assert completion_loglik(model, globals_, store, seed=1) != ref
        assert completion_loglik(model, globals_, store, mode="types") != ref
    X, _, _ = dirichlet_corpus(2000, 100, seed=100)  # the file of corpora[100], written in 4 fixed batches
    write_with_heldout(tmp_path / "four.h5", X, n_batches=4)
    with BatchStore.open(tmp_path / "four.h5") as store, BatchStore.open(path, n_batches=5) as five:
        assert store.n_batches == 4 and five.n_batches == 5
        assert completion_loglik(model, globals_, store, block_docs=64) == ref
        assert completion_loglik(model, globals_, five, block_docs=250) == ref


def test_bad_input_is_a_one_line_error(tmp_path, corpora):
    path, phi, _ = corpora[100]
    X, _, _ = dirichlet_corpus(20, 10)
    write_documents(tmp_path / "plain.h5", X.word_ids, X.word_counts, X.doc_range, X.vocab_size)
    model, globals_ = lda(phi + 0.1, np.full(phi.shape[0], 0.1))
    mixture = Model(DPMixAlloc(gamma=1.0), Mult(0.1, phi.shape[1]))
    with BatchStore.open(tmp_path / "plain.h5") as plain, BatchStore.open(path) as store:
        cases = [((model, globals_, plain), {}, "holds no held-out documents"),
                 ((mixture, globals_, store), {}, "needs a topic model"),
                 ((model, globals_, store), {"mode": "thirds"}, "mode must be one of halves, types"),
                 ((model, globals_, store), {"block_docs": 0}, "block_docs must be an integer >= 1"),
                 ((model, globals_, store), {"seed": -1}, "seed must be a non-negative integer"),
                 (lda(np.ones((3, 7)), np.ones(3)) + (store,), {}, "vocabulary of V=25")]
        for args, kwargs, fragment in cases:
            with pytest.raises(BnpviError, match=fragment) as err:
                completion_loglik(*args, **kwargs)
            assert "\n" not in str(err.value)


# ------------------------------------------------------------------ the runner
@pytest.fixture(scope="module")
def bars_file(tmp_path_factory):
    """300 bars documents (20 bars on a 10 x 10 grid), 60 of them held out, training ones in 3 batches."""
    return bars_batch_file(tmp_path_factory.mktemp("bars") / "bars.h5", n_docs=300, heldout=0.2, n_batches=3)


def topic_run(compose_cfg, path, *extra):
    # obs.anneal_laps=0: every lap under the configured prior, so the last lap's score is the saved model's
    return compose_cfg("data=hdf5", f"data.path={path}", "init.K=10", "alg=memo", "moves=[]", "alg.n_laps=8",
                       "alg.converge_thr=-1", "obs.anneal_laps=0", *extra)


@pytest.mark.parametrize("model", ["hdp_topic", "lda"])
def test_run_records_heldout_loglik_that_rises(compose_cfg, tmp_path, bars_file, model, caplog):
    caplog.set_level(logging.INFO, logger="bnpvi")
    summary = runner.train(topic_run(compose_cfg, bars_file, f"model={model}"), tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    score = trace["heldout_loglik"].to_numpy()
    assert np.all(np.isfinite(score)) and score[-1] > score[0] + 1e-3, score
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["heldout_loglik"] == summary["heldout_loglik"] == score[-1]
    assert on_disk["heldout_tokens"] == 60 * 50  # halves of 100-token documents
    assert sum(f"heldout {value:.4f}" in caplog.text for value in score) == len(score)


def test_heldout_every_eval_every_laps_and_at_the_last(compose_cfg, tmp_path, bars_file):
    """eval_every=3 over 7 laps: laps 3, 6 and the last (7) are scored, the others empty; the value at a lap is
    that of the globals after it, recomputed directly."""
    cfg = topic_run(compose_cfg, bars_file, "model=hdp_topic", "eval_every=3", "alg.n_laps=7",
                    "heldout_split=types", "heldout_seed=4")
    (tmp_path / "run").mkdir()
    run = runner.Run(cfg, tmp_path / "run")
    try:
        run.train()
        with BatchStore.open(bars_file) as store:
            direct = completion_loglik(run.model, run.alg.globals, store, seed=4, mode="types")
    finally:
        run.close()
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    due = trace["lap"].isin([3, 6, 7])
    assert trace.loc[due, "heldout_loglik"].notna().all() and trace.loc[~due, "heldout_loglik"].isna().all()
    assert trace["heldout_loglik"].iloc[-1] == direct["loglik_per_token"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["heldout_tokens"] == direct["n_tokens"]


def test_evaluation_leaves_the_run_unchanged(compose_cfg, tmp_path, bars_file):
    """Stochastic VB draws its batch order from the run's generator: a run on the file with held-out documents
    and one on the same training documents without them have the same trace, so the evaluation draws nothing."""
    with BatchStore.open(bars_file) as store:
        train = WordCountBatch.concat([store.read_batch(b) for b in range(store.n_batches)])
    write_documents(tmp_path / "no_heldout.h5", train.word_ids, train.word_counts, train.doc_range, train.vocab_size,
                    n_batches=3)
    common = ["model=lda", "alg=sovb", "eval_every=1", "seed=2"]
    runner.train(topic_run(compose_cfg, bars_file, *common), tmp_path / "with")
    runner.train(topic_run(compose_cfg, tmp_path / "no_heldout.h5", *common), tmp_path / "without")
    with_ = pd.read_csv(tmp_path / "with" / "trace.csv")
    without = pd.read_csv(tmp_path / "without" / "trace.csv")
    assert with_["heldout_loglik"].notna().all() and "heldout_loglik" not in without.columns
    pd.testing.assert_frame_equal(with_.drop(columns=["elapsed_s", "heldout_loglik"]),
                                  without.drop(columns=["elapsed_s"]), check_exact=True)


@pytest.mark.parametrize("case", [["model=hdp_topic"], ["model=lda", "alg=sovb"]])
def test_resume_mid_lap_is_exact_with_heldout_evaluation(compose_cfg, tmp_path, bars_file, case):
    cfg = topic_run(compose_cfg, bars_file, *case, "alg.n_laps=5", "checkpoint_every=1", "eval_every=2", "seed=7")
    summary, trace = assert_resume_is_exact(cfg, tmp_path)
    assert "heldout_loglik" in summary
    assert trace["heldout_loglik"].notna().tolist() == [False, True, False, True, True]


def test_bad_heldout_split_or_seed_is_a_one_line_error(compose_cfg, tmp_path, bars_file):
    (tmp_path / "cli").mkdir()
    for override, fragment in (("heldout_split=thirds", "heldout_split must be one of halves, types, got 'thirds'"),
                               ("heldout_seed=-1", "heldout_seed must be a non-negative integer")):
        with pytest.raises(BnpviError, match=fragment) as err:
            runner.train(topic_run(compose_cfg, bars_file, "model=lda", override), tmp_path / "run")
        assert "\n" not in str(err.value) and not (tmp_path / "run").exists()
    proc = subprocess.run([sys.executable, "-m", "bnpvi.cli.train", "model=lda", "data=hdf5", f"data.path={bars_file}",
                           "heldout_split=thirds"], cwd=tmp_path / "cli", capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == "bnpvi-train: error: heldout_split must be one of halves, types, got 'thirds'"
    assert not list((tmp_path / "cli").rglob("trace.csv"))
