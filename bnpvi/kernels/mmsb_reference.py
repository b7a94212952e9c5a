"""NumPy reference of the aMMSB pair kernel (:mod:`bnpvi.kernels.mmsb`), for tests: every pair's joint
q(s_ij, r_ij) is enumerated over all K × K labels (Stephenson 2015 Eq. 11, 27):

    η_ijℓm ∝ exp(E ln π_iℓ + E ln π_jm) · (f_k(x_ij) if ℓ = m = k else f_ε(x_ij)),

normalised by Z_ij, and its marginals, diagonal and entropy −Σ η ln η are summed directly.
O(K²) per pair: small graphs only.
"""
from __future__ import annotations

import numpy as np


def pair_step_reference(P, E_log_phi, E_log_1mphi, epsilon, batch) -> dict:
    """U, S, E, log_z as :func:`bnpvi.kernels.mmsb.pair_step`, plus ``entropy`` = Σ_pairs −Σ_ℓm η ln η,
    ``Z`` (one per pair, in the order visited) and ``eta_diag`` (pairs, K)."""
    P = np.asarray(P, dtype=np.float64)
    N, K = P.shape
    log_f = np.vstack([E_log_1mphi, E_log_phi])
    log_eps = np.log([1.0 - epsilon, epsilon])
    U, S, E = np.zeros((N, K)), np.zeros((2, K)), np.zeros(2)
    log_z, entropy, Zs, diags = 0.0, 0.0, [], []
    for s in range(batch.n_src):
        i = batch.first + s
        edges = set(batch.indices[batch.indptr[s]:batch.indptr[s + 1]].tolist())
        held = set(batch.held_indices[batch.held_indptr[s]:batch.held_indptr[s + 1]].tolist())
        for j in range(N):
            if j == i or j in held:
                continue
            x = int(j in edges)
            log_eta = P[i][:, None] + P[j][None, :] + log_eps[x]
            log_eta[np.arange(K), np.arange(K)] += log_f[x] - log_eps[x]
            Z = np.sum(np.exp(log_eta))
            eta = np.exp(log_eta) / Z
            U[i] += eta.sum(axis=1)
            U[j] += eta.sum(axis=0)
            S[x] += np.diag(eta)
            E[x] += 1.0 - np.trace(eta)
            log_z += np.log(Z)
            positive = eta > 0
            entropy -= float(np.sum(eta[positive] * (log_eta[positive] - np.log(Z))))
            Zs.append(Z)
            diags.append(np.diag(eta))
    return {"U": U, "S": S, "E": E, "log_z": log_z, "entropy": entropy, "Z": np.array(Zs),
            "eta_diag": np.array(diags).reshape(-1, K)}
