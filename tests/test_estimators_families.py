"""The estimators of topic models and HMMs (bnpvi/api/topic_estimators.py, hmm_estimators.py): equality with the
bnpvi-train run of the same config on a file converted with the same batches, fitted attributes, scikit-learn's
clone / get_params / set_params / GridSearchCV, and one-line errors for bad input."""
from __future__ import annotations

import itertools

import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from omegaconf import OmegaConf
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import bnpvi
from bnpvi.api.estimators import LDA, HDPHMM, FiniteHMM, HDPTopicModel
from bnpvi.data.bars import make_bars
from bnpvi.data.batch import SeqBatch
from bnpvi.data.convert import convert
from bnpvi.data.toy import make_toy_sequences
from bnpvi.learn import runner
from setups import one_line_error


@pytest.fixture(scope="module")
def docs() -> sp.csr_matrix:
    return make_bars(240, seed=5)[0].csr()


@pytest.fixture(scope="module")
def seqs() -> list[np.ndarray]:
    X, seq_range, _ = make_toy_sequences(8, 120, seed=4)
    return np.split(X, seq_range[1:-1])


def cli_run(est, source, tmp_path, **convert_options) -> tuple[dict, object]:
    """The bnpvi-train run of ``est``'s config on ``source`` converted with 3 batches: its summary and run dir."""
    data = convert(source, tmp_path / "data.h5", n_batches=3, **convert_options)
    cfg = est.train_config()
    cfg.data.path = str(data)
    return runner.train(cfg, tmp_path / "run"), tmp_path / "run"


def test_topic_fit_equals_the_bnpvi_train_run_of_the_same_config_and_batches(docs, tmp_path, compose_cfg):
    est = HDPTopicModel(n_laps=5, n_batches=3, alpha=0.4, birth_max_per_lap=2, random_state=2).fit(docs)
    cfg = compose_cfg("model=hdp_topic", "data=hdf5", "model.alpha=0.4", "alg.n_laps=5", "alg.n_batches=3",
                      "moves.birth.max_per_lap=2", "seed=2", "plots=true")  # (bnpvi-train's default)
    composed = est.train_config()
    composed.data.path = cfg.data.path = "x.h5"
    assert OmegaConf.to_container(composed) == OmegaConf.to_container(cfg)
    sp.save_npz(tmp_path / "docs.npz", docs)
    summary, run_dir = cli_run(est, tmp_path / "docs.npz", tmp_path)
    assert summary["K"] > 1, "births did not run: the test cannot tell"
    assert est.elbo_ == summary["elbo"] and est.n_components_ == summary["K"]
    np.testing.assert_array_equal(est.cluster_ids_, summary["uids"])
    with h5py.File(run_dir / "doc_topics.h5", "r") as f:
        np.testing.assert_array_equal(est.transform(docs), f["proportions"][()])
        np.testing.assert_array_equal(est.fit_transform(docs), f["proportions"][()])


def test_hmm_fit_equals_the_bnpvi_train_run_of_the_same_config_and_batches(seqs, tmp_path):
    est = HDPHMM(n_laps=4, n_batches=3, sticky_kappa=50.0, random_state=1).fit(seqs)
    np.savez(tmp_path / "seqs.npz", X=np.concatenate(seqs), doc_range=np.cumsum([0] + [len(s) for s in seqs]))
    summary, run_dir = cli_run(est, tmp_path / "seqs.npz", tmp_path, sequences="doc_range")
    assert summary["K"] > 1, "births did not run: the test cannot tell"
    assert est.elbo_ == summary["elbo"] and est.n_components_ == summary["K"]
    np.testing.assert_array_equal(est.cluster_ids_, summary["uids"])
    table = pd.read_csv(run_dir / "segmentation.csv")
    np.testing.assert_array_equal(np.concatenate(est.predict(seqs)), table["state"])
    assert [p.shape[0] for p in est.predict(seqs)] == [s.shape[0] for s in seqs]


