"""A PNG of the ELBO and K against wall-clock time."""
from __future__ import annotations

from pathlib import Path


def plot_trace(rows: list[dict], path: Path) -> None:
    """Two stacked panels sharing the time axis: ELBO per atom, and K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [row["elapsed_s"] for row in rows]
    fig, (ax_elbo, ax_k) = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
    ax_elbo.plot(t, [row["elbo_per_atom"] for row in rows], marker=".")
    ax_elbo.set_ylabel("ELBO per atom")
    ax_k.step(t, [row["K"] for row in rows], where="post", marker=".")
    ax_k.set_ylabel("K (clusters)")
    ax_k.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
