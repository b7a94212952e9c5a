"""Graph files: reading edge lists and sparse matrices, held-out pairs, the one-line errors, bnpvi-data."""
import logging

import numpy as np
import pytest
import scipy.sparse as sp

from bnpvi.cli.data import main as data_main
from bnpvi.data.graph_in import convert_graph
from bnpvi.data.store import BatchStore
from bnpvi.errors import BnpviError


def edge_file(tmp_path, text, name="edges.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_edge_list_with_names_comments_and_separators(tmp_path):
    src = edge_file(tmp_path, "# collaborations\nalice,bob\nbob\tcarol\n\ncarol  dave 1\nalice eve 0\n7 alice\n")
    with BatchStore.open(convert_graph(src, tmp_path / "g.h5", n_batches=2)) as store:
        assert store.kind == "graph" and store.directed and store.n_atoms == 6
        assert store.node_names() == ["alice", "bob", "carol", "dave", "eve", "7"]  # eve appears with weight 0
        batch = store.read_all()
        edges = {(int(i), int(j)) for i in range(6) for j in batch.indices[batch.indptr[i]:batch.indptr[i + 1]]}
        assert edges == {(0, 1), (1, 2), (2, 3), (5, 0)}
        assert store.n_batches == 2 and store.batches_fixed
        store.validate()


def test_undirected_edges_go_both_ways_once(tmp_path):
    src = edge_file(tmp_path, "a b\nb a\nb c\n")  # SNAP lists each undirected edge in both directions
    with BatchStore.open(convert_graph(src, tmp_path / "g.h5", undirected=True)) as store:
        assert not store.directed and store.n_edges == 4 and store.info()["edges"] == 2


def test_sparse_matrix(tmp_path):
    A = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]))
    sp.save_npz(tmp_path / "a.npz", A)
    with BatchStore.open(convert_graph(tmp_path / "a.npz", tmp_path / "g.h5")) as store:
        assert store.n_atoms == 3 and store.n_edges == 3 and store.node_names() == ["0", "1", "2"]
    sp.save_npz(tmp_path / "w.npz", sp.csr_matrix(np.array([[0, 2], [1, 0]])))
    with pytest.raises(BnpviError, match="entries must be 0 or 1"):
        convert_graph(tmp_path / "w.npz", tmp_path / "w.h5")
    sp.save_npz(tmp_path / "r.npz", sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(BnpviError, match="must be square"):
        convert_graph(tmp_path / "r.npz", tmp_path / "r.h5")


def test_self_loops_are_dropped_with_a_warning(tmp_path, caplog):
    src = edge_file(tmp_path, "a a\na b\n")
    with caplog.at_level(logging.WARNING, logger="bnpvi.data"):
        path = convert_graph(src, tmp_path / "g.h5")
    assert "self-loop" in caplog.text
    with BatchStore.open(path) as store:
        assert store.n_edges == 1


@pytest.mark.parametrize("text, message", [
    ("a b\nc d\na b\n", "the edge a -> b appears more than once"),
    ("# nothing\n", "has 0 node"),
    ("a a\n", "has 1 node"),
    ("a b\nc\n", "line 2 holds one node name 'c'"),
    ("a b 0.5\n", "weights must be 0 or 1"),
    ("a b 1 x\n", "expected src dst"),
    ("a b 0\nb c 0\n", "has no edge"),
])
def test_bad_edge_lists_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(BnpviError, match=message) as err:
        convert_graph(edge_file(tmp_path, text), tmp_path / "g.h5")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "g.h5").exists()


def test_heldout_pairs(tmp_path):
    rng = np.random.default_rng(0)
    lines = {(int(a), int(b)) for a, b in rng.integers(0, 40, (300, 2)) if a < b}
    src = edge_file(tmp_path, "".join(f"n{a} n{b}\n" for a, b in sorted(lines)))
    paths = [convert_graph(src, tmp_path / f"g{i}.h5", undirected=True, heldout=0.1, heldout_seed=s, n_batches=4)
             for i, s in enumerate((3, 3, 4))]
    pairs = []
    for path in paths:
        with BatchStore.open(path) as store:
            h_src, h_dst, value = store.heldout_pairs()
            names = store.node_names()
            pairs.append({(names[a], names[b], int(v)) for a, b, v in zip(h_src, h_dst, value)})
            n_edges = len(lines)
            assert value.sum() == round(0.1 * n_edges) == (value == 0).sum()
            assert store.info()["edges"] == n_edges - value.sum()
            edges = {tuple(sorted((f"n{a}", f"n{b}"))) for a, b in lines}
            for a, b, v in pairs[-1]:
                assert (tuple(sorted((a, b))) in edges) == bool(v)
            batch = store.read_all()  # held-out pairs are in neither direction of the training edges
            train = {(int(i), int(j)) for i in range(store.n_atoms)
                     for j in batch.indices[batch.indptr[i]:batch.indptr[i + 1]]}
            assert not any((a, b) in train or (b, a) in train for a, b in zip(h_src.tolist(), h_dst.tolist()))
            assert batch.n_pairs == store.n_atoms * (store.n_atoms - 1) - 2 * value.size
    assert pairs[0] == pairs[1] and pairs[0] != pairs[2]


def test_a_store_that_has_read_batches_pickles_and_reads_the_same(tmp_path):
    import pickle

    rng = np.random.default_rng(1)
    lines = {(int(a), int(b)) for a, b in rng.integers(0, 30, (200, 2)) if a != b}
    src = edge_file(tmp_path, "".join(f"{a} {b}\n" for a, b in sorted(lines)))
    path = convert_graph(src, tmp_path / "g.h5", heldout=0.1, heldout_seed=0, n_batches=3)
    with BatchStore.open(path) as store:
        before = [store.read_batch(b) for b in range(3)]  # the file's groups are now looked up and kept
        copy = pickle.loads(pickle.dumps(store))  # as a Dask worker gets it
        for b, batch in enumerate(before):
            again = copy.read_batch(b)
            for name in ("indptr", "indices", "held_indptr", "held_indices"):
                assert np.array_equal(getattr(again, name), getattr(batch, name)), name
        copy.close()


def test_cli_convert_and_info(tmp_path, capsys):
    src = edge_file(tmp_path, "a b\nb c\nc a\nc d\n")
    assert data_main(["convert", str(src), str(tmp_path / "g.h5"), "--graph", "--undirected", "--batches", "2"]) == 0
    assert "kind=graph N=4 nodes, 4 undirected edges" in capsys.readouterr().out
    assert data_main(["info", str(tmp_path / "g.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    assert "4 nodes" in out and "directed: no" in out and "every edge and held-out pair valid" in out
    assert data_main(["convert", str(src), str(tmp_path / "h.h5"), "--undirected"]) == 2
    assert "--undirected applies only with --graph" in capsys.readouterr().err
