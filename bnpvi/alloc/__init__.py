"""Allocation models: DP and finite mixtures, the finite sticky HMM."""
from bnpvi.alloc.base import AllocModel, Local
from bnpvi.alloc.hmm import FiniteHMMAlloc
from bnpvi.alloc.mixture import DPMixAlloc, FiniteMixAlloc

__all__ = ["AllocModel", "DPMixAlloc", "FiniteHMMAlloc", "FiniteMixAlloc", "Local"]
