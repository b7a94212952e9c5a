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

import numpy as np

from bnpvi.moves.base import Edit, Move, accepts, ordered_sum
from bnpvi.moves.history import FailureLog
from bnpvi.obs.bregman import hard_summaries, kmeans, kmeanspp_seeds
from bnpvi.stats import SuffStats


def birth_scores(log_lik: np.ndarray, resp) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster batch mass N_bk and b-score Σ_n r_nk E log p(x_n|φ_k) / N_bk (thesis Eq. 4.24)."""
    mass = resp.counts()
    fit = resp.column_sums(log_lik)
    return mass, np.where(mass > 0, fit / np.maximum(mass, 1e-300), np.inf)


def fresh_weights(N: np.ndarray) -> np.ndarray:
    """ln π̃_j = ln((Ñ_j + 1/J)/(Σ Ñ + 1)), the weights of a proposal's fresh clusters (§4.2.1)."""
    return np.log((N + 1.0 / N.shape[0]) / (N.sum() + 1.0))


def transfer_stats(model, batch, r_target: np.ndarray, N: np.ndarray, fields: dict) -> SuffStats:
    """Summaries of r'_{n,j} = r_{n,t} p̃_nj over a batch, for fresh clusters with summaries (N, fields)."""
    rows = np.flatnonzero(r_target > 0)
    atoms = batch.take(rows)
    post = model.obs.posterior(N, fields)
    proposal = model.alloc.restricted_local_step(r_target[rows], model.obs.expected_log_lik(post, atoms),
                                                 fresh_weights(N))
    return model.summarize(atoms, proposal)


