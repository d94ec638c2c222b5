"""Graph inputs: reading their specs and building them as lazy `lazyfuel.Array`s.

Kinds (one per input, with its options):

    zarr: PATH         component: NAME (optional)   generate: {RANDOM OPTIONS} (optional: written
                       first, chunk by chunk, when PATH does not exist)
    npy: PATH          chunks: … (optional; the file is memory-mapped, never pickled)
    random: {shape, dtype: float32, chunks: auto, seed: 0, distribution: normal|uniform, low, high}
    indices: {shape, high, low: 0, seed: 0, chunks: auto, dtype: int64, sorted: false}
    mask: {shape, density: 0.5, seed: 0, chunks: auto}
    values: [[…], …]   dtype, chunks (optional): a small inline array

Generated data is made block by block with `numpy.random.default_rng([seed, *block_index])`, so
it never sits in memory whole and the same seed and chunks give the same bytes on any scheduler.
`sorted: true` indices (1-d) are stratified: position p of n draws from
[low + (high-low)·p/n, low + (high-low)·(p+1)/n), so each block of indices hits a narrow band of
the source: what an out-of-core index_select wants.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks
from dask.utils import parse_bytes

import lazyfuel as lf
from lazyfuel.pipeline.document import GraphError, Y
from lazyfuel.pipeline.fields import Scope

KINDS = ("zarr", "npy", "random", "indices", "mask", "values")
MAX_BLOCKS = 1_000_000  # blocks of one generated input
_SIBLINGS = {"zarr": ("component", "generate"), "npy": ("chunks",), "values": ("dtype", "chunks")}
Log = Callable[[str], None]


@dataclass(frozen=True)
class Random:
    """A seeded random array, generated block by block."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: Any = "auto"
    seed: int = 0
    distribution: str = "normal"  # floats: normal | uniform; ints: uniform in [low, high)
    low: float | None = None
    high: float | None = None
    density: float = 0.5  # bool arrays: the fraction of True
    sorted: bool = False  # 1-d ints: stratified, non-decreasing


@dataclass(frozen=True)
class ZarrSource:
    path: Path
    component: str | None
    generate: Random | None


@dataclass(frozen=True)
class NpySource:
    path: Path
    chunks: Any


@dataclass(frozen=True)
class Values:
    data: np.ndarray
    chunks: Any


def parse(scope: Scope, y: Y, base: Path) -> tuple[str, Any]:
    """The kind and typed options of one input node; GraphError at the offending line."""
    if not y.is_map:
        raise scope.error(f"an input is a mapping with one of {', '.join(KINDS)}", y.line)
    kinds = [k for k in KINDS if k in y.value]
    if len(kinds) != 1:
        what = "none" if not kinds else " and ".join(kinds)
        raise scope.error(f"an input has exactly one kind ({', '.join(KINDS)}); got {what}", y.line)
    kind = kinds[0]
    fields = scope.mapping(y, f"a {kind} input", (kind,), _SIBLINGS.get(kind, ()))
    node = fields[kind]
    if kind == "zarr":
        generate = _random(scope, fields["generate"], "array") if "generate" in fields else None
        component = scope.string(fields["component"], "component") if "component" in fields else None
        return kind, ZarrSource(_join(base, scope.string(node, "zarr")), component, generate)
    if kind == "npy":
        chunks = scope.resolve(fields["chunks"]) if "chunks" in fields else "auto"
        if "chunks" in fields and chunks != "auto" and not isinstance(chunks, int):
            chunks = scope.integers(fields["chunks"], "chunks", 1)
        return kind, NpySource(_join(base, scope.string(node, "npy")), chunks)
    if kind == "values":
        return kind, _values(scope, node, fields)
    return kind, _random(scope, node, kind)


def _join(base: Path, relative: str) -> Path:
    return Path(os.path.normpath(base / relative))


