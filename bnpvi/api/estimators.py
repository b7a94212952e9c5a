"""The scikit-learn estimators, one per model: thin classes over the config and the runner of ``bnpvi-train``.

``bnpvi.DPMixture(gamma=5, n_laps=50).fit(X)`` is the ``bnpvi-train model=dp_mix`` run of the
same config on a batch file of ``X`` (:class:`~bnpvi.api.estimator.Estimator`, which also lists
the keywords), and its predictions are those of the run directory loaded by :func:`bnpvi.load`.

========================  ==================  ========================================================
estimator                 ``fit`` takes       predicts
========================  ==================  ========================================================
DPMixture, FiniteMixture  (N, D) points       ``predict``, ``predict_proba``, ``score_samples``, ``score``
HDPTopicModel, LDA        (N, V) counts       ``transform``, ``topics_``, ``top_words``, ``score``
HDPHMM, FiniteHMM         [(T_i, D) arrays]   ``predict``, ``predict_proba``, ``score``
HDPMMSB, FiniteMMSB       (N, N) adjacency    ``predict`` (main communities), ``predict_proba`` (node pairs)
========================  ==================  ========================================================
"""
from bnpvi.api.estimator import DATA_FILE, Estimator
from bnpvi.api.graph_estimators import HDPMMSB, FiniteMMSB
from bnpvi.api.hmm_estimators import HDPHMM, FiniteHMM
from bnpvi.api.mixture_estimators import DPMixture, FiniteMixture
from bnpvi.api.topic_estimators import LDA, HDPTopicModel

__all__ = ["DATA_FILE", "DPMixture", "Estimator", "FiniteHMM", "FiniteMixture", "FiniteMMSB", "HDPHMM",
           "HDPMMSB", "HDPTopicModel", "LDA"]
