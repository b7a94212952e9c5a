"""A loaded hidden Markov model (``hdp_hmm``, ``finite_hmm``): state paths, marginals and scores of new sequences.

Sequences are a list of (T_i, D) arrays. Under the saved globals, :meth:`FittedHMM.predict` is the
compiled Viterbi path of every sequence (the mode of q*(z_d); Hughes 2016 thesis §6.6) and
:meth:`FittedHMM.predict_proba` the marginals r_t(k) of compiled forward-backward (thesis
Eq. 6.48), states named by their stable ids; :meth:`FittedHMM.apply` writes the paths of a whole
data file as the run's segmentation.h5 and segmentation.csv (:mod:`bnpvi.io.segmentation`).

An auto-regressive family (``obs=ar_gauss``) regresses every step on the one before: as in
training on a file without Xprev, the first step of every sequence is only the regressor of the
second, so a sequence of T_i steps gets T_i − 1 states (steps 1..T_i − 1) and needs T_i ≥ 2.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpvi.alloc.hmm import HMMAlloc
from bnpvi.api.fitted import FittedModel
from bnpvi.data.batch import SeqBatch
from bnpvi.data.checks import check_points
from bnpvi.data.seq import lag_sequences
from bnpvi.data.writes import replacing
from bnpvi.errors import BnpviError
from bnpvi.io.segmentation import write_segmentation, write_segmentation_csv
from bnpvi.learn.runner import needs_lag, segment_all
from bnpvi.obs.base import refuse_missing


def sequence_arrays(seqs, what: str, D: int | None = None, *, family) -> tuple[np.ndarray, np.ndarray]:
    """The sequences ``seqs`` (a list of (T_i, D) arrays) one after another, and their boundaries.

    Returns
    -------
    X : (T, D) ndarray of float64, C-contiguous
    seq_range : (n_seqs + 1,) ndarray of int64

    Raises
    ------
    BnpviError
        Not a non-empty list or tuple of finite 2-D arrays of one number of columns (``D`` when given),
        on one line naming the first bad sequence; NaN entries are missing values, refused only when
        ``family`` (the observation family, an instance or its class) cannot model them.
    """
    if not isinstance(seqs, (list, tuple)):
        raise BnpviError(f"{what}: seqs must be a list of (T_i, D) arrays (one per sequence; [X] for a single "
                         f"one), got {type(seqs).__name__}")
    if not seqs:
        raise BnpviError(f"{what}: seqs holds no sequence")
    arrays = [check_points(x, f"{what}: sequence {i}", missing_ok=True) for i, x in enumerate(seqs)]
    for i, x in enumerate(arrays):
        refuse_missing(family, x, f"{what}: sequence {i}")
    width = D if D is not None else arrays[0].shape[1]
    for i, x in enumerate(arrays):
        if x.shape[1] != width:
            trained = "the model was trained on" if D is not None else "sequence 0 has"
            raise BnpviError(f"{what}: sequence {i} has D={x.shape[1]} columns; {trained} D={width}")
    lengths = np.array([x.shape[0] for x in arrays], dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(arrays)), np.concatenate([[0], np.cumsum(lengths)])


class FittedHMM(FittedModel, alloc=HMMAlloc):
    """A trained HMM under its final globals (:class:`~bnpvi.api.fitted.FittedModel`'s attributes, and:)

    Attributes
    ----------
    startprob_ : (K_total,) ndarray
        E[π_0k], in the order of :attr:`cluster_ids_`.
    transmat_ : (K_total, K_total) ndarray
        E[π_jk] from state j (row) to state k (column), both in the order of :attr:`cluster_ids_`. An
        HDP-HMM's rows (and startprob_) leave out the mass E[π_j,>K] on states beyond K, so they sum to
        a little less than 1 (transitions.csv's column ``other``).
    """

    def __init__(self, model, globals_, cfg, tree: dict):
        super().__init__(model, globals_, cfg, tree)
        exported, K = model.alloc.export(globals_.alloc), self.n_components_total_
        self.startprob_ = np.asarray(exported["start_probs"])[:K]
        self.transmat_ = np.asarray(exported["trans_probs"])[:, :K]

    def _batch(self, seqs, what: str) -> SeqBatch:
        """``seqs`` as one batch, after the checks; lagged for an auto-regressive family (module docstring)."""
        self.check_kind(what, "seq")
        X, seq_range = sequence_arrays(seqs, what, self.D, family=self.model.obs)
        if not self.model.obs.needs_xprev:
            return SeqBatch(X, seq_range)
        short = np.flatnonzero(np.diff(seq_range) < 2)
        if short.size:
            raise BnpviError(f"{what}: sequence {int(short[0])} has 1 step; obs={self.model.obs.name} regresses "
                             "each step on the one before, so every sequence needs at least 2")
        X, Xprev, seq_range = lag_sequences(X, seq_range)
        return SeqBatch(X, seq_range, Xprev)

    @staticmethod
    def _split(values: np.ndarray, batch: SeqBatch) -> list[np.ndarray]:
        return np.split(values, batch.seq_range[1:-1])

    def predict(self, seqs) -> list[np.ndarray]:
        """The Viterbi path of every sequence: a list of (T_i,) int64 arrays of stable state ids
        (:attr:`cluster_ids_`)."""
        batch = self._batch(seqs, "predict")
        return self._split(self.cluster_ids_[self.model.decode(batch, self.globals_)], batch)

    def decode(self, seqs) -> tuple[float, list[np.ndarray]]:
        """(log_prob, paths): the Viterbi path of every sequence (as :meth:`predict`) and the sum over sequences
        of its score E ln π_0,z_1 + Σ_t E ln π_{z_t−1 z_t} + Σ_t E ln p(x_t | φ_z_t) under the saved globals
        (hmmlearn's ``decode`` with its parameters' expected logarithms; the joint mode of q*(z_d))."""
        batch = self._batch(seqs, "decode")
        log_lik = self.model.alloc.expected_log_lik(self.model.obs, self.globals_.obs, batch)
        path = self.model.alloc.decode(batch, log_lik, self.globals_.alloc)
        log_prob = self.model.alloc.path_log_prob(batch, log_lik, self.globals_.alloc, path)
        return log_prob, self._split(self.cluster_ids_[path], batch)

    def score_samples(self, seqs) -> tuple[float, list[np.ndarray]]:
        """(log_prob, marginals): Σ_d ln Z_d (:meth:`score` before its division by the steps) and the
        forward-backward marginals (:meth:`predict_proba`), from one local step, as hmmlearn's
        ``score_samples``."""
        batch = self._batch(seqs, "score_samples")
        local = self.model.local_step(batch, self.globals_)[1]
        return float(np.sum(local.tables["log_norm"])), self._split(local.resp.matrix(), batch)

    def predict_proba(self, seqs) -> list[np.ndarray]:
        """The forward-backward marginals r_t(k) = q*(z_t = k) of every sequence: a list of (T_i, K) arrays,
        columns in the order of :attr:`cluster_ids_`, rows summing to 1."""
        batch = self._batch(seqs, "predict_proba")
        return self._split(self.model.local_step(batch, self.globals_)[1].resp.matrix(), batch)

    def score(self, seqs) -> float:
        """Σ_d ln Z_d / Σ_d T_d in nats per time step: ln Z_d = ln Σ_z exp(E ln π_0,z_1 + Σ_t E ln π_{z_t z_t+1}
        + Σ_t E ln p(x_t | φ_z_t)) is the optimum of sequence d's own local step (forward-backward, thesis
        Eq. 6.48), a lower bound on its log predictive density."""
        batch = self._batch(seqs, "score")
        return float(np.sum(self.model.local_step(batch, self.globals_)[1].tables["log_norm"])) / batch.n_atoms

    def apply(self, store, out: Path) -> dict:
        """The Viterbi and marginal-MAP paths of every sequence of ``store`` in ``out`` (as segmentation.h5) and
        the .csv beside it (as segmentation.csv: ``sequence,t,state``, stable ids); scores: the aligned
        Hamming distances to the file's true labels when it has them."""
        out = Path(out)
        self.check_store(store)
        store.validate()
        if needs_lag(store, self.model.obs):
            with store.lagged() as lagged:
                seg = segment_all(self.model, self.globals_, lagged, lagged.labels())
        else:
            seg = segment_all(self.model, self.globals_, store, store.labels())
        with replacing(out) as tmp:  # out appears only once the CSV is written too
            write_segmentation(tmp, seg, self.cluster_ids_)
            write_segmentation_csv(out.with_suffix(".csv"), seg, self.cluster_ids_)
        scores = {name: (value, "(aligned to the file's labels)") for name, value in seg.scores().items()}
        return {"written": f"{seg.n_seqs} sequences, {seg.viterbi.shape[0]} steps", "scores": scores}
