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

from setups import (BIRTH, DELETE, FAMILIES, MERGE, assert_gain, deleted_resp, dense_resp, elbo_of, family_batch,
                    moments, obs_cfg, proposal_share, run_laps)


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


def test_the_compiled_local_step_weighs_its_entropies():
    from bnpvi.kernels import mixture
    rng = np.random.default_rng(0)
    log_lik = rng.normal(size=(3000, 7)) * 4.0
    log_lik[:5, 2] = -np.inf
    log_prior = np.log(rng.dirichlet(np.ones(7)))
    w = rng.gamma(2.0, 1.0, size=3000)
    resp, log_norm, plain = mixture.dense_local_step(log_lik, log_prior)
    wresp, wnorm, weighted_H = mixture.dense_local_step(log_lik, log_prior, weights=w)
    np.testing.assert_array_equal(wresp, resp)  # the local step does not depend on w
    np.testing.assert_array_equal(wnorm, log_norm)
    np.testing.assert_allclose(weighted_H, w @ -np.where(resp > 0, resp * np.log(np.where(resp > 0, resp, 1.0)), 0.0),
                               rtol=1e-12)
    np.testing.assert_array_equal(mixture.dense_local_step(log_lik, log_prior, weights=np.ones(3000))[2], plain)
    with pytest.raises(ValueError, match="weights must have shape"):
        mixture.dense_local_step(log_lik, log_prior, weights=w[:10])


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
        new = deleted_resp(r, target, absorb, log_lik + log_pi, globals_.stats.N)
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


# --------------------------------------------------------------------- runs
def blobs(n=600, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]])
    labels = rng.integers(0, 4, size=n)
    return centers[labels] + rng.normal(size=(n, 2)), labels


@pytest.mark.parametrize("family", ["gauss", "diag_gauss", "zm_gauss"])
def test_a_full_vb_run_on_integer_weights_is_the_run_on_duplicated_rows(tmp_path, family):
    X, _ = blobs(400)
    w = integer_weights(X.shape[0])
    write_points(tmp_path / "w.h5", X, n_batches=3, weights=w)
    write_points(tmp_path / "d.h5", np.repeat(X, w.astype(np.int64), axis=0), n_batches=2)
    runs = []
    with BatchStore.open(tmp_path / "w.h5") as ws, BatchStore.open(tmp_path / "d.h5") as ds:
        for a, b in ((ws.moments().mean, ds.moments().mean), (ws.moments().cov, ds.moments().cov)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)  # the data-driven priors are the same
        model = Model(DPMixAlloc(2.0), make_obs(obs_cfg(family), 2, ws.moments()))
        start = model.global_step(model.hard_stats(PointBatch(X[:8], weights=np.full(8, 2.0)), np.arange(8), 8))
        for store in (ws, ds):
            alg = FullVB(model, store, {}, np.random.default_rng(0), start, ClusterIds.first(8))
            runs.append((run_laps(alg, 30), alg.globals.stats.N))
    (we, wN), (de, dN) = runs
    np.testing.assert_allclose(we, de, rtol=1e-10)
    np.testing.assert_allclose(wN, dN, rtol=1e-8, atol=1e-8)
    assert np.sum(wN > 1.0) == np.sum(dN > 1.0)


def test_weights_of_one_are_no_weights_to_the_last_bit(compose_cfg, tmp_path):
    X, labels = blobs()
    write_points(tmp_path / "plain.h5", X, n_batches=3, labels=labels)
    write_points(tmp_path / "ones.h5", X, n_batches=3, labels=labels, weights=np.ones(X.shape[0]))
    with BatchStore.open(tmp_path / "ones.h5") as store:
        assert not store.has_weights and store.read_batch(0).weights is None
    traces = []
    for name in ("plain", "ones"):
        cfg = compose_cfg("data=hdf5", f"data.path={tmp_path / name}.h5", "alg.n_laps=12", "init.K=1")
        runner.train(cfg, tmp_path / name)
        traces.append(pd.read_csv(tmp_path / name / "trace.csv").drop(columns=["elapsed_s"]))
    pd.testing.assert_frame_equal(*traces, check_exact=True)
    batch = PointBatch(X)
    model = model_of("gauss", batch)
    globals_ = some_globals(model, batch)
    local = model.local_step(batch, globals_)[1]
    assert local.resp.weights is None and model.summarize(batch, local).N is not None


