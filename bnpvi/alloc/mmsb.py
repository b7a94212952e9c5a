"""The assortative mixed-membership stochastic blockmodel, finite and HDP (Stephenson 2015 §3-5; Gopalan et al. 2012).

Data: x_ij ∈ {0, 1} for every ordered pair of nodes i ≠ j (``GraphBatch``; held-out pairs left out).
Each node has memberships π_i; each ordered pair draws a sender label s_ij ~ Cat(π_i) and a receiver
label r_ij ~ Cat(π_j); x_ij ~ Bern(φ_k) if s_ij = r_ij = k, else Bern(ε) with ε fixed (Eq. 2). The
community strengths q(φ_k) = Beta(τ_k1, τ_k0) are the observation family ``obs=link``; its atoms
are the two values of an edge, weighted by S_xk = Σ_{x_ij = x} η_ijkk.

Memberships: the HDP version has π_i ~ Dir(αβ_1, ..., αβ_K, αβ_{>K}) around top-level sticks
u_k ~ Beta(1, γ) (``bnpvi.alloc.hdp_top``; Eq. 4-8); the finite one π_i ~ Dir(α/K, ..., α/K).
Mean field (§5.1, §5.3): q(π_i) = Dir(θ_i) for every node (global parameters here: their number
grows with N, §6.1), and a joint q(s_ij, r_ij) per pair whose optimum (Eq. 27, App. C Eq. 49-50)
is the compiled pair kernel ``bnpvi.kernels.mmsb``. Summaries, additive over batches of source
nodes (§6.2; Eq. 28 with the receiver index corrected):

    U_iℓ = Σ_{j≠i} E[s_ij = ℓ] + Σ_{j≠i} E[r_ji = ℓ]      (field ``U``, stored (K, N)),
    N_k = Σ_pairs η_ijkk,  E_1, E_0 = Σ_{pairs, x = 1 / 0} (1 − Σ_k η_ijkk),
    H = −Σ_pairs Σ_ℓm η_ijℓm ln η_ijℓm,

the entropy computed in each batch's local step under that step's globals (App. C Eq. 52-56 with
the sign of Eq. 52 corrected: the source's "H" is the negative entropy):

    H_b = Σ ln Z_ij − Σ_iℓ U_iℓ E ln π_iℓ − Σ_k (S_1k E ln φ_k + S_0k E ln(1 − φ_k)) − E_1 ln ε − E_0 ln(1 − ε).

ELBO (Eq. 15-20): the family's Σ_k [c_B(λ) − c_B(τ_k)] (at the optimal τ), the background pairs
E_1 ln ε + E_0 ln(1 − ε), H, and the membership terms Σ_i {c_Dir(prior_i) − c_Dir(θ_i)
+ Σ_ℓ (U_iℓ + prior_iℓ − θ_iℓ) E ln π_iℓ}; for the HDP the prior's normaliser is replaced by the
top-level surrogate (Hughes 2016 thesis Eq. 5.23-5.25 with D → N, as Stephenson 2015 App. B says):
N K ln α + f(ρ, ω) with c_m = N for every m, and T_ℓ = α Σ_i E ln π_iℓ.

Global step (Eq. 14, App. B): θ_iℓ = U_iℓ + α β̂_ℓ (ℓ ≤ K), θ_i,K+1 = α β̂_{K+1}; (ρ, ω) and θ in turn,
ending with θ, warm-started from the previous sticks.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from bnpvi.alloc import hdp_top
from bnpvi.alloc.base import AllocModel, Local, Params
from bnpvi.data.batch import PointBatch
from bnpvi.errors import BnpviError, check_int, check_number
from bnpvi.kernels.blas import blas_single_thread
from bnpvi.kernels.mmsb import expected_log_memberships, pair_step
from bnpvi.special import c_dir
from bnpvi.stats import PER_CLUSTER, TOTAL, Responsibilities, SuffStats

EDGE_VALUES = PointBatch(np.array([[0.0], [1.0]]))
"""The atoms the community-strength family sees: an edge's two values (module docstring)."""

