"""`lazyfuel.judge.progress.Progress`: a bar of 30 cells redrawn in place on a terminal, printed as
lines at most once a second elsewhere (each forced state always), nothing for an empty run."""

from __future__ import annotations

import io

from lazyfuel.judge import progress
from lazyfuel.judge.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_bar_redrawn_in_place(monkeypatch):
    clock = iter([100.0, 100.0, 100.1, 100.2, 100.3, 101.5, 101.5])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    out = Terminal()
    bar = Progress(out)
    bar.start(4, "judging 4 bindings")
    bar.label("Gather [F32]")
    bar.advance()
    bar.advance(2)
    bar.finish()
    assert out.getvalue() == (
        "judging 4 bindings\n"
        "\r\033[K[" + "." * 30 + "] 0/4 \r\033[K[" + "." * 30 + "] 0/4 Gather [F32]"
        "\r\033[K[" + "#" * 7 + "." * 23 + "] 1/4 Gather [F32]"
        "\r\033[K[" + "#" * 22 + "." * 8 + "] 3/4 Gather [F32]"
        "\r\033[K[" + "#" * 22 + "." * 8 + "] 3/4 done in 1.5 s\n")


def test_elsewhere_it_prints_lines_at_most_once_a_second_and_the_forced_ones(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    bar = Progress(out)
    now[0] = 10.0
    bar.start(2, "auditing")
    now[0] = 10.5
    bar.advance()  # within a second of the last line: not printed
    now[0] = 11.2
    bar.advance()
    now[0] = 11.3
    bar.finish()  # forced
    assert out.getvalue().splitlines() == ["auditing", "[" + "." * 30 + "] 0/2 ", "[" + "#" * 30 + "] 2/2 ",
                                           "[" + "#" * 30 + "] 2/2 done in 1.3 s", ""]


def test_an_empty_run_draws_nothing():
    out = Terminal()
    bar = Progress(out)
    bar.start(0, "nothing to judge")
    bar.advance()
    bar.finish()
    assert out.getvalue() == ""


def test_it_writes_to_stderr_unless_given_a_stream(capsys):
    bar = Progress()
    bar.start(1, "one")
    bar.finish()
    assert capsys.readouterr().err.startswith("one\n[")
