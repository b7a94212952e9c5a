"""Reassign proposals: move single atoms to the cluster that explains them best once they are taken
out of their own cluster. Our own move for mixtures; not in the thesis.

Why: an atom's own data inflate its cluster's parameters. A short document's rare words
are the clearest case: under λ̄ = 0.1 a word seen once, in this document only, has
E ln μ_kv near ψ(1.1) in its own cluster and near ψ(0.1) ≈ −10.4 in every other one. The
local step (Hughes 2016 thesis Eq. 3.47-3.49) scores the atom against parameters that
contain it, so an atom left in the wrong cluster by a birth stays there at every lap.

The move scores each atom against the other clusters' parameters *without* it. With the
globals at their optimum for the summaries (as in every memoized state), the whole-data
ELBO is a function of the summaries alone (thesis Eq. 3.24, 3.42, 3.44),

    L(S) = Σ_k L_data,k*(S_k) + L_alloc*(N) + Σ_k H_k,

so replacing atom n's responsibilities r_n by a one-hot on cluster j changes it by

    ΔL_nj = Σ_k [L_data,k*(S_k − r_nk s(x_n) + δ_jk s(x_n)) − L_data,k*(S_k)]
            + L_alloc*(N − r_n + e_j) − L_alloc*(N) + Σ_k r_nk ln r_nk,

exactly. For the multinomial family the data part is the collapsed (Pólya urn) predictive
log probability of the document under cluster j minus its leave-one-out value under its own
clusters; for the full-covariance Gaussian it follows from rank-one changes of each cluster's
scale matrix (``ObsFamily.reassign_gains``). In 48 dimensions a cluster of about 100 points
holds one wrong point as firmly as a document's rare words hold it.

* **track** (every batch of a lap that follows a lap in which no other move changed the
  clusters, as long as the move has not been tried since the clusters last changed or its
  latest try moved atoms: while births, merges and deletes are busy, their changes would
  void the proposal at the lap's end anyway, and a try that moved nothing is not repeated
  on the same clusters): ΔL_nj for every atom of the batch and every cluster,
  under the summaries of that moment, with E ln π_j − Σ_k r_nk E ln π_k in place of the
  exact allocation term; the atoms whose best j (other than their largest r_nk) gains
  more than 0 are kept, at most ``max_atoms`` per batch, with their data and r_n;
* **decide** (end of the lap, after the other moves, only if none of them changed the
  clusters): the kept atoms, best first, are moved one at a time while their exact ΔL_nj,
  re-computed on the summaries that include every earlier move, is positive (a greedy
  ascent on L). The candidate (every memo cache plus its atoms' changes) is judged by the
  exact whole-data ELBO like any move and logged in ``moves.csv`` with the number of atoms
  it moved.

A run does not converge while the move has not been tried since the clusters last
changed, or right after a lap in which it moved atoms.

Weighted points (``PointBatch.weights``): only atoms of weight 1 are tried, whose gains above are exact;
the candidate's summaries and its judgement are weighted like every summary.
"""
from __future__ import annotations

from dataclasses import fields as dataclass_fields

import numpy as np
from scipy.special import xlogy

from bnpvi.alloc.base import Local
from bnpvi.data.batch import PointBatch, SeqBatch, WordCountBatch, atom_weights
from bnpvi.moves.base import Move, accepts, ordered_sum
from bnpvi.moves.judge import Proposal, judge
from bnpvi.moves.protocols import Reassigns
from bnpvi.stats import Responsibilities, SuffStats

BATCH_TYPES = {cls.__name__: cls for cls in (PointBatch, SeqBatch, WordCountBatch)}