EDIT_ROUNDS = 3
"""Alternations of (ρ, ω) and θ after the cluster set changed (one otherwise), as for the HDP-HMM."""

TOP_EVERY = 10
"""Warm-started global steps at the same communities optimise q(u) once in this many (the others update θ
alone, itself an exact coordinate step, so the ELBO still never drops): the top level sums over all N nodes
and barely moves between two batches, while its digammas and Newton steps cost as much as a small batch's pairs."""

INIT_SHAPE, INIT_SCALE = 5.0, 2.0
"""θ_iℓ ~ Gamma(5, scale 2) at the start (Stephenson 2015 §7.2 "Gamma(5, 2)"; the scale reading is ours)."""


def weighted_log(counts: np.ndarray, log_values: np.ndarray) -> np.ndarray:
    """counts · log_values elementwise, with 0 · (−∞) taken as 0 (the improper λ̄₀ = 0 prior)."""
    with np.errstate(invalid="ignore"):
        return np.where(counts == 0.0, 0.0, counts * log_values)


def adjacency_clusters(graph, K: int, rng: np.random.Generator, n_iters: int) -> np.ndarray:
    """Spherical k-means of the rows of the adjacency matrix (cosine of the neighbour sets): k-means++ seeds,
    then ``n_iters`` Lloyd steps; the cluster of every node (N,). Nodes without an edge go to cluster 0."""
    import scipy.sparse as sp

    N = graph.n_nodes
    A = sp.csr_matrix((np.ones(graph.indices.shape[0]), graph.indices, graph.indptr), shape=(N, N))
    norms = np.sqrt(np.diff(graph.indptr).astype(np.float64))
    A = sp.diags(1.0 / np.maximum(norms, 1.0)) @ A
    candidates = np.flatnonzero(norms > 0)
    if candidates.size == 0:
        return np.zeros(N, dtype=np.intp)
    seeds = [int(rng.choice(candidates))]
    best = np.asarray((A @ A[seeds[0]].T).todense()).ravel()
    for _ in range(1, K):
        far = np.maximum(1.0 - best, 0.0) ** 2
        far[norms == 0] = 0.0
        pick = int(rng.choice(N, p=far / far.sum())) if far.sum() > 0 else int(rng.choice(candidates))
        seeds.append(pick)
        best = np.maximum(best, np.asarray((A @ A[pick].T).todense()).ravel())
    centers = np.asarray(A[seeds].todense())
    for _ in range(n_iters + 1):
        clusters = np.argmax(np.asarray(A @ centers.T), axis=1)
        centers = np.asarray((sp.csr_matrix((np.ones(N), (clusters, np.arange(N))), shape=(K, N)) @ A).todense())
        centers /= np.maximum(np.linalg.norm(centers, axis=1, keepdims=True), 1e-300)
    return clusters


