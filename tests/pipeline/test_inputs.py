"""`lazyfuel.pipeline.inputs`: each input kind parsed into its typed options (errors at their
line), generated data made block by block from the seed and the block's position (the same bytes
for the same seed and chunks, whatever computes them), sorted indices stratified, and each kind
built as a lazy Array holding exactly its data (npy memory-mapped, zarr written first when asked)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lazyfuel.pipeline.document import GraphError, read
from lazyfuel.pipeline.fields import Scope
from lazyfuel.pipeline.inputs import (
    MAX_BLOCKS,
    NpySource,
    Random,
    Values,
    ZarrSource,
    build,
    parse,
    random_array,
)

SCOPE = Scope("g.yaml", "input 'x'", {"n": 12})


def parsed(text: str, base: Path = Path("/data")):
    return parse(SCOPE, read(f"x: {text}\n", "g.yaml").value["x"], base)


def reason(text: str) -> str:
    with pytest.raises(GraphError) as caught:
        parsed(text)
    assert caught.value.line == 1 and caught.value.context == "input 'x'"
    return caught.value.reason


def test_each_kind_is_parsed_with_its_defaults():
    assert parsed("{random: {shape: [$n, 4]}}") == ("random", Random((12, 4), np.dtype(np.float32)))
    assert parsed("{indices: {shape: [5], high: 9, sorted: true}}") == (
        "indices", Random((5,), np.dtype(np.int64), low=0, high=9, sorted=True))
    assert parsed("{mask: {shape: 8, density: 0.25, seed: 3, chunks: 4}}") == (
        "mask", Random((8,), np.dtype(bool), chunks=4, seed=3, density=0.25))
    assert parsed("{npy: ../t.npy, chunks: [2, 3]}") == ("npy", NpySource(Path("/t.npy"), (2, 3)))
    assert parsed("{zarr: out/a.zarr, component: c}") == (
        "zarr", ZarrSource(Path("/data/out/a.zarr"), "c", None))
    kind, values = parsed("{values: [[1, 2], [3, 4]], dtype: int16}")
    assert kind == "values" and isinstance(values, Values) and values.chunks == "auto"
    assert values.data.dtype == np.int16 and values.data.tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize(("text", "why"), [
    ("[1, 2]", "an input is a mapping with one of zarr, npy, random, indices, mask, values"),
    ("{npy: a.npy, random: {shape: 2}}", "an input has exactly one kind (zarr, npy, random, indices, mask, "
                                         "values); got npy and random"),
    ("{rows: 3}", "an input has exactly one kind (zarr, npy, random, indices, mask, values); got none"),
    ("{indices: {shape: [4], high: 3, low: 3}}", "high (3) must be greater than low (3)"),
    ("{indices: {shape: [4], high: 3, dtype: float32}}", "dtype: indices are integers, got float32"),
    ("{indices: {shape: [2, 2], high: 3, sorted: true}}", "sorted indices are 1-d; shape [2, 2] has 2 dims"),
    ("{random: {shape: [4], low: 1, high: 0.5}}", "high (0.5) must be greater than low (1)"),
    ("{random: {shape: [100000000, 100000], chunks: 10}}",
     "shape [100000000, 100000] in chunks 10 makes 100,000,000,000 blocks; at most 1000000 are accepted"),
    ("{random: {shape: [10000000000000, 100000], chunks: 1}}",
     "shape [10000000000000, 100000] in chunks 1 makes more than 10**12 blocks"),
    ("{values: 3}", "values must be a list (nested for more dims) of numbers"),
    ("{values: [[1, 2], [3]]}", "values: "),
])
def test_a_bad_input_is_named_at_its_line(text: str, why: str):
    assert reason(text).startswith(why)
    assert MAX_BLOCKS == 1_000_000


def test_generated_blocks_depend_on_the_seed_and_position_only():
    spec = Random((10, 6), np.dtype(np.float32), chunks=(4, 3), seed=7)
    whole = random_array(spec).compute(scheduler="sync")
    again = random_array(spec).compute(scheduler="threads")
    assert whole.tobytes() == again.tobytes()
    want = np.random.default_rng([7, 1, 1]).standard_normal((4, 3), dtype=np.float32)
    assert whole[4:8, 3:6].tobytes() == want.tobytes()
    assert random_array(Random((10, 6), np.dtype(np.float32), (4, 3), seed=8)).compute().tobytes() != \
        whole.tobytes()


def test_each_dtype_is_generated_as_asked():
    ints = random_array(Random((1000,), np.dtype(np.int32), 250, low=-5, high=5)).compute()
    assert ints.dtype == np.int32 and ints.min() >= -5 and ints.max() < 5
    mask = random_array(Random((4000,), np.dtype(bool), 1000, density=0.25)).compute()
    assert mask.dtype == bool and 0.2 < mask.mean() < 0.3
    spec = Random((500,), np.dtype(np.float64), distribution="uniform", low=2, high=3)
    uniform = random_array(spec).compute()
    assert uniform.min() >= 2 and uniform.max() < 3
    z = random_array(Random((50,), np.dtype(np.complex64), 10)).compute()
    assert z.dtype == np.complex64 and np.all(z.imag != 0)


def test_sorted_indices_are_stratified_and_non_decreasing():
    idx = random_array(Random((1000,), np.dtype(np.int64), 100, low=0, high=50, sorted=True)).compute()
    assert np.all(np.diff(idx) >= 0) and idx[0] >= 0 and idx[-1] < 50
    positions = np.arange(1000)
    assert np.all(idx >= np.floor(50 * positions / 1000))
    assert np.all(idx <= np.floor(50 * (positions + 1) / 1000))


def test_each_kind_builds_an_array_of_exactly_its_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    a = np.random.default_rng().standard_normal((6, 4)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    log: list[str] = []
    npy = build("a", "npy", NpySource(tmp_path / "a.npy", (3, 4)), 1, "g.yaml", log.append)
    assert npy.chunks == ((3, 3), (4,)) and npy.compute().tobytes() == a.tobytes()
    vals = build("v", "values", Values(a, 2), 1, "g.yaml", log.append)
    assert vals.compute().tobytes() == a.tobytes()
    spec = Random((6, 4), np.dtype(np.float32), (3, 4), seed=1)
    store = tmp_path / "gen.zarr"
    z = build("z", "zarr", ZarrSource(store, None, spec), 1, "g.yaml", log.append)
    assert store.is_dir() and log[0].startswith(f"writing {store} (")
    assert log[1].startswith(f"wrote {store} in ")
    assert z.compute().tobytes() == random_array(spec).compute().tobytes()
    assert build("z", "zarr", ZarrSource(store, None, spec), 1, "g.yaml", log.append).shape == (6, 4)
    assert len(log) == 2  # there: read, not written again


def test_a_zarr_input_that_is_missing_or_differs_is_named(tmp_path):
    with pytest.raises(GraphError, match=r"^g\.yaml:4: input 'z': zarr: no store at .*nothing\.zarr \(add "
                                         r"'generate:' to write one\)$"):
        build("z", "zarr", ZarrSource(tmp_path / "nothing.zarr", None, None), 4, "g.yaml", print)
    spec = Random((6, 4), np.dtype(np.float32), (3, 4))
    build("z", "zarr", ZarrSource(tmp_path / "s.zarr", None, spec), 4, "g.yaml", lambda line: None)
    other = Random((6, 4), np.dtype(np.float32), (2, 4))
    with pytest.raises(GraphError, match=r"holds float32\[6, 4\] in chunks of \[3, 4\] but generate asks for "
                                         r"float32\[6, 4\] in chunks of \[2, 4\]; delete the store"):
        build("z", "zarr", ZarrSource(tmp_path / "s.zarr", None, other), 4, "g.yaml", print)


def test_a_file_that_cannot_be_read_is_a_graph_error_of_the_input(tmp_path):
    with pytest.raises(GraphError) as caught:
        build("a", "npy", NpySource(tmp_path / "missing.npy", "auto"), 7, "g.yaml", print)
    assert (caught.value.line, caught.value.context) == (7, "input 'a'")
    assert "missing.npy" in caught.value.reason
