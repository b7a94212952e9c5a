"""Topic models: the HDP admixture and LDA (Hughes 2016 thesis Ch. 5; Hughes, Kim & Sudderth 2015).

Document d has topic weights π_d and each of its tokens a topic z_dt ~ Cat(π_d). In the HDP,
π_d ~ Dir(α β_1, ..., α β_K, α β_{>K}) around top-level probabilities β from sticks
u_k ~ Beta(1, γ) (thesis Eq. 5.1-5.5; ``bnpvi.alloc.hdp_top``); in LDA, π_d ~ Dir(α/K, ..., α/K).

Mean field (Eq. 5.6-5.13): q(π_d) = Dir(θ_d) (K + 1 entries in the HDP, the last one the mass on
topics beyond K), q(z_dt) = Cat(r_dt), and for the HDP q(u_k) = Beta(ρ_k ω_k, (1 − ρ_k) ω_k).
Tokens of one word type in a document share their responsibilities (§5.3.5), so the atoms
the observation family sees are the (document, word type) entries, each weighted by its
count c_du (``atoms``: one count vector with a single word per entry). Documents of real
vectors (image patches grouped by image, thesis §5.6 with ``obs=zm_gauss``) come as a
sequence file, each sequence one document and each step one token (c = 1). The local step
(Alg. 5.1, compiled: ``bnpvi.kernels.topic``) alternates r_du ∝ exp(C_du + ψ(θ_d)) and
θ_d = N_d + α β̂, then tries sparse restarts (§5.3.4).

Summaries per batch (§5.4.3, Eq. 5.47-5.48; the signs of Hughes, Kim & Sudderth 2015, Eq. 19):
N_k = Σ_d N_dk; the entropy H_k = −Σ_du c_du r_duk ln r_duk; with P_dk = ψ(θ_dk) − ψ(θ_d.),

    P_k = Σ_d P_dk,   Q_k = Σ_d lnΓ(θ_dk),   G_k = Σ_d (N_dk − θ_dk) P_dk,
    Q_0 = Σ_d lnΓ(θ_d.),   and for the remainder P_>, Q_>, G_> = −Σ_d θ_d> P_d>,

and the number of documents D. The ELBO's allocation and entropy terms are then exactly

    L_ent + L_doc = Σ_k H_k − Q_0 + Σ_k (Q_k + G_k + α β̂_k P_k) + Q_> + G_> + α β̂_> P_>

plus, for the HDP, the surrogate top term L_top = D K ln α + f(ρ, ω) (Eq. 5.25, with every
document contributing E ln β_m for every m: c_m = D in ``hdp_top``), and for LDA the prior
normaliser D c_Dir(α/K, ..., α/K). β̂ is the current global value while θ_d was made under the
β̂ of its batch's last visit: the formula is exact for that combination (memoized VI).
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln

from bnpvi.alloc import hdp_top
from bnpvi.alloc.base import AllocModel, Local, Params
from bnpvi.errors import BnpviError, check_int, check_number
from bnpvi.kernels import topic as topic_kernel
from bnpvi.kernels.blas import blas_single_thread
from bnpvi.special import c_dir
from bnpvi.stats import ENTROPY, PER_CLUSTER, TOTAL, FieldSpec, Responsibilities, SuffStats

ALPHA_ROUNDS = 3
"""Rounds of q(u) and α updates in a global step that learns α (each round raises the ELBO)."""
TARGET_MIN = 0.01
"""A delete's target documents, re-inferred from the likelihood, use the target for more than this many tokens."""

DOC_TERM = FieldSpec(pad="none", merge="tracked")
"""A per-topic sum over documents of a function of θ_d (P, Q, G): it has no value for a topic the
batch was never summarised under, and a merge's value must be tracked."""