class Candidates(dict):
    """A batch's atoms worth trying (``ReassignMove.track``): ``rows``, ``gain``, ``resp`` and the ``atoms``."""

    def to_tree(self) -> dict:
        atoms = self["atoms"]
        return {"rows": self["rows"], "gain": self["gain"], "resp": self["resp"], "kind": type(atoms).__name__,
                "atoms": {f.name: np.asarray(getattr(atoms, f.name)) for f in dataclass_fields(atoms)
                          if getattr(atoms, f.name) is not None}}  # unset optional fields (a SeqBatch's Xprev)

    @classmethod
    def from_tree(cls, tree: dict) -> "Candidates":
        kind = BATCH_TYPES[str(tree["kind"])]
        values = {f.name: tree["atoms"][f.name] for f in dataclass_fields(kind) if f.name in tree["atoms"]}
        atoms = kind(**{k: (v.item() if np.ndim(v) == 0 else v) for k, v in values.items()})
        return cls(rows=np.asarray(tree["rows"], dtype=np.intp), gain=np.asarray(tree["gain"]),
                   resp=np.asarray(tree["resp"]), atoms=atoms)
"""Kinds of tracked atoms, by name (checkpoints store the name and the dataclass fields)."""


def supported(model) -> bool:
    """Whether the move can run: a mixture whose family computes single-atom gains (the runner leaves the
    move out otherwise)."""
    return "reassign" in model.alloc.moves and model.obs.has_reassign_gains


def dense(resp: Responsibilities) -> np.ndarray:
    """The (N, K) responsibilities as a dense array (from dense or L-sparse storage)."""
    matrix = resp.matrix()
    return np.asarray(matrix.toarray() if hasattr(matrix, "toarray") else matrix, dtype=np.float64)


def entropy_term(R: np.ndarray) -> np.ndarray:
    """Σ_k r_nk ln r_nk per row (0 ln 0 = 0): the entropy change of making row n one-hot."""
    return xlogy(R, R).sum(axis=1)


def exact_gains(model, N: np.ndarray, fields: dict, atom, r: np.ndarray) -> np.ndarray:
    """(K,) exact ΔL_nj of one atom (module docstring) under the whole-data counts ``N`` and the family's
    summaries ``fields``."""
    K = N.shape[0]
    N = np.maximum(N, 0.0)
    data = model.obs.reassign_gains(N, fields, atom, r[None, :])[0]
    moved = np.maximum(N - r, 0.0)[None, :] + np.eye(K)
    alloc = model.alloc.log_marginal(moved) - model.alloc.log_marginal(N)
    return data + alloc + entropy_term(r[None, :])[0]


def batch_change(model, tracked: dict, moved: list[tuple[int, int]]) -> SuffStats:
    """The summaries of a batch's moved atoms (``moved``: (tracked atom, new cluster)) with one-hots on their
    new clusters, minus their summaries with their tracked responsibilities: the change of that batch's
    memo cache."""
    picks = np.array([i for i, _ in moved], dtype=np.intp)
    atoms, R = tracked["atoms"].take(picks), np.ascontiguousarray(tracked["resp"][picks])
    K = R.shape[1]
    onehot = Responsibilities.one_hot(np.array([j for _, j in moved], dtype=np.int64), K)
    return model.summarize(atoms, Local(onehot)) - model.summarize(atoms, Local(Responsibilities(R, K)))


def greedy_moves(model, stats: SuffStats, tracked: dict) -> tuple[list, dict]:
    """The tracked atoms, best screened gain first, each moved to its best other cluster while its exact
    ΔL_nj on the summaries updated by every earlier move is positive (module docstring). Those running
    summaries are a copy of N and the family's summaries that each move updates in place
    (``ObsFamily.add_weighted``).

    Returns the moves as (batch, atom of the batch, new cluster) and, per batch with moves, the change of
    its summaries (:func:`batch_change`).
    """
    items = [(float(t["gain"][i]), b, i) for b, t in sorted(tracked.items()) for i in range(len(t["rows"]))]
    items.sort(key=lambda item: -item[0])  # stable: ties keep batch, then screening order
    N = np.array(stats.N, dtype=np.float64)
    fields = {name: np.array(v, dtype=np.float64) for name, v in stats.select(model.obs_fields).items()}
    moves, moved = [], {}
    for _, b, i in items:
        t = tracked[b]
        atom, r = t["atoms"].take([i]), t["resp"][i]
        gains = exact_gains(model, N, fields, atom, r)
        gains[int(np.argmax(r))] = -np.inf
        j = int(np.argmax(gains))
        if not accepts(float(gains[j]), 0.0):
            continue
        change = -r
        change[j] += 1.0
        model.obs.add_weighted(fields, atom, change[None, :])
        N += change
        moved.setdefault(b, []).append((i, j))
        moves.append((b, int(t["rows"][i]), j))
    return moves, {b: batch_change(model, tracked[b], pairs) for b, pairs in moved.items()}


