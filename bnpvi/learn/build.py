"""The model of a composed config: what a training run and a loaded run directory both build."""
from __future__ import annotations

from hydra.errors import InstantiationException
from hydra.utils import instantiate as hydra_instantiate
from omegaconf import DictConfig, OmegaConf

from bnpvi.config import register_resolvers
from bnpvi.errors import BnpviError
from bnpvi.learn.em import point_model
from bnpvi.model import Model


def instantiate(node, **kwargs):
    """Hydra's ``instantiate``, with a model's or family's own one-line BnpviError (a setting it refuses)
    raised as it is rather than inside Hydra's wrapper."""
    try:
        return hydra_instantiate(node, **kwargs)
    except InstantiationException as err:
        if isinstance(err.__cause__, BnpviError):
            raise err.__cause__ from None
        raise


def make_alloc(cfg: DictConfig):
    """The allocation model of the ``model`` node (Hydra ``instantiate``), with the local step's
    sparsity ``alg.sparse_L``."""
    register_resolvers()  # a config read back from a run directory may use them
    alloc = instantiate(cfg.model)
    alloc.use_sparse(OmegaConf.select(cfg, "alg.sparse_L", default=None))
    return alloc


def build_model(cfg: DictConfig, alloc, kind: str, D: int, moments) -> Model:
    """The model of ``alloc`` and the ``obs`` node for data of ``kind`` and dimension ``D`` whose whole-data
    ``moments`` set the prior's data-driven defaults (with ``alg=em``, its MAP point-estimate form,
    :func:`bnpvi.learn.em.point_model`); a one-line BnpviError when the kind does not fit."""
    problem = alloc.check_data(kind)
    if problem:
        raise BnpviError(problem)
    if hasattr(alloc, "adapt"):  # a graph model takes its node count; its family sees one dimension
        D = alloc.adapt(kind, D)
    obs = instantiate(cfg.obs, D=D, moments=moments)
    problem = obs.check_data(kind)
    if problem:
        raise BnpviError(problem)
    if OmegaConf.select(cfg, "alg.name") == "em":  # MAP point estimates in place of posteriors
        return point_model(alloc, obs, hard=bool(OmegaConf.select(cfg, "alg.hard", default=False)))
    return Model(alloc, obs)
