"""The knob table, `KNOBS`: per knob its variable, its parser, its default and the README's text
(`lazyfuel.settings` reads the environment against it and holds `lazyfuel.config`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyfuel.knob_parsers import (
    _backend_choices,
    _budget,
    _budget_or_off,
    _bytes_or_off,
    _choice,
    _count,
    _count_or_off,
    _flag,
    _kernel_names,
    _on_off,
    _optional_text,
    _path,
    _seconds,
    _validation,
)

CROSSING_MODES = ("auto", "host", "exported")
TRANSFER_MODES = ("auto", "direct", "staged", "import", "zero-copy")  # memtypes.Mode's values + auto
MAPPINGS = ("auto", "coalesced", "sequential")
MEMORY_BINDINGS = ("auto", "address")
HOST_ROWS = ("auto", "in-place", "streamed")  # how a host row gather kept on the device is moved


@dataclass(frozen=True)
class Knob:
    """One knob: its variable (None: internal), how a value is checked and normalised (`parse`,
    raising `Invalid`), its default (a value, or computed from the environment), and the README's
    type/choices and description."""

    name: str
    env: str | None
    parse: Callable[[Any], Any]
    default: Any
    accepts: str
    doc: str


def _default_cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "lazyfuel"


def _one_of(name: str, env: str, choices: tuple[str, ...], doc: str) -> Knob:
    """A knob taking one of `choices`, the first (`auto`) by default."""
    return Knob(name, env, _choice(choices), choices[0], ", ".join(choices), doc)


def _how_many(name: str, env: str, what: str, doc: str) -> Knob:
    """A knob counting `what` (1 or more), unset by default (its user's default applies)."""
    return Knob(name, env, _count(what), None, "integer >= 1", doc)


_COMPUTED = object()  # a default computed from the environment (see `_defaults`)
_defaults: dict[str, Callable[[Mapping[str, str]], Any]] = {"cache_dir": _default_cache_dir}

KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("backend", "LAZYFUEL_BACKEND", _choice(_backend_choices), "auto",
         "auto, vulkan, cuda, opencl, cpu",
         "which backend runs the work: `auto` plans over every usable one, a name forces that one "
         "(an error if it cannot run here)"),
    Knob("device", "LAZYFUEL_DEVICE", _optional_text, None, "index or name substring",
         "the Vulkan device to use (default: the best: discrete > integrated > virtual > cpu)"),
    Knob("devices", "LAZYFUEL_DEVICES", _optional_text, None, "comma-separated indices or names",
         "the Vulkan devices blocks are spread over (one may repeat: `0,0`); default the `device` "
         "one alone if set, else every usable device of the best kind"),
    Knob("validation", "LAZYFUEL_VALIDATION", _validation, False, "0, 1, sync",
         "the Khronos validation layer on new Vulkan instances; `sync` adds synchronization "
         "validation"),
    Knob("cache_dir", "LAZYFUEL_CACHE_DIR", _path, _COMPUTED, "path",
         "where the judge's measurements and the pipeline cache live (default "
         "`$XDG_CACHE_HOME/lazyfuel`, else `~/.cache/lazyfuel`)"),
    _one_of("crossing", "LAZYFUEL_CROSSING", CROSSING_MODES,
            "how a Vulkan result reaches a CUDA consumer: device to device where possible, always "
            "through host memory, or exported memory whatever the consumer (a test hook)"),
    _one_of("vulkan_transfer", "LAZYFUEL_VULKAN_TRANSFER", TRANSFER_MODES,
            "how host arrays reach a Vulkan device and come back (default per device: "
            "docs/internals.md)"),
    _how_many("copy_threads", "LAZYFUEL_COPY_THREADS", "threads",
              "threads that copy host memory into and out of Vulkan staging (copies of 32 MiB and "
              "more; default the cores, at most 16; 1: the caller's thread alone)"),
    _how_many("vulkan_queues", "LAZYFUEL_VULKAN_QUEUES", "queues",
              "how many queues of one family a Vulkan pool submits to (default 4, at most what the "
              "family has)"),
    Knob("vulkan_groups", "LAZYFUEL_VULKAN_GROUPS", _optional_text, None,
         "`256x8` or `gather=64x4,...`",
         "workgroup size x elements per invocation, for every kernel family or those listed "
         "(over the judge's picks; checked against the device when a pool opens)"),
    Knob("fence_spin", "LAZYFUEL_VULKAN_FENCE_SPIN", _seconds, 0.0, "seconds >= 0",
         "how long a thread waiting for Vulkan work polls its fence before it sleeps, one thread a "
         "pool at a time (0: asleep at once; measured on the H200 with no settled gain: "
         "docs/decisions.md 111)"),
    _one_of("vulkan_mapping", "LAZYFUEL_VULKAN_MAPPING", MAPPINGS,
            "how invocations map to elements (default per device kind)"),
    _one_of("vulkan_memory", "LAZYFUEL_VULKAN_MEMORY", MEMORY_BINDINGS,
            "how kernels see buffers: push descriptors where the device has them, or device "
            "addresses always"),
    Knob("opencl_device", "LAZYFUEL_OPENCL_DEVICE", _optional_text, None, "index or name substring",
         "the OpenCL device the VkFFT OpenCL backend opens (default the best kind)"),
    Knob("cuda_device", "LAZYFUEL_CUDA_DEVICE", _optional_text, None, "CUDA device number",
         "the GPU the VkFFT CUDA backend opens (default 0)"),
    Knob("device_memory_budget", "LAZYFUEL_DEVICE_MEMORY_BUDGET", _budget, 0.8,
         "fraction of the heap or bytes",
         "the device memory each pool may keep resident blocks in (`persist(device=True)`); "
         "least recently used blocks spill to host memory past it"),
    Knob("kept_imports", "LAZYFUEL_KEPT_IMPORTS", _budget_or_off, 0.5,
         "fraction of host memory, bytes, or 0",
         "pageable arrays a discrete GPU reads or writes again keep their pages imported "
         "(page-locked) up to this many bytes, least recently used released first; 0 keeps none"),
    _one_of("host_rows", "LAZYFUEL_HOST_ROWS", HOST_ROWS,
            "how the rows of an index_select over a host array reach a result kept on a Vulkan "
            "device (`compute(device=True)`): by cost; `in-place`: a kernel reads them from the "
            "array's imported pages wherever it can; `streamed`: the host gathers them into "
            "page-locked staging, piece by piece"),
    Knob("kept_indices", "LAZYFUEL_KEPT_INDICES", _budget_or_off, 2 << 30,
         "fraction of host memory, bytes, or 0",
         "concrete indices (and persisted index blocks) a select over resident blocks reads stay "
         "on that device between computes, up to this many bytes per device, least recently used "
         "dropped first; 0 keeps none (every compute uploads them)"),
    Knob("link_probe", "LAZYFUEL_LINK_PROBE", _on_off, True, "1, 0",
         "measure a new Vulkan pool's link to host memory (both ways, pageable and page-locked) and "
         "the device's copy rate in at most 100 ms, once per device (cached in `cache_dir`), for "
         "the transfer priors; 0: the priors of the device kind"),
    Knob("read_budget", "LAZYFUEL_READ_BUDGET", _budget, 0.25,
         "fraction of host memory or bytes",
         "bytes of zarr chunk data the read tasks of a select over `lf.from_zarr` hold at once "
         "(a fraction of host memory or bytes; read when the graph is built)"),
    Knob("task_bytes", "LAZYFUEL_TASK_BYTES", _bytes_or_off, 128 << 20, "bytes or 0",
         "a compute on dask's local schedulers runs adjacent small blocks of the result together, "
         "one task and one program per about this many bytes (at least two tasks per worker "
         "thread), the Array's chunks unchanged; 0: one task per block"),
    Knob("prep_slots", "LAZYFUEL_PREP_SLOTS", _count_or_off, 1, "integer >= 0",
         "tasks of a compute that run their Python at once, each until its work is handed off (its "
         "first submit, a fence wait, a large host copy, a program on the CPU): the first tasks "
         "submit after their own preparation, not after every thread's interleaved under the GIL "
         "(docs/decisions.md 112); 0: no turns"),
    Knob("device_task_bytes", "LAZYFUEL_DEVICE_TASK_BYTES", _bytes_or_off, 4 << 30, "bytes or 0",
         "a graph whose results stay on the device (`persist(device=True)`, `compute(device=True)`) "
         "runs adjacent blocks of one device as one task and one command buffer, up to this many "
         "bytes of result (at least one task per worker thread), the Array's chunks unchanged; "
         "0: one task per block"),
    Knob("reuse_device_graphs", "LAZYFUEL_REUSE_DEVICE_GRAPHS", _on_off, True, "1, 0",
         "a repeated `persist(device=True)` / `compute(device=True)` of one Array under the same "
         "settings on dask's local schedulers reuses its materialised, ordered graph and runs its "
         "tasks on lazyfuel's threads, without dask's per-call graph work (`graph/held_run.py`; "
         "not with dask callbacks or other scheduler arguments than `num_workers`); 0: dask's persist"),
    Knob("replay_device_graphs", "LAZYFUEL_REPLAY_DEVICE_GRAPHS", _on_off, True, "1, 0",
         "a reused device graph (`reuse_device_graphs`) that is one layer of batched block programs "
         "over resident blocks replays what its last run decided (each block's executor, program "
         "and inputs: no task, planning or placement), recording and submitting every block on "
         "one thread, while the same knobs, pools and input blocks hold (`graph/replay.py`); 0: "
         "every task evaluated each time"),
    Knob("pin_kernels", "LAZYFUEL_PIN_KERNELS", _kernel_names, (), "comma-separated kernel names",
         "contract kernels the planner takes wherever they can run, over cheaper ones (e.g. "
         "`select_fill`, `index_select_strided`); `lazyfuel audit` and `lf.explain` name them"),
    Knob("_resident", None, _flag, False, "bool",
         "internal: block tasks keep Vulkan results on the device (`persist(device=True)` sets it)"),
    Knob("_device_threads", None, _count("threads"), None, "integer >= 1",
         "internal: the threads a graph whose results stay on the device runs on (`graph.batched`; "
         "None: `graph.resident.device_workers`)"),
    Knob("_resident_shared", None, _flag, False, "bool",
         "internal: kept results lie in memory CUDA can import where the GPU is CUDA's "
         "(`compute(device=True)` sets it)"),
    Knob("_force_wide", None, _flag, False, "bool",
         "internal: Vulkan kernels use their 64-bit-position variant whatever the sizes"),
    Knob("_progress_after_s", None, _seconds, 0.5, "seconds >= 0",
         "internal: `lazyfuel run` shows no progress bar for runs shorter than this"),
)}
