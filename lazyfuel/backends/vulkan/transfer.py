"""A program's host inputs onto the device and its results back, the way the pool's mode says.

The executor calls three functions inside one batch (one command buffer):

    values = upload_all(batch, arrays, dtypes)        # DeviceValues over each input's memory span
    out, landed = output(batch, shape, dtype, result) # a step's output; `landed`: its result array
    download(batch, allocation, out_array)            # a result not landed in place

What each does per `memtypes.Mode` (the allocator's `mode`):

| mode | inputs | results |
| --- | --- | --- |
| direct | CPU copy into mapped device memory | CPU copy out of it after the fence |
| staged | CPU copy into upload staging, read in place or copied in | into host-cached staging, CPU copy out |
| import | the array's pages imported, copy in | copy into the imported result array |
| zero-copy | the imported pages bound to the kernels | kernels write into the imported result |

("copy" is a vkCmdCopyBuffer in the same command buffer.) In the copying modes on a discrete GPU
staging is page-locked host memory, so it is treated as `lf.empty_pinned` memory is: an input the
program reads once in long rows (`Program.streamed_inputs`) is read by the kernels straight from
its upload staging, and a result no later step reads is written by its kernel straight into its
download staging: no device memory and no device copy for either, half the staging-sized
buffers a task holds, and the link's both directions used at once by one kernel (decision 46).
Host copies of 32 MiB and more run on several threads (`lazyfuel/hostcopy.py`).

`time_round_trip(pool, upload, download)` times one batch that moves host bytes in and out this
way and nothing else (the judge's transfer term).

`in_mode(pool, mode)` runs a block with the pool's allocator swapped for one of another mode (how
tests and benchmarks cover every mode on one device).

A resident block of the batch's pool (`residency.ResidentBlock`, from `persist(device=True)`) is
bound where it lies in every mode: no copy, no bytes counted; one of another pool comes as a host
copy (`np.asarray`, counted as downloaded there) and then moves as a host array does.

Arrays under `allocator.import_min` bytes, arrays the driver will not import, and (zero-copy)
ranges whose start is not aligned for a storage-buffer binding, or results whose size is not a
multiple of 16 bytes (kernels write whole 16-byte words), take the copying way of the row above
(`direct` where device memory is mapped, else `staged` or `import`). Arrays in page-locked memory
from `lf.empty_pinned` (`pinned.py`), or views of them, move with no CPU copy and no import in
every mode: kernels write page-locked results in place, and read page-locked inputs in place
where device memory is host memory, the mode is zero-copy, or the program reads the input once in
order (`Program.streamed_inputs`: masked_fill, index_select of long rows); elsewhere the device
copies from them (offsets aligned for binding). Imported arrays stay alive
and pinned until the batch closes, after its fence. Byte counts for `lazyfuel.profile()` count
the host bytes the device read or wrote, however they moved.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from lazyfuel.backends.base import is_device_block
from lazyfuel.backends.vulkan.batch import Batch
from lazyfuel.backends.vulkan.kernels import DeviceValue
from lazyfuel.backends.vulkan.memory import Allocation, VulkanAllocator
from lazyfuel.backends.vulkan.memtypes import Mode
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout, memory_span
from lazyfuel.settings import config

if TYPE_CHECKING:
    from lazyfuel.backends.vulkan.pool import DevicePool


def _address(data: np.ndarray) -> int:
    return int(data.__array_interface__["data"][0])


def upload_all(batch: Batch, arrays: Sequence[np.ndarray], dtypes: Sequence[DType],
               streamed: Sequence[bool] = ()) -> list[DeviceValue]:
    """Each array's memory span on the device as a DeviceValue (layout relative to the span),
    the copies recorded before one barrier that later work waits on. `streamed[i]`: the program
    reads array i once, in order (see `Program.streamed_inputs`), so where it is page-locked the
    kernels read it in place in every mode."""
    allocator = batch.pool.allocator
    mode = allocator.mode
    values, copied = [], False
    for i, (a, dtype) in enumerate(zip(arrays, dtypes)):
        bound = _resident(batch, a)
        if bound is not None:  # a block kept on this pool (`residency`): read where it lies,
            # through its view's layout where it is one (`ResidentView`)
            values.append(DeviceValue(bound, dtype, getattr(a, "layout", None) or Layout.contiguous(a.shape)))
            continue
        a = np.asarray(a)  # a device block of another pool (or device): a host copy
        span = memory_span(a)
        layout = Layout.of(a)
        n = span.nbytes
        importing = mode.imports and n >= allocator.import_min and (
            mode is Mode.IMPORT or _address(span) % allocator.align == 0 or not allocator.direct)
        host, pinned = _device_view(batch, span, importing)
        if host is not None:
            batch.bytes_uploaded += n
            read_in_place = allocator.direct or (i < len(streamed) and streamed[i])
            bind = mode is Mode.ZERO_COPY or (pinned and read_in_place)
            if bind and host.offset % allocator.align == 0:
                values.append(DeviceValue(host, dtype, layout))
                continue
            allocation = batch.alloc(n)
            batch.copy(host, 0, allocation, 0, n)
            copied = True
        elif i < len(streamed) and streamed[i] and not allocator.direct and n:
            allocation = batch.stage_in(span)  # read in place by the kernels, as page-locked inputs are
        else:
            allocation = batch.alloc(max(n, 1))
            batch.upload(allocation, span)  # records its own barrier when it copies on the device
        values.append(DeviceValue(allocation, dtype, layout))
    if copied:  # as `batch.upload` does after its copy: the steps' own barriers are the executor's
        batch.recorder.barrier()
    return values


def _resident(batch: Batch, a: object) -> Allocation | None:
    """`a`'s device memory where it is a resident block of `batch`'s pool (pinned until the batch
    closes), else None."""
    bind = getattr(a, "bind", None) if is_device_block(a) else None
    return None if bind is None else bind(batch)


def output(batch: Batch, shape: tuple[int, ...], dtype: DType, result: bool,
           into: np.ndarray | None = None, reread: bool = False) -> tuple[Allocation, np.ndarray | None]:
    """Device memory for a step's output of `shape`. For a program `result`, an array the kernel
    writes in place: `into` where it is page-locked (in every mode, kernels writing their outputs
    in order, unless later steps `reread` the value: then only where device memory is host memory
    or the mode is zero-copy), else in zero-copy mode `into` or a fresh array, imported (returned
    as `landed`: then `download` is not needed); else (allocation, None), the allocation being
    download staging where the mode copies (device memory not mapped, no import) and no later
    step reads the value (`download` then copies it out on the CPU)."""
    allocator = batch.pool.allocator
    nbytes = max(Layout.contiguous(shape).size * dtype.itemsize, 1)
    in_place = not reread or allocator.direct or allocator.mode is Mode.ZERO_COPY
    if result and into is not None and in_place and nbytes % 16 == 0 and into.flags.c_contiguous:
        pinned, _ = _device_view(batch, into.reshape(-1).view(np.uint8), False, note=False)
        if pinned is not None and pinned.offset % allocator.align == 0:  # the kernel writes it there
            batch.bytes_downloaded += nbytes
            return pinned, into
    if result and not reread and not allocator.direct and not allocator.mode.imports:
        return batch.staging(nbytes, download=True), None  # written in place, then copied out by the CPU
    if result and allocator.mode is Mode.ZERO_COPY and nbytes % 16 == 0 and nbytes >= allocator.import_min:
        landed = np.empty(shape, dtype.numpy) if into is None else into
        flat = landed.reshape(-1).view(np.uint8)
        if _address(flat) % allocator.align == 0:
            if allocator.poison is not None:  # as for allocations: unwritten bytes show up
                flat[:] = allocator.poison
            imported = allocator.import_host(flat)
            if imported is not None:
                batch.own(imported)
                batch.bytes_downloaded += nbytes
                return imported, landed
    return batch.alloc(nbytes), None


def download(batch: Batch, src: Allocation, out: np.ndarray) -> None:
    """After `batch.run()`, `out` (contiguous) holds the first `out.nbytes` bytes of `src`; record
    after the last write to `src` and a barrier. In import mode (and zero-copy where device memory
    is not mapped) the device copies straight into `out`'s pages."""
    allocator = batch.pool.allocator
    n = out.nbytes
    importing = allocator.mode.imports and not allocator.direct and n >= allocator.import_min
    host, _ = _device_view(batch, out.reshape(-1).view(np.uint8), importing)
    if host is not None:  # the device copies straight into `out`'s pages
        batch.bytes_downloaded += n
        batch.copy(src, 0, host, 0, n)
        return
    batch.download(src, out)


