"""Sources of every kind and the ``convert`` options they are converted with, and a dump of a batch file's
datasets, so that a converter can be compared with the outputs it made before (``tests/data/convert_reference``).

``python tests/convert_cases.py`` writes the reference (the outputs of the converter it runs under); the test
that compares is ``tests/test_convert_stream.py``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import scipy.sparse as sp

REFERENCE = Path(__file__).resolve().parent / "data" / "convert_reference"

_WORDS = "goal match team score coach vote party law court senate star planet orbit moon comet the of and".split()


def _points(rng: np.random.Generator, n: int = 103, d: int = 3) -> np.ndarray:
    return rng.normal(size=(n, d)) * [1.0, 5.0, 0.1][:d] + [2.0, -1.0, 10.0][:d]


def _write_csv(path: Path, header: list[str] | None, columns: list) -> None:
    rows = zip(*columns)
    lines = ([",".join(header)] if header else []) + [",".join(str(cell) for cell in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def _documents(rng: np.random.Generator, n: int = 57, V: int = 18) -> list[list[tuple[int, int]]]:
    """Documents as lists of (id, count) pairs, some ids repeated within a document."""
    docs = []
    for _ in range(n):
        ids = rng.integers(0, V, size=rng.integers(1, 9))
        docs.append([(int(i), int(c)) for i, c in zip(ids, rng.integers(1, 5, size=ids.size))])
    return docs


def make_sources(root: Path) -> dict[str, Path]:
    """Write every source file under ``root``; name -> path."""
    rng = np.random.default_rng(24)
    out = {}
    X = _points(rng)
    names = np.array(["ant", "bee", "cat", "dog"])[rng.integers(0, 4, size=X.shape[0])]
    out["points_header.csv"] = root / "points_header.csv"
    _write_csv(out["points_header.csv"], ["x", "y", "z", "kind"], [*(X.T.round(6)), names])
    ints = rng.integers(0, 5, size=80)
    Y = _points(rng, 80, 2)
    out["points_plain.csv"] = root / "points_plain.csv"
    _write_csv(out["points_plain.csv"], None, [*(Y.T.round(5)), ints])
    out["points.npy"] = root / "points.npy"
    np.save(out["points.npy"], _points(rng, 97, 3).astype(np.float32))
    out["points_labels.txt"] = root / "points_labels.txt"
    out["points_labels.txt"].write_text("\n".join(str(v) for v in rng.choice([0.5, 1.5, 2.5], size=97)) + "\n")
    out["points.npz"] = root / "points.npz"
    np.savez(out["points.npz"], X=_points(rng, 64, 3), truth=rng.integers(0, 3, size=64).astype(float))
    out["points_zipped.npz"] = root / "points_zipped.npz"
    np.savez_compressed(out["points_zipped.npz"], X=rng.integers(-3, 4, size=(50, 4)))

    docs = _documents(rng)
    out["corpus.ldac"] = root / "corpus.ldac"
    out["corpus.ldac"].write_text("".join(f"{len(d)} " + " ".join(f"{i}:{c}" for i, c in d) + "\n" for d in docs))
    out["vocab.txt"] = root / "vocab.txt"
    out["vocab.txt"].write_text("\n".join(_WORDS) + "\n")
    out["doc_labels.txt"] = root / "doc_labels.txt"
    out["doc_labels.txt"].write_text("\n".join(rng.choice(["sport", "law", "sky"], size=len(docs))) + "\n")
    ids = np.concatenate([[i for i, _ in d] for d in docs])
    counts = np.concatenate([[c for _, c in d] for d in docs]).astype(float)
    dr = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    out["triplet.npz"] = root / "triplet.npz"
    np.savez(out["triplet.npz"], word_id=ids, word_count=counts, doc_range=dr, vocab_size=20,
             topic=rng.integers(0, 3, size=len(docs)), true_topics=rng.dirichlet(np.ones(20), size=3))
    dense = rng.integers(0, 3, size=(45, 12)) * (rng.random((45, 12)) < 0.4)
    dense[dense.sum(axis=1) == 0, 0] = 1
    matrix = sp.csr_matrix(dense)
    matrix.data[::7] = 0  # stored zeros are dropped
    out["matrix.npz"] = root / "matrix.npz"
    sp.save_npz(out["matrix.npz"], matrix)
    out["matrix_coo.npz"] = root / "matrix_coo.npz"
    sp.save_npz(out["matrix_coo.npz"], sp.coo_matrix(dense[:30]), compressed=False)

    lines = [" ".join(rng.choice(_WORDS, size=rng.integers(0, 12))).capitalize() for _ in range(70)]
    out["texts.txt"] = root / "texts.txt"
    out["texts.txt"].write_text("\n".join(lines) + "\n")
    out["texts.csv"] = root / "texts.csv"
    _write_csv(out["texts.csv"], ["id", "body", "stars"],
               [range(len(lines)), [f'"{line}"' for line in lines], rng.integers(1, 6, size=len(lines))])

    T = 120
    seq_range = np.array([0, 9, 30, 31, 55, 80, 96, T])
    out["steps.npz"] = root / "steps.npz"
    np.savez(out["steps.npz"], X=_points(rng, T, 2), Xprev=_points(rng, T, 2), bounds=seq_range,
             state=rng.integers(0, 4, size=T))
    who = np.repeat(["s1", "s7", "s2", "s9", "s3"], [12, 20, 3, 30, 15])
    out["steps.csv"] = root / "steps.csv"
    Z = _points(rng, who.size, 3)
    _write_csv(out["steps.csv"], ["subject", "a", "b", "c", "state", "t"],
               [who, *(Z.T.round(6)), rng.choice(["rest", "walk"], size=who.size), range(who.size)])
    return out


#: name -> (source name, convert options); the options hold every kind of order: none, batches,
#: shuffle, held out, and their combinations.
CASES: dict[str, tuple[str, dict]] = {
    "csv_header": ("points_header.csv", dict(labels="kind")),
    "csv_header_batches": ("points_header.csv", dict(labels="kind", n_batches=4)),
    "csv_header_shuffle": ("points_header.csv", dict(labels="kind", shuffle_seed=3, n_batches=5)),
    "csv_header_heldout": ("points_header.csv", dict(labels="kind", heldout=0.2, heldout_seed=1)),
    "csv_header_all": ("points_header.csv", dict(columns="z,x", heldout=0.3, shuffle_seed=5, n_batches=3)),
    "csv_plain": ("points_plain.csv", dict(labels="-1", shuffle_seed=1, n_batches=2)),
    "npy": ("points.npy", {}),
    "npy_shuffle": ("points.npy", dict(shuffle_seed=2, n_batches=5)),
    "npy_heldout": ("points.npy", dict(heldout=0.1, labels_file="points_labels.txt")),
    "npy_all": ("points.npy", dict(heldout=0.25, heldout_seed=7, shuffle_seed=0, n_batches=4)),
    "npz": ("points.npz", dict(labels="truth", n_batches=3)),
    "npz_all": ("points.npz", dict(labels="truth", heldout=0.2, shuffle_seed=9, n_batches=2)),
    "npz_zipped": ("points_zipped.npz", dict(shuffle_seed=4)),
    "ldac": ("corpus.ldac", dict(vocab="vocab.txt")),
    "ldac_shuffle": ("corpus.ldac", dict(shuffle_seed=1, n_batches=3, labels_file="doc_labels.txt")),
    "ldac_heldout": ("corpus.ldac", dict(heldout=0.2, heldout_seed=2)),
    "ldac_all": ("corpus.ldac", dict(vocab="vocab.txt", heldout=0.3, shuffle_seed=6, n_batches=2,
                                     labels_file="doc_labels.txt")),
    "triplet": ("triplet.npz", dict(labels="topic", n_batches=2)),
    "triplet_all": ("triplet.npz", dict(labels="topic", heldout=0.25, shuffle_seed=8, n_batches=3)),
    "matrix": ("matrix.npz", dict(shuffle_seed=4, n_batches=3)),
    "matrix_heldout": ("matrix.npz", dict(heldout=0.2)),
    "matrix_coo": ("matrix_coo.npz", dict(n_batches=2, shuffle_seed=1)),
    "text": ("texts.txt", dict(text=True, stop_words="english", min_df=2)),
    "text_all": ("texts.txt", dict(text=True, stop_words="none", heldout=0.2, shuffle_seed=1, n_batches=2)),
    "text_csv": ("texts.csv", dict(text=True, stop_words="none", text_column="body", labels="stars", max_df=0.5,
                                   max_vocab=10, shuffle_seed=3)),
    "seq_npz": ("steps.npz", dict(sequences="bounds", labels="state")),
    "seq_npz_shuffle": ("steps.npz", dict(sequences="bounds", labels="state", shuffle_seed=3, n_batches=2)),
    "seq_csv": ("steps.csv", dict(sequence_column="subject", labels="state", columns="a,c,b")),
    "seq_csv_shuffle": ("steps.csv", dict(sequence_column="subject", labels="state", shuffle_seed=1, n_batches=3)),
}

#: Options that name another source file.
_FILE_OPTIONS = ("vocab", "labels_file")


def convert_case(name: str, sources: dict[str, Path], dst: Path) -> Path:
    """Convert case ``name``'s source to ``dst`` with its options."""
    from bnpvi.data.convert import convert

    src, options = CASES[name]
    options = {key: (sources[value] if key in _FILE_OPTIONS else value) for key, value in options.items()}
    return convert(sources[src], dst, **options)