def test_topic_model_attributes(docs):
    vocab = [f"word{v}" for v in range(docs.shape[1])]
    est = LDA(n_components=4, n_laps=3, random_state=0).fit(docs, vocabulary=vocab)
    assert est.n_components_ == 4 and est.n_features_in_ == docs.shape[1]
    assert est.topics_.shape == (4, docs.shape[1])
    np.testing.assert_allclose(est.topics_.sum(axis=1), 1.0, rtol=1e-12)
    assert est.vocabulary_ == vocab
    words = est.top_words(5)
    assert len(words) == 4 and all(len(row) == 5 and set(row) <= set(vocab) for row in words)
    weights = est.transform(docs[:7])
    assert weights.shape == (7, 4)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)  # LDA: no mass beyond K
    assert est.score(docs) == est.fitted_model_.score(docs) < 0
    assert LDA(n_components=4, n_laps=3).fit(docs).top_words(2)[0][0] in range(docs.shape[1])  # ids without a vocabulary


def test_hmm_attributes(seqs):
    est = FiniteHMM(n_components=3, n_laps=3, random_state=0).fit(seqs)
    assert est.n_components_ == 3 and est.n_features_in_ == 2
    np.testing.assert_allclose(est.transmat_.sum(axis=1), 1.0, rtol=1e-12)
    assert est.startprob_.shape == (3,) and est.startprob_.sum() == pytest.approx(1.0)
    marginals = est.predict_proba(seqs[:2])
    assert [m.shape for m in marginals] == [(120, 3), (120, 3)]
    paths = est.predict(seqs[:2])
    assert np.mean(paths[0] == est.cluster_ids_[marginals[0].argmax(axis=1)]) > 0.9  # stable ids in both
    assert np.isfinite(est.score(seqs))
    hdp = HDPHMM(n_laps=2).fit(seqs)
    assert (hdp.transmat_.sum(axis=1) < 1.0).all()  # the mass on states beyond K is left out


def test_clone_params_and_grid_search(docs, seqs):
    for est in (HDPTopicModel(gamma=3.0, n_laps=2), LDA(n_components=5), HDPHMM(sticky_kappa=10.0), FiniteHMM(n_components=3)):
        twin = clone(est)
        assert twin.get_params() == est.get_params() and twin is not est
    assert HDPHMM().set_params(birth_max_per_lap=1, sticky_kappa=2.0).get_params()["sticky_kappa"] == 2.0
    search = GridSearchCV(LDA(n_components=3, n_laps=2), {"alpha": [0.1, 1.0]}, cv=2).fit(docs)
    assert search.best_params_["alpha"] in (0.1, 1.0) and np.isfinite(search.best_score_)
    search = GridSearchCV(FiniteHMM(n_components=2, n_laps=2), {"sticky_kappa": [0.0, 10.0]}, cv=2).fit(seqs)
    assert np.isfinite(search.best_score_)


def test_bad_keywords_are_type_errors_naming_them(docs, seqs):
    with pytest.raises(TypeError, match="'sticky_kappa'"):
        HDPTopicModel(sticky_kappa=1.0)
    with pytest.raises(TypeError, match="'birth_Kmax'"):
        LDA(birth_Kmax=3)  # a finite model has no moves
    with pytest.raises(TypeError, match="'reassign_max_atoms'"):
        HDPHMM(reassign_max_atoms=3)  # reassign is a mixture's move
    with pytest.raises(ValueError, match="obs='ar_gauss' is not one of \\['mult', 'gauss', 'diag_gauss', 'zm_gauss', "
                                         "'bern'\\]"):
        HDPTopicModel(obs="ar_gauss").fit(docs)
    with pytest.raises(ValueError, match="moves=\\['reassign'\\] must be a list of \\['birth', 'merge', 'delete'\\]"):
        HDPHMM(moves=["reassign"]).fit(seqs)
    with pytest.raises(TypeError, match="sV sets obs.sV, which obs=gauss does not have"):
        FiniteHMM(sV=1.0).fit(seqs)


