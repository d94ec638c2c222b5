"""The read budget (`graph.read_memory`): a take waits for room; an oversized take takes the whole budget."""

from __future__ import annotations

import threading

from lazyfuel.graph import stored


def test_a_take_waits_for_room_and_an_oversized_take_takes_the_whole_budget():
    budget = stored.ByteBudget()
    first = budget.take(70, 100)
    taken: list[int] = []
    waiter = threading.Thread(target=lambda: taken.append(budget.take(500, 100)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not taken  # 70 + 100 does not fit: it waits
    budget.give(first)
    waiter.join(5)
    assert taken == [100] and budget.held == 100 and budget.peak == 100
    budget.give(100)
    assert budget.held == 0
