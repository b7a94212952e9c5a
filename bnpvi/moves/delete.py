"""Delete proposals (Hughes 2016 thesis §4.3): remove cluster t, re-dividing the mass of A ∪ {t} among A.

r'_{n,A_j} = (r_nt + Σ_{ℓ∈A} r_nℓ) · p̃_nj with p̃_n = softmax_j(E log p(x_n|φ_{A_j}) + E ln π_{A_j})
(Eq. 4.25-4.27 with E ln π, the exact local-step optimum restricted to A). The
proposal's summaries for A are collected in every batch of the lap (§4.3.3) and
the candidate is judged by the exact whole-data ELBO at the end of the lap.
"""
from __future__ import annotations

import numpy as np

from bnpvi.moves.base import Edit, Move, accepts, ordered_sum
from bnpvi.moves.history import FailureLog
from bnpvi.moves.merge import merge_scores
from bnpvi.stats import SuffStats


class DeleteMove(Move):
    """One delete per lap: the smallest eligible cluster, absorbed by the ``absorb`` most alike clusters."""

    name = "delete"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.failures = FailureLog()
        self.reset()

    def reset(self) -> None:
        self.uids: np.ndarray | None = None  # [target, absorbing ...]
        self.tracked: dict = {}

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        """Target t: the smallest non-empty cluster holding at most ``max_size_frac`` of the data, not
        blocked by earlier rejections; A: the ``absorb`` clusters with the highest merge score with t
        (so that births may still use the others)."""
        stats, uids, cfg = run.globals.stats, run.ids.uids, self.cfg
        N = stats.N
        total = max(float(N.sum()), 1.0)
        free = [k for k in range(stats.K) if int(uids[k]) not in excluded]
        for t in np.argsort(N, kind="stable"):
            t = int(t)
            if (t not in free or N[t] <= 0 or N[t] > cfg.max_size_frac * total
                    or self.failures.blocked(uids[t], (N[t],), cfg.max_fails, cfg.retry_change)):
                continue
            others = np.array([k for k in free if k != t], dtype=np.intp)
            if others.size == 0:
                continue
            pairs = np.stack([np.minimum(others, t), np.maximum(others, t)], axis=1)
            order = np.argsort(-merge_scores(run.model, run.globals, pairs), kind="stable")
            absorb = np.sort(others[order[: cfg.absorb]])
            self.uids = uids[np.concatenate([[t], absorb])]
            return set(self.uids.tolist())
        return set()

    def batch_plan(self, run, b: int):
        return None if self.uids is None else run.ids.positions(self.uids)

    def track(self, model, globals_, batch, log_lik, local, plan):
        """Summaries over A of this batch's proposal responsibilities."""
        target, absorb = int(plan[0]), plan[1:]
        resp = local.resp
        mass = resp.column(target) + sum(resp.column(int(a)) for a in absorb)
        log_pi = model.alloc.expected_log_pi(globals_.alloc)
        proposal = model.alloc.restricted_local_step(mass, np.ascontiguousarray(log_lik[:, absorb]), log_pi[absorb])
        return model.summarize(batch, proposal)

    def collect(self, run, schedule, b: int, tracked) -> None:
        self.tracked[b] = tracked

    def decide(self, run, schedule) -> None:
        if self.uids is None:
            return
        self.check_complete(run, self.tracked, "delete proposal")
        pos = run.ids.positions(self.uids)
        target, absorb = int(pos[0]), pos[1:]
        total = ordered_sum(self.tracked[b] for b in sorted(self.tracked))
        stats = run.globals.stats
        candidate = stats.with_clusters(absorb, total).remove([target])
        sources = [[k] for k in range(stats.K) if k != target]
        current = run.elbo()
        value, globals_ = run.evaluate(candidate, sources)
        gain = value - current
        accepted = accepts(gain, current)
        if accepted:
            run.apply(Edit(sources, lambda b, cache: cache.with_clusters(absorb, self.tracked[b]).remove([target]),
                           globals_))
        self.failures.record(self.uids[0], accepted, (float(stats.N[target]),))
        schedule.event(self.name, str(int(self.uids[0])), gain, accepted)

    def state(self) -> dict:
        state = {"failures": self.failures.state(), "tracked": {str(b): s.to_tree() for b, s in self.tracked.items()}}
        if self.uids is not None:
            state["uids"] = self.uids
        return state

    def load_state(self, state: dict) -> None:
        self.failures.load_state(state["failures"])
        self.uids = np.asarray(state["uids"], dtype=np.int64) if "uids" in state else None
        self.tracked = {int(b): SuffStats.from_tree(t) for b, t in state.get("tracked", {}).items()}
