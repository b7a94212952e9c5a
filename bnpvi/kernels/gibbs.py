"""Python face of the compiled collapsed Gibbs sweeps of truncation-free SVI (csrc/gibbs.pyx).

Wang & Blei 2012 (NIPS), Alg. 2: the local step of truncation-free stochastic VI samples the
assignments of a minibatch from a collapsed Gibbs sampler in which the current q(θ) (and the
sticks' q) act as the prior, so new components can appear during the sweep (§2.2).

* :func:`dp_doc_sweep` — a DP mixture of multinomials, one component per document (§2.3): document
  i goes to component k with probability ∝ E[π_k | c] · p(x_i | λ_k + n_k), the Dirichlet-multinomial
  predictive c_Dir(λ_k + n_k) − c_Dir(λ_k + n_k + x_i) under q(θ_k) = Dir(λ_k) and the minibatch's
  other documents n_k; E[π_k | c] = (u_k + c_k)/(u_k + v_k + c_k + c_>k) Π_{l<k} (v_l + c_>l)/(u_l + v_l + c_l + c_>l)
  from the sticks q(π̄_k) = Beta(u_k, v_k) and the minibatch's document counts c. A new component has
  weight Π_{l<T} (v_l + c_>l)/(…) · exp(``log_new_factor``) · the prior predictive under Dir(η).
* :func:`hdp_token_sweep` — the HDP topic model, one token at a time (supplement S.2.2).
* :func:`antoniak_tables` — the table counts of the HDP's sticks (supplement S.2, Eq. 1-3).
* :func:`dp_point_sweep` — a DP mixture of points of a family with a closed-form posterior predictive
  (Beta-Bernoulli; Student-t for the Gaussian families), one component per point.

Every random choice takes one pre-drawn uniform, so a sweep is a deterministic function of its
arguments; :mod:`bnpvi.kernels.gibbs_reference` computes the same sweeps in plain NumPy and the
tests check that both draw the same samples. The state arrays are changed in place.
"""
from __future__ import annotations

import numpy as np

from bnpvi.kernels._checks import KernelInputError, check_array, compiled

_ext = compiled("_gibbs", "Gibbs sweeps")

__all__ = ["FAMILY_CODES", "antoniak_tables", "dp_doc_sweep", "dp_point_sweep", "hdp_token_sweep"]

FAMILY_CODES = {"bern": 0, "diag_gauss": 1, "zm_gauss": 2, "gauss": 3}
"""The observation families :func:`dp_point_sweep` knows, by their ``obs`` name."""


def _check_state(arrays: dict, specs: dict) -> None:
    """Each array of ``arrays`` has the dtype and number of dimensions ``specs`` gives, is C-contiguous and
    writeable where it is state."""
    for name, (ndim, dtype, writes) in specs.items():
        a = check_array(arrays[name], name, ndim, dtype)
        if writes and not a.flags.writeable:
            raise KernelInputError(f"{name} is read-only")


def _check_uniforms(uniforms: np.ndarray, n: int, name: str) -> None:
    if uniforms.shape[0] < n:
        raise KernelInputError(f"{name} needs {n} uniforms, got {uniforms.shape[0]}")


