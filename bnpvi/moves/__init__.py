"""Birth, merge and delete proposals for memoized VI (spec 01 §5-§8).

Each move builds a candidate set of whole-data summaries and is accepted only
when the exact ELBO L*(candidate) exceeds L*(current); the per-batch memo
caches are rewritten so the next lap's cache swap stays exact.
"""
from bnpvi.moves.schedule import MoveEvent, MoveSchedule

__all__ = ["MoveEvent", "MoveSchedule"]
