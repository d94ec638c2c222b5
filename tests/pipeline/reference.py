"""A built pipeline graph evaluated in numpy alone: what the runner's outputs must equal.

Inputs are the bytes the run reads (each source's dask array, computed; no kernel runs); each step
is its numpy counterpart, so a graph's reference never goes through lazyfuel's planner or
executors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lazyfuel.pipeline import Built

FFTS = ("fft", "ifft", "rfft", "irfft")

NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "index_select": lambda x, indices, dim: np.take(x, indices, axis=dim),
    "gather": lambda x, indices, dim: np.take_along_axis(x, indices, axis=dim),
    "masked_fill": lambda x, mask, value: np.where(mask, np.asarray(value).astype(x.dtype), x),
    "transpose": lambda x, axes: np.transpose(x, axes),
    "slice": lambda x, index: x[index],
    "getitem": lambda x, index: x[index],
    "broadcast_to": lambda x, shape: np.broadcast_to(x, shape),
    "contiguous": np.ascontiguousarray,
    **{name: (lambda f: lambda x, axis, n, norm: f(x, n=n, axis=axis, norm=norm))(getattr(np.fft, name))
       for name in FFTS},
}


def numpy_reference(built: Built) -> dict[str, np.ndarray]:
    """Every input and step of `built` as a numpy array, by name."""
    graph = built.graph
    values: dict[str, Any] = {i.name: np.asarray(built.values[i.name].to_dask().compute())
                              for i in graph.inputs}
    for step in graph.steps:
        args = {k: values[v] if isinstance(v, str) else np.asarray(v) for k, v in step.values.items()}
        values[step.name] = NUMPY[step.op](**args, **step.params)
    return values


def through_fft(built: Built, name: str) -> bool:
    """Whether the value `name` depends on an FFT step (whose results are close to numpy's, not
    bitwise equal: every FFT backend rounds its own way)."""
    steps = {s.name: s for s in built.graph.steps}
    todo, seen = [name], set()
    while todo:
        step = steps.get(todo.pop())
        if step is None or step.name in seen:
            continue
        seen.add(step.name)
        if step.op in FFTS:
            return True
        todo += [v for v in step.values.values() if isinstance(v, str)]
    return False
