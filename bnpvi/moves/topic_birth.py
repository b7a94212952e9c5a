"""Births of topics (Hughes 2016 thesis §5.5.3, after the template of §4.2): one topic split into J' pieces,
judged on the whole data set at the end of the lap.

At the lap's first batch:

1. **target**: of the eligible topics with at least ``min_batch_mass`` tokens in the batch, the one
   whose tokens are worst explained (b-score Σ_u c_u r_uk C_uk / N_k, thesis Eq. 4.24);
2. **seeds**: every document's target-weighted word counts x_dv = Σ_{u: v_u = v} c_u r_ut (the
   documents, not single tokens, are clustered: a one-hot token is a degenerate atom) are
   divided into J' groups by Bregman k-means++ and k-means (thesis Alg. 2.1-2.2); J' is ``n_new``,
   or more for a topic holding much of the data that was never proposed before
   (``TargetedBirths.fresh_counts``: the one topic of a run from K = 1 is split into 100);
3. **candidate globals**: the target's topic is replaced by the first group and the others are
   appended, their word counts scaled to the target's whole-data mass, the target's top-level
   probability β̂_t shared among the pieces in proportion to their mass; then ``refine_iters``
   rounds of the document-level step on the batch with the K + J' − 1 topics (``split_step``,
   below) re-estimate the pieces (pieces left with less than ``MIN_FRESH_MASS`` tokens are dropped).

Every batch of the lap (the first included) is then summarised a second time, by the
document-level step under the candidate globals, started from the batch's local step of the lap
(``TopicAlloc.local_step_split``): the documents that used the target are re-inferred from the
likelihood, the others (at most 0.01 of their tokens on it) take one iteration from their current
N_d, as a delete's do. At the end of the lap these summaries describe a valid q for every document
of the data set with K + J' − 1 topics, so the candidate's ELBO (at its own optimal globals) is the
exact whole-data ELBO, and the birth is accepted iff it beats the current one. Of several proposals
of a lap, only one is accepted: each one changes every document's q, so the others' summaries no
longer apply. For the same reason any accepted merge or delete would drop the lap's births untried,
so births decide first (``MoveSchedule.end_lap``) and an accepted birth drops the lap's merges and
deletes instead, which cost less to track. So that a lap can still add the pieces of
several targets, the lap's freshly seeded proposals (two or more) are also proposed together: one
more candidate whose globals hold every one of their targets' pieces (each target's row replaced,
the pieces appended in turn, the sticks split in turn), tracked and judged like the others, and
accepted instead of the best single one when it gains more (moves.csv then logs each of its
targets as accepted, with the gain of the whole). Extra pieces are left to the next
laps' merges and deletes, which are exact for topic models.

Each proposal that is not accepted and may still win (``LapBirths.carry``: its gain rises at a pace
that would make it win within ``refine_laps`` laps) is judged again at the next lap, its candidate
globals made from its own whole-data summaries; when the model's topics changed meanwhile (another proposal accepted, or the
lap's sort), its target's refined pieces are put on the current topics (``transplanted``). Through
that next lap its pieces are refined as memoized VI refines the model: after each batch, their rows
of the candidate are made from the aggregate of their per-batch summaries, each batch's part of the
previous lap replaced by its new one (``collect``), so a carried proposal takes as many refinement
steps as the lap has batches. The judgement stays exact: what is judged is the sum of the batches'
summaries, each from a valid q for that batch's documents.

This costs, per batch and proposal (the joint one included), a document-level step of the target's
documents and one iteration of the others, during the laps with births.
Retry rules: ``birth.TargetedBirths``; planning: ``birth.LapBirths``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from bnpvi.data.batch import WordCountBatch
from bnpvi.model import Globals
from bnpvi.moves.base import ordered_sum
from bnpvi.moves.birth import (BirthsTracked, LapBirths, Memo, Seeded, SeedingPlan, kmeans_clusters,
                              seed_targets)
from bnpvi.moves.judge import Proposal, Verdict, install, log, weigh
from bnpvi.moves.protocols import TopicBirths
from bnpvi.stats import SuffStats

MIN_FRESH_MASS = 1.0
"""A piece with fewer tokens than this in the seeding batch after refinement is dropped."""


def target_documents(batch, weights: np.ndarray, min_tokens: float) -> tuple[WordCountBatch, np.ndarray]:
    """Documents of ``batch`` as count vectors c_u w_u (w_u the target's share of entry u), those with
    at least ``min_tokens`` of it; and their indices in the batch."""
    X = sp.csr_matrix((batch.word_counts * weights, batch.word_ids, batch.doc_range),
                      shape=(batch.doc_range.shape[0] - 1, batch.vocab_size))
    X.eliminate_zeros()
    rows = np.flatnonzero(np.asarray(X.sum(axis=1)).ravel() >= min_tokens)
    sub = X[rows]
    return WordCountBatch(sub.indices.astype(np.int32), sub.data.astype(np.float64), sub.indptr.astype(np.int64),
                          batch.vocab_size), rows


class Candidate:
    """Candidate globals of one birth: every topic's word statistics and the allocation parameters.

    Parameters
    ----------
    N, fields : the observation family's summaries of the K + J' − 1 topics
    alloc : the allocation parameters under which the candidate's document-level steps run
    """

    def __init__(self, N: np.ndarray, fields: dict, alloc: dict):
        self.N, self.fields, self.alloc = N, fields, alloc

    def globals(self, model) -> Globals:
        return Globals(model.empty_stats(self.N.shape[0]), self.alloc, model.obs.posterior(self.N, self.fields))

    def to_tree(self) -> dict:
        return {"N": self.N, "fields": dict(self.fields), "alloc": dict(self.alloc)}

    @classmethod
    def from_tree(cls, tree: dict) -> "Candidate":
        return cls(np.asarray(tree["N"]), {n: np.asarray(v) for n, v in tree["fields"].items()},
                   {n: np.asarray(v) for n, v in tree["alloc"].items()})


def piece_rows(target: int, K: int, total: int) -> np.ndarray:
    """The rows of a birth's pieces among the ``total`` topics of its candidate made from a model of K topics:
    row ``target`` (the first piece) and the appended rows."""
    return np.concatenate([[target], np.arange(K, total)]).astype(np.intp)


def pieces_of(candidate: Candidate, target: int, K: int) -> tuple[np.ndarray, dict]:
    """The pieces of a birth's candidate made from a model of K topics (``piece_rows``), as masses (J',) and
    observation summaries."""
    rows = piece_rows(target, K, candidate.N.shape[0])
    return candidate.N[rows], {n: v[rows] for n, v in candidate.fields.items()}


def piece_stats(stats: SuffStats, target: int, K: int) -> SuffStats:
    """The pieces' rows (``piece_rows``) of summaries made under a birth's candidate built from K topics."""
    return stats.remap([[int(k)] for k in piece_rows(target, K, stats.K)])


def with_piece_rows(candidate: Candidate, model, target: int, K: int, pieces: SuffStats) -> Candidate:
    """``candidate`` (built from K topics) with its pieces' rows (``target`` and the appended ones) made from
    the summaries ``pieces``; the other topics and the allocation parameters as they are."""
    rows = piece_rows(target, K, candidate.N.shape[0])
    N = candidate.N.copy()
    N[rows] = np.maximum(pieces.N, 0.0)
    fields = {n: np.array(v) for n, v in candidate.fields.items()}
    for n, v in pieces.select(model.obs_fields).items():
        fields[n][rows] = v
    return Candidate(N, fields, candidate.alloc)


def with_pieces(model, globals_, births: list[tuple[int, np.ndarray, dict]]) -> Candidate:
    """Candidate globals of the births of several targets of ``globals_`` at once: for each (target,
    masses, summaries) of ``births``, the target's row replaced by its first piece and the others appended,
    and the target's stick split in proportion to the pieces' masses (``split_params``)."""
    N = np.maximum(globals_.stats.N, 0.0).copy()
    fields = {n: np.array(v) for n, v in globals_.stats.select(model.obs_fields).items()}
    alloc = globals_.alloc
    for target, piece_N, piece_fields in births:
        N[target] = piece_N[0]
        N = np.concatenate([N, piece_N[1:]])
        for n in fields:
            fields[n][target] = piece_fields[n][0]
            fields[n] = np.concatenate([fields[n], piece_fields[n][1:]])
        alloc = model.alloc.split_params(alloc, target, piece_N / piece_N.sum())
    return Candidate(N, fields, alloc)


def joint_candidate(model, globals_, targets: list[int], singles: list[Candidate]) -> Candidate:
    """The births of several targets at once: each single candidate (made from ``globals_``, target row
    replaced by its first piece and the others appended) contributes its pieces (``with_pieces``)."""
    return with_pieces(model, globals_, [(t, *pieces_of(s, t, globals_.K)) for t, s in zip(targets, singles)])


def transplanted(model, globals_, uids: np.ndarray, target_uid: int, kept: tuple) -> Candidate:
    """A carried candidate for the model of ``globals_`` (topic ids ``uids``): as kept while its model's
    topics are the same ones in the same order; otherwise (the lap's sort moved them, or another move
    was accepted) its target's refined pieces on the current topics (``with_pieces``), which keeps what
    the proposal learned and is judged as exactly as any candidate."""
    old_uids, candidate = kept[0], kept[1]
    if np.array_equal(old_uids, uids):
        return candidate
    old = int(np.flatnonzero(old_uids == target_uid)[0])
    target = int(np.flatnonzero(uids == target_uid)[0])
    return with_pieces(model, globals_, [(target, *pieces_of(candidate, old, old_uids.shape[0]))])


def split_step(model, batch, candidate: Candidate, targets, local):
    """The document-level step of ``batch`` under ``candidate``'s globals, started from the batch's ``local``
    step under the current ones: the documents that used ``targets`` re-inferred, the others one iteration
    (``TopicAlloc.local_step_split``)."""
    globals_ = candidate.globals(model)
    log_lik = model.alloc.expected_log_lik(model.obs, globals_.obs, batch)
    return model.alloc.local_step_split(batch, log_lik, globals_.alloc, targets, local)


def split_targets(targets: np.ndarray, joint_members: np.ndarray) -> list[np.ndarray]:
    """The topics each candidate of a lap splits: one target each, then all the joint proposal's targets."""
    targets = np.asarray(targets, dtype=np.intp)
    split = [targets[i:i + 1] for i in range(targets.shape[0])]
    return split + ([targets[np.asarray(joint_members, dtype=np.intp)]] if len(joint_members) else [])


