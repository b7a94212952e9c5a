"""EM: MAP point estimates of a finite mixture or a finite HMM (``alg=em``; Hughes 2016 thesis §2.3.3, §2.4).

The model is the configured one with point estimates in place of posteriors
(:func:`point_model`: ``bnpvi.obs.point.PointFamily`` and ``bnpvi.alloc.point``), so a lap is
exactly full-data VB's (``FullVB``): the E-step over every batch under fixed parameters,
summaries added in batch order, then the M-step, the modes of the conjugate posteriors of
those summaries. Soft EM (the default) maximises the log posterior

    ln p(θ | x) + const = Σ_n ln Σ_k π_k p(x_n | φ_k) + ln p(π) + Σ_k ln p(φ_k)

(an HMM: Σ_d ln p(x_d | π, φ) by the forward pass); hard EM (``alg.hard=true``) is Bregman
k-means (thesis Alg. 2.1), coordinate ascent on J of thesis Eq. 2.74 with the point estimates of
Eq. 2.64 and 2.77 (an HMM: Viterbi training, J with the Viterbi paths' ln p(x_d, z_d | π, φ)). Neither step can lower its objective, so the trace's
``log_posterior`` never decreases; it is the objective of the parameters the lap's E-step ran
under (those of the previous M-step), as each lap's summaries give it, and the ``elbo``
column repeats it.
"""
from __future__ import annotations

from bnpvi.alloc.hmm import FiniteHMMAlloc
from bnpvi.alloc.mixture import FiniteMixAlloc
from bnpvi.alloc.point import PointHMM, PointMixture
from bnpvi.errors import BnpviError
from bnpvi.learn.vb import FullVB
from bnpvi.model import Globals, Model
from bnpvi.obs.point import PointFamily
from bnpvi.stats import SuffStats


def point_model(alloc, obs, hard: bool = False) -> Model:
    """The model of ``alloc`` and ``obs`` with MAP point estimates (hard: Bregman k-means, modes in natural
    coordinates); a one-line BnpviError for a model EM does not fit or a prior without an interior mode."""
    if alloc.sparse_L is not None:
        raise BnpviError("alg=em computes every responsibility; use alg.sparse_L=null")
    if isinstance(alloc, FiniteMixAlloc):
        point_alloc = PointMixture(alloc.gamma, natural=hard, hard=hard)
    elif isinstance(alloc, FiniteHMMAlloc):
        point_alloc = PointHMM(alloc, natural=hard, hard=hard)
    else:
        raise BnpviError(f"alg=em fits model=finite_mix or model=finite_hmm, not model={alloc.name}")
    return Model(point_alloc, PointFamily(obs, natural=hard))


def log_posterior(model: Model, stats: SuffStats, globals_: Globals) -> float:
    """The EM objective of the point estimates ``globals_`` from ``stats``, the summaries of an E-step under
    them: their ``loglik`` (module docstring) + ln p(π̂) + Σ_k ln p(φ̂_k)."""
    return (float(stats["loglik"]) + model.alloc.log_prior(globals_.alloc)
            + float(model.obs.log_prior(globals_.obs).sum()))


class EM(FullVB):
    """Full-data EM on the point-estimate model (module docstring); same batches, state and resume as ``FullVB``."""

    name = "em"
    objective = "log_posterior"

    def __init__(self, model, store, cfg, rng, globals_, ids, pool=None):
        if not isinstance(model.obs, PointFamily):
            raise BnpviError("alg=em needs the point-estimate model (bnpvi.learn.build.build_model makes it)")
        problem = model.alloc.prior_problem(globals_.K)
        if problem:
            raise BnpviError(problem)
        # the point estimates of the given summaries (init=from_run may hand over a VB run's parameters)
        super().__init__(model, store, cfg, rng, model.global_step(globals_.stats), ids, pool)

    def finish_lap(self):
        """The objective of the current estimates from the lap's summaries, then the M-step and the sort by size."""
        value = log_posterior(self.model, self.accum, self.globals)
        self.globals = self.model.global_step(self.accum, self.globals.alloc)
        self.accum = None
        self.sort_clusters()
        return value, self.globals.stats.N.copy()
