"""NumPy references of the compiled local-step kernels.

Plain vectorised NumPy with the same formulas as ``csrc/local_step.pyx``, ``csrc/topic_*.pyx`` and
``csrc/hmm.pyx``; the tests compare the compiled kernels against these. No input validation here (that is
the job of the faces :mod:`bnpvi.kernels.mixture`, :mod:`~bnpvi.kernels.topic` and :mod:`~bnpvi.kernels.hmm`);
invalid rows come out with a non-finite ``log_norm`` / entropy instead of raising.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from bnpvi.kernels.features import n_quad_features

__all__ = ["dense_local_step", "doc_topic_step", "entropy_of", "forward_backward", "mult_reassign_gains",
           "pair_merge_entropy", "pair_logdets", "quad_argmax", "quad_features", "sparse_local_step", "viterbi"]


def dense_local_step(log_lik: np.ndarray, log_prior: np.ndarray):
    """Dense local step: softmax responsibilities, log normalisers, entropy summaries.

    With the weights W_nk = log_lik_nk + log_prior_k (Hughes 2016 thesis Eq. 3.47):

    * log_norm_n = logsumexp_k W_nk, computed as m_n + log1p(Σ_{k≠j_n} exp(W_nk − m_n))
      with m_n = max_k W_nk attained first at j_n;
    * resp_nk = exp(W_nk − m_n) · (1 + Σ_{k≠j_n} exp(W_nk − m_n))⁻¹ (Eq. 3.49);
    * entropy_k = Σ_n resp_nk (log_norm_n − W_nk) = −Σ_n r_nk ln r_nk (Eq. 3.51, as
      ln r_nk = W_nk − log_norm_n), evaluated as r_nk (log1p(·) − (W_nk − m_n)) and skipped
      where r_nk = 0, so W_nk = −inf contributes exactly 0.

    Parameters
    ----------
    log_lik : (N, K) ndarray of float64
        E_q log p(x_n | φ_k).
    log_prior : (K,) ndarray of float64
        E_q ln π_k; −inf marks a cluster with zero weight.

    Returns
    -------
    resp : (N, K) ndarray
    log_norm : (N,) ndarray
    entropy : (K,) ndarray
    """
    N, K = log_lik.shape
    rows = np.arange(N)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        W = log_lik + log_prior
        j = np.argmax(W, axis=1) if K else np.zeros(N, dtype=np.intp)
        m = W[rows, j]
        t = W - m[:, None]
        t[rows, j] = 0.0
        e = np.exp(t)
        e[rows, j] = 0.0
        s1 = e.sum(axis=1)
        e[rows, j] = 1.0
        ls = np.log1p(s1)
        log_norm = m + ls
        resp = e * (1.0 / (1.0 + s1))[:, None]
        contrib = np.zeros_like(resp)
        np.multiply(resp, ls[:, None] - t, out=contrib, where=resp > 0.0)
        entropy = contrib.sum(axis=0)
    return resp, log_norm, entropy


def entropy_of(resp: np.ndarray) -> np.ndarray:
    """H_k = −Σ_n r_nk ln r_nk with 0 ln 0 := 0 (Hughes 2016 thesis Eq. 3.51).

    Parameters
    ----------
    resp : (N, K) ndarray of float64
        Non-negative responsibilities of any origin (e.g. a constructed proposal).

    Returns
    -------
    entropy : (K,) ndarray
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        rlogr = np.zeros_like(resp)
        np.multiply(resp, np.log(resp), out=rlogr, where=resp != 0.0)
        return 0.0 - rlogr.sum(axis=0)


