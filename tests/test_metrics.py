"""Label alignment and the Hamming distance of a segmentation (Hughes 2016 thesis §6.6); the adjusted Rand
index, topic coherence (NPMI) and the library paths that replaced hand-written code (ARI, multigammaln, summed
repeated word ids), each against a brute-force reference."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import comb, gammaln

from bnpvi.data.checks import check_documents, sum_duplicate_words
from bnpvi.metrics import (adjusted_rand_index, adjusted_rand_index_of_counts, align_labels, hamming_distance,
                           hamming_many_to_one, hamming_many_to_one_of_counts, hamming_of_counts, many_to_one_labels,
                           npmi_coherence, weighted_mean)
from bnpvi.special import multigammaln


@pytest.mark.parametrize(
    "true, est, expect",
    [
        ([0, 0, 1, 1], [0, 0, 1, 1], 0.0),
        ([0, 0, 1, 1], [0, 0, 1, 2], 0.25),
        ([0, 0, 1, 1], [1, 1, 0, 0], 0.0),
        ([-1, -1, 0, 1], [1, 2, 0, 1], 0.0),
    ],
)
def test_worked_examples(true, est, expect):
    assert hamming_distance(true, est) == expect


def brute_hamming(true, est) -> float:
    """Smallest mismatch over every one-to-one map of estimated to true labels."""
    true, est = np.asarray(true), np.asarray(est)
    scored = true >= 0
    t, e = true[scored], est[scored]
    t_ids, e_ids = np.unique(t), np.unique(e)
    best = len(t)
    # assign each estimated label a distinct true label or "none"
    options = list(t_ids) + [None] * len(e_ids)
    for choice in itertools.permutations(options, len(e_ids)):
        mapped = np.array([-1 if c is None else c for c in choice])[np.searchsorted(e_ids, e)]
        best = min(best, int(np.count_nonzero(mapped != t)))
    return best / len(t)


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_matching(seed):
    rng = np.random.default_rng(seed)
    T = 40
    n_true, n_est = rng.integers(1, 5), rng.integers(1, 5)
    true = rng.integers(0, n_true, T)
    est = np.where(rng.random(T) < 0.7, (true * 3 + 1) % max(n_est, 1), rng.integers(0, n_est, T)) + 10
    true[rng.random(T) < 0.15] = -1
    assert hamming_distance(true, est) == pytest.approx(brute_hamming(true, est), abs=1e-15)


def test_invariant_to_permuting_estimated_labels():
    rng = np.random.default_rng(1)
    true = np.repeat([0, 1, 2, 3], [30, 20, 25, 25])
    est = np.where(rng.random(100) < 0.8, true, rng.integers(0, 6, 100))
    d = hamming_distance(true, est)
    assert 0.0 < d < 0.3
    for _ in range(5):
        perm = rng.permutation(6) + rng.integers(0, 50)
        assert hamming_distance(true, perm[est]) == d


def test_more_estimated_than_true_states():
    true = np.array([0] * 6 + [1] * 4)
    est = np.array([5] * 4 + [7] * 2 + [9] * 4)  # true state 0 split in two
    assert hamming_distance(true, est) == pytest.approx(0.2)
    aligned = align_labels(true, est)
    assert np.array_equal(aligned[:4], [0] * 4) and np.array_equal(aligned[6:], [1] * 4)
    # the extra estimated state gets a new label, never a true one
    assert np.all(aligned[4:6] == aligned[4]) and aligned[4] not in (0, 1)


def test_fewer_estimated_than_true_states():
    true = np.array([0] * 5 + [1] * 3 + [2] * 2)
    est = np.array([4] * 5 + [8] * 5)  # true states 1 and 2 merged
    assert hamming_distance(true, est) == pytest.approx(0.2)
    assert np.array_equal(align_labels(true, est), [0] * 5 + [1] * 5)


def test_unscored_steps_take_no_part():
    true = np.array([-1, -1, -1, 0, 0, 1, 1])
    est = np.array([3, 3, 3, 1, 1, 2, 2])
    # 3 appears at unscored steps only: it is matched to nothing
    assert hamming_distance(true, est) == 0.0
    aligned = align_labels(true, est)
    assert np.array_equal(aligned[3:], [0, 0, 1, 1])
    assert aligned[0] not in (0, 1) and aligned[0] >= 2
    # errors at unscored steps do not count; at scored ones they do
    assert hamming_distance(true, [0, 1, 2, 1, 1, 2, 2]) == 0.0
    assert hamming_distance(true, [3, 3, 3, 1, 2, 2, 2]) == pytest.approx(0.25)
    assert np.isnan(hamming_distance([-1, -1], [0, 1]))
    # a label without overlap is not matched even where a true label is left over
    aligned = align_labels([-1, 0, 1], [9, 5, 5])
    assert aligned[1] == aligned[2] and aligned[1] in (0, 1) and aligned[0] not in (0, 1)


def test_unmatched_labels_never_equal_a_true_label():
    true = np.array([0, 0, 0, 2, 2, 2])
    est = np.array([0, 0, 1, 2, 3, 4])
    aligned = align_labels(true, est)
    assert aligned.dtype == np.int64
    assert np.array_equal(aligned[[0, 1, 3]], [0, 0, 2])
    assert not np.isin(aligned[[2, 4, 5]], true).any()
    assert len(set(aligned[[2, 4, 5]])) == 3  # distinct estimated states stay distinct
    assert hamming_distance(true, est) == pytest.approx(0.5)


# ------------------------------------------------------------ many-to-one
def test_pure_states_that_split_true_states_score_zero_many_to_one_only():
    """The issue's case: 4 labelled activities, a model that finds 16 pure states (each activity split in 4)."""
    rng = np.random.default_rng(0)
    true = np.repeat(rng.integers(0, 4, size=60), 25)
    est = 4 * true + rng.integers(0, 4, size=true.size)  # every state inside one activity
    assert hamming_many_to_one(true, est) == 0.0
    assert hamming_distance(true, est) > 0.5  # one-to-one keeps one state per activity
    np.testing.assert_array_equal(many_to_one_labels(true, est), true)


