"""Mixed select tasks with their numpy answers: the workload of the concurrency and soak tests.

A `Task` is a planner `Chain` over host arrays (a data array, possibly a strided, reversed,
offset or broadcast view, then index and mask arrays) and the result numpy gives for it. It can
run three ways: planned and run on a Vulkan executor (`run_on`), through the lazy API with dask
(`lazy`), or not at all (`expected`, computed while the task was drawn, op by op in numpy on
opaque words so that no float is ever rounded or canonicalised).

Kinds: `index_select`, `gather`, `masked_fill`, `contiguous` (of views, in the host layout and in
the chain), and `chain`: view -> index_select -> masked_fill -> gather, fused into one program.
Every DType the Vulkan bindings take is drawn. `templates(rng, n)` fixes n signatures (kind,
dtype, shapes, views, fill value) and `Template.draw(rng)` gives fresh data of one signature: a
soak of many tasks over few signatures reaches a steady state once every plan is cached, so what
grows after that is a leak.

benchmarks/probes/soak.py runs the same workload (it imports this module).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import lazyfuel as lf
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.planner.chain import decode_key, encode_key

DTYPES = tuple(DType)  # every dtype the Vulkan select bindings fan to (BOOL and complex included)
KINDS = ("index_select", "gather", "masked_fill", "contiguous", "chain")
HOST_VIEWS = ("contiguous", "transposed", "step2", "reversed", "offset", "broadcast")


@dataclass(frozen=True)
class Task:
    """A chain over `inputs` (input 0 is the data) and the result numpy gives for it."""

    kind: str
    dtype: DType
    chain: Chain
    inputs: tuple[np.ndarray, ...]
    expected: np.ndarray

    def run_on(self, executor: Any, planner: Planner) -> np.ndarray:
        """Plan the chain for these inputs and run it on `executor`; the one result."""
        program = planner.plan(self.chain, [DType.from_numpy(a.dtype) for a in self.inputs],
                               [Layout.of(a) for a in self.inputs])
        (result,) = executor.run(program, self.inputs)
        return result

    def lazy(self, chunks: int) -> lf.Array:
        """The same chain through the lazy API: the data as `chunks`-sized blocks, indices and masks
        as concrete numpy arrays (nothing runs until it is computed)."""
        values: list[Any] = [lf.from_array(self.inputs[0], chunks=chunks), *self.inputs[1:]]
        for node in self.chain.nodes:
            values.append(_LAZY[node.op](*(values[a] for a in node.args), **node.attr))
        return values[self.chain.outputs[0]]


def check(task: Task, got: np.ndarray) -> None:
    """AssertionError unless `got` has the expected dtype and shape and the same bytes."""
    want = task.expected
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(f"{task.kind} {task.dtype}: got {got.dtype}{got.shape}, "
                             f"expected {want.dtype}{want.shape}")
    g = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
    e = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
    if not np.array_equal(g, e):
        bad = np.flatnonzero(g != e)
        first = bad[0]
        raise AssertionError(f"{task.kind} {task.dtype} {want.shape}: {bad.size} of {g.size} bytes "
                             f"differ, first at byte {first}: got {g[first]:#04x}, expected {e[first]:#04x}")


# -- drawing tasks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """One task signature; `draw` fills it with fresh random data (the same plan every time)."""

    kind: str
    dtype: DType
    shape: tuple[int, ...]
    view: str
    seed: int  # fixes the index counts, dims and chain views
    value: Any  # the fill value, of `dtype`: one object, so that a NaN still finds its cached plan

    def draw(self, rng: np.random.Generator) -> Task:
        """A task of this signature with new data, indices and masks from `rng`."""
        return _DRAW[self.kind](_Build(self, rng))


def template(rng: np.random.Generator, i: int, max_side: int = 6) -> Template:
    """Signature number `i`: kind, dtype and host view round-robin by `i`, shape of rank 1-3 and
    sides up to `max_side` from `rng`."""
    dtype = DTYPES[i % len(DTYPES)]
    shape = tuple(int(s) for s in rng.integers(1, max_side + 1, int(rng.integers(1, 4))))
    return Template(KINDS[i % len(KINDS)], dtype, shape, HOST_VIEWS[i % len(HOST_VIEWS)],
                    int(rng.integers(1 << 31)), random_bits(rng, dtype, ())[()])


def templates(rng: np.random.Generator, n: int, max_side: int = 6) -> list[Template]:
    """`n` signatures covering every kind, dtype and host view (n >= 66 covers every pair)."""
    return [template(rng, i, max_side) for i in range(n)]


def draw(rng: np.random.Generator, max_side: int = 6) -> Task:
    """A task of a random signature (most often a plan not cached yet)."""
    return template(rng, int(rng.integers(1 << 16)), max_side).draw(rng)


def random_bits(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Random bytes as `dtype` (NaNs with payloads, subnormals, -0.0 included); BOOL: 0 or 1."""
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    n = math.prod(shape) * dtype.itemsize
    return rng.integers(0, 256, n, dtype=np.uint8).view(dtype.numpy).reshape(shape)


