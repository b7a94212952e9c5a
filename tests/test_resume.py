"""A run stopped in the middle of a lap writes its files as they stand (summary.json says where it
stopped), and resumed from its checkpoint ends exactly where the uninterrupted run ends, for every
algorithm and for an allocation model with its own globals; temporary files of a write cut short are
removed at resume."""

import pytest

from bnpvi.learn import runner
from setups import RESUME_COMMON, assert_resume_is_exact, stop_mid_lap

CASES = {
    "vb": ["alg=vb", "init.K=6", "data.n_atoms=1500"],
    "sovb": ["alg=sovb", "init.K=6", "data.n_atoms=1500"],
    "memo_moves": ["init.K=1", "data.n_atoms=1500", "model.temperature=1"],  # memo's default moves, not annealed
    "finite_hmm": ["model=finite_hmm", "init.K=8", "data.n_seqs=8", "data.seq_length=200", "data.n_batches=4"],
    # HMM births are made and accepted at the first batch of lap 2, just before the cut
    "hdp_hmm_births": ["model=hdp_hmm", "init.K=1", "data.n_seqs=8", "data.seq_length=300", "data.n_batches=4"],
    # merges and deletes tracked over lap 2 when the run is cut, and a birth tried at its first batch
    "hdp_hmm_moves": ["model=hdp_hmm", "init.K=12", "data.n_seqs=8", "data.seq_length=300", "data.n_batches=4"],
    # a topic birth seeded at lap 2's first batch, its candidate summaries tracked when the run is cut
    "hdp_topic_births": ["model=hdp_topic", "init.K=1", "data.n_docs=400"],
    # documents warm-started from their topic counts of the last visit, merges and deletes in flight
    "hdp_topic_warm": ["model=hdp_topic", "init.K=12", "data.n_docs=400", "model.warm_start=true"],
    # L-sparse local steps (Hughes 2016 thesis Ch. 7) of a mixture with moves and of a topic model
    "memo_sparse": ["init.K=12", "data.n_atoms=1500", "alg.sparse_L=2"],
    "hdp_topic_sparse": ["model=hdp_topic", "init.K=12", "data.n_docs=400", "alg.sparse_L=3"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_mid_lap_is_exact(compose_cfg, tmp_path, case):
    summary, trace = assert_resume_is_exact(compose_cfg(*RESUME_COMMON, *CASES[case]), tmp_path)
    if case in ("memo_moves", "hdp_hmm_births", "hdp_topic_births"):
        assert trace["birth_accepted"].sum() > 0
    if case == "hdp_hmm_moves":
        assert trace["merge_tried"].iloc[1] + trace["delete_tried"].iloc[1] > 0 and trace["birth_tried"].iloc[1] > 0


def test_checkpoints_false_writes_none_and_says_the_run_cannot_continue(compose_cfg, tmp_path):
    cfg = compose_cfg(*RESUME_COMMON, *CASES["memo_moves"], "checkpoints=false")
    ref = runner.train(compose_cfg(*RESUME_COMMON, *CASES["memo_moves"]), tmp_path / "ref")
    assert runner.train(cfg, tmp_path / "plain")["elbo"] == ref["elbo"]  # the same run, without checkpoints
    assert not (tmp_path / "plain" / "checkpoints").exists() and (tmp_path / "plain" / "model.h5").exists()
    (tmp_path / "cut").mkdir()
    run = runner.Run(cfg, tmp_path / "cut")
    stop_mid_lap(run, 2, 1)
    with pytest.raises(runner.Interrupted, match="checkpoints=false: this run cannot be continued"):
        try:
            run.train()
        finally:
            run.close()
    assert not (tmp_path / "cut" / "checkpoints").exists()
    with pytest.raises(Exception, match="checkpoint"):
        runner.resume(tmp_path / "cut", cfg)