def dump(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """Every dataset of a batch file (name -> values) and its layout and attributes (``created`` left out:
    it is the time of writing)."""
    arrays, meta = {}, {}

    def visit(name, obj):
        attrs = {key: (value.tolist() if isinstance(value, np.ndarray) else
                       value.item() if isinstance(value, np.generic) else value)
                 for key, value in obj.attrs.items() if key != "created"}
        if isinstance(obj, h5py.Dataset):
            values = obj[()]
            if h5py.check_string_dtype(obj.dtype) is not None:
                values = np.array(obj.asstr()[()], dtype=str)
            arrays[name] = values
            meta[name] = {"dtype": str(obj.dtype), "shape": list(obj.shape),
                          "chunks": None if obj.chunks is None else list(obj.chunks),
                          "compression": obj.compression, "attrs": attrs}
        else:
            meta[name + "/"] = {"attrs": attrs}

    with h5py.File(path, "r") as f:
        meta["/"] = {"attrs": {key: (value.item() if isinstance(value, np.generic) else value)
                               for key, value in f.attrs.items() if key != "created"}}
        f.visititems(visit)
    return arrays, meta


def _source_free(meta: dict, root: Path) -> dict:
    """The layout with the temporary directory of the sources taken out of the ``source`` attribute."""
    text = json.dumps(meta, sort_keys=True).replace(str(root) + "/", "")
    return json.loads(text)


def outputs(root: Path) -> tuple[dict[str, np.ndarray], dict]:
    """Convert every case under ``root``; all datasets (``case/name``) and all layouts (``case`` -> layout)."""
    sources = make_sources(root)
    arrays, meta = {}, {}
    for name in CASES:
        case_arrays, case_meta = dump(convert_case(name, sources, root / f"{name}.h5"))
        arrays.update({f"{name}/{key}": value for key, value in case_arrays.items()})
        meta[name] = _source_free(case_meta, root)
    return arrays, meta


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        arrays, meta = outputs(Path(tmp))
    REFERENCE.parent.mkdir(exist_ok=True)
    np.savez_compressed(REFERENCE.with_suffix(".npz"), **arrays)
    lines = (f"{json.dumps(name)}: {json.dumps(meta[name], sort_keys=True)}" for name in CASES)
    REFERENCE.with_suffix(".json").write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"wrote {REFERENCE}.npz and .json: {len(CASES)} cases, {len(arrays)} datasets")


if __name__ == "__main__":
    sys.exit(main())