def pair_merge_entropy(resp: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Entropy of merged columns: H_m = −Σ_n s_nm ln s_nm, s_nm = r_na + r_nb.

    For pairs[m] = (a, b); the merged-cluster entropy of a merge proposal (Hughes 2016
    thesis §4.1.3; never H_a + H_b, which is only an upper bound), with 0 ln 0 := 0.

    Parameters
    ----------
    resp : (N, K) ndarray of float64
    pairs : (M, 2) ndarray of int64

    Returns
    -------
    entropy : (M,) ndarray
    """
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    s = resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]]
    return entropy_of(s)


def sparse_local_step(log_lik: np.ndarray, log_prior: np.ndarray, L: int):
    """L-sparse local step (Hughes 2016 thesis Eq. 7.4-7.5, Alg. 7.2) by a full stable sort.

    The L largest W_nk = log_lik_nk + log_prior_k of each row, ties to the lower k (the
    first L of a stable sort of −W), and their softmax; the test oracle of the compiled
    selection.

    Returns
    -------
    values : (N, L) ndarray
    indices : (N, L) ndarray of int32
    log_norm : (N,) ndarray
    entropy : (K,) ndarray
    """
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        W = log_lik + log_prior
        indices = np.argsort(-W, axis=1, kind="stable")[:, :L].astype(np.int32)
        t = np.take_along_axis(W, indices, axis=1)
        t = t - t[:, :1]  # the first is the row maximum
        e = np.exp(t)
        ls = np.log1p(e[:, 1:].sum(axis=1))
        log_norm = W.max(axis=1) + ls
        resp = e / (1.0 + e[:, 1:].sum(axis=1))[:, None]
        contrib = np.zeros_like(resp)
        np.multiply(resp, ls[:, None] - t, out=contrib, where=resp > 0.0)
    entropy = np.bincount(indices.ravel(), weights=contrib.ravel(), minlength=W.shape[1])
    return resp, indices, log_norm, entropy


# ------------------------------------------------------------- hidden Markov models
def forward_backward(log_lik: np.ndarray, seq_range: np.ndarray, log_start: np.ndarray,
                     log_trans: np.ndarray, block: int = 64):
    """Scaled forward-backward over every sequence of a batch (HMM local step).

    Hughes 2016 thesis §6.3.3, Eq. 6.24-6.25, 6.48; the scaling is that of Rabiner
    1989 §V.A. Sequence d is rows ``seq_range[d]:seq_range[d+1]`` of C = log_lik;
    a = log_start, W = log_trans (exp(W) is used as is, never renormalised). Per
    sequence, with c_t = max_k C_tk, E_t = exp(C_t − c_t), Π̃ = exp(W) and
    ã = exp(a − max a):

    * forward: f̃_1 = ã ⊙ E_1, f̃_t = (Π̃ᵀ f_{t−1}) ⊙ E_t, n_t = Σ_k f̃_t(k), f_t = f̃_t / n_t;
    * backward: g_T = 1, v_t = E_{t+1} ⊙ g_{t+1} / n_{t+1}, g_t = Π̃ v_t;
    * r_t = f_t ⊙ g_t, s_t(j, k) = f_t(j) Π̃_jk v_t(k) (t < T_d),
      log Z_d = max a + Σ_t (c_t + ln n_t);
    * start_counts = Σ_d r_d1, trans_counts = Σ_{d, t<T_d} s_dt,
      start_entropy = −Σ_d r_d1 ln r_d1 (terms with r ∉ (0, 1) skipped),
      trans_entropy = −Σ_{d,t} s_dt(j,k) ln(s_dt(j,k) / r_dt(j)) with r_dt(j) the row
      sum Σ_k s_dt(j, k) and 0 ln 0 = 0, literally (``csrc/hmm.pyx`` uses an equivalent
      factorised form).

    The pairwise terms are formed ``block`` time steps at a time, never as a
    (T, K, K) array.

    Parameters
    ----------
    log_lik : (T, K) ndarray of float64
    seq_range : (S + 1,) ndarray of int64
    log_start : (K,) ndarray of float64
    log_trans : (K, K) ndarray of float64
    block : int
        Time steps per vectorised pairwise block.

    Returns
    -------
    resp, start_counts, trans_counts, start_entropy, trans_entropy, log_norm
        Shapes (T, K), (K,), (K, K), (K,), (K, K), (S,). A sequence with an invalid
        row or probability 0 gets a non-finite log_norm (and NaN rows) instead of
        an error.
    """
    T, K = log_lik.shape
    S = seq_range.shape[0] - 1
    resp = np.zeros((T, K))
    M0 = np.zeros(K)
    H0 = np.zeros(K)
    M = np.zeros((K, K))
    H = np.zeros((K, K))
    log_norm = np.zeros(S)
    with np.errstate(all="ignore"):
        P = np.exp(log_trans)
        amax = np.max(log_start) if K else -np.inf
        ta = np.exp(log_start - amax) if amax > -np.inf else np.zeros(K)
        shift = amax if amax > -np.inf else 0.0
        for d in range(S):
            t0, t1 = int(seq_range[d]), int(seq_range[d + 1])
            L = t1 - t0
            C = log_lik[t0:t1]
            c = C.max(axis=1)
            E = np.exp(C - c[:, None])
            F = resp[t0:t1]
            n = np.empty(L)
            for t in range(L):
                ft = ta * E[0] if t == 0 else (F[t - 1] @ P) * E[t]
                n[t] = ft.sum()
                F[t] = ft / n[t]
            log_norm[d] = shift + np.sum(c + np.log(n))
            V = np.empty((L - 1, K))
            G = np.empty((L, K))
            G[L - 1] = 1.0
            for t in range(L - 2, -1, -1):
                V[t] = E[t + 1] * G[t + 1] / n[t + 1]
                G[t] = P @ V[t]
            for b in range(0, L - 1, block):
                e = min(b + block, L - 1)
                s = F[b:e, :, None] * P[None] * V[b:e, None, :]
                M += s.sum(axis=0)
                r = s.sum(axis=2, keepdims=True)
                slog = np.zeros_like(s)
                np.multiply(s, np.log(s / r), out=slog, where=s > 0.0)
                H -= slog.sum(axis=0)
            F *= G
            r1 = F[0]
            M0 += r1
            inside = (r1 > 0.0) & (r1 < 1.0)
            H0[inside] -= r1[inside] * np.log(r1[inside])
    return resp, M0, M, H0, H, log_norm


def viterbi(log_lik: np.ndarray, seq_range: np.ndarray, log_start: np.ndarray,
            log_trans: np.ndarray) -> np.ndarray:
    """Most likely state path of every sequence (Viterbi; Rabiner 1989 §III.B).

    δ_1 = a + C_1, δ_t(k) = C_tk + max_j [δ_{t−1}(j) + W_jk], with back-pointers
    (the lowest j wins ties) and δ_t shifted by its maximum after every step, as in
    ``csrc/hmm.pyx``. The path ends at the lowest argmax of δ_T.

    Parameters
    ----------
    log_lik : (T, K) ndarray of float64
    seq_range : (S + 1,) ndarray of int64
    log_start : (K,) ndarray of float64
    log_trans : (K, K) ndarray of float64

    Returns
    -------
    path : (T,) ndarray of int64
    """
    T, K = log_lik.shape
    path = np.zeros(T, dtype=np.int64)
    cols = np.arange(K)
    with np.errstate(invalid="ignore"):
        for d in range(seq_range.shape[0] - 1):
            t0, t1 = int(seq_range[d]), int(seq_range[d + 1])
            L = t1 - t0
            C = log_lik[t0:t1]
            bp = np.zeros((L, K), dtype=np.int64)
            delta = log_start + C[0]
            delta = delta - delta.max()
            for t in range(1, L):
                cand = delta[:, None] + log_trans
                bp[t] = np.argmax(cand, axis=0)
                dn = cand[bp[t], cols] + C[t]
                delta = dn - dn.max()
            z = path[t0:t1]
            z[L - 1] = np.argmax(delta)
            for t in range(L - 1, 0, -1):
                z[t - 1] = bp[t, z[t]]
    return path


# ------------------------------------------------------------------- topic models
def _sparse_doc_topic(C, c, w0, prior, rest, L, eps, max_iters, conv_thr, n_restarts, restart_iters,
                      select_always, stable_mass):
    """The L-sparse local step of one document with rows (see ``doc_topic_step``).

    C (n, K) and c (n,) are the document's rows, w0 (K) its first weights. Returns r (n, K)
    (0 off the rows' supports), N, iterations, L_d and accepted restarts.
    """
    from scipy.special import digamma, gammaln, logsumexp

    n, K = C.shape
    width = min(L, K)

    def reselect(S, w, act):
        """Every row's support S re-selected: the top min(L, |act|) of C_u + w, ties to the lower k."""
        top = np.argsort(-(C + w), axis=1, kind="stable")[:, :min(width, int(act.sum()))]
        S[:] = False
        S[np.arange(n)[:, None], top] = True

    def respond(S, w):
        """r (softmax of C + w on the supports), N and the objective L_d."""
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            W = np.where(S, C + w, -np.inf)
            lz = logsumexp(W, axis=1)
            r = np.exp(W - lz[:, None])
        N = c @ r
        theta = N + prior
        used = N > 0
        Ld = c @ lz - np.sum(N[used] * w[used]) + gammaln(theta).sum() - gammaln(theta.sum() + rest)
        if rest > 0:
            Ld += gammaln(rest)
        return r, N, Ld

    def step(S, N, act, select):
        """One iteration: weights on the active set and the rows; with ``select``, the active set is
        pruned first and every row re-selected. Also returns the mass Σ_u c_u r_uk the rows put on
        the topics k that entered their supports."""
        keep = act & (N > eps)
        if select and eps > 0 and keep.any():
            act = keep
        w = np.full(K, -np.inf)
        w[act] = digamma(N[act] + prior[act])
        w[act] -= w[act].max()
        old = S.copy()
        if select:
            reselect(S, w, act)
        r, N_new, Ld = respond(S, w)
        return r, N_new, Ld, act, c @ np.where(S & ~old, r, 0.0).sum(axis=1)

    S = np.zeros((n, K), dtype=bool)
    reselect(S, w0, np.ones(K, dtype=bool))
    r, N, Ld = respond(S, w0)
    act = S.any(axis=0)
    it = 0
    moved = np.inf
    while it < max_iters:
        it += 1
        select = select_always or it % 10 == 0 or (it <= 5 and moved >= stable_mass * c.sum())
        r, N_new, Ld, act, now = step(S, N, act, select)
        if select:
            moved = now
        diff = np.max(np.abs(N_new - N))
        N = N_new
        if diff < conv_thr:
            break
    accepted = 0
    if n_restarts > 0:
        used = np.flatnonzero(N > 0.1)
        order = used[np.argsort(N[used], kind="stable")]
        for j in order[:min(n_restarts, used.size - 1)]:
            if np.sum(N > 0.1) < 2:
                break
            Sq, Nq, actq = S.copy(), N.copy(), act.copy()
            Nq[j] = 0.0
            for _ in range(restart_iters):
                rq, Nq, Lq, actq, _ = step(Sq, Nq, actq, True)
            if Lq - Ld > 1e-12 * (1.0 + abs(Ld)):
                r, N, Ld, S, act = rq, Nq, Lq, Sq, actq
                accepted += 1
    return r, N, it, Ld, accepted


def doc_topic_step(log_lik: np.ndarray, counts: np.ndarray, doc_range: np.ndarray, prior: np.ndarray,
                   prior_rest: float, *, init_counts: np.ndarray | None = None, max_iters: int = 100,
                   conv_thr: float = 0.05, n_restarts: int = 0, restart_iters: int = 2,
                   word_ids: np.ndarray | None = None, pairs: np.ndarray | None = None, sparse_L: int | None = None,
                   active_eps: float = 0.01, force_sparse: bool = False, select_always: bool = False,
                   stable_mass: float = 1e-2):
    """Document-level local step of the HDP topic model / LDA, one document at a time.

    Hughes 2016 thesis, Alg. 5.1 / Eq. 5.44-5.46, written straight from the equations
    (``csrc/topic_dense.pyx`` uses the efficient form of the same updates). For document d
    (rows u of C = log_lik, or of C = log_lik[word_ids] when word_ids is given; counts c,
    a = prior, a_> = prior_rest):

    * first r_uk ∝ exp(C_uk + ln a_k), or ∝ exp(C_uk + ψ(N⁰_dk + a_k)) for init_counts N⁰;
      N_dk = Σ_u c_u r_uk;
    * every iteration: θ = N + a, E ln π_k = ψ(θ_k) − ψ(Σ θ + a_>),
      r_uk = exp(C_uk + E ln π_k − logsumexp_j(C_uj + E ln π_j)), N' = Σ_u c_u r_uk; stop once
      max_k |N' − N| < conv_thr, or after max_iters iterations;
    * L_d = Σ_u c_u logsumexp_k(C_uk + w̃_k) − Σ_k N_k w̃_k + Σ_k lnΓ(θ_k) + lnΓ(a_>) − lnΓ(Σ θ + a_>)
      with w̃ = E ln π − max E ln π (no lnΓ(a_>) when a_> = 0);
    * sparse restarts (Hughes, Kim & Sudderth 2015 (AISTATS), sparse restarts): topics with
      N_dk > 0.1, smallest first (stable: lower k first on ties), at most n_restarts and at
      most (their number − 1); while the current state has two such topics, N' = N with
      N'_j = 0, restart_iters iterations from θ' = N' + a, accepted iff its L_d is larger
      by more than rounding: L'_d − L_d > 1e-12 (1 + |L_d|).

    Then, over all rows, with entr(x) = −x ln x (0 at 0): entropy H_k = Σ_u c_u entr(r_uk)
    (Hughes 2016 thesis Eq. 5.47); word_topic[v] = Σ_{u: word_ids[u] = v} c_u r_u; and for
    pairs[m] = (a, b), pair_entropy_m = Σ_u c_u entr(r_ua + r_ub), the entropy of topics a
    and b merged (Hughes, Kim & Sudderth 2015 §5.1).

    L-sparse mode, for sparse_L = L < K or with force_sparse (Hughes 2016 thesis §7.3,
    Alg. 7.4; Hughes & Sudderth 2016, fast and accurate local steps (sparse), §5): rows keep
    the supports S_u, at most L topics each, r_u = softmax of C_u + w̃ on S_u. First S_u = top
    L of C_u + w̃⁰ (first weights as above, shifted; stable: lower k on ties), active set
    A = ∪_u S_u. Every iteration: on a selection iteration first A ← {k ∈ A: N_k > active_eps}
    (unless active_eps = 0 or none is left); w̃ = ψ(N + a) − max on A (−inf off A); on a
    selection iteration every row re-selects S_u = top min(L, |A|) of C_u + w̃ (else the S_u
    stay); then r, N as before. Selection iterations: every t with select_always; else t % 10 = 0,
    and t ≤ 5 while the supports are not stable, i.e. the previous selection put at least
    stable_mass Σ_u c_u on the topics that entered the supports (Σ_u c_u r_uk over k ∈ S_u new).
    Restarts as above with every iteration a selection iteration; L_d = Σ_u c_u
    logsumexp_{S_u}(C_u + w̃) − Σ_k N_k w̃_k + (the lnΓ terms as above). Summaries of r as above
    (0 off the supports).

    Parameters
    ----------
    log_lik : (nnz, K) ndarray of float64, or (V, K) with word_ids
    counts : (nnz,) ndarray of float64
    doc_range : (D + 1,) ndarray of int64
    prior : (K,) ndarray of float64
    prior_rest : float
    init_counts : (D, K) ndarray of float64, optional
    max_iters, conv_thr, n_restarts, restart_iters, sparse_L, active_eps
        As for ``bnpvi.kernels.topic.doc_topic_step``.
    force_sparse, select_always : bool
        L-sparse mode also for L ≥ K; re-select at every iteration.
    stable_mass : float
        The fraction of a document's tokens below which its supports are stable (the compiled
        kernel's STABLE_MASS; 0: never stable, re-select on iterations 1-5).
    word_ids : (nnz,) ndarray of int64, optional
        Row u's word type: C_u = log_lik[word_ids[u]].
    pairs : (M, 2) ndarray of int64, optional

    Returns
    -------
    resp, doc_counts, iters, objective, restarts_accepted, entropy, word_topic, pair_entropy
        Shapes (nnz, K), (D, K), (D,) int64, (D,), (D,) int64, (K,), (V, K) or None
        (without word_ids), (M,) or None (without pairs).
    """
    from scipy.special import digamma, entr, gammaln, logsumexp

    if word_ids is not None:
        table, log_lik = log_lik, log_lik[word_ids]
    nnz, K = log_lik.shape
    D = doc_range.shape[0] - 1
    resp = np.zeros((nnz, K))
    doc_counts = np.zeros((D, K))
    iters = np.zeros(D, dtype=np.int64)
    objective = np.zeros(D)
    accepted = np.zeros(D, dtype=np.int64)
    rest = float(prior_rest)

    def e_log_pi(N):
        theta = N + prior
        return digamma(theta) - digamma(theta.sum() + rest)

    def respond(C, c, w):
        """r, N and the collapsed objective for the weights w (any shift)."""
        wt = w - w.max()
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            W = C + wt
            lz = logsumexp(W, axis=1)
            r = np.exp(W - lz[:, None])
        N = c @ r
        theta = N + prior
        used = N > 0  # w̃ may be −inf where r underflowed to 0
        L = c @ lz - np.sum(N[used] * wt[used]) + gammaln(theta).sum() - gammaln(theta.sum() + rest)
        if rest > 0:
            L += gammaln(rest)
        return r, N, L

    for d in range(D):
        u0, u1 = int(doc_range[d]), int(doc_range[d + 1])
        if u1 == u0:
            objective[d] = gammaln(prior).sum() - gammaln(prior.sum() + rest) + (gammaln(rest) if rest > 0 else 0.0)
            continue
        C, c = log_lik[u0:u1], counts[u0:u1]
        w = np.log(prior) if init_counts is None else digamma(init_counts[d] + prior)
        if sparse_L is not None and (sparse_L < K or force_sparse):
            resp[u0:u1], doc_counts[d], iters[d], objective[d], accepted[d] = _sparse_doc_topic(
                C, c, w - w.max(), prior, rest, sparse_L, active_eps, max_iters, conv_thr, n_restarts, restart_iters,
                select_always, stable_mass)
            continue
        r, N, L = respond(C, c, w)
        it = 0
        while it < max_iters:
            it += 1
            r, N_new, L = respond(C, c, e_log_pi(N))
            diff = np.max(np.abs(N_new - N))
            N = N_new
            if diff < conv_thr:
                break
        iters[d] = it
        if n_restarts > 0:
            used = np.flatnonzero(N > 0.1)
            order = used[np.argsort(N[used], kind="stable")]
            for j in order[:min(n_restarts, used.size - 1)]:
                if np.sum(N > 0.1) < 2:
                    break
                Nq = N.copy()
                Nq[j] = 0.0
                for _ in range(restart_iters):
                    rq, Nq, Lq = respond(C, c, e_log_pi(Nq))
                if Lq - L > 1e-12 * (1.0 + abs(L)):
                    r, N, L = rq, Nq, Lq
                    accepted[d] += 1
        resp[u0:u1] = r
        doc_counts[d] = N
        objective[d] = L
    entropy = counts @ entr(resp)
    word_topic = None
    if word_ids is not None:
        word_topic = np.zeros(table.shape)
        np.add.at(word_topic, word_ids, counts[:, None] * resp)
    pair_entropy = None
    if pairs is not None:
        pair_entropy = counts @ entr(resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]])
    return resp, doc_counts, iters, objective, accepted, entropy, word_topic, pair_entropy