class MMSBAlloc(AllocModel):
    """What the finite and the HDP aMMSB share: the pair local step, the summaries, the entropy, decoding.

    Parameters
    ----------
    alpha : float
        α > 0, concentration of each node's memberships.
    epsilon : float
        ε in (0, 1), the fixed probability of an edge between different communities.
    """

    data_kinds = ("graph",)
    full_first_pass = True  # a batch's source nodes see every node, but U_i of the others only in part
    moves = ("merge", "delete")
    whole_delete = True
    whole_totals = True  # a candidate's batch summaries are dense over all nodes: running sums (bnpvi.moves.whole)
    merge_kind = "whole"  # merging a and b turns their cross pairs into community pairs (bnpvi.moves.whole_merge)
    merges_per_lap = 5  # each tracked pair costs one more local step per batch
    deletes_per_lap = 2
    merge_refine_laps = 5
    abundant_K = 20  # Stephenson 2015 §7.2 starts from K = 20; merges and deletes remove the extra communities
    n_nodes: int = 0

    def __init__(self, alpha: float = 1.0, epsilon: float = 1e-5):
        self.alpha = check_number(alpha, "model.alpha")
        self.epsilon = check_number(epsilon, "model.epsilon")
        if self.epsilon >= 1.0:
            raise BnpviError(f"model.epsilon must be below 1, got {epsilon!r}")

    def adapt(self, kind: str, D: int) -> int:
        """Take the number of nodes from a graph file (its D); the community family has one dimension."""
        self.n_nodes = int(D)
        return 1

    def layout(self):
        return {"N": ((), PER_CLUSTER), "U": ((self.n_nodes,), PER_CLUSTER), "E1": ((), TOTAL), "E0": ((), TOTAL),
                "entropy": ((), TOTAL), "n_pairs": ((), TOTAL)}

    # ------------------------------------------------------------ local step
    def atoms(self, batch):
        return EDGE_VALUES

    def expected_log_lik(self, obs, post, batch):
        """(2, K): E ln(1 − φ_k) (row 0) and E ln φ_k (row 1), whatever the batch."""
        return obs.expected_log_lik(post, EDGE_VALUES)

    def membership_logs(self, params: Params) -> np.ndarray:
        """P (N, K), read-only: E ln π_iℓ of the K active communities (normalised over all entries of θ_i).

        Kept for the last θ seen (θ is never changed in place; every global step makes a new one), so that a
        batch's local step and the local steps of the move candidates tracked in it compute it once."""
        theta = params["theta"]
        kept = getattr(self, "_logs", None)
        if kept is None or kept[0] is not theta:
            P = expected_log_memberships(theta, theta.shape[1] - self.extra_entries)
            P.setflags(write=False)
            kept = self._logs = (theta, P)
        return kept[1]

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_logs", None)  # a cache, not state: never pickled to workers or checkpoints
        return state

    def local_step(self, batch, log_lik: np.ndarray, params: Params) -> Local:
        """The optimal q(s_ij, r_ij) of every pair of the batch, summed (module docstring)."""
        return self._pairs(batch, log_lik, self.membership_logs(params))

    def local_step_without(self, batch, log_lik: np.ndarray, params: Params, target: int,
                           local: Local | None = None) -> Local:
        """The local step with community ``target`` removed (its memberships and strength dropped): the optimal
        q over the other K − 1 communities for every pair, so a delete's candidate is exact for the whole graph."""
        keep = np.delete(np.arange(log_lik.shape[1]), target)
        return self._pairs(batch, log_lik[:, keep], self.membership_logs(params)[:, keep])

    def local_step_merged(self, batch, log_lik: np.ndarray, params: Params, a: int, b: int,
                          merged: np.ndarray) -> Local:
        """The local step with communities a and b merged (at a; b dropped): memberships π̃_ia + π̃_ib and the
        strength log-likelihoods ``merged`` (2, 1) of their merged posterior. A valid q for every pair, whose
        entropy is computed with the weights it was made from."""
        keep = np.delete(np.arange(log_lik.shape[1]), b)
        P = self.membership_logs(params).copy()
        P[:, a] = np.logaddexp(P[:, a], P[:, b])
        table = np.array(log_lik, dtype=np.float64)
        table[:, a] = merged[:, 0]
        return self._pairs(batch, table[:, keep], P[:, keep])

    def merge_ranking(self, params: Params, pairs: np.ndarray, store) -> np.ndarray:
        """How much two communities behave as one, one value per pair (a, b): with M = E[Π]ᵀ A E[Π] (K × K,
        the edges between the communities' members, A the training adjacency matrix),
        (M_ab + M_ba) / (2 √(M_aa M_bb)). Halves of one true community are densely linked to each other."""
        M, _ = self._community_links(params, store)
        a, b = pairs[:, 0], pairs[:, 1]
        return (M[a, b] + M[b, a]) / (2.0 * np.sqrt(np.maximum(M[a, a] * M[b, b], 1e-300)))

    def merged_log_liks(self, model, globals_, pairs: np.ndarray, store) -> np.ndarray:
        """(P, 2, 1): the strength log-likelihoods (E ln(1 − φ), E ln φ) that a merge candidate of each pair
        (a, b) gives its merged community in every batch's local step (``local_step_merged``).

        They are those of q(φ) after the global step the merge will lead to, estimated: the posterior of the
        two communities' summaries plus the pairs between their members, which the merge brings inside one
        community. With π = E[π] and M = E[Π]ᵀ A E[Π], those are n_ab = Σ_{i≠j} (π_ia π_jb + π_ib π_ja)
        = 2 (n_a n_b − Σ_i π_ia π_ib) ordered pairs (n_a = Σ_i π_ia), M_ab + M_ba of them edges (held-out
        pairs counted among the non-edges). The summed summaries alone describe two dense blocks, and their
        strength, near 1 for the halves of one community, would push the cross non-edges back to the
        background. Any table gives a valid q of every pair, so the candidate's gain stays exact.
        """
        M, pi = self._community_links(globals_.alloc, store)
        a, b = pairs[:, 0], pairs[:, 1]
        n = pi.sum(axis=0)
        between = 2.0 * (n[a] * n[b] - np.einsum("ip,ip->p", pi[:, a], pi[:, b]))
        edges = np.minimum(M[a, b] + M[b, a], between)
        stats = globals_.stats
        obs_stats = stats.select(model.obs_fields)
        tables = []
        for p in range(pairs.shape[0]):
            weights = np.array([[between[p] - edges[p]], [edges[p]]])  # the atoms x = 0 and x = 1
            cross = model.obs.summarize(EDGE_VALUES, Responsibilities(weights, 1))
            N = np.maximum(stats.N[[a[p]]] + stats.N[[b[p]]], 0.0) + between[p]
            fields = {name: v[[a[p]]] + v[[b[p]]] + cross[name] for name, v in obs_stats.items()}
            tables.append(self.expected_log_lik(model.obs, model.obs.posterior(N, fields), EDGE_VALUES))
        return np.stack(tables) if tables else np.zeros((0, 2, 1))

    def _community_links(self, params: Params, store) -> tuple[np.ndarray, np.ndarray]:
        """(M, π): M = E[Π]ᵀ A E[Π] (K × K) for the training adjacency matrix A, and π = E[Π] (N, K)."""
        import scipy.sparse as sp

        graph = store.read_all()
        N = graph.n_nodes
        A = sp.csr_matrix((np.ones(graph.indices.shape[0]), graph.indices, graph.indptr), shape=(N, N))
        pi = self.memberships(params)
        return pi.T @ (A @ pi), pi

    def _pairs(self, batch, log_lik: np.ndarray, P: np.ndarray) -> Local:
        """The pair kernel for memberships P (N, K') and strengths ``log_lik`` (2, K'), with the entropy."""
        sums = pair_step(P, log_lik[1], log_lik[0], self.epsilon, batch)
        background = sums.E[1] * np.log(self.epsilon) + sums.E[0] * np.log1p(-self.epsilon)
        inside = weighted_log(sums.S, log_lik).sum()
        entropy = sums.log_z - float(np.sum(sums.U * P)) - float(inside) - background
        tables = {"U": sums.U, "E": sums.E, "entropy": entropy, "n_pairs": float(batch.n_pairs)}
        return Local(Responsibilities(sums.S, P.shape[1]), tables)

    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        t = local.tables
        return {"N": local.resp.values.sum(axis=0), "U": t["U"].T, "E1": t["E"][1], "E0": t["E"][0],
                "entropy": t["entropy"], "n_pairs": t["n_pairs"]}

    def initial_stats(self, model, store, cfg, rng: np.random.Generator, K: int) -> SuffStats:
        """Summaries whose global step gives the initial memberships, with q(φ) = prior (Stephenson 2015 §7.2).

        ``init=random``: the source's start, θ_iℓ ≈ Gamma(5, scale 2) draws (U_iℓ drawn so, nothing else).
        ``init=kmeanspp`` (the default): the same draws plus 2 deg_i on the community of node i found by
        spherical k-means of the adjacency rows (k-means++ seeds, ``init.kmeans_iters`` Lloyd steps, null: 10),
        as if each of the node's edges had been put inside it in both directions (:func:`adjacency_clusters`).
        """
        if K < 1:
            raise BnpviError(f"init.K must be at least 1, got {K}")
        if K > self.n_nodes:
            raise BnpviError(f"init.K={K} exceeds the {self.n_nodes} nodes of the graph")
        U = rng.gamma(INIT_SHAPE, INIT_SCALE, size=(K, self.n_nodes))
        name = cfg.get("name")
        if name == "kmeanspp":
            iters = cfg.get("kmeans_iters")
            graph = store.read_all()
            clusters = adjacency_clusters(graph, K, rng, 10 if iters is None else int(iters))
            U[clusters, np.arange(self.n_nodes)] += 2.0 * np.diff(graph.indptr)
        elif name != "random":
            raise BnpviError(f"init={name} does not apply to model={self.name}; choose kmeanspp or random")
        return model.empty_stats(K).with_fields(U=U)

    # ------------------------------------------------------------------ ELBO
    def background(self, stats: SuffStats) -> float:
        """E_1 ln ε + E_0 ln(1 − ε): the pairs between different communities."""
        return float(stats["E1"]) * np.log(self.epsilon) + float(stats["E0"]) * np.log1p(-self.epsilon)

    def elbo(self, stats: SuffStats, params: Params) -> float:
        """Membership terms (``membership_terms``), the background pairs and the entropy H."""
        return self.membership_terms(np.maximum(stats["U"], 0.0).T, params) + self.background(stats) \
            + float(stats["entropy"])

    def decode(self, batch, log_lik: np.ndarray, params: Params) -> np.ndarray:
        """The main community argmax_k θ_ik of every source node of the batch."""
        theta = params["theta"][batch.first:batch.first + batch.n_src]
        return np.argmax(theta[:, :theta.shape[1] - self.extra_entries], axis=1)

    def memberships(self, params: Params) -> np.ndarray:
        """E[π_i] (N, K) over the active communities (the HDP's mass beyond K left out)."""
        theta = params["theta"]
        return (theta / theta.sum(axis=1, keepdims=True))[:, :theta.shape[1] - self.extra_entries]

    # ------------------------------------------------------------- subclass
    extra_entries = 0
    """Entries of θ_i beyond the K active communities (1 for the HDP's remainder)."""

    def membership_terms(self, U: np.ndarray, params: Params) -> float:
        """Σ_i {E ln p(π_i) − E ln q(π_i)} + E ln p(s, r | π) for usage U (N, K), exact for any parameters."""
        raise NotImplementedError


