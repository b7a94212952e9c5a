"""HDP topic model and LDA: summaries, the ELBO from summaries, the top-level bound, the global step."""
import numpy as np
import pytest
from scipy.special import entr, gammaln

from bnpvi.alloc import DPMixAlloc, HDPTopicAlloc, LDAAlloc, Local, hdp_top
from bnpvi.data.batch import WordCountBatch
from bnpvi.errors import BnpviError
from bnpvi.learn.work import process_batch
from bnpvi.model import Globals, Model
from bnpvi.obs import make_obs
from bnpvi.stats import Responsibilities
from setups import corpus, dense_local, direct_allocation_terms, make_model


def random_globals(model, K, seed=1):
    rng = np.random.default_rng(seed)
    stats = model.empty_stats(K).with_fields(S=rng.gamma(1.0, 2.0, size=(K, model.obs.V)), N=np.ones(K))
    obs = model.obs.posterior(stats.N, stats.select(model.obs_fields))
    if isinstance(model.alloc, HDPTopicAlloc):
        alloc = {"rho": rng.uniform(0.1, 0.6, K), "omega": rng.uniform(2.0, 30.0, K)}
    else:
        alloc = model.alloc.global_step(stats)
    return Globals(stats, alloc, obs)


@pytest.mark.parametrize("alloc", [HDPTopicAlloc(gamma=5.0, alpha=0.7), LDAAlloc(alpha=1.5)], ids=["hdp", "lda"])
def test_elbo_from_summaries_equals_the_document_by_document_elbo(alloc):
    """Memoized exactness: θ_d made under one β̂, the ELBO taken under another (thesis §5.4.3)."""
    model = make_model(alloc)
    batch = corpus()
    K = 4
    made_under = random_globals(model, K, seed=1)
    log_lik, local = dense_local(model, batch, made_under)
    stats = model.summarize(batch, local)
    now = random_globals(model, K, seed=2).alloc
    assert alloc.elbo(stats, now) == pytest.approx(direct_allocation_terms(alloc, batch, local, now), rel=1e-10)


