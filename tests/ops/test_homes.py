"""An op's modules in the other layers are found by its name (`lazyfuel.ops.homes`), so a new op
adds its own files and one line in `lazyfuel/ops/__init__.py`: the op kind is added by its spec
(`OpKind.add`), its contract documents `<backend>_<op>.md` load with the backend's, and its graph
builder (`FUNCTION`) becomes `Array.<op>`, `lf.<op>` and a graph step. The full proof is the
`flip2` branch (docs/architecture.md, "where to add an op"); these run the seams on real ops."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.api import _op_function
from lazyfuel.array import _op_method
from lazyfuel.backends import catalog
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.graph import ops as graph_ops
from lazyfuel.graph.ir import Node
from lazyfuel.ops import spec_for, specs
from lazyfuel.ops.homes import declared
from lazyfuel.pipeline.ops import _declared
from lazyfuel.providers import documents


def test_an_ops_module_in_a_package_is_found_by_the_ops_name(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "layer_of_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gather.py").write_text("STEPS = {'gather_too': 'the gather step'}\n")
    (package / "masked_fill.py").write_text("OTHER = 1\n")  # no STEPS: not this layer's declaration
    (package / "unrelated.py").write_text("STEPS = {'x': 1}\n")  # not named after an op
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [(spec.kind, value) for spec, value in declared("layer_of_test", "STEPS")]
    assert found == [(OpKind.Gather, {"gather_too": "the gather step"})]


def test_op_kind_add_opens_the_kinds_in_a_fresh_process() -> None:
    code = ("import pickle\nfrom lazyfuel.contracts.model import OpKind\nk = OpKind.add('Roll')\n"
            "assert OpKind.Roll is k is OpKind.parse('Roll') is OpKind('Roll') is OpKind.add('Roll')\n"
            "assert list(OpKind)[-1] is k and pickle.loads(pickle.dumps(k)) is k and str(k) == 'Roll'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_op_kind_add_keeps_the_existing_kinds_and_refuses_bad_names() -> None:
    assert OpKind.add("Gather") is OpKind.Gather
    for bad in ("1x", "_Hidden", "two words"):
        with pytest.raises(ValueError, match="public identifier"):
            OpKind.add(bad)


def test_an_ops_own_contract_documents_load_after_the_backends(tmp_path: Path) -> None:
    for name in ("cpu.md", "cpu_gather.md", "vulkan_gather.md", "cpu_roll.md"):
        (tmp_path / name).write_text("")
    cpu = catalog.info(Backend.Cpu)
    assert documents(cpu, tmp_path) == ("cpu.md", "cpu_gather.md")  # no op Roll: not loaded
    assert documents(cpu)[0] == "cpu.md"


def first_rows(x: Node, dim: int, count: int = 1) -> Node:
    """The first `count` slices of `x` along `dim`."""
    return graph_ops.index_select(x, dim, np.arange(count))


def test_a_graph_builder_becomes_a_method_a_function_and_a_graph_step() -> None:
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    method = _op_method("first_rows", first_rows)
    function = _op_function("first_rows", method)
    assert str(inspect.signature(method)) == "(self, dim: 'int', count: 'int' = 1) -> 'Array'"
    assert str(inspect.signature(function)) == "(x: 'Any', dim: 'int', count: 'int' = 1) -> 'Array'"
    assert function.__doc__ == method.__doc__ == first_rows.__doc__
    assert method(lf.from_array(x, chunks=2), 1, 3).compute().tobytes() == x[:, :3].tobytes()
    assert function(x, 0).compute().tobytes() == x[:1].tobytes()
    step = _declared("first_rows", function)
    assert step.keys == ("x", "dim", "count") and step.params["count"].default == 1
    assert step.call(x=x, dim=1, count=2).compute().tobytes() == x[:, :2].tobytes()


def test_a_graph_step_refuses_a_parameter_it_cannot_read() -> None:
    def tagged(x: Node, tag: object) -> Node:
        return x

    with pytest.raises(TypeError, match="op tagged: parameter 'tag' is annotated 'object'; a graph step"):
        _declared("tagged", _op_function("tagged", _op_method("tagged", tagged)))


def test_which_arguments_each_op_reads_as_a_stream_is_its_specs_rule() -> None:
    long_rows = {"inner_count": 128, "n_indices": 10, "source_dim_size": 10}  # 512-byte F32 rows
    short_rows = {**long_rows, "inner_count": 127}
    more_picked = {**long_rows, "n_indices": 11}
    select, fill, both = (spec_for(k) for k in (OpKind.IndexSelect, OpKind.MaskedFill, OpKind.SelectFill))
    assert [select.streams(p, 0, 4) for p in (long_rows, short_rows, more_picked)] == [True, False, False]
    assert select.streams(more_picked, 1, 4) and both.streams(short_rows, 2, 4)
    assert both.streams(long_rows, 0, 4) and not both.streams(short_rows, 0, 4)
    assert fill.streams({}, 0, 1) and fill.streams({}, 1, 1)
    streaming = {s.kind for s in specs() if s.streams is not None}  # gather's scatter, views, FFTs: none
    assert {OpKind.Gather, OpKind.Contiguize, OpKind.Fft, OpKind.Irfft}.isdisjoint(streaming)