def _random(scope: Scope, y: Y, kind: str) -> Random:
    keys = {"array": ("dtype", "chunks", "seed", "distribution", "low", "high", "density"),
            "random": ("dtype", "chunks", "seed", "distribution", "low", "high", "density"),
            "indices": ("low", "seed", "chunks", "dtype", "sorted"),
            "mask": ("density", "seed", "chunks")}[kind]
    required = ("shape", "high") if kind == "indices" else ("shape",)
    f = scope.mapping(y, "generate" if kind == "array" else kind, required, keys)
    shape = scope.shape(f["shape"])
    default_dtype = {"indices": "int64", "mask": "bool"}.get(kind, "float32")
    dtype = scope.dtype(f["dtype"]) if "dtype" in f else np.dtype(default_dtype)
    chunks = scope.chunks(f["chunks"], len(shape)) if "chunks" in f else "auto"
    seed = scope.integer(f["seed"], "seed", 0) if "seed" in f else 0
    low = scope.number(f["low"], "low") if "low" in f else None
    high = scope.number(f["high"], "high") if "high" in f else None
    dist = scope.choice(f["distribution"], "distribution", ("normal", "uniform")) if "distribution" in f \
        else "normal"
    density = scope.fraction(f["density"], "density") if "density" in f else 0.5
    is_sorted = scope.boolean(f["sorted"], "sorted") if "sorted" in f else False
    if kind == "indices":
        if dtype.kind not in "iu":
            raise scope.error(f"dtype: indices are integers, got {dtype.name}", f["dtype"].line)
        low = 0 if low is None else low
        if high <= low:
            raise scope.error(f"high ({high}) must be greater than low ({low})", f["high"].line)
        if is_sorted and len(shape) != 1:
            raise scope.error(f"sorted indices are 1-d; shape {list(shape)} has {len(shape)} dims",
                              f["sorted"].line)
    if low is not None and high is not None and high <= low:
        raise scope.error(f"high ({high}) must be greater than low ({low})", f["high"].line)
    blocks = _block_count(shape, chunks, dtype)
    if blocks > MAX_BLOCKS:
        many = f"{blocks:,}" if blocks < 10**12 else "more than 10**12"
        raise scope.error(f"shape {list(shape)} in chunks {chunks} makes {many} blocks; at most "
                          f"{MAX_BLOCKS} are accepted (dask would spend minutes planning them): use larger "
                          "chunks or a smaller shape", f["shape"].line)
    return Random(shape, dtype, chunks, seed, dist, low, high, density, is_sorted)


