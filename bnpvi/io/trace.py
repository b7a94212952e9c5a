"""CSV tables of a run: trace.csv (one row per lap), clusters.csv (ids and counts per lap),
moves.csv (one row per proposal). Each is flushed after every write, and rewritten from
the checkpoint on resume so that it ends exactly where the checkpoint does."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from bnpvi.data.writes import writing
from bnpvi.moves.base import VANISHING_MASS

MOVES = ("split", "birth", "merge", "delete", "reassign")
MOVE_COUNTS = [f"{move}_{what}" for move in MOVES for what in ("tried", "accepted")]
TRACE_COLUMNS = ["lap", "batches_seen", "elapsed_s", "elbo", "K", "K_total", *MOVE_COUNTS, "waiting_for_moves",
                 "elbo_per_atom"]
CLUSTER_COLUMNS = ["lap", "uid", "count"]
MOVE_COLUMNS = ["lap", "move", "target", "gain", "accepted", "fresh", "kept", "exact"]
SEQUENCE_SCORE_COLUMNS = ["hamming", "hamming_many_to_one", "states_used"]
"""The trace columns of labelled sequences (:func:`bnpvi.io.segmentation.path_scores`)."""
ANNEALING_COLUMNS = ["annealed", "elbo_settled"]
"""The trace columns of a run whose first laps are annealed (``prior_lam``, ``temperature``)."""
EVAL_COLUMNS = {
    "hamming": "labelled sequences: normalized Hamming distance of the Viterbi paths after one-to-one "
               "alignment to the true states (every eval_every laps)",
    "hamming_many_to_one": "labelled sequences: the same after mapping each state to the true state it overlaps "
                           "most (several states may share one; bnpvi.metrics.hamming_many_to_one)",
    "states_used": "labelled sequences: how many distinct states the Viterbi paths visit",
    "heldout_loglik": "topic models with held-out documents: log-likelihood per held-out target token by "
                      "document completion (every eval_every laps and at the last lap; bnpvi.learn.heldout)",
    "prior_lam": "obs=mult with an annealed prior (obs.anneal_laps > 0): the Dirichlet pseudo-count in force in "
                 "the lap, whose ELBO is the bound under it",
    "temperature": "mixtures with model.temperature > 1: the temperature T of the lap, whose ELBO divides every data "
                   "term by T (deterministic annealing; 1 from the end of the annealing on)",
    "annealed": "runs with prior_lam or temperature: 1 on a lap whose model is annealed (its elbo is the bound of "
                "that model, not comparable with later laps), 0 from the end of the annealing on",
    "elbo_settled": "runs with prior_lam or temperature: the ELBO of the lap's state under the configured model "
                    "(temperature 1, the configured prior), comparable over all laps; equal to elbo on laps that "
                    "are not annealed",
}
"""Optional trace columns: name -> what they hold."""
INTEGER_COLUMNS = {"lap", "batches_seen", "K", "K_total", "uid", "waiting_for_moves", "annealed", "states_used",
                   *MOVE_COUNTS}


def clusters_holding_mass(counts) -> int:
    """K as a run reports it: the clusters whose mass N_k (atoms; a topic model's tokens, an HMM's time steps) is
    at least ``VANISHING_MASS`` (0.01). A finite model, or a run without deletes, keeps clusters that have lost
    all their mass; they are counted in ``K_total``, the clusters the model carries."""
    return int(np.count_nonzero(np.asarray(counts, dtype=np.float64) >= VANISHING_MASS))


class CsvTable:
    """Rows kept in memory and mirrored to a CSV file with fixed columns.

    In trace.csv, ``elbo`` is the whole-data ELBO L (not per atom); ``elbo_per_atom`` = L / N (L / Σ_n w_n for
    weighted points); ``K`` counts the clusters holding mass (:func:`clusters_holding_mass`) and ``K_total`` every cluster the model carries.
    Evaluation columns follow when they apply (:data:`EVAL_COLUMNS`), NaN on laps without an evaluation.
    """

    def __init__(self, path: Path, columns: list[str], rows: list[dict] | None = None):
        self.path = Path(path)
        self.columns = list(columns)
        self.rows = list(rows or [])
        with writing(self.path), open(self.path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)

    def extend(self, rows: list[dict]) -> None:
        rows = [{col: row.get(col, 0) for col in self.columns} for row in rows]
        self.rows.extend(rows)
        with writing(self.path), open(self.path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=self.columns).writerows(rows)

    def append(self, row: dict) -> None:
        self.extend([row])

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Numeric columns as float arrays (for checkpoints)."""
        return {col: np.array([row[col] for row in self.rows], dtype=np.float64) for col in self.columns}

    @staticmethod
    def rows_from_arrays(arrays: dict, columns: list[str]) -> list[dict]:
        """Rows from :meth:`to_arrays`; an evaluation column the arrays lack (a checkpoint written before it
        existed) is NaN, and ``K_total`` is ``K`` (which counted every cluster then)."""
        n = len(np.atleast_1d(arrays[columns[0]])) if columns[0] in arrays else 0
        missing = {col: np.full(n, np.nan) for col in columns if col in EVAL_COLUMNS and col not in arrays}
        if "K_total" in columns and "K_total" not in arrays and "K" in arrays:  # before K_total: K was all clusters
            missing["K_total"] = arrays["K"]
        arrays = {**arrays, **missing}
        return [{col: _value(arrays[col][i], col in INTEGER_COLUMNS) for col in columns} for i in range(n)]


def _value(value, integer: bool):
    """A trace value as its row holds it: an int in an integer column (NaN, a lap without the value, stays a
    float), else a float."""
    value = float(value)
    return int(value) if integer and np.isfinite(value) else value
