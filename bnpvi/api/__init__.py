"""The Python face of bnpvi: :func:`load` a run directory and apply it (:mod:`bnpvi.api.fitted`); the
scikit-learn estimators DPMixture and FiniteMixture are in :mod:`bnpvi.api.estimators` (not imported here,
so that loading a run needs no scikit-learn)."""
from bnpvi.api.fitted import FittedModel, load

__all__ = ["FittedModel", "load"]
