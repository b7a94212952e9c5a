from bnpvi.alloc.mixture import ALLOC_MODELS, DPMixAlloc, FiniteMixAlloc, make_alloc

__all__ = ["ALLOC_MODELS", "DPMixAlloc", "FiniteMixAlloc", "make_alloc"]
