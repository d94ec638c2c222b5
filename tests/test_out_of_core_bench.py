"""benchmarks/out_of_core.py runs a case's readers in an order that changes case by case: over
the orders of `reader_orders` every reader takes every place once and runs right after every
other reader equally often (none always first on a disk the last case left, none always after
the same reader)."""

from __future__ import annotations

import importlib.util
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "out_of_core.py"


def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("out_of_core_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("count", [2, 3, 4, 5, 7])
def test_reader_orders_put_every_reader_in_every_place_and_after_every_other_alike(count):
    orders = bench().reader_orders(count)
    assert all(sorted(order) == list(range(count)) for order in orders)
    places = Counter((place, r) for order in orders for place, r in enumerate(order))
    assert set(places.values()) == {len(orders) // count} and len(places) == count * count
    follows = Counter(pair for order in orders for pair in pairwise(order))
    assert len(follows) == count * (count - 1) and len(set(follows.values())) == 1


def test_one_reader_has_one_order():
    assert bench().reader_orders(1) == [[0]]
