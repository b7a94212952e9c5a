"""The HDF5 batch store: one file per data set, read one batch at a time.

This module is the one import site of the store: :class:`BatchStore` (whose
``open`` returns the reader of the file's kind), the readers, the writers and the
input checks. Three kinds of data share one file format
(``format = "bnpvi-batches"``, ``format_version = 1``); the root attribute
``kind`` says which. Every kind has::

    /batch_offsets  (B+1,) int64, 0 = o_0 < o_1 < ... < o_B; batch b is units o_b:o_{b+1}
                    (rows, documents or sequences: a batch always holds whole ones)
    /labels         (N,) int64, optional; true labels, one per atom, kept for evaluation only
    /label_names    (L,) UTF-8 strings, optional; the name of each label code when the labels were not
                    integers (strings, say): label_names[labels] are the labels as given
    root attrs      format, format_version, kind, N, D, n_batches,
                    batches_fixed (True when the user asked for a batch count at convert time),
                    source (free text), created (ISO 8601 time, UTC)

``kind = "points"`` (:mod:`bnpvi.data.points`; one row per atom; o_B = N)::

    /X              (N, D) float64, stored whole, chunked by rows, uncompressed by default
    /weights        (N,) float64, optional; w_n >= 0, not all 0, of every row (read with each batch; a row
                    counts w_n times in every summary); root attribute weight_total = Σ_n w_n

``kind = "bow"`` (:mod:`bnpvi.data.bow`; bag of words, one document per atom, CSR layout; o_B = N)::

    /word_ids       (nnz,) int32, word types in [0, V); unique within each document
    /word_counts    (nnz,) float64, positive whole numbers
    /doc_range      (N+1,) int64, 0 = r_0 < r_1 < ... < r_N = nnz; document d is entries r_d:r_{d+1}
    /vocab          (V,) UTF-8 strings, optional
    /text           group, optional: how raw text became the counts (``bnpvi-data convert --text``;
                    :class:`~bnpvi.data.bow.TextOrigin`)
    root attrs      D = V (vocabulary size), plus nnz and tokens (sum of counts)

``kind = "seq"`` (:mod:`bnpvi.data.seq`; sequences, one time step per atom; o_B = n_seqs)::

    /X              (T, D) float64, the steps of all sequences one after another (N = T)
    /Xprev          (T, D) float64, optional; the observation before each step (auto-regressive models)
    /seq_range      (n_seqs+1,) int64, 0 = s_0 < s_1 < ... < s_n = T; sequence s is steps s_s:s_{s+1}
    root attrs      plus n_seqs

``kind = "graph"`` (:mod:`bnpvi.data.graph`; one node per atom, edges by source node in CSR form,
held-out pairs apart; o_B = N).

The 1-D datasets are chunked, about 1 MiB per chunk. Files are written
atomically (a temporary file in the destination directory, then
``os.replace``), so a reader never sees a half-written file and a crash never
leaves one behind.

A store keeps only the batch offsets in memory; a batch (or a block of a
one-pass scan) is read as one contiguous slice of each dataset, so memory is
O(batch), never O(N) (``labels()`` and ``vocab()`` are the exceptions).
"""
from bnpvi.data.base import FORMAT, FORMAT_VERSION, STORE_KINDS, BatchStore, chunk_1d, chunk_rows, split_offsets
from bnpvi.data.bow import BowStore, write_documents
from bnpvi.data.checks import (as_index_array, check_documents, check_labels, check_n_batches, check_points,
                               check_seq_range, check_vocab, first_nonfinite)
from bnpvi.data.graph import GraphBatch, GraphStore, write_graph
from bnpvi.data.points import PointStore, RowStore, write_points
from bnpvi.data.seq import SeqStore, write_sequences

__all__ = [
    "FORMAT", "FORMAT_VERSION", "STORE_KINDS", "BatchStore", "RowStore", "PointStore", "BowStore", "SeqStore",
    "GraphStore", "GraphBatch", "write_graph", "write_points", "write_documents", "write_sequences",
    "split_offsets", "chunk_rows", "chunk_1d",
    "first_nonfinite", "check_points", "check_labels", "as_index_array", "check_vocab", "check_documents",
    "check_seq_range", "check_n_batches",
]
