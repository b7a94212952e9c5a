"""Birth proposals (Hughes 2016 thesis §4.2): move all of one cluster's mass to J' fresh clusters.

The proposal is seeded at the first batch of a lap: the atoms with r_{n,t} > ε seed
J' clusters by Bregman k-means++ and k-means (§4.2.1 steps 1-2), refined by a few
restricted local / global steps on that batch. During the rest of the lap every
batch's target mass is re-divided among them, r'_{n,K+j} = r_{n,t} · p̃_nj with
p̃_n = softmax_j(E log p(x_n|φ̃_j) + ln π̃_j) (Eq. 4.12-4.16), and the proposal's
summaries are collected. At the end of the lap, once every batch has been
refreshed, the candidate (target emptied, new clusters appended; Eq. 4.17-4.22)
is accepted iff the exact whole-data ELBO rises (§4.2.2). A rejected birth leaves
the caches as they are.

(A birth judged on its seeding batch alone, as §4.2.3 allows, is nearly always
rejected when that batch is a small part of the data: the new clusters then look
rare, and the allocation term charges about −ln π̃ per atom moved. Judging it
after a full lap compares the whole data set's use of the new clusters.)

Targets are the clusters whose atoms in the first batch are worst explained
(lowest b-score, Eq. 4.24); the driver decides which clusters are eligible and
draws the seed of the k-means++ generator at the start of the lap.
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field

import numpy as np

from bnpvi.alloc.base import Local
from bnpvi.data.batch import atom_weights, unweighted
from bnpvi.errors import BnpviError
from bnpvi.moves.base import FAINT_MASS, Move, alloc_part, faint_stats, ordered_sum, per_lap
from bnpvi.moves.judge import Proposal, judge
from bnpvi.moves.protocols import MixtureBirths
from bnpvi.moves.history import FailureLog
from bnpvi.obs.bregman import hard_summaries, kmeans, kmeanspp_seeds
from bnpvi.stats import Responsibilities, SuffStats


def birth_scores(log_lik: np.ndarray, resp) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster batch mass N_bk and b-score Σ_n r_nk E log p(x_n|φ_k) / N_bk (thesis Eq. 4.24)."""
    mass = resp.counts()
    fit = resp.column_sums(log_lik)
    return mass, np.where(mass > 0, fit / np.maximum(mass, 1e-300), np.inf)


def fresh_weights(N: np.ndarray) -> np.ndarray:
    """ln π̃_j = ln((Ñ_j + 1/J)/(Σ Ñ + 1)), the weights of a proposal's fresh clusters (§4.2.1)."""
    return np.log((N + 1.0 / N.shape[0]) / (N.sum() + 1.0))


def transfer(model, batch, r_target: np.ndarray, N: np.ndarray, fields: dict,
             held: SuffStats | None = None) -> tuple[SuffStats, Local]:
    """Summaries and local step of r'_{n,j} = r_{n,t} p̃_nj over a batch, for fresh clusters (N, fields).

    An atom holding at most ``FAINT_MASS`` of the target (0 < r_{n,t} ≤ 1e-6) gives all of it to the
    largest fresh cluster j* instead, r'_{n,j*} = r_{n,t}: still a proposal whose summaries are exact
    (and judged like any other), but one that needs no likelihood of these atoms and the statistics of
    one cluster only: a birth's transfers cost about a sixth of what scoring every atom with some mass
    of the target did on 64-D image patches. The local step returned
    holds the scored rows, then the faint ones (for the fresh clusters' group entropies). The faint atoms'
    statistics are ``held``, the target's own summaries of this batch (one cluster; made here when not
    given), less the scored atoms' at the target's weights, so the faint atoms are not read at all.
    """
    rows = np.flatnonzero(r_target > FAINT_MASS)
    atoms = batch.take(rows)
    post = model.obs.posterior(N, fields)
    proposal = model.weighted(atoms, model.alloc.restricted_local_step(
        r_target[rows], model.obs.expected_log_lik(post, atoms), fresh_weights(N)))
    fresh = model.summarize(atoms, proposal)
    faint = np.flatnonzero((r_target > 0) & (r_target <= FAINT_MASS))
    if faint.size:
        J, j = N.shape[0], int(np.argmax(N))
        mass = r_target[faint]
        if held is None:  # the target's summaries of the batch, when the caller has none at hand
            held = model.summarize(batch, Local(Responsibilities(r_target.reshape(-1, 1), 1)))
        gained = faint_stats(model, held, atoms, r_target[rows])
        fresh = fresh + gained.remap([[0] if i == j else [] for i in range(J)])
        one_hot = np.zeros((faint.size, J))
        one_hot[:, j] = mass
        weights = atom_weights(batch)
        proposal = Local(Responsibilities(np.vstack([proposal.resp.values, one_hot]), J,
                                          weights=None if weights is None else weights[np.concatenate([rows, faint])]))
    return fresh, proposal


