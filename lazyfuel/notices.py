"""What lazyfuel tells its reader outside the results: each notice once per process, on one line.

Two channels, as numpy and dask users expect them:

- `warn_once(key, message, category)`: something the reader can act on (a cost planned without a
  judge measurement: run `lazyfuel judge`). A `warnings` warning of a lazyfuel category, so the
  usual filters apply (`warnings.filterwarnings("ignore", category=lf.UnmeasuredCostWarning)`),
  shown as `lazyfuel:0: UnmeasuredCostWarning: ...` with no source line: it is raised inside a
  dask task, where no line of the reader's program is to blame.
- `log_once(key, message)`: information about where work goes (a backend that cannot run here
  and the work it would have taken). A WARNING record of the `lazyfuel` logger: without any
  logging set up Python prints the bare message on stderr; a program that configures logging
  formats, files or silences it (`logging.getLogger("lazyfuel").setLevel(logging.ERROR)`).

`claim(key)` marks a notice as given without showing it (`lf.explain` says the same in its text).
This module imports nothing of lazyfuel: every layer may use it.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Hashable

LOGGER = logging.getLogger("lazyfuel")

_given: set[Hashable] = set()
_lock = threading.Lock()


def claim(key: Hashable) -> bool:
    """Mark the notice `key` as given; True the first time in this process, False after."""
    with _lock:
        if key in _given:
            return False
        _given.add(key)
        return True


def given(key: Hashable) -> bool:
    """Whether the notice `key` was given (or claimed) in this process."""
    with _lock:
        return key in _given


def forget(key: Hashable) -> None:
    """Let the notice `key` be given again (for tests)."""
    with _lock:
        _given.discard(key)


def warn_once(key: Hashable, message: str, category: type[Warning]) -> None:
    """Warn `message` (one line) with `category` the first time `key` is met in this process."""
    if claim(key):
        warnings.warn_explicit(message, category, filename="lazyfuel", lineno=0, module="lazyfuel")


def log_once(key: Hashable, message: str) -> None:
    """Log `message` (one line) as a WARNING of the `lazyfuel` logger the first time `key` is met."""
    if claim(key):
        LOGGER.warning(message)
