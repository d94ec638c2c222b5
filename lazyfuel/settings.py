"""Every knob of lazyfuel in one object, `lazyfuel.config` (the README's "Configuration" table).

    import lazyfuel as lf
    lf.config.backend                       # the value in force here: 'auto'
    with lf.config(backend="cpu", crossing="host"):
        y.compute()                         # these values, in this thread / task only
    y.compute(backend="cpu")                # the same, for one call

Where a value comes from, most specific first: a `with lf.config(...)` block (or a per-call
keyword of `compute` / `persist`), then the process's environment (`LAZYFUEL_*`), then the
default. `KNOBS` says, per knob, its variable, its type or choices, its default and what it does.

- **The environment is read here and nowhere else**, once per process, at the first use of any
  knob (`environment()`); each knob's text is checked when that knob is first used, so a bad value
  is refused (ValueError naming the variable, the value and what is accepted) where it matters,
  not at import. `config.reload()` reads the environment again (what the test suite does after it
  sets a variable, and what a process does after it pins itself: `lazyfuel.distributed`).
- **Blocks are per thread and per asyncio task** (a `contextvars.ContextVar`), so threads that
  open their own blocks do not see each other's. Nested blocks add to the block around them.
- **What a graph was built under reaches its tasks**: when an array is lowered to dask the values
  set by blocks (`overrides()`, not the environment) are captured in the graph's runtime handle,
  and each task runs under them (`applied`), on whichever thread, process or dask.distributed
  worker runs it. The environment is the process's own: a worker pinned to its GPU keeps its
  `LAZYFUEL_DEVICE` unless the graph was built under a block that set `device`.
- Knobs read when a Vulkan pool opens (validation, queues, transfer mode, groups, mapping, memory)
  apply to pools opened afterwards; an open pool keeps what it opened with.
- Knobs whose names start with `_` are internal switches and thresholds that tests and probes set
  (the shaders' 64-bit positions on small data, when a progress bar shows); they have no variable
  and users leave them alone. Which kernel runs is no switch: another code path of a kernel is a
  binding of its own, asked for by name (`pin_kernels`).

A new knob is one `Knob` row in `KNOBS` (or `_one_of` for a choice) and one row of the README's
table (tests/test_config.py checks the table names every knob and its variable).

Nothing here imports the rest of lazyfuel at import time (every layer reads its knobs here); the
backend's choices come from `backends.catalog.backend_choices()`, looked up when the value is checked.
"""

from __future__ import annotations

import contextvars
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

# lavapipe's own thread count and the cache's base: not knobs, but read with the knobs' variables
# so that this module is the one place that reads the environment.
OTHER_VARIABLES = ("XDG_CACHE_HOME", "HOME", "LP_NUM_THREADS")
CROSSING_MODES = ("auto", "host", "exported")
TRANSFER_MODES = ("auto", "direct", "staged", "import", "zero-copy")  # memtypes.Mode's values + auto
MAPPINGS = ("auto", "coalesced", "sequential")
MEMORY_BINDINGS = ("auto", "address")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


class Invalid(ValueError):
    """A knob's value that is not accepted; the text says what would be (`expected ...`)."""


