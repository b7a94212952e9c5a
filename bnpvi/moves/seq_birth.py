"""Births of hidden Markov states (Hughes 2016 thesis §6.5.2): new states cut from one interval of
one sequence, judged and accepted at the batch where they are made.

At a visit of batch b in memoized VI, after the ordinary local step:

1. **target**: of the eligible states, the one whose time steps in the batch are worst
   explained (b-score, thesis Eq. 4.24) among those with a run of at least ``min_block``
   steps in the batch's marginal-MAP path;
2. **interval**: one such run [a, e) of the target, drawn at random;
3. **cut**: [a, m) and [m, e) become fresh states (one state when m = a), the cut m
   maximising L_data of the two blocks, each as a hard-assigned state with its own
   posterior (the thesis' linear-time search, here over every ⌈(e − a)/25⌉-th step);
4. **refinement**: a global step on the batch's summaries with the blocks as fresh
   states seeds the fresh states' parameters; then forward-backward over the whole
   batch with the K + J states, summaries, global step, ``refine_iters`` times.
   Fresh states left with less than one time step are dropped before the last round.
   With ``moves.birth.merge_cleanup``, each fresh state is then also tried merged into the existing
   state (not the target) that its data fit best, kept where the exact ELBO rises (``merge_cleanup``);
5. **judgement**: every other batch keeps its memo cache (no mass on the fresh
   states) and batch b gets a forward-backward output, so the candidate is a valid
   q(z) for the whole data set and its ELBO is the exact whole-data ELBO. The
   birth is accepted iff it beats the ELBO after batch b's ordinary local step (the
   memoized objective the driver reaches next), and the rest of the lap uses the new
   states (thesis §6.5.2: "the expanded state set is used for all remaining updates").
   In a round of parallel memoized VI the births are applied at the round's end, judged
   again against the caches of the whole round (``SequenceBirthMove.judged_again``).

Up to ``max_per_lap`` proposals per lap (at most ``births_per_lap`` = 3 for HMMs: each costs
forward-backward passes over a whole batch), spread over the lap's batches in visiting
order; a target is tried at most once per batch visit. The retry rules are those of
mixture births (``birth.TargetedBirths``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bnpvi.moves.base import accepts
from bnpvi.moves.birth import TargetedBirths, birth_scores, kmeans_clusters
from bnpvi.moves.judge import Proposal, Verdict, install, weigh
from bnpvi.moves.merge import merge_sources
from bnpvi.moves.protocols import SequenceBirths
from bnpvi.stats import Responsibilities, SuffStats

N_CUTS = 25
"""Cut points scanned per interval (every ⌈length / N_CUTS⌉-th step)."""

MIN_FRESH_MASS = 1.0
"""Fresh states with less mass (time steps) in the batch are dropped before the final round."""


def state_runs(labels: np.ndarray, seq_range: np.ndarray, min_len: int) -> np.ndarray:
    """Maximal runs of one label inside one sequence, at least ``min_len`` steps long.

    Returns
    -------
    (R, 3) int64 array of (start, end, label), runs [start, end) in time-step order.
    """
    T = labels.shape[0]
    change = np.ones(T, dtype=bool)
    change[1:] = labels[1:] != labels[:-1]
    change[seq_range[:-1]] = True
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], T)
    keep = ends - starts >= min_len
    return np.stack([starts[keep], ends[keep], labels[starts[keep]]], axis=1).astype(np.int64)


def best_cut(model, batch, a: int, e: int) -> np.ndarray:
    """Labels (0 or 1) of the steps [a, e) for the two contiguous blocks [a, m), [m, e) with the
    largest L_data,1*(x_{a:m}) + L_data,2*(x_{m:e}); all 0 when one block wins (m = a).

    Every candidate cut's two blocks are summarised in one call, as 2C hard clusters.
    """
    length = e - a
    stride = -(-length // N_CUTS)
    cuts = np.arange(0, length, stride)  # 0: one block
    C = cuts.shape[0]
    steps = np.arange(length)[:, None]
    resp = np.zeros((length, 2 * C))
    resp[:, 0::2] = steps < cuts[None, :]
    resp[:, 1::2] = steps >= cuts[None, :]
    hard = Responsibilities(resp, 2 * C)
    blocks = model.obs.log_marginal(hard.counts(), model.obs.summarize(batch.take(np.arange(a, e)), hard))
    best = int(np.argmax(blocks[0::2] + blocks[1::2]))
    return (steps[:, 0] >= cuts[best]).astype(np.int64) if best else np.zeros(length, dtype=np.int64)


def path_counts(path: np.ndarray, seq_range: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Start counts (K,) and transition counts (K, K) of hard state paths, one per sequence."""
    inside = np.ones(max(path.shape[0] - 1, 0), dtype=bool)
    inside[seq_range[1:-1] - 1] = False
    trans = np.zeros((K, K))
    np.add.at(trans, (path[:-1][inside], path[1:][inside]), 1.0)
    return np.bincount(path[seq_range[:-1]], minlength=K).astype(np.float64), trans