def _device_view(batch: Batch, data: np.ndarray, importing: bool,
                 note: bool = True) -> tuple[Allocation | None, bool]:
    """`data` (1-d uint8) as device-visible memory, and whether it is page-locked already: in a
    block of `lf.empty_pinned` (`pinned.py`; never freed by the batch) or kept imported because it
    is used again (`kept.py`), else, when `importing`, its pages imported for the batch (freed
    when it closes); (None, False) where none of these. `note`: as for `KeptImports.find`."""
    pinned = batch.pool.pinned.find(data)
    if pinned is None:
        pinned = batch.pool.kept.find(batch, data, note)
    if pinned is not None:
        return pinned, True
    imported = batch.pool.allocator.import_host(data) if importing else None
    if imported is not None:
        batch.own(imported)
    return imported, False


def time_round_trip(pool: DevicePool, upload: np.ndarray | None, result: np.ndarray | None) -> float:
    """Wall seconds of one batch on `pool` that uploads `upload` (as `upload_all` uploads a program
    input) and downloads device bytes into `result` (contiguous, as a result comes back), either
    None for none: the batch, its allocations, the submit, the wait and the host copies, as a
    program pays them for arrays it sees for the first time (kept imports off: timing the same
    pageable array again would otherwise time its kept pages, `kept.py`)."""
    start = time.perf_counter()
    with config(kept_imports=0), pool.batch() as batch:
        if upload is not None:
            upload_all(batch, [upload], [DType.from_numpy(upload.dtype)])
        if result is not None:
            download(batch, batch.alloc(max(result.nbytes, 1)), result)
        batch.run()
    return time.perf_counter() - start


@contextmanager
def in_mode(pool: DevicePool, mode: Mode | str | None,
            import_min: int | None = None) -> Iterator[VulkanAllocator]:
    """Run the block with `pool` on an allocator of its own in `mode` (None: the device's default),
    importing arrays from `import_min` bytes (default: the allocator's) and poisoning as the pool's
    allocator does; then give the pool its allocator back and destroy this one. Nothing may be in
    flight on the pool when it switches. ValueError where the device cannot use `mode`."""
    allocator = VulkanAllocator(pool.device, pool.physical, pool.info, mode=mode)
    if import_min is not None:
        allocator.import_min = import_min
    allocator.poison = pool.allocator.poison
    saved, pool.allocator = pool.allocator, allocator
    try:
        yield allocator
    finally:
        pool.allocator = saved
        allocator.destroy()