def brute_many_to_one(true, est) -> float:
    """Each estimated label's steps counted against its most frequent scored true label, by hand."""
    scored = [(t, e) for t, e in zip(true, est) if t >= 0]
    wrong = 0
    for e in set(est):
        mine = [t for t, x in scored if x == e]
        if mine:
            best = min(set(mine), key=lambda c: (-mine.count(c), c))
            wrong += sum(t != best for t in mine)
    return wrong / len(scored)


@pytest.mark.parametrize("seed", range(6))
def test_many_to_one_matches_the_definition_and_is_at_most_one_to_one(seed):
    rng = np.random.default_rng(seed)
    true = rng.integers(-1, 3, size=40)
    est = rng.integers(0, 2 + seed, size=40)
    m2o = hamming_many_to_one(true, est)
    assert m2o == pytest.approx(brute_many_to_one(true.tolist(), est.tolist()), abs=1e-15)
    assert m2o <= hamming_distance(true, est) + 1e-15


def test_many_to_one_worked_examples():
    assert hamming_many_to_one([0, 0, 1, 1], [5, 5, 5, 5]) == 0.5  # one state for two true ones
    assert hamming_many_to_one([0, 0, 1, 1], [0, 1, 2, 3]) == 0.0  # a state per step
    assert hamming_many_to_one([0, 1, 1, 0], [7, 7, 7, 3]) == 0.25  # 7 -> 1; 3 -> 0
    # a tie goes to the smaller true label; a state that meets only unscored steps matches nothing
    np.testing.assert_array_equal(many_to_one_labels([1, 0, -1], [4, 4, 9]), [0, 0, 2])
    assert np.isnan(hamming_many_to_one([-1, -1], [0, 1]))
    assert many_to_one_labels([], []).shape == (0,)


