"""Building programs by hand, running one kernel inside guard bytes, and checking results bit for
bit against numpy."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np
from reference_document import SEED

from lazyfuel.backends.vulkan import register
from lazyfuel.backends.vulkan.kernels import DeviceValue, StatusSlot
from lazyfuel.backends.vulkan.memory import Allocation
from lazyfuel.contracts.model import OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner.program import Program, Step
from lazyfuel.registry import Registry
from lazyfuel.registry.model import Binding

REPO = Path(__file__).resolve().parents[3]
VULKAN_MD = REPO / "lazyfuel" / "contracts" / "vulkan.md"
VARIANTS_MD = REPO / "lazyfuel" / "contracts" / "vulkan_variants.md"
ALL_DTYPES = tuple(DType)
POISON = 0xA5  # the byte the session pool's allocator fills fresh device memory with (conftest.py)
# Bit patterns arithmetic would change: NaNs with payloads, -0.0, the smallest subnormal, -inf.
SPECIALS = {
    2: [0x7C01, 0xFE42, 0x8000, 0x0001, 0xFC00, 0x7F81, 0x0040],  # f16 and bf16 NaNs, subnormals
    4: [0x7FA00001, 0xFFC12345, 0x80000000, 0x00000001, 0xFF800000],
    8: [0x7FF4000000000001, 0xFFF8DEADBEEF0001, 0x8000000000000000, 1, 0xFFF0000000000000],
}


@cache
def registry() -> Registry:
    """The reference document and lazyfuel's Vulkan document, linked."""
    register()
    found = Registry()
    found.load(SEED)
    found.load(VULKAN_MD)
    found.load(VARIANTS_MD)
    return found


def binding(op: OpKind, *dtypes: DType, kernel: str | None = None) -> Binding:
    """The first Vulkan binding for (op, dtypes), or the one of contract kernel `kernel`."""
    for b in registry().bindings():
        if b.op_kind is op and b.dtypes == dtypes and kernel in (None, b.contract.kernel):
            return b
    raise LookupError(f"no Vulkan binding for {op} {dtypes}" + (f" of kernel {kernel}" if kernel else ""))


