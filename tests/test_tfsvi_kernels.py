"""The compiled Gibbs sweeps of alg=tfsvi (csrc/gibbs.pyx) against their NumPy reference and the exact conditionals."""
import numpy as np
import pytest
from scipy.special import gammaln

from bnpvi.kernels import KernelInputError, gibbs
from bnpvi.kernels import gibbs_reference as reference

from setups import corpus


def dp_state(seed, K=3, Kcap=8, V=30, eta=0.1, a=1.0):
    """Documents with minibatch-local words and the state of a DP-mixture sweep (K global components)."""
    rng = np.random.default_rng(seed)
    batch = corpus(seed=seed, n_docs=15, V=V)
    words, loc = np.unique(batch.word_ids, return_inverse=True)
    lam = np.full((Kcap, words.size), eta)
    glob = eta + rng.gamma(1.0, 3.0, size=(K, V))
    lam[:K] = glob[:, words]
    lam_total = np.full(Kcap, V * eta)
    lam_total[:K] = glob.sum(axis=1)
    u, v = np.ones(Kcap), np.full(Kcap, a)
    u[:K], v[:K] = 1.0 + rng.uniform(0, 20, K), a + rng.uniform(0, 20, K)
    return dict(word_loc=loc.astype(np.int64), counts=batch.word_counts, doc_range=batch.doc_range, lam=lam,
                lam_total=lam_total, table=np.zeros((Kcap, words.size)), table_total=np.zeros(Kcap),
                docs_in=np.zeros(Kcap), stick_u=u, stick_v=v, z=np.full(batch.n_atoms, -1, dtype=np.int64))


def copy(state):
    return {k: v.copy() for k, v in state.items()}


@pytest.mark.parametrize("seed", range(4))
def test_dp_sweeps_draw_the_reference_samples(seed):
    """Same uniforms, same samples, sweep after sweep (components are opened and, when they empty, dropped)."""
    state = dp_state(seed)
    ref = copy(state)
    rng = np.random.default_rng(100 + seed)
    T = T_ref = 3
    opened = 0
    for _ in range(6):
        uniforms = rng.random(state["z"].size)
        T = gibbs.dp_doc_sweep(**state, uniforms=uniforms, T=T, K_global=3, eta=0.1, V=30, log_new_factor=-0.3)
        T_ref = gibbs.dp_doc_sweep(**ref, uniforms=uniforms, T=T_ref, K_global=3, eta=0.1, V=30,
                                   log_new_factor=-0.3, impl=reference)
        assert T == T_ref
        opened = max(opened, T - 3)
        for name in ("z", "docs_in", "table_total", "table"):
            np.testing.assert_allclose(state[name], ref[name], rtol=0, atol=1e-9, err_msg=name)
    assert opened > 0
    assert np.array_equal(np.bincount(state["z"], minlength=8), state["docs_in"])


def hdp_state(seed, K=3, Kcap=10, V=30, eta=0.1):
    rng = np.random.default_rng(seed)
    batch = corpus(seed=seed, n_docs=6, V=V)
    words, loc = np.unique(batch.word_ids, return_inverse=True)
    reps = batch.word_counts.astype(np.int64)
    entry_doc = np.repeat(np.arange(batch.n_atoms), np.diff(batch.doc_range))
    lam = np.full((Kcap, words.size), eta)
    glob = eta + rng.gamma(1.0, 3.0, size=(K, V))
    lam[:K] = glob[:, words]
    lam_total = np.full(Kcap, V * eta)
    lam_total[:K] = glob.sum(axis=1)
    pi = np.zeros(Kcap)
    pi[:K] = [0.3, 0.2, 0.1]
    n_tok = int(reps.sum())
    return dict(tok_word=np.repeat(loc, reps).astype(np.int64), tok_doc=np.repeat(entry_doc, reps).astype(np.int64),
                z=np.full(n_tok, -1, dtype=np.int64), doc_topic=np.zeros((batch.n_atoms, Kcap)),
                topic_word=np.zeros((Kcap, words.size)), topic_total=np.zeros(Kcap), lam=lam, lam_total=lam_total,
                pi=pi)


@pytest.mark.parametrize("seed", range(3))
def test_hdp_sweeps_and_table_counts_draw_the_reference_samples(seed):
    state = hdp_state(seed)
    ref = copy(state)
    rng = np.random.default_rng(200 + seed)
    n = state["z"].size
    T, rest = 3, 0.4
    T_ref, rest_ref = 3, 0.4
    for _ in range(4):
        u1, u2, u3 = rng.random(n), rng.random(n), rng.random(n)
        T, rest = gibbs.hdp_token_sweep(**state, pi_rest=rest, u_choice=u1, u_stick=u2, T=T, b=1.0, a=1.0, V=30)
        T_ref, rest_ref = gibbs.hdp_token_sweep(**ref, pi_rest=rest_ref, u_choice=u1, u_stick=u2, T=T_ref, b=1.0,
                                                a=1.0, V=30, impl=reference)
        assert (T, rest) == (T_ref, pytest.approx(rest_ref, rel=1e-12))
        for name in ("z", "doc_topic", "topic_word", "topic_total", "pi"):
            np.testing.assert_allclose(state[name], ref[name], rtol=1e-12, atol=0, err_msg=name)
        tables = gibbs.antoniak_tables(state["doc_topic"], state["pi"], 1.0, u3, T)
        np.testing.assert_array_equal(tables, gibbs.antoniak_tables(ref["doc_topic"], ref["pi"], 1.0, u3, T,
                                                                    impl=reference))
        used = (state["doc_topic"][:, :T] > 0).sum(axis=0)
        assert np.all(tables >= used) and np.all(tables <= state["doc_topic"][:, :T].sum(axis=0))
    assert T > 3