def test_clear_errors():
    with pytest.raises(ValueError, match="differ in length: 4 vs 3"):
        hamming_distance([0, 0, 1, 1], [0, 0, 1])
    with pytest.raises(ValueError, match="differ in length: 2 vs 3"):
        hamming_many_to_one([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="differ in length"):
        align_labels([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="integer labels"):
        hamming_distance([0, 1], [0.5, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        hamming_distance(np.zeros((2, 2), dtype=int), np.zeros((2, 2), dtype=int))


def brute_ari(true, pred) -> float:
    """Hubert & Arabie (1985) from the pair counts of the contingency table."""
    t, p = np.unique(true, return_inverse=True)[1], np.unique(pred, return_inverse=True)[1]
    table = np.zeros((t.max() + 1, p.max() + 1))
    for i, j in zip(t, p):
        table[i, j] += 1
    cells, rows, cols = comb(table, 2).sum(), comb(table.sum(1), 2).sum(), comb(table.sum(0), 2).sum()
    expected = rows * cols / comb(len(true), 2)
    return float((cells - expected) / ((rows + cols) / 2 - expected))


def test_adjusted_rand_index_is_scikit_learns():
    assert adjusted_rand_index([0, 0, 1, 1], [1, 1, 0, 0]) == 1.0
    rng = np.random.default_rng(0)
    for _ in range(5):
        true, pred = rng.integers(0, 4, size=60), rng.integers(0, 6, size=60)
        assert adjusted_rand_index(true, pred) == pytest.approx(brute_ari(true, pred), abs=1e-12)
    from sklearn.metrics import adjusted_rand_score  # bnpvi computes it without scikit-learn, bit for bit

    cases = [([], []), ([3], [1]), ([0, 0, 0], [5, 5, 5]), (list("aabbc"), list("xyyzz"))]
    cases += [(rng.integers(-2, a, size=n), 7 * rng.integers(0, b, size=n)) for n in (2, 60, 5000)
              for a, b in ((1, 3), (4, 6), (40, 70))]
    for true, pred in cases:
        assert adjusted_rand_index(true, pred) == adjusted_rand_score(true, pred), (true, pred)
    with pytest.raises(ValueError):
        adjusted_rand_index([0, 1, 1], [0, 1])


@pytest.mark.parametrize("D", [1, 2, 5, 8, 12, 20])
def test_multigammaln_is_scipys_and_equals_the_formula(D):
    """lnΓ_D(a) = D(D−1)/4 ln π + Σ_d lnΓ(a + (1−d)/2): bit for bit below D = 8, to rounding above
    (scipy adds the D terms in another order)."""
    a = (D - 1) / 2 + np.random.default_rng(D).gamma(1.0, 5.0, size=(7, 3)) + 1e-3
    formula = D * (D - 1) / 4 * np.log(np.pi) + gammaln(a[..., None] - np.arange(D) / 2).sum(axis=-1)
    np.testing.assert_allclose(multigammaln(a, D), formula, rtol=1e-14, atol=0)
    if D < 8:
        np.testing.assert_array_equal(multigammaln(a, D), formula)


def test_repeated_word_ids_are_summed_by_scipy():
    ids, counts, dr = np.array([5, 2, 5, 0, 0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([0, 3, 5])
    X = sum_duplicate_words(ids, counts, dr, 6)
    assert X.has_canonical_format and X.indices.tolist() == [2, 5, 0] and X.data.tolist() == [2.0, 4.0, 9.0]
    assert X.indptr.tolist() == [0, 2, 3] and ids.tolist() == [5, 2, 5, 0, 0]  # the inputs are untouched
    got = check_documents(ids, counts, dr, 6, "c", duplicates="sum")
    assert [a.tolist() for a in got[:3]] == [[2, 5, 0], [2.0, 4.0, 9.0], [0, 2, 3]]


# ------------------------------------------------------------------- NPMI
def brute_npmi(top, docs) -> np.ndarray:
    """The mean NPMI over the pairs of each topic's top words, one pair and one document at a time."""
    present = docs > 0
    N = present.shape[0]
    out = []
    for words in top:
        scores = []
        for i, j in itertools.combinations(words, 2):
            n_i, n_j = present[:, i].sum(), present[:, j].sum()
            n_ij = sum(1 for d in range(N) if present[d, i] and present[d, j])
            if n_ij == 0:
                scores.append(-1.0)
            elif n_ij == N:
                scores.append(1.0)
            else:
                scores.append(np.log((n_ij / N) / ((n_i / N) * (n_j / N))) / -np.log(n_ij / N))
        out.append(np.mean(scores))
    return np.array(out)


def test_npmi_against_brute_force():
    rng = np.random.default_rng(1)
    docs = rng.poisson(0.4, size=(40, 15))
    docs[:, 14], docs[:, 12] = 1, 3  # two words in every document: always together, NPMI 1
    docs[:, 13] = 0
    docs[3, 13] = 2  # a word in one document only
    probs = rng.dirichlet(np.ones(15), size=5)
    probs[0, [12, 13, 14]] += 10  # topic 0 ranks them first
    top = np.argsort(-probs, axis=1, kind="stable")[:, :6]
    want = brute_npmi(top, docs)
    np.testing.assert_allclose(npmi_coherence(probs, sp.csr_matrix(docs), top_n=6), want, rtol=1e-12)
    np.testing.assert_allclose(npmi_coherence(top, sp.csr_matrix(docs), top_n=6), want, rtol=1e-12)  # ids given
    blocks = (sp.csr_matrix(docs[lo:lo + 7]) for lo in range(0, 40, 7))  # documents streamed in blocks
    np.testing.assert_allclose(npmi_coherence(probs, blocks, top_n=6), want, rtol=1e-12)
    assert np.all((want >= -1) & (want <= 1))


def test_npmi_worked_example():
    """Words 0 and 1 always together in half the documents: NPMI 1; word 2 never with them: -1."""
    docs = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1]]))
    np.testing.assert_allclose(npmi_coherence(np.array([[0, 1], [0, 2], [1, 2]]), docs), [1.0, -1.0, -1.0])
    assert np.isnan(npmi_coherence(np.array([[0]]), docs)[0])  # one word makes no pair
    assert weighted_mean(np.array([1.0, -1.0, np.nan]), np.array([3.0, 1.0, 5.0])) == 0.5


@pytest.mark.parametrize("seed", range(6))
def test_scores_from_a_contingency_table_are_the_scores_of_the_labels(seed):
    """ARI and both Hamming distances from counts (a run counts its labels a batch at a time) equal, bit for
    bit, the same scores of the label arrays."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    true = rng.integers(-1 if seed % 2 else 0, rng.integers(1, 6), size=n)
    est = rng.integers(0, rng.integers(1, 9), size=n)
    ids, rows = np.unique(true, return_inverse=True)
    table = np.zeros((ids.size, est.max() + 1), dtype=np.int64)
    np.add.at(table, (rows, est), 1)
    assert adjusted_rand_index_of_counts(table) == adjusted_rand_index(true, est)
    scored = table[ids >= 0]
    assert hamming_of_counts(scored) == hamming_distance(true, est)
    assert hamming_many_to_one_of_counts(scored) == hamming_many_to_one(true, est)
    assert np.isnan(hamming_of_counts(np.zeros((0, 3)))) and np.isnan(hamming_many_to_one_of_counts(np.zeros((0, 3))))
