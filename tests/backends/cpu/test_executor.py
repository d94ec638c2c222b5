"""CpuExecutor on hand-built programs: results equal the reference functions, errors say which step."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import lazyfuel.backends.cpu as cpu
from lazyfuel.backends.cpu.executor import CpuExecutor
from lazyfuel.backends.cpu.kernels import gather, index_select, masked_fill
from lazyfuel.checks import fill_bytes
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step
from lazyfuel.registry import Registry

CPU_MD = Path(cpu.__file__).parents[2] / "contracts" / "cpu.md"


@pytest.fixture(scope="module")
def binding():
    cpu.register()
    registry = Registry()
    registry.load(CPU_MD)

    def find(op: OpKind, *dtypes: DType):
        return next(b for b in registry.bindings() if b.op_kind is op and b.dtypes == dtypes)
    return find


def contiguize_step(binding, arg: int, a: np.ndarray) -> Step:
    layout = Layout.of(a)
    dt = DType.from_numpy(a.dtype)
    return Step(binding(OpKind.Contiguize, dt, dt), (arg,),
                (("shape", layout.shape), ("strides", layout.strides), ("offset", layout.offset)),
                layout.shape, dt, reason="input is reversed + strided")


def program_for(inputs, steps, outputs) -> Program:
    return Program(tuple(DType.from_numpy(a.dtype) for a in inputs), tuple(Layout.of(a) for a in inputs),
                   tuple(steps), tuple(outputs))


def chain(binding):
    """contiguize(x) → index_select(dim 1) → masked_fill(broadcast mask) → gather(dim 0)."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::2]            # (4, 3), reversed, strided
    idx = np.array([2, 0], np.uint32)
    mask = np.broadcast_to(np.array([True, False]), (4, 2))                 # stride-0 view
    rows = np.array([[3, 0]], np.uint32)
    inputs = [x, idx, mask, rows]
    f32 = DType.F32
    steps = [
        contiguize_step(binding, 0, x),                                                       # value 4
        Step(binding(OpKind.IndexSelect, f32, DType.U32, f32), (4, 1),
             (("outer_count", 4), ("source_dim_size", 3), ("n_indices", 2), ("inner_count", 1)),
             (4, 2), f32),                                                                    # value 5
        Step(binding(OpKind.MaskedFill, f32, DType.BOOL, f32), (5, 2),
             (("fill_bytes", fill_bytes(-1, f32)),), (4, 2), f32),                            # value 6
        Step(binding(OpKind.Gather, f32, DType.U32, f32), (6, 3),
             (("source_shape", (4, 2)), ("output_shape", (1, 2)), ("dim", 0)), (1, 2), f32),  # value 7
    ]
    return inputs, program_for(inputs, steps, (7, 5, 0))


def test_chain_matches_the_reference(binding):
    inputs, program = chain(binding)
    x, idx, mask, rows = inputs
    got = CpuExecutor().run(program, inputs)
    selected = index_select(x, 1, idx)
    expected = [gather(masked_fill(selected, mask, -1), 0, rows), selected, np.array(x, order="C")]
    for g, e in zip(got, expected):
        assert g.flags.c_contiguous and g.dtype == e.dtype and g.shape == e.shape
        assert g.tobytes() == e.tobytes()
    assert not np.shares_memory(got[2], x)  # an output that is an input comes back as a copy


def test_results_land_in_the_arrays_given(binding):
    """out=: every output written into its poisoned destination, which is what comes back; the
    kernels that take `out` write it themselves (gather, index_select), an input output is copied."""
    inputs, program = chain(binding)
    expected = CpuExecutor().run(program, inputs)
    dests = [np.full(e.shape, np.float32(np.nan)) for e in expected]
    got = CpuExecutor().run(program, inputs, out=dests)
    for g, d, e in zip(got, dests, expected):
        assert g is d and g.tobytes() == e.tobytes()
    _, _, mask, _ = inputs
    data = np.arange(8, dtype=np.uint8).reshape(4, 2)
    one = Step(binding(OpKind.MaskedFill, DType.U8, DType.BOOL, DType.U8), (0, 1),
               (("fill_bytes", fill_bytes(200, DType.U8)),), (4, 2), DType.U8)
    dest = np.zeros((4, 2), np.uint8)
    [out] = CpuExecutor().run(program_for([data, mask], [one], (2,)), [data, mask], out=[dest])
    assert out is dest and dest.tolist() == np.where(mask, 200, data).tolist()
    with pytest.raises(ValueError, match=r"out\[0\] must be a writeable C-contiguous array of shape"):
        CpuExecutor().run(program, inputs, out=[np.empty((2, 1), np.float32), None, None])


def test_select_reads_strided_input_natively(binding):
    x = np.arange(30, dtype=np.int64).reshape(5, 6).T[::-1]                  # (6, 5), transposed, reversed
    idx = np.array([4, 4, 0], np.uint32)
    step = Step(binding(OpKind.IndexSelect, DType.I64, DType.U32, DType.I64), (0, 1),
                (("outer_count", 6), ("source_dim_size", 5), ("n_indices", 3), ("inner_count", 1)),
                (6, 3), DType.I64)
    [out] = CpuExecutor().run(program_for([x, idx], [step], (2,)), [x, idx])
    np.testing.assert_array_equal(out, x[:, [4, 4, 0]])


