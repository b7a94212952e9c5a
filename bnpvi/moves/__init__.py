"""Birth, merge and delete proposals for memoized VI (Hughes 2016 thesis Ch. 4).

Each move plans at the start of a lap, tracks what it needs inside every batch's
work, and decides at the end of the lap by the exact whole-data ELBO; an accepted
move is an :class:`~bnpvi.moves.base.Edit` that the driver applies to every memo
cache, the aggregate, the cluster ids and the global parameters in one place.
"""
from bnpvi.moves.base import Edit, MoveEvent
from bnpvi.moves.schedule import MOVES, MoveSchedule

__all__ = ["Edit", "MOVES", "MoveEvent", "MoveSchedule"]
