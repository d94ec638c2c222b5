"""How a knob's text is checked and normalised: one parser per kind of value (a choice, a count, a
path, a budget, seconds, a flag, kernel names), each raising `Invalid` with what is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _count_or_off(value: Any) -> int:
    """A number, 0 (off) or more."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise Invalid("expected a number (0 for off, 1, 2, …)")
    return int(text)


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


def _bytes_or_off(value: Any) -> int:
    """0 (off), or a number of bytes (`64MiB`, `1000000`); not a fraction."""
    if value == 0 or (isinstance(value, str) and value.strip() == "0"):
        return 0
    try:
        found = _budget(value)
    except Invalid:
        found = 0.5  # refused below with this knob's own words
    if isinstance(found, float):
        raise Invalid("expected a size in bytes (64MiB, 1000000) or 0 (off)")
    return found


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
