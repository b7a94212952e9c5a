"""SuffStats: field specs, and every cluster edit on every cluster axis, against explicit loops."""
import numpy as np
import pytest

from bnpvi.stats import ENTROPY, ENTROPY_TABLE, PER_CLUSTER, TABLE, TOTAL, ClusterIds, FieldSpec, SuffStats

SPECS = {"N": PER_CLUSTER, "H": ENTROPY, "Sx": PER_CLUSTER, "Sxx": PER_CLUSTER, "M": TABLE,
         "Ht": ENTROPY_TABLE, "n_atoms": TOTAL}


def random_stats(K=5, D=3, seed=0):
    rng = np.random.default_rng(seed)
    fields = {"N": rng.random(K) * 10, "H": rng.random(K), "Sx": rng.normal(size=(K, D)),
              "Sxx": rng.normal(size=(K, D, D)), "M": rng.random((K, K)), "Ht": rng.random((K, K)),
              "n_atoms": 7.0}
    return SuffStats(fields, SPECS)


def remap_by_loops(s: SuffStats, sources, tracked=None):
    """The definition of a remap, one entry at a time."""
    K_new = len(sources)
    out = {}
    for name, value in s.fields.items():
        axes = s.specs[name].axes
        if axes == ():
            out[name] = value.copy()
            continue
        new = np.zeros((K_new,) * len(axes) + value.shape[len(axes):])
        for i in range(K_new):
            if axes == (0,):
                for a in sources[i]:
                    new[i] += value[a]
            else:
                for j in range(K_new):
                    for a in sources[i]:
                        for b in sources[j]:
                            new[i, j] += value[a, b]
        for i, (row_or_value) in (tracked or {}).get(name, {}).items():
            if axes == (0,):
                new[i] = row_or_value
            else:
                row, col = row_or_value
                new[i, :] = row
                new[:, i] = col
        out[name] = new
    return out


def assert_fields_equal(stats: SuffStats, expected: dict):
    for name, value in expected.items():
        np.testing.assert_allclose(stats[name], value, rtol=1e-12, atol=1e-12, err_msg=name)


def test_add_subtract_round_trip_and_totals():
    a, b = random_stats(seed=1), random_stats(seed=2)
    back = (a + b) - b
    assert back.allclose(a, rtol=1e-12, atol=1e-12)
    assert float((a + b)["n_atoms"]) == 14.0
    assert float(a.scaled(0.5)["n_atoms"]) == 3.5


def test_add_rejects_mismatched_K_or_fields():
    with pytest.raises(ValueError, match="different K"):
        random_stats(K=3) + random_stats(K=4)
    other = SuffStats({"N": np.ones(5)}, {"N": PER_CLUSTER})
    with pytest.raises(ValueError, match="differ"):
        random_stats() + other


def test_constructor_checks_shapes_and_specs():
    with pytest.raises(ValueError, match="'M'"):
        SuffStats({"N": np.ones(3), "M": np.ones((3, 2))}, {"N": PER_CLUSTER, "M": TABLE})
    with pytest.raises(ValueError, match="'N'"):
        SuffStats({"S": np.ones(3)}, {"S": PER_CLUSTER})
    with pytest.raises(ValueError):
        FieldSpec(axes=(1,))


@pytest.mark.parametrize("order", [[2, 0, 3, 1, 4], [4, 3, 2, 1, 0]])
def test_reorder_acts_on_every_cluster_axis(order):
    s = random_stats()
    assert_fields_equal(s.reorder(order), remap_by_loops(s, [[k] for k in order]))
    with pytest.raises(ValueError):
        s.reorder([0, 0, 1, 2, 3])


def test_remove_insert_pad():
    s = random_stats(K=4)
    assert_fields_equal(s.remove([1]), remap_by_loops(s, [[0], [2], [3]]))
    assert_fields_equal(s.remove([0, 3]), remap_by_loops(s, [[1], [2]]))
    padded = s.insert(2)
    assert padded.K == 6
    assert_fields_equal(padded, remap_by_loops(s, [[0], [1], [2], [3], [], []]))
    assert np.all(padded["M"][4:] == 0) and np.all(padded["M"][:, 4:] == 0)
    assert s.pad_to(4) is s and s.pad_to(6).K == 6
    with pytest.raises(ValueError):
        s.pad_to(3)


