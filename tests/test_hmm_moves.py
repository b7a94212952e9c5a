"""Moves for hidden Markov models: merged-state entropy terms, exact single-merge gains, merges in memoized runs."""

import numpy as np
import pytest
from omegaconf import OmegaConf

from bnpvi.alloc import FiniteHMMAlloc, HDPHMMAlloc
from bnpvi.data.batch import SeqBatch
from bnpvi.kernels import hmm as fb
from bnpvi.learn.memo import MemoizedVB
from bnpvi.metrics import hamming_distance
from bnpvi.model import Model
from bnpvi.obs import make_obs

from setups import enumerate_chain, enumerated_stats, run_laps, setup, toy_sequence_file, xlogx_ratio


def tiny_batch(seed=0, lengths=(5, 1, 4, 3), K=3, D=2):
    rng = np.random.default_rng(seed)
    seq_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    X = rng.normal(size=(seq_range[-1], D)) * 2.0
    return SeqBatch(X, seq_range)


def test_merge_pair_terms_equal_enumeration():
    rng = np.random.default_rng(0)
    K, lengths = 3, (5, 1, 4)
    seq_range = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    C = rng.normal(size=(seq_range[-1], K)) * 3.0
    a = np.log(rng.dirichlet(np.ones(K)) * 0.9)
    W = np.log(rng.dirichlet(np.ones(K), size=K) * 0.8)
    out = fb.forward_backward(C, seq_range, a, W, keep_messages=True)
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    start, table = fb.merge_pair_terms(out, seq_range, W, pairs, block=3)  # blocks cross sequences
    for m, (i, j) in enumerate(pairs):
        lump = [i if k == j else k for k in range(K)]
        want_start, row, col, self_term = 0.0, np.zeros(K), np.zeros(K), 0.0
        for d in range(len(lengths)):
            r, s = enumerate_chain(C[seq_range[d]:seq_range[d + 1]], a, W, lump, K)
            want_start += xlogx_ratio(r[0, i], 1.0)
            for t in range(s.shape[0]):
                rows = s[t].sum(axis=1)
                row += xlogx_ratio(s[t][i], rows[i])
                col += xlogx_ratio(s[t][:, i], rows)
                self_term += xlogx_ratio(s[t][i, i], rows[i])
        row[i] = col[i] = self_term
        row[j] = col[j] = 0.0
        assert start[m] == pytest.approx(want_start, rel=1e-10)
        assert np.allclose(table[m, 0], row, rtol=1e-10, atol=1e-13)
        assert np.allclose(table[m, 1], col, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("alloc", [HDPHMMAlloc(gamma=5.0, alpha=0.5, start_alpha=5.0, sticky_kappa=20.0),
                                   HDPHMMAlloc(gamma=5.0, alpha=0.5, start_alpha=5.0, sticky_kappa=0.0),
                                   FiniteHMMAlloc(alpha=1.0, start_alpha=2.0, sticky_kappa=5.0)],
                         ids=["hdp_sticky", "hdp", "finite"])
def test_single_merge_gain_equals_brute_force(alloc):
    """The gain of merging two states from tracked terms equals the ELBO difference of the merged chain's
    summaries built by enumerating every path (Hughes 2016 thesis §6.5.1)."""
    K = 3
    batch = tiny_batch()
    obs = make_obs({"name": "gauss", "sF": 1.0, "prior_cov": "eye", "nu": None, "kappa": 1e-3, "mean": [0.0, 0.0]},
                   2, None)
    model = Model(alloc, obs)
    labels = np.arange(batch.n_atoms) % K
    globals_ = model.global_step(model.hard_stats(batch, labels, K))
    log_lik, local = model.local_step(batch, globals_)
    stats = model.summarize(batch, local)
    globals_ = model.global_step(stats)
    log_lik, local = model.local_step(batch, globals_)
    stats = model.summarize(batch, local)
    current = model.elbo(stats, globals_)
    log_start, log_trans = alloc._potentials(globals_.alloc)
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        tracked = alloc.merge_terms(local, np.array([[i, j]]))
        keep = [k for k in range(K) if k != j]
        values = {"start_entropy": tracked["start_entropy"][0], "trans_entropy": tracked["trans_entropy"][0][:, keep]}
        merged = stats.merge(i, j, values)
        gain = model.evaluate(merged, alloc.warm_start(globals_.alloc, [[i, j] if k == i else [k] for k in keep]))[0]
        # brute force: the merged chain's marginals by enumeration, its summaries from scratch
        lump = [keep.index(i) if k == j else keep.index(k) for k in range(K)]
        brute = enumerated_stats(batch, obs, log_lik, log_start, log_trans, lump, K - 1, merged.specs)
        for name in brute.fields:
            assert np.allclose(merged[name], brute[name], rtol=1e-9, atol=1e-12), name
        want = model.evaluate(brute, alloc.warm_start(globals_.alloc, [[i, j] if k == i else [k] for k in keep]))[0]
        assert gain - current == pytest.approx(want - current, rel=1e-8, abs=1e-8)


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    return toy_sequence_file(tmp_path_factory, seed=5)


def test_memo_merges_reduce_an_abundant_start_to_the_true_states(sequences):
    store, model, globals_, ids, rng = setup(sequences, HDPHMMAlloc(gamma=10.0, alpha=0.5, start_alpha=5.0,
                                                                    sticky_kappa=50.0), K=16, seed=0)
    moves = OmegaConf.create({"merge": {"start_lap": 2, "max_pairs": 50, "max_per_cluster": 4, "retry_change": 0.1}})
    alg = MemoizedVB(model, store, OmegaConf.create({"n_laps": 15, "converge_thr": 0.0}), rng, globals_, ids, moves)
    elbos = run_laps(alg, 15)
    assert np.all(np.diff(elbos[1:]) >= -1e-9 * np.abs(elbos[2:]))
    events = alg.moves.events
    assert sum(e.accepted for e in events if e.move == "merge") >= 8
    z = np.concatenate([model.decode(store.read_batch(b), alg.globals) for b in range(store.n_batches)])
    assert alg.globals.K == 8
    assert hamming_distance(store.labels(), z) < 0.02
    store.close()


def test_whole_data_deletes_are_exact_and_remove_extra_states(sequences):
    """An HMM delete re-runs forward-backward on every batch without the target, so its candidate
    summaries equal a fresh pass under the same potentials and its gain is exact."""
    store, model, globals_, ids, rng = setup(sequences, HDPHMMAlloc(gamma=10.0, alpha=0.5, start_alpha=5.0,
                                                                    sticky_kappa=50.0), K=10, seed=1)
    moves = OmegaConf.create({"delete": {"start_lap": 2, "max_per_lap": 3, "absorb": 20, "max_size_frac": 0.3,
                                         "max_fails": 3, "retry_change": 0.1}})
    alg = MemoizedVB(model, store, OmegaConf.create({"n_laps": 10, "converge_thr": 0.0}), rng, globals_, ids, moves)
    elbos = []
    while alg.lap < 10:
        result = alg.step()
        if result is not None:
            elbos.append(result.elbo)
            # the aggregate is exactly Σ of the caches, which are this lap's (or the delete's) summaries
            total = alg.cache_total()
            assert np.allclose(total["trans"], alg.globals.stats["trans"], rtol=1e-9, atol=1e-9)
    elbos = np.array(elbos)
    assert np.all(np.diff(elbos[1:]) >= -1e-9 * np.abs(elbos[2:]))
    accepted = [e for e in alg.moves.events if e.move == "delete" and e.accepted]
    assert accepted and all(e.exact for e in accepted)
    assert alg.globals.K == 8
    store.close()
