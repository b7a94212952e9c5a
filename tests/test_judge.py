"""The one judgement of a candidate state (bnpvi.moves.judge): evaluated only when its screen passes."""
import numpy as np

from bnpvi.moves.base import accepts_removal
from bnpvi.moves.judge import Proposal, Verdict, judge, keeps, weigh


class FakeRun:
    """Evaluates a candidate's 'summaries' (a number) as its ELBO; records what it was asked."""

    def __init__(self):
        self.evaluated, self.applied = [], []

    def evaluate(self, stats, sources):
        self.evaluated.append(stats)
        return float(stats), f"globals of {stats}"

    def apply(self, edit):
        self.applied.append(edit)


class FakeSchedule:
    def __init__(self):
        self.changed, self.events = set(), []

    def event(self, move, target, gain, accepted, fresh=0, kept=0, exact=True):
        self.events.append((move, target, gain, accepted, fresh, kept, exact))


def proposal(**kw):
    return Proposal("birth", "7", [[0], []], lambda b, cache: cache, **kw)


def test_a_screened_loss_is_never_evaluated():
    run = FakeRun()
    made = []
    verdict = weigh(run, proposal(stats=lambda: made.append(1) or 5.0, screened_gain=-3.0), 10.0)
    assert verdict == Verdict(-3.0, False) and run.evaluated == [] and made == []


def test_a_screened_gain_is_confirmed_by_the_candidates_own_evaluation():
    run = FakeRun()
    verdict = weigh(run, proposal(stats=lambda: 9.0, screened_gain=2.0), 10.0)
    assert verdict == Verdict(-1.0, False, "globals of 9.0") and run.evaluated == [9.0]


def test_an_accepted_proposal_is_installed_marked_and_logged():
    run, schedule = FakeRun(), FakeSchedule()
    verdict = judge(run, schedule, proposal(stats=12.0, changes={7}, fresh=3, kept=2, exact=False), 10.0)
    assert verdict.accepted and verdict.gain == 2.0
    assert len(run.applied) == 1 and run.applied[0].globals == "globals of 12.0"
    assert schedule.changed == {7} and schedule.events == [("birth", "7", 2.0, True, 3, 2, False)]


def test_a_rejected_proposal_changes_nothing_but_is_logged():
    run, schedule = FakeRun(), FakeSchedule()
    verdict = judge(run, schedule, proposal(evaluated=(10.0, "g")), 10.0)
    assert not verdict.accepted and run.applied == [] and schedule.changed == set()
    assert schedule.events == [("birth", "7", 0.0, False, 0, 0, True)]


def test_rules():
    run = FakeRun()
    tiny_loss = -1e-12
    assert not weigh(run, proposal(evaluated=(1e3 + tiny_loss, None)), 1e3).accepted
    assert weigh(run, proposal(evaluated=(1e3 + tiny_loss, None), rule=accepts_removal), 1e3).accepted
    assert weigh(run, proposal(evaluated=(1e3, None), rule=keeps), 1e3).accepted
    assert not weigh(run, proposal(evaluated=(np.nextafter(1e3, 0), None), rule=keeps), 1e3).accepted


def test_every_model_follows_the_protocols_of_the_moves_it_offers(compose_cfg):
    from bnpvi.learn.build import make_alloc
    from bnpvi.moves.schedule import MoveSchedule
    for model in ("dp_mix", "hdp_hmm", "hdp_topic", "hdp_mmsb", "finite_mix", "lda", "finite_hmm", "finite_mmsb"):
        cfg = compose_cfg(f"model={model}")
        alloc = make_alloc(cfg)
        if not alloc.moves:
            continue
        every = compose_cfg(f"model={model}", "moves=[split,birth,merge,delete,reassign]").moves
        schedule = MoveSchedule({name: every[name] for name in alloc.moves}, None, alloc.birth_kind, alloc.merge_kind)
        assert {move.name for move in schedule.moves} == set(alloc.moves), model
        schedule.check_offers(alloc)


def test_a_model_without_a_moves_methods_is_refused_naming_them(compose_cfg):
    import pytest
    from bnpvi.errors import BnpviError
    from bnpvi.moves.birth import BirthMove
    from bnpvi.moves.protocols import check_offers

    class NoGroupTerms:
        births_per_lap, birth_abundance = None, 0

        def restricted_local_step(self, mass, log_lik, log_prior):
            raise AssertionError

        def log_marginal(self, N):
            raise AssertionError

    with pytest.raises(BnpviError, match="moves.birth needs group_terms of the allocation model, which NoGroupTerms"):
        check_offers(NoGroupTerms(), BirthMove(compose_cfg().moves.birth))