@pytest.mark.parametrize("kA, kB", [(0, 1), (1, 3), (0, 4)])
def test_merge_sums_rows_and_columns_and_takes_tracked_values(kA, kB):
    s = random_stats(K=5)
    rng = np.random.default_rng(kA + 10 * kB)
    row, col = rng.random(4), rng.random(4)
    col[kA] = row[kA]
    m = s.merge(kA, kB, {"H": 0.25, "Ht": (row, col)})
    sources = [[k] for k in range(5) if k != kB]
    sources[kA] = [kA, kB]
    expected = remap_by_loops(s, sources, {"H": {kA: 0.25}, "Ht": {kA: (row, col)}})
    assert m.K == 4
    assert_fields_equal(m, expected)
    # the K x K sum merge: M'_AA = M_AA + M_AB + M_BA + M_BB (Hughes 2016 thesis §6.5.1)
    assert m["M"][kA, kA] == pytest.approx(s["M"][kA, kA] + s["M"][kA, kB] + s["M"][kB, kA] + s["M"][kB, kB])
    with pytest.raises(ValueError):
        s.merge(3, 1, {"H": 0.0, "Ht": (row, col)})


def test_merge_without_a_tracked_value_is_an_error():
    s = random_stats(K=3)
    with pytest.raises(ValueError, match="tracked value of field 'H'"):
        s.merge(0, 1, {"Ht": (np.zeros(2), np.zeros(2))})


def test_remap_with_several_merged_and_new_clusters():
    s = SuffStats({"N": np.arange(5.0), "M": np.arange(25.0).reshape(5, 5)}, {"N": PER_CLUSTER, "M": TABLE})
    sources = [[4], [0, 2], [], [1, 3]]
    assert_fields_equal(s.remap(sources), remap_by_loops(s, sources))
    with pytest.raises(ValueError, match="distinct"):
        s.remap([[0], [0]])


def test_pad_none_fields_refuse_new_clusters():
    spec = FieldSpec(pad="none")
    s = SuffStats({"N": np.ones(3), "P": np.ones(3)}, {"N": PER_CLUSTER, "P": spec})
    with pytest.raises(ValueError, match="'P' cannot be padded"):
        s.insert(1)
    assert s.reorder([2, 1, 0]).K == 3 and s.remove([0]).K == 2


def test_with_clusters_replaces_per_cluster_fields_only():
    s = SuffStats({"N": np.arange(4.0), "S": np.arange(8.0).reshape(4, 2), "n": 9.0},
                  {"N": PER_CLUSTER, "S": PER_CLUSTER, "n": TOTAL})
    rows = SuffStats({"N": [10.0, 20.0], "S": [[1.0, 1.0], [2.0, 2.0]], "n": 1.0}, s.specs)
    out = s.with_clusters([3, 1], rows)
    np.testing.assert_array_equal(out.N, [0, 20, 2, 10])
    np.testing.assert_array_equal(out["S"][3], [1, 1])
    assert float(out["n"]) == 9.0
    with pytest.raises(ValueError, match="table"):
        random_stats().with_clusters([0], random_stats(K=1))


def test_table_field_survives_edits_and_serialisation():
    s = random_stats(K=5)
    edited = s.reorder([4, 2, 0, 1, 3]).merge(0, 2, {"H": 1.0, "Ht": (np.ones(4), np.ones(4))}).insert(1).remove([1])
    back = SuffStats.from_tree(edited.to_tree())
    assert back.specs == edited.specs
    assert back.allclose(edited, rtol=0, atol=0)


def test_cluster_ids_follow_remaps():
    ids = ClusterIds.first(4)
    ids.remap([[3], [0, 1], [], [2]])
    np.testing.assert_array_equal(ids.uids, [3, 0, 4, 2])
    np.testing.assert_array_equal(ids.positions([2, 3]), [3, 0])
    ids.remap([[0], [1], [2], [3], []])
    assert ids.uids[-1] == 5  # ids are never reused
    back = ClusterIds.from_state(ids.state())
    np.testing.assert_array_equal(back.uids, ids.uids)
    assert back.next_uid == ids.next_uid