def pair_logdets(base: np.ndarray, X: np.ndarray, pairs: np.ndarray, Y: np.ndarray | None = None,
                 s: np.ndarray | None = None) -> np.ndarray:
    """ln|M_p|, M_p = sym(base + (X_a + X_b) − u uᵀ/s_p), u = Y_a + Y_b (no rank-one term without Y); NaN
    where M_p is not positive definite."""
    a, b = pairs[:, 0], pairs[:, 1]
    W = base + (X[a] + X[b])
    if Y is not None:
        u = Y[a] + Y[b]
        W = W - np.einsum("pd,pe->pde", u, u / s[:, None])
    M = 0.5 * (W + np.swapaxes(W, 1, 2))
    out = np.full(pairs.shape[0], np.nan)
    for p in range(pairs.shape[0]):
        try:
            out[p] = 2.0 * np.sum(np.log(np.diag(np.linalg.cholesky(M[p]))))
        except np.linalg.LinAlgError:
            pass
    return out


def quad_features(Y: np.ndarray, linear: bool = True) -> np.ndarray:
    """(N, F) rows [y_d y_e for d ≤ e (row-major upper triangle), y_d (when ``linear``)]."""
    N, D = Y.shape
    out = np.empty((N, n_quad_features(D, linear)))
    col = 0
    for d in range(D):
        np.multiply(Y[:, d:d + 1], Y[:, d:], out=out[:, col:col + D - d])
        col += D - d
    if linear:
        out[:, col:] = Y
    return out


