"""Sample weights: a point of weight w counts w times in every summary and entropy (bnpvi.stats.resp).

Integer weights equal duplicated rows (the same responsibilities and globals give the same summaries and
ELBO; a whole run from the same initial globals the same ELBO and K); weights of 1 are no weights, to the
last bit; a weighted memoized run never lowers its ELBO; each move's predicted gain on weighted data is the
brute-force change of the whole weighted ELBO; the files, the converter and the estimators carry them."""
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

import bnpvi
from bnpvi.alloc import DPMixAlloc, FiniteMixAlloc
from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.data.store import BatchStore, write_points
from bnpvi.errors import BnpviError
from bnpvi.learn import runner
from bnpvi.learn.em import point_model
from bnpvi.learn.init import initial_stats
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.vb import FullVB
from bnpvi.learn.work import process_batch
from bnpvi.model import Model
from bnpvi.moves.birth import seed_birth, split, transfer
from bnpvi.moves.delete import DeleteMove
from bnpvi.moves.merge import MergeMove
from bnpvi.obs import make_obs
from bnpvi.obs.bregman import kmeanspp_seeds
from bnpvi.stats import ClusterIds, Responsibilities, SuffStats

from setups import BIRTH, DELETE, FAMILIES, MERGE, dense_resp, elbo_of, family_batch, moments, obs_cfg, run_laps
from test_moves import absorbed_columns, assert_gain, proposal_share


def integer_weights(n, seed=3):
    """Weights 0..3 (some rows dropped, some tripled)."""
    return np.random.default_rng(seed).integers(0, 4, size=n).astype(np.float64)


def weighted(batch, w):
    return PointBatch(batch.X, weights=w) if isinstance(batch, PointBatch) else \
        WordCountBatch(batch.word_ids, batch.word_counts, batch.doc_range, batch.vocab_size, weights=w)


def duplicated(batch, w):
    """Each row repeated w_n times (in order), without weights."""
    rows = np.repeat(np.arange(batch.n_atoms), w.astype(np.int64))
    out = batch.take(rows)
    return PointBatch(out.X) if isinstance(out, PointBatch) else \
        WordCountBatch(out.word_ids, out.word_counts, out.doc_range, out.vocab_size)


def model_of(family, batch, alloc=None, sparse_L=None):
    obs = make_obs(obs_cfg(family), batch.D, moments(batch.X) if isinstance(batch, PointBatch) else None)
    model = Model(alloc or DPMixAlloc(2.0), obs)
    model.alloc.use_sparse(sparse_L)
    return model


def some_globals(model, batch, K=6, iters=4):
    rng = np.random.default_rng(1)
    globals_ = model.global_step(model.hard_stats(batch, rng.integers(0, K, batch.n_atoms), K))
    for _ in range(iters):
        globals_ = model.global_step(process_batch(model, globals_, batch).stats)
    return globals_


def assert_stats_close(a: SuffStats, b: SuffStats, rtol=1e-12, skip=("n_atoms",)):
    assert set(a.fields) == set(b.fields)
    for name in a.fields:
        if name not in skip:
            np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=1e-12 * max(1.0, np.abs(b[name]).max()),
                                       err_msg=name)


def brute_weighted_stats(model, batch, r, w):
    """Summaries of dense responsibilities r at weights w straight from the definitions."""
    r = np.ascontiguousarray(r)
    H = -w @ np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)
    fields = {"N": w @ r, "H": H, "n_atoms": float(batch.n_atoms)}
    fields.update(model.obs.summarize(batch, Responsibilities(r * w[:, None], r.shape[1])))
    return SuffStats(fields, {name: spec for name, (_, spec) in model.layout.items()})


# ------------------------------------------------------------ the summaries
@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("alloc", [DPMixAlloc, FiniteMixAlloc])
def test_integer_weights_give_the_summaries_and_elbo_of_duplicated_rows(family, sparse_L, alloc):
    batch = family_batch(family)
    w = integer_weights(batch.n_atoms)
    model = model_of(family, batch, alloc(2.0), sparse_L)
    globals_ = some_globals(model, batch)
    wstats = process_batch(model, globals_, weighted(batch, w)).stats
    dstats = process_batch(model, globals_, duplicated(batch, w)).stats
    assert_stats_close(wstats, dstats)
    assert model.elbo(wstats, globals_) == pytest.approx(model.elbo(dstats, globals_), rel=1e-12)
    assert elbo_of(model, wstats) == pytest.approx(elbo_of(model, dstats), rel=1e-12)
    r = dense_resp(model.local_step(weighted(batch, w), globals_)[1].resp)
    assert_stats_close(wstats, brute_weighted_stats(model, batch, r, w))


