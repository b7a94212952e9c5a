"""The bars corpus generator (Griffiths & Steyvers 2004) and its batch file."""
import numpy as np
import pytest

from bnpvi.data.bars import bar_topics, bars_batch_file, make_bars
from bnpvi.data.convert import convert
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError


def doc_words(X, d):
    return X.word_ids[X.doc_range[d]:X.doc_range[d + 1]], X.word_counts[X.doc_range[d]:X.doc_range[d + 1]]


def test_topics_are_the_bars():
    side = 6
    topics = bar_topics(side)
    assert topics.shape == (12, 36) and topics.dtype == np.float64
    for k in range(12):
        image = topics[k].reshape(side, side)
        line = k // 2
        want = np.zeros((side, side))
        if k % 2 == 0:
            want[line, :] = 1 / side  # horizontal bar: row `line`
        else:
            want[:, line] = 1 / side  # vertical bar: column `line`
        np.testing.assert_array_equal(image, want)
    # fewer bars keep the first ones; noise adds an even floor, rows still sum to 1
    np.testing.assert_array_equal(bar_topics(side, n_bars=3), topics[:3])
    noisy = bar_topics(side, noise=0.5)
    np.testing.assert_allclose(noisy.sum(axis=1), 1.0)
    np.testing.assert_allclose(noisy, (topics + 0.5 / 36) / 1.5)


@pytest.mark.parametrize("side", [4, 10])
def test_make_bars_shapes_and_token_counts(side):
    X, topics, doc_topics = make_bars(150, side=side, tokens_per_doc=37, seed=1)
    V = side * side
    assert X.vocab_size == V and X.n_atoms == 150 and X.start == 0 and topics.shape == (2 * side, V)
    assert X.word_ids.dtype == np.int32 and X.word_counts.dtype == np.float64 and X.doc_range.dtype == np.int64
    np.testing.assert_array_equal(X.csr().sum(axis=1).A.ravel(), 37)
    assert doc_topics.shape == (150, 2 * side)
    np.testing.assert_allclose(doc_topics.sum(axis=1), 1.0)
    n_bars = (doc_topics > 0).sum(axis=1)
    assert n_bars.min() == 1 and n_bars.max() == 3 and set(np.unique(n_bars)) == {1, 2, 3}
    for d in range(150):
        ids, _ = doc_words(X, d)
        assert np.all(np.diff(ids) > 0)


def test_documents_use_only_their_bars():
    side = 8
    X, topics, doc_topics = make_bars(300, side=side, bars_per_doc=(2, 4), tokens_per_doc=60, seed=2)
    for d in range(X.n_atoms):
        ids, _ = doc_words(X, d)
        allowed = (topics[doc_topics[d] > 0] > 0).any(axis=0)
        assert allowed[ids].all(), d
    # and the words follow the mixture: pooled counts against the expected ones
    expected = 60 * (doc_topics @ topics).sum(axis=0)
    observed = X.csr().sum(axis=0).A.ravel()
    np.testing.assert_allclose(observed, expected, rtol=0.15)
    # with noise, words outside the chosen bars appear
    Xn, _, doc_topics_n = make_bars(300, side=side, bars_per_doc=(2, 4), tokens_per_doc=60, noise=1.0, seed=2)
    np.testing.assert_array_equal(doc_topics_n, doc_topics)  # the same bars and proportions
    outside = sum(int((~(topics[doc_topics[d] > 0] > 0).any(axis=0))[doc_words(Xn, d)[0]].sum())
                  for d in range(Xn.n_atoms))
    assert outside > 100


def test_make_bars_is_deterministic_per_seed():
    a = make_bars(80, seed=5, noise=0.1)
    b = make_bars(80, seed=5, noise=0.1)
    c = make_bars(80, seed=6, noise=0.1)
    for x, y in ((a[0].word_ids, b[0].word_ids), (a[0].word_counts, b[0].word_counts),
                 (a[0].doc_range, b[0].doc_range), (a[1], b[1]), (a[2], b[2])):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[2], c[2])