def random_array(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Random bits of `dtype` (BOOL: 0/1) with special float patterns sprinkled in."""
    n = math.prod(shape)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    a = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype.numpy).reshape(shape)
    if dtype.numpy.kind in "fV" and n and dtype.itemsize in SPECIALS:
        words = a.reshape(-1).view(f"u{dtype.itemsize}")
        specials = SPECIALS[dtype.itemsize]
        picks = rng.choice(n, min(n, len(specials)), replace=False)
        words[picks] = np.array(specials[: len(picks)], words.dtype)
    return a


def raw(a: np.ndarray) -> np.ndarray:
    """`a` as opaque words of its width (so numpy moves bits and never compares floats)."""
    return np.ascontiguousarray(a).view(f"V{a.dtype.itemsize}")


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal dtype and shape, `got` contiguous, and identical bytes."""
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.flags.c_contiguous
    g = got.reshape(-1).view(np.uint8)
    e = np.ascontiguousarray(expected).reshape(-1).view(np.uint8)
    if not np.array_equal(g, e):
        bad = np.flatnonzero(g != e)
        raise AssertionError(f"{bad.size} of {g.size} bytes differ, first at byte {bad[0]}: "
                             f"got {g[bad[0]]:#04x}, expected {e[bad[0]]:#04x}")


class ProgramBuilder:
    """Inputs first, then steps (values: inputs 0..n-1, then one per step, as in a Program)."""

    def __init__(self, *inputs: np.ndarray) -> None:
        self.inputs: list[np.ndarray] = list(inputs)
        self.steps: list[Step] = []

    def input(self, i: int, contiguous: bool = True) -> int:
        """Input `i` as a value; with `contiguous`, through a Contiguize step when its layout is awkward."""
        if contiguous and not Layout.of(self.inputs[i]).is_contiguous:
            return self.contiguize(i)
        return i

    def value_count(self) -> int:
        return len(self.inputs) + len(self.steps)

    def _add(self, step: Step) -> int:
        self.steps.append(step)
        return self.value_count() - 1

    def contiguize(self, value: int) -> int:
        a = self.inputs[value]
        layout, dt = Layout.of(a), DType.from_numpy(a.dtype)
        return self._add(Step(binding(OpKind.Contiguize, dt, dt), (value,),
                              (("shape", layout.shape), ("strides", layout.strides),
                               ("offset", layout.offset)),
                              layout.shape, dt, reason="awkward input"))

    def index_select(self, src: int, shape: tuple[int, ...], dt: DType, dim: int, idx: int, n: int,
                     kernel: str | None = None) -> int:
        shape = shape or (1,)
        params = (("outer_count", math.prod(shape[:dim])), ("source_dim_size", shape[dim]),
                  ("n_indices", n), ("inner_count", math.prod(shape[dim + 1:])))
        out = (*shape[:dim], n, *shape[dim + 1:])
        return self._add(Step(binding(OpKind.IndexSelect, dt, DType.U32, dt, kernel=kernel), (src, idx),
                              params, out, dt))

    def gather(self, src: int, shape: tuple[int, ...], dt: DType, dim: int, idx: int,
               out_shape: tuple[int, ...], kernel: str | None = None) -> int:
        params = (("source_shape", shape), ("output_shape", out_shape), ("dim", dim))
        return self._add(Step(binding(OpKind.Gather, dt, DType.U32, dt, kernel=kernel), (src, idx), params,
                              out_shape, dt))

    def masked_fill(self, data: int, shape: tuple[int, ...], dt: DType, mask: int, fill: bytes) -> int:
        return self._add(Step(binding(OpKind.MaskedFill, dt, DType.BOOL, dt), (data, mask),
                              (("fill_bytes", fill),), shape, dt))

    def select_fill(self, src: int, shape: tuple[int, ...], dt: DType, dim: int, idx: int, n: int,
                    mask: int, fill: bytes) -> int:
        """One SelectFill step: masked_fill(index_select(src, dim, idx), mask, fill)."""
        shape = shape or (1,)
        params = (("outer_count", math.prod(shape[:dim])), ("source_dim_size", shape[dim]),
                  ("n_indices", n), ("inner_count", math.prod(shape[dim + 1:])), ("fill_bytes", fill))
        out = (*shape[:dim], n, *shape[dim + 1:])
        return self._add(Step(binding(OpKind.SelectFill, dt, DType.U32, DType.BOOL, dt), (src, idx, mask),
                              params, out, dt))

    def program(self, outputs: tuple[int, ...]) -> Program:
        return Program(tuple(DType.from_numpy(a.dtype) for a in self.inputs),
                       tuple(Layout.of(a) for a in self.inputs), tuple(self.steps), outputs)


def run_one(executor, builder: ProgramBuilder, out: int) -> np.ndarray:
    (result,) = executor.run(builder.program((out,)), builder.inputs)
    return result


VIEW_KINDS = ("contiguous", "transposed", "step2", "reversed", "offset", "broadcast")


def make_view(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """An array of `shape` and random bits whose layout is `kind`."""
    if kind == "contiguous" or not shape:
        return random_array(rng, dtype, shape)
    if kind == "transposed":
        return random_array(rng, dtype, shape[::-1]).T
    if kind == "step2":
        stored = random_array(rng, dtype, tuple(2 * n for n in shape))
        return stored[tuple(slice(None, None, 2) for _ in shape)]
    if kind == "reversed":
        return random_array(rng, dtype, shape)[tuple(slice(None, None, -1) for _ in shape)]
    if kind == "offset":
        return random_array(rng, dtype, tuple(n + 1 for n in shape))[tuple(slice(1, None) for _ in shape)]
    if kind == "broadcast":
        small = tuple(1 if i % 2 == 0 else n for i, n in enumerate(shape))
        return np.broadcast_to(random_array(rng, dtype, small), shape)
    raise ValueError(kind)


GUARD = 0x5A  # the byte around guarded buffers
PAD = 64  # guard bytes on each side (a multiple of 16 keeps the buffers aligned)


def padded(nbytes: int) -> int:
    """`nbytes` rounded up to 16, as every device buffer is."""
    return -(-nbytes // 16) * 16


def carve(batch, nbytes: int) -> tuple[Allocation, Allocation]:
    """An allocation of `nbytes` (rounded up to 16) with PAD guard bytes before and after it (inside
    `outer`)."""
    nbytes = padded(nbytes)
    outer = batch.alloc(PAD + nbytes + PAD)
    outer.host[:] = GUARD
    inner = Allocation(outer.block, outer.offset + PAD, nbytes, outer.address + PAD,
                       outer.host[PAD:PAD + nbytes])
    return outer, inner


def run_kernel(pool, step: Step, inputs: list[np.ndarray], out_nbytes: int, poison: int):
    """Record `step` with guarded inputs and a guarded output poisoned with `poison`; return
    (the output's bytes with PAD guard bytes on each side, the status word)."""
    kernel = step.binding.kernel_ref.impl
    with pool.batch() as batch:
        values = []
        for a in inputs:
            _, inner = carve(batch, a.nbytes)
            inner.host[:a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            values.append(DeviceValue(inner, DType.from_numpy(a.dtype), Layout.contiguous(a.shape)))
        out_outer, out = carve(batch, out_nbytes)
        out.host[:] = poison
        status = batch.alloc(4)
        status.host[:4] = 0xFF
        kernel.record(batch, step, values, out, StatusSlot(status, 0))
        batch.barrier()
        batch.run()
        return out_outer.host.copy(), int(status.host[:4].view(np.uint32)[0])


def random_rows(rows: int, width: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    """A fresh random (rows, *width) table of `dtype`, every bit pattern possible (bools 0 or 1)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows, *width, np.dtype(dtype).itemsize), dtype=np.uint8)
    if dtype is np.bool_:
        raw &= 1
    return raw.view(dtype).reshape((rows, *width))


def row_positions(kind: str, rows: int, count: int, seed: int) -> np.ndarray:
    """`count` positions into `rows` rows: "sorted", "repeated" (five rows over and over) or random
    (in the wide index dtype)."""
    rng = np.random.default_rng(seed)
    if kind == "sorted":
        return np.sort(rng.integers(0, rows, count)).astype(np.uint32)
    if kind == "repeated":
        return rng.integers(0, 5, count).astype(np.uint32) * (rows // 5)
    return rng.integers(0, rows, count).astype(np.int64)
