"""Delete proposals (spec 01 §7): remove cluster t, re-dividing the mass of A ∪ {t} among A.

r'_{n,A_j} = (r_nt + Σ_{ℓ∈A} r_nℓ) · p̃_nj with p̃_n = softmax_j(E log p(x_n|φ_{A_j}) + E ln π_{A_j})
(Eq. 4.25-4.27 with E ln π, the exact local-step optimum restricted to A). The
proposal's summaries for A are collected in every batch of the lap (§7.3).
"""
from __future__ import annotations

import numpy as np

from bnpvi import kernels
from bnpvi.moves.merge import merge_scores
from bnpvi.stats import SuffStats
from bnpvi.stats.resp import Responsibilities


def plan_delete(model, stats: SuffStats, cfg, excluded: set, failures, uids):
    """Target t (the smallest eligible non-empty cluster) and its absorbing set A.

    A holds the ``absorb`` clusters that are most alike to t by m-score (the merge
    score of t with each of them), so that births may still use the others.
    Returns (t, A) positions, or None.
    """
    K = stats.K
    N = stats.N
    total = max(float(N.sum()), 1.0)
    candidates = [k for k in np.argsort(N, kind="stable")
                  if k not in excluded and N[k] > 0 and N[k] <= cfg.max_size_frac * total
                  and not failures.blocked(uids[k], (N[k],), cfg.max_fails, cfg.retry_change)]
    others_all = [k for k in range(K) if k not in excluded]
    for t in candidates:
        others = np.array([k for k in others_all if k != t], dtype=np.intp)
        if others.size == 0:
            continue
        pairs = np.stack([np.minimum(others, t), np.maximum(others, t)], axis=1)
        order = np.argsort(-merge_scores(model, stats, pairs), kind="stable")
        return int(t), np.sort(others[order[: cfg.absorb]])
    return None


def delete_proposal_stats(model, batch, log_lik: np.ndarray, log_pi: np.ndarray, resp, target: int,
                          absorb: np.ndarray) -> SuffStats:
    """Summaries over A of one batch's proposal responsibilities (rows of A only)."""
    values = resp.to_dense()
    mass = values[:, target] + values[:, absorb].sum(axis=1)
    weights = np.ascontiguousarray(log_lik[:, absorb])
    share = Responsibilities.from_weights(weights, log_pi[absorb]).values
    r_new = np.ascontiguousarray(mass[:, None] * share)
    fields = {"N": r_new.sum(axis=0), "H": kernels.entropy_of(r_new)}
    fields.update(model.obs.summarize(batch, r_new))
    return SuffStats(fields, {"n_atoms": batch.n_atoms})


def with_rows(stats: SuffStats, rows: np.ndarray, new_rows: SuffStats, drop: int) -> SuffStats:
    """``stats`` with ``rows`` replaced by ``new_rows`` and row ``drop`` removed."""
    out = stats.copy()
    for name, value in out.fields.items():
        value[rows] = new_rows.fields[name]
    return out.remove_rows([drop])
