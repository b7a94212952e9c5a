"""Sub-cluster splits: every cluster carries two sub-clusters, refined in every lap, and proposes their split.

The variational, memoized form of the sub-cluster split-merge of Chang & Fisher (2013), which
DPMMSubClusters (Dinari, Yu & Freifeld 2019) samples. Each cluster k keeps two sub-clusters (k, l) and
(k, r). At every visit of batch b, the cluster's responsibilities are shared between them,

    r'_{n,kl} = r_nk s_nl,   r'_{n,kr} = r_nk s_nr,   s_n = softmax_j(E ln p(x_n | φ̃_kj) + ln π̃_kj),

(Hughes 2016 thesis Eq. 4.12-4.16, with J = 2), where q(φ̃_kj) is the posterior of the sub-cluster's
whole-data summaries and ln π̃_kj = ln((Ñ_kj + 1/2)/(Ñ_kl + Ñ_kr + 1)) (§4.2.1). The summaries of
r' over batch b replace that batch's part of the sub-clusters' whole-data summaries, as memoized VI
replaces a cluster's (Eq. 3.49: total = total − part[b] + new), so the sub-clusters are refined by the
whole data lap after lap, and the cluster's own responsibilities and ELBO are untouched by them.

Once the parts of every batch describe the cluster's current responsibilities, its split, the cluster
replaced by its two sub-clusters (Eq. 4.17-4.22), is a valid q whose summaries are the memoized
sub-summaries: its gain is the exact whole-data ELBO difference, with no extra pass over the data. Every
such cluster is judged at the lap's end, one after the other against the state the earlier acceptances
left, so K can double in a lap. (DPMMSubClusters lets a cluster propose only once its sub-clusters have
settled over a burn-in; here every proposal is judged by its exact gain, and sub-clusters seeded from a
sample of every batch cut the whole cluster from the start: waiting for a 1 % change of the gain held
splits back for laps on real data, where each split moves the clusters around it.) A merge keeps its
pair as the merged cluster's sub-clusters (their summaries are the pair's own, exactly), so a later
split can undo it.

New sub-clusters come from a sample of the cluster's atoms drawn from every batch (``SAMPLE_ATOMS``): a
Bregman 2-means of it (thesis Alg. 2.1-2.2), refined by restricted steps on the sample. Every lap each
batch gives a sample of every cluster, its atoms weighted by their sub-cluster responsibilities r_nk s_n,
so that the two children of an accepted split get their own sub-clusters at once, from the part of the
sample each one holds; a cluster the run starts with gets them after its first lap. Seeds from one batch
would cut what that batch holds of the cluster (sorted data: one of its two groups), and memoized EM may
need many laps to move them from there.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

import numpy as np

from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.moves.base import FAINT_MASS, Move, ordered_sum
from bnpvi.moves.birth import _held, level_value, seed_birth, split, transfer
from bnpvi.moves.judge import Proposal, judge
from bnpvi.moves.protocols import SubclusterSplits
from bnpvi.moves.saved import decode, encode
from bnpvi.stats import SuffStats


@dataclass(frozen=True)
class Seeding:
    """How new sub-clusters are seeded from a sample (``seed_birth``'s settings)."""

    n_new: int = 2
    eps: float = 0.1
    max_atoms: int = 4000
    kmeans_iters: int = 10
    refine_iters: int = 3
    group_size: int = 15


SEEDING = Seeding()
"""Two sub-clusters by 2-means of the sampled atoms with weight > 0.1, refined by 3 restricted local / global
rounds on the sample."""

SAMPLE_ATOMS = 2000
"""Atoms of each cluster sampled per lap, over all batches (each batch gives its share, at random among the
cluster's atoms there with r_nk > ``SEEDING.eps``)."""

HORIZON = 1
"""A judged split that lost keeps a run from converging while, at the pace its gain rose since the last lap,
it would win within this many laps. The sub-clusters of a cluster that is one group drift lap after lap (a
2-component fit of one Gaussian is flat along many cuts), their split's gain rising and falling by a few nats
while it stays tens of nats below 0: a longer horizon kept settled runs going for 10 laps and more."""

COLLAPSED = 1e-8
"""Sub-clusters of which one holds less than this fraction of the cluster's mass have collapsed: memoized EM of the
two found one group where the cluster is (VB empties the spare piece of a one-group cluster). The cluster rests,
its split neither tracked nor pending, until its mass has changed by ``RESEED_CHANGE`` or a move changed it."""

RESEEDS = 3
"""A split that lost and whose gain stopped rising gets new sub-clusters from the lap's sample (a new 2-means, a
new cut to refine), this many times while the cluster is unchanged; then the cluster rests. Memoized EM of two
sub-clusters stops at the first local optimum of its cut: on image patches most clusters' cuts settled tens to
hundreds of nats below 0 while runs from 50 clusters found more of them worth keeping. Retried sub-clusters do
not keep a settled run going (``pending``)."""

RESEED_CHANGE = 0.1
"""The change of a resting cluster's mass, as a fraction, after which it gets new sub-clusters."""

RESTING = "resting"
"""A resting cluster's entry in a batch's plan (``SubclusterPlan.subs``)."""

BATCH_KINDS = {cls.__name__: cls for cls in (PointBatch, WordCountBatch)}


@dataclass(frozen=True, eq=False)
class AtomSample:
    """Atoms of a batch and their weights (n, J): a cluster's r_nk (J = 1) or its sub-clusters' r_nk s_n (J = 2)."""

    atoms: object
    weights: np.ndarray

    def to_tree(self) -> dict:
        fields = {f.name: encode(getattr(self.atoms, f.name)) for f in dataclasses.fields(self.atoms)
                  if getattr(self.atoms, f.name) is not None}  # a batch without weights (or Xprev) keeps None
        return {"kind": type(self.atoms).__name__, "atoms": fields, "weights": self.weights}

    @classmethod
    def from_tree(cls, tree: dict) -> "AtomSample":
        kind = BATCH_KINDS[str(tree["kind"])]
        hints = typing.get_type_hints(kind)
        atoms = kind(**{name: decode(hints[name], value) for name, value in tree["atoms"].items()})
        return cls(atoms, np.asarray(tree["weights"]))


def pooled(samples: list[AtomSample]) -> AtomSample:
    """One sample of several batches' samples (in batch order)."""
    atoms = type(samples[0].atoms).concat([s.atoms for s in samples])
    return AtomSample(atoms, np.concatenate([s.weights for s in samples]))


def draw(batch, r: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Rows of at most ``size`` atoms drawn at random among those with r_n > ``SEEDING.eps``, in batch order."""
    rows = np.flatnonzero(r > SEEDING.eps)
    return rows if rows.size <= size else np.sort(rng.choice(rows, size=size, replace=False))


@dataclass(eq=False)
class Subclusters:
    """One cluster's two sub-clusters: the summaries they were seeded with (``seed``: (N, fields) of a sample),
    their whole-data summaries (``total``) and the part each batch gave (``parts``), the batches whose part was
    made since the cluster last changed (``current``; the split is valid, and judged, once it holds every
    batch), and the split's gain at its last judgement and its rise since the one before."""

    seed: tuple[np.ndarray, dict]
    total: SuffStats | None = None
    parts: dict[int, SuffStats] = field(default_factory=dict)
    current: set[int] = field(default_factory=set)
    gain: float | None = None
    rise: float | None = None

    def take(self, b: int, part: SuffStats) -> None:
        """Batch b's new part (the memo identity total = total − part[b] + new)."""
        old = self.parts.get(b)
        self.total = part if self.total is None else self.total + part if old is None else self.total - old + part
        self.parts[b] = part
        self.current.add(b)

    def posterior_stats(self, model, n_batches: int) -> tuple[np.ndarray, dict]:
        """(N, fields) that the next transfer scores with: the whole-data summaries once every batch gave a part,
        the seed until then."""
        if len(self.parts) < n_batches:
            return self.seed
        return np.maximum(self.total.N, 0.0), self.total.select(model.obs_fields)

    def collapsed(self) -> bool:
        N = np.maximum(self.seed[0] if self.total is None else self.total.N, 0.0)
        return float(N.min()) <= COLLAPSED * max(float(N.sum()), 1e-300)


def seeded(model, sample: AtomSample, column: int, rng: np.random.Generator) -> Subclusters | None:
    """New sub-clusters from the atoms of ``sample`` at the weights of its ``column`` (None: they cannot be made)."""
    seed = seed_birth(model, sample.atoms, np.ascontiguousarray(sample.weights[:, column]), SEEDING, rng, max_new=2)
    return None if seed is None else Subclusters(seed)


@dataclass(frozen=True, eq=False)
class SubclusterPlan:
    """What a batch tracks: per cluster (by position), its sub-clusters' (N, fields), None where it has none yet,
    or ``RESTING`` (nothing: its sample would not be used); how many atoms of each cluster the batch samples;
    the seed of the sampling."""

    subs: list
    sample_size: int
    seed: int


class SplitMove(Move):
    """Sub-cluster splits for memoized VI (module docstring): tracked every batch, judged at every lap's end."""

    name = "split"
    requires = SubclusterSplits
    saved = {"subs": dict[int, Subclusters], "resting": dict[int, float], "tries": dict[int, int],
             "samples": dict[int, dict[int, AtomSample]], "seed": int}
    uses_batch_stats = True  # a cluster's own summaries spare its sub-clusters a pass over its faint atoms

    def __init__(self, cfg):
        super().__init__(cfg)
        self.subs: dict[int, Subclusters] = {}  # by cluster id
        self.resting: dict[int, float] = {}  # cluster id -> its mass when its sub-clusters collapsed
        self.tries: dict[int, int] = {}  # cluster id -> new sub-clusters it got since it last changed (RESEEDS)
        self.reset()

    def reset(self) -> None:
        self.seed = 0
        self.samples: dict[int, dict[int, AtomSample]] = {}  # this lap's, by cluster id and batch

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        """Draw the lap's seed; clusters whose sub-clusters collapsed rest (``COLLAPSED``). Tracks every cluster,
        takes none from the other moves."""
        self.seed = int(rng.integers(2**63 - 1))
        N = dict(zip(run.ids.uids.tolist(), run.globals.stats.N.tolist()))
        for uid in [uid for uid, s in self.subs.items() if s.collapsed()]:
            del self.subs[uid]
            self.resting[uid] = float(N[uid])
        self.resting = {uid: n for uid, n in self.resting.items()
                        if uid in N and abs(N[uid] - n) <= RESEED_CHANGE * max(n, 1e-300)}
        self.tries = {uid: n for uid, n in self.tries.items() if uid in self.subs or uid in self.resting}
        return set()

    def batch_plan(self, run, b: int) -> SubclusterPlan:
        subs = [RESTING if int(uid) in self.resting else None if (s := self.subs.get(int(uid))) is None
                else s.posterior_stats(run.model, run.n_batches) for uid in run.ids.uids]
        return SubclusterPlan(subs, -(-SAMPLE_ATOMS // run.n_batches), self.seed + b)

    def track(self, model, globals_, batch, log_lik, local, plan: SubclusterPlan, stats=None) -> list:
        """Per cluster: its sub-clusters' summaries over the batch (None where it has none), and a sample of its
        atoms weighted by r_nk s_n (by r_nk where it has no sub-clusters); None for a resting cluster."""
        rng = np.random.default_rng(plan.seed)
        tracked = []
        for k, sub in enumerate(plan.subs):
            if isinstance(sub, str):  # RESTING (a plan may have been pickled: compared by type)
                tracked.append(None)
                continue
            r = local.resp.column(k)
            rows = draw(batch, r, plan.sample_size, rng)
            atoms = batch.take(rows)
            if sub is None:
                tracked.append((None, AtomSample(atoms, r[rows].reshape(-1, 1))))
                continue
            part, proposal = transfer(model, batch, r, *sub, _held(stats, k))
            scored = np.flatnonzero(r > FAINT_MASS)  # the proposal's first rows, in batch order
            weights = proposal.resp.values[np.searchsorted(scored, rows)]
            tracked.append((part, AtomSample(atoms, weights)))
        return tracked

    def collect(self, run, schedule, b: int, tracked) -> None:
        """Each cluster's sub-clusters take batch b's part, and its sample joins the lap's."""
        for uid, made in zip(run.ids.uids, tracked):
            if made is None:  # resting
                continue
            part, sample = made
            uid = int(uid)
            subs = self.subs.get(uid)
            if part is not None and subs is not None:
                subs.take(b, part)
            self.samples.setdefault(uid, {})[b] = sample

    def before_edit(self, run, edit) -> None:
        """Carry the sub-clusters through a change of the cluster set (``edit``, before it is applied): a
        cluster kept and unchanged keeps them; one whose summaries change keeps them as the start of its
        next ones, no longer valid until every batch has been visited again; a cluster merged from two
        takes the two as its sub-clusters, valid at once; a new cluster has none. This lap's samples of a
        changed cluster no longer describe it and are dropped."""
        uids = run.ids.uids
        kept = {}
        for sources in edit.sources:
            if len(sources) == 1:
                uid = int(uids[sources[0]])
                if uid in self.subs:
                    kept[uid] = self.subs[uid]
                    if uid in edit.changed:
                        kept[uid].current = set()
            elif len(sources) == 2 and all(cache is not None for cache in run.caches):
                a, c = sources
                parts = {b: cache.pad_to(run.globals.K).remap([[a], [c]]) for b, cache in enumerate(run.caches)}
                total = ordered_sum(parts[b] for b in sorted(parts))
                kept[int(uids[a])] = Subclusters((total.N, total.select(run.model.obs_fields)), total, parts,
                                                 set(parts))
        self.subs = kept
        self.samples = {uid: v for uid, v in self.samples.items() if uid not in edit.changed}
        kept_ids = {int(uids[s[0]]) for s in edit.sources if len(s) == 1} - set(edit.changed)
        self.resting = {uid: n for uid, n in self.resting.items() if uid in kept_ids}
        self.tries = {uid: n for uid, n in self.tries.items() if uid in kept_ids}

    def pending(self, run) -> bool:
        """Whether a split may still be accepted at the next lap: a cluster's sub-clusters are not valid or not
        judged yet, or its split's gain is rising at a pace that would make it win within ``HORIZON`` laps."""
        if not self.active(run.lap + 1) or run.globals.K >= int(self.cfg.Kmax):
            return False
        for uid, s in self.subs.items():
            if uid in self.tries and (s.gain is None or s.rise is None):
                continue
            if len(s.current) < run.n_batches or s.gain is None or s.rise is None:
                return True
            if s.rise > 0 and -s.gain < HORIZON * s.rise:
                return True
        return False

    def decide(self, run, schedule) -> None:
        """Judge the split of every cluster whose sub-clusters are valid, largest first, each against the
        state the earlier acceptances left (``level_value``: only the two pieces' data terms are computed;
        an acceptance is confirmed by the candidate's own global step). The children of an accepted split,
        and the clusters without sub-clusters, get them from this lap's samples; a lost split whose gain
        stopped rising is retried with new ones (``RESEEDS``)."""
        if not self.active(schedule.lap):
            return
        rng = np.random.default_rng(self.seed)
        order = [int(u) for u in run.ids.uids[np.argsort(-run.globals.stats.N, kind="stable")]]
        for uid in order:
            subs = self.subs.get(uid)
            if subs is None:
                if uid not in self.resting and (sample := self._lap_sample(run, uid)) is not None:
                    self._seed(run, uid, sample, 0, rng)
                continue
            if len(subs.current) < run.n_batches or uid in schedule.changed or subs.collapsed():
                continue
            if run.globals.K >= int(self.cfg.Kmax):
                continue
            sample = self._lap_sample(run, uid)  # before the edit drops the samples of the clusters it changes
            if self._judge(run, schedule, uid, subs):
                if sample is not None:
                    for j, child in enumerate(run.ids.uids[-2:]):
                        self._seed(run, int(child), sample, j, rng)
            elif subs.rise is not None and subs.rise <= 0 and sample is not None:
                self._retry(run, uid, sample, rng)
        self.samples = {}

    def _retry(self, run, uid: int, sample: AtomSample, rng: np.random.Generator) -> None:
        """Cluster ``uid``'s split lost and stopped rising: new sub-clusters from ``sample`` (``RESEEDS``), or rest."""
        tries = self.tries.get(uid, 0)
        del self.subs[uid]
        if tries >= RESEEDS:
            self.resting[uid] = float(run.globals.stats.N[int(run.ids.positions([uid])[0])])
            return
        self.tries[uid] = tries + 1
        self._seed(run, uid, sample, 0, rng)

    def _seed(self, run, uid: int, sample: AtomSample, column: int, rng: np.random.Generator) -> None:
        """New sub-clusters of cluster ``uid`` from ``sample`` at the weights of its ``column``; where they cannot
        be made (the 2-means of a one-group cluster leaves one piece empty), the cluster rests."""
        made = seeded(run.model, sample, column, rng)
        if made is not None:
            self.subs[uid] = made
        else:
            self.resting[uid] = float(run.globals.stats.N[int(run.ids.positions([uid])[0])])

    def _lap_sample(self, run, uid: int) -> AtomSample | None:
        """This lap's sample of cluster ``uid`` from every batch (None unless every batch gave one)."""
        parts = self.samples.get(uid, {})
        return pooled([parts[b] for b in sorted(parts)]) if len(parts) == run.n_batches else None

    def _judge(self, run, schedule, uid: int, subs: Subclusters) -> bool:
        """Judge the split of cluster ``uid`` into its sub-clusters; returns whether it was accepted."""
        stats, current = run.globals.stats, run.elbo()
        target = int(run.ids.positions([uid])[0])
        fresh = subs.total
        sources = [[k] for k in range(stats.K)] + [[], []]
        gain = level_value(run, target, fresh, sources) - current
        verdict = judge(run, schedule, Proposal(
            self.name, str(uid), sources, lambda b, cache, parts=subs.parts: split(cache, target, parts[b]),
            stats=lambda: split(stats, target, fresh), screened_gain=gain, changes={uid}, fresh=2, kept=2), current)
        if verdict.accepted:
            self.subs.pop(uid, None)
            return True
        subs.rise = None if subs.gain is None else gain - subs.gain
        subs.gain = gain
        return False
