"""Segmentations of sequence data: the state paths of a trained sequence model, and their evaluation.

At the end of a run on sequence data the run directory gets (Hughes 2016 thesis §6.6;
Stephenson 2015 §7.1 for Viterbi paths scored by the aligned Hamming distance):

* ``segmentation.h5``: datasets ``viterbi`` and ``marginal_map`` (T,) int64 (the Viterbi
  path, and the per-step argmax of the forward-backward marginals r_t), ``seq_range``
  (n_seqs + 1,) int64, ``uids`` (K,) and, when the data has them, the true ``labels`` (T,);
* ``segmentation.csv``: columns ``sequence,t,state``, the Viterbi state of every time step by its
  stable cluster id (``sequence`` indexes the data file's sequences, ``t`` counts from 0 within each);
* ``transitions.csv``: the expected transition matrix, a row ``start`` for E[π_0] and a row for
  E[π_j] of every state j, named by its stable cluster id; columns the next state's id, and
  ``other`` (the mass on the states beyond K) for a nonparametric model whose rows carry it;
* ``segmentation.png``: true (when known) and estimated segmentations of the first
  ``MAX_PLOTTED`` sequences, with a legend of the colours (:func:`colour_codes`).

In segmentation.h5 states are the positions 0..K-1 of the final model: the order of model.h5
(``uids``, ``counts``, ``start_probs``, ``trans_probs``) and of the last lap's rows of
clusters.csv; state k has the stable cluster id ``uids[k]``. The CSV files name states by
those ids, as clusters.csv does.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bnpvi.data.writes import replacing, save_figure
from bnpvi.errors import BnpviError
from bnpvi.io.h5tree import write_atomic
from bnpvi.metrics import (align_labels, hamming_distance, hamming_many_to_one, hamming_many_to_one_of_counts,
                           hamming_of_counts, many_to_one_labels)

MAX_PLOTTED = 20
"""Sequences drawn in segmentation.png (the first ones of the file)."""
MAX_COLUMNS = 2000
"""Time steps drawn per bar; longer sequences are subsampled at an even stride."""
LEGEND_ROWS = 25
"""Entries per column of the plot's legend."""


@dataclass(frozen=True)
class Segmentation:
    """The state paths of every sequence of a data set, in file order.

    Attributes
    ----------
    viterbi : (T,) ndarray of int64
        The Viterbi path (the joint mode of q*(z_d)) of every sequence.
    marginal_map : (T,) ndarray of int64
        argmax_k r_t(k) of the forward-backward marginals at every step.
    seq_range : (n_seqs + 1,) ndarray of int64
        Sequence d is steps ``seq_range[d]:seq_range[d+1]``.
    labels : (T,) ndarray of int64, or None
        The true states (negative: not scored), when the data has them.
    """

    viterbi: np.ndarray
    marginal_map: np.ndarray
    seq_range: np.ndarray
    labels: np.ndarray | None = None

    @property
    def n_seqs(self) -> int:
        return self.seq_range.shape[0] - 1

    def scores(self) -> dict:
        """The Viterbi paths' :func:`path_scores` and the one-to-one Hamming distance of the marginal-MAP paths
        (``hamming_marginal_map``); empty without labels."""
        if self.labels is None:
            return {}
        return {**path_scores(self.labels, self.viterbi),
                "hamming_marginal_map": hamming_distance(self.labels, self.marginal_map)}

    def rows(self, uids: np.ndarray) -> np.ndarray:
        """(T, 3) int64 array of segmentation.csv: sequence, step within it, Viterbi state's id in ``uids``."""
        lengths = np.diff(self.seq_range)
        sequence = np.repeat(np.arange(self.n_seqs, dtype=np.int64), lengths)
        t = np.arange(self.viterbi.shape[0], dtype=np.int64) - np.repeat(self.seq_range[:-1], lengths)
        return np.column_stack([sequence, t, np.asarray(uids, dtype=np.int64)[self.viterbi]])


def path_scores(labels, path) -> dict:
    """Agreement of state paths with the true labels (negative: not scored): ``hamming``, the Hamming distance
    after the one-to-one alignment (:func:`bnpvi.metrics.hamming_distance`), ``hamming_many_to_one``, after
    mapping each state to the true state it overlaps most (:func:`bnpvi.metrics.hamming_many_to_one`),
    ``states_used``, how many distinct states the paths visit, without which the many-to-one distance cannot be
    read (one state per step would score 0), and ``true_states``, how many distinct true states are scored."""
    labels = np.asarray(labels)
    return {"hamming": hamming_distance(labels, path), "hamming_many_to_one": hamming_many_to_one(labels, path),
            "states_used": int(np.unique(path).size), "true_states": int(np.unique(labels[labels >= 0]).size)}


def path_scores_of_counts(ids, table) -> dict:
    """:func:`path_scores` from the distinct true labels ``ids`` (C,) and the (C, K) table of steps per true
    label and state (a run's paths counted a batch at a time: ``bnpvi.learn.runner.label_counts``)."""
    scored = np.asarray(table)[np.asarray(ids) >= 0]
    return {"hamming": hamming_of_counts(scored), "hamming_many_to_one": hamming_many_to_one_of_counts(scored),
            "states_used": int(np.count_nonzero(np.asarray(table).sum(axis=0))), "true_states": int(scored.shape[0])}