@pytest.mark.parametrize("alg", ["memo", "sovb", "em"])
def test_a_weighted_run_trains_and_a_memo_run_never_lowers_its_elbo(compose_cfg, tmp_path, alg):
    X, labels = blobs(900)
    w = np.random.default_rng(2).gamma(2.0, 1.0, size=X.shape[0])
    path = write_points(tmp_path / "w.h5", X, n_batches=3, labels=labels, weights=w)
    extra = {"memo": ["init.K=1"], "sovb": ["init.K=4", "model=finite_mix", "alg.n_laps=15"],
             "em": ["init.K=4", "model=finite_mix", "model.gamma=8", "obs.kappa=1.0"]}[alg]
    cfg = compose_cfg("data=hdf5", f"data.path={path}", f"alg={alg}", *extra)
    summary = runner.train(cfg, tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert summary["ari"] > 0.95
    if alg == "memo":
        from setups import settled_elbo
        elbo = settled_elbo(trace)
        assert elbo.size > 5 and np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
        assert summary["K"] == 4
        np.testing.assert_allclose(trace["elbo_per_atom"], trace["elbo"] / w.sum(), rtol=1e-12)
    assignments = pd.read_csv(tmp_path / "run" / "assignments.csv")
    assert len(assignments) == X.shape[0]  # the outputs stay one row per point


def test_tfsvi_refuses_weighted_points(compose_cfg, tmp_path):
    X, _ = blobs(100)
    path = write_points(tmp_path / "w.h5", X, weights=np.arange(100.0))
    cfg = compose_cfg("data=hdf5", f"data.path={path}", "alg=tfsvi")
    with pytest.raises(BnpviError, match="alg=tfsvi does not take"):
        runner.train(cfg, tmp_path / "run")


# -------------------------------------------------------------- files, CLI
def test_a_points_file_holds_weights_read_with_each_batch_and_checked(tmp_path):
    X, _ = blobs(50)
    w = np.linspace(0.0, 3.0, 50)
    path = write_points(tmp_path / "w.h5", X, n_batches=4, weights=w)
    with BatchStore.open(path) as store:
        assert store.has_weights and store.info()["weighted"] and store.info()["weight_total"] == pytest.approx(75.0)
        got = np.concatenate([store.read_batch(b).weights for b in range(store.n_batches)])
        np.testing.assert_array_equal(got, w)
        np.testing.assert_array_equal(store.read_batch(1, piece=(1, 2)).weights,
                                      store.read_batch(1).weights[-store.read_batch(1, piece=(1, 2)).n_atoms:])
        store.validate()
    for bad, message in [(-w, "must be finite and >= 0; row 1 has -0.06"), (np.zeros(50), "every one of the 50"),
                         (w[:3], "have 3 entries but there are 50 rows"), (np.r_[np.nan, w[1:]], "row 0 has NaN")]:
        with pytest.raises(BnpviError, match=message.replace("(", r"\(").replace(")", r"\)")):
            write_points(tmp_path / "bad.h5", X, weights=bad)
        assert not (tmp_path / "bad.h5").exists()


def csv_with_weights(path, X, w, header=True):
    with open(path, "w") as f:
        if header:
            f.write("x,count,y\n")
        for (a, b), c in zip(X, w):
            f.write(f"{float(a)!r},{c},{float(b)!r}\n")
    return path


def test_convert_weights_round_trip_and_info(tmp_path, capsys):
    from bnpvi.cli.data import main
    X, _ = blobs(40)
    w = integer_weights(40).astype(np.int64)
    src = csv_with_weights(tmp_path / "p.csv", X, w)
    assert main(["convert", str(src), str(tmp_path / "p.h5"), "--weights", "count", "--batches", "2"]) == 0
    assert "weighted (total weight" in capsys.readouterr().out
    with BatchStore.open(tmp_path / "p.h5") as store:
        assert store.D == 2  # the weights column is not a feature
        np.testing.assert_array_equal(np.concatenate([store.read_batch(b).X for b in range(2)]), X)
        np.testing.assert_array_equal(store.read_weights(), w.astype(np.float64))
    assert main(["info", str(tmp_path / "p.h5"), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"weights: yes, total {w.sum()}" in out and "weights >= 0" in out
    bare = csv_with_weights(tmp_path / "bare.csv", X, w, header=False)
    assert main(["convert", str(bare), str(tmp_path / "s.h5"), "--weights", "1", "--shuffle", "3",
                 "--heldout", "0.25"]) == 0
    with BatchStore.open(tmp_path / "s.h5") as store:
        order = store.source_index(0, store.n_atoms)
        np.testing.assert_array_equal(store.read_weights(), w[order].astype(np.float64))  # weights follow their rows
        assert store.read_heldout().weights is None  # held-out points count one each


@pytest.mark.parametrize("cells, message", [
    (["1", "-2"], "weights (column 'count') must be finite and >= 0; row 1 has -2.0"),
    (["1", "NaN"], "weights column 'count' has a missing value in row 1"),
    (["1", ""], "weights column 'count' has a missing value in row 1"),
    (["0", "0"], "every one of the 2 weights (column 'count') is 0"),
    (["1", "lots"], "weights column 'count' has 'lots' in row 1, not a number"),
])
def test_convert_weights_errors_are_one_line(tmp_path, capsys, cells, message):
    from bnpvi.cli.data import main
    src = tmp_path / "p.csv"
    src.write_text("x,count,y\n" + "".join(f"1.5,{c},2.0\n" for c in cells))
    assert main(["convert", str(src), str(tmp_path / "p.h5"), "--weights", "count"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
    assert not (tmp_path / "p.h5").exists()


def test_convert_weights_of_an_array_file_is_refused(tmp_path, capsys):
    from bnpvi.cli.data import main
    np.save(tmp_path / "a.npy", np.ones((4, 2)))
    assert main(["convert", str(tmp_path / "a.npy"), str(tmp_path / "a.h5"), "--weights", "w"]) == 2
    assert "--weights names a CSV column" in capsys.readouterr().err


# --------------------------------------------------------------- estimators
@pytest.mark.parametrize("estimator", [bnpvi.DPMixture, bnpvi.FiniteMixture])
def test_estimators_take_sample_weight(estimator):
    X, labels = blobs(300)
    w = integer_weights(300)
    keys = {"random_state": 0, **({"n_components": 4} if estimator is bnpvi.FiniteMixture else {})}
    plain = estimator(**keys).fit(X)
    ones = estimator(**keys).fit(X, sample_weight=np.ones(300))
    assert ones.elbo_ == plain.elbo_ and np.array_equal(ones.elbo_trace_, plain.elbo_trace_)
    fitted = estimator(**keys).fit(X, sample_weight=w)
    assert fitted.n_components_ == 4 and fitted.labels_.shape == (300,)
    assert fitted.elbo_ != plain.elbo_
    sizes = np.sort(fitted.weights_)
    by_weight = np.sort([w[labels == k].sum() for k in range(4)]) / w.sum()
    np.testing.assert_allclose(sizes, by_weight, atol=0.02)  # E[π] follows the weighted counts
    scores = fitted.score_samples(X)
    assert fitted.score(X, sample_weight=w) == pytest.approx(np.average(scores, weights=w))
    assert fitted.score(X) == pytest.approx(np.mean(scores))
    with pytest.raises(ValueError, match="Negative"):
        estimator(**keys).fit(X, sample_weight=-w)
    with pytest.raises(ValueError, match="shape"):
        estimator(**keys).fit(X, sample_weight=w[:10])


@pytest.mark.parametrize("estimator", [bnpvi.DPMixture, bnpvi.FiniteMixture])
def test_scikit_learns_sample_weight_check_holds_up_to_cluster_ids(estimator):
    """scikit-learn's check_sample_weight_equivalence (expected to fail in test_estimators: it compares the ids
    of the clusters), on its own data: the weighted fit and the fit of the repeated rows reach the same ELBO and
    the same partition. (Their starts differ, k-means++ seeds drawn from other rows; here they meet.)"""
    from sklearn.metrics import adjusted_rand_score
    from sklearn.utils import shuffle
    rng = np.random.RandomState(42)  # the check's own draws
    X = rng.rand(15, 30)
    rng.randint(0, 3, size=15)
    sw = rng.randint(0, 5, size=15)
    Xw, sww = shuffle(X, sw, random_state=0)
    weighted_fit_ = estimator(n_laps=3, random_state=0).fit(Xw, sample_weight=sww)
    repeated = estimator(n_laps=3, random_state=0).fit(X.repeat(sw, axis=0))
    assert weighted_fit_.elbo_ == pytest.approx(repeated.elbo_, rel=1e-10)
    assert adjusted_rand_score(weighted_fit_.predict(X), repeated.predict(X)) == 1.0


@pytest.mark.parametrize("moves", ["[birth,merge,delete,reassign]", "[split,merge]"])
def test_a_weighted_run_resumed_mid_lap_ends_where_it_would_have(compose_cfg, tmp_path, moves):
    """Checkpoints of weighted runs: the moves' tracked atoms (reassign candidates, split samples) keep their
    weights."""
    from setups import RESUME_COMMON, assert_resume_is_exact
    X, labels = blobs(600)
    w = integer_weights(600)  # the weights of 1 are reassign candidates
    path = write_points(tmp_path / "w.h5", X, n_batches=3, labels=labels, weights=w)
    cfg = compose_cfg("data=hdf5", f"data.path={path}", "init.K=1", f"moves={moves}", *RESUME_COMMON)
    assert_resume_is_exact(cfg, tmp_path, lap=3)


def test_appending_rows_keeps_every_rows_weight(tmp_path):
    from bnpvi.cli.data import main
    X, _ = blobs(30)
    w = integer_weights(30).astype(np.int64)
    csv_with_weights(tmp_path / "old.csv", X[:20], w[:20])
    csv_with_weights(tmp_path / "new.csv", X[20:], w[20:])
    assert main(["convert", str(tmp_path / "old.csv"), str(tmp_path / "old.h5"), "--weights", "count"]) == 0
    assert main(["convert", str(tmp_path / "new.csv"), str(tmp_path / "both.h5"), "--weights", "count",
                 "--append-to", str(tmp_path / "old.h5")]) == 0
    np.savetxt(tmp_path / "plain.csv", X[20:], delimiter=",", header="x,y", comments="")
    assert main(["convert", str(tmp_path / "plain.csv"), str(tmp_path / "more.h5"),
                 "--append-to", str(tmp_path / "old.h5")]) == 0
    with BatchStore.open(tmp_path / "both.h5") as both, BatchStore.open(tmp_path / "more.h5") as more:
        np.testing.assert_array_equal(both.read_weights(), w.astype(np.float64))
        np.testing.assert_array_equal(more.read_weights(), np.r_[w[:20], np.ones(10)])  # new rows count once