@pytest.mark.parametrize("fit, problem", [
    (lambda d, s: LDA(n_laps=1).fit(-d), "counts must be non-negative whole numbers"),
    (lambda d, s: LDA(n_laps=1).fit(sp.vstack([d[:3], sp.csr_matrix((1, d.shape[1]))])), "document 3 has no words"),
    (lambda d, s: LDA(n_laps=1).fit(d, vocabulary=["a", "b"]), "vocab has 2 words"),
    (lambda d, s: HDPHMM(n_laps=1).fit(s[0][:, 0]), "list of \\(T_i, D\\) arrays"),  # one 2-D array: one sequence
    (lambda d, s: HDPHMM(n_laps=1).fit([s[0], s[1][:, :1]]), "sequence 1 has D=1"),
    (lambda d, s: FiniteHMM(n_laps=1).fit(s).predict([s[0][:, :1]]), "the model was trained on D=2"),
])
def test_bad_data_is_a_one_line_error(docs, seqs, fit, problem):
    with one_line_error(problem):
        fit(docs, seqs)


def test_transform_checks_the_vocabulary_size(docs):
    est = LDA(n_components=2, n_laps=1).fit(docs)
    with pytest.raises(ValueError, match=f"X has 3 features, but LDA is expecting {docs.shape[1]} features"):
        est.transform(sp.csr_matrix((2, 3)))


def test_lazy_exports():
    assert (bnpvi.HDPTopicModel, bnpvi.LDA, bnpvi.HDPHMM, bnpvi.FiniteHMM) == (HDPTopicModel, LDA, HDPHMM, FiniteHMM)


def test_hmmlearn_and_scikit_learn_habits(seqs, docs):
    """HMMs take hmmlearn's (X, lengths) in every method (paths and marginals come back as one array); LDA has
    components_ (λ̂, the topics before normalising) and perplexity = exp(−score)."""
    X, lengths = np.vstack(seqs), [len(s) for s in seqs]
    hmm = FiniteHMM(n_components=3, n_laps=3, random_state=0).fit(X, lengths)
    same = FiniteHMM(n_components=3, n_laps=3, random_state=0).fit(seqs)
    assert hmm.elbo_ == same.elbo_
    np.testing.assert_array_equal(hmm.predict(X, lengths), np.concatenate(same.predict(seqs)))
    assert hmm.predict_proba(X, lengths).shape == (X.shape[0], 3)
    assert hmm.score(X, lengths) == same.score(seqs)
    assert hmm.means_.shape == (3, X.shape[1]) and hmm.covars_.shape == (3, X.shape[1], X.shape[1])
    with pytest.raises(bnpvi.BnpviError, match="lengths must be positive integers that sum to the"):
        hmm.predict(X, [1])
    lda = LDA(n_components=3, n_laps=3, random_state=0).fit(docs)
    np.testing.assert_allclose(lda.components_ / lda.components_.sum(axis=1, keepdims=True), lda.topics_)
    assert lda.perplexity(docs[:5]) == pytest.approx(np.exp(-lda.score(docs[:5])))


