"""The finite sticky HMM as an allocation model: its ELBO, monotone VB and memoized VB, and state recovery."""
import numpy as np
import pytest
from scipy.special import digamma, gammaln

from bnpvi.alloc import FiniteHMMAlloc
from bnpvi.data.store import write_sequences
from bnpvi.data.toy import make_toy_sequences
from bnpvi.errors import BnpviError
from bnpvi.learn.memo import MemoizedVB
from bnpvi.learn.vb import FullVB
from bnpvi.learn.work import process_batch
from bnpvi.metrics import hamming_distance

import setups
from setups import run_laps, toy_sequence_file


def dirichlet_kl(q, p):
    """KL(Dir(q) ‖ Dir(p)) row by row."""
    c = lambda a: gammaln(a.sum(axis=-1)) - gammaln(a).sum(axis=-1)  # noqa: E731
    return c(q) - c(p) + np.sum((q - p) * (digamma(q) - digamma(q.sum(axis=-1, keepdims=True))), axis=-1)


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    return toy_sequence_file(tmp_path_factory, seed=2)


def setup(path, family="gauss", K=8, seed=0, sticky_kappa=50.0, init="kmeanspp"):
    return setups.setup(path, FiniteHMMAlloc(alpha=0.5, start_alpha=5.0, sticky_kappa=sticky_kappa), family, K,
                           seed, init)


@pytest.mark.parametrize("sticky_kappa", [0.0, 50.0])
def test_elbo_equals_log_normalizers_minus_global_kls(sequences, sticky_kappa):
    """Right after a local step, L = Σ_d ln Z_d − KL(q(φ) ‖ p(φ)) − Σ_j KL(q(π_j) ‖ p(π_j))
    (Hughes 2016 thesis §6.3.3), for globals that are not the optimum of these summaries."""
    store, model, globals_, _, _ = setup(sequences, sticky_kappa=sticky_kappa)
    batch = store.read_batch(1)
    log_lik, local = model.local_step(batch, globals_)
    stats = model.summarize(batch, local)
    K = globals_.K
    prior_obs = model.obs.posterior(np.zeros(K), {n: np.zeros_like(v) for n, v in stats.select(model.obs_fields).items()})
    kl_obs = np.sum(model.obs.kl(globals_.obs, prior_obs))
    prior_start, prior_trans = model.alloc.prior(K)
    kl_pi = dirichlet_kl(globals_.alloc["theta_start"], prior_start) + np.sum(
        dirichlet_kl(globals_.alloc["theta_trans"], prior_trans))
    expected = local.tables["log_norm"].sum() - kl_obs - kl_pi
    assert model.elbo(stats, globals_) == pytest.approx(expected, rel=1e-10)
    store.close()


def test_summaries_obey_the_count_invariants(sequences):
    store, model, globals_, _, _ = setup(sequences)
    batch = store.read_batch(0)
    stats = process_batch(model, globals_, batch).stats
    assert stats.N.sum() == pytest.approx(batch.n_atoms)
    assert stats["start"].sum() == pytest.approx(batch.n_seqs)
    assert stats["trans"].sum() == pytest.approx(batch.n_atoms - batch.n_seqs)
    assert float(stats["n_seqs"]) == batch.n_seqs
    assert np.all(stats["trans_entropy"] >= -1e-12) and np.all(stats["start_entropy"] >= -1e-12)
    store.close()


@pytest.mark.parametrize("alg_cls", [FullVB, MemoizedVB])
@pytest.mark.parametrize("family", ["gauss", "diag_gauss"])
def test_elbo_never_decreases(sequences, alg_cls, family):
    store, model, globals_, ids, rng = setup(sequences, family=family, K=10, init="random")
    elbos = run_laps(alg_cls(model, store, {}, rng, globals_, ids), 12)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:])), np.diff(elbos).min()
    assert elbos[-1] > elbos[0]
    store.close()


def test_memo_after_every_batch_and_caches_add_up(sequences):
    store, model, globals_, ids, rng = setup(sequences, K=10, init="random")
    alg = MemoizedVB(model, store, {}, rng, globals_, ids)
    run_laps(alg, 1)
    values = []
    while alg.lap < 8:
        result = alg.step()
        values.append(result.elbo if result is not None else alg.elbo())
    assert np.all(np.diff(values) >= -1e-9 * np.abs(np.asarray(values[1:])))
    assert alg.aggregate.allclose(alg.cache_total(), rtol=1e-9, atol=1e-8)
    store.close()


def test_memo_recovers_the_eight_states(tmp_path):
    """Sequences from an 8-state sticky HMM (the package's generator): K = 8 from k-means++ recovers the states."""
    X, seq_range, labels = make_toy_sequences(n_seqs=32, length=1000, seed=0)
    write_sequences(tmp_path / "toy.h5", X, seq_range, n_batches=8, labels=labels)
    store, model, globals_, ids, rng = setup(tmp_path / "toy.h5", K=8)
    alg = MemoizedVB(model, store, {}, rng, globals_, ids)
    run_laps(alg, 10)
    estimate = np.concatenate([model.decode(store.read_batch(b), alg.globals) for b in range(store.n_batches)])
    assert hamming_distance(labels, estimate) < 0.05
    store.close()


def test_bad_hyperparameters_and_points_are_one_line_errors():
    with pytest.raises(BnpviError, match="model.alpha"):
        FiniteHMMAlloc(alpha=0.0)
    with pytest.raises(BnpviError, match="model.sticky_kappa"):
        FiniteHMMAlloc(sticky_kappa=-1.0)
    assert FiniteHMMAlloc().check_data("points") == "model=finite_hmm needs sequences, but the data file holds points"
    assert FiniteHMMAlloc().check_data("seq") is None
