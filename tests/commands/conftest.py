"""Parsers of one command family, as `lazyfuel.cli.build_parser` adds them."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest


@pytest.fixture
def parse() -> Callable[..., argparse.Namespace]:
    """`parse(add, *argv)`: `argv` parsed by a parser holding only the commands `add` adds."""

    def parse(add: Callable[[argparse._SubParsersAction], None], *argv: str) -> argparse.Namespace:
        parser = argparse.ArgumentParser(prog="lazyfuel")
        add(parser.add_subparsers(dest="command", required=True))
        return parser.parse_args(list(argv))

    return parse