def seeded(model, stats: SuffStats, batch, path: np.ndarray, new_path: np.ndarray) -> SuffStats:
    """``stats`` (K states) with fresh states K, K+1, ... appended for the steps that ``new_path``
    moves to them from the batch's marginal-MAP ``path``: each holds its steps' data statistics,
    and the start and transition counts change by the difference of the two hard paths' counts
    (thesis §6.5.2, the direct construction, in hard form). The states that lose steps keep their
    data statistics. Only used to seed the fresh states' parameters."""
    K, K2 = stats.K, int(new_path.max()) + 1
    seq_range = np.asarray(batch.seq_range)
    moved = np.flatnonzero(new_path >= K)
    blocks = model.hard_stats(batch.take(moved), new_path[moved] - K, K2 - K)
    out = stats.pad_to(K2)
    fresh = np.arange(K, K2)
    fields = {name: out[name].copy() for name in ("N", *model.obs_fields)}
    for name in fields:
        fields[name][fresh] = blocks[name]
    start_new, trans_new = path_counts(new_path, seq_range, K2)
    start_old, trans_old = path_counts(path, seq_range, K2)
    fields["start"] = np.maximum(out["start"] + start_new - start_old, 0.0)
    fields["trans"] = np.maximum(out["trans"] + trans_new - trans_old, 0.0)
    return out.with_fields(**fields)


def interval_path(model, batch, path: np.ndarray, K: int, interval, max_new: int) -> np.ndarray:
    """``path`` with the run ``interval`` = (a, e, state) cut into two contiguous blocks at the best
    cut (``best_cut``), each block a fresh state K, K + 1 (one state when the cut is at a or
    ``max_new`` is 1)."""
    a, e = int(interval[0]), int(interval[1])
    labels = best_cut(model, batch, a, e) if max_new > 1 else np.zeros(e - a, dtype=np.int64)
    new_path = path.copy()
    new_path[a:e] = K + labels
    return new_path


