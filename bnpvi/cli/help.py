"""``bnpvi-train --help``: the options of every group, then each key of the chosen options.

Every key is shown with its default, read from the composed config (``conf/*.yaml`` and the
command line's other overrides), and its one-line description, read from the schemas of
:mod:`bnpvi.config`; an option's description is its schema's. Nothing here repeats either.
"""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from bnpvi.config import GROUPS, SCHEMAS, TrainConfig, describe, schema_of, summary_of, user_keys

HEADER = """\
bnpvi-train: fit a Bayesian nonparametric mixture, topic model or hidden Markov model by variational inference.

usage: bnpvi-train [group=option ...] [key=value ...]      one run, in a new directory under outputs/
       bnpvi-train -m key=a,b ...                          a sweep: one run per combination
       bnpvi-train resume=RUN_DIR [alg.n_laps=N]           continue a run from its latest checkpoint
       bnpvi-train [overrides] --help                      this help, for the options chosen by the overrides

Every run writes trace.csv (one row per lap: ELBO, K, moves), checkpoints/, model.h5, summary.json and
elbo_K.png to its run directory (docs/outputs.md lists every file)."""

FOOTER = """\
Examples:
  bnpvi-train model=dp_mix obs=gauss alg=vb init.K=20 seed=3
  bnpvi-train data.path=points.h5                  # a file written by bnpvi-data convert
  bnpvi-train model=hdp_topic data.path=corpus.h5
  bnpvi-train model=hdp_hmm obs=ar_gauss data.path=seqs.h5
  bnpvi-train init=from_run init.path=RUN_DIR data.path=more.h5
  bnpvi-train -m model.gamma=0.5,1,5 seed=1,2,3
Hydra's own flags: --hydra-help, --cfg job, --info."""

KEY_WIDTH = 36
"""Width of the ``key=default`` column."""
OPTION_WIDTH = 16
"""Width of the option column."""


def _value(value) -> str:
    """A default as it is written on the command line (YAML scalars; ``???``: must be set)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def _row(left: str, text: str, width: int = KEY_WIDTH) -> str:
    left = f"  {left}"
    return f"{left:<{width}} {text}" if len(left) < width else f"{left}\n{'':<{width}} {text}"


def _chosen(cfg: DictConfig, group: str) -> list[str]:
    if group == "moves":
        return [move for move in SCHEMAS["moves"] if cfg.moves.get(move) is not None]
    return [schema_of(group, cfg[group])[0]]


def _keys(prefix: str, node: DictConfig, schema: type) -> list[str]:
    values = OmegaConf.to_container(node, resolve=False)
    return [_row(f"{prefix}.{name}={_value(values.get(name))}", describe(schema, name)) for name in user_keys(schema)]


def render(cfg: DictConfig) -> str:
    """The help text for the composed config ``cfg``."""
    lines = [HEADER, "", "Groups (group=option; * marks the chosen option):"]
    for group, about in GROUPS.items():
        chosen = _chosen(cfg, group)
        lines.append(f"{group}: {about}")
        for option, schema in SCHEMAS[group].items():
            lines.append(_row(f"{'*' if option in chosen else ' '} {option}", summary_of(schema), OPTION_WIDTH))
    lines += ["", "Keys of the chosen options (key=default):"]
    for group in GROUPS:
        for option in _chosen(cfg, group):
            schema = SCHEMAS[group][option]
            prefix = f"moves.{option}" if group == "moves" else group
            lines.append(f"{prefix} ({group}={option}):" if group != "moves" else f"{prefix}:")
            lines += _keys(prefix, cfg.moves[option] if group == "moves" else cfg[group], schema)
    lines.append("top level:")
    values = OmegaConf.to_container(cfg, resolve=False)
    lines += [_row(f"{name}={_value(values.get(name))}", describe(TrainConfig, name))
              for name in user_keys(TrainConfig) if name not in GROUPS]
    return "\n".join([*lines, "", FOOTER])