def test_one_bar_per_document_and_fewer_bars():
    X, topics, doc_topics = make_bars(50, side=5, n_bars=4, bars_per_doc=1, seed=3)
    assert topics.shape == (4, 25)
    assert ((doc_topics > 0).sum(axis=1) == 1).all() and set(np.argmax(doc_topics, axis=1)) == {0, 1, 2, 3}
    for d in range(50):
        ids, _ = doc_words(X, d)
        assert (topics[np.argmax(doc_topics[d]), ids] > 0).all()


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(n_docs=0), "n_docs must be an integer >= 1"),
    (dict(side=1), "side must be an integer >= 2"),
    (dict(n_bars=21), "n_bars=21 exceeds the 20 bars"),
    (dict(bars_per_doc=(2, 1)), "1 <= lo <= hi <= K=20"),
    (dict(bars_per_doc=(1, 21)), "1 <= lo <= hi <= K=20"),
    (dict(tokens_per_doc=0), "tokens_per_doc must be an integer >= 1"),
    (dict(noise=-0.1), "noise must be a number >= 0"),
    (dict(seed=-1), "seed must be a non-negative integer"),
])
def test_make_bars_rejects_bad_input(kwargs, fragment):
    args = dict(n_docs=10)
    args.update(kwargs)
    with pytest.raises(BnpviError, match=fragment) as info:
        make_bars(**args)
    assert "\n" not in str(info.value)


def test_bars_batch_file(tmp_path):
    path = bars_batch_file(tmp_path / "bars.h5", 120, side=5, tokens_per_doc=30, seed=4, n_batches=3, heldout=0.25)
    X, topics, _ = make_bars(120, side=5, tokens_per_doc=30, seed=4)
    with BatchStore.open(path) as store:
        assert (store.kind, store.n_atoms, store.D, store.n_heldout, store.n_batches) == ("bow", 90, 25, 30, 3)
        assert store.has_true_topics and not store.has_labels
        np.testing.assert_array_equal(store.read_true_topics(), topics)
        train_index, held_index = store.heldout_indices()
        dense = X.csr().toarray()
        np.testing.assert_array_equal(store.read_heldout().csr().toarray(), dense[held_index])
        np.testing.assert_array_equal(np.concatenate([store.read_batch(b).csr().toarray() for b in range(3)]),
                                      dense[train_index])
        assert store.info()["true_topics"] == 10
        store.validate()
    one = bars_batch_file(tmp_path / "one.h5", 40, side=4, bars_per_doc=1, seed=0)
    _, _, doc_topics = make_bars(40, side=4, bars_per_doc=1, seed=0)
    with BatchStore.open(one) as store:
        assert not store.has_heldout and not store.batches_fixed
        np.testing.assert_array_equal(store.labels(), np.argmax(doc_topics, axis=1))


def test_convert_keeps_true_topics_of_a_triplet(tmp_path):
    X, topics, _ = make_bars(30, side=4, seed=0)
    np.savez(tmp_path / "b.npz", word_id=X.word_ids, word_count=X.word_counts, doc_range=X.doc_range,
             vocab_size=16, true_topics=topics)
    with BatchStore.open(convert(tmp_path / "b.npz", tmp_path / "b.h5")) as store:
        np.testing.assert_array_equal(store.read_true_topics(), topics)
    np.savez(tmp_path / "bad.npz", word_id=X.word_ids, word_count=X.word_counts, doc_range=X.doc_range,
             vocab_size=16, true_topics=topics[:, :5])
    with pytest.raises(BnpviError, match=r"bad\.npz: true_topics has shape \(8, 5\)"):
        convert(tmp_path / "bad.npz", tmp_path / "bad.h5")


@pytest.mark.shared_data
def test_shared_bars_corpus_with_heldout(shared_data, tmp_path):
    src = shared_data / "bars_one_per_doc" / "dataset.npz"
    with np.load(src) as npz:
        topics = npz["true_topics"]
    dst = convert(src, tmp_path / "bars.h5", n_batches=4, heldout=0.1)
    with BatchStore.open(dst) as store:
        assert (store.n_atoms, store.n_heldout, store.D) == (1800, 200, 144)
        np.testing.assert_array_equal(store.read_true_topics(), topics)
        store.validate()
