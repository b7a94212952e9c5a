"""Held-out scores: a topic model's log-likelihood by document completion, a mixture's per-point bound.

Mixtures (:func:`points_loglik`): for every held-out point of a points file
(``PointStore.read_heldout``), or document of a bag-of-words file (a mixture of multinomials; the
multinomial coefficient left out as ``obs=mult`` leaves it out everywhere),
ln Σ_k exp(E ln π_k + E ln p(x | φ_k)) under the global q, the optimal value of the point's own
local step (Hughes 2016 thesis Eq. 3.46), a lower bound on its log predictive density; the mean over
the held-out points, in nats per point. It is always the dense step, so an L-sparse training run is
scored like a dense one.

Topic models:

The evaluation of Hughes, Kim & Sudderth 2015 (AISTATS) §6, Eq. 22 and Hughes 2016
thesis Eq. 5.59 (after Wang, Paisley & Blei 2011). Every held-out document of the
data file (``BowStore.read_heldout``) is split into an observed part and a target
part (:func:`bnpvi.data.heldout.completion_split`). The topics are taken as point
estimates φ̂_k = λ̂_k / Σ_w λ̂_kw; the document's topic weights are fitted to its
observed part by the model's own document-level step
(:func:`bnpvi.kernels.topic.doc_topic_step` with C_uk = ln φ̂_{k, v_u}, the global
prior α β̂ of ``model.alloc.doc_prior``, and no sparse restarts), which gives θ_d
(θ_d = α β̂ for a document whose observed part is empty); then
π̂_dk = θ_dk / Σ_{l ≤ K} θ_dl over the K active topics (for the HDP the mass α β̂_>
beyond K is dropped and the rest renormalised), and

    score = Σ_d Σ_{target tokens of d} ln Σ_k π̂_dk φ̂_{k, v}  /  (number of target tokens),

in nats per held-out token (higher is better).

Documents are read ``block_docs`` at a time, so memory stays flat in the number of
held-out documents. Every document's split, fit and value depend on the document and
its index in the held-out set alone, and the per-document values are added one
after the other in held-out order, so the score is the same bit for bit for any
block size. Nothing here draws from a random generator.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from bnpvi.alloc.mixture import MixtureAlloc
from bnpvi.alloc.topic import TopicAlloc
from bnpvi.data.batch import PointBatch, WordCountBatch
from bnpvi.data.heldout import MODES, check_seed, completion_split, group_halves
from bnpvi.errors import BnpviError, check_int, check_number
from bnpvi.kernels.mixture import dense_local_step
from bnpvi.kernels import topic as topic_kernel

__all__ = ["completion_loglik", "completion_score", "group_completion_loglik", "group_completion_values",
           "groups_loglik", "check_split", "evaluates_heldout", "heldout_loglik", "point_bounds", "points_loglik"]


def check_split(mode, what: str = "mode") -> str:
    """``mode`` if it names a document-completion split ("halves" or "types"); one-line BnpviError otherwise."""
    if not isinstance(mode, str) or mode not in MODES:
        raise BnpviError(f"{what} must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def is_topic_model(model) -> bool:
    """Whether ``model`` is a topic model (HDP or LDA) with the multinomial family."""
    return isinstance(model.alloc, TopicAlloc) and getattr(model.obs, "name", None) == "mult"


def is_grouped_store(store) -> bool:
    """Whether ``store`` is a sequence file (groups of real vectors, for a topic model of another family
    than ``mult``)."""
    return getattr(store, "kind", None) == "seq"


def evaluates_heldout(model, store) -> bool:
    """Whether the file's held-out part can be scored: documents for a topic model with obs=mult
    (:func:`completion_loglik`), whole groups of a sequence file for a topic model of grouped real vectors
    (:func:`groups_loglik`), points or whole documents for a mixture (:func:`points_loglik`)."""
    if not getattr(store, "has_heldout", False):
        return False
    if isinstance(model.alloc, TopicAlloc):
        return is_grouped_store(store) != is_topic_model(model)
    return isinstance(model.alloc, MixtureAlloc) and not is_grouped_store(store)


def heldout_loglik(model, globals_, store, seed: int = 0, mode: str = "halves") -> tuple[float, int, str]:
    """The held-out score of ``store`` (:func:`evaluates_heldout` must hold): (mean log-likelihood, how many
    tokens or points it averages, their name "tokens" or "points") by document completion for a topic model
    of words (``seed``, ``mode``), group completion for one of grouped vectors (``seed``), the per-point
    bound for a mixture."""
    if is_topic_model(model):
        out = completion_loglik(model, globals_, store, seed=seed, mode=mode)
        return out["loglik_per_token"], out["n_tokens"], "tokens"
    out = groups_loglik(model, globals_, store, seed=seed) if isinstance(model.alloc, TopicAlloc) else \
        points_loglik(model, globals_, store)
    return out["loglik_per_point"], out["n_points"], "points"


def points_loglik(model, globals_, store, block: int = 20000) -> dict:
    """Mean over the held-out points of ln Σ_k exp(E ln π_k + E ln p(x | φ_k)) (module docstring).

    Returns ``loglik_per_point`` and ``n_points``. Points are read ``block`` at a time (memory: one
    block's N x K weights and one value per point), and the values are summed once at the end, so the
    score does not depend on ``block``.
    """
    n = store.n_heldout
    values = np.empty(n)
    for lo in range(0, n, block):
        batch = store.read_heldout(lo, min(n, lo + block))
        values[lo:lo + batch.n_atoms] = point_bounds(model, globals_, batch)
    return {"loglik_per_point": float(np.sum(values)) / n, "n_points": n}


def point_bounds(model, globals_, batch) -> np.ndarray:
    """(N,) ln Σ_k exp(E ln π_k + E ln p(x_n | φ_k)) of every atom of ``batch`` under a mixture's globals:
    the optimum of each atom's own dense local step (Hughes 2016 thesis Eq. 3.46), a lower bound on its
    log predictive density."""
    log_pi = np.ascontiguousarray(model.alloc.expected_log_pi(globals_.alloc))
    log_lik = np.ascontiguousarray(model.alloc.expected_log_lik(model.obs, globals_.obs, batch))
    return dense_local_step(log_lik, log_pi)[1]


def groups_loglik(model, globals_, store, seed: int = 0, block_groups: int = 2000) -> dict:
    """Held-out log-likelihood per point by group completion (:func:`group_completion_loglik`) of the held-out
    groups of a sequence file, read ``block_groups`` at a time; each group's split depends on the seed and its
    index alone and the per-point values are added in held-out order, so the result does not depend on the
    block size.

    Returns
    -------
    dict
        ``loglik_per_point`` (mean over the target points of every held-out group) and ``n_points``.
    """
    total, n_points = 0.0, 0
    for lo in range(0, store.n_heldout, block_groups):
        batch = store.read_heldout(lo, min(store.n_heldout, lo + block_groups))
        values = group_completion_values(model, globals_, batch.X, batch.seq_range, seed, lo)
        total, n_points = total + float(np.sum(values)), n_points + values.shape[0]
    if n_points == 0:
        raise BnpviError(f"group completion: every held-out group of {getattr(store, 'path', store)} has a single "
                         "point, so no point is left to score")
    return {"loglik_per_point": total / n_points, "n_points": n_points}


def group_completion_loglik(model, globals_, X, seq_range, seed: int = 0, start: int = 0, max_iters: int = 100,
                            conv_thr: float = 0.01) -> dict:
    """Held-out log-likelihood per point by group completion, for a topic model of grouped real vectors (an
    HDP admixture of Gaussians, say: ``hdp_topic`` or ``lda`` with ``gauss``, ``diag_gauss``, ``zm_gauss``,
    ``bern``).

    Document completion (Hughes, Kim & Sudderth 2015 (AISTATS) §6, Eq. 22; Hughes 2016 thesis Eq. 5.59) with
    a group's points as its tokens: each group's rows are split in halves (:func:`bnpvi.data.heldout.group_halves`);
    its topic weights are fitted to the observed half by the model's document-level step with
    C_nk = E ln p(x_n | φ_k) (:func:`bnpvi.kernels.topic.doc_topic_step`, no restarts), giving θ_d and
    π̂_dk = θ_dk / Σ_l θ_dl over the K active topics; each target point scores
    ln Σ_k π̂_dk exp(E ln p(x_n | φ_k)), the per-point bound the mixtures' held-out score uses with π̂_d in
    place of the global weights (:func:`point_bounds`).

    Parameters
    ----------
    X : (T, D) array
        The points of the groups, one group after another.
    seq_range : (G+1,) int array
        Group g is rows ``seq_range[g]:seq_range[g+1]``.
    seed, start
        The split's seed, and the index of the first group in the whole held-out set.

    Returns
    -------
    dict
        ``loglik_per_point`` (mean over the target points) and ``n_points``.
    """
    values = group_completion_values(model, globals_, X, seq_range, seed, start, max_iters, conv_thr)
    if values.shape[0] == 0:
        raise BnpviError("group completion: every group has a single point, so no point is left to score")
    return {"loglik_per_point": float(np.sum(values)) / values.shape[0], "n_points": values.shape[0]}


def group_completion_values(model, globals_, X, seq_range, seed: int = 0, start: int = 0, max_iters: int = 100,
                            conv_thr: float = 0.01) -> np.ndarray:
    """ln Σ_k π̂_dk exp(E ln p(x_n | φ_k)) of every target point of the groups, in row order
    (:func:`group_completion_loglik`); empty when every group has a single point."""
    if not isinstance(model.alloc, TopicAlloc) or getattr(model.obs, "name", None) == "mult":
        raise BnpviError(f"group completion scores a topic model of grouped real vectors, not model="
                         f"{model.alloc.name} obs={getattr(model.obs, 'name', '?')}")
    seed, max_iters = check_seed(seed, "the completion seed"), check_int(max_iters, "max_iters", 1)
    conv_thr = check_number(conv_thr, "conv_thr", strict=False)
    X = np.ascontiguousarray(X, dtype=np.float64)
    seq_range = np.asarray(seq_range, dtype=np.int64)
    observed = group_halves(seq_range, seed, start)
    if observed.all():
        return np.empty(0)
    log_lik = np.ascontiguousarray(model.obs.expected_log_lik(globals_.obs, PointBatch(X)))
    group = np.repeat(np.arange(seq_range.shape[0] - 1), np.diff(seq_range))
    prior, prior_rest = model.alloc.doc_prior(globals_.alloc)
    prior = np.ascontiguousarray(prior, dtype=np.float64)
    observed_range = np.concatenate([[0], np.cumsum(np.bincount(group[observed], minlength=seq_range.shape[0] - 1))])
    fit = topic_kernel.doc_topic_step(np.ascontiguousarray(log_lik[observed]), np.ones(int(observed.sum())),
                                      observed_range.astype(np.int64), prior, float(prior_rest),
                                      max_iters=max_iters, conv_thr=conv_thr, n_restarts=0, keep_resp=False)
    theta = fit.doc_counts + prior
    log_pi = np.log(theta / theta.sum(axis=1, keepdims=True))
    target = ~observed
    return dense_local_step(np.ascontiguousarray(log_lik[target] + log_pi[group[target]]),
                            np.zeros(log_lik.shape[1]))[1]  # ln Σ_k exp(·), the compiled normaliser


def completion_loglik(model, globals_, store, seed: int = 0, mode: str = "halves", max_iters: int = 100,
                      conv_thr: float = 0.01, block_docs: int = 5000) -> dict:
    """Held-out log-likelihood per token by document completion (module docstring) of the held-out
    documents of ``store``, read ``block_docs`` at a time (:func:`completion_score`).

    Hughes, Kim & Sudderth 2015 (AISTATS) §6, Eq. 22; Hughes 2016 thesis Eq. 5.59.

    Parameters
    ----------
    model, globals_, seed, mode, max_iters, conv_thr
        As :func:`completion_score`.
    store : BowStore
        A bag-of-words file with held-out documents.
    block_docs : int, default 5000
        Held-out documents read and scored at a time (at least 1); the result does not depend on it.

    Returns
    -------
    dict
        As :func:`completion_score`.

    Raises
    ------
    BnpviError
        A file without held-out documents, a bad block size, or any error of :func:`completion_score`
        (one line each).
    """
    if not getattr(store, "has_heldout", False):
        raise BnpviError(f"data file {getattr(store, 'path', store)} holds no held-out documents (write them with "
                         "`bnpvi-data convert SRC DST --heldout F`)")
    block_docs = check_int(block_docs, "block_docs", 1)
    blocks = (store.read_heldout(lo, min(store.n_heldout, lo + block_docs))
              for lo in range(0, store.n_heldout, block_docs))
    return completion_score(model, globals_, blocks, store.D, f"data file {getattr(store, 'path', store)}", seed=seed,
                            mode=mode, max_iters=max_iters, conv_thr=conv_thr)


def completion_score(model, globals_, blocks: Iterable[WordCountBatch], V: int, where: str, seed: int = 0,
                     mode: str = "halves", max_iters: int = 100, conv_thr: float = 0.01) -> dict:
    """Log-likelihood per token by document completion (module docstring) of the documents of ``blocks``.

    Hughes, Kim & Sudderth 2015 (AISTATS) §6, Eq. 22; Hughes 2016 thesis Eq. 5.59.

    Parameters
    ----------
    model : Model
        A topic model (``model.alloc`` a :class:`~bnpvi.alloc.topic.TopicAlloc`) with the ``mult`` family.
    globals_ : Globals
        Its global parameters: ``globals_.obs["lam"]`` (K, V) and the allocation parameters
        from which ``model.alloc.doc_prior`` makes α β̂.
    blocks : iterable of WordCountBatch
        The documents, consecutive blocks of one set: a block's ``start`` is the index of its first
        document in the set, which seeds each document's split.
    V : int
        Their vocabulary size.
    where : str
        What holds the documents, for messages.
    seed : int, default 0
        Seed of the completion split (non-negative).
    mode : {"halves", "types"}
        The completion split (:func:`~bnpvi.data.heldout.completion_split`).
    max_iters : int, default 100
        Iterations of the document-level step per document (at least 1).
    conv_thr : float, default 0.01
        A document's iterations stop when no N_dk moves by more than this (>= 0).

    Returns
    -------
    dict
        ``loglik_per_token`` (float): Σ over target tokens of ln p(token) / their number, in nats;
        ``n_tokens`` (int): the number of target tokens.

    Raises
    ------
    BnpviError
        Not a topic model with obs=mult, a vocabulary that does not match the topics, a bad mode, seed,
        iteration count or threshold, or no target tokens at all (one line each).
    """
    if not is_topic_model(model):
        raise BnpviError(f"held-out log-likelihood by document completion needs a topic model (hdp_topic or lda) "
                         f"with obs=mult, not model={model.alloc.name} obs={getattr(model.obs, 'name', '?')}")
    mode = check_split(mode)
    seed = check_seed(seed, "the completion seed")
    max_iters = check_int(max_iters, "max_iters", 1)
    conv_thr = check_number(conv_thr, "conv_thr", strict=False)

    lam = np.asarray(globals_.obs["lam"], dtype=np.float64)
    if lam.ndim != 2 or lam.shape[1] != V:
        raise BnpviError(f"the topics have shape {lam.shape} but {where} has a vocabulary of V={V} words")
    phi_T = np.ascontiguousarray((lam / lam.sum(axis=1, keepdims=True)).T)  # (V, K): φ̂_kv by word
    with np.errstate(divide="ignore"):
        log_phi_T = np.log(phi_T)
    if not np.isfinite(log_phi_T).all():
        raise BnpviError("held-out log-likelihood: a topic gives probability 0 to a word (λ̂ must be positive)")
    prior, prior_rest = model.alloc.doc_prior(globals_.alloc)
    prior = np.ascontiguousarray(prior, dtype=np.float64)
    K = prior.shape[0]

    total, n_tokens, n_docs_seen = 0.0, 0, 0
    for block in blocks:
        observed, target = completion_split(block, seed, mode)
        n_docs = observed.doc_range.shape[0] - 1
        n_docs_seen += n_docs
        # θ_d on the observed part: the document-level step with C_uk = ln φ̂_{k, v_u}, no restarts
        ids = np.ascontiguousarray(observed.word_ids, dtype=np.int64)
        fit = topic_kernel.doc_topic_step(log_phi_T, np.ascontiguousarray(observed.word_counts, dtype=np.float64),
                                          np.ascontiguousarray(observed.doc_range, dtype=np.int64), prior,
                                          float(prior_rest), max_iters=max_iters, conv_thr=conv_thr, n_restarts=0,
                                          word_ids=ids, keep_resp=False)
        theta = fit.doc_counts + prior
        pi = theta / theta.sum(axis=1, keepdims=True)  # over the K active topics; the HDP's remainder dropped

        # ln Σ_k π̂_dk φ̂_kv per target (document, word) entry, summed per document (count-weighted)
        t_ids = np.asarray(target.word_ids, dtype=np.intp)
        t_counts = np.asarray(target.word_counts, dtype=np.float64)
        t_doc = np.repeat(np.arange(n_docs, dtype=np.intp), np.diff(target.doc_range))
        prob = np.zeros(t_ids.shape[0])
        for k in range(K):  # one column at a time: memory O(entries), and each entry's sum in a fixed order
            prob += pi[t_doc, k] * phi_T[t_ids, k]
        doc_ll = np.bincount(t_doc, weights=t_counts * np.log(prob), minlength=n_docs)
        total = float(np.cumsum(np.concatenate([[total], doc_ll]))[-1])  # sequential: block-size independent
        n_tokens += int(t_counts.sum())
    if n_tokens == 0:
        raise BnpviError(f"held-out log-likelihood: the {mode!r} split leaves no target tokens in the "
                         f"{n_docs_seen} documents of {where}")
    return {"loglik_per_token": total / n_tokens, "n_tokens": n_tokens}
