"""``init=from_run``: a run starts from the K, cluster ids and globals of a saved run, on the same data
(where, without moves, it continues at the saved ELBO) or on new data of the same kind; a saved run of
another model, family, kind of data or dimension is refused on one line."""
import json

import numpy as np
import pandas as pd
import pytest

from bnpvi.data.store import write_points
from bnpvi.errors import BnpviError
from bnpvi.learn import runner

CASES = {
    "dp_mix memo": ["data.n_atoms=1200", "init.K=1"],
    "dp_mix vb": ["data.n_atoms=1200", "init.K=6", "alg=vb", "moves=[]"],
    "hdp_hmm": ["model=hdp_hmm", "init.K=6", "data.n_seqs=8", "data.seq_length=200", "data.n_batches=4"],
    "hdp_topic": ["model=hdp_topic", "init.K=12", "data.n_docs=300"],
}


def saved_run(compose_cfg, tmp_path, args):
    """A short run of ``args`` in tmp_path/saved: its directory and summary."""
    summary = runner.train(compose_cfg(*args, "alg.n_laps=4", "alg.converge_thr=-1", "seed=2"), tmp_path / "saved")
    return tmp_path / "saved", summary


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_data_without_moves_continues_at_the_saved_elbo(compose_cfg, tmp_path, case):
    saved, summary = saved_run(compose_cfg, tmp_path, CASES[case])
    args = [a for a in CASES[case] if not a.startswith("init.")]
    cfg = compose_cfg(*args, "moves=[]", "alg.n_laps=2", "alg.converge_thr=-1", "seed=9", "init=from_run",
                      f"init.path={saved}")
    runner.train(cfg, tmp_path / "warm")
    trace = pd.read_csv(tmp_path / "warm" / "trace.csv")
    first = trace["elbo"].iloc[0]
    assert first >= summary["elbo"] - 1e-9 * abs(summary["elbo"])
    assert trace["K"].iloc[0] == summary["K"]
    clusters = pd.read_csv(tmp_path / "warm" / "clusters.csv")
    assert sorted(clusters.loc[clusters["lap"] == 1, "uid"]) == sorted(summary["uids"])  # the saved ids go on


def test_new_points_of_the_same_dimension(compose_cfg, tmp_path):
    saved, summary = saved_run(compose_cfg, tmp_path, CASES["dp_mix memo"])
    rng = np.random.default_rng(3)
    write_points(tmp_path / "more.h5", rng.normal(size=(400, 2)) * 2.0, n_batches=2)
    cfg = compose_cfg("data=hdf5", f"data.path={tmp_path / 'more.h5'}", "alg.n_laps=3", "init=from_run",
                      f"init.path={saved}")
    result = runner.train(cfg, tmp_path / "more")
    assert result["n_atoms"] == 400 and np.isfinite(result["elbo"])
    assert json.loads((tmp_path / "more" / "summary.json").read_text())["laps"] >= 1


@pytest.mark.parametrize("args, fragments", [
    (["model=hdp_topic"], ["model=dp_mix", "add model=dp_mix"]),
    (["obs=diag_gauss"], ["obs=gauss", "add obs=gauss"]),
    (["data=hdf5", "data.path={three_d}"], ["dimension D=2", "has 3"]),
    (["init.path={nowhere}"], ["holds no model.h5"]),
])
def test_a_saved_run_that_does_not_fit_is_refused(compose_cfg, tmp_path, args, fragments):
    saved, _ = saved_run(compose_cfg, tmp_path, CASES["dp_mix memo"])
    write_points(tmp_path / "three.h5", np.random.default_rng(0).normal(size=(100, 3)), n_batches=2)
    args = [a.format(three_d=tmp_path / "three.h5", nowhere=tmp_path / "nowhere") for a in args]
    data = [] if "data=hdf5" in args else ["data.n_atoms=1200"]
    cfg = compose_cfg(*data, "init=from_run", f"init.path={saved}", *args)
    with pytest.raises(BnpviError) as err:
        runner.train(cfg, tmp_path / "refused")
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message
    assert not (tmp_path / "refused").exists()


def test_a_topic_model_checks_the_vocabulary_size(compose_cfg, tmp_path):
    saved, _ = saved_run(compose_cfg, tmp_path, CASES["hdp_topic"])
    from bnpvi.data.store import write_documents

    ids = np.array([0, 1, 2, 1, 3], dtype=np.int64)
    write_documents(tmp_path / "docs.h5", ids, np.ones(5), np.array([0, 3, 5]), vocab_size=4)
    cfg = compose_cfg("model=hdp_topic", "data=hdf5", f"data.path={tmp_path / 'docs.h5'}", "init=from_run",
                      f"init.path={saved}")
    with pytest.raises(BnpviError, match="vocabulary size V=100; .* has 4"):
        runner.train(cfg, tmp_path / "refused")