class FiniteMMSBAlloc(MMSBAlloc):
    """The finite aMMSB, π_i ~ Dir(α/K, ..., α/K); name "finite_mmsb"."""

    name = "finite_mmsb"
    finite = True

    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """θ_i = U_i + α/K."""
        return {"theta": np.maximum(stats["U"], 0.0).T + self.alpha / stats.K}

    def membership_terms(self, U: np.ndarray, params: Params) -> float:
        theta = params["theta"]
        prior = np.full(theta.shape[1], self.alpha / theta.shape[1])
        P = expected_log_memberships(theta)
        return float(np.sum(c_dir(prior) - c_dir(theta)) + np.sum((U + prior - theta) * P))

    def export(self, params: Params) -> dict[str, np.ndarray]:
        return {"memberships": self.memberships(params)}


class HDPMMSBAlloc(MMSBAlloc):
    """The HDP aMMSB (module docstring); name "hdp_mmsb".

    Parameters
    ----------
    gamma : float
        γ > 0, concentration of the top-level sticks.
    alpha, epsilon : as :class:`MMSBAlloc`.
    moves_start_lap : int
        No merge or delete before this lap: from their random start the memberships stay diffuse for
        tens of laps, and merging vague communities then always pays, which collapsed K below the truth.
    """

    name = "hdp_mmsb"
    sort_needs_check = True
    extra_entries = 1

    def __init__(self, gamma: float = 10.0, alpha: float = 1.0, epsilon: float = 1e-5, moves_start_lap: int = 60):
        super().__init__(alpha, epsilon)
        self.gamma = check_number(gamma, "model.gamma")
        self.moves_start_lap = check_int(moves_start_lap, "model.moves_start_lap", 1)

    def _theta(self, U: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """θ_i = (U_i, 0) + α β̂ (N, K+1)."""
        prior = self.alpha * hdp_top.stick_means(rho)
        theta = np.empty((U.shape[0], prior.shape[0]))
        np.add(U, prior[:-1], out=theta[:, :-1])
        theta[:, -1] = prior[-1]
        return theta

    def _weights(self, K: int) -> np.ndarray:
        """c (K+1,): every node's surrogate bound holds every E ln β_m once."""
        return np.full(K + 1, float(self.n_nodes))

    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """θ, then (ρ, ω) and θ in turn (module docstring), warm-started from ``warm`` when it fits."""
        K = stats.K
        rounds, since = 1, 0
        if warm is not None and "rho" in warm and np.shape(warm["rho"]) == (K,):
            rho, omega = np.asarray(warm["rho"], dtype=np.float64), np.asarray(warm["omega"], dtype=np.float64)
            if "edited" in warm:
                rounds = EDIT_ROUNDS
            elif int(warm.get("top_age", TOP_EVERY)) + 1 < TOP_EVERY:
                rounds, since = 0, int(warm["top_age"]) + 1
        else:
            rho, omega = hdp_top.uniform_sticks(K, self.gamma)
            rounds = EDIT_ROUNDS
        U = np.maximum(stats["U"], 0.0).T
        theta = self._theta(U, rho)
        c = self._weights(K)
        with blas_single_thread():
            for _ in range(rounds):
                T = self.alpha * expected_log_memberships(theta).sum(axis=0)
                new_rho, omega = hdp_top.optimize(c, T, self.gamma, rho, omega)
                moved = float(np.max(np.abs(new_rho - rho)))
                rho = new_rho
                theta = self._theta(U, rho)
                if moved < 1e-8:
                    break
        return {"rho": rho, "omega": omega, "theta": theta, "top_age": np.int64(since)}

    def warm_start(self, params: Params, sources: Sequence[Sequence[int]]) -> dict:
        """Sticks for an edited community set (``hdp_top.edited_sticks``)."""
        return hdp_top.edited_sticks(params, sources, self.gamma)

    def membership_terms(self, U: np.ndarray, params: Params) -> float:
        theta = params["theta"]
        K = theta.shape[1] - 1
        P = expected_log_memberships(theta)
        rows = float(np.sum(-c_dir(theta)) + np.sum((np.hstack([U, np.zeros((U.shape[0], 1))]) - theta) * P))
        top = hdp_top.surrogate(params["rho"], params["omega"], self._weights(K), self.alpha * P.sum(axis=0),
                                self.gamma)
        return rows + self.n_nodes * K * np.log(self.alpha) + top

    def export(self, params: Params) -> dict[str, np.ndarray]:
        return {"top_probs": hdp_top.stick_means(params["rho"]), "memberships": self.memberships(params)}