def test_hmm_decode_and_score_samples_are_the_brute_force_max_and_sum_over_every_path(seqs):
    """hmmlearn's decode (the best path's score) and score_samples (ln Σ over paths): on a short sequence, the
    max and the log-sum-exp of the score of every one of the K^T state paths, enumerated."""
    hmm = FiniteHMM(n_components=3, n_laps=4, random_state=0).fit(seqs)
    short = [seqs[0][:6], seqs[1][:5]]
    model, globals_ = hmm.fitted_model_.model, hmm.fitted_model_.globals_
    log_start, log_trans = model.alloc._potentials(globals_.alloc)
    best, total = 0.0, 0.0
    for x in short:
        log_lik = model.obs.expected_log_lik(globals_.obs, SeqBatch(x, np.array([0, len(x)])))
        scores = [log_start[p[0]] + sum(log_trans[a, b] for a, b in zip(p, p[1:])) + log_lik[np.arange(len(x)), p].sum()
                  for p in map(np.array, itertools.product(range(3), repeat=len(x)))]
        best, total = best + max(scores), total + logsumexp(scores)
    log_prob, paths = hmm.decode(short)
    assert log_prob == pytest.approx(best, rel=1e-12)
    assert [p.tolist() for p in paths] == [p.tolist() for p in hmm.predict(short)]
    log_norm, marginals = hmm.score_samples(np.vstack(short), [6, 5])
    assert log_norm == pytest.approx(total, rel=1e-10) and log_norm == pytest.approx(hmm.score(short) * 11)
    np.testing.assert_allclose(marginals, np.vstack(hmm.predict_proba(short)))


def test_hmm_sample_follows_the_fitted_chain_and_emissions(seqs):
    hmm = FiniteHMM(n_components=3, n_laps=4, random_state=0).fit(seqs)
    X, states = hmm.sample(20000, random_state=1)
    assert X.shape == (20000, seqs[0].shape[1]) and set(states) <= set(hmm.cluster_ids_)
    position = {int(uid): k for k, uid in enumerate(hmm.cluster_ids_)}
    z = np.array([position[int(s)] for s in states])
    counts = np.zeros((3, 3))
    np.add.at(counts, (z[:-1], z[1:]), 1.0)
    visited = counts.sum(axis=1) > 500
    expected = hmm.transmat_ / hmm.transmat_.sum(axis=1, keepdims=True)
    np.testing.assert_allclose((counts / counts.sum(axis=1, keepdims=True))[visited], expected[visited], atol=0.03)
    for k in np.flatnonzero(visited):  # within 5 standard errors of the state's mean
        error = np.sqrt(np.diag(hmm.covars_[k]) / np.sum(z == k))
        assert np.all(np.abs(X[z == k].mean(axis=0) - hmm.means_[k]) < 5.0 * error)
    assert hmm.sample(5, random_state=1)[0].tolist() == hmm.sample(5, random_state=1)[0].tolist()
    with one_line_error("obs=ar_gauss has no state means"):
        FiniteHMM(n_components=2, obs="ar_gauss", n_laps=2, random_state=0).fit(seqs).sample(3)


def test_a_mixture_of_documents_takes_a_sparse_count_matrix(docs, tmp_path):
    """DPMixture(obs="mult"): one cluster per document, from a SciPy sparse or a dense count matrix alike, the
    same run as bnpvi-train's on the converted file."""
    sparse = bnpvi.DPMixture(obs="mult", n_laps=6, n_batches=3, random_state=0).fit(docs)
    dense = bnpvi.DPMixture(obs="mult", n_laps=6, n_batches=3, random_state=0).fit(docs.toarray())
    assert sparse.elbo_ == dense.elbo_ and sparse.n_components_ == dense.n_components_ > 1
    np.testing.assert_array_equal(sparse.predict(docs[:7]), sparse.labels_[:7])
    assert np.isfinite(sparse.score(docs[:10])) and sparse.predict_proba(docs[:3]).shape == (3, sparse.n_components_)
    sp.save_npz(tmp_path / "docs.npz", docs)
    summary, _ = cli_run(bnpvi.DPMixture(obs="mult", n_laps=6, n_batches=3, random_state=0), tmp_path / "docs.npz",
                         tmp_path)
    assert summary["elbo"] == pytest.approx(sparse.elbo_, rel=1e-12) and summary["K"] == sparse.n_components_
    with one_line_error("document 0 has a count of 0.5"):
        sparse.predict(sp.csr_matrix(np.r_[[np.full(docs.shape[1], 0.5)]]))
    with one_line_error("documents take no sample_weight"):
        bnpvi.DPMixture(obs="mult").fit(docs, sample_weight=np.ones(docs.shape[0]))
