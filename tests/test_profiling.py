"""`lazyfuel.profiling`: every record made while a `profile()` block is open reaches it (and every
nested one), from any thread; none reaches a closed block; the totals print on one line."""

from __future__ import annotations

import threading
from dataclasses import replace

from lazyfuel import profiling


def test_records_reach_every_open_block_and_no_closed_one():
    profiling.record(submits=5)  # none open: dropped
    with profiling.profile() as outer:
        assert profiling.active()
        profiling.record(submits=1, dispatches=3, bytes_uploaded=64, programs=1,
                         bindings=("a", "b"), device="gpu0", backend="Vulkan")
        with profiling.profile() as inner:
            profiling.record(bytes_downloaded=32, device_seconds=0.5, kernel_seconds=0.25, programs=2,
                             bindings=("a",), device="gpu0", backend="Vulkan")
            profiling.record(programs=1, backend="Cpu")
        profiling.record(submits=1)
    assert not profiling.active()
    profiling.record(submits=9)
    totals = (outer.submits, outer.dispatches, outer.bytes_uploaded, outer.bytes_downloaded, outer.programs)
    assert totals == (2, 3, 64, 32, 4)
    assert (outer.device_seconds, outer.kernel_seconds) == (0.5, 0.25)
    assert outer.bindings == {"a": 2, "b": 1} and outer.devices == {"gpu0": 3}
    assert outer.where == {("Vulkan", "gpu0"): 3, ("Cpu", ""): 1}
    assert (inner.submits, inner.programs, inner.bindings) == (0, 3, {"a": 1})


def test_records_from_other_threads_are_all_counted():
    def work():
        for _ in range(500):
            profiling.record(dispatches=1, bindings=("k",))

    with profiling.profile() as p:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert p.dispatches == 2000 and p.bindings == {"k": 2000}


def test_a_profile_prints_its_totals_on_one_line():
    p = profiling.Profile(submits=2, dispatches=5, bytes_uploaded=10, bytes_downloaded=20,
                          device_seconds=0.0015, kernel_seconds=0.00025, programs=3)
    p.bindings.update({"z": 1, "a": 2})
    assert str(p) == ("3 program(s), 2 submit(s), 5 dispatch(es), 10 B up, 20 B down, 1.500 ms on the device "
                      "(0.250 ms in kernels); bindings: a x2, z x1")
    p.devices.update({"gpu1": 1, "gpu0": 2})
    assert str(p).endswith("; bindings: a x2, z x1; devices: gpu0 x2, gpu1 x1")
    assert str(profiling.Profile()).endswith("bindings: none")
    assert ", 20 B down, 64 B device to device, 1.500 ms" in str(replace(p, bytes_peer=64))  # said where any


def test_a_block_left_by_an_error_stops_collecting():
    try:
        with profiling.profile() as p:
            raise KeyError("stop")
    except KeyError:
        pass
    profiling.record(submits=1)
    assert p.submits == 0 and not profiling.active()
