"""The built-in providers: their contract documents, their registration, and which backends are usable.

A provider plugs in by data: each package under `lazyfuel/backends/` registers a `BackendInfo`
(`backends.catalog`) naming its rank where costs tie, the contract documents it ships under
`lazyfuel/contracts/` and its `plug_in()`, which registers its link registries and executor.
`default_registry()` loads them all once per process (with each op's own `<backend>_<op>.md`:
`documents`); `available_backends()` says which backends
can run here (a Vulkan device exists, …), honouring `lazyfuel.config.backend` (`LAZYFUEL_BACKEND`,
one of `BACKEND_CHOICES`).
Checking a backend says nothing: the planner mentions one that cannot run where work it has bindings
for is planned (`Planner(left_out=...)`), and forcing one raises.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lazyfuel.backends import catalog
from lazyfuel.backends.base import executor
from lazyfuel.backends.catalog import BackendInfo
from lazyfuel.contracts.model import Backend
from lazyfuel.ops import specs
from lazyfuel.registry import Registry
from lazyfuel.registry.model import DEFAULT_ORIGIN
from lazyfuel.settings import check, config

CONTRACTS_DIR = Path(__file__).parent / "contracts"


def backend_priority() -> tuple[Backend, ...]:
    """Preference order when costs tie: the registered backends by rank (a device first, the numpy
    reference last; of the two FFT backends, Cuda before OpenCL: docs/decisions.md)."""
    return tuple(provider.backend for provider in catalog.registered())


# What `LAZYFUEL_BACKEND` and every `--backend` accept: auto (plan over every usable one) or one name.
BACKEND_CHOICES = catalog.backend_choices()

_lock = threading.Lock()
_default: Registry | None = None
_unusable: dict[Backend, str | None] = {}  # backend -> why it cannot run here (None: it can)


def documents(provider: BackendInfo, folder: Path = CONTRACTS_DIR) -> tuple[str, ...]:
    """The contract documents `provider` ships that exist in `folder` (`lazyfuel/contracts/`), in
    load order: those its info names, then each registered op's own `<backend>_<op>.md`
    (`cpu_flip.md`, `vulkan_flip.md`: a new op adds its documents without editing the backend's list)."""
    own = [f"{provider.backend.name.lower()}_{spec.name}.md" for spec in specs()]
    names = dict.fromkeys([*provider.documents, *own])
    return tuple(name for name in names if (folder / name).is_file())


def register_builtin_providers() -> None:
    """Plug in every registered backend: its executor and link registries (idempotent)."""
    for provider in catalog.registered():
        provider.plug_in()


def default_registry() -> Registry:
    """The registry holding every document the project ships (built once per process)."""
    global _default
    with _lock:
        if _default is None:
            register_builtin_providers()
            registry = Registry()
            for provider in catalog.registered():
                for name in documents(provider):
                    registry.load(CONTRACTS_DIR / name, origin=DEFAULT_ORIGIN)
            _default = registry
        return _default


def backend_usable(backend: Backend) -> bool:
    """Whether `backend`'s executor can be built here (checked once per process, silently)."""
    return unusable_reason(backend) is None


def unusable_reason(backend: Backend) -> str | None:
    """Why `backend`'s executor cannot be built here (the error building it), or None if it can.
    Checked once per process and silently: where it matters the planner or the caller says it."""
    register_builtin_providers()
    with _lock:
        if backend not in _unusable:
            try:
                executor(backend)
                _unusable[backend] = None
            except Exception as err:
                _unusable[backend] = str(err)
        return _unusable[backend]


def left_out(choice: str | None = None) -> dict[Backend, str]:
    """Each backend a built-in provider ships bindings for that `available_backends(choice)` leaves
    out, with why: `not usable here: <the error building its executor raised>` (auto), or
    `left out by LAZYFUEL_BACKEND=<choice>` (a forced choice: the others are not even opened)."""
    choice = _choice(choice)
    chosen = available_backends(choice)
    return {b: f"left out by LAZYFUEL_BACKEND={choice}" if choice != "auto"
            else f"not usable here: {unusable_reason(b)}"
            for b in backend_priority() if _has_provider(b) and b not in chosen}


def _choice(choice: str | None) -> str:
    """`choice` checked (ValueError naming the choices), else `lazyfuel.config.backend`."""
    return check("backend", choice, source="LAZYFUEL_BACKEND") if choice else config.backend


def available_backends(choice: str | None = None) -> list[Backend]:
    """Backends to plan over, best first: `choice` or `lazyfuel.config.backend` (one of `BACKEND_CHOICES`).

    Forcing a backend that cannot run here raises RuntimeError saying why.
    """
    choice = _choice(choice)
    register_builtin_providers()
    if choice == "auto":
        return [b for b in backend_priority() if _has_provider(b) and backend_usable(b)]
    backend = {b.name.lower(): b for b in Backend}[choice]
    if not _has_provider(backend):
        raise RuntimeError(f"backend {backend} was forced (LAZYFUEL_BACKEND={choice}) but no provider "
                           "ships it")
    why = unusable_reason(backend)
    if why is not None:
        raise RuntimeError(f"backend {backend} was forced (LAZYFUEL_BACKEND={choice}) but cannot run "
                           f"here: {why}")
    return [backend]


def _has_provider(backend: Backend) -> bool:
    return backend in backend_priority()
