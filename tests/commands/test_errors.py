"""`lazyfuel.commands.errors`: which errors a command ends with as one line (exit 1) and which
become a RuntimeError naming their type; a UsageError is not one of them (the CLI exits 2)."""

from __future__ import annotations

import pytest

from lazyfuel.commands.errors import EXPECTED, UsageError, as_runtime_error
from lazyfuel.contracts import ContractError
from lazyfuel.pipeline import GraphError
from lazyfuel.registry import NoBindingError


@pytest.mark.parametrize("err", [
    ValueError("bad shape"), TypeError("bad dtype"), IndexError("index 9"), KeyError("k"),
    FileNotFoundError("missing.yaml"), MemoryError("device"), RuntimeError("kernel"),
    NoBindingError("no binding", []), GraphError("unknown op", "g.yaml", 3),
])
def test_expected_errors_pass_as_they_are(err: Exception):
    assert as_runtime_error(err) is err


@pytest.mark.parametrize(("err", "text"), [
    (ZeroDivisionError("division by zero"), "ZeroDivisionError: division by zero"),
    (AssertionError("held"), "AssertionError: held"),
    (UsageError("--device=9"), "UsageError: --device=9"),
])
def test_anything_else_becomes_a_runtime_error_naming_its_type(err: Exception, text: str):
    converted = as_runtime_error(err)
    assert type(converted) is RuntimeError and str(converted) == text


def test_the_expected_errors_are_the_documents_the_bindings_and_the_builtin_failures():
    assert set(EXPECTED) == {ContractError, NoBindingError, OSError, ValueError, TypeError, IndexError,
                             LookupError, RuntimeError, MemoryError}
    assert not issubclass(UsageError, EXPECTED)
