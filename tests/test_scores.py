"""A run's agreement with the true labels (Run.scores), counted a batch at a time: the scores of every atom's
decoded label, without holding them all."""
import tracemalloc

import numpy as np

from bnpvi.data.store import write_points
from bnpvi.io.segmentation import path_scores
from bnpvi.learn import runner
from bnpvi.metrics import adjusted_rand_index
from setups import toy_sequence_file


def every_label(run) -> np.ndarray:
    """The most likely cluster of every atom, decoded at once (what Run.scores did before)."""
    return np.concatenate([run.model.decode(run.store.read_batch(b), run.alg.globals)
                           for b in range(run.store.n_batches)])


def test_the_ari_of_a_run_holds_one_batch_of_labels(compose_cfg, tmp_path):
    rng = np.random.default_rng(0)
    N = 200_000
    labels = rng.integers(0, 4, size=N)
    write_points(tmp_path / "x.h5", rng.normal(size=(N, 2)) + 5 * labels[:, None], n_batches=20, labels=labels)
    run = runner.start(compose_cfg("data=hdf5", f"data.path={tmp_path / 'x.h5'}", "alg=vb", "init.K=4"),
                       tmp_path / "run")
    try:
        tracemalloc.start()
        scores = run.scores()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert scores == {"ari": adjusted_rand_index(labels, every_label(run))}
        assert peak < N * 8  # before: every atom's label at once, and the ARI's arrays of them (12 MB)
    finally:
        run.close()


def test_the_hamming_distances_of_a_sequence_run_are_those_of_its_whole_paths(compose_cfg, tmp_path_factory,
                                                                             tmp_path):
    path = toy_sequence_file(tmp_path_factory, seed=1, n_seqs=8, length=200, n_batches=4)
    run = runner.start(compose_cfg("model=finite_hmm", "data=hdf5", f"data.path={path}", "init.K=5"),
                       tmp_path / "run")
    try:
        assert run.scores() == path_scores(run.labels, every_label(run))
    finally:
        run.close()
