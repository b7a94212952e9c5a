"""MoveSchedule: one lap of memoized VI with births, merges and deletes (spec 01 §8).

    lap start   plan merge pairs (m-score) and one delete (target + absorbing set)
    1st batch   after its local step: seed births on the worst-fit other clusters
    each batch  after the local step: merged-pair entropies, delete and birth
                proposal summaries
    lap end     merges (greedy, disjoint, exact), the delete, the births; per-batch
                caches rewritten; clusters that are empty in every cache dropped

Every decision compares the exact whole-data ELBO of two valid states, so the ELBO
at the end of each lap never decreases. Plans are keyed by stable cluster ids.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from bnpvi.errors import BnpviError
from bnpvi.moves.birth import birth_scores, seed_birth, split_rows, transfer_stats
from bnpvi.moves.delete import delete_proposal_stats, plan_delete, with_rows
from bnpvi.moves.history import FailureLog
from bnpvi.moves.merge import merge_gain, plan_merges
from bnpvi.stats import SuffStats

MOVES = ("birth", "merge", "delete")
ACCEPT_RTOL = 1e-10  # a move must raise L by more than this fraction of |L| (float noise guard)


@dataclass
class MoveEvent:
    """One proposal: which lap, which move, which cluster ids, exact ELBO gain, accepted or not."""

    lap: int
    move: str
    target: str
    gain: float
    accepted: bool


def _active(cfg, lap: int) -> bool:
    if cfg is None or lap < cfg.start_lap:
        return False
    return getattr(cfg, "stop_lap", None) is None or lap <= cfg.stop_lap


class MoveSchedule:
    """Plans, tracks and applies the moves named in the ``moves`` config node."""

    def __init__(self, cfg, rng: np.random.Generator):
        self.cfg = {name: cfg.get(name) for name in MOVES}
        self.rng = rng
        self.failures = {name: FailureLog() for name in MOVES}
        self.events: list[MoveEvent] = []
        self._reset_lap(0)

    def _reset_lap(self, lap: int) -> None:
        self.lap = lap
        self.counts = {f"{m}_{w}": 0 for m in MOVES for w in ("tried", "accepted")}
        self.pair_uids = np.zeros((0, 2), dtype=np.int64)
        self.pair_entropy: dict[int, np.ndarray] = {}
        self.delete_uids: np.ndarray | None = None  # [target, absorbing...]
        self.delete_stats: dict[int, SuffStats] = {}
        self.excluded: set[int] = set()  # ids in merge pairs / delete sets
        self.birth_uids = np.zeros(0, dtype=np.int64)  # targets of this lap's births
        self.birth_seeds: list[SuffStats] = []
        self.birth_stats: dict[int, list[SuffStats]] = {}

    def _event(self, move, target, gain, accepted) -> None:
        self.counts[f"{move}_tried"] += 1
        self.counts[f"{move}_accepted"] += int(accepted)
        self.events.append(MoveEvent(self.lap, move, target, float(gain), bool(accepted)))

    @staticmethod
    def _tolerance(model, stats) -> float:
        return ACCEPT_RTOL * max(1.0, abs(model.elbo(stats)))

    # ------------------------------------------------------------- lap start
    def start_lap(self, alg) -> None:
        self._reset_lap(alg.lap + 1)
        if alg.lap == 0:  # nothing summarised yet
            return
        model, stats, uids = alg.model, alg.aggregate, alg.model.uids
        excluded: set[int] = set()
        if _active(self.cfg["merge"], self.lap):
            pairs = plan_merges(model, stats, self.cfg["merge"], excluded, self.failures["merge"], uids)
            self.pair_uids = uids[pairs] if pairs.size else np.zeros((0, 2), dtype=np.int64)
            excluded |= set(pairs.ravel().tolist())
        if _active(self.cfg["delete"], self.lap):
            plan = plan_delete(model, stats, self.cfg["delete"], excluded, self.failures["delete"], uids)
            if plan is not None:
                target, absorb = plan
                self.delete_uids = uids[np.concatenate([[target], absorb])]
                excluded |= {target, *absorb.tolist()}
        self.excluded = {int(uids[k]) for k in excluded}

    # ---------------------------------------------------------- every batch
    def track(self, alg, b: int, batch, log_lik, log_pi, resp) -> None:
        """After batch b's local step: merged-pair entropies and delete / birth proposal summaries."""
        model = alg.model
        if alg.pos == 0:
            self._seed_births(alg, batch, log_lik, resp)
        if self.pair_uids.shape[0]:
            pairs = model.positions(self.pair_uids.ravel()).reshape(-1, 2).astype(np.int64)
            self.pair_entropy[b] = resp.pair_entropy(pairs)
        if self.delete_uids is not None:
            pos = model.positions(self.delete_uids)
            self.delete_stats[b] = delete_proposal_stats(model, batch, log_lik, log_pi, resp, pos[0], pos[1:])
        if self.birth_uids.size:
            dense = resp.to_dense()
            targets = model.positions(self.birth_uids)
            self.birth_stats[b] = [transfer_stats(model, batch, dense[:, t], seed)
                                   for t, seed in zip(targets, self.birth_seeds)]

    def _seed_births(self, alg, batch, log_lik, resp) -> None:
        """At the lap's first batch: seed births on the worst-fit eligible clusters (§6.4)."""
        cfg = self.cfg["birth"]
        if not _active(cfg, self.lap):
            return
        model = alg.model
        mass, score = birth_scores(log_lik, resp)
        room = cfg.Kmax - model.K
        targets, seeds = [], []
        for k in np.argsort(score, kind="stable"):
            uid = int(model.uids[k])
            if len(targets) >= cfg.max_per_lap or room < 2:
                break
            if uid in self.excluded or mass[k] < cfg.min_batch_mass:
                continue
            size = float(alg.aggregate.N[k]) if alg.lap > 0 else float(mass[k])
            if self.failures["birth"].blocked(uid, (size,), 1, cfg.retry_change):
                continue
            seed = seed_birth(model, batch, resp, int(k), cfg, self.rng, max_new=room)
            if seed is None:
                self.failures["birth"].record(uid, False, (size,))
                self._event("birth", str(uid), np.nan, False)
                continue
            targets.append(uid)
            seeds.append(seed)
            room -= seed.K
        self.birth_uids = np.array(targets, dtype=np.int64)
        self.birth_seeds = seeds
        self.excluded |= set(targets)

    # -------------------------------------------------------------- lap end
    def end_lap(self, alg) -> None:
        if self.pair_uids.shape[0]:
            self._merges(alg)
        if self.delete_uids is not None:
            self._delete(alg)
        if self.birth_uids.size:
            self._births(alg)
        self._drop_empty(alg)

    def _check_complete(self, alg, tracked: dict, what: str) -> None:
        if len(tracked) != alg.n_batches:
            raise BnpviError(f"internal error: {what} tracked in {len(tracked)} of {alg.n_batches} batches")

    def _merges(self, alg) -> None:
        self._check_complete(alg, self.pair_entropy, "merge pairs")
        model = alg.model
        total = _sum(self.pair_entropy[b] for b in sorted(self.pair_entropy))
        gains = []
        for m, (ua, ub) in enumerate(self.pair_uids):
            a, b = model.positions([ua, ub])
            gains.append(merge_gain(model, alg.aggregate, a, b, total[m]))
        merged: set[int] = set()
        for m in np.argsort(-np.asarray(gains), kind="stable"):
            ua, ub = (int(u) for u in self.pair_uids[m])
            if ua in merged or ub in merged:
                continue  # its entropy was computed from columns that no longer exist
            a, b = model.positions([ua, ub])
            gain = merge_gain(model, alg.aggregate, a, b, total[m])  # alloc term changes after each merge
            sizes = (alg.aggregate.N[a], alg.aggregate.N[b])
            accepted = gain > self._tolerance(model, alg.aggregate)
            if accepted:
                K = alg.aggregate.K
                stats = alg.aggregate.merge_rows(a, b, total[m])
                alg.caches = [None if c is None else c.pad_to(K).merge_rows(a, b, self.pair_entropy[i][m])
                              for i, c in enumerate(alg.caches)]
                alg.aggregate = stats
                model.replace(stats, np.delete(model.uids, b))
                merged |= {ua, ub}
            self.failures["merge"].record((ua, ub), accepted, sizes)
            self._event("merge", f"{ua}+{ub}", gain, accepted)

    def _delete(self, alg) -> None:
        self._check_complete(alg, self.delete_stats, "delete proposal")
        model = alg.model
        pos = model.positions(self.delete_uids)
        target, absorb = int(pos[0]), pos[1:]
        total = _sum(self.delete_stats[b] for b in sorted(self.delete_stats))
        candidate = with_rows(alg.aggregate, absorb, total, target)
        gain = model.elbo(candidate) - model.elbo(alg.aggregate)
        size = float(alg.aggregate.N[target])
        accepted = gain > self._tolerance(model, alg.aggregate)
        if accepted:
            K = alg.aggregate.K
            alg.caches = [None if c is None else with_rows(c.pad_to(K), absorb, self.delete_stats[i], target)
                          for i, c in enumerate(alg.caches)]
            alg.aggregate = candidate
            model.replace(candidate, np.delete(model.uids, target))
        self.failures["delete"].record(self.delete_uids[0], accepted, (size,))
        self._event("delete", str(int(self.delete_uids[0])), gain, accepted)

    def _births(self, alg) -> None:
        self._check_complete(alg, self.birth_stats, "birth proposal")
        model = alg.model
        for i, uid in enumerate(self.birth_uids):
            target = int(model.positions([uid])[0])
            total = _sum(self.birth_stats[b][i] for b in sorted(self.birth_stats))
            candidate = split_rows(alg.aggregate, target, total)
            gain = model.elbo(candidate) - model.elbo(alg.aggregate)
            size = float(alg.aggregate.N[target])
            accepted = gain > self._tolerance(model, alg.aggregate)
            if accepted:
                K = alg.aggregate.K
                alg.caches = [None if c is None else split_rows(c.pad_to(K), target, self.birth_stats[b][i])
                              for b, c in enumerate(alg.caches)]
                alg.aggregate = candidate
                model.replace(candidate, np.concatenate([model.uids, model.new_uids(total.K)]))
            self.failures["birth"].record(uid, accepted, (size,))
            self._event("birth", str(int(uid)), gain, accepted)

    @staticmethod
    def _drop_empty(alg) -> None:
        """Remove clusters with exactly zero mass in every batch (exact gain ln(1 + N^>/γ) ≥ 0, §3.6)."""
        K = alg.aggregate.K
        caches = [c.pad_to(K) for c in alg.caches if c is not None]
        if len(caches) != alg.n_batches:
            return
        empty = np.flatnonzero(np.all([c.N == 0 for c in caches], axis=0))
        if empty.size == 0 or empty.size == K:
            return
        alg.caches = [c.remove_rows(empty) for c in caches]
        alg.aggregate = alg.aggregate.remove_rows(empty)
        alg.model.replace(alg.aggregate, np.delete(alg.model.uids, empty))

    # -------------------------------------------------------------- state
    def state(self) -> dict:
        events = {f: np.array([getattr(e, f) for e in self.events]) for f in ("lap", "gain", "accepted")}
        events["move"] = "\n".join(e.move for e in self.events)
        events["target"] = "\n".join(e.target for e in self.events)
        state = {"lap": self.lap, "counts": {k: v for k, v in self.counts.items()},
                 "pair_uids": self.pair_uids,
                 "pair_entropy": {str(b): v for b, v in self.pair_entropy.items()},
                 "excluded": np.array(sorted(self.excluded), dtype=np.int64),
                 "birth_uids": self.birth_uids,
                 "birth_seeds": {str(i): seed.to_tree() for i, seed in enumerate(self.birth_seeds)},
                 "birth_stats": {str(b): {str(i): st.to_tree() for i, st in enumerate(v)}
                                 for b, v in self.birth_stats.items()},
                 "failures": {name: log.state() for name, log in self.failures.items()},
                 "events": events, "n_events": len(self.events),
                 "delete_stats": {str(b): s.to_tree() for b, s in self.delete_stats.items()}}
        if self.delete_uids is not None:
            state["delete_uids"] = self.delete_uids
        return state

    def load_state(self, state: dict) -> None:
        self._reset_lap(int(state["lap"]))
        self.counts = {k: int(v) for k, v in state["counts"].items()}
        self.pair_uids = np.asarray(state["pair_uids"], dtype=np.int64).reshape(-1, 2)
        self.pair_entropy = {int(b): np.asarray(v) for b, v in state.get("pair_entropy", {}).items()}
        self.excluded = set(np.asarray(state["excluded"]).tolist())
        self.birth_uids = np.asarray(state["birth_uids"], dtype=np.int64).reshape(-1)
        seeds = state.get("birth_seeds", {})
        self.birth_seeds = [SuffStats.from_tree(seeds[str(i)]) for i in range(self.birth_uids.size)]
        self.birth_stats = {int(b): [SuffStats.from_tree(v[str(i)]) for i in range(self.birth_uids.size)]
                            for b, v in state.get("birth_stats", {}).items()}
        for name, log in self.failures.items():
            log.load_state(state["failures"][name])
        self.delete_uids = np.asarray(state["delete_uids"], dtype=np.int64) if "delete_uids" in state else None
        self.delete_stats = {int(b): SuffStats.from_tree(t) for b, t in state.get("delete_stats", {}).items()}
        ev, n = state["events"], int(state["n_events"])
        moves = ev["move"].split("\n") if n else []
        targets = ev["target"].split("\n") if n else []
        self.events = [MoveEvent(int(ev["lap"][i]), moves[i], targets[i], float(ev["gain"][i]), bool(ev["accepted"][i]))
                       for i in range(n)]

    def event_rows(self, start: int = 0) -> list[dict]:
        return [asdict(e) for e in self.events[start:]]


def _sum(items):
    """Sum in the given order (batch order), so a resumed run adds in the same order."""
    items = list(items)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total
