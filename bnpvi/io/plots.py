"""A PNG of the ELBO and K against wall-clock time, and what every plot of the ELBO over laps shares: the settled
ELBO of annealed laps, and their shading."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.data.writes import save_figure

ANNEALED_SHADE = {"color": "0.85", "alpha": 0.5, "linewidth": 0}
"""How the laps of an annealed model are shaded."""
ANNEALED_LABEL = "annealed laps: ELBO under the configured model"


def settled_elbo_per_atom(elbo_per_atom, elbo, elbo_settled=None) -> np.ndarray:
    """The ELBO per atom that the plots draw: a trace's ``elbo_settled`` per atom where it has one (a run with
    annealed laps, whose ``elbo_per_atom`` is the bound of each lap's tempered model), else ``elbo_per_atom``.
    ``elbo_per_atom / elbo`` is 1 / N."""
    elbo_per_atom = np.asarray(elbo_per_atom, dtype=np.float64)
    if elbo_settled is None:
        return elbo_per_atom
    elbo = np.asarray(elbo, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(elbo_settled, dtype=np.float64) * np.where(elbo != 0, elbo_per_atom / elbo, np.nan)


def annealed_spans(x, annealed) -> list[tuple[float, float]]:
    """The stretches of the x axis (laps or seconds: each row's lap ends at its ``x``, and starts where the row
    before ends, or at 0) covered by runs of consecutive annealed laps (``annealed`` 1; 0 or NaN otherwise)."""
    x = np.asarray(x, dtype=np.float64)
    flags = np.nan_to_num(np.asarray(annealed, dtype=np.float64)) > 0
    starts = np.concatenate([[0.0], x[:-1]])
    spans, begin = [], None
    for i, flag in enumerate(flags):
        if flag and begin is None:
            begin = starts[i]
        if begin is not None and (not flag or i == flags.size - 1):
            spans.append((begin, x[i] if flag else starts[i]))
            begin = None
    return spans


def shade_annealed(axes, spans, **style) -> None:
    """Shade each of ``spans`` (:func:`annealed_spans`) on every one of ``axes``."""
    for ax in axes:
        for lo, hi in spans:
            ax.axvspan(lo, hi, **{**ANNEALED_SHADE, **style})


def plot_trace(rows: list[dict], path: Path) -> None:
    """Two stacked panels sharing the time axis: ELBO per atom (settled: :func:`settled_elbo_per_atom`), and K
    (with ``K_total`` dotted where they differ); the laps of an annealed model shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    def column(name):
        return [row[name] for row in rows] if name in rows[0] else None

    t = column("elapsed_s")
    fig, (ax_elbo, ax_k) = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
    ax_elbo.plot(t, settled_elbo_per_atom(column("elbo_per_atom"), column("elbo"), column("elbo_settled")),
                 marker=".")
    ax_elbo.set_ylabel("ELBO per atom")
    ax_k.step(t, column("K"), where="post", marker=".", label="K: clusters holding mass")
    if column("K_total") is not None and column("K_total") != column("K"):
        ax_k.step(t, column("K_total"), where="post", linestyle=":", color="0.4", label="K_total: all clusters")
        ax_k.legend(fontsize="small", loc="best")
    ax_k.set_ylabel("K (clusters)")
    ax_k.set_xlabel("seconds")
    spans = annealed_spans(t, column("annealed")) if "annealed" in rows[0] else []
    if spans:
        shade_annealed((ax_elbo, ax_k), spans)
        ax_elbo.legend(handles=[Patch(**ANNEALED_SHADE, label=ANNEALED_LABEL)], fontsize="small", loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
