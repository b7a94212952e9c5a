"""Held-out documents: the train / held-out split in bag-of-words files, and the document-completion split."""
import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from bnpvi.cli.data import main
from bnpvi.data.batch import WordCountBatch
from bnpvi.data.bow import HeldoutDocuments
from bnpvi.data.convert import convert
from bnpvi.data.heldout import choose_heldout, completion_split, hold_out
from bnpvi.data.store import BatchStore, write_documents
from bnpvi.errors import BnpviError


def make_corpus(seed=0, N=60, V=30, max_len=8):
    """Distinct ids per document (unsorted), counts 1..6, no empty document; labels = document index mod 7."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, size=N)
    ids = np.concatenate([rng.choice(V, size=L, replace=False) for L in lengths]).astype(np.int32)
    counts = rng.integers(1, 7, size=ids.size).astype(np.float64)
    return ids, counts, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), np.arange(N) % 7


def dense(ids, counts, dr, V=30):
    return sp.csr_matrix((counts, ids, dr), shape=(len(dr) - 1, V)).toarray()


def save_triplet(path, ids, counts, dr, labels):
    np.savez(path, word_id=ids, word_count=counts, doc_range=dr, vocab_size=30, y=labels)
    return path


def read_training(store):
    """All training documents through read_batch, as a dense (N, V) matrix, checking batch starts."""
    rows = []
    for b in range(store.n_batches):
        batch = store.read_batch(b)
        assert batch.start == store.offsets[b]
        rows.append(batch.csr().toarray())
    return np.concatenate(rows)


# ------------------------------------------------------------- file split
@pytest.mark.parametrize("shuffle", [None, 4])
def test_convert_heldout_partitions_the_corpus(tmp_path, shuffle):
    ids, counts, dr, y = make_corpus()
    X = dense(ids, counts, dr)
    src = save_triplet(tmp_path / "c.npz", ids, counts, dr, y)
    dst = convert(src, tmp_path / "c.h5", n_batches=4, labels="y", heldout=0.25, heldout_seed=3,
                  shuffle_seed=shuffle)
    with BatchStore.open(dst) as store:
        assert store.has_heldout and store.n_heldout == 15 and store.n_atoms == 45
        assert store.batch_sizes().sum() == 45 and store.n_batches == 4
        train_index, held_index = store.heldout_indices()
        # every source document exactly once, on one side
        np.testing.assert_array_equal(np.sort(np.concatenate([train_index, held_index])), np.arange(60))
        # the batches hold exactly the training documents (in stored order), labels follow
        np.testing.assert_array_equal(read_training(store), X[train_index])
        np.testing.assert_array_equal(store.labels(), y[train_index])
        # the held-out documents with their counts and labels
        held = store.read_heldout()
        assert isinstance(held, WordCountBatch) and held.start == 0 and held.vocab_size == 30
        assert held.word_ids.dtype == np.int32 and held.doc_range.dtype == np.int64
        np.testing.assert_array_equal(held.csr().toarray(), X[held_index])
        np.testing.assert_array_equal(store.heldout_labels(), y[held_index])
        part = store.read_heldout(5, 9)
        assert part.start == 5
        np.testing.assert_array_equal(part.csr().toarray(), X[held_index[5:9]])
        assert store.info()["heldout"] == 15 and store.info()["tokens"] == X[train_index].sum()
        store.validate()
    # the held-out choice is the documented one, whatever the shuffle
    np.testing.assert_array_equal(held_index, np.sort(np.random.default_rng(3).permutation(60)[:15]))
    if shuffle is None:
        np.testing.assert_array_equal(train_index, np.setdiff1d(np.arange(60), held_index))
    else:
        assert not np.all(np.diff(train_index) > 0)


def test_heldout_split_is_reproducible(tmp_path):
    ids, counts, dr, y = make_corpus(1)
    src = save_triplet(tmp_path / "c.npz", ids, counts, dr, y)

    def contents(path):
        out = {}
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
            out.update({f"@{k}": v for k, v in f.attrs.items() if k != "created"})
            out.update({f"heldout@{k}": v for k, v in f["heldout"].attrs.items()})
        return out

    a = contents(convert(src, tmp_path / "a.h5", heldout=0.3, heldout_seed=7, labels="y", shuffle_seed=1))
    b = contents(convert(src, tmp_path / "b.h5", heldout=0.3, heldout_seed=7, labels="y", shuffle_seed=1))
    c = contents(convert(src, tmp_path / "c.h5", heldout=0.3, heldout_seed=8, labels="y", shuffle_seed=1))
    assert a.keys() == b.keys() and "heldout/doc_index" in a and "heldout/train_doc_index" in a
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert a["heldout@fraction"] == 0.3 and a["heldout@seed"] == 7 and a["heldout@N"] == 18
    assert not np.array_equal(a["heldout/doc_index"], c["heldout/doc_index"])


def test_choose_heldout_counts_and_bad_fractions():
    for n, f, want in [(10, 0.25, 3), (10, 0.01, 1), (10, 0.99, 9), (2, 0.5, 1), (1000, 0.1, 100)]:
        train, held = choose_heldout(n, f, 0)
        assert held.size == want and train.size == n - want
        assert np.array_equal(np.sort(np.r_[train, held]), np.arange(n))
    for bad in (0, 1, 1.5, -0.2, float("nan"), "abc", None):
        with pytest.raises(BnpviError, match="strictly between 0 and 1"):
            choose_heldout(10, bad)
    with pytest.raises(BnpviError, match="at least 2"):
        choose_heldout(1, 0.5)
    with pytest.raises(BnpviError, match="non-negative integer"):
        choose_heldout(10, 0.5, seed=-1)


def test_files_without_heldout(tmp_path):
    ids, counts, dr, _ = make_corpus(2)
    path = write_documents(tmp_path / "plain.h5", ids, counts, dr, 30)
    with BatchStore.open(path) as store:
        assert not store.has_heldout and store.n_heldout == 0 and store.info()["heldout"] == 0
        with pytest.raises(BnpviError, match=r"plain\.h5 holds no held-out documents") as info:
            store.read_heldout()
        assert "\n" not in str(info.value)


def test_write_documents_rejects_bad_heldout(tmp_path):
    ids, counts, dr, _ = make_corpus(3, N=10)
    X = WordCountBatch(ids, counts, dr, 30)
    train, _, held = hold_out(X, 0.3, 0)
    args = (train.word_ids, train.word_counts, train.doc_range, 30)
    bad_index = HeldoutDocuments(held.word_ids, held.word_counts, held.doc_range, held.doc_index,
                                 np.zeros_like(held.train_doc_index), seed=0)
    with pytest.raises(BnpviError, match="exactly once"):
        write_documents(tmp_path / "bad.h5", *args, heldout=bad_index)
    short = HeldoutDocuments(held.word_ids, held.word_counts, held.doc_range, held.doc_index[:-1],
                             held.train_doc_index)
    with pytest.raises(BnpviError, match="doc_index has 2 entries but there are 3 held-out"):
        write_documents(tmp_path / "bad.h5", *args, heldout=short)
    assert list(tmp_path.iterdir()) == []


def test_validate_checks_heldout_documents(tmp_path):
    ids, counts, dr, _ = make_corpus(4)
    src = save_triplet(tmp_path / "c.npz", ids, counts, dr, np.zeros(60))
    dst = convert(src, tmp_path / "c.h5", heldout=0.2)
    with h5py.File(dst, "r+") as f:
        f["heldout/word_ids"][0] = 30
    with BatchStore.open(dst) as store, pytest.raises(BnpviError, match="held-out document 0 has word id 30"):
        store.validate()
    with h5py.File(dst, "r+") as f:
        del f["heldout/train_doc_index"]
    with pytest.raises(BnpviError, match="missing the dataset 'heldout/train_doc_index'"):
        BatchStore.open(dst)


# ------------------------------------------------------------------- CLI
def test_cli_heldout_and_info(tmp_path, capsys):
    ids, counts, dr, y = make_corpus(5)
    src = save_triplet(tmp_path / "c.npz", ids, counts, dr, y)
    assert main(["convert", str(src), str(tmp_path / "c.h5"), "--heldout", "0.1", "--heldout-seed", "2",
                 "--batches", "3"]) == 0
    out = capsys.readouterr().out
    assert "kind=bow N=54 documents" in out and "heldout=6 documents" in out and "batches=3" in out, out
    assert main(["info", str(tmp_path / "c.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    assert "heldout: 6 documents (fraction 0.1, seed 2)" in out and "N:       54 documents" in out, out


@pytest.mark.parametrize("args, fragment", [
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "0"], "strictly between 0 and 1, got '0'"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "1"], "strictly between 0 and 1, got '1'"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "-0.2"], "strictly between 0 and 1"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "half"], "strictly between 0 and 1, got 'half'"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "nan"], "strictly between 0 and 1"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "0.5", "--heldout-seed", "-3"], "held-out seed must be"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout-seed", "3"], "--heldout-seed applies only with --heldout"),
    (["{tmp}/c.npz", "{tmp}/o.h5", "--heldout", "0.5", "--batches", "31"], "30 of them for training"),
])
def test_cli_heldout_errors_are_one_line(tmp_path, capsys, args, fragment):
    ids, counts, dr, y = make_corpus(6)
    save_triplet(tmp_path / "c.npz", ids, counts, dr, y)
    np.savez(tmp_path / "s.npz", X=np.arange(12.0).reshape(6, 2), seq_range=np.array([0, 3, 6]))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["convert"] + [a.format(tmp=tmp_path) for a in args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bnpvi-data: error: ") and fragment in lines[0], lines
    assert captured.out == "" and sorted(p.name for p in tmp_path.iterdir()) == before


# ---------------------------------------------------- document completion
def corpus_batch(seed=7, N=40, V=30):
    ids, counts, dr, _ = make_corpus(seed, N=N, V=V, max_len=12)
    counts = counts * np.random.default_rng(seed).integers(1, 4, size=counts.size)  # up to 18 tokens per type
    return WordCountBatch(ids, counts, dr, V)


@pytest.mark.parametrize("mode", ["halves", "types"])
def test_completion_parts_add_up_to_the_document(mode):
    batch = corpus_batch()
    obs, tgt = completion_split(batch, seed=1, mode=mode)
    for part in (obs, tgt):
        assert part.n_atoms == batch.n_atoms and part.vocab_size == 30 and part.start == batch.start
        assert part.word_ids.dtype == np.int32 and part.word_counts.dtype == np.float64
        assert (part.word_counts > 0).all()
        for d in range(part.n_atoms):  # word ids ascending within each document
            assert np.all(np.diff(part.word_ids[part.doc_range[d]:part.doc_range[d + 1]]) > 0)
    np.testing.assert_array_equal(obs.csr().toarray() + tgt.csr().toarray(), batch.csr().toarray())


def test_completion_halves_sizes():
    batch = corpus_batch()
    obs, tgt = completion_split(batch, seed=2)
    T = batch.csr().toarray().sum(axis=1)
    np.testing.assert_array_equal(obs.csr().toarray().sum(axis=1), T // 2)
    np.testing.assert_array_equal(tgt.csr().toarray().sum(axis=1), T - T // 2)
    assert (obs.csr().toarray() > 0).sum() > 0 and (T % 2 == 1).any()
    # a random split, not "the lowest word ids first": some observed type has a larger id than some target type
    o, t = obs.csr().toarray(), tgt.csr().toarray()
    later = [d for d in range(batch.n_atoms) if o[d].any() and t[d].any()
             and np.flatnonzero(o[d]).max() > np.flatnonzero(t[d]).min()]
    assert len(later) > batch.n_atoms // 2


@pytest.mark.parametrize("mode", ["halves", "types"])
def test_completion_split_is_the_same_in_any_batching(mode):
    whole = corpus_batch(N=40)
    obs, tgt = completion_split(whole, seed=5, mode=mode)
    X = whole.csr()
    pieces = [(0, 7), (7, 8), (8, 25), (25, 40)]
    got_obs, got_tgt = [], []
    for lo, hi in pieces:
        part = X[lo:hi]
        batch = WordCountBatch(part.indices.astype(np.int32), part.data, part.indptr.astype(np.int64), 30, start=lo)
        o, t = completion_split(batch, seed=5, mode=mode)
        got_obs.append(o.csr().toarray())
        got_tgt.append(t.csr().toarray())
    np.testing.assert_array_equal(np.concatenate(got_obs), obs.csr().toarray())
    np.testing.assert_array_equal(np.concatenate(got_tgt), tgt.csr().toarray())
    # reversing the entry order within documents changes nothing either
    rev = np.concatenate([np.arange(whole.doc_range[d], whole.doc_range[d + 1])[::-1] for d in range(40)])
    o, _ = completion_split(WordCountBatch(whole.word_ids[rev], whole.word_counts[rev], whole.doc_range, 30),
                            seed=5, mode=mode)
    np.testing.assert_array_equal(o.csr().toarray(), obs.csr().toarray())
    # another seed, another split; the same document at another index, another split
    other, _ = completion_split(whole, seed=6, mode=mode)
    assert not np.array_equal(other.csr().toarray(), obs.csr().toarray())
    shifted, _ = completion_split(WordCountBatch(whole.word_ids, whole.word_counts, whole.doc_range, 30, start=1),
                                  seed=5, mode=mode)
    assert not np.array_equal(shifted.csr().toarray(), obs.csr().toarray())


def test_completion_split_of_file_pieces(tmp_path):
    ids, counts, dr, y = make_corpus(8)
    dst = convert(save_triplet(tmp_path / "c.npz", ids, counts, dr, y), tmp_path / "c.h5", heldout=0.5)
    with BatchStore.open(dst) as store:
        whole = completion_split(store.read_heldout(), seed=0)[0].csr().toarray()
        pieces = [completion_split(store.read_heldout(lo, hi), seed=0)[0].csr().toarray()
                  for lo, hi in [(0, 11), (11, 12), (12, 30)]]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)


def test_completion_types_keeps_types_whole():
    batch = corpus_batch(9, N=400)
    obs, tgt = completion_split(batch, seed=3, mode="types")
    o, t, X = obs.csr().toarray(), tgt.csr().toarray(), batch.csr().toarray()
    assert not ((o > 0) & (t > 0)).any()  # no type on both sides
    np.testing.assert_array_equal(np.where(o > 0, o, t), X)  # each type keeps its whole count
    n_types = (X > 0).sum(axis=1)
    several = n_types >= 2
    assert ((o > 0).sum(axis=1)[several] >= 1).all() and ((t > 0).sum(axis=1)[several] >= 1).all()
    share = (o > 0).sum() / (X > 0).sum()
    assert 0.74 < share < 0.84, share


def test_completion_handles_empty_documents_and_rejects_bad_input():
    batch = WordCountBatch(np.array([3, 1, 2], dtype=np.int32), np.array([1.0, 4.0, 1.0]),
                           np.array([0, 0, 2, 2, 3]), 5, start=2)
    for mode in ("halves", "types"):
        obs, tgt = completion_split(batch, mode=mode)
        assert obs.n_atoms == tgt.n_atoms == 4 and obs.start == 2
        np.testing.assert_array_equal(obs.csr().toarray() + tgt.csr().toarray(), batch.csr().toarray())
    with pytest.raises(BnpviError, match="mode must be one of 'halves', 'types'"):
        completion_split(batch, mode="thirds")
    with pytest.raises(BnpviError, match="whole numbers; entry 1"):
        completion_split(WordCountBatch(batch.word_ids, np.array([1.0, 0.5, 1.0]), batch.doc_range, 5))
