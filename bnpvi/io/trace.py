"""trace.csv: one row per lap with the whole-data ELBO, K and move counts."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

MOVES = ("birth", "merge", "delete")
COLUMNS = (
    ["lap", "batches_seen", "elapsed_s", "elbo", "K"]
    + [f"{move}_{what}" for move in MOVES for what in ("tried", "accepted")]
    + ["elbo_per_atom"]
)


class Trace:
    """The rows recorded so far, mirrored to ``trace.csv`` (flushed after every row).

    ``elbo`` is the whole-data ELBO L (not per atom); ``elbo_per_atom`` = L / N.
    """

    def __init__(self, path: Path, rows: list[dict] | None = None):
        self.path = Path(path)
        self.rows = list(rows or [])
        with open(self.path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)

    def append(self, row: dict) -> None:
        row = {col: row.get(col, 0) for col in COLUMNS}
        self.rows.append(row)
        with open(self.path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=COLUMNS).writerow(row)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {col: np.array([row[col] for row in self.rows], dtype=np.float64) for col in COLUMNS}

    @staticmethod
    def rows_from_arrays(arrays: dict) -> list[dict]:
        n = len(np.atleast_1d(arrays["lap"])) if "lap" in arrays else 0
        ints = {"lap", "batches_seen", "K"} | {c for c in COLUMNS if c.endswith(("_tried", "_accepted"))}
        rows = []
        for i in range(n):
            rows.append({col: (int(arrays[col][i]) if col in ints else float(arrays[col][i])) for col in COLUMNS})
        return rows
