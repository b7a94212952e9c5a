"""CSV tables of a run: trace.csv (one row per lap), clusters.csv (ids and counts per lap),
moves.csv (one row per proposal). Each is flushed after every write, and rewritten from
the checkpoint on resume so that it ends exactly where the checkpoint does."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

MOVES = ("birth", "merge", "delete", "reassign")
MOVE_COUNTS = [f"{move}_{what}" for move in MOVES for what in ("tried", "accepted")]
TRACE_COLUMNS = ["lap", "batches_seen", "elapsed_s", "elbo", "K", *MOVE_COUNTS, "waiting_for_moves", "elbo_per_atom"]
CLUSTER_COLUMNS = ["lap", "uid", "count"]
MOVE_COLUMNS = ["lap", "move", "target", "gain", "accepted", "fresh", "kept", "exact"]
EVAL_COLUMNS = {
    "hamming": "labelled sequences: normalized Hamming distance of the Viterbi paths (every eval_every laps)",
    "heldout_loglik": "topic models with held-out documents: log-likelihood per held-out target token by "
                      "document completion (every eval_every laps and at the last lap; bnpvi.learn.heldout)",
    "prior_lam": "obs=mult with an annealed prior (obs.anneal_laps > 0): the Dirichlet pseudo-count in force in "
                 "the lap, whose ELBO is the bound under it",
    "temperature": "mixtures with model.temperature > 1: the temperature T of the lap, whose ELBO divides every data "
                   "term by T (deterministic annealing; 1 from the end of the annealing on)",
}
"""Optional trace columns: name -> what they hold."""
INTEGER_COLUMNS = {"lap", "batches_seen", "K", "uid", "waiting_for_moves", *MOVE_COUNTS}


class CsvTable:
    """Rows kept in memory and mirrored to a CSV file with fixed columns.

    In trace.csv, ``elbo`` is the whole-data ELBO L (not per atom); ``elbo_per_atom`` = L / N.
    Evaluation columns follow when they apply (:data:`EVAL_COLUMNS`), NaN on laps without an evaluation.
    """

    def __init__(self, path: Path, columns: list[str], rows: list[dict] | None = None):
        self.path = Path(path)
        self.columns = list(columns)
        self.rows = list(rows or [])
        with open(self.path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)

    def extend(self, rows: list[dict]) -> None:
        rows = [{col: row.get(col, 0) for col in self.columns} for row in rows]
        self.rows.extend(rows)
        with open(self.path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=self.columns).writerows(rows)

    def append(self, row: dict) -> None:
        self.extend([row])

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Numeric columns as float arrays (for checkpoints)."""
        return {col: np.array([row[col] for row in self.rows], dtype=np.float64) for col in self.columns}

    @staticmethod
    def rows_from_arrays(arrays: dict, columns: list[str]) -> list[dict]:
        """Rows from :meth:`to_arrays`; an evaluation column the arrays lack (a checkpoint written before it
        existed) is NaN."""
        n = len(np.atleast_1d(arrays[columns[0]])) if columns[0] in arrays else 0
        missing = {col: np.full(n, np.nan) for col in columns if col in EVAL_COLUMNS and col not in arrays}
        arrays = {**arrays, **missing}
        return [{col: (int(arrays[col][i]) if col in INTEGER_COLUMNS else float(arrays[col][i])) for col in columns}
                for i in range(n)]
