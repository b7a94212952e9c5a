"""NumPy references of the Gibbs sweeps in csrc/gibbs.pyx (see :mod:`bnpvi.kernels.gibbs` for the math).

Same equations, same order of decisions, same use of the pre-drawn uniforms; written for clarity,
one document or token at a time. :mod:`bnpvi.kernels.gibbs` calls them with ``impl=`` this module
in the tests, which check that both draw the same samples.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln


def _pick(weights: np.ndarray, u: float) -> int:
    """The first j with Σ_{i≤j} w_i > u Σ w (the last one if rounding leaves none)."""
    hits = np.flatnonzero(np.cumsum(weights) > u * weights.sum())
    return int(hits[0]) if hits.size else weights.shape[0] - 1


def _stick_logs(docs_in, T: int, stick_u, stick_v) -> tuple[np.ndarray, np.ndarray]:
    """Log stick-breaking weights of the first T components under the running stick counts: (T+1,) sums
    Σ_{l<k} ln(1 − V̂_l) (the last one the mass left for a new component) and (T,) ln V̂_k, with
    V̂_k = a_k / (a_k + b_k), a_k = u_k + m_k, b_k = v_k + Σ_{l>k} m_l (the sticks as the prior,
    Wang & Blei 2012 §2.2)."""
    after = np.concatenate([np.cumsum(docs_in[:T][::-1])[::-1][1:], [0.0]]) if T else np.zeros(0)
    a_k = stick_u[:T] + docs_in[:T]
    b_k = stick_v[:T] + after
    return np.concatenate([[0.0], np.cumsum(np.log(b_k / (a_k + b_k)))]), np.log(a_k / (a_k + b_k))


def dp_doc_sweep(word_loc, counts, doc_range, lam, lam_total, table, table_total, docs_in, stick_u, stick_v, z,
                 uniforms, T, K_global, eta, V_eta, log_new_factor):
    Kcap = table.shape[0]
    for i in range(doc_range.shape[0] - 1):
        rows = slice(doc_range[i], doc_range[i + 1])
        w, c = word_loc[rows], counts[rows]
        L = c.sum()
        k_old = z[i]
        if k_old >= 0:
            table[k_old, w] -= c
            table_total[k_old] -= L
            docs_in[k_old] -= 1.0
            if k_old >= K_global and docs_in[k_old] <= 0.0:
                last = T - 1
                if k_old != last:
                    table[k_old] = table[last]
                    table_total[k_old] = table_total[last]
                    docs_in[k_old] = docs_in[last]
                    z[z == last] = k_old
                table[last] = 0.0
                table_total[last] = 0.0
                docs_in[last] = 0.0
                T -= 1
            z[i] = -1
        before, log_stick = _stick_logs(docs_in, T, stick_u, stick_v)
        x = lam[:T][:, w] + table[:T][:, w]
        tot = lam_total[:T] + table_total[:T]
        scores = before[:T] + log_stick + (gammaln(x + c) - gammaln(x)).sum(axis=1) - (gammaln(tot + L) - gammaln(tot))
        if T < Kcap:
            new = (gammaln(eta + c) - gammaln(eta)).sum() - (gammaln(V_eta + L) - gammaln(V_eta))
            scores = np.append(scores, before[T] + log_new_factor + new)
        k_new = _pick(np.exp(scores - scores.max()), uniforms[i])
        if k_new == T:
            T += 1
        table[k_new, w] += c
        table_total[k_new] += L
        docs_in[k_new] += 1.0
        z[i] = k_new
    return T


def hdp_token_sweep(tok_word, tok_doc, z, doc_topic, topic_word, topic_total, lam, lam_total, pi, pi_rest,
                    u_choice, u_stick, T, b, a, inv_V):
    Kcap = topic_word.shape[0]
    for t in range(tok_word.shape[0]):
        w, d, k_old = tok_word[t], tok_doc[t], z[t]
        if k_old >= 0:
            doc_topic[d, k_old] -= 1.0
            topic_word[k_old, w] -= 1.0
            topic_total[k_old] -= 1.0
        weights = (doc_topic[d, :T] + b * pi[:T]) * (topic_word[:T, w] + lam[:T, w]) / (topic_total[:T] + lam_total[:T])
        if T < Kcap:
            weights = np.append(weights, b * pi_rest * inv_V)
        k_new = _pick(weights, u_choice[t])
        if k_new == T:
            bar = 1.0 - u_stick[t] ** (1.0 / a)
            pi[T] = bar * pi_rest
            pi_rest = (1.0 - bar) * pi_rest
            T += 1
        doc_topic[d, k_new] += 1.0
        topic_word[k_new, w] += 1.0
        topic_total[k_new] += 1.0
        z[t] = k_new
    return T, pi_rest


def antoniak_tables(doc_topic, pi, b, uniforms, T, tables):
    tables[:T] = 0.0
    idx = 0
    for d in range(doc_topic.shape[0]):
        for k in range(T):
            n = int(doc_topic[d, k] + 0.5)
            bp = b * pi[k]
            i = np.arange(n)
            tables[k] += np.count_nonzero(uniforms[idx:idx + n] * (bp + i) < bp)
            idx += n


def point_log_pred(family, y, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0):
    """ln p(y | a component's statistics N, Sx, Sxx) (see ``bnpvi.kernels.gibbs.dp_point_sweep``), by dense
    linear algebra (a log determinant and a solve) instead of the kernel's Cholesky factor."""
    D = y.shape[0]
    if family == 0:
        p1 = (lam1 + Sx) / (lam1 + lam0 + N)
        return float(np.sum(np.where(y > 0.5, np.log(p1), np.log1p(-p1))))
    nu = nu0 + N
    if family == 2:
        kappa, c, mu = 0.0, 1.0, np.zeros(D)
    else:
        kappa = kappa0 + N
        c, mu = kappa / (kappa + 1.0), Sx / kappa
    r = y - mu
    if family == 1:
        b = np.maximum(np.diag(B0) + np.diag(Sxx) - Sx * mu, 1e-12 * np.diag(B0))
        per_dim = (gammaln(0.5 * (nu + 1)) - gammaln(0.5 * nu) - 0.5 * np.log(np.pi) + 0.5 * np.log(c)
                   - 0.5 * np.log(b) - 0.5 * (nu + 1) * np.log1p(c * r * r / b))
        return float(per_dim.sum())
    lower = np.tril(Sxx)
    B = B0 + lower + np.tril(lower, -1).T - (kappa * np.outer(mu, mu) if family == 3 else 0.0)
    logdet = np.linalg.slogdet(B)[1]
    q = c * float(r @ np.linalg.solve(B, r))
    out = gammaln(0.5 * (nu + 1)) - gammaln(0.5 * (nu + 1 - D)) - 0.5 * D * np.log(np.pi) - 0.5 * logdet \
        - 0.5 * (nu + 1) * np.log1p(q)
    return float(out + (0.5 * D * np.log(c) if family == 3 else 0.0))


def _move(family, k, y, sign, N, Sx, Sxx):
    N[k] += sign
    Sx[k] += sign * y
    if family == 1:
        Sxx[k][np.diag_indices(y.shape[0])] += sign * y * y
    elif family != 0:
        Sxx[k] += sign * np.tril(np.outer(y, y))


def dp_point_sweep(family, Y, N, Sx, Sxx, kappa0, nu0, B0, lam1, lam0, docs_in, stick_u, stick_v, z, uniforms, T,
                   K_global, log_new_factor):
    Kcap = N.shape[0] - 1
    prior = (kappa0, nu0, B0, lam1, lam0)
    for i in range(Y.shape[0]):
        y, k_old = Y[i], z[i]
        if k_old >= 0:
            _move(family, k_old, y, -1.0, N, Sx, Sxx)
            docs_in[k_old] -= 1.0
            if k_old >= K_global and docs_in[k_old] <= 0.0:
                last = T - 1
                if k_old != last:
                    N[k_old], Sx[k_old], Sxx[k_old] = N[last], Sx[last], Sxx[last]
                    docs_in[k_old] = docs_in[last]
                    z[z == last] = k_old
                N[last], Sx[last], Sxx[last] = N[Kcap], Sx[Kcap], Sxx[Kcap]
                docs_in[last] = 0.0
                T -= 1
            z[i] = -1
        before, log_stick = _stick_logs(docs_in, T, stick_u, stick_v)
        scores = [before[k] + log_stick[k] + point_log_pred(family, y, N[k], Sx[k], Sxx[k], *prior) for k in range(T)]
        if T < Kcap:
            scores.append(before[T] + log_new_factor + point_log_pred(family, y, N[Kcap], Sx[Kcap], Sxx[Kcap], *prior))
        scores = np.array(scores)
        k_new = _pick(np.exp(scores - scores.max()), uniforms[i])
        if k_new == T:
            T += 1
        _move(family, k_new, y, 1.0, N, Sx, Sxx)
        docs_in[k_new] += 1.0
        z[i] = k_new
    return T
