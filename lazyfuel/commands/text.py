"""What the commands print besides their results: aligned tables, and warnings and notices as one
`lazyfuel: warning: …` line each."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from lazyfuel.notices import LOGGER


def table(rows: Sequence[Sequence[str]]) -> str:
    """`rows` (the first one the header) as columns padded to their widest cell, two spaces apart."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def warning_line(text: str) -> str:
    """`text` as the one line a warning or notice prints as (`lazyfuel: warning: …`)."""
    return f"lazyfuel: warning: {text.removeprefix('lazyfuel: ')}"


class _NoticeLines(logging.Handler):
    """The `lazyfuel` logger's records as `lazyfuel: warning: …` lines on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        print(warning_line(record.getMessage()), file=sys.stderr, flush=True)


def one_line_notices() -> None:
    """Warnings (an unmeasured cost, …) and the `lazyfuel` logger's notices (a backend that cannot
    run) as one `lazyfuel: warning: …` line each on stderr, without the source line Python shows;
    --debug keeps Python's formats."""
    import warnings

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(warning_line(str(message)), file=sys.stderr, flush=True)

    warnings.showwarning = show  # type: ignore[assignment]
    if not any(isinstance(h, _NoticeLines) for h in LOGGER.handlers):
        LOGGER.addHandler(_NoticeLines())