@dataclass(frozen=True, eq=False)
class WordLogLik:
    """E ln φ_k,v_u of every (document, word type) entry u of a batch, held as the (V, K) table E ln φ_kv
    with the entries' words: the (entries x K) matrix is never built (the counts c_u are the batch's).

    Attributes
    ----------
    table : (V, K) ndarray, E ln φ_kv by word
    word_ids : (entries,) int64 ndarray, v_u
    """

    table: np.ndarray
    word_ids: np.ndarray

    def columns(self, keep) -> "WordLogLik":
        """The same for the topics ``keep`` only."""
        return WordLogLik(np.ascontiguousarray(self.table[:, keep]), self.word_ids)


def columns(log_lik, keep):
    """``log_lik`` (a dense array or a :class:`WordLogLik`) for the topics ``keep`` only."""
    return log_lik.columns(keep) if isinstance(log_lik, WordLogLik) else log_lik[:, keep]


def _rows(doc_range: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The atoms (rows) of documents ``docs``, in order, and the documents' boundaries among them."""
    lengths = np.diff(doc_range)[docs]
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rows = np.arange(bounds[-1]) - np.repeat(bounds[:-1], lengths) + np.repeat(doc_range[docs], lengths)
    return rows, bounds


def _documents(counts, doc_range, log_lik, docs):
    """(counts, doc_range, log_lik) of the documents ``docs`` of a batch."""
    rows, bounds = _rows(doc_range, docs)
    if isinstance(log_lik, WordLogLik):
        part = WordLogLik(log_lik.table, np.ascontiguousarray(log_lik.word_ids[rows]))
    else:
        part = log_lik[rows]
    return np.ascontiguousarray(counts[rows]), bounds, part


def _joined(parts, counts, doc_range, prior, prior_rest) -> Local:
    """One Local from the Locals of disjoint sets of a batch's documents, (docs, local) each."""
    K = prior.shape[0]
    N_d = np.zeros((doc_range.shape[0] - 1, K))
    resp = None if parts[0][1].resp is None else np.zeros((counts.shape[0], K))
    tables = {"counts": counts, "prior": prior, "prior_rest": prior_rest}
    for docs, local in parts:
        N_d[docs] = local.tables["doc_counts"]
        if resp is not None:
            resp[_rows(doc_range, docs)[0]] = local.resp.values
        for name in ("entropy", "word_topic"):
            if name in local.tables:
                tables[name] = tables[name] + local.tables[name] if name in tables else local.tables[name]
    tables["doc_counts"] = N_d
    return Local(None if resp is None else Responsibilities(resp, K), tables)


class TopicAlloc(AllocModel):
    """What the HDP topic model and LDA share: the document-level local step and the summaries.

    Parameters
    ----------
    alpha : float
        α > 0, the concentration of every document's topic weights.
    max_iters : int
        Cap on the local step's iterations per document (thesis Alg. 5.1: 100).
    conv_thr : float
        A document's iterations stop when no N_dk moves by more than this (thesis: 0.05).
    n_restarts : int
        Sparse restart proposals per document (Hughes, Kim & Sudderth 2015 §4.1: 5; 0: none).
    restart_iters : int
        Local iterations of each restart proposal.
    warm_start : bool
        Whether full and memoized VI start each document's iterations from its N_d of the batch's
        previous visit (thesis §5.3, "key differences"; O(documents x K) memory) instead of from the
        likelihood. Off by default: on the 10-bar corpus from K = 50 with merges and deletes, warm
        starts leave documents near their last state, the ELBO climbs by a fraction of a nat per lap,
        and the run ends at 18 topics (ELBO −508,097) where cold starts reach the true 10 (−506,292).
    """

    data_kinds = ("bow", "seq")
    moves: tuple[str, ...] = ()
    pairs_in_local_step = True
    abundant_K = 50
    init_kmeans_iters = 10  # topics as means of document clusters, not single documents (wiki: held-out +0.15)
    has_sparse_step = True

    def __init__(self, alpha: float, max_iters: int = 100, conv_thr: float = 0.05, n_restarts: int = 5,
                 restart_iters: int = 2, warm_start: bool = False):
        self.alpha = check_number(alpha, "model.alpha")
        self.max_iters = check_int(max_iters, "model.max_iters", 1)
        self.conv_thr = check_number(conv_thr, "model.conv_thr", strict=False)
        self.n_restarts = check_int(n_restarts, "model.n_restarts", 0)
        self.restart_iters = check_int(restart_iters, "model.restart_iters", 1)
        if not isinstance(warm_start, (bool, np.bool_)):
            raise BnpviError(f"model.warm_start must be true or false, got {warm_start!r}")
        self.warm_docs = bool(warm_start)

    def layout(self):
        return {"N": ((), PER_CLUSTER), "H": ((), ENTROPY), "P": ((), DOC_TERM), "Q": ((), DOC_TERM),
                "G": ((), DOC_TERM), "n_docs": ((), TOTAL), "P_rest": ((), TOTAL), "Q_total": ((), TOTAL),
                "Q_rest": ((), TOTAL), "G_rest": ((), TOTAL)}

    def check_data(self, kind: str) -> str | None:
        if kind in self.data_kinds:
            return None
        return (f"model={self.name} needs documents: bag-of-words (convert them with `bnpvi-data convert` from "
                "LDA-C (.ldac) or a sparse NPZ) or groups of vectors such as image patches (convert with "
                "--sequences, one sequence per document)")

    def atoms(self, batch):
        """What the observation family sees: one atom per (document, word type) entry of bag-of-words
        documents (count vectors with a single word), or the vectors of grouped documents themselves."""
        if hasattr(batch, "tokens"):
            return batch.tokens()
        if hasattr(batch, "seq_range"):
            return batch
        raise BnpviError(self.check_data("points"))

    def expected_log_lik(self, obs, post, batch):
        """A :class:`WordLogLik` when the atoms are one-word count vectors of a family with a word table
        (``obs=mult``), else the family's dense (atoms, K) array."""
        if not (hasattr(batch, "word_ids") and hasattr(obs, "word_table")):
            return obs.expected_log_lik(post, self.atoms(batch))
        if int(batch.vocab_size) != obs.V:
            raise BnpviError(f"documents have vocabulary size {batch.vocab_size} but the mult family was built "
                             f"for V={obs.V}")
        return WordLogLik(obs.word_table(post), np.ascontiguousarray(batch.word_ids, dtype=np.int64))

    @staticmethod
    def _tables(batch) -> tuple[np.ndarray, np.ndarray]:
        """Token counts c_u of the atoms and the document boundaries."""
        if hasattr(batch, "word_counts"):
            return np.ascontiguousarray(batch.word_counts, dtype=np.float64), np.ascontiguousarray(batch.doc_range)
        return np.ones(batch.n_atoms), np.ascontiguousarray(batch.seq_range, dtype=np.int64)

    # ---------------------------------------------------------- local step
    @abstractmethod
    def doc_prior(self, params: Params) -> tuple[np.ndarray, float]:
        """The Dirichlet parameters of q(π_d)'s prior part: α β̂_k (K,) and α β̂_> (0 for LDA)."""

    def local_step(self, batch, log_lik, params: Params, warm: np.ndarray | None = None,
                   pairs: np.ndarray | None = None, keep_resp: bool = False) -> Local:
        """Per-document iterations and sparse restarts (thesis Alg. 5.1-5.2) for every document of the batch.

        ``log_lik`` holds c_du E ln φ_k,v_du per entry: a dense (entries, K) array (the family's
        count-weighted value) or a :class:`WordLogLik`; the step uses C_duk = E ln φ_k,v_du.
        ``warm``: the documents' N_d to start from (default: the likelihood). ``pairs``: merge pairs
        whose merged entropies the step computes (``merge_terms``). With a WordLogLik the
        responsibilities are not kept (``resp`` is None; the family's word counts come in the
        ``word_topic`` table) unless ``keep_resp``.
        """
        return self._run(*self._tables(batch), log_lik, *self.doc_prior(params), warm, pairs, keep_resp)

    def warm_state(self, local: Local) -> np.ndarray | None:
        """N_d (documents, K), where the batch's next local step starts when ``warm_start`` is on."""
        return local.tables["doc_counts"] if self.warm_docs else None

    def _run(self, counts, doc_range, log_lik, prior, prior_rest, warm=None, pairs=None, keep_resp=False,
             max_iters=None, n_restarts=None) -> Local:
        """The compiled document-level step on documents given by their atoms' counts and boundaries, with
        the document prior (prior, prior_rest), from N_d = ``warm``, with the model's iteration cap and
        restarts unless ``max_iters`` / ``n_restarts`` say otherwise.

        Local tables: doc_counts N_d, counts c, prior, prior_rest, entropy H_k, and word_topic (V, K)
        for a WordLogLik, pairs and pair_entropy for merge pairs."""
        if isinstance(log_lik, WordLogLik):
            C, word_ids = log_lik.table, log_lik.word_ids
        else:
            C, word_ids, keep_resp = np.ascontiguousarray(log_lik / counts[:, None]), None, True
        init = None if warm is None else np.ascontiguousarray(warm, dtype=np.float64)
        if pairs is not None:
            pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
        out = topic_kernel.doc_topic_step(C, counts, doc_range, np.ascontiguousarray(prior), prior_rest,
                                          init_counts=init, conv_thr=self.conv_thr, restart_iters=self.restart_iters,
                                          max_iters=self.max_iters if max_iters is None else max_iters,
                                          n_restarts=self.n_restarts if n_restarts is None else n_restarts,
                                          word_ids=word_ids, keep_resp=keep_resp, pairs=pairs, sparse_L=self.sparse_L)
        tables = {"doc_counts": out.doc_counts, "counts": counts, "prior": prior, "prior_rest": prior_rest,
                  "entropy": out.entropy}
        if out.word_topic is not None:
            tables["word_topic"] = out.word_topic
        if pairs is not None:
            tables.update(pairs=pairs, pair_entropy=out.pair_entropy)
        return Local(None if out.resp is None else Responsibilities(out.resp, prior.shape[0]), tables)

    def summarize(self, local: Local) -> dict[str, np.ndarray]:
        """The summaries of the module docstring, from N_d and r (vectorised over documents)."""
        t = local.tables
        N_d, prior, rest = t["doc_counts"], t["prior"], float(t["prior_rest"])
        theta = N_d + prior
        total = theta.sum(axis=1) + rest
        psi_total = digamma(total)
        P_d = digamma(theta) - psi_total[:, None]
        D = N_d.shape[0]
        fields = {"N": N_d.sum(axis=0), "H": t["entropy"],
                  "P": P_d.sum(axis=0), "Q": gammaln(theta).sum(axis=0), "G": ((N_d - theta) * P_d).sum(axis=0),
                  "n_docs": np.float64(D), "Q_total": np.float64(gammaln(total).sum())}
        if rest > 0:
            P_rest = digamma(rest) - psi_total
            fields.update(P_rest=np.float64(P_rest.sum()), Q_rest=np.float64(D * gammaln(rest)),
                          G_rest=np.float64(-rest * P_rest.sum()))
        else:
            fields.update(P_rest=np.float64(0.0), Q_rest=np.float64(0.0), G_rest=np.float64(0.0))
        return fields

    # ---------------------------------------------------------------- ELBO
    def doc_terms(self, stats: SuffStats) -> float:
        """L_ent + L_doc without the terms linear in β̂: Σ H − Q_0 + Σ (Q + G) + Q_> + G_>."""
        return float(np.sum(stats["H"]) - stats["Q_total"] + np.sum(stats["Q"]) + np.sum(stats["G"])
                     + stats["Q_rest"] + stats["G_rest"])

    # ------------------------------------------------------------------ moves
    def merge_terms(self, local: Local, pairs: np.ndarray) -> dict[str, np.ndarray]:
        """Per pair (a, b): the merged topic's P, Q, G and H in this batch, with θ'_da = θ_da + θ_db and
        r'_dua = r_dua + r_dub (Hughes, Kim & Sudderth 2015 §5.1; thesis §5.5.1); θ_d. is unchanged.
        H comes from the local step, which must have been given the same ``pairs``."""
        t = local.tables
        if "pairs" not in t or not np.array_equal(t["pairs"], np.asarray(pairs).reshape(-1, 2)):
            raise ValueError("internal error: merge pairs must be given to the topic model's local step")
        N_d, prior, rest = t["doc_counts"], t["prior"], float(t["prior_rest"])
        theta = N_d + prior
        psi_total = digamma(theta.sum(axis=1) + rest)[:, None]
        a, b = np.asarray(pairs, dtype=np.intp).T
        merged = theta[:, a] + theta[:, b]
        P_d = digamma(merged) - psi_total
        return {"P": P_d.sum(axis=0), "Q": gammaln(merged).sum(axis=0),
                "G": ((N_d[:, a] + N_d[:, b] - merged) * P_d).sum(axis=0), "H": t["pair_entropy"]}

    def local_step_without(self, batch, log_lik, params: Params, target: int, local: Local | None = None) -> Local:
        """The local step over the other K − 1 topics, topic ``target``'s prior mass α β̂_target moved to the
        remainder (as the sticks of the model without it have it): a valid q for every document, so a
        delete judged on it is exact (thesis §5.5.2, whole-data form).

        Given the batch's current ``local``, only the documents that used the target (N_dt > ``TARGET_MIN``,
        the target set of the thesis' memoized delete, §5.5.2) are re-inferred from the likelihood; the
        others, which gave the target at most 0.01 tokens, take one iteration from their current N_d
        without it (no restarts). Every document still gets a valid q, so the gain is exact for that q
        (and a lower bound on the gain with every document re-converged), at about the cost of the
        memoized form (which re-runs the target documents only and is exact only after another lap)."""
        prior, prior_rest = self.doc_prior(params)
        keep = np.delete(np.arange(prior.shape[0]), target)
        log_lik, prior, prior_rest = columns(log_lik, keep), prior[keep], prior_rest + float(prior[target])
        counts, doc_range = self._tables(batch)
        if local is None:
            return self._run(counts, doc_range, log_lik, prior, prior_rest)
        N_d = local.tables["doc_counts"]
        return self._refreshed(counts, doc_range, log_lik, prior, prior_rest, N_d[:, target] > TARGET_MIN,
                               N_d[:, keep])

    def local_step_split(self, batch, log_lik, params: Params, targets, local: Local) -> Local:
        """The local step under the globals of a birth (``params`` and ``log_lik`` over K' ≥ K topics: the
        K topics of the batch's current ``local``, each of ``targets`` replaced by its first piece, the other
        pieces appended), given that ``local``: the documents that used a target (N_dt > ``TARGET_MIN`` summed
        over ``targets``) are re-inferred from the likelihood, and the others take one iteration from their
        current N_d, with nothing on the appended pieces (as ``local_step_without`` does for a delete). Every
        document gets a valid q, so a birth judged on it is exact for that q."""
        prior, prior_rest = self.doc_prior(params)
        counts, doc_range = self._tables(batch)
        N_d = local.tables["doc_counts"]
        warm = np.zeros((N_d.shape[0], prior.shape[0]))
        warm[:, :N_d.shape[1]] = N_d
        fresh = N_d[:, np.asarray(targets, dtype=np.intp)].sum(axis=1) > TARGET_MIN
        return self._refreshed(counts, doc_range, log_lik, prior, prior_rest, fresh, warm)

    def _refreshed(self, counts, doc_range, log_lik, prior, prior_rest, fresh: np.ndarray, warm: np.ndarray) -> Local:
        """The local step with the documents ``fresh`` (a mask) re-inferred from the likelihood and the others
        taking one iteration (no restarts) from their N_d ``warm``."""
        parts = [(docs, self._run(*_documents(counts, doc_range, log_lik, docs), prior, prior_rest,
                                  **({} if start_fresh else {"warm": warm[docs], "max_iters": 1, "n_restarts": 0})))
                 for start_fresh, docs in ((True, np.flatnonzero(fresh)), (False, np.flatnonzero(~fresh)))]
        return _joined(parts, counts, doc_range, prior, prior_rest)

    def topic_fit(self, local: Local, log_lik) -> tuple[np.ndarray, np.ndarray]:
        """Per topic, the batch's tokens N_k and Σ_u c_u r_uk C_uk (a birth's b-score is their ratio,
        Hughes 2016 thesis Eq. 4.24)."""
        if isinstance(log_lik, WordLogLik):
            fit = np.einsum("vk,vk->k", local.tables["word_topic"], log_lik.table)
        else:
            fit = np.einsum("uk,uk->k", local.resp.values, log_lik)
        return local.tables["doc_counts"].sum(axis=0), fit

    def decode(self, batch, log_lik: np.ndarray, params: Params) -> np.ndarray:
        """The most likely topic of every atom of ``batch``: a bag-of-words document's most used topic
        argmax_k N_dk, or a grouped vector's argmax_k r_uk."""
        local = self.local_step(batch, log_lik, params)
        best = local.tables["doc_counts"] if hasattr(batch, "tokens") else local.resp.values
        return np.asarray(best.argmax(axis=1), dtype=np.int64)


class HDPTopicAlloc(TopicAlloc):
    """The HDP admixture (module docstring); name "hdp_topic".

    Parameters
    ----------
    gamma : float
        γ > 0, concentration of the top-level sticks.
    alpha, max_iters, conv_thr, n_restarts, restart_iters
        See :class:`TopicAlloc`.
    """

    name = "hdp_topic"
    sort_needs_check = True
    moves = ("birth", "merge", "delete")
    birth_kind = "topic"
    whole_delete = True  # a delete re-runs the local step on every batch without the topic: exact
    # Each tracked delete costs a local step over the corpus, and an accepted one voids the others: on the
    # wiki corpus tracking one per lap instead of three gave the same run (every decision) 13 % faster.
    deletes_per_lap = 1
    # A topic birth re-runs the document step of its target's documents in every batch: on debian/long six a
    # lap already took 345-506 s per 20-lap run from one topic (docs/births.md), so topics keep six places
    # where mixtures, whose births cost a fraction of their lap, take more.
    births_per_lap = 6
    birth_abundance = 100  # a birth of the one topic of a start from K = 1 makes as many as an abundant start (docs/births.md)
    warm_is_params = True  # warm_start gives sticks (ρ, ω), all the global parameters; optimize never lowers f

    def __init__(self, gamma: float = 10.0, alpha: float = 0.5, learn_alpha: bool = False, **local):
        super().__init__(alpha, **local)
        self.gamma = check_number(gamma, "model.gamma")
        if not isinstance(learn_alpha, (bool, np.bool_)):
            raise BnpviError(f"model.learn_alpha must be true or false, got {learn_alpha!r}")
        self.learn_alpha = bool(learn_alpha)

    def concentration(self, params: Params) -> float:
        """α in force: the learned value in ``params`` (``learn_alpha``), else the configured one."""
        return float(params["alpha"]) if "alpha" in params else self.alpha

    def doc_prior(self, params: Params) -> tuple[np.ndarray, float]:
        alpha, beta = self.concentration(params), hdp_top.stick_means(params["rho"])
        return alpha * beta[:-1], float(alpha * beta[-1])

    @staticmethod
    def _doc_sums(stats: SuffStats) -> np.ndarray:
        """(P_1, ..., P_K, P_>): Σ_d E ln π_dk of every topic and of the remainder."""
        return np.append(stats["P"], stats["P_rest"])

    def _coefficients(self, stats: SuffStats, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """c (K+1,) = D everywhere, T = α (P_1, ..., P_K, P_>) (``hdp_top``)."""
        return np.full(stats.K + 1, float(stats["n_docs"])), alpha * self._doc_sums(stats)

    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """(ρ, ω) by a Newton method on the surrogate (thesis §5.3.2; ``hdp_top.optimize``), warm-started when the topics are the same;
        with ``learn_alpha``, alternated with α's closed-form maximiser (:meth:`best_alpha`), each step
        raising the ELBO. The initial globals (no warm start, no document summarised yet) keep near-uniform
        sticks, β̂_k = (1 − min(0.05, 1/K))/K, as the reference implementation starts: the optimum on no
        documents is the prior Beta(1, γ), whose geometric means leave an abundant start's last topics unused
        by the first local step."""
        K = stats.K
        if warm is not None and "rho" in warm and np.shape(warm["rho"]) == (K,):
            rho, omega = np.asarray(warm["rho"], dtype=np.float64), np.asarray(warm["omega"], dtype=np.float64)
        else:
            rho, omega = hdp_top.uniform_sticks(K, self.gamma)
            if float(stats["n_docs"]) == 0.0:  # the initial globals: near-uniform sticks (docs/topics.md)
                return {"rho": rho, "omega": omega, "alpha": np.float64(self.alpha)} if self.learn_alpha else \
                    {"rho": rho, "omega": omega}
        alpha = self.concentration(warm) if warm is not None else self.alpha
        for _ in range(ALPHA_ROUNDS if self.learn_alpha else 1):
            c, T = self._coefficients(stats, alpha)
            with blas_single_thread():
                rho, omega = hdp_top.optimize(c, T, self.gamma, rho, omega)
            if self.learn_alpha:
                alpha = self.best_alpha(stats, rho, alpha)
        return {"rho": rho, "omega": omega, "alpha": np.float64(alpha)} if self.learn_alpha else \
            {"rho": rho, "omega": omega}

    def best_alpha(self, stats: SuffStats, rho: np.ndarray, alpha: float) -> float:
        """argmax_α of the ELBO for fixed q(π_d) and q(u): its terms in α are D K ln α + α Σ_m β̂_m P_m
        (the surrogate top term, Hughes 2016 thesis Eq. 5.25, and L_doc, Eq. 5.47), concave, maximal at
        α = D K / (−Σ_m β̂_m P_m) (empirical Bayes, as Minka's fixed point for LDA's α). ``alpha`` is kept
        when the sums give no finite maximiser (no documents yet)."""
        D, K = float(stats["n_docs"]), stats.K
        slope = float(hdp_top.stick_means(rho) @ self._doc_sums(stats))
        if D <= 0 or not slope < 0:
            return alpha
        return D * K / -slope

    def warm_start(self, params: Params, sources) -> dict:
        """Sticks for an edited topic set: a topic's β̂ is the sum of its sources'; new topics share half the
        remainder; ω is the first source's (1 + γ for new topics); a learned α is kept."""
        sticks = hdp_top.edited_sticks(params, sources, self.gamma)
        return self._with_alpha({"rho": sticks["rho"], "omega": sticks["omega"]}, params)

    @staticmethod
    def _with_alpha(new: dict, params: Params) -> dict:
        """``new`` with the learned α of ``params``, if any."""
        return dict(new, alpha=params["alpha"]) if "alpha" in params else new

    def split_params(self, params: Params, target: int, weights: np.ndarray) -> dict:
        """Sticks of a birth's candidate: topic ``target``'s β̂_t shared as β̂_t w_0 (kept at ``target``) and
        β̂_t w_j for J' − 1 topics appended after the K others; the remainder unchanged (Hughes 2016
        thesis §5.5.3). ω of the appended topics is 1 + γ."""
        beta = hdp_top.stick_means(params["rho"])
        share = beta[target] * np.asarray(weights, dtype=np.float64)
        means = np.concatenate([beta[:-1], share[1:]])
        means[target] = share[0]
        omega = np.concatenate([params["omega"], np.full(share.shape[0] - 1, 1.0 + self.gamma)])
        return self._with_alpha({"rho": hdp_top.sticks_from_means(means), "omega": omega}, params)

    def _top(self, D: float, rho: np.ndarray, omega: np.ndarray, alpha: float):
        """The q(u) part of L_top: D K ln α + f(ρ, ω) without the terms linear in β̂ (one value per row of
        (P, K) sticks)."""
        K = rho.shape[-1]
        return D * K * np.log(alpha) + hdp_top.surrogate(rho, omega, np.full(K + 1, D), np.zeros(K + 1), self.gamma)

    def merge_score(self, stats: SuffStats, params: Params, pairs: np.ndarray) -> np.ndarray:
        """The change of the q(u) part of L_top when merging each pair, the sticks merged by summing β̂
        (the part of the gain computable from global quantities, less the terms in P; a ranking
        heuristic, thesis §5.5.1: a topic model's document terms can move either way)."""
        D, K = float(stats["n_docs"]), stats.K
        pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
        alpha = self.concentration(params)
        base = self._top(D, params["rho"], params["omega"], alpha)
        if pairs.shape[0] == 0:
            return np.zeros(0)
        # the merged sticks of a block of pairs at once, as warm_start makes them: β̂_a + β̂_b at a, b removed,
        # ω of a; blocks of at most 500k values (4 MB) per array
        beta, cols = hdp_top.stick_means(params["rho"]), np.arange(K - 1)
        scores = np.empty(pairs.shape[0])
        step = max(1, 500_000 // max(K, 1))
        for lo in range(0, pairs.shape[0], step):
            a, b = pairs[lo:lo + step, 0], pairs[lo:lo + step, 1]
            keep = cols[None, :] + (cols[None, :] >= b[:, None])
            merged = beta[keep]
            merged[np.arange(a.shape[0]), a] += beta[b]
            scores[lo:lo + step] = self._top(D, hdp_top.sticks_from_means(merged), params["omega"][keep], alpha) - base
        return scores

    def elbo(self, stats: SuffStats, params: Params) -> float:
        """L_ent + L_doc + L_top (module docstring), exact for any (ρ, ω) and α."""
        alpha = self.concentration(params)
        c, T = self._coefficients(stats, alpha)
        top = hdp_top.surrogate(params["rho"], params["omega"], c, T, self.gamma)
        return self.doc_terms(stats) + float(stats["n_docs"]) * stats.K * np.log(alpha) + top

    def export(self, params: Params) -> dict[str, np.ndarray]:
        """E[β] (the topics' corpus-wide probabilities; the last entry is the mass beyond K) and α."""
        return {"top_probs": hdp_top.stick_means(params["rho"]), "alpha": np.float64(self.concentration(params))}


class LDAAlloc(TopicAlloc):
    """Latent Dirichlet allocation with K topics and π_d ~ Dir(α/K, ..., α/K); name "lda".

    Parameters
    ----------
    alpha : float
        α > 0, the total concentration (each topic gets α/K, as the finite models here do).
    max_iters, conv_thr, n_restarts, restart_iters
        See :class:`TopicAlloc`.
    """

    name = "lda"
    finite = True

    def __init__(self, alpha: float = 0.5, **local):
        super().__init__(alpha, **local)

    def doc_prior(self, params: Params) -> tuple[np.ndarray, float]:
        return np.asarray(params["doc_prior"], dtype=np.float64), 0.0

    def global_step(self, stats: SuffStats, warm: Params | None = None) -> dict:
        """Nothing to learn at the top: the document prior is fixed at α/K."""
        return {"doc_prior": np.full(stats.K, self.alpha / stats.K)}

    def elbo(self, stats: SuffStats, params: Params) -> float:
        """L_ent + L_doc with the prior normaliser D c_Dir(α/K, ..., α/K)."""
        prior = np.asarray(params["doc_prior"], dtype=np.float64)
        return (self.doc_terms(stats) + float(stats["n_docs"]) * float(c_dir(prior))
                + float(prior @ stats["P"]))

    def export(self, params: Params) -> dict[str, np.ndarray]:
        return {"doc_prior": np.asarray(params["doc_prior"])}
