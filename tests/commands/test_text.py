"""`lazyfuel.commands.text`: tables padded to their widest cell, and warnings and the `lazyfuel`
logger's notices as one `lazyfuel: warning: …` line each on the stderr of the moment."""

from __future__ import annotations

import warnings

import pytest

from lazyfuel.commands import text
from lazyfuel.notices import LOGGER


def test_a_table_pads_each_column_to_its_widest_cell_and_strips_line_ends():
    rows = [("op", "dtype key", "GB/s"), ("IndexSelect", "[F32]", "1.50"), ("Fft", "[C64,C64]", "")]
    assert text.table(rows) == ("op           dtype key  GB/s\n"
                                "IndexSelect  [F32]      1.50\n"
                                "Fft          [C64,C64]")


def test_a_table_shows_cells_that_are_not_strings():
    assert text.table([("n", "x"), (12, None)]) == "n   x\n12  None"


@pytest.mark.parametrize(("given", "line"), [
    ("no judge measurement", "lazyfuel: warning: no judge measurement"),
    ("lazyfuel: backend Cuda cannot run", "lazyfuel: warning: backend Cuda cannot run"),
])
def test_a_warning_line_says_lazyfuel_once(given: str, line: str):
    assert text.warning_line(given) == line


@pytest.fixture
def restored():
    """Python's warning display and the logger's handlers as they were before the test."""
    shown, handlers = warnings.showwarning, list(LOGGER.handlers)
    yield
    warnings.showwarning = shown
    LOGGER.handlers[:] = handlers


def test_warnings_and_notices_print_as_one_line_each_and_the_handler_is_added_once(restored, capsys):
    text.one_line_notices()
    text.one_line_notices()
    assert sum(isinstance(h, text._NoticeLines) for h in LOGGER.handlers) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("lazyfuel: planning with the priors", UserWarning, stacklevel=1)
    LOGGER.warning("backend OpenCL cannot run here: no device")
    err = capsys.readouterr().err
    assert err == ("lazyfuel: warning: planning with the priors\n"
                   "lazyfuel: warning: backend OpenCL cannot run here: no device\n")
