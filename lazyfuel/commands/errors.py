"""The errors a command may end with: `UsageError` (exit 2) and the expected ones (exit 1, one line
unless --debug); anything else becomes a RuntimeError."""

from __future__ import annotations

from lazyfuel.contracts import ContractError
from lazyfuel.registry import NoBindingError


class UsageError(Exception):
    """A command line that cannot be carried out as given (exit 2), e.g. `--device` naming no device."""


# what a command may end with as one line and exit 1; anything else is a bug of lazyfuel's
EXPECTED = (ContractError, NoBindingError, OSError, ValueError, TypeError, IndexError, LookupError,
            RuntimeError, MemoryError)


def as_runtime_error(err: Exception) -> Exception:
    """Expected errors as they are; anything else as a RuntimeError (one line unless --debug)."""
    from lazyfuel.pipeline import GraphError

    if isinstance(err, (GraphError, *EXPECTED)):
        return err
    return RuntimeError(f"{type(err).__name__}: {err}")
