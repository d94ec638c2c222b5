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

A new knob is one `Knob` row in `KNOBS` (`lazyfuel.knobs`; or `_one_of` for a choice, its parser
from `lazyfuel.knob_parsers`) and one row of the README's table (tests/test_config.py checks the
table names every knob and its variable).

Nothing here imports the rest of lazyfuel at import time but the knob table and its parsers
(every layer reads its knobs here); the backend's choices come from
`backends.catalog.backend_choices()`, looked up when the value is checked.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from lazyfuel.knob_parsers import Invalid
from lazyfuel.knobs import (  # noqa: F401 (the modes and Knob: re-exported)
    _COMPUTED,
    CROSSING_MODES,
    KNOBS,
    MAPPINGS,
    MEMORY_BINDINGS,
    TRANSFER_MODES,
    Knob,
    _defaults,
)

# lavapipe's own thread count and the cache's base: not knobs, but read with the knobs' variables
# so that this module is the one place that reads the environment.
OTHER_VARIABLES = ("XDG_CACHE_HOME", "HOME", "LP_NUM_THREADS")

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
