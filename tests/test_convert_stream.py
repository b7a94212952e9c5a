"""The converter's outputs equal the reference written before it streamed (``tests/convert_cases.py``): every
dataset, its dtype, shape, chunks and compression, and every attribute but the time of writing, for each kind
of source with and without batches, shuffling and held-out parts, read in blocks of the usual size and of a few
rows (so every block boundary is crossed)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from bnpvi.data.convert import convert
from bnpvi.data.mapped import Spool
from bnpvi.errors import BnpviError
from convert_cases import CASES, REFERENCE, _source_free, convert_case, dump, make_sources


@pytest.fixture(scope="module")
def reference():
    with np.load(REFERENCE.with_suffix(".npz"), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    return arrays, json.loads(REFERENCE.with_suffix(".json").read_text())


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    return root, make_sources(root)


@pytest.mark.parametrize("small_blocks", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_output_equals_the_reference(name, small_blocks, reference, sources, tmp_path, monkeypatch):
    if small_blocks:  # every read, spool, gather and write in blocks of a few rows, entries or lines
        monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", 7)
        monkeypatch.setattr("bnpvi.data.mapped._GATHER_ROWS", 3)
        monkeypatch.setattr("bnpvi.data.ldac._LDAC_BLOCK", 64)
        monkeypatch.setattr("bnpvi.data.text_in._CHUNK_DOCS", 5)
        monkeypatch.setattr("bnpvi.data.sources.TEXT_BLOCK", 16)
        monkeypatch.setattr("bnpvi.data.text_in.TEXT_BLOCK", 16)
    arrays, meta = reference
    root, paths = sources
    got_arrays, got_meta = dump(convert_case(name, paths, tmp_path / f"{name}.h5"))
    assert _source_free(got_meta, root) == meta[name]
    expected = {key.split("/", 1)[1]: value for key, value in arrays.items() if key.split("/", 1)[0] == name}
    assert sorted(got_arrays) == sorted(expected)
    for key, value in expected.items():
        assert got_arrays[key].dtype == value.dtype, key
        np.testing.assert_array_equal(got_arrays[key], value, err_msg=key, strict=True)


@pytest.mark.parametrize("content", ["x,y\n1,2\n3,4\n", "x,y\n1,2\n3,oops\n"])
def test_spools_go_beside_the_output_and_are_removed(tmp_path, content, monkeypatch):
    monkeypatch.setattr("bnpvi.data.base._SCAN_VALUES", 2)  # one row per chunk: the spool has rows when it fails
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "p.csv").write_text(content)
    seen = []
    monkeypatch.setattr("bnpvi.data.mapped.Spool.mapped",
                        lambda spool, mapped=Spool.mapped: seen.append(spool.path) or mapped(spool))
    try:
        convert(tmp_path / "src" / "p.csv", tmp_path / "p.h5", shuffle_seed=0)
    except BnpviError as err:
        assert "row 1" in str(err)
    assert all(path.parent.parent == tmp_path for path in seen)
    assert sorted(path.name for path in tmp_path.iterdir()) == (["p.h5", "src"] if "oops" not in content
                                                                  else ["src"])


def peak_rss_mb(script: str) -> float:
    """Peak RSS of a Python child running ``script``."""
    wrapper = ("import resource, subprocess, sys\n"
               "subprocess.check_call([sys.executable, '-c', sys.argv[1]])\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", wrapper, script], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 1024


@pytest.mark.slow
def test_peak_memory_is_flat_in_n(tmp_path):
    """Converting 2e6 rows peaks within 10 % of converting 2e5 (scripts/bench_convert.py goes to 2e7)."""
    peaks = []
    for n in (200_000, 2_000_000):
        src = tmp_path / f"x{n}.npy"
        np.save(src, np.random.default_rng(0).standard_normal((n, 16)))
        peaks.append(peak_rss_mb(f"from bnpvi.cli.data import main; main(['convert', '{src}', '{src}.h5'])"))
    assert peaks[1] < 1.1 * peaks[0], peaks
