from bnpvi.stats.ids import ClusterIds
from bnpvi.stats.resp import Responsibilities
from bnpvi.stats.suffstats import ENTROPY, ENTROPY_TABLE, PER_CLUSTER, TABLE, TOTAL, FieldSpec, SuffStats

__all__ = ["ClusterIds", "ENTROPY", "ENTROPY_TABLE", "FieldSpec", "PER_CLUSTER", "Responsibilities", "SuffStats",
           "TABLE", "TOTAL"]