def within_sampling_error(freq, p, n):
    return np.all(np.abs(freq - p) < 4.5 * np.sqrt(p * (1 - p) / n) + 1e-12)


def test_two_topic_token_frequencies_match_the_exact_conditional():
    """One token of word 0 in a document that already holds other tokens: over many uniforms the kernel picks
    each of two topics with p(z = k) ∝ (n_dk + b π_k)(n_kw + λ_kw)/(n_k + Σ_w λ_kw) (no new topic: Kcap = 2)."""
    lam = np.array([[0.5, 2.0], [3.0, 0.2]])
    lam_total = lam.sum(axis=1) + 1.0
    pi, b = np.array([0.6, 0.3]), 1.5
    draws = 20000
    uniforms = np.random.default_rng(0).random(draws)
    picks = np.empty(draws, dtype=np.int64)
    for i, u in enumerate(uniforms):
        doc_topic = np.array([[2.0, 1.0]])
        topic_word = np.array([[1.0, 1.0], [0.0, 0.0]])
        topic_total = np.array([2.0, 1.0])
        z = np.array([-1], dtype=np.int64)
        gibbs.hdp_token_sweep(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), z, doc_topic, topic_word,
                              topic_total, lam, lam_total, pi.copy(), 0.1, np.array([u]), np.array([0.5]), 2, b, 1.0, 2)
        picks[i] = z[0]
    w = (np.array([2.0, 1.0]) + b * pi) * (np.array([1.0, 0.0]) + lam[:, 0]) / (np.array([2.0, 1.0]) + lam_total)
    assert within_sampling_error(np.bincount(picks, minlength=2) / draws, w / w.sum(), draws)


def test_two_component_document_frequencies_match_the_exact_conditional():
    """A DP minibatch of one document with two global components and room for none more: it goes to k with
    probability ∝ E[π_k] · Dirichlet-multinomial predictive (Wang & Blei 2012 §2.3)."""
    lam = np.array([[0.3, 1.2, 2.0], [2.5, 0.4, 0.1]])
    lam_total = lam.sum(axis=1) + 4.0
    u, v = np.array([3.0, 2.0]), np.array([4.0, 1.0])
    word_loc, counts, doc_range = np.array([0, 2], dtype=np.int64), np.array([2.0, 1.0]), np.array([0, 2])
    draws = 20000
    uniforms = np.random.default_rng(1).random(draws)
    picks = np.empty(draws, dtype=np.int64)
    for i, uni in enumerate(uniforms):
        z = np.array([-1], dtype=np.int64)
        gibbs.dp_doc_sweep(word_loc, counts, doc_range, lam, lam_total, np.zeros((2, 3)), np.zeros(2), np.zeros(2),
                           u, v, z, np.array([uni]), 2, 2, 0.1, 10, 0.0)
        picks[i] = z[0]
    pred = (gammaln(lam[:, [0, 2]] + counts) - gammaln(lam[:, [0, 2]])).sum(axis=1) - (
        gammaln(lam_total + 3.0) - gammaln(lam_total))
    stick = u / (u + v) * np.array([1.0, v[0] / (u[0] + v[0])])
    p = stick * np.exp(pred)
    assert within_sampling_error(np.bincount(picks, minlength=2) / draws, p / p.sum(), draws)


def test_antoniak_counts_follow_the_stirling_distribution():
    """s ~ Antoniak(n, bπ): p(s) = S(n, s) (bπ)^s Γ(bπ)/Γ(bπ + n), S the unsigned Stirling numbers of the first
    kind."""
    n, bp, draws = 5, 0.7, 40000
    stirling = np.zeros((n + 1, n + 1))
    stirling[0, 0] = 1
    for i in range(1, n + 1):
        for s in range(1, i + 1):
            stirling[i, s] = stirling[i - 1, s - 1] + (i - 1) * stirling[i - 1, s]
    s = np.arange(n + 1)
    exact = stirling[n] * bp ** s * np.exp(gammaln(bp) - gammaln(bp + n))
    doc_topic = np.full((draws, 1), float(n))
    uniforms = np.random.default_rng(2).random(draws * n)
    per_doc = np.array([gibbs.antoniak_tables(doc_topic[:1], np.array([bp]), 1.0, uniforms[i * n:(i + 1) * n], 1)[0]
                        for i in range(draws)])
    assert within_sampling_error(np.bincount(per_doc.astype(int), minlength=n + 1) / draws, exact, draws)


