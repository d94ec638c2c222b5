"""What `explain` prints of a plan (`planner.explain`): one line per step, the links' bytes, the
decisions and seconds for a reader."""

from __future__ import annotations

from planned import select_fill_program

from lazyfuel.planner.explain import describe_choices, describe_links, describe_program, seconds


def test_a_program_is_described_step_by_step() -> None:
    program = select_fill_program()
    lines = describe_program(program).splitlines()
    assert lines[0].startswith("  program on Cpu: 2 step(s), estimated ")
    assert lines[1] == "    bytes per link: none (steps run on Cpu, in host memory)"
    assert lines[2].startswith("    s0 = IndexSelect(in0, in1) via ") and "-> F32[4, 5]" in lines[2]
    assert lines[3].startswith("    s1 = MaskedFill(s0, in2) via ")
    assert lines[-1] == "    returns s1"
    assert describe_links(program) == "bytes per link: none (steps run on Cpu, in host memory)"
    assert describe_choices(program).startswith(f"  costs compared ({len(program.choices)} decision(s)")


def test_seconds_read_in_microseconds_milliseconds_or_seconds() -> None:
    assert [seconds(2.5e-6), seconds(0.0125), seconds(3.0)] == ["2.5 µs", "12.50 ms", "3.00 s"]