def test_em_objective_of_integer_weights_is_that_of_duplicated_rows():
    batch = family_batch("gauss")
    w = integer_weights(batch.n_atoms)
    for hard in (False, True):
        model = point_model(FiniteMixAlloc(12.0), make_obs(obs_cfg("gauss"), batch.D, moments(batch.X)), hard=hard)
        globals_ = some_globals(model, batch)
        wstats = process_batch(model, globals_, weighted(batch, w)).stats
        dstats = process_batch(model, globals_, duplicated(batch, w)).stats
        assert_stats_close(wstats, dstats)


def test_hard_stats_and_kmeanspp_count_weights():
    batch = family_batch("gauss")
    w = integer_weights(batch.n_atoms)
    model = model_of("gauss", batch)
    labels = np.random.default_rng(0).integers(0, 5, batch.n_atoms)
    dup = np.repeat(np.arange(batch.n_atoms), w.astype(np.int64))
    assert_stats_close(model.hard_stats(weighted(batch, w), labels, 5), model.hard_stats(batch.take(dup), labels[dup], 5))
    seeds = kmeanspp_seeds(model.obs, weighted(batch, w), 20, np.random.default_rng(0))
    assert np.all(w[seeds] > 0)  # an atom of weight 0 is never drawn


# -------------------------------------------------------------------- moves
def weighted_fit(family, K=6, sparse_L=None):
    batch = family_batch(family)
    w = integer_weights(batch.n_atoms) * 0.75  # not integers
    wb = weighted(batch, w)
    model = model_of(family, batch, sparse_L=sparse_L)
    globals_ = some_globals(model, wb, K)
    log_lik, local = model.local_step(wb, globals_)
    r = dense_resp(local.resp)
    return model, wb, w, globals_, log_lik, local, r, brute_weighted_stats(model, batch, r, w)


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_merge_gains_on_weighted_points_are_the_brute_force_change_of_the_weighted_elbo(family, sparse_L):
    model, batch, w, globals_, _, local, r, stats = weighted_fit(family, sparse_L=sparse_L)
    base = elbo_of(model, stats)
    pairs = np.array([(a, b) for a in range(r.shape[1]) for b in range(a + 1, r.shape[1])])
    tracked = MergeMove(OmegaConf.create(MERGE)).track(model, globals_, batch, None, local, pairs)
    for m, (a, b) in enumerate(pairs):
        merged = np.delete(r, b, axis=1)
        merged[:, a] += r[:, b]
        brute = elbo_of(model, brute_weighted_stats(model, batch, merged, w)) - base
        assert_gain(elbo_of(model, stats.merge(a, b, {"H": tracked["H"][m]})) - base, brute)


@pytest.mark.parametrize("sparse_L", [None, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_delete_gains_on_weighted_points_are_the_brute_force_change_of_the_weighted_elbo(family, sparse_L):
    model, batch, w, globals_, log_lik, local, r, stats = weighted_fit(family, sparse_L=sparse_L)
    K = r.shape[1]
    log_pi = model.alloc.expected_log_pi(globals_.alloc)
    proposals = [(K - 1, np.arange(K - 1)), (2, np.array([0, 4])), (0, np.array([1, 3, 5]))]
    tracked = DeleteMove(OmegaConf.create(DELETE)).track(model, globals_, batch, log_lik, local,
                                                          [np.concatenate([[t], a]) for t, a in proposals])
    for (target, absorb), (rows, _) in zip(proposals, tracked):
        predicted = elbo_of(model, stats.with_clusters(absorb, rows).remove([target])) - elbo_of(model, stats)
        new = r.copy()
        new[:, absorb] = absorbed_columns(r[:, target], r[:, absorb], log_lik[:, absorb] + log_pi[absorb],
                                          int(np.argmax(globals_.stats.N[absorb])))
        new = np.delete(new, target, axis=1)
        brute = elbo_of(model, brute_weighted_stats(model, batch, new, w)) - elbo_of(model, stats)
        assert_gain(predicted, brute)


@pytest.mark.parametrize("family", FAMILIES)
def test_birth_gains_on_weighted_points_are_the_brute_force_change_of_the_weighted_elbo(family):
    model, batch, w, globals_, _, local, r, stats = weighted_fit(family, K=2)
    target = int(np.argmax(stats.N))
    seed = seed_birth(model, batch, r[:, target].copy(), OmegaConf.create(BIRTH), np.random.default_rng(0), 10)
    assert seed is not None
    N, fields = seed
    rows, proposal = transfer(model, batch, r[:, target].copy(), N, fields)
    predicted = elbo_of(model, split(stats, target, rows)) - elbo_of(model, stats)
    share = proposal_share(model, batch, r[:, target], N, fields)
    new = np.concatenate([r, r[:, [target]] * share], axis=1)
    new[:, target] = 0.0
    brute = elbo_of(model, brute_weighted_stats(model, batch, new, w)) - elbo_of(model, stats)
    assert_gain(predicted, brute)
    assert proposal.resp.weights is not None  # its group entropies (the cleanup order) are weighted too
