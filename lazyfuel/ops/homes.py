"""Where a registered op's own modules live in the other layers, found by its name.

An op named `flip` (its spec's `name`) may have, besides `ops/flip.py`, a module of that name in
a layer's package (`lazyfuel.backends.cpu.flip`, `lazyfuel.backends.vulkan.flip`,
`lazyfuel.graph.flip`) that declares what the layer needs under an agreed attribute (the CPU
steps, the Vulkan kernels, the graph builder), a contract document `<backend>_<name>.md` next to
the others and a shader `shaders/<name>.comp`. Each layer asks here for the ops that declare its
attribute, so a new op adds its own files and its one line in `lazyfuel/ops/__init__.py`, and no
layer keeps a list of ops. The caller names its own package: nothing here imports upward itself.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from typing import Any

from lazyfuel.ops.spec import OpSpec, specs


def declared(package: str, attribute: str) -> Iterator[tuple[OpSpec, Any]]:
    """(spec, value) for each registered op whose module `<package>.<spec.name>` exists and
    defines `attribute`, in registration order (a module of that name without it is skipped:
    `lazyfuel.graph.fft` is the FFT family's, wired by hand)."""
    for spec in specs():
        name = f"{package}.{spec.name}"
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        if hasattr(module, attribute):
            yield spec, getattr(module, attribute)