def dp_doc_sweep(word_loc, counts, doc_range, lam, lam_total, table, table_total, docs_in, stick_u, stick_v, z,
                 uniforms, T: int, K_global: int, eta: float, V: int, log_new_factor: float, impl=None) -> int:
    """One collapsed Gibbs sweep over the documents of a DP-mixture minibatch (module docstring).

    Parameters
    ----------
    word_loc, counts, doc_range : (nnz,) int64, (nnz,) float64, (documents + 1,) int64
        The minibatch's documents in CSR form with minibatch-local word ids 0..U−1.
    lam, lam_total : (Kcap, U), (Kcap,) float64
        λ_kw of q(θ_k) at the minibatch's words and Σ_w λ_kw over the whole vocabulary; rows
        ≥ K_global hold the prior η and V η.
    table, table_total, docs_in : (Kcap, U), (Kcap,), (Kcap,) float64, state
        The minibatch's word counts n_kw, token counts n_k and document counts c_k per component.
    stick_u, stick_v : (Kcap,) float64
        q(π̄_k) = Beta(u_k, v_k); rows ≥ K_global hold the prior (1, a).
    z : (documents,) int64, state
        Each document's component (−1: not placed yet; the first pass places them one by one).
    uniforms : (documents,) float64 in (0, 1)
    T : int
        Components in use (K_global ≤ T ≤ Kcap); a new one is made only while T < Kcap.
    K_global : int
        Components of the global q (the rest were made in this minibatch; one that empties is dropped and
        the last new one takes its place).
    eta, V : float, int
        The prior pseudo-count η and the vocabulary size (V η = lam_total of a new component).
    log_new_factor : float
        ln of the factor on a new component's stick weight (0: the whole remaining mass).

    Returns
    -------
    int : the new T.
    """
    ext = _ext if impl is None else impl
    _check_state(dict(word_loc=word_loc, counts=counts, doc_range=doc_range, lam=lam, lam_total=lam_total,
                      table=table, table_total=table_total, docs_in=docs_in, stick_u=stick_u, stick_v=stick_v, z=z,
                      uniforms=uniforms),
                 dict(word_loc=(1, np.int64, False), counts=(1, np.float64, False), doc_range=(1, np.int64, False),
                      lam=(2, np.float64, False), lam_total=(1, np.float64, False), table=(2, np.float64, True),
                      table_total=(1, np.float64, True), docs_in=(1, np.float64, True),
                      stick_u=(1, np.float64, False), stick_v=(1, np.float64, False), z=(1, np.int64, True),
                      uniforms=(1, np.float64, False)))
    Kcap = table.shape[0]
    if lam.shape != table.shape or not (lam_total.shape[0] == table_total.shape[0] == docs_in.shape[0]
                                        == stick_u.shape[0] == stick_v.shape[0] == Kcap):
        raise KernelInputError(f"component arrays disagree on (Kcap, U) = {table.shape}")
    if z.shape[0] != doc_range.shape[0] - 1:
        raise KernelInputError(f"z has {z.shape[0]} entries for {doc_range.shape[0] - 1} documents")
    if not 0 <= K_global <= T <= Kcap:
        raise KernelInputError(f"need 0 <= K_global <= T <= Kcap, got {K_global}, {T}, {Kcap}")
    _check_uniforms(uniforms, z.shape[0], "dp_doc_sweep")
    return int(ext.dp_doc_sweep(word_loc, counts, doc_range, lam, lam_total, table, table_total, docs_in,
                                stick_u, stick_v, z, uniforms, int(T), int(K_global), float(eta), float(V) * float(eta),
                                float(log_new_factor)))


