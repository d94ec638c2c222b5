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


@pytest.mark.parametrize(("readers", "codecs", "rounds"), [(4, 4, 1), (4, 2, 2), (3, 4, 1), (2, 1, 3)])
def test_each_codec_takes_every_order_over_the_groups(readers, codecs, rounds):
    module = bench()
    orders = module.reader_orders(readers)
    for codec in range(codecs):
        for r in range(rounds):
            seen = {tuple(module.order_of(orders, codec, rounds, r, g)) for g in range(len(orders))}
            assert len(seen) == len(orders)  # not one order for every case of a codec
    one_group = [module.order_of(orders, c, rounds, r, 0) for c in range(codecs) for r in range(rounds)]
    assert all(a != b for a, b in pairwise(one_group))  # the next case, the next order
