"""The `lazyfuel` command line (also `python -m lazyfuel`).

Exit codes: 0 success, 1 the work failed (a malformed document, a kernel error), 2 bad usage,
141 (128 + SIGPIPE, as a unix tool killed by it) when the reader of stdout went away (`| head`),
quietly. Errors print as one line (`file:line: key: message`) unless `--debug` is given (before or
after the subcommand); so do warnings and notices (`lazyfuel: warning: ...`).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable, Sequence

from lazyfuel.commands.bindings import add_binding_commands
from lazyfuel.commands.contracts import add_contracts_commands
from lazyfuel.commands.devices import add_devices_command
from lazyfuel.commands.errors import EXPECTED, UsageError
from lazyfuel.commands.graphs import add_graph_commands
from lazyfuel.commands.text import one_line_notices


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="lazyfuel", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    add_devices_command(sub)
    add_contracts_commands(sub)
    add_binding_commands(sub)
    add_graph_commands(sub)
    _debug_everywhere(parser)
    return parser


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept --debug after any subcommand too (`lazyfuel run g.yaml --debug`); a subcommand's
    copy leaves the top-level value alone unless given (default SUPPRESS)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                   help="show tracebacks on errors")
                _debug_everywhere(child)


EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a unix tool killed by SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    if not args.debug:
        one_line_notices()
    try:
        code = func(args)
        sys.stdout.flush()  # a reader that went away shows here, not in Python's flush at exit
        return code
    except BrokenPipeError as err:
        if _reader_gone(sys.stdout):
            return _quiet_broken_pipe()
        return _failed(err, args.debug)
    except UsageError as err:
        if args.debug:
            raise
        print(f"lazyfuel: {err}", file=sys.stderr)
        return 2
    except EXPECTED as err:
        return _failed(err, args.debug)


def _failed(err: Exception, debug: bool) -> int:
    """Exit 1 with the error on one line (raised again with --debug, for its traceback)."""
    if debug:
        raise err
    print(f"lazyfuel: {err}", file=sys.stderr)
    return 1


def _reader_gone(stream: object) -> bool:
    """Whether `stream` is a pipe or socket whose reading end is closed (poll reports an error)."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)  # type: ignore[attr-defined]
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no file descriptor (a test's capture)
        return False


def _quiet_broken_pipe() -> int:
    """Stop as `yes | head` does: no message, and nothing more written to the closed stdout (its
    descriptor now points at /dev/null, so Python's flush at exit finds nowhere to fail)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