def write_segmentation_outputs(run_dir: Path, seg: Segmentation, uids: np.ndarray, exported: dict,
                               plot: bool = True, label_names: list[str] | None = None) -> None:
    """segmentation.h5, segmentation.csv, transitions.csv and (``plot``) segmentation.png in ``run_dir``.

    Parameters
    ----------
    run_dir : Path
    seg : Segmentation
    uids : (K,) ndarray of int
        Stable cluster id of every state (position) of the final model.
    exported : dict
        The allocation model's ``export``: at least ``start_probs`` and ``trans_probs``.
    label_names : list of str, optional
        The name of every true label code, for the plot's legend (the data file's ``label_names``).
    """
    run_dir = Path(run_dir)
    write_segmentation(run_dir / "segmentation.h5", seg, uids)
    write_segmentation_csv(run_dir / "segmentation.csv", seg, uids)
    write_transitions(run_dir / "transitions.csv", exported["start_probs"], exported["trans_probs"], uids)
    if plot:
        plot_segmentation(run_dir / "segmentation.png", seg, uids=uids, label_names=label_names)


def write_segmentation(path: Path, seg: Segmentation, uids: np.ndarray) -> None:
    """segmentation.h5 (module docstring), written atomically."""
    tree = {"viterbi": seg.viterbi, "marginal_map": seg.marginal_map, "seq_range": seg.seq_range,
            "uids": np.asarray(uids, dtype=np.int64)}
    if seg.labels is not None:
        tree["labels"] = seg.labels
    write_atomic(path, tree, attrs={"format": "bnpvi-segmentation", "format_version": 1,
                                    "states": "positions 0..K-1 of model.h5; state k has cluster id uids[k]"})


def write_segmentation_csv(path: Path, seg: Segmentation, uids: np.ndarray) -> None:
    """segmentation.csv: ``sequence,t,state`` (the Viterbi state's id in ``uids``), one row per time step,
    written atomically."""
    with replacing(path) as tmp:
        np.savetxt(tmp, seg.rows(uids), fmt="%d", delimiter=",", header="sequence,t,state", comments="")


def write_transitions(path: Path, start_probs, trans_probs, uids) -> None:
    """transitions.csv: a row ``start`` (E[π_0]) and a row per state (E[π_j]) over the next state, states
    named by their ids ``uids``.

    Parameters
    ----------
    path : Path
    start_probs : (K,) or (K + 1,) array_like
    trans_probs : (K, K) or (K, K + 1) array_like
        Rows of a nonparametric model may end with the mass on the states beyond K: that
        column is written as ``other``.
    uids : (K,) array_like of int
        The stable cluster id of every state (position).
    """
    start, trans = np.asarray(start_probs, dtype=np.float64), np.asarray(trans_probs, dtype=np.float64)
    uids = np.asarray(uids, dtype=np.int64)
    K = trans.shape[0]
    if trans.ndim != 2 or trans.shape[1] not in (K, K + 1) or start.shape != (trans.shape[1],) \
            or uids.shape != (K,):
        raise BnpviError(f"cannot write {path}: start_probs {start.shape}, trans_probs {trans.shape} and "
                         f"uids {uids.shape} do not describe {K} states")
    header = ["from", *(str(u) for u in uids)] + (["other"] if trans.shape[1] > K else [])
    with replacing(path) as tmp, open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerow(["start", *start.tolist()])
        writer.writerows([u, *row] for u, row in zip(uids.tolist(), trans.tolist()))


# ------------------------------------------------------------------ the plot
@dataclass(frozen=True)
class Colouring:
    """The colours of segmentation.png.

    Attributes
    ----------
    true : (T,) ndarray of int64, or None
        Colour of every step's true state (-1: unscored); None without labels.
    estimated : (T,) ndarray of int64
        Colour of every step's estimated (Viterbi) state.
    names : list of str
        The legend's text of each colour.
    many_to_one : bool
        Whether estimated states take the colour of the true state they overlap most (several may share one),
        rather than of their one-to-one match.
    """

    true: np.ndarray | None
    estimated: np.ndarray
    names: list[str]
    many_to_one: bool = False

    @property
    def n_colours(self) -> int:
        return len(self.names)