def _block_count(shape: tuple[int, ...], chunks: Any, dtype: np.dtype) -> int:
    """About how many blocks a generated array of `shape` in `chunks` has ('auto' axes share dask's
    chunk size), computed without building the chunks (which could take forever)."""
    per_axis = chunks if isinstance(chunks, tuple) else (chunks,) * len(shape)
    explicit = math.prod(-(-n // c) for n, c in zip(shape, per_axis) if c != "auto")
    auto_bytes = dtype.itemsize * math.prod(n for n, c in zip(shape, per_axis) if c == "auto")
    return explicit * max(1, -(-auto_bytes // parse_bytes(dask.config.get("array.chunk-size"))))


def _values(scope: Scope, node: Y, fields: dict[str, Y]) -> Values:
    if not node.is_list:
        raise scope.error("values must be a list (nested for more dims) of numbers", node.line)
    dtype = scope.dtype(fields["dtype"]) if "dtype" in fields else None
    try:
        data = np.asarray(node.plain(), dtype=dtype)
    except (ValueError, TypeError) as err:
        raise scope.error(f"values: {err}", node.line) from None
    if data.dtype == object:
        raise scope.error("values: rows must have equal lengths and hold numbers", node.line)
    chunks = scope.chunks(fields["chunks"], data.ndim) if "chunks" in fields else "auto"
    return Values(data, chunks)


# -- building ------------------------------------------------------------------------------------
def build(name: str, kind: str, options: Any, line: int, graph_path: str, log: Log) -> lf.Array:
    """The input as a lazy Array (a missing generated zarr store is written first)."""
    try:
        if kind == "zarr":
            return _zarr(name, options, line, graph_path, log)
        if kind == "npy":
            return lf.from_array(np.load(options.path, mmap_mode="r", allow_pickle=False), options.chunks)
        if kind == "values":
            return lf.from_array(options.data, options.chunks)
        return lf.asarray(random_array(options))
    except GraphError:
        raise
    except (OSError, ValueError, TypeError, OverflowError) as err:  # e.g. a shape numpy cannot index
        raise GraphError(str(err).splitlines()[0] if str(err) else type(err).__name__, graph_path, line,
                         f"input {name!r}") from err


def random_array(spec: Random) -> da.Array:
    """A dask array generating `spec` block by block (nothing runs until it is computed)."""
    chunks = normalize_chunks(spec.chunks, spec.shape, dtype=spec.dtype)
    meta = np.empty((0,) * len(spec.shape), spec.dtype)
    return da.map_blocks(_block, chunks=chunks, dtype=spec.dtype, meta=meta, spec=spec)


def _block(spec: Random, block_info: dict | None = None) -> np.ndarray:
    info = block_info[None]
    shape = tuple(info["chunk-shape"])
    rng = np.random.default_rng([spec.seed, *info["chunk-location"]])
    dtype = spec.dtype
    if dtype.kind == "b":
        return rng.random(shape) < spec.density
    if dtype.kind in "iu":
        low = int(spec.low if spec.low is not None else 0)
        high = int(spec.high if spec.high is not None else (256 if dtype.itemsize == 1 else 1000))
        if spec.sorted:
            n = info["shape"][0]
            start, stop = info["array-location"][0]
            position = np.arange(start, stop, dtype=np.float64) + rng.random(shape)
            return (low + np.floor((high - low) * position / n)).astype(dtype)
        return rng.integers(low, high, shape, dtype=np.int64).astype(dtype)
    if spec.distribution == "uniform":
        low = float(spec.low if spec.low is not None else 0.0)
        high = float(spec.high if spec.high is not None else 1.0)
        real = rng.uniform(low, high, (2, *shape) if dtype.kind == "c" else shape)
    else:
        real = rng.standard_normal((2, *shape) if dtype.kind == "c" else shape, dtype=np.float32)
    if dtype.kind == "c":
        return (real[0] + 1j * real[1]).astype(dtype)
    return real.astype(dtype)


def _zarr(name: str, src: ZarrSource, line: int, graph_path: str, log: Log) -> lf.Array:
    if not src.path.exists():
        if src.generate is None:
            raise GraphError(f"zarr: no store at {src.path} (add 'generate:' to write one)", graph_path, line,
                             f"input {name!r}")
        _write_store(src, log)
    arr = lf.from_zarr(src.path, component=src.component)
    gen = src.generate
    if gen is not None:
        chunks = normalize_chunks(gen.chunks, gen.shape, dtype=gen.dtype)
        if (arr.shape, arr.dtype, arr.chunks) != (gen.shape, gen.dtype, chunks):
            held = f"{arr.dtype}{list(arr.shape)} in chunks of {[c[0] for c in arr.chunks]}"
            asked = f"{gen.dtype}{list(gen.shape)} in chunks of {[c[0] for c in chunks]}"
            raise GraphError(f"the store at {src.path} holds {held} but generate asks for {asked}; delete "
                             "the store or change its path", graph_path, line, f"input {name!r}")
    return arr


def _write_store(src: ZarrSource, log: Log) -> None:
    """Write the generated array with `Array.to_zarr`: beside its path, moved in when whole."""
    gen = src.generate
    assert gen is not None  # the caller checked
    arr = random_array(gen)
    log(f"writing {src.path} ({arr.nbytes / 2**20:.1f} MiB, {gen.dtype}{list(gen.shape)}, seed {gen.seed}) …")
    started = time.perf_counter()
    lf.asarray(arr).to_zarr(src.path, component=src.component, compressors=None)
    log(f"wrote {src.path} in {time.perf_counter() - started:.1f} s")
