"""Apply a trained model: :func:`load` a run directory, then predict, score or write assignments."""
from bnpvi.api.fitted import FittedModel, load

__all__ = ["FittedModel", "load"]