def colour_codes(seg: Segmentation, uids=None, label_names: list[str] | None = None) -> Colouring:
    """Colour of every step of the true and the estimated (Viterbi) segmentation, and the legend.

    With labels, the estimated states are mapped to the true ones, and a state takes its true state's colour:
    one-to-one by the Hungarian alignment (``bnpvi.metrics.align_labels``) while the paths visit no more states
    than there are true states, else many-to-one, each state to the true state it overlaps most
    (``bnpvi.metrics.many_to_one_labels``), so that a true state split into several pure states reads as one.
    A state left without a true state gets an extra colour of its own; unscored true steps (negative labels)
    get -1. The legend names each true state (by ``label_names``, else its code) with the states (by ``uids``,
    else their positions) that took its colour. Without labels, state k has colour k.
    """
    names = np.asarray(uids if uids is not None else np.arange(int(seg.viterbi.max()) + 1), dtype=np.int64)
    if seg.labels is None:
        return Colouring(None, seg.viterbi, [f"state {u}" for u in names[:int(seg.viterbi.max()) + 1]])
    scored = seg.labels >= 0
    true_ids = np.unique(seg.labels[scored])
    many = np.unique(seg.viterbi).size > true_ids.size
    mapped = (many_to_one_labels if many else align_labels)(seg.labels, seg.viterbi)
    ids = np.unique(np.concatenate([true_ids, mapped]))
    states, first = np.unique(seg.viterbi, return_index=True)
    target = mapped[first]  # the true state (or extra label) of each visited state
    legend = []
    for i in ids:
        members = [str(names[k]) for k in states[target == i]]
        if i not in true_ids:
            legend.append(f"state {members[0]} (no true state)")
            continue
        label = label_names[i] if label_names is not None and 0 <= i < len(label_names) else str(i)
        legend.append(f"{label}: state{'s' if len(members) > 1 else ''} {', '.join(members)}" if members else
                      f"{label}: no state")
    true = np.where(scored, np.searchsorted(ids, seg.labels), -1)
    return Colouring(true, np.searchsorted(ids, mapped), legend, many)


def _palette(n: int):
    """n distinct colours: tab20's dark shades then its light ones, or turbo beyond 20."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    if n <= 20:
        tab = colormaps["tab20"].colors
        cmap = ListedColormap((tab[0::2] + tab[1::2])[:n])
    else:
        cmap = colormaps["turbo"].resampled(n)
    return cmap.with_extremes(bad="white")


def _bars(seg: Segmentation, codes: list[np.ndarray], n_seqs: int) -> tuple[np.ndarray, int]:
    """The image: for each of the first ``n_seqs`` sequences one row per array of ``codes``, then
    a blank row; NaN where a sequence has ended or a step is unscored. Returns it and the stride."""
    lengths = np.diff(seg.seq_range[:n_seqs + 1])
    stride = -(-int(lengths.max()) // MAX_COLUMNS)
    per_seq = len(codes) + 1
    image = np.full((n_seqs * per_seq, -(-int(lengths.max()) // stride)), np.nan)
    for d in range(n_seqs):
        steps = slice(seg.seq_range[d], seg.seq_range[d + 1], stride)
        for i, code in enumerate(codes):
            row = code[steps].astype(np.float64)
            image[d * per_seq + i, :row.shape[0]] = np.where(row >= 0, row, np.nan)
    return image, stride


def plot_title(seg: Segmentation, n_drawn: int, colouring: Colouring) -> str:
    """The title of segmentation.png: how the estimated states are coloured, and when only the first
    ``n_drawn`` sequences are drawn."""
    if seg.labels is None:
        title = "Viterbi states"
    elif colouring.many_to_one:
        title = (f"Viterbi states: {np.unique(seg.viterbi).size} states for "
                 f"{np.unique(seg.labels[seg.labels >= 0]).size} true ones, each coloured by the true state it "
                 f"overlaps most")
    else:
        title = "Viterbi states, coloured by their one-to-one match among the true states"
    if n_drawn < seg.n_seqs:
        title += f"; first {n_drawn} of {seg.n_seqs} sequences"
    return title


def plot_segmentation(path: Path, seg: Segmentation, max_seqs: int = MAX_PLOTTED, uids=None,
                      label_names: list[str] | None = None) -> None:
    """segmentation.png: per sequence a thin bar over time of the true states (when known) above
    one of the estimated (Viterbi) states, coloured by :func:`colour_codes`, with its legend beside."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colouring = colour_codes(seg, uids, label_names)
    codes, names = (([colouring.estimated], ["est"]) if colouring.true is None else
                    ([colouring.true, colouring.estimated], ["true", "est"]))
    n = min(seg.n_seqs, max_seqs)
    image, stride = _bars(seg, codes, n)
    per_seq = len(codes) + 1
    cmap = _palette(colouring.n_colours)
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.16 * image.shape[0]))
    width = image.shape[1] * stride
    ax.imshow(image, aspect="auto", interpolation="nearest", cmap=cmap, vmin=-0.5,
              vmax=colouring.n_colours - 0.5, extent=(0, width, image.shape[0], 0))
    if colouring.true is not None:  # a thin white line between a sequence's true and estimated bars
        ax.hlines(np.arange(n) * per_seq + 1, 0, width, colors="white", linewidth=1)
    ax.set_yticks([d * per_seq + i + 0.5 for d in range(n) for i in range(len(codes))],
                  [f"{d} {name}" for d in range(n) for name in names], fontsize=6)
    ax.set_xlabel("time step")
    ax.set_title(plot_title(seg, n, colouring), fontsize=9)
    handles = [Patch(color=cmap(i), label=name)
               for i, name in enumerate(colouring.names)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6, frameon=False,
              ncol=-(-len(handles) // LEGEND_ROWS))
    save_figure(fig, path, bbox_inches="tight")
    plt.close(fig)