# ------------------------------------------------------------------ cleanup
def partitions_membership(levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The groups of more than one fresh cluster that occur in any level of a cleanup order.

    ``levels[ℓ]`` labels each of the J fresh clusters with its group at level ℓ. Returns
    the (J, G) 0/1 membership of those G groups, and for every level and group label the
    column of that group (−1 for a single cluster).
    """
    J = levels.shape[1]
    columns, node_of = [], np.full((levels.shape[0], J), -1, dtype=np.int64)
    for level, labels in enumerate(levels):
        for g in np.unique(labels):
            members = labels == g
            if members.sum() < 2:
                continue
            found = next((c for c, col in enumerate(columns) if np.array_equal(col, members)), None)
            if found is None:
                columns.append(members)
                found = len(columns) - 1
            node_of[level, g] = found
    membership = np.array(columns, dtype=np.float64).T.reshape(J, len(columns))
    return membership, node_of


def grouped(fresh: SuffStats, labels: np.ndarray, terms: dict, node_of: np.ndarray) -> SuffStats:
    """The fresh clusters merged by group label, each merged group's tracked fields from ``terms``."""
    groups = [np.flatnonzero(labels == g).tolist() for g in range(int(labels.max()) + 1)]
    tracked = {name: {g: values[node_of[g]] for g in range(len(groups)) if node_of[g] >= 0}
               for name, values in terms.items()}
    return fresh.remap(groups, tracked)


def cleanup_order(model, globals_, target: int, fresh: SuffStats, local, scale: float) -> np.ndarray:
    """Levels of a greedy agglomeration of the J fresh clusters: level 0 keeps all J, level ℓ + 1
    merges the pair of groups of level ℓ that gives the best estimated whole-data ELBO.

    The estimate replaces the target by the fresh clusters' summaries in the seeding
    batch times ``scale`` (the target's whole-data mass over its mass in this batch)
    and scores it as a mixture's ELBO at the optimal globals, up to the terms of the
    clusters left alone: L_alloc*(counts) + Σ_groups [L_data,g* + H_g] (Hughes 2016
    thesis Eq. 3.41-3.44; births are offered for mixtures only). With ``local`` None, a
    merged group's entropy is taken as the sum of its members' (an upper bound). Each group's terms
    are computed once, those of a level's new groups together. The order is only a plan:
    each level is judged exactly at the end of the lap. Returns a (J − 1, J) int array of
    group labels (every level keeps at least 2 groups).
    """
    others_N = globals_.stats.N.copy()
    others_N[target] = 0.0
    terms: dict[tuple, tuple[float, float]] = {}  # members -> (N_g, L_data,g* + H_g), scaled

    def add_terms(groups) -> None:
        new = [m for m in dict.fromkeys(groups) if m not in terms]
        if not new:
            return
        membership = np.zeros((fresh.K, len(new)))
        for c, members in enumerate(new):
            membership[list(members), c] = 1.0
        N = scale * (fresh.N @ membership)
        fields = {name: scale * np.tensordot(membership.T, v, axes=1)
                  for name, v in fresh.select(model.obs_fields).items()}
        H = scale * (fresh["H"] @ membership)
        multi = np.flatnonzero(membership.sum(axis=0) > 1)
        if multi.size and local is not None:
            H[multi] = scale * model.alloc.group_terms(local, membership[:, multi])["H"]
        values = model.obs.log_marginal(N, fields) + H
        terms.update((members, (float(N[c]), float(values[c]))) for c, members in enumerate(new))

    def score(groups: list[tuple]) -> float:
        values = [terms[members] for members in groups]
        counts = np.concatenate([others_N, [n for n, _ in values]])
        return sum(v for _, v in values) + model.alloc.log_marginal(counts)

    groups = [(j,) for j in range(fresh.K)]
    levels = [np.arange(fresh.K)]
    while len(groups) > 2:
        candidates = [groups[:g] + [tuple(sorted(groups[g] + groups[h]))] + groups[g + 1:h] + groups[h + 1:]
                      for g in range(len(groups)) for h in range(g + 1, len(groups))]
        add_terms(members for candidate in candidates for members in candidate)
        groups = max(candidates, key=score)  # the first of equal scores
        labels = np.empty(fresh.K, dtype=np.int64)
        for g, members in enumerate(groups):
            labels[list(members)] = g
        levels.append(labels)
    return np.array(levels, dtype=np.int64)


def kmeans_clusters(obs, sample, J: int, kmeans_iters: int, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """Summaries (N, fields) of J clusters of ``sample`` by Bregman k-means++ and k-means (thesis Alg. 2.1-2.2)."""
    seeds = kmeanspp_seeds(obs, sample, J, rng)
    N, fields = hard_summaries(obs, unweighted(sample.take(seeds)), np.arange(J), J)  # a seed is one atom
    return kmeans(obs, sample, N, fields, kmeans_iters)


def dense_groups(obs, sample, J: int, size: int, rng: np.random.Generator, max_centers: int = 500) -> np.ndarray:
    """Labels of the atoms of ``sample`` for up to J fresh clusters: 1, 2, ... for its tightest disjoint groups
    of ``size`` atoms, 0 for all other atoms (the rest of the target, kept as one piece).

    A group is the ``size`` atoms nearest a centre atom by the family's Bregman divergence to the centre's
    smoothed atom (thesis Alg. 2.2's divergence); groups are taken by increasing mean divergence, skipping
    any that shares an atom with one taken, among at most ``max_centers`` centres drawn from ``sample``.
    """
    n = sample.n_atoms
    centers = np.arange(n) if n <= max_centers else np.sort(rng.choice(n, size=max_centers, replace=False))
    divergence = obs.atom_divergences(sample)(centers)
    near = np.argpartition(divergence, size - 1, axis=0)[:size]
    spread = np.take_along_axis(divergence, near, axis=0).mean(axis=0)
    labels = np.zeros(n, dtype=np.int64)
    groups = 0
    for c in np.argsort(spread, kind="stable"):
        if groups == J - 1:
            break
        if labels[near[:, c]].any():
            continue
        groups += 1
        labels[near[:, c]] = groups
    return labels


def _held(stats: SuffStats | None, k: int) -> SuffStats | None:
    """Cluster k of a batch's summaries as summaries of their own (None without them)."""
    return None if stats is None else stats.remap([[k]])


def seed_birth(model, batch, r_target: np.ndarray, cfg, rng: np.random.Generator, max_new: int,
               held: SuffStats | None = None, n_new: int | None = None, dense: bool = False):
    """Summaries (N, fields) of J' ≤ min(n_new, max_new) fresh clusters from the target's atoms in ``batch``
    (``n_new`` None: the config's).

    Returns None when the target's data cannot seed at least two clusters.
    """
    subset = np.flatnonzero(r_target > cfg.eps)
    if subset.size > cfg.max_atoms:
        subset = np.sort(rng.choice(subset, size=cfg.max_atoms, replace=False))
    J = min(int(cfg.n_new if n_new is None else n_new), subset.size // 2, int(max_new))
    if J < 2:
        return None
    if dense and subset.size > 2 * int(cfg.group_size):
        sample = batch.take(subset)
        labels = dense_groups(model.obs, sample, J, int(cfg.group_size), rng)
        N, fields = hard_summaries(model.obs, sample, labels, int(labels.max()) + 1)
    else:
        N, fields = kmeans_clusters(model.obs, batch.take(subset), J, cfg.kmeans_iters, rng)
    for _ in range(int(cfg.refine_iters)):
        keep = N > 1e-8
        if keep.sum() < 2:
            return None
        rows = transfer(model, batch, r_target, N[keep], {n: v[keep] for n, v in fields.items()}, held)[0]
        N, fields = rows.N, rows.select(model.obs_fields)
    keep = N > 1e-8
    if keep.sum() < 2:
        return None
    return N[keep], {n: v[keep] for n, v in fields.items()}


Memo = tuple[SuffStats, dict[int, SuffStats]]
"""A proposal's fresh summaries over the whole data: their sum, and the part of it each batch gave."""


def split(stats: SuffStats, target: int, new: SuffStats) -> SuffStats:
    """``stats`` with cluster ``target`` emptied and the clusters of ``new`` appended (all the target's mass moved)."""
    K = stats.K
    emptied = stats.remap([[k] if k != target else [] for k in range(K)] + [[] for _ in range(new.K)])
    return emptied.with_clusters(np.arange(K, K + new.K), new)


def level_value(run, target: int, fresh: SuffStats, sources: list) -> float:
    """The whole-data ELBO of the current summaries with cluster ``target`` replaced by ``fresh`` (``split``),
    at the candidate's global step: the data terms of the clusters left alone are the current ones
    (Hughes 2016 thesis Eq. 3.24: one term per cluster), so only the fresh clusters' are computed, and the
    allocation part is evaluated on the allocation summaries alone. ``run.evaluate`` of the candidate up to
    the order of the additions, without copying the family's summaries of the other clusters."""
    model, stats = run.model, run.globals.stats
    data = run.data_terms()
    kept = float(np.sum(np.delete(data, target)))
    candidate = split(alloc_part(model, stats), target, alloc_part(model, fresh))
    warm = model.alloc.warm_start(run.globals.alloc, sources)
    return kept + float(np.sum(model.data_terms(fresh))) + model.alloc_value(candidate, warm)


@dataclass(frozen=True, eq=False)
class SeedingPlan:
    """What the lap's first batch needs to seed births (``LapBirths.batch_plan``)."""

    eligible: np.ndarray
    """Positions of the clusters that may be targeted."""
    seed: int
    """Of the batch's k-means++ generator."""
    room: int
    """Clusters the proposals may add (``Kmax`` − K)."""
    places: int
    """Proposals at most."""
    n_new: np.ndarray
    """J', the fresh clusters a birth of each cluster asks for (``fresh_counts``)."""
    dense: int = -1
    """The target seeded by ``dense_groups`` (−1: none)."""
    carried: tuple = ()
    """(position, what the family carries of it, laps lived) per carried proposal."""


@dataclass(eq=False)
class Seeded:
    """What the seeding batch made: the targets (positions) in order, each one's proposal (the family's) and
    laps lived, and the eligible clusters that could not seed one (``failed``) or held too little mass in the
    batch (``small``)."""

    targets: list = field(default_factory=list)
    proposals: list = field(default_factory=list)
    ages: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    small: list = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class BirthsTracked:
    """A batch's tracked data for births: per proposal, the family's summaries; at the seeding batch, also
    what it seeded."""

    tracked: list
    seeded: Seeded | None = None


def seed_targets(plan: SeedingPlan, score: np.ndarray, mass: np.ndarray, min_batch_mass: float, min_room: int,
                 carry, propose) -> Seeded:
    """The seeding batch's loop, shared by every family's lap births: the carried proposals first
    (``carry(position, kept)`` -> (proposal, clusters it adds)), then the eligible clusters by increasing
    b-score (Hughes 2016 thesis Eq. 4.24, §4.2.4; ``propose(position, room)`` -> (proposal, clusters it adds)
    or None), until ``places`` proposals are made or less than ``min_room`` clusters may still be added."""
    seeded, room = Seeded(), plan.room
    for k, kept, age in plan.carried:
        proposal, size = carry(k, kept)
        seeded.targets.append(k)
        seeded.proposals.append(proposal)
        seeded.ages.append(age)
        room -= size
    eligible = set(int(k) for k in plan.eligible)
    for k in np.argsort(score, kind="stable"):
        k = int(k)
        if len(seeded.targets) >= plan.places or room < min_room:
            break
        if k not in eligible:
            continue
        if mass[k] < min_batch_mass:
            seeded.small.append(k)
            continue
        made = propose(k, room)
        if made is None:
            seeded.failed.append(k)
            continue
        seeded.targets.append(k)
        seeded.proposals.append(made[0])
        seeded.ages.append(1)
        room -= made[1]
    return seeded


@dataclass(frozen=True, eq=False)
class TransferPlan:
    """What a batch after the seeding one tracks for mixture births: the targets (positions), each one's
    fresh clusters (N, fields) and cleanup order."""

    targets: np.ndarray
    seeds: list
    levels: list


class TargetedBirths(Move):
    """What every birth move shares: the rejection history of its targets and the retry rules.

    A cluster whose birth was rejected is not targeted again until its size changes by
    ``retry_change`` (thesis §4.2.4). The places of a lap (``max_per_lap``) that the other
    clusters leave free go to the least recently tried blocked ones, retried with new seeds,
    until ``max_stuck`` laps in a row have ended without an accepted birth: whether a birth
    wins depends on its seeds as much as on its target (docs/births.md).
    """

    saved = {"failures": FailureLog, "stuck": int, "last_tried": dict[int, int], "eligible": np.ndarray, "seed": int}
    min_new = 2
    """Fresh clusters the smallest proposal makes (no birth with less room under ``Kmax``)."""
    seedings = ("kmeans",)
    """The values of ``seeding`` these births carry out (``dense``: mixture births only)."""

    def __init__(self, cfg):
        if cfg.seeding not in self.seedings:
            raise BnpviError(f"moves.birth.seeding must be one of {', '.join(self.seedings)} for these births, "
                             f"got {cfg.seeding!r}")
        if int(cfg.group_size) < 2:
            raise BnpviError(f"moves.birth.group_size must be at least 2, got {cfg.group_size}")
        super().__init__(cfg)
        self.failures = FailureLog()
        self.last_tried: dict[int, int] = {}  # cluster id -> lap of its latest birth proposal
        self.stuck = 0  # laps in a row that ended without an accepted birth
        self.reset()

    def pending(self, run) -> bool:
        return self.active(run.lap + 1) and self._eligible(run, set()).size > 0

    def fresh_counts(self, run) -> np.ndarray:
        """J', the fresh clusters a birth of each cluster asks for this lap: ``n_new``, or ⌈A · N_k / Σ_j N_j⌉
        when that is more and cluster k was never proposed before, A the abundance (``abundance``; null: the
        model's ``birth_abundance``). A run from one cluster then splits it into as many pieces as an abundant
        start has; small targets, and a target whose proposal failed (too many pieces for a small data set),
        get ``n_new`` (docs/births.md, "A birth of everything")."""
        cfg = self.cfg
        abundance = cfg.get("abundance")
        abundance = run.model.alloc.birth_abundance if abundance is None else int(abundance)
        N = np.maximum(run.globals.stats.N, 0.0)
        fresh = np.full(N.shape[0], int(cfg.n_new), dtype=np.int64)
        if abundance > 0 and N.sum() > 0:
            new = np.array([int(u) not in self.last_tried for u in run.ids.uids], dtype=bool)
            fresh[new] = np.maximum(fresh[new], np.ceil(abundance * N[new] / N.sum()).astype(np.int64))
        return fresh

    def dense_target(self, run) -> int:
        """The cluster whose birth this lap is seeded by ``dense_groups`` (−1: none): with ``seeding=dense``, the
        largest cluster once a birth of it has failed, on the laps whose k-means++ seed is odd (about every other
        lap), so that its tries alternate between k-means pieces and tight groups carved out of it."""
        if self.cfg.seeding != "dense" or self.seed % 2 == 0 or run.globals.K == 0:
            return -1
        k = int(np.argmax(run.globals.stats.N))
        return k if self.failures.failures(int(run.ids.uids[k])) > 0 else -1

    def places(self, run) -> int:
        """Proposals per lap: ``max_per_lap``, at most the allocation model's ``births_per_lap``."""
        return per_lap(self.cfg.max_per_lap, run.model.alloc.births_per_lap)

    def _eligible(self, run, excluded: set[int]) -> np.ndarray:
        """Ids of the clusters that may be targeted: those not used by another move nor blocked by a
        rejection, then, while fewer than ``max_per_lap`` and fewer than ``max_stuck`` laps in a row
        failed, the least recently tried blocked ones (class docstring)."""
        stats, uids, cfg = run.globals.stats, run.ids.uids, self.cfg
        none = np.zeros(0, dtype=np.int64)
        if cfg.Kmax - stats.K < self.min_new:
            return none
        free = [(k, int(u)) for k, u in enumerate(uids) if int(u) not in excluded]
        eligible = [u for k, u in free if not self.failures.blocked(u, (float(stats.N[k]),), 1, cfg.retry_change)]
        places = self.places(run) - len(eligible)
        if places > 0 and self.stuck < cfg.max_stuck:
            unblocked = set(eligible)
            blocked = sorted((ku for ku in free if ku[1] not in unblocked),
                             key=lambda ku: (self.last_tried.get(ku[1], -1), ku[0]))
            eligible += [u for _, u in blocked[:places]]
        return np.array(eligible, dtype=np.int64) if eligible else none


class LapBirths(TargetedBirths):
    """Births seeded at the lap's first batch, tracked in every batch and judged at the lap's end: the
    plan (eligible targets and the k-means++ seed) and the seeding batch's plan.

    A rejected proposal that may still win (``carry``: just seeded, or its gain rising at a pace that
    would make it win within ``refine_laps`` laps) lives on into the next lap, refined from its
    own whole-data summaries (each family says how: ``carried_plan``); its target is reserved from
    the other moves meanwhile. Seeds made from one batch hold too little of the target's data to
    win on short documents (docs/births.md)."""

    saved = {"ages": list[int], "previous": list[float]}  # and ``carried``, whose kept part each family types

    def __init__(self, cfg):
        # proposals for the next lap: (target id, what the family keeps of it, laps lived, best gain)
        self.carried: list[tuple[int, object, int, float]] = []
        super().__init__(cfg)

    def reserved(self) -> set[int]:
        return {uid for uid, *_ in self.carried}

    def pending(self, run) -> bool:
        return bool(self.carried) and self.active(run.lap + 1) or super().pending(run)

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        """Carried proposals that still apply (``carried_valid``), then the eligible targets (see
        ``_eligible``); the seed of this lap's k-means++."""
        self.carried = [c for c in self.carried if self.carried_valid(run, c)]
        self.eligible = self._eligible(run, excluded | self.reserved())
        self.seed = int(rng.integers(2**63 - 1))
        return self.reserved()

    def reset(self) -> None:
        self.ages: list[int] = []  # laps each proposal has lived, this one included (``take_carried``)
        self.previous: list[float] = []  # each proposal's best gain at its previous lap (−inf if new)

    def carried_valid(self, run, carried) -> bool:
        """Whether a carried proposal still applies at this lap: its target exists."""
        return carried[0] in set(int(u) for u in run.ids.uids)

    def batch_plan(self, run, b: int):
        if not self.seeded:
            if not (self.eligible.size or self.carried) or run.pos != 0:
                return None
            return SeedingPlan(run.ids.positions(self.eligible), self.seed, self.cfg.Kmax - run.globals.K,
                               self.places(run), self.fresh_counts(run), self.dense_target(run),
                               tuple((int(run.ids.positions([uid])[0]), self.carried_plan(run, uid, kept), age)
                                     for uid, kept, age, _ in self.carried))
        return self.tracking_plan(run) if self.target_uids.size else None

    def ends_round(self, plan) -> bool:
        """The seeding batch ends its round: the batches after it track the proposals it seeds."""
        return not self.seeded

    def carried_plan(self, run, uid: int, kept):
        """What the seeding batch needs of carried proposal ``uid`` at this lap, from what ``carry`` kept of it."""
        return kept

    def take_carried(self, ages) -> dict:
        """At the seeding batch: each proposal's laps lived (``ages``, in target order) and its best gain at
        its previous lap (−inf if new); returns what was kept of each carried proposal, by target id."""
        carried = {uid: (kept, gain) for uid, kept, _, gain in self.carried}
        self.ages = [int(a) for a in ages]
        self.previous = [carried.get(int(uid), (None, -np.inf))[1] for uid in self.target_uids]
        self.carried = []
        return {uid: kept for uid, (kept, _) in carried.items()}

    def carry(self, uid: int, i: int, gain: float, kept) -> bool:
        """Carry rejected proposal i (target ``uid``) into the next lap if it may still win: its gain rose
        since its previous lap (or it is new), and at the pace of that rise it would win within
        ``refine_laps`` more laps; it lives 2 ``refine_laps`` laps at most. A proposal that creeps up keeps
        no place from a fresh one, and one about to win is not dropped for its age."""
        horizon = self.cfg.refine_laps
        rise = gain - self.previous[i]
        if kept is None or self.ages[i] >= 2 * horizon or rise <= 0 or -gain > horizon * rise:
            return False
        self.carried.append((uid, kept, self.ages[i] + 1, float(gain)))
        return True

    @abstractmethod
    def tracking_plan(self, run):
        """What a batch after the seeding one tracks for the seeded proposals."""

    def collect(self, run, schedule, b: int, tracked) -> None:
        """Keep batch b's tracked data; at the seeding batch, also the targets and the seeds (``keep_seeds``),
        and log the targets that could not seed a proposal as failed. Eligible clusters with too little mass
        in the seeding batch (``min_batch_mass``) count as failed too, without a proposal to log: they wait
        for their size to change like any rejected target, so they cannot keep a run from converging."""
        seeded = tracked.seeded
        if seeded is not None:
            self.seeded = True
            self.target_uids = run.ids.uids[np.array(seeded.targets, dtype=np.intp)]
            self.keep_seeds(seeded)
            for k in seeded.failed:
                uid = int(run.ids.uids[k])
                self.failures.record(uid, False, (float(run.globals.stats.N[k]),))
                self.last_tried[uid] = schedule.lap
                schedule.event(self.name, str(uid), np.nan, False)
            for k in seeded.small:
                self.failures.record(int(run.ids.uids[k]), False, (float(run.globals.stats.N[k]),))
        self.tracked[b] = tracked.tracked

    @abstractmethod
    def keep_seeds(self, seeded: Seeded) -> None:
        """Keep what the seeding batch made for the rest of the lap."""


class BirthMove(LapBirths):
    """Births for memoized VI: seeded in the lap's first batch, tracked every batch, judged at lap end.

    A carried proposal (``LapBirths``) goes on with the pieces of its best cleanup level (their
    summaries merged by the level's groups) and is refined at whole-data scale as memoized VI refines the
    model: its fresh clusters' parameters are the posterior of an aggregate of per-batch
    summaries, first those of the lap just judged, and each batch's transfer replaces that
    batch's part of the aggregate before the next batch. Every judgement stays exact: the
    summaries judged are those of one transfer per batch, each made from the batch's current
    responsibilities.
    """

    name = "birth"
    requires = MixtureBirths
    saved = {"carried": list[tuple[int, Memo, int, float]], "seeded": bool, "target_uids": np.ndarray,
             "memo": list[Memo | None], "seeds": list[tuple[np.ndarray, dict]], "levels": list[np.ndarray],
             "tracked": dict[int, list[tuple[SuffStats, dict]]]}
    seedings = ("kmeans", "dense")

    def carried_plan(self, run, uid: int, kept: tuple) -> SuffStats:
        """A carried proposal's fresh summaries over the whole data (kept as (sum, per-batch parts))."""
        return kept[0]

    def reset(self) -> None:
        super().reset()
        self.eligible = np.zeros(0, dtype=np.int64)  # ids that may be targeted this lap
        self.seed = 0  # of the k-means++ generator used at the first batch
        self.seeded = False
        self.target_uids = np.zeros(0, dtype=np.int64)
        self.seeds: list[tuple[np.ndarray, dict]] = []
        self.levels: list[np.ndarray] = []  # each birth's cleanup order (see cleanup_order)
        # per carried proposal (None for a new one): the aggregate of its fresh summaries, and the parts
        # of it that each batch's next transfer replaces
        self.memo: list[tuple[SuffStats, dict[int, SuffStats]] | None] = []
        self.tracked: dict[int, list[tuple[SuffStats, dict]]] = {}  # per batch, per birth: fresh summaries, group terms

    def tracking_plan(self, run) -> "TransferPlan":
        seeds = [seed if memo is None else (np.maximum(memo[0].N, 0.0), memo[0].select(run.model.obs_fields))
                 for seed, memo in zip(self.seeds, self.memo)]
        return TransferPlan(run.ids.positions(self.target_uids), seeds, self.levels)

    def collect(self, run, schedule, b: int, tracked) -> None:
        """``LapBirths.collect``; then each carried proposal's aggregate takes batch b's new transfer."""
        super().collect(run, schedule, b, tracked)
        for i, memo in enumerate(self.memo):
            if memo is not None:
                total, parts = memo
                fresh = self.tracked[b][i][0]
                self.memo[i] = (total - parts.pop(b) + fresh if b in parts else total + fresh), parts

    uses_batch_stats = True  # a target's own summaries spare its transfers a pass over its faint atoms

    def track(self, model, globals_, batch, log_lik, local, plan, stats=None) -> BirthsTracked:
        resp = local.resp
        seeded = None
        if isinstance(plan, SeedingPlan):  # the seeding batch: its transfers were made while seeding
            seeded = self._seed(model, globals_, batch, log_lik, resp, plan, stats)
            transfers = [transfer for _, _, transfer in seeded.proposals]
            seeded.proposals = [(seed, levels) for seed, levels, _ in seeded.proposals]
            levels = [levels for _, levels in seeded.proposals]
        else:
            transfers = [transfer(model, batch, resp.column(int(t)), N, fields, _held(stats, int(t)))
                         for t, (N, fields) in zip(plan.targets, plan.seeds)]
            levels = plan.levels
        tracked = []
        for (fresh, proposal), order in zip(transfers, levels):
            membership = partitions_membership(order)[0]
            terms = model.alloc.group_terms(proposal, membership) if membership.shape[1] else {}
            tracked.append((fresh, terms))
        return BirthsTracked(tracked, seeded)

    def _seed(self, model, globals_, batch, log_lik, resp, plan: SeedingPlan, stats=None) -> Seeded:
        """At the lap's first batch: seed births on the worst-fit eligible clusters (§4.2.4), and plan
        each one's cleanup order on this batch. Each proposal is (seed, cleanup order, transfer)."""
        cfg = self.cfg
        rng = np.random.default_rng(plan.seed)
        mass, score = birth_scores(log_lik, resp)

        def carry(k: int, fresh_total: SuffStats):
            seed = np.maximum(fresh_total.N, 0.0), fresh_total.select(model.obs_fields)
            fresh, proposal = transfer(model, batch, resp.column(k), *seed, _held(stats, k))
            if mass[k] >= cfg.min_batch_mass:
                order = cleanup_order(model, globals_, k, fresh, proposal, float(globals_.stats.N[k]) / float(mass[k]))
            else:  # too little of the target here: plan on its whole-data summaries of the previous lap
                order = cleanup_order(model, globals_, k, fresh_total, None, 1.0)
            return (seed, order, (fresh, proposal)), fresh.K

        def propose(k: int, room: int):
            seed = seed_birth(model, batch, resp.column(k), cfg, rng, max_new=room, held=_held(stats, k),
                              n_new=int(plan.n_new[k]), dense=k == plan.dense)
            if seed is None:
                return None
            fresh, proposal = transfer(model, batch, resp.column(k), *seed, _held(stats, k))
            order = cleanup_order(model, globals_, k, fresh, proposal, float(globals_.stats.N[k]) / float(mass[k]))
            return (seed, order, (fresh, proposal)), seed[0].shape[0]

        return seed_targets(plan, score, mass, cfg.min_batch_mass, 2, carry, propose)

    def keep_seeds(self, seeded: Seeded) -> None:
        self.seeds = [seed for seed, _ in seeded.proposals]
        self.levels = [levels for _, levels in seeded.proposals]
        carried = self.take_carried(seeded.ages)
        self.memo = [None if int(uid) not in carried else (carried[int(uid)][0], dict(carried[int(uid)][1]))
                     for uid in self.target_uids]

    def decide(self, run, schedule) -> None:
        """Judge each birth at every level of its cleanup order, exactly (``level_value``; the best level's gain
        confirmed by the candidate's own global step before it is accepted); keep the best level if it gains."""
        if self.active(schedule.lap):
            self.stuck += 1
        if not self.target_uids.size:
            return
        self.check_complete(run, self.tracked, "birth proposal")
        batches = sorted(self.tracked)
        for i, uid in enumerate(self.target_uids):
            if int(uid) in schedule.changed:
                continue
            target = int(run.ids.positions([uid])[0])
            levels = self.levels[i]
            node_of = partitions_membership(levels)[1]
            total = ordered_sum(self.tracked[b][i][0] for b in batches)
            terms = {name: sum(self.tracked[b][i][1][name] for b in batches) for name in self.tracked[batches[0]][i][1]}
            stats = run.globals.stats
            current = run.elbo()
            best = None
            for level, labels in enumerate(levels):
                fresh = grouped(total, labels, terms, node_of[level])
                sources = [[k] for k in range(stats.K)] + [[] for _ in range(fresh.K)]
                value = level_value(run, target, fresh, sources)
                if best is None or value > best[0]:
                    best = (value, level, sources, fresh)
            value, level, sources, fresh = best
            labels, nodes = levels[level], node_of[level]
            verdict = judge(run, schedule, Proposal(
                self.name, str(int(uid)), sources,
                lambda b, cache, t=target, i=i, labels=labels, nodes=nodes: split(
                    cache, t, grouped(self.tracked[b][i][0], labels, self.tracked[b][i][1], nodes)),
                stats=lambda: split(stats, target, fresh), screened_gain=value - current, changes={int(uid)},
                fresh=levels.shape[1], kept=int(labels.max()) + 1), current)
            gain, accepted = verdict.gain, verdict.accepted
            if accepted:
                self.stuck = 0
            if not accepted:
                best_total = grouped(total, labels, terms, nodes)
                keep = [[j] for j in np.flatnonzero(best_total.N > 1e-8)]
                kept = (best_total.remap(keep), {b: grouped(v[i][0], labels, v[i][1], nodes).remap(keep)
                                                 for b, v in self.tracked.items()}) if len(keep) >= 2 else None
                if self.carry(int(uid), i, gain, kept):
                    continue
            self.failures.record(uid, accepted, (float(stats.N[target]),))
            self.last_tried[int(uid)] = schedule.lap