def hdp_token_sweep(tok_word, tok_doc, z, doc_topic, topic_word, topic_total, lam, lam_total, pi, pi_rest: float,
                    u_choice, u_stick, T: int, b: float, a: float, V: int, impl=None) -> tuple[int, float]:
    """One collapsed Gibbs sweep over the tokens of an HDP minibatch (Wang & Blei 2012 supplement S.2.2):

        p(z_dn = k) ∝ (n_dk + b π_k) (n_kw + λ_kw) / (n_k + Σ_w λ_kw)   (k < T),
        p(z_dn = new) ∝ b π_> / V,

    counts of the minibatch without the token; a new topic's stick π̄ ~ Beta(1, a) by inversion of
    ``u_stick`` (π̄ = 1 − U^(1/a)), π_T = π̄ π_>, π_> ← (1 − π̄) π_>. Rows ≥ the global K of ``lam``
    hold η.

    Parameters
    ----------
    tok_word, tok_doc : (tokens,) int64 — minibatch-local word id and document of every token.
    z : (tokens,) int64, state — topics (−1: not placed yet).
    doc_topic, topic_word, topic_total : (documents, Kcap), (Kcap, U), (Kcap,) float64, state.
    lam, lam_total : (Kcap, U), (Kcap,) float64.
    pi : (Kcap,) float64, state; pi_rest : float — the sticks' π_k and the mass beyond T.
    u_choice, u_stick : (tokens,) float64 uniforms in (0, 1).
    T : int — topics in use; b, a : document and top concentrations; V : vocabulary size.

    Returns
    -------
    (T, pi_rest) after the sweep.
    """
    ext = _ext if impl is None else impl
    _check_state(dict(tok_word=tok_word, tok_doc=tok_doc, z=z, doc_topic=doc_topic, topic_word=topic_word,
                      topic_total=topic_total, lam=lam, lam_total=lam_total, pi=pi, u_choice=u_choice,
                      u_stick=u_stick),
                 dict(tok_word=(1, np.int64, False), tok_doc=(1, np.int64, False), z=(1, np.int64, True),
                      doc_topic=(2, np.float64, True), topic_word=(2, np.float64, True),
                      topic_total=(1, np.float64, True), lam=(2, np.float64, False),
                      lam_total=(1, np.float64, False), pi=(1, np.float64, True), u_choice=(1, np.float64, False),
                      u_stick=(1, np.float64, False)))
    Kcap = topic_word.shape[0]
    if lam.shape != topic_word.shape or doc_topic.shape[1] != Kcap or pi.shape[0] != Kcap:
        raise KernelInputError(f"topic arrays disagree on (Kcap, U) = {topic_word.shape}")
    if not 0 <= T <= Kcap:
        raise KernelInputError(f"need 0 <= T <= Kcap, got {T}, {Kcap}")
    n = z.shape[0]
    if tok_word.shape[0] != n or tok_doc.shape[0] != n:
        raise KernelInputError("tok_word, tok_doc and z must have one entry per token")
    _check_uniforms(u_choice, n, "hdp_token_sweep")
    _check_uniforms(u_stick, n, "hdp_token_sweep")
    T, rest = ext.hdp_token_sweep(tok_word, tok_doc, z, doc_topic, topic_word, topic_total, lam, lam_total, pi,
                                  float(pi_rest), u_choice, u_stick, int(T), float(b), float(a), 1.0 / float(V))
    return int(T), float(rest)


def antoniak_tables(doc_topic, pi, b: float, uniforms, T: int, impl=None) -> np.ndarray:
    """(T,) Σ_d s_dk, s_dk = Σ_{i=1}^{n_dk} 1[U < b π_k / (b π_k + i − 1)], the number of tables of topic k in
    document d under the Antoniak distribution (Wang & Blei 2012 supplement S.2, Eq. 3; the Bernoulli
    identity avoids Stirling numbers). One uniform per token, used document by document, topic by topic."""
    ext = _ext if impl is None else impl
    _check_state(dict(doc_topic=doc_topic, pi=pi, uniforms=uniforms),
                 dict(doc_topic=(2, np.float64, False), pi=(1, np.float64, False), uniforms=(1, np.float64, False)))
    _check_uniforms(uniforms, int(round(float(doc_topic[:, :T].sum()))), "antoniak_tables")
    out = np.zeros(max(int(T), 0))
    ext.antoniak_tables(doc_topic, pi, float(b), uniforms, int(T), out)
    return out


