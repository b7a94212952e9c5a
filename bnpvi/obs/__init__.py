"""Observation families and the registry that builds one from the ``obs`` config node.

Config keys of the Gaussian families (``obs`` node): ``name`` (one of ``FAMILIES``),
``sF`` (default 1.0: prior expected covariance = sF × data covariance scale), ``prior_cov``
("eye" | "diag" [default] | "cov"), ``nu`` (None → D + 2), ``kappa`` (default 1e-4),
``mean`` (None → data mean, or a list of D numbers). See ``bnpvi.obs._wishart.prior_from_config``.
The auto-regressive family ``ar_gauss`` has ``nu``, ``sF``, ``prior_cov`` (of the first differences),
``sV`` and ``mean_matrix`` instead (``bnpvi.obs.ar_gauss.ARGauss``).
"""
from __future__ import annotations

from typing import Mapping

from bnpvi.errors import BnpviError
from bnpvi.obs.ar_gauss import ARGauss
from bnpvi.obs.base import DataMoments, ObsFamily, Posterior
from bnpvi.obs.bern import Bern
from bnpvi.obs.diag_gauss import DiagGauss
from bnpvi.obs.gauss import Gauss
from bnpvi.obs.link import LinkStrength
from bnpvi.obs.mult import Mult
from bnpvi.obs.zm_gauss import ZeroMeanGauss

FAMILIES: dict[str, type[ObsFamily]] = {"gauss": Gauss, "diag_gauss": DiagGauss, "zm_gauss": ZeroMeanGauss,
                                         "mult": Mult, "bern": Bern, "ar_gauss": ARGauss,
                                         "link": LinkStrength}


def make_obs(cfg: Mapping, D: int, moments: DataMoments | None) -> ObsFamily:
    """The family named by ``cfg["name"]`` with the other keys of ``cfg`` as its options (Python API)."""
    options = dict(cfg)
    name = options.pop("name", None)
    if name not in FAMILIES:
        raise BnpviError(f"unknown observation family obs.name={name!r}; choose one of {sorted(FAMILIES)}")
    return FAMILIES[name].from_config(int(D), moments, **options)


__all__ = ["ARGauss", "Bern", "DataMoments", "DiagGauss", "FAMILIES", "Gauss", "LinkStrength", "Mult", "ObsFamily", "Posterior", "ZeroMeanGauss",
           "make_obs"]
