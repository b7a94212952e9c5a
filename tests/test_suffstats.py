import numpy as np
import pytest

from bnpvi.stats import SuffStats


def random_stats(K=5, D=3, seed=0):
    rng = np.random.default_rng(seed)
    return SuffStats({"N": rng.random(K) * 10, "H": rng.random(K), "Sx": rng.normal(size=(K, D)),
                      "Sxx": rng.normal(size=(K, D, D))}, {"n_atoms": 7})


def test_add_subtract_round_trip():
    a, b = random_stats(seed=1), random_stats(seed=2)
    back = (a + b) - b
    assert back.allclose(a, rtol=1e-12, atol=1e-12)
    assert (a + b).scalars["n_atoms"] == 14


def test_add_rejects_mismatched_K():
    with pytest.raises(ValueError, match="different K"):
        random_stats(K=3) + random_stats(K=4)


def test_merge_rows_adds_linear_fields_and_takes_given_entropy():
    s = random_stats(K=5)
    m = s.merge_rows(1, 3, merged_entropy=0.25)
    assert m.K == 4
    np.testing.assert_allclose(m.N, [s.N[0], s.N[1] + s.N[3], s.N[2], s.N[4]])
    np.testing.assert_allclose(m["Sxx"][1], s["Sxx"][1] + s["Sxx"][3])
    assert m.H[1] == 0.25 and m.H[2] == s.H[2]
    with pytest.raises(ValueError):
        s.merge_rows(3, 1, 0.0)


def test_remove_insert_reorder_pad():
    s = random_stats(K=4)
    r = s.remove_rows([1])
    np.testing.assert_array_equal(r.N, s.N[[0, 2, 3]])
    p = s.insert_zero_rows(2)
    assert p.K == 6 and np.all(p["Sxx"][4:] == 0) and np.array_equal(p.N[:4], s.N)
    assert s.pad_to(4) is s and s.pad_to(6).K == 6
    order = [2, 0, 3, 1]
    o = s.reorder(order)
    np.testing.assert_array_equal(o["Sx"], s["Sx"][order])
    with pytest.raises(ValueError):
        s.reorder([0, 0, 1, 2])


def test_serialisation_round_trip():
    s = random_stats()
    back = SuffStats.from_tree(s.to_tree())
    assert back.allclose(s, rtol=0, atol=0) and back.scalars == s.scalars
