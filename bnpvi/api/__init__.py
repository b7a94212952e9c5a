"""The Python face of bnpvi: :func:`load` a run directory and apply it (:mod:`bnpvi.api.fitted`, one module per
model family: :mod:`~bnpvi.api.fitted_mixture`, :mod:`~bnpvi.api.fitted_topics`, :mod:`~bnpvi.api.fitted_hmm`).
The scikit-learn estimators are in :mod:`bnpvi.api.estimators` (not imported here, so that loading a run needs
no scikit-learn)."""
from bnpvi.api.fitted import FittedModel, load
from bnpvi.api.fitted_graph import FittedGraphModel
from bnpvi.api.fitted_hmm import FittedHMM
from bnpvi.api.fitted_mixture import FittedMixture
from bnpvi.api.fitted_topics import FittedTopicModel

__all__ = ["FittedGraphModel", "FittedHMM", "FittedMixture", "FittedModel", "FittedTopicModel", "load"]
