"""The converter's outputs equal the reference written before it streamed (``tests/convert_cases.py``): every
dataset, its dtype, shape, chunks and compression, and every attribute but the time of writing, for each kind
of source with and without batches, shuffling and held-out parts, read in blocks of the usual size and of a few
rows (so every block boundary is crossed)."""
import json

import numpy as np
import pytest

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
    arrays, meta = reference
    root, paths = sources
    got_arrays, got_meta = dump(convert_case(name, paths, tmp_path / f"{name}.h5"))
    assert _source_free(got_meta, root) == meta[name]
    expected = {key.split("/", 1)[1]: value for key, value in arrays.items() if key.split("/", 1)[0] == name}
    assert sorted(got_arrays) == sorted(expected)
    for key, value in expected.items():
        assert got_arrays[key].dtype == value.dtype, key
        np.testing.assert_array_equal(got_arrays[key], value, err_msg=key, strict=True)