def split_path(model, batch, path: np.ndarray, K: int, target: int, n_new: int, kmeans_iters: int,
               rng: np.random.Generator) -> np.ndarray | None:
    """``path`` with the steps of state ``target`` divided among fresh states K, ..., K + J − 1 by
    Bregman k-means++ and k-means on their observations (Hughes 2016 thesis Alg. 2.1-2.2; bnpy's
    split of one state's time steps); None when there are too few steps for two states."""
    rows = np.flatnonzero(path == target)
    J = min(int(n_new), rows.size // 2)
    if J < 2:
        return None
    obs = model.obs
    sample = batch.take(rows)
    N, fields = kmeans_clusters(obs, sample, J, kmeans_iters, rng)
    labels = np.argmax(obs.point_log_lik(sample, obs.posterior(N, fields)) + np.log(N + 1.0 / J), axis=1)
    used, labels = np.unique(labels, return_inverse=True)
    if used.size < 2:
        return None
    new_path = path.copy()
    new_path[rows] = K + labels
    return new_path


def refine(model, batch, rest: SuffStats, globals_, rounds: int):
    """Forward-backward over the batch under ``globals_``, summaries, global step on ``rest`` plus
    them, ``rounds`` times. Returns the best round's (ELBO, batch summaries, globals, log-lik, local)."""
    best = None
    for _ in range(rounds):
        log_lik, local = model.local_step(batch, globals_)
        stats = model.summarize(batch, local)
        value, candidate = model.evaluate(rest.pad_to(stats.K) + stats, globals_.alloc)
        if best is None or value > best[0]:
            best = (value, stats, candidate, log_lik, local)
        globals_ = candidate
    return best


def propose(model, batch, rest: SuffStats, globals_, stats: SuffStats, path: np.ndarray, new_path: np.ndarray,
            refine_iters: int):
    """One birth: the fresh states of ``new_path`` (see ``seeded``) refined by forward-backward over
    the batch (module docstring, step 4), with batch summaries ``stats`` under ``globals_``.

    Returns (ELBO, batch summaries, globals, log-lik, local, fresh proposed, fresh kept), or
    None when every fresh state emptied.
    """
    K, K2 = globals_.K, int(new_path.max()) + 1
    J = K2 - K
    seed_stats = seeded(model, rest.pad_to(K) + stats, batch, path, new_path)
    start = model.global_step(seed_stats, model.alloc.warm_start(globals_.alloc, [[k] for k in range(K)] + [[]] * J))
    value, stats, candidate, log_lik, local = refine(model, batch, rest, start, refine_iters)
    tiny = [k for k in range(K, K2) if stats.N[k] < MIN_FRESH_MASS]
    if len(tiny) == J:
        return None
    if tiny:
        sources = [[k] for k in range(K2) if k not in tiny]
        start = model.global_step(candidate.stats.remove(tiny), model.alloc.warm_start(candidate.alloc, sources))
        value, stats, candidate, log_lik, local = refine(model, batch, rest, start, 1)
    return value, stats, candidate, log_lik, local, J, J - len(tiny)


def seed_merged(stats: SuffStats, sources) -> SuffStats:
    """``stats.remap(sources)`` for seeding a global step: clusters with several sources add their linear
    fields, and their tracked fields (q(z)'s entropies, which no global step reads) are set to 0."""
    K_new = len(sources)
    merged = [i for i, s in enumerate(sources) if len(s) > 1]
    tracked = {name: {i: 0.0 if spec.axes == (0,) else (np.zeros(K_new), np.zeros(K_new)) for i in merged}
               for name, spec in stats.specs.items() if spec.merge == "tracked" and spec.axes}
    return stats.remap(sources, tracked)


def merge_cleanup(model, batch, rest: SuffStats, proposal, K: int, target: int):
    """A refined proposal with its fresh states merged, one at a time, into existing states other than
    ``target`` while that raises its exact ELBO.

    Each fresh state j is tried once, with the existing state k whose data it fits best (the largest
    change of L_data when the two merge, Hughes 2016 thesis Eq. 4.6): a global step on the proposal's
    whole-data summaries with j added to k seeds the variant, and one round of forward-backward over the
    batch makes its summaries, so its ELBO is exact again. Our own step: the thesis leaves newborn states
    that copy existing ones to later merge moves (§4.2), which pair whole states and are judged a lap
    later, so a proposal that re-labels a run of the target as another state never wins as a birth.

    Returns ``propose``'s tuple for the best variant (its count of kept fresh states lowered by each merge).
    """
    value, stats, candidate, log_lik, local, fresh, kept = proposal
    partners = np.array([k for k in range(K) if k != target], dtype=np.int64)
    tried: set[int] = set()
    while partners.size:
        whole, K2 = candidate.stats, candidate.K
        left = [j for j in range(K, K2) if j not in tried]
        if not left:
            break
        pairs = np.array([(j, k) for j in left for k in partners], dtype=np.int64)
        N, fields = whole.N, whole.select(model.obs_fields)
        apart = model.obs.log_marginal(N, fields)
        gain = model.obs.merged_log_marginal(N, fields, pairs) - apart[pairs[:, 0]] - apart[pairs[:, 1]]
        j, k = (int(v) for v in pairs[int(np.argmax(gain))])
        tried.add(j)
        sources = merge_sources(K2, k, j)
        start = model.global_step(seed_merged(whole, sources), model.alloc.warm_start(candidate.alloc, sources))
        variant = refine(model, batch, rest, start, 1)
        if variant[0] > value:
            value, stats, candidate, log_lik, local = variant
            kept -= 1
            tried = {i - (i > j) for i in tried if i != j}
    return value, stats, candidate, log_lik, local, fresh, kept


@dataclass(frozen=True, eq=False)
class IntervalPlan:
    """What a batch's work needs for HMM births (``SequenceBirthMove.batch_plan``)."""

    eligible: np.ndarray
    """Positions of the states that may be targeted."""
    tries: int
    """Proposals at most at this batch."""
    seed: tuple
    """(lap seed, batch) of the batch's generator."""
    rest: SuffStats
    """The other batches' summaries (the aggregate less this batch's cache): the ELBO judged is whole-data."""
    room: int
    """States the births may add (``Kmax`` − K)."""


@dataclass(frozen=True, eq=False)
class IntervalOutcome:
    """A batch's HMM births: each proposal's (target, gain, accepted, fresh, kept); the batch's summaries and
    the globals after the accepted ones (None: none accepted); the states with a run of ``min_block`` steps
    (``usable``); and the K the batch was planned under."""

    events: list
    stats: SuffStats | None
    globals: object
    usable: np.ndarray
    K: int


class SequenceBirthMove(TargetedBirths):
    """Births for hidden Markov models in memoized VI, made and judged at a batch (module docstring)."""

    name = "birth"
    requires = SequenceBirths
    saved = {"budget": int, "batches_left": int, "visited": set[int], "born": bool, "usable": set[int]}
    min_new = 1

    def reset(self) -> None:
        self.eligible = np.zeros(0, dtype=np.int64)
        self.seed = 0
        self.budget = 0  # proposals left in this lap
        self.batches_left = 0  # batch visits left in this lap
        self.visited: set[int] = set()  # batches whose visit in this lap made its proposals
        self.born = False  # whether a birth was accepted in this lap
        self.usable: set[int] = set()  # ids with a run of ``min_block`` steps in a batch visited this lap
        self.outcome = None  # the current batch's tracked proposals, until ``after_batch``

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        self.eligible = self._eligible(run, excluded)
        self.seed = int(rng.integers(2**63 - 1))
        self.budget = self.places(run) if self.eligible.size else 0
        self.batches_left = run.n_batches
        return set()

    def batch_plan(self, run, b: int):
        if b in self.visited or not self.budget or not self.active(run.lap + 1):
            return None
        self.visited.add(b)
        tries = -(-self.budget // max(self.batches_left, 1))
        self.batches_left -= 1
        positions = run.ids.positions(self.eligible[np.isin(self.eligible, run.ids.uids)])
        if not positions.size:
            return None
        old = run.caches[b]  # none yet for a batch a run continued on more data has not visited
        rest = run.aggregate if old is None else run.aggregate - old.pad_to(run.aggregate.K)
        return IntervalPlan(positions, tries, (self.seed, b), rest, int(self.cfg.Kmax) - run.globals.K)

    def track(self, model, globals_, batch, log_lik, local, plan):
        """Proposals at this batch, each judged against the best state so far (pure: a function of
        the plan, which holds the other batches' summaries, and the batch)."""
        cfg = self.cfg
        rng = np.random.default_rng(list(plan.seed))
        rest = plan.rest
        stats = model.summarize(batch, local)
        current, state = model.evaluate(rest.pad_to(stats.K) + stats, globals_.alloc)
        room = plan.room
        tried, events, born = set(), [], False
        seq_range = np.asarray(batch.seq_range, dtype=np.int64)

        def marginal_map(local):
            """The marginal-MAP path of a local step and its runs of at least ``min_block`` steps."""
            labels = np.asarray(local.resp.values.argmax(axis=1), dtype=np.int64)
            return labels, state_runs(labels, seq_range, int(cfg.min_block))

        labels, runs = marginal_map(local)
        usable = np.unique(runs[:, 2])
        for _ in range(plan.tries):
            if room < 1:
                break
            score = birth_scores(log_lik, local.resp)[1]
            candidates = [int(k) for k in np.argsort(score, kind="stable")
                          if int(k) in plan.eligible and int(k) not in tried and np.any(runs[:, 2] == k)]
            if not candidates:
                break
            target = candidates[0]
            tried.add(target)
            mine = runs[runs[:, 2] == target]
            K = state.K
            paths = [interval_path(model, batch, labels, K, mine[rng.integers(mine.shape[0])], room)]
            if room > 1:
                paths.append(split_path(model, batch, labels, K, target, min(int(cfg.n_new), room),
                                        int(cfg.kmeans_iters), rng))
            proposals = [propose(model, batch, rest, state, stats, labels, p, int(cfg.refine_iters))
                         for p in paths if p is not None]
            proposals = [p for p in proposals if p is not None]
            if not proposals:
                events.append((target, np.nan, False, 0, 0))
                continue
            best = max(proposals, key=lambda p: p[0])
            if cfg.merge_cleanup:
                best = merge_cleanup(model, batch, rest, best, K, target)
            value, new_stats, new_state, new_log_lik, new_local, fresh, kept = best
            verdict = weigh(None, Proposal(self.name, str(target), [], None, evaluated=(value, new_state)), current)
            gain, accepted = verdict.gain, verdict.accepted
            events.append((target, gain, accepted, fresh, kept))
            if accepted:
                current, state, log_lik, local, stats = value, new_state, new_log_lik, new_local, new_stats
                labels, runs = marginal_map(local)
                room -= kept
                born = True
        return IntervalOutcome(events, stats if born else None, state if born else None, usable, globals_.K)

    def collect(self, run, schedule, b: int, tracked) -> None:
        self.outcome = tracked

    def after_batch(self, run, schedule, b: int) -> bool:
        """Log this batch's proposals; apply the accepted ones. Returns whether batch b's cache was
        rewritten (the driver then refreshes the batch so every move's tracked data describe it)."""
        outcome, self.outcome = self.outcome, None
        if outcome is None:
            return False
        if outcome.stats is not None and len(run.round) > 1:
            outcome = self.judged_again(run, b, outcome)
        sizes = run.globals.stats.N
        uids = run.ids.uids.copy()
        self.usable |= {int(u) for u in uids[outcome.usable]}
        for target, gain, accepted, fresh, kept in outcome.events:
            uid = int(uids[target])
            self.failures.record(uid, accepted, (float(sizes[target]),))
            self.last_tried[uid] = schedule.lap
            self.budget = max(self.budget - 1, 0)
            schedule.event(self.name, str(uid), gain, accepted, fresh=fresh, kept=kept)
        if outcome.stats is None:
            return False
        new, K = outcome.globals, run.globals.K
        sources = [[k] for k in range(K)] + [[] for _ in range(new.K - K)]
        stats_b = outcome.stats
        rewrite = lambda i, cache: stats_b if i == b else cache.pad_to(new.K)  # noqa: E731
        install(run, schedule, Proposal(self.name, "", sources, rewrite), Verdict(np.nan, True, new))
        self.born = True
        self.stuck = 0
        return True

    def judged_again(self, run, b: int, outcome: dict) -> dict:
        """Batch b's accepted births judged again, together, at the end of its round of parallel memoized VI
        (``MemoizedVB``): the other batches of the round swapped their caches after the births were judged.
        The candidate is every other batch's current cache (no mass on the fresh states, nor on states
        born at earlier batches of the round) and batch b's summaries with the fresh states, so its ELBO is
        again the exact whole-data ELBO; the batch's accepted events take this judgement's gain and verdict."""
        born, K_plan = outcome.stats, outcome.K
        K, J = run.globals.K, born.K - K_plan
        stats_b = born.remap([[k] for k in range(K_plan)] + [[] for _ in range(K - K_plan)]
                             + [[K_plan + j] for j in range(J)])
        whole = run.aggregate.pad_to(K + J) - run.caches[b].pad_to(K + J) + stats_b
        room = K + J <= int(self.cfg.Kmax)
        verdict = weigh(run, Proposal(self.name, "", [[k] for k in range(K)] + [[] for _ in range(J)], None,
                                      stats=whole, rule=lambda gain, elbo: room and accepts(gain, elbo)), run.elbo())
        gain, accepted = verdict.gain, verdict.accepted
        events = [(t, gain, accepted, f, k) if a else (t, g, a, f, k) for t, g, a, f, k in outcome.events]
        return replace(outcome, events=events, stats=stats_b if accepted else None,
                    globals=verdict.globals if accepted else None)

    def decide(self, run, schedule) -> None:
        """Births were decided at their batches; count a lap without one towards ``max_stuck``. An
        eligible state with no run of ``min_block`` steps in any batch visited with a proposal counts
        as a failed target, tried at this lap (it is tried again once its size changes, or when its turn
        as the least recently tried comes again; before, such a state stayed the least recently tried and
        took every retry of ``max_stuck``)."""
        if self.active(schedule.lap) and not self.born:
            self.stuck += 1
        if self.visited:
            for k, uid in enumerate(run.ids.uids):
                if int(uid) in self.eligible and int(uid) not in self.usable:
                    self.failures.record(int(uid), False, (float(run.globals.stats.N[k]),))
                    self.last_tried[int(uid)] = schedule.lap