class ReassignMove(Move):
    """Greedy single-atom reassignments judged by the exact whole-data ELBO (module docstring)."""

    name = "reassign"
    saved = {"accepted_last": bool, "quiet": bool, "tried": bool, "uids": np.ndarray | None,
             "tracked": dict[int, Candidates]}
    requires = Reassigns

    def __init__(self, cfg):
        super().__init__(cfg)
        self.accepted_last = False  # the latest decision moved atoms
        self.quiet = True  # no other move changed the clusters at the end of the latest lap
        self.tried = False  # tried since the clusters last changed
        self.reset()

    def reset(self) -> None:
        self.uids: np.ndarray | None = None  # cluster ids when the lap was planned
        self.tracked: dict[int, dict] = {}
        self.moved: list[tuple[int, int, int]] = []  # (batch, atom of the batch, new cluster) of the latest try

    def plan(self, run, rng, excluded: set[int]) -> set[int]:
        due = not self.tried or self.accepted_last  # a try that moved nothing waits for the clusters to change
        self.uids = run.ids.uids.copy() if self.quiet and due else None
        return set()  # it takes no cluster from the other moves; it waits for them at the lap's end

    def pending(self, run) -> bool:
        """Not tried since the clusters last changed, or atoms moved at the latest try (module docstring)."""
        return (self.accepted_last or not self.tried) and self.active(run.lap + 1)

    def batch_plan(self, run, b: int):
        return None if self.uids is None else int(self.cfg.max_atoms)

    def track(self, model, globals_, batch, log_lik, local, plan):
        """The batch's atoms worth trying (positions, data, r_n), best screened gain first."""
        R = dense(local.resp)
        stats = globals_.stats
        data = model.obs.reassign_gains(np.maximum(stats.N, 0.0), stats.select(model.obs_fields), batch, R)
        log_pi = model.alloc.expected_log_pi(globals_.alloc)
        gains = data + (log_pi[None, :] - (R @ log_pi)[:, None]) + entropy_term(R)[:, None]
        gains[np.arange(R.shape[0]), np.argmax(R, axis=1)] = -np.inf  # a move goes to another cluster
        best = gains.max(axis=1)
        weights = atom_weights(batch)
        if weights is not None:  # the single-atom gains are those of an atom of weight 1: others are not tried
            best[weights != 1.0] = -np.inf
        rows = np.flatnonzero(best > 0)
        rows = rows[np.argsort(-best[rows], kind="stable")][:plan]
        return {"rows": rows, "gain": best[rows], "resp": R[rows], "atoms": batch.take(rows)}

    def collect(self, run, schedule, b: int, tracked) -> None:
        self.tracked[b] = Candidates(tracked)

    def decide(self, run, schedule) -> None:
        self.quiet = not schedule.changed
        if schedule.changed:
            self.tried = self.accepted_last = False
        if self.uids is None or schedule.changed or not np.array_equal(run.ids.uids, self.uids):
            return  # not tracked, or another move changed the clusters: the tracked r_n no longer fit the caches
        self.tried, self.accepted_last = True, False
        self.check_complete(run, self.tracked, "reassign candidates")
        self.moved, delta = greedy_moves(run.model, run.globals.stats, self.tracked)
        moved = len(self.moved)
        if moved == 0:
            return
        candidate = run.globals.stats + ordered_sum(delta[b] for b in sorted(delta))
        sources = [[k] for k in range(candidate.K)]
        self.accepted_last = judge(run, schedule, Proposal(
            self.name, f"{moved} atoms", sources, lambda b, cache: cache + delta[b] if b in delta else cache,
            stats=candidate, changes=set(run.ids.uids.tolist())), run.elbo()).accepted