def test_bad_input_is_refused_with_one_line():
    state = dp_state(0)
    state["z"] = state["z"].astype(np.int32)
    with pytest.raises(KernelInputError, match="z must have dtype int64"):
        gibbs.dp_doc_sweep(**state, uniforms=np.full(15, 0.5), T=3, K_global=3, eta=0.1, V=30, log_new_factor=0.0)
    state = dp_state(0)
    with pytest.raises(KernelInputError, match="needs 15 uniforms"):
        gibbs.dp_doc_sweep(**state, uniforms=np.full(3, 0.5), T=3, K_global=3, eta=0.1, V=30, log_new_factor=0.0)


POINT_FAMILIES = ["bern", "diag_gauss", "zm_gauss", "gauss"]


def point_state(family, seed, K=2, Kcap=7, D=3, n=20):
    """Points and the state of a DP-mixture sweep of ``family`` with K global components."""
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(n, D)) * 3
    if family == "bern":
        Y = (Y > 0).astype(float)
    N, Sx, Sxx = np.zeros(Kcap + 1), np.zeros((Kcap + 1, D)), np.zeros((Kcap + 1, D, D))
    N[:K] = [5.0, 3.0]
    for k in range(K):
        if family == "bern":
            Sx[k] = rng.uniform(0, N[k], D)
            continue
        Sx[k] = rng.normal(size=D)
        A = rng.normal(size=(D, D))
        Sxx[k] = np.tril(A @ A.T + np.outer(Sx[k], Sx[k]) / N[k])
        if family == "diag_gauss":
            Sxx[k] = np.diag(np.diag(Sxx[k]))
    u, v = np.ones(Kcap), np.full(Kcap, 2.0)
    u[:K], v[:K] = [4.0, 3.0], [5.0, 2.0]
    return Y, dict(N=N, Sx=Sx, Sxx=Sxx, docs_in=np.zeros(Kcap), z=np.full(n, -1, dtype=np.int64)), u, v


@pytest.mark.parametrize("family", POINT_FAMILIES)
def test_point_sweeps_draw_the_reference_samples(family):
    Y, state, u, v = point_state(family, 3)
    ref = copy(state)
    prior = (1.5, 5.0, 2.0 * np.eye(3), 0.3, 0.4)
    rng = np.random.default_rng(4)
    T = T_ref = 2
    for _ in range(5):
        uniforms = rng.random(Y.shape[0])
        T = gibbs.dp_point_sweep(family, Y, state["N"], state["Sx"], state["Sxx"], *prior, state["docs_in"], u, v,
                                 state["z"], uniforms, T, 2, -0.2)
        T_ref = gibbs.dp_point_sweep(family, Y, ref["N"], ref["Sx"], ref["Sxx"], *prior, ref["docs_in"], u, v,
                                     ref["z"], uniforms, T_ref, 2, -0.2, impl=reference)
        assert T == T_ref
        np.testing.assert_array_equal(state["z"], ref["z"])
        for name in ("N", "Sx", "Sxx", "docs_in"):
            np.testing.assert_allclose(state[name], ref[name], rtol=0, atol=1e-9, err_msg=name)
    assert T > 2


@pytest.mark.parametrize("family", POINT_FAMILIES)
def test_point_predictive_is_the_ratio_of_the_familys_marginals(family):
    """The reference predictive ln p(y | points of a component) equals L*(N + 1, S + s(y)) − L*(N, S) of the
    family's own log marginal (Hughes 2016 thesis Eq. 3.42): the locally collapsed q(z) of Wang & Blei 2012 Eq. 6."""
    from bnpvi.data.batch import PointBatch
    from bnpvi.learn.tfsvi_local import PointMixtureSampler
    from bnpvi.model import Model
    from bnpvi.alloc.mixture import DPMixAlloc
    from bnpvi.obs import make_obs

    rng = np.random.default_rng(5)
    X = rng.normal(size=(6, 3)) * 2 + 1
    X = (X > 1).astype(float) if family == "bern" else X
    model = Model(DPMixAlloc(1.0), make_obs({"name": family}, 3, None))
    sampler = PointMixtureSampler(model, 1, 5, "rest")
    Y = sampler._points(PointBatch(X))
    four, five = (model.hard_stats(PointBatch(X[:n]), np.zeros(n, dtype=np.int64), 1) for n in (4, 5))
    expected = float(model.data_terms(five)[0] - model.data_terms(four)[0])
    Sx = four["S"][0] if family == "bern" else four["Sx"][0] if "Sx" in four else np.zeros(3)
    Sxx = np.zeros((3, 3)) if family == "bern" else (np.diag(four["Sxx"][0]) if family == "diag_gauss"
                                                     else np.tril(four["Sxx"][0]))
    got = reference.point_log_pred(gibbs.FAMILY_CODES[family], Y[4], 4.0, Sx, Sxx, *sampler._prior())
    assert got == pytest.approx(expected, rel=1e-10)