def test_bad_index_names_the_step(binding):
    inputs, program = chain(binding)
    inputs[1] = np.array([2, 3], np.uint32)
    with pytest.raises(IndexError, match=r"index 3 at position 1 is out of range") as info:
        CpuExecutor().run(program, inputs)
    assert any("in step 1: (IndexSelect,[F32,U32,F32],Cpu) numpy" in n for n in info.value.__notes__)


def test_inputs_must_match_the_program(binding):
    inputs, program = chain(binding)
    with pytest.raises(ValueError, match=r"the program takes 4 inputs, got 3"):
        CpuExecutor().run(program, inputs[:3])
    wrong_dtype = [inputs[0].astype(np.float64), *inputs[1:]]
    with pytest.raises(TypeError, match=r"input 0 has dtype float64, the program expects F32"):
        CpuExecutor().run(program, wrong_dtype)
    wrong_layout = [np.ascontiguousarray(inputs[0]), *inputs[1:]]
    with pytest.raises(ValueError, match=r"input 0 has layout .* the program was planned for"):
        CpuExecutor().run(program, wrong_layout)


def test_refuses_bindings_of_another_backend(binding):
    inputs, program = chain(binding)
    step = program.steps[0]
    key = dataclasses.replace(step.binding.key, backend=Backend.Vulkan)
    foreign = dataclasses.replace(step, binding=dataclasses.replace(step.binding, key=key))
    program = dataclasses.replace(program, steps=(foreign, *program.steps[1:]))
    with pytest.raises(ValueError, match=r"step 0 is bound to .* on Vulkan; the Cpu executor runs Cpu"):
        CpuExecutor().run(program, inputs)


def test_wrong_step_shape_is_reported(binding):
    inputs, program = chain(binding)
    bad = dataclasses.replace(program.steps[1], out_shape=(4, 3))
    program = dataclasses.replace(program, steps=(program.steps[0], bad, *program.steps[2:]))
    with pytest.raises(ValueError, match=r"step 1 .* returned float32 \(4, 2, 1\), expected float32 "
                                         r"\(4, 3\)"):
        CpuExecutor().run(program, inputs)


def test_empty_program_copies_its_outputs():
    x = np.arange(3, dtype=np.uint8)[::-1]
    [out] = CpuExecutor().run(program_for([x], [], (0,)), [x])
    assert out.flags.c_contiguous and out.tolist() == [2, 1, 0] and not np.shares_memory(out, x)


def test_planned_chain_with_views_runs_and_matches_the_reference():
    """The planner's programs (Contiguize of views of inputs, native select) run as planned."""
    from lazyfuel.planner import Chain, OpNode, Planner
    from lazyfuel.planner.chain import encode_key

    cpu.register()
    registry = Registry()
    registry.load(CPU_MD)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, 1::2]
    idx, mask = np.array([2, 0], np.uint32), np.array([True, False])
    chain = Chain(3, (
        OpNode("transpose", (0,), (("axes", None),)),                                      # 3: (3, 4)
        OpNode("IndexSelect", (3, 1), (("dim", 1),)),                                      # 4: (3, 2)
        OpNode("broadcast_to", (2,), (("shape", (3, 2)),)),                                # 5
        OpNode("MaskedFill", (4, 5), (("value", -1),)),                                    # 6
        OpNode("getitem", (6,), (("key", encode_key((slice(None, None, -1),))),)),         # 7
    ), (7,))
    inputs = [x, idx, mask]
    program = Planner(registry, [Backend.Cpu]).plan(
        chain, [DType.from_numpy(a.dtype) for a in inputs], [Layout.of(a) for a in inputs])
    [out] = CpuExecutor().run(program, inputs)
    expected = masked_fill(index_select(x.T, 1, idx), mask, -1)[::-1]
    assert out.flags.c_contiguous and out.tobytes() == np.ascontiguousarray(expected).tobytes()


def test_a_row_mask_is_read_as_its_broadcast_view_never_widened():
    """W3's row mask (N, 1) over (N, C) on the Cpu backend: planned without a Contiguize step (the
    Cpu masked_fill accepts stride 0) and run on the broadcast view: the run allocates the result
    and nothing of the mask's widened size (N x C bytes)."""
    import tracemalloc

    from lazyfuel.planner import Planner
    from lazyfuel.planner.chain import Chain, OpNode
    from lazyfuel.providers import default_registry

    rng = np.random.default_rng(21)
    n, c = 4096, 512
    data = rng.standard_normal((n, c)).astype(np.float32)
    mask = np.broadcast_to(rng.random((n, 1)) < 0.5, (n, c))
    chain = Chain(2, (OpNode("MaskedFill", (0, 1), (("value", -1.0),)),), (2,))
    program = Planner(default_registry(), [Backend.Cpu]).plan(
        chain, [DType.F32, DType.BOOL], [Layout.of(data), Layout.of(mask)])
    assert [s.binding.op_kind for s in program.steps] == [OpKind.MaskedFill]
    CpuExecutor().run(program, [data, mask])  # warm
    tracemalloc.start()
    try:
        (got,) = CpuExecutor().run(program, [data, mask])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, np.where(mask, np.float32(-1), data))
    assert peak < data.nbytes + n * c // 2  # the result; a widened mask would add n * c bytes