def seed_birth(model, batch, r_target: np.ndarray, cfg, rng: np.random.Generator, max_new: int):
    """Summaries (N, fields) of J' ≤ min(n_new, max_new) fresh clusters from the target's atoms in ``batch``.

    Returns None when the target's data cannot seed at least two clusters.
    """
    subset = np.flatnonzero(r_target > cfg.eps)
    if subset.size > cfg.max_atoms:
        subset = np.sort(rng.choice(subset, size=cfg.max_atoms, replace=False))
    J = min(int(cfg.n_new), subset.size // 2, int(max_new))
    if J < 2:
        return None
    obs = model.obs
    sample = batch.take(subset)
    seeds = kmeanspp_seeds(obs, sample, J, rng)
    N, fields = hard_summaries(obs, sample.take(seeds), np.arange(J), J)
    N, fields = kmeans(obs, sample, N, fields, cfg.kmeans_iters)
    for _ in range(int(cfg.refine_iters)):
        keep = N > 1e-8
        if keep.sum() < 2:
            return None
        rows = transfer_stats(model, batch, r_target, N[keep], {n: v[keep] for n, v in fields.items()})
        N, fields = rows.N, rows.select(model.obs_fields)
    keep = N > 1e-8
    if keep.sum() < 2:
        return None
    return N[keep], {n: v[keep] for n, v in fields.items()}


def split(stats: SuffStats, target: int, new: SuffStats) -> SuffStats:
    """``stats`` with cluster ``target`` emptied and the clusters of ``new`` appended (all the target's mass moved)."""
    K = stats.K
    emptied = stats.remap([[k] if k != target else [] for k in range(K)] + [[] for _ in range(new.K)])
    return emptied.with_clusters(np.arange(K, K + new.K), new)


class BirthMove(Move):
    """Births for memoized VI: seeded in the lap's first batch, tracked every batch, judged at lap end."""

    name = "birth"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.failures = FailureLog()
        self.reset()

    def reset(self) -> None:
        self.eligible = np.zeros(0, dtype=np.int64)  # ids that may be targeted this lap
        self.seed = 0  # of the k-means++ generator used at the first batch
        self.seeded = False
        self.target_uids = np.zeros(0, dtype=np.int64)
        self.seeds: list[tuple[np.ndarray, dict]] = []
        self.tracked: dict[int, list[SuffStats]] = {}

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        """Eligible targets: clusters no other move uses and whose last rejected birth is not
        blocking them (§4.2.4); the seed of this lap's k-means++."""
        stats, uids, cfg = run.globals.stats, run.ids.uids, self.cfg
        if cfg.Kmax - stats.K < 2:
            return set()
        eligible = [int(u) for k, u in enumerate(uids)
                    if int(u) not in excluded
                    and not self.failures.blocked(u, (float(stats.N[k]),), 1, cfg.retry_change)]
        self.eligible = np.array(eligible, dtype=np.int64)
        self.seed = int(rng.integers(2**63 - 1))
        return set()

    def batch_plan(self, run, b: int):
        if not self.seeded:
            if not self.eligible.size or run.pos != 0:
                return None
            return {"eligible": run.ids.positions(self.eligible), "seed": self.seed,
                    "room": self.cfg.Kmax - run.globals.K}
        if not self.target_uids.size:
            return None
        return {"targets": run.ids.positions(self.target_uids), "seeds": self.seeds}

    def track(self, model, globals_, batch, log_lik, local, plan):
        resp = local.resp
        out = {}
        if "eligible" in plan:
            plan = dict(plan, **self._seed(model, batch, log_lik, resp, plan))
            out.update(targets=plan["targets"], seeds=plan["seeds"], failed=plan["failed"])
        out["stats"] = [transfer_stats(model, batch, resp.column(int(t)), N, fields)
                        for t, (N, fields) in zip(plan["targets"], plan["seeds"])]
        return out

    def _seed(self, model, batch, log_lik, resp, plan) -> dict:
        """At the lap's first batch: seed births on the worst-fit eligible clusters (§4.2.4)."""
        cfg = self.cfg
        rng = np.random.default_rng(plan["seed"])
        mass, score = birth_scores(log_lik, resp)
        eligible = set(int(k) for k in plan["eligible"])
        room = plan["room"]
        targets, seeds, failed = [], [], []
        for k in np.argsort(score, kind="stable"):
            k = int(k)
            if len(targets) >= cfg.max_per_lap or room < 2:
                break
            if k not in eligible or mass[k] < cfg.min_batch_mass:
                continue
            seed = seed_birth(model, batch, resp.column(k), cfg, rng, max_new=room)
            if seed is None:
                failed.append(k)
                continue
            targets.append(k)
            seeds.append(seed)
            room -= seed[0].shape[0]
        return {"targets": np.array(targets, dtype=np.intp), "seeds": seeds, "failed": np.array(failed, dtype=np.intp)}

    def collect(self, run, schedule, b: int, tracked) -> None:
        if "targets" in tracked:
            self.seeded = True
            self.target_uids = run.ids.uids[tracked["targets"]]
            self.seeds = tracked["seeds"]
            for k in tracked["failed"]:
                uid = int(run.ids.uids[k])
                self.failures.record(uid, False, (float(run.globals.stats.N[k]),))
                schedule.event(self.name, str(uid), np.nan, False)
        self.tracked[b] = tracked["stats"]

    def decide(self, run, schedule) -> None:
        if not self.target_uids.size:
            return
        self.check_complete(run, self.tracked, "birth proposal")
        for i, uid in enumerate(self.target_uids):
            target = int(run.ids.positions([uid])[0])
            total = ordered_sum(self.tracked[b][i] for b in sorted(self.tracked))
            stats = run.globals.stats
            candidate = split(stats, target, total)
            sources = [[k] for k in range(stats.K)] + [[] for _ in range(total.K)]
            current = run.elbo()
            value, globals_ = run.evaluate(candidate, sources)
            gain = value - current
            accepted = accepts(gain, current)
            if accepted:
                run.apply(Edit(sources, lambda b, cache, t=target, i=i: split(cache, t, self.tracked[b][i]), globals_))
            self.failures.record(uid, accepted, (float(stats.N[target]),))
            schedule.event(self.name, str(int(uid)), gain, accepted)

    def state(self) -> dict:
        return {"failures": self.failures.state(), "eligible": self.eligible, "seed": np.int64(self.seed),
                "seeded": np.int64(self.seeded), "target_uids": self.target_uids,
                "seeds": {str(i): {"N": N, "fields": dict(f)} for i, (N, f) in enumerate(self.seeds)},
                "tracked": {str(b): {str(i): s.to_tree() for i, s in enumerate(v)} for b, v in self.tracked.items()}}

    def load_state(self, state: dict) -> None:
        self.failures.load_state(state["failures"])
        self.eligible = np.asarray(state["eligible"], dtype=np.int64).reshape(-1)
        self.seed = int(state["seed"])
        self.seeded = bool(int(state["seeded"]))
        self.target_uids = np.asarray(state["target_uids"], dtype=np.int64).reshape(-1)
        seeds = state.get("seeds", {})
        self.seeds = [(np.asarray(seeds[str(i)]["N"]), {n: np.asarray(v) for n, v in seeds[str(i)]["fields"].items()})
                      for i in range(len(seeds))]
        self.tracked = {int(b): [SuffStats.from_tree(v[str(i)]) for i in range(len(v))]
                        for b, v in state.get("tracked", {}).items()}