def host_view(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """Random data of `shape` whose layout is `kind` (one of HOST_VIEWS)."""
    if kind == "transposed":
        return random_bits(rng, dtype, shape[::-1]).T
    if kind == "step2":
        stored = random_bits(rng, dtype, tuple(2 * n for n in shape))
        return stored[tuple(slice(None, None, 2) for _ in shape)]
    if kind == "reversed":
        return random_bits(rng, dtype, shape)[::-1]
    if kind == "offset":
        return random_bits(rng, dtype, tuple(n + 1 for n in shape))[tuple(slice(1, None) for _ in shape)]
    if kind == "broadcast":
        small = tuple(1 if i % 2 == 0 else n for i, n in enumerate(shape))
        return np.broadcast_to(random_bits(rng, dtype, small), shape)
    return random_bits(rng, dtype, shape)


class _Build:
    """Builds a chain and, op by op, its numpy answer on opaque words (`V<itemsize>`)."""

    def __init__(self, template: Template, rng: np.random.Generator) -> None:
        self.t, self.rng = template, rng
        self.fixed = np.random.default_rng(template.seed)  # signature choices: the same every draw
        data = host_view(rng, template.dtype, template.shape, template.view)
        self.inputs: list[np.ndarray] = [data]
        self.ops: list[tuple[str, tuple[tuple[str, int], ...], tuple]] = []
        self.words = data.view(f"V{data.dtype.itemsize}")  # the current value in numpy
        self.ref: tuple[str, int] = ("in", 0)

    def add_input(self, a: np.ndarray) -> tuple[str, int]:
        self.inputs.append(a)
        return ("in", len(self.inputs) - 1)

    def node(self, op: str, refs: Sequence[tuple[str, int]], words: np.ndarray, **attrs: Any) -> None:
        self.ops.append((op, tuple(refs), tuple(attrs.items())))
        self.ref, self.words = ("node", len(self.ops) - 1), words

    # views and ops, each applied to the current value
    def reverse_and_transpose(self) -> None:
        w = self.words
        if w.ndim and self.fixed.integers(2):
            key = (slice(None, None, -1),) + (slice(None),) * (w.ndim - 1)
            self.node("getitem", [self.ref], w[key], key=encode_key(key))
        if self.words.ndim > 1:
            axes = tuple(int(a) for a in self.fixed.permutation(self.words.ndim))
            self.node("transpose", [self.ref], self.words.transpose(axes), axes=axes)

    def index_select(self) -> None:
        w = self.words
        dim = int(self.fixed.integers(w.ndim))
        n = int(self.fixed.integers(1, 2 * w.shape[dim] + 2))
        idx = self.rng.integers(0, w.shape[dim], n).astype(np.uint32)
        self.node("IndexSelect", [self.ref, self.add_input(idx)], np.take(w, idx.astype(np.intp), axis=dim),
                  dim=dim)

    def gather(self) -> None:
        w = self.words
        dim = int(self.fixed.integers(w.ndim))
        shape = tuple(int(self.fixed.integers(1, 7)) if d == dim else s for d, s in enumerate(w.shape))
        idx = self.rng.integers(0, w.shape[dim], shape).astype(np.uint32)
        self.node("Gather", [self.ref, self.add_input(idx)],
                  np.take_along_axis(w, idx.astype(np.intp), axis=dim), dim=dim)

    def masked_fill(self) -> None:
        w = self.words
        value = self.t.value  # of the data's dtype: written with its exact bits
        broadcast = w.ndim > 1 and self.fixed.integers(2)
        mask_shape = (1, *w.shape[1:]) if broadcast else w.shape
        mask = self.rng.integers(0, 2, mask_shape).astype(bool)
        mask_ref = self.add_input(mask)
        if broadcast:  # a stride-0 mask in the chain: the planner contiguizes it
            self.ops.append(("broadcast_to", (mask_ref,), (("shape", w.shape),)))
            mask_ref = ("node", len(self.ops) - 1)
        out = np.array(w, order="C")
        out[np.broadcast_to(mask, w.shape)] = np.asarray(value, self.t.dtype.numpy).view(w.dtype)
        self.node("MaskedFill", [self.ref, mask_ref], out, value=value)

    def contiguous(self) -> None:
        self.node("Contiguize", [self.ref], np.ascontiguousarray(self.words))

    def task(self) -> Task:
        n = len(self.inputs)
        number = {("in", i): i for i in range(n)} | {("node", j): n + j for j in range(len(self.ops))}
        nodes = tuple(OpNode(op, tuple(number[r] for r in refs), attrs) for op, refs, attrs in self.ops)
        expected = np.ascontiguousarray(self.words).view(self.t.dtype.numpy)
        return Task(self.t.kind, self.t.dtype, Chain(n, nodes, (number[self.ref],)), tuple(self.inputs),
                    expected)


def _draw_chain(b: _Build) -> Task:
    b.reverse_and_transpose()
    b.index_select()
    b.masked_fill()
    b.gather()
    return b.task()


def _draw_contiguous(b: _Build) -> Task:
    b.reverse_and_transpose()
    b.contiguous()
    return b.task()


def _one(op: str):
    return lambda b: (getattr(b, op)(), b.task())[1]


_DRAW = {"index_select": _one("index_select"), "gather": _one("gather"), "masked_fill": _one("masked_fill"),
         "contiguous": _draw_contiguous, "chain": _draw_chain}

# chain op -> the lazy API call (values first, then the node's attributes)
_LAZY = {
    "transpose": lambda x, axes: lf.transpose(x, axes),
    "getitem": lambda x, key: x[decode_key(key)],
    "broadcast_to": lambda x, shape: np.broadcast_to(x, shape),
    "IndexSelect": lambda x, idx, dim: lf.index_select(x, dim, idx),
    "Gather": lambda x, idx, dim: lf.gather(x, dim, idx),
    "MaskedFill": lambda x, mask, value: lf.masked_fill(x, mask, value),
    "Contiguize": lambda x: lf.contiguous(x),
}
