"""PNGs of many runs' traces: ELBO per atom and K, against seconds and against laps, one line per run,
coloured by the value of a swept setting; runs that did not finish dashed; annealed laps shaded in the run's
colour, their ELBO the settled one (:mod:`bnpvi.io.plots`)."""
from __future__ import annotations

import numbers
from pathlib import Path

import pandas as pd

from bnpvi.io.plots import ANNEALED_LABEL, ANNEALED_SHADE, annealed_spans, settled_elbo_per_atom, shade_annealed

FIGURES = {"elbo_K_time.png": ("elapsed_s", "seconds"), "elbo_K_laps.png": ("lap", "laps")}
"""File name -> (trace column, axis label) of the x axis."""
MANY = 10
"""Up to this many distinct values get the distinct colours of ``tab10``; more get ``viridis`` by rank."""


def _ordered(values: list) -> list:
    """The distinct ``values``, numbers in numeric order before text in text order."""
    distinct = list(dict.fromkeys(values))
    numeric = sorted(v for v in distinct if isinstance(v, numbers.Number) and not isinstance(v, bool))
    return numeric + sorted((v for v in distinct if v not in numeric), key=str)


def _colours(labels: list) -> dict:
    import matplotlib

    distinct = _ordered(labels)
    if len(distinct) <= MANY:
        palette = matplotlib.colormaps["tab10"]
        return {value: palette(i) for i, value in enumerate(distinct)}
    palette = matplotlib.colormaps["viridis"]
    return {value: palette(i / (len(distinct) - 1)) for i, value in enumerate(distinct)}


def _elbo_per_atom(trace: pd.DataFrame):
    """What a trace's ELBO panel draws: the settled ELBO per atom (``elbo_settled`` where the run was annealed),
    or a trace's ``elbo`` when it has no ``elbo_per_atom``."""
    if "elbo_per_atom" not in trace:
        return trace["elbo"]
    return settled_elbo_per_atom(trace["elbo_per_atom"], trace["elbo"], trace.get("elbo_settled"))


def plot_traces(traces: list[pd.DataFrame], labels: list, finished: list[bool], key: str | None,
                out_dir: Path) -> list[Path]:
    """Write the :data:`FIGURES` into ``out_dir``, each two stacked panels (ELBO per atom, settled where a run
    was annealed, and K) with one line per trace and its annealed laps shaded; the paths written.

    Parameters
    ----------
    traces : list of DataFrame
        Each run's trace.csv (an empty one draws nothing).
    labels : list
        What colours each run: its value of ``key``, or its name when ``key`` is None.
    finished : list of bool
        Whether each run finished; the others are dashed.
    key : str or None
        The setting the legend names.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    drawn = [(trace, label, done) for trace, label, done in zip(traces, labels, finished) if not trace.empty]
    colours = _colours([label for _, label, _ in drawn])
    handles = [Line2D([], [], color=colours[value], label=value if key is None else f"{key}={value}")
               for value in colours]
    if not all(done for _, _, done in drawn):
        handles.append(Line2D([], [], color="grey", linestyle="--", label="not finished"))
    if any("annealed" in trace and trace["annealed"].fillna(0).any() for trace, _, _ in drawn):
        handles.append(Patch(**ANNEALED_SHADE, label=ANNEALED_LABEL))
    written = []
    for name, (column, axis_label) in FIGURES.items():
        fig, (ax_elbo, ax_k) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
        for trace, label, done in drawn:
            style = {"color": colours[label], "linestyle": "-" if done else "--", "linewidth": 1.2}
            ax_elbo.plot(trace[column], _elbo_per_atom(trace), **style)
            ax_k.step(trace[column], trace["K"], where="post", **style)
            if "annealed" in trace:
                shade_annealed((ax_elbo, ax_k), annealed_spans(trace[column], trace["annealed"]),
                               color=colours[label], alpha=0.12)
        ax_elbo.set_ylabel("ELBO per atom")
        ax_k.set_ylabel("K (clusters)")
        ax_k.set_xlabel(axis_label)
        ax_elbo.legend(handles=handles, fontsize="small", loc="lower right")
        fig.tight_layout()
        path = Path(out_dir) / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