def dp_point_sweep(family: str, Y, N, Sx, Sxx, kappa0: float, nu0: float, B0, lam1: float, lam0: float, docs_in,
                   stick_u, stick_v, z, uniforms, T: int, K_global: int, log_new_factor: float, impl=None) -> int:
    """One collapsed Gibbs sweep over the points of a DP-mixture minibatch (Wang & Blei 2012 §2.2).

    Point i goes to component k with probability ∝ E[π_k | c] · p(y_i | N_k, Sx_k, Sxx_k), the weights as in
    :func:`dp_doc_sweep` and p the family's posterior predictive given the component's statistics without
    the point (its global effective statistics plus the minibatch's other points):

    * ``bern``: Π_d μ̂_d^y_d (1 − μ̂_d)^(1 − y_d), μ̂_d = (λ̄₁ + Sx_d)/(λ̄₁ + λ̄₀ + N);
    * ``gauss`` (y relative to the prior mean): with κ̂ = κ̄ + N, ν̂ = ν̄ + N, μ = Sx/κ̂,
      B̂ = B̄ + Sxx − κ̂ μ μᵀ and c = κ̂/(κ̂ + 1),
      ln p = lnΓ((ν̂+1)/2) − lnΓ((ν̂+1−D)/2) − (D/2) ln π + (D/2) ln c − ½ ln|B̂|
             − ((ν̂+1)/2) ln(1 + c (y−μ)ᵀB̂⁻¹(y−μ))
      (the ratio of the family's log marginals before and after adding y, Hughes 2016 thesis Eq. 3.42);
    * ``zm_gauss``: the same with μ = 0, c = 1 and no (D/2) ln c;
    * ``diag_gauss``: the sum over dimensions of the one-dimensional ``gauss`` form (B̂ = b̂_d).

    Parameters
    ----------
    family : str, a key of :data:`FAMILY_CODES`
    Y : (points, D) float64 — the minibatch (relative to the prior mean for gauss and diag_gauss).
    N, Sx, Sxx : (Kcap + 1,), (Kcap + 1, D), (Kcap + 1, D, D) float64, state — every component's statistics
        (Sxx: the lower triangle; diag_gauss: the diagonal; bern: unused); row Kcap stays 0 (the prior).
    kappa0, nu0, B0, lam1, lam0 — the prior (B0: B̄, or diag(b̄) for diag_gauss).
    docs_in, stick_u, stick_v, z, uniforms, T, K_global, log_new_factor — as :func:`dp_doc_sweep`.

    Returns
    -------
    int : the new T.
    """
    ext = _ext if impl is None else impl
    if family not in FAMILY_CODES:
        raise KernelInputError(f"dp_point_sweep has no family {family!r}; choose one of {sorted(FAMILY_CODES)}")
    _check_state(dict(Y=Y, N=N, Sx=Sx, Sxx=Sxx, B0=B0, docs_in=docs_in, stick_u=stick_u, stick_v=stick_v, z=z,
                      uniforms=uniforms),
                 dict(Y=(2, np.float64, False), N=(1, np.float64, True), Sx=(2, np.float64, True),
                      Sxx=(3, np.float64, True), B0=(2, np.float64, False), docs_in=(1, np.float64, True),
                      stick_u=(1, np.float64, False), stick_v=(1, np.float64, False), z=(1, np.int64, True),
                      uniforms=(1, np.float64, False)))
    Kcap, D = N.shape[0] - 1, Y.shape[1]
    if Sx.shape != (Kcap + 1, D) or Sxx.shape != (Kcap + 1, D, D) or B0.shape != (D, D):
        raise KernelInputError(f"statistics must be ({Kcap + 1}, {D}) and ({Kcap + 1}, {D}, {D}), B0 ({D}, {D})")
    if not (docs_in.shape[0] == stick_u.shape[0] == stick_v.shape[0] == Kcap):
        raise KernelInputError(f"docs_in, stick_u and stick_v must have Kcap = {Kcap} entries")
    if z.shape[0] != Y.shape[0]:
        raise KernelInputError(f"z has {z.shape[0]} entries for {Y.shape[0]} points")
    if not 0 <= K_global <= T <= Kcap:
        raise KernelInputError(f"need 0 <= K_global <= T <= Kcap, got {K_global}, {T}, {Kcap}")
    _check_uniforms(uniforms, z.shape[0], "dp_point_sweep")
    return int(ext.dp_point_sweep(FAMILY_CODES[family], Y, N, Sx, Sxx, float(kappa0), float(nu0), B0, float(lam1),
                                  float(lam0), docs_in, stick_u, stick_v, z, uniforms, int(T), int(K_global),
                                  float(log_new_factor)))