def _choice(choices: Callable[[], tuple[str, ...]] | tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        allowed = choices() if callable(choices) else choices
        text = str(value).strip().lower().replace("_", "-") or allowed[0]
        if text not in allowed:
            raise Invalid(f"expected one of {', '.join(allowed)}")
        return text
    return parse


def _backend_choices() -> tuple[str, ...]:
    from lazyfuel.backends.catalog import backend_choices  # the registered backends, one home

    return backend_choices()


def _optional_text(value: Any) -> str | None:
    """A device name or index (or a comma-separated list of them): None when unset or empty."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    text = str(value).strip() if value is not None else ""
    return text or None


def _validation(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "sync":
        return "sync"
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise Invalid("expected one of 0, 1, sync (or true/false, yes/no, on/off)")


def _count(what: str) -> Callable[[Any], int | None]:
    """A number of `what`, 1 or more; None (the default) when unset or empty."""
    def parse(value: Any) -> int | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
            raise Invalid(f"expected a number of {what} (1, 2, …)")
        return int(text)
    return parse


def _path(value: Any) -> Path | None:
    text = str(value).strip() if value is not None else ""
    return Path(text).expanduser() if text else None


def _budget(value: Any) -> float | int:
    """A fraction in (0, 1] of a whole, or a number of bytes (`512MiB`, `8G`, `1000000`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = repr(value)
    else:
        text = str(value).strip().lower()
    found = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)(?:i?b)?", text)
    if found:
        number, unit = float(found.group(1)), found.group(2)
        if not unit and 0 < number <= 1 and "." in found.group(1):
            return number
        if number >= 1 and (unit or number == int(number)):
            return int(number * _UNITS[unit])
    raise Invalid("expected a fraction in (0, 1] (0.8) or a size in bytes (8GiB, 512MiB, 1000000)")


def _budget_or_off(value: Any) -> float | int:
    """0 (off), or a fraction / size as `_budget` reads it."""
    if value == 0 or (isinstance(value, str) and value.strip() == "0"):
        return 0
    return _budget(value)


def _seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or not seconds >= 0:
        raise Invalid("expected a number of seconds >= 0")
    return seconds


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid("expected True or False")
    return value


def _on_off(value: Any) -> bool:
    """True or False, or their text: 1/0, on/off, true/false, yes/no (any case)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "on", "true", "yes"):
        return True
    if text in ("0", "off", "false", "no"):
        return False
    raise Invalid("expected 1 or 0 (on/off, true/false, yes/no)")


_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")  # a contract's `kernel:` name


def _kernel_names(value: Any) -> tuple[str, ...]:
    """Contract kernel names: a comma-separated text or a sequence of names; () when empty."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise Invalid("expected kernel names: a comma-separated text or a list of names")
    names = tuple(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))
    bad = [n for n in names if not _KERNEL_NAME.fullmatch(n)]
    if bad:
        raise Invalid(f"{bad[0]!r} is not a kernel name (letters, digits, _ . -); expected kernel "
                      "names such as select_fill, index_select_strided")
    return names


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
    Knob("link_probe", "LAZYFUEL_LINK_PROBE", _on_off, True, "1, 0",
         "measure a new Vulkan pool's link to host memory (both ways, pageable and page-locked) and "
         "the device's copy rate in at most 100 ms, once per device (cached in `cache_dir`), for "
         "the transfer priors; 0: the priors of the device kind"),
    Knob("read_budget", "LAZYFUEL_READ_BUDGET", _budget, 0.25,
         "fraction of host memory or bytes",
         "bytes of zarr chunk data the read tasks of a select over `lf.from_zarr` hold at once "
         "(a fraction of host memory or bytes; read when the graph is built)"),
    Knob("pin_kernels", "LAZYFUEL_PIN_KERNELS", _kernel_names, (), "comma-separated kernel names",
         "contract kernels the planner takes wherever they can run, over cheaper ones (e.g. "
         "`select_fill`, `index_select_strided`); `lazyfuel audit` and `lf.explain` name them"),
    Knob("_resident", None, _flag, False, "bool",
         "internal: block tasks keep Vulkan results on the device (`persist(device=True)` sets it)"),
    Knob("_resident_shared", None, _flag, False, "bool",
         "internal: kept results lie in memory CUDA can import where the GPU is CUDA's "
         "(`compute(device=True)` sets it)"),
    Knob("_force_wide", None, _flag, False, "bool",
         "internal: Vulkan kernels use their 64-bit-position variant whatever the sizes"),
    Knob("_progress_after_s", None, _seconds, 0.5, "seconds >= 0",
         "internal: `lazyfuel run` shows no progress bar for runs shorter than this"),
)}

_lock = threading.Lock()
_environment: Mapping[str, str] | None = None
_parsed: dict[str, Any] = {}
_EMPTY: Mapping[str, Any] = MappingProxyType({})
_overrides: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "lazyfuel_config", default=_EMPTY)