@pytest.mark.parametrize("alloc", [HDPTopicAlloc(gamma=5.0, alpha=0.7), LDAAlloc(alpha=1.5)], ids=["hdp", "lda"])
def test_the_memory_flat_local_step_gives_the_dense_summaries(alloc):
    """With obs=mult the local step looks E ln φ up by word and keeps no responsibilities; every summary
    (N, H, P, Q, G, the remainders, S) equals that of the dense (entries, K) path, and H and S equal
    their direct formulas −Σ c r ln r and Σ_u c_u r_uk at word v_u."""
    model = make_model(alloc)
    batch = corpus(seed=4, n_docs=30)
    g = random_globals(model, 5, seed=3)
    log_lik, flat = model.local_step(batch, g)
    assert flat.resp is None and log_lik.table.shape == (30, 5)
    dense = dense_local(model, batch, g)[1]
    a, b = model.summarize(batch, flat), model.summarize(batch, dense)
    assert a.allclose(b, rtol=1e-12, atol=1e-12)
    r, c = dense.resp.values, batch.word_counts
    np.testing.assert_allclose(a["H"], c @ entr(r), rtol=1e-12)
    S = np.zeros((30, 5))
    np.add.at(S, batch.word_ids, c[:, None] * r)
    np.testing.assert_allclose(a["S"], S.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("alloc", [HDPTopicAlloc(), LDAAlloc()], ids=["hdp", "lda"])
def test_summaries_add_over_batches_and_types_share_responsibilities(alloc):
    model = make_model(alloc)
    batch = corpus(seed=3, n_docs=10)
    g = random_globals(model, 5)
    whole = model.summarize(batch, model.local_step(batch, g)[1])
    parts = [batch.take(np.arange(0, 4)), batch.take(np.arange(4, 10))]
    total = model.summarize(parts[0], model.local_step(parts[0], g)[1]) + \
        model.summarize(parts[1], model.local_step(parts[1], g)[1])
    assert whole.allclose(total, rtol=1e-10, atol=1e-10)
    # a document written with one row per token gives the same summaries (thesis §5.3.5)
    d = 2
    lo, hi = batch.doc_range[d], batch.doc_range[d + 1]
    one = batch.take([d])
    ids = np.repeat(batch.word_ids[lo:hi], batch.word_counts[lo:hi].astype(int)).astype(np.int32)
    tokens = WordCountBatch(ids, np.ones(ids.size), np.array([0, ids.size], dtype=np.int64), batch.vocab_size)
    a = model.summarize(one, model.local_step(one, g)[1])
    b = model.summarize(tokens, model.local_step(tokens, g)[1])
    assert a.allclose(b, rtol=1e-9, atol=1e-9)


def test_global_step_never_lowers_the_elbo_and_returns_the_prior_without_documents():
    alloc = HDPTopicAlloc(gamma=4.0, alpha=0.5)
    model = make_model(alloc)
    batch = corpus(seed=4, n_docs=20)
    g = random_globals(model, 6, seed=5)
    stats = model.summarize(batch, model.local_step(batch, g)[1])
    before = alloc.elbo(stats, g.alloc)
    after = alloc.elbo(stats, alloc.global_step(stats, g.alloc))
    assert after >= before - 1e-9 * abs(before)
    empty = model.empty_stats(6).with_fields(P=np.zeros(6), n_docs=np.float64(0.0))
    params = alloc.global_step(empty, dict(zip(("rho", "omega"), hdp_top.uniform_sticks(6, 4.0))))
    np.testing.assert_allclose(params["rho"], 1.0 / 5.0, rtol=1e-4)
    np.testing.assert_allclose(params["omega"], 5.0, rtol=1e-3)


@pytest.mark.parametrize("K", [1, 6, 100])
def test_initial_globals_without_documents_give_every_topic_the_same_weight(K):
    """The initial global step (no warm start, no document summarised) keeps near-uniform sticks, so the first
    local step gives every initial topic a chance; the prior's geometric means would leave the last topics of an
    abundant start unused (docs/topics.md). With a warm start it optimises (the test above)."""
    alloc = HDPTopicAlloc(gamma=10.0, alpha=0.5)
    model = make_model(alloc)
    empty = model.empty_stats(K).with_fields(P=np.zeros(K), n_docs=np.float64(0.0))
    beta = hdp_top.stick_means(alloc.global_step(empty)["rho"])
    np.testing.assert_allclose(beta[:K], (1.0 - min(0.05, 1.0 / K)) / K, rtol=1e-12)
    assert beta[K] == pytest.approx(min(0.05, 1.0 / K))


def test_learned_alpha_maximises_the_elbo_which_stays_exact_document_by_document():
    """With learn_alpha the global step's α is the ELBO's maximiser over α for its sticks (checked on a grid
    around it), the global step does not lower the ELBO of the fixed-α one it starts from, and the ELBO
    from summaries still equals the document-by-document ELBO under the learned α."""
    alloc = HDPTopicAlloc(gamma=4.0, alpha=0.5, learn_alpha=True)
    model = make_model(alloc)
    batch = corpus(seed=4, n_docs=20)
    g = random_globals(model, 6, seed=5)
    log_lik, local = dense_local(model, batch, g)
    stats = model.summarize(batch, local)
    fixed = HDPTopicAlloc(gamma=4.0, alpha=0.5).global_step(stats, g.alloc)
    params = alloc.global_step(stats, g.alloc)
    alpha = float(params["alpha"])
    assert alpha != pytest.approx(0.5)
    value = alloc.elbo(stats, params)
    assert value >= alloc.elbo(stats, fixed) - 1e-9 * abs(value)
    for factor in (0.9, 0.99, 1.01, 1.1):
        assert alloc.elbo(stats, dict(params, alpha=alpha * factor)) < value
    assert value == pytest.approx(direct_allocation_terms(alloc, batch, local, params), rel=1e-10)
    assert alloc.warm_start(params, [[0], [1, 2], [3], [4], [5], []])["alpha"] == params["alpha"]


def test_surrogate_lies_below_the_expected_cumulant():
    """E_q[c_Dir(α β(u))] ≥ its bound K ln α + Σ_m E ln β_m (thesis Eq. 5.23-5.25), by Monte Carlo, and the
    pointwise gap is lnΓ(1+α) − Σ_m lnΓ(1 + α β_m)."""
    rng = np.random.default_rng(0)
    for K, alpha in ((1, 0.5), (4, 0.2), (10, 3.0)):
        rho, omega = rng.uniform(0.05, 0.6, K), rng.uniform(1.0, 50.0, K)
        u = rng.beta(rho * omega, (1 - rho) * omega, size=(200_000, K))
        rest = np.cumprod(1 - u, axis=1)
        beta = np.concatenate([u[:, :1], u[:, 1:] * rest[:, :-1], rest[:, -1:]], axis=1)
        exact = gammaln(alpha) - gammaln(alpha * beta).sum(axis=1)
        bound = K * np.log(alpha) + np.log(beta).sum(axis=1)
        np.testing.assert_allclose(exact - bound, gammaln(1 + alpha) - gammaln(1 + alpha * beta).sum(axis=1),
                                   rtol=1e-6, atol=1e-8)
        assert np.all(exact >= bound - 1e-9)
        assert exact.mean() >= bound.mean()


def fixed_assignment_elbo(model, batch, local, K_total: int, rounds: int = 30) -> float:
    """The ELBO of the assignments r of ``local`` with K_total topics (extra ones empty), maximised over
    θ_d (closed form given r and β̂) and q(u), alternately."""
    alloc = model.alloc
    N_d, r = local.tables["doc_counts"], local.resp.values
    pad = K_total - N_d.shape[1]
    N_d, r = np.pad(N_d, ((0, 0), (0, pad))), np.pad(r, ((0, 0), (0, pad)))
    rho, omega = hdp_top.uniform_sticks(K_total, alloc.gamma)
    params = {"rho": rho, "omega": omega}
    for _ in range(rounds):
        prior, rest = alloc.doc_prior(params)
        fixed = Local(Responsibilities(r, K_total), {"doc_counts": N_d, "counts": local.tables["counts"],
                                                     "prior": prior, "prior_rest": rest,
                                                     "entropy": local.tables["counts"] @ entr(r)})
        stats = model.summarize(batch, fixed)
        params = alloc.global_step(stats, params)
    return model.elbo(stats, model.global_step(stats, params))


def test_empty_topics_lower_the_bound_by_a_small_penalty(capsys):
    """The model-selection check of Hughes, Kim & Sudderth 2015 (Fig. 2; thesis Fig. 5.3): the same
    assignments with J = 1, 2, 3 extra empty topics. L_data and L_ent do not change; the surrogate
    bound drops a little (the exact objective would not change, a point estimate would rise)."""
    alloc = HDPTopicAlloc(gamma=10.0, alpha=0.5)
    model = make_model(alloc)
    batch = corpus(seed=6, n_docs=40)
    local = dense_local(model, batch, random_globals(model, 4, seed=7))[1]
    base = fixed_assignment_elbo(model, batch, local, 4)
    changes = np.array([fixed_assignment_elbo(model, batch, local, 4 + J) - base for J in (1, 2, 3)])
    with capsys.disabled():
        print(f"\nsurrogate ELBO change with 1, 2, 3 empty topics (D = 40): {np.round(changes, 4)}")
    assert np.all(changes < 0) and np.all(np.diff(changes) < 0)  # a penalty, growing with J
    # small: most of the D ln α that the bound's constant charges per topic is given back by the other terms
    assert np.all(changes > 0.25 * 40 * np.log(alloc.alpha) * np.arange(1, 4))


def test_bad_settings_are_one_line_errors():
    for kwargs, name in (({"gamma": 0.0}, "model.gamma"), ({"alpha": -1.0}, "model.alpha"),
                         ({"max_iters": 0}, "model.max_iters"), ({"n_restarts": 1.5}, "model.n_restarts")):
        with pytest.raises(BnpviError, match=name):
            HDPTopicAlloc(**kwargs)


def test_merge_gain_from_tracked_terms_equals_the_explicitly_merged_state():
    """Merging topics a and b with the tracked P, Q, G, H (Hughes, Kim & Sudderth 2015 §5.1) gives the
    summaries, and so the ELBO, of explicitly merged responsibilities and document weights
    (r'_a = r_a + r_b, θ'_a = θ_a + θ_b), for every pair; the tracked terms of the memory-flat local step
    (word table, responsibilities never kept) are those of the dense one."""
    alloc = HDPTopicAlloc(gamma=5.0, alpha=0.6)
    model = make_model(alloc)
    batch = corpus(seed=8, n_docs=25)
    K = 4
    g = random_globals(model, K, seed=9)
    pairs = np.array([[a, b] for a in range(K) for b in range(a + 1, K)])
    local = dense_local(model, batch, g, pairs=pairs)[1]
    stats = model.summarize(batch, local)
    terms = alloc.merge_terms(local, pairs)
    flat = model.local_step(batch, g, pairs=pairs)[1]
    assert flat.resp is None
    for name, value in alloc.merge_terms(flat, pairs).items():
        np.testing.assert_allclose(value, terms[name], rtol=1e-12, atol=1e-12)
    t = local.tables
    for m, (a, b) in enumerate(pairs):
        merged = stats.merge(a, b, {name: terms[name][m] for name in terms})
        keep = [k for k in range(K) if k != b]
        r, N_d, prior = local.resp.values.copy(), t["doc_counts"].copy(), t["prior"].copy()
        r[:, a] += r[:, b]
        N_d[:, a] += N_d[:, b]
        prior[a] += prior[b]
        r = np.ascontiguousarray(r[:, keep])
        explicit = Local(Responsibilities(r, K - 1),
                         {"doc_counts": N_d[:, keep], "counts": t["counts"], "prior": prior[keep],
                          "prior_rest": t["prior_rest"], "entropy": t["counts"] @ entr(r)})
        brute = model.summarize(batch, explicit)
        assert merged.allclose(brute, rtol=1e-10, atol=1e-10)
        sources = [[a, b] if k == a else [k] for k in keep]
        warm = alloc.warm_start(g.alloc, sources)
        assert model.evaluate(merged, warm)[0] == pytest.approx(model.evaluate(brute, warm)[0], rel=1e-12)


def test_delete_candidate_is_the_local_step_of_the_model_without_the_topic():
    """A whole-data delete's candidate for a batch is the local step under the other K − 1 topics, the
    same as that of a model built without the topic (so its ELBO is exact)."""
    alloc = HDPTopicAlloc(gamma=5.0, alpha=0.6)
    model = make_model(alloc)
    batch = corpus(seed=10, n_docs=15)
    K, target = 5, 2
    g = random_globals(model, K, seed=11)
    log_lik = model.obs.expected_log_lik(g.obs, alloc.atoms(batch))
    candidate = model.summarize(batch, alloc.local_step_without(batch, log_lik, g.alloc, target))
    keep = [k for k in range(K) if k != target]
    beta = hdp_top.stick_means(g.alloc["rho"])
    without = Globals(g.stats.remove([target]), {"rho": hdp_top.sticks_from_means(beta[keep]), "omega": g.alloc["omega"][keep]},
                      {name: value[keep] for name, value in g.obs.items()})
    prior_direct = alloc.doc_prior(without.alloc)
    np.testing.assert_allclose(prior_direct[0], alloc.alpha * beta[keep], rtol=1e-10)
    direct = model.summarize(batch, model.local_step(batch, without)[1])
    assert candidate.allclose(direct, rtol=1e-9, atol=1e-9)


def test_a_delete_started_from_the_current_state_is_a_valid_q_for_every_document():
    """Given the batch's current local step, a delete re-infers the documents that used the target from the
    likelihood and starts the others from their N_d without it (thesis §5.5.2's target set). The joined
    result is one genuine q: its N_d, entropy and word counts are those of its responsibilities, and the
    target documents' q is the fresh local step's, bit for bit."""
    from bnpvi.alloc.topic import TARGET_MIN, _rows
    alloc = HDPTopicAlloc(gamma=5.0, alpha=0.6)
    model = make_model(alloc)
    batch = corpus(seed=12, n_docs=40)
    K, target = 5, 1
    g = random_globals(model, K, seed=13)
    log_lik, local = dense_local(model, batch, g)
    fresh = local.tables["doc_counts"][:, target] > TARGET_MIN
    assert 0 < fresh.sum() < 40
    joined = alloc.local_step_without(batch, log_lik, g.alloc, target, local)
    r, c = joined.resp.values, batch.word_counts
    doc = np.repeat(np.arange(40), np.diff(batch.doc_range))
    np.testing.assert_allclose(joined.tables["doc_counts"], np.stack([np.bincount(doc, c * r[:, k], 40)
                                                                      for k in range(K - 1)], axis=1), atol=1e-9)
    np.testing.assert_allclose(joined.tables["entropy"], c @ entr(r), rtol=1e-12)
    cold = alloc.local_step_without(batch, log_lik, g.alloc, target)
    rows = _rows(batch.doc_range, np.flatnonzero(fresh))[0]
    np.testing.assert_array_equal(joined.resp.values[rows], cold.resp.values[rows])
    flat = alloc.local_step_without(batch, model.local_step(batch, g)[0], g.alloc, target, local)
    assert model.summarize(batch, flat).allclose(model.summarize(batch, joined), rtol=1e-12, atol=1e-12)


def test_a_birth_started_from_the_current_state_is_a_valid_q_for_every_document():
    """Under a birth's globals (target replaced by its first piece, two pieces appended), given the batch's
    current local step, the documents that used the target are re-inferred from the likelihood, bit for bit as
    a fresh local step does, and the others take one iteration from their N_d with nothing on the new pieces.
    The joined result is one genuine q: its N_d, entropy and word counts are those of its responsibilities."""
    from bnpvi.alloc.topic import TARGET_MIN, _rows
    from bnpvi.model import Globals
    alloc = HDPTopicAlloc(gamma=5.0, alpha=0.6)
    model = make_model(alloc)
    batch = corpus(seed=14, n_docs=40)
    K, target, J = 5, 2, 3
    g = random_globals(model, K, seed=15)
    log_lik, local = dense_local(model, batch, g)
    fresh = local.tables["doc_counts"][:, target] > TARGET_MIN
    assert 0 < fresh.sum() < 40
    born = random_globals(model, K + J - 1, seed=16)
    params = alloc.split_params(g.alloc, target, np.full(J, 1.0 / J))
    born = Globals(born.stats, params, born.obs)
    born_log_lik = model.obs.expected_log_lik(born.obs, alloc.atoms(batch))
    joined = alloc.local_step_split(batch, born_log_lik, params, [target], local)
    r, c = joined.resp.values, batch.word_counts
    doc = np.repeat(np.arange(40), np.diff(batch.doc_range))
    np.testing.assert_allclose(joined.tables["doc_counts"], np.stack([np.bincount(doc, c * r[:, k], 40)
                                                                      for k in range(K + J - 1)], axis=1), atol=1e-9)
    np.testing.assert_allclose(joined.tables["entropy"], c @ entr(r), rtol=1e-12)
    cold = alloc.local_step(batch, born_log_lik, params)
    rows = _rows(batch.doc_range, np.flatnonzero(fresh))[0]
    np.testing.assert_array_equal(joined.resp.values[rows], cold.resp.values[rows])
    rest = _rows(batch.doc_range, np.flatnonzero(~fresh))[0]
    assert not np.array_equal(joined.resp.values[rest], cold.resp.values[rest])  # not a full step there
    warm = np.zeros((40, K + J - 1))
    warm[:, :K] = local.tables["doc_counts"]
    one = alloc._run(batch.word_counts, batch.doc_range, born_log_lik, *alloc.doc_prior(params), warm=warm,
                     max_iters=1, n_restarts=0)
    np.testing.assert_allclose(joined.resp.values[rest], one.resp.values[rest], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("alloc", [HDPTopicAlloc(gamma=5.0, alpha=0.7), LDAAlloc(alpha=1.5), DPMixAlloc(2.0)],
                         ids=["hdp", "lda", "dp_mix"])
def test_the_local_view_of_the_globals_gives_the_same_batch_work(alloc):
    """What a Dask round without moves sends (Model.local_view): E ln μ, the allocation parameters and N."""
    model = make_model(alloc)
    g = random_globals(model, 4)
    view = model.local_view(g)
    assert set(view.obs) == {"E_log_mu"} and set(view.stats.fields) == {"N"} and view.alloc is g.alloc
    batch = corpus()
    full, slim = process_batch(model, g, batch), process_batch(model, view, batch)
    assert full.stats.allclose(slim.stats, rtol=0, atol=0)
    np.testing.assert_array_equal(np.asarray(full.warm), np.asarray(slim.warm))
    gauss = Model(DPMixAlloc(2.0), make_obs({"name": "gauss", "sF": 1.0, "prior_cov": "eye", "nu": None,
                                             "kappa": 1e-5, "mean": None}, 2, None))
    assert gauss.local_view(g) is g  # a family that does not name its local fields sends them all