def quad_argmax(Y: np.ndarray, weights: np.ndarray, const: np.ndarray) -> np.ndarray:
    """argmax_k f(y_n)·W_k + c_k in float64 over the quadratic features f (ties to the first)."""
    linear = weights.shape[0] > Y.shape[1] * (Y.shape[1] + 1) // 2
    return np.argmax(quad_features(Y, linear) @ weights + const, axis=1)


def mult_reassign_gains(X, R: np.ndarray, lam: np.ndarray, total: np.ndarray, lam0: float,
                        prior_total: float) -> np.ndarray:
    """(N, K) change of Σ_k L_data,k* of a Dirichlet-multinomial mixture when document n's responsibilities
    r_n (rows of ``R``) become a one-hot on cluster j: documents ``X`` (CSR counts), λ = ``lam`` (K, V) the
    posterior pseudo-counts with row sums ``total``, λ̄ = ``lam0`` and Vλ̄ = ``prior_total`` (see
    ``bnpvi.kernels.mixture.mult_reassign_gains``), in blocks of rows of at most 2²¹ (entry, cluster) values."""
    out = np.empty(R.shape)
    step = max(1, (1 << 21) // max(1, lam.shape[0] * max(1, X.nnz // max(1, X.shape[0]))))
    for lo in range(0, X.shape[0], step):
        rows = X[lo:lo + step]
        r = R[lo:lo + step]
        entry_row = np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))
        c = rows.data[:, None]
        a = lam[:, rows.indices].T  # (nnz, K) λ_kw of each entry
        a_out = np.maximum(a - r[entry_row] * c, lam0)
        length = np.asarray(rows.sum(axis=1)).ravel()[:, None]
        t_out = np.maximum(total[None, :] - r * length, prior_total)
        per_row = sp.csr_matrix((np.ones(rows.nnz), np.arange(rows.nnz), rows.indptr),
                                shape=(rows.shape[0], rows.nnz))
        removed = (np.asarray(per_row @ (gammaln(a_out) - gammaln(a))).sum(axis=1)
                   - (gammaln(t_out) - gammaln(total[None, :])).sum(axis=1))
        added = np.asarray(per_row @ (gammaln(a_out + c) - gammaln(a_out))) - (gammaln(t_out + length)
                                                                             - gammaln(t_out))
        out[lo:lo + step] = removed[:, None] + added
    return out
