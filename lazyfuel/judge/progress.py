"""A one-line progress bar on stderr: `[#####.....] 12/88 IndexSelect [F32,U32,F32] Vulkan`."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class Progress:
    """Redraws one line as work advances; on a non-terminal stream it prints at most every second."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = 0
        self.done = 0
        self.text = ""
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0
        self._started = 0.0

    def start(self, total: int, title: str) -> None:
        """Begin a run of `total` items (nothing is drawn when there is nothing to do)."""
        self.total, self.done, self.text = total, 0, ""
        self._started = time.monotonic()
        if total:
            self.stream.write(f"{title}\n")
            self._draw(force=True)

    def label(self, text: str) -> None:
        """Name the item being worked on."""
        self.text = text
        self._draw()

    def advance(self, by: int = 1) -> None:
        """Count `by` items done."""
        self.done += by
        self._draw()

    def finish(self) -> None:
        """Draw the final state and end the line."""
        if self.total:
            self.text = f"done in {time.monotonic() - self._started:.1f} s"
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.total or (not force and not self._tty and now - self._last < 1.0):
            return
        self._last = now
        filled = WIDTH * self.done // self.total
        line = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} {self.text}"
        self.stream.write(("\r\033[K" if self._tty else "") + line + ("" if self._tty else "\n"))
        self.stream.flush()
