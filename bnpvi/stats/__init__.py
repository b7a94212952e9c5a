from bnpvi.stats.suffstats import SuffStats

__all__ = ["SuffStats"]