@dataclass(frozen=True, eq=False)
class SplitPlan:
    """What a batch after the seeding one tracks for topic births: the candidates (one per target, then the
    joint one), and the targets (positions) each one splits."""

    candidates: list
    split: list


@dataclass(eq=False)
class TopicSeeded(Seeded):
    """``Seeded``, its proposals the candidates, then the joint one of ``joint_members`` (positions in the
    targets), if any."""

    joint_members: np.ndarray = None


class TopicBirthMove(LapBirths):
    """Whole-data births of topics (module docstring)."""

    name = "birth"
    requires = TopicBirths
    saved = {"carried": list[tuple[int, tuple[np.ndarray, Candidate, dict[int, SuffStats]], int, float]],
             "seeded": bool, "target_uids": np.ndarray, "joint_members": np.ndarray, "memo": list[Memo | None],
             "candidates": list[Candidate], "tracked": dict[int, list[tuple[SuffStats, np.ndarray | None]]]}

    def reset(self) -> None:
        super().reset()
        self.eligible = np.zeros(0, dtype=np.int64)
        self.seed = 0
        self.seeded = False
        self.target_uids = np.zeros(0, dtype=np.int64)
        self.candidates: list[Candidate] = []  # one per target, then the joint one (if any)
        self.joint_members = np.zeros(0, dtype=np.intp)  # the targets (positions in target_uids) of the joint one
        self.tracked: dict[int, list[tuple]] = {}  # per batch, per proposal: summaries, warm start (or None)
        # per proposal (None for a new one): the aggregate of its pieces' summaries, and the parts of it (of
        # the previous lap) that each batch's next summaries replace
        self.memo: list[tuple[SuffStats, dict[int, SuffStats]] | None] = []

    def carried_plan(self, run, uid: int, kept) -> Candidate:
        return transplanted(run.model, run.globals, run.ids.uids, uid, kept)

    def tracking_plan(self, run) -> "SplitPlan":
        return SplitPlan(self.candidates, split_targets(run.ids.positions(self.target_uids), self.joint_members))

    # ---------------------------------------------------------------- track
    def track(self, model, globals_, batch, log_lik, local, plan) -> BirthsTracked:
        seeded = None
        if isinstance(plan, SeedingPlan):  # the lap's first batch: seed the proposals here
            seeded = self._seed(model, globals_, batch, log_lik, local, plan)
            plan = SplitPlan(seeded.proposals, split_targets(np.array(seeded.targets, dtype=np.intp),
                                                             seeded.joint_members))
        tracked = []
        for c, targets in zip(plan.candidates, plan.split):
            proposal = split_step(model, batch, c, targets, local)
            tracked.append((model.summarize(batch, proposal), model.alloc.warm_state(proposal)))
        return BirthsTracked(tracked, seeded)

    def _seed(self, model, globals_, batch, log_lik, local, plan: SeedingPlan) -> "TopicSeeded":
        """At the lap's first batch: candidates of the carried and the worst-fit eligible topics, then, of
        two new ones or more, their joint candidate (appended to the proposals)."""
        cfg, alloc = self.cfg, model.alloc
        rng = np.random.default_rng(plan.seed)
        mass, fit = alloc.topic_fit(local, log_lik)
        resp = None  # the batch's responsibilities, made again (the same, bit for bit) once a target needs them
        score = np.where(mass > 0, fit / np.maximum(mass, 1e-300), np.inf)

        def propose(k: int, room: int):
            nonlocal resp
            if resp is None:
                resp = local.resp if local.resp is not None else alloc.local_step(batch, log_lik, globals_.alloc,
                                                                                 keep_resp=True).resp
            candidate = self._propose(model, globals_, batch, local, resp.column(k), k, float(mass[k]), room,
                                      int(plan.n_new[k]), rng)
            return None if candidate is None else (candidate, candidate.N.shape[0] - globals_.K)

        seeded = seed_targets(plan, score, mass, cfg.min_batch_mass, 1,
                              lambda k, candidate: (candidate, candidate.N.shape[0] - globals_.K), propose)
        members = np.array([i for i, age in enumerate(seeded.ages) if age == 1], dtype=np.intp)
        if members.size >= 2:
            seeded.proposals.append(joint_candidate(model, globals_, [seeded.targets[i] for i in members],
                                                    [seeded.proposals[i] for i in members]))
        else:
            members = members[:0]
        return TopicSeeded(**vars(seeded), joint_members=members)

    def _propose(self, model, globals_, batch, local, share: np.ndarray, target: int, batch_mass: float, room: int,
                 n_new: int, rng: np.random.Generator) -> Candidate | None:
        """Seed and refine the candidate globals of a birth of ``target`` into at most ``n_new`` pieces (module
        docstring, steps 2-3); ``share``: r_{u, target} of the batch's atoms, ``local`` the batch's local step,
        where each refinement's document step starts (``TopicAlloc.local_step_split``)."""
        cfg, alloc = self.cfg, model.alloc
        seeds = self._seed_pieces(model, batch, share, room, rng, n_new)
        if seeds is None:
            return None
        stats, K = globals_.stats, globals_.K
        scale = float(stats.N[target]) / batch_mass
        base_N, base_fields = np.maximum(stats.N, 0.0), stats.select(model.obs_fields)

        def candidate(piece_N: np.ndarray, piece_fields: dict) -> Candidate:
            """The target's row replaced by the first piece, the others appended, scaled to the whole data."""
            N = np.concatenate([base_N, scale * piece_N[1:]])
            N[target] = scale * piece_N[0]
            fields = {}
            for n, v in base_fields.items():
                fields[n] = np.concatenate([v, scale * piece_fields[n][1:]])
                fields[n][target] = scale * piece_fields[n][0]
            return Candidate(N, fields, alloc.split_params(globals_.alloc, target, piece_N / piece_N.sum()))

        pieces = [target] + list(range(K, K + seeds[0].shape[0] - 1))
        current = candidate(*seeds)
        for _ in range(int(cfg.refine_iters)):
            rows = model.summarize(batch, split_step(model, batch, current, [target], local))
            kept = [p for p in pieces if rows.N[p] >= MIN_FRESH_MASS]
            if len(kept) < 2:
                return None
            current = candidate(rows.N[kept], {n: v[kept] for n, v in rows.select(model.obs_fields).items()})
            pieces = pieces[: len(kept)]
        return current

    def _seed_pieces(self, model, batch, share: np.ndarray, room: int, rng: np.random.Generator, n_new: int):
        """Masses (J' ≤ ``n_new``,) and observation summaries of the k-means groups of the target's data in ``batch``
        (module docstring, step 2), groups of less than ``MIN_FRESH_MASS`` dropped; None when fewer than
        two are left. Documents are clustered for bag-of-words data; the atoms themselves otherwise."""
        cfg = self.cfg
        if hasattr(batch, "word_ids"):
            sample, _ = target_documents(batch, share, min_tokens=1.0)
        else:
            sample = model.alloc.atoms(batch).take(np.flatnonzero(share > cfg.eps))
        if sample.n_atoms > cfg.max_atoms:
            sample = sample.take(np.sort(rng.choice(sample.n_atoms, size=cfg.max_atoms, replace=False)))
        J = min(int(n_new), sample.n_atoms // 2, room + 1)
        if J < 2:
            return None
        N, fields = kmeans_clusters(model.obs, sample, J, cfg.kmeans_iters, rng)
        mass = fields["S"].sum(axis=1) if hasattr(sample, "word_ids") else N
        keep = np.flatnonzero(mass >= MIN_FRESH_MASS)
        if keep.size < 2:
            return None
        return mass[keep], {n: v[keep] for n, v in fields.items()}

    def keep_seeds(self, seeded: "TopicSeeded") -> None:
        self.candidates = seeded.proposals
        self.joint_members = seeded.joint_members
        carried = self.take_carried(seeded.ages)
        parts = {uid: kept[2] for uid, kept in carried.items()}
        self.memo = [None if int(uid) not in parts else
                     (ordered_sum(parts[int(uid)][b] for b in sorted(parts[int(uid)])), dict(parts[int(uid)]))
                     for uid in self.target_uids]

    def collect(self, run, schedule, b: int, tracked) -> None:
        """``LapBirths.collect``; then each carried proposal's aggregate takes batch b's summaries of its
        pieces, and its candidate's pieces are made from that aggregate for the batches after b."""
        super().collect(run, schedule, b, tracked)
        K = run.globals.K
        for i, memo in enumerate(self.memo):
            if memo is None:
                continue
            total, parts = memo
            target = int(run.ids.positions(self.target_uids[i:i + 1])[0])
            fresh = piece_stats(self.tracked[b][i][0], target, K)
            total = total - parts.pop(b) + fresh if b in parts else total + fresh
            self.memo[i] = (total, parts)
            self.candidates[i] = with_piece_rows(self.candidates[i], run.model, target, K, total)

    # --------------------------------------------------------------- decide
    def decide(self, run, schedule) -> None:
        """Judge every proposal by the exact whole-data ELBO; accept the best one (a single target's or the
        joint one) if it gains. Each other one that may still win is carried into the next lap (``LapBirths.carry``),
        its candidate globals those of its own whole-data summaries: one more round of its refinement."""
        if self.active(schedule.lap):
            self.stuck += 1
        if not self.target_uids.size or schedule.changed:
            return  # nothing proposed, or an accepted merge or delete changed what the summaries describe
        self.check_complete(run, self.tracked, "birth proposal")
        batches = sorted(self.tracked)
        stats, K = run.globals.stats, run.globals.K
        current = run.elbo()
        proposals, verdicts = [], []
        for i in range(len(self.candidates)):
            total = ordered_sum(self.tracked[b][i][0] for b in batches)
            sources = [[k] for k in range(K)] + [[] for _ in range(total.K - K)]
            fresh = len(sources) - K + 1
            target = str(int(self.target_uids[i])) if i < self.target_uids.size else "joint"
            proposals.append(Proposal(self.name, target, sources, lambda b, cache, i=i: self.tracked[b][i][0],
                                      evaluated=run.evaluate(total, sources), changes=set(run.ids.uids.tolist()),
                                      warm=lambda b, warm, i=i: self.tracked[b][i][1], fresh=fresh, kept=fresh))
            verdicts.append(weigh(run, proposals[-1], current))
        n = self.target_uids.shape[0]
        best = int(np.argmax([verdict.gain for verdict in verdicts]))  # the joint proposal (at n) when it gains most
        any_accepted = verdicts[best].accepted
        winners = set(self.joint_members.tolist()) if best == n else {best}
        for i, (uid, verdict) in enumerate(zip(self.target_uids, verdicts)):
            target = int(run.ids.positions([uid])[0])
            accepted = i in winners and any_accepted
            gain = verdicts[n].gain if accepted and best == n else verdict.gain  # a joint member: all of them together
            log(schedule, proposals[i], Verdict(gain, accepted))
            if not accepted:
                total = verdict.globals.stats
                kept = (run.ids.uids.copy(), Candidate(np.maximum(total.N, 0.0), total.select(run.model.obs_fields),
                                                       verdict.globals.alloc),
                        {b: piece_stats(self.tracked[b][i][0], target, K) for b in batches})
                if self.carry(int(uid), i, gain, kept):
                    continue
            self.failures.record(uid, accepted, (float(stats.N[target]),))
            self.last_tried[int(uid)] = schedule.lap
        if any_accepted:
            install(run, schedule, proposals[best], verdicts[best])
            self.stuck = 0
