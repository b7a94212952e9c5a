"""A move's checkpoint state from its declared attributes (bnpvi.moves.saved), through HDF5 and back."""
import h5py
import numpy as np

from bnpvi.io.h5tree import read_tree, write_tree
from bnpvi.moves.history import FailureLog
from bnpvi.moves.saved import Saved
from bnpvi.stats import SuffStats


class Example(Saved):
    saved = {"count": int, "gain": float, "flag": bool, "ids": set[int], "levels": list[np.ndarray],
             "memo": list[tuple[SuffStats, dict[int, SuffStats]] | None], "pair": tuple[int, np.ndarray | None],
             "by_batch": dict[int, list[tuple[SuffStats, dict]]], "failures": FailureLog,
             "maybe": np.ndarray | None, "untouched": int}


class Child(Example):
    saved = {"extra": str}


def stats(K, seed):
    rng = np.random.default_rng(seed)
    from bnpvi.stats.suffstats import FieldSpec
    return SuffStats({"N": rng.random(K), "S": rng.random((K, 2))},
                     {"N": FieldSpec(axes=(0,)), "S": FieldSpec(axes=(0,))})


def filled():
    ex = Child()
    ex.count, ex.gain, ex.flag, ex.ids, ex.extra = 3, -0.1 + 1e-17, True, {4, 1}, "x"
    ex.levels = [np.arange(3), np.zeros((0, 2), dtype=np.int64)]
    ex.memo = [None, (stats(2, 0), {1: stats(2, 1)}), None]
    ex.pair = (7, None)
    ex.by_batch = {0: [(stats(1, 2), {"H": np.ones(2)})], 5: []}
    ex.failures = FailureLog()
    ex.failures.record((2, 3), False, (1.5, 2.5))
    ex.maybe, ex.untouched = None, 11
    return ex


def round_trip(tree, tmp_path):
    with h5py.File(tmp_path / "s.h5", "w") as f:
        write_tree(f, tree)
    with h5py.File(tmp_path / "s.h5", "r") as f:
        return read_tree(f)


def test_state_round_trips_exactly_through_hdf5(tmp_path):
    ex = filled()
    back = Child()
    back.maybe, back.untouched = np.ones(1), -1
    state = ex.state()
    assert "maybe" not in state and "extra" in state and "count" in state  # the base's attributes and the child's
    del state["untouched"]
    back.load_state(round_trip(state, tmp_path))
    assert (back.count, back.gain, back.flag, back.ids, back.extra) == (3, ex.gain, True, {1, 4}, "x")
    assert back.maybe is None  # an optional attribute not written is None
    assert back.untouched == -1  # missing from the tree: kept as it was
    assert [a.tolist() for a in back.levels] == [[0, 1, 2], []] and back.levels[1].shape == (0, 2)
    assert back.memo[0] is None and back.memo[2] is None and len(back.memo) == 3
    total, parts = back.memo[1]
    assert np.array_equal(total.fields["S"], ex.memo[1][0].fields["S"]) and list(parts) == [1]
    assert back.pair[0] == 7 and back.pair[1] is None
    assert sorted(back.by_batch) == [0, 5] and back.by_batch[5] == []
    assert np.array_equal(back.by_batch[0][0][1]["H"], np.ones(2))
    assert back.failures.entries == {(2, 3): (1, (1.5, 2.5))}