def environment() -> Mapping[str, str]:
    """The variables lazyfuel reads (every knob's and `OTHER_VARIABLES`), as this process had them
    at their first use or at the last `reload()`. The only read of `os.environ` in lazyfuel."""
    global _environment
    with _lock:
        if _environment is None:
            names = {k.env for k in KNOBS.values() if k.env} | set(OTHER_VARIABLES)
            _environment = MappingProxyType({n: os.environ[n] for n in names if n in os.environ})
        return _environment


def check(name: str, value: Any, source: str | None = None) -> Any:
    """`value` for knob `name`, checked and normalised; ValueError naming the knob (its variable),
    the value and what is accepted, and TypeError for a knob that does not exist."""
    knob = KNOBS.get(name)
    if knob is None:
        raise TypeError(f"lazyfuel.config has no knob {name!r}; knobs: {', '.join(KNOBS)}")
    try:
        return knob.parse(value)
    except Invalid as err:
        if source is not None:
            raise ValueError(f"{source}={value!r}; {err}") from None
        variable = f" ({knob.env})" if knob.env else ""
        raise ValueError(f"lazyfuel.config: {name}={value!r}{variable}; {err}") from None


def _base(name: str) -> Any:
    """Knob `name` from the environment (checked once), else its default."""
    try:
        return _parsed[name]
    except KeyError:
        pass
    knob, env = KNOBS[name], environment()
    value = check(name, env[knob.env], source=knob.env) if knob.env and knob.env in env else None
    if value is None:
        value = _defaults[name](env) if knob.default is _COMPUTED else knob.default
    with _lock:
        _parsed.setdefault(name, value)
    return value


class Config:
    """The knobs in force here: `config.<name>` reads one, `with config(name=value, ...)` sets some
    for a block. The one instance is `lazyfuel.config`."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name not in KNOBS:
            raise AttributeError(f"lazyfuel.config has no knob {name!r}; knobs: {', '.join(KNOBS)}")
        over = _overrides.get()
        return over[name] if name in over else _base(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"lazyfuel.config is read-only; set {name} for a block: "
                             f"`with lazyfuel.config({name}=...):`")

    def __call__(self, **changes: Any) -> _Block:
        """A block that sets `changes` (each checked now) over what is in force when it opens."""
        return _Block({name: check(name, value) for name, value in changes.items()})

    def __dir__(self) -> list[str]:
        return [*KNOBS, "overrides", "applied", "reload", "split", "values"]

    def __repr__(self) -> str:
        return "lazyfuel.config(" + ", ".join(f"{n}={v!r}" for n, v in self.values().items()) + ")"

    @staticmethod
    def values() -> dict[str, Any]:
        """Every knob's value in force here."""
        return {name: getattr(config, name) for name in KNOBS}

    @staticmethod
    def overrides() -> tuple[tuple[str, Any], ...]:
        """What the open blocks set here (not the environment), sorted: what a graph captures."""
        return tuple(sorted(_overrides.get().items()))

    @staticmethod
    def applied(overrides: tuple[tuple[str, Any], ...]) -> _Block:
        """A block of values `overrides()` captured (already checked)."""
        return _Block(dict(overrides))

    @staticmethod
    def split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """`kwargs` cut into knobs and the rest (a per-call `compute(backend=..., scheduler=...)`)."""
        knobs = {k: v for k, v in kwargs.items() if k in KNOBS}
        return knobs, {k: v for k, v in kwargs.items() if k not in KNOBS}

    @staticmethod
    def reload() -> None:
        """Read the environment again at the next use (after this process changed `os.environ`)."""
        global _environment
        with _lock:
            _environment = None
            _parsed.clear()


class _Block:
    """`with config(...)`: the checked `changes` over the block around it, in this context only."""

    def __init__(self, changes: dict[str, Any]) -> None:
        self.changes = changes
        self._tokens: list[contextvars.Token] = []

    def __enter__(self) -> Config:
        if self.changes:
            self._tokens.append(_overrides.set(MappingProxyType({**_overrides.get(), **self.changes})))
        else:
            self._tokens.append(None)  # type: ignore[arg-type]
        return config

    def __exit__(self, *exc: object) -> None:
        token = self._tokens.pop()
        if token is not None:
            _overrides.reset(token)


config = Config()
