"""Inputs read as streams (`planner.streams`): each step's op spec says which of its arguments it reads
once, in order; an input is a stream only where every step reading it reads it so."""

from __future__ import annotations

import dataclasses

from planned import select_fill_program

from lazyfuel.planner.streams import reads_as_stream, streamed_inputs


def test_the_fills_mask_streams_and_a_select_of_narrow_rows_does_not() -> None:
    program = select_fill_program()
    select, fill = program.steps
    assert reads_as_stream(fill, 0) and reads_as_stream(fill, 1)  # data and mask once, in order
    assert not reads_as_stream(select, 0)  # rows of 20 bytes: under the streamed row size
    assert reads_as_stream(select, 1)  # its indices once
    assert streamed_inputs(program) == (False, True, True) == program.streamed_inputs


def test_an_input_read_by_a_step_that_does_not_stream_it_is_no_stream() -> None:
    program = select_fill_program()
    select, fill = program.steps
    # the mask also read as the select's source: that read is not a stream
    both = dataclasses.replace(program, steps=(dataclasses.replace(select, args=(2, 1)), fill))
    assert streamed_inputs(both) == (True, True, False)
