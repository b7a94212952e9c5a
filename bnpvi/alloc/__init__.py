"""Allocation models: DP and finite mixtures, the finite sticky HMM and the sticky HDP-HMM, HDP and LDA topic models,
finite and HDP assortative MMSBs (graphs)."""
from bnpvi.alloc.base import AllocModel, Local
from bnpvi.alloc.hdp_hmm import HDPHMMAlloc
from bnpvi.alloc.hmm import FiniteHMMAlloc
from bnpvi.alloc.mixture import DPMixAlloc, FiniteMixAlloc
from bnpvi.alloc.mmsb import FiniteMMSBAlloc, HDPMMSBAlloc
from bnpvi.alloc.topic import HDPTopicAlloc, LDAAlloc

__all__ = ["AllocModel", "DPMixAlloc", "FiniteHMMAlloc", "FiniteMixAlloc", "FiniteMMSBAlloc", "HDPHMMAlloc",
           "HDPMMSBAlloc", "HDPTopicAlloc",
           "LDAAlloc", "Local"]
