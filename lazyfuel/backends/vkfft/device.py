"""The OpenCL device the vkfft provider runs on: found, opened once per process, described.

`OpenCLDevice.open()` imports pyopencl and pyvkfft's OpenCL back end, lists the OpenCL platforms and
picks a device: `LAZYFUEL_OPENCL_DEVICE` (an index into the list `devices()` prints, or a substring
of a device's name), else the first GPU, else the first accelerator, else the first CPU device
(PoCL's on a machine without a GPU). It raises `RuntimeError` naming the fix when pyopencl or
pyvkfft is missing or no OpenCL device exists, so the backend is reported unusable and the planner
falls back to the CPU provider.

PoCL runs each work-group on a worker thread created when the platform starts, with the process's
default thread stack (8 MiB). VkFFT's Bluestein kernels (lengths with a prime factor above 13, e.g.
32771) keep large per-work-item arrays that overflow it, and the process dies with SIGSEGV. So the
platforms are listed with a larger default thread stack (`STACK_BYTES`, reserved address space,
not memory) and the default is put back right after; this only helps when lazyfuel is the first to
start OpenCL in the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lazyfuel.settings import config

STACK_BYTES = 256 << 20
ENV_DEVICE = "LAZYFUEL_OPENCL_DEVICE"
INSTALL_HINT = ("install the fft extra: VKFFT_BACKEND=opencl pip install 'lazyfuel[fft]' (pyopencl, and "
                "pyvkfft built from source against the OpenCL headers: apt install ocl-icd-opencl-dev)")
_KIND_ORDER = ("GPU", "ACCELERATOR", "CPU")


@contextmanager
def thread_stack(size: int) -> Iterator[bool]:
    """Threads created inside the block get a `size`-byte stack (glibc); yields whether it applied."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        get_default, set_default = libc.pthread_getattr_default_np, libc.pthread_setattr_default_np
    except (OSError, AttributeError):  # not glibc: nothing to change
        yield False
        return
    old, new = ctypes.create_string_buffer(256), ctypes.create_string_buffer(256)
    if get_default(old) != 0 or libc.pthread_attr_init(new) != 0:
        yield False
        return
    applied = (libc.pthread_attr_setstacksize(new, ctypes.c_size_t(size)) == 0
               and set_default(new) == 0)
    try:
        yield applied
    finally:
        if applied:
            set_default(old)
        libc.pthread_attr_destroy(new)
        libc.pthread_attr_destroy(old)


def _modules() -> tuple[Any, Any]:
    """(pyopencl, pyvkfft.opencl); RuntimeError with the install hint if either is missing."""
    try:
        import pyopencl
        import pyvkfft.opencl
    except ImportError as err:
        raise RuntimeError(f"the OpenCL FFT back end needs pyopencl and pyvkfft ({err}); "
                           f"{INSTALL_HINT}") from None
    return pyopencl, pyvkfft.opencl


def devices() -> list[Any]:
    """Every OpenCL device of every platform (pyopencl objects), in platform order.

    Raises RuntimeError when pyopencl is missing or no OpenCL platform (ICD) is installed.
    """
    cl, _ = _modules()
    with thread_stack(STACK_BYTES):
        try:
            platforms = cl.get_platforms()
        except cl.Error as err:  # PLATFORM_NOT_FOUND_KHR: no ICD installed
            raise RuntimeError(f"no OpenCL platform ({err}); install an OpenCL driver, e.g. "
                               f"apt install pocl-opencl-icd for PoCL on the CPU") from None
        return [d for p in platforms for d in p.get_devices()]


def _kind(device: Any) -> str:
    cl, _ = _modules()
    return next((k for k in _KIND_ORDER if device.type & getattr(cl.device_type, k)), "OTHER")


def _choose(found: list[Any], choice: str | None) -> Any:
    if not found:
        raise RuntimeError("no OpenCL device found; install an OpenCL driver, e.g. apt install "
                           "pocl-opencl-icd for PoCL on the CPU")
    if choice:
        if choice.isdigit() and int(choice) < len(found):
            return found[int(choice)]
        named = [d for d in found if choice.lower() in d.name.lower()]
        if not named:
            listed = "; ".join(f"{i}: {d.name.strip()}" for i, d in enumerate(found))
            raise RuntimeError(f"{ENV_DEVICE}={choice!r} matches no OpenCL device; devices: {listed}")
        return named[0]
    rank = {kind: i for i, kind in enumerate(_KIND_ORDER)}
    return min(found, key=lambda d: rank.get(_kind(d), len(rank)))


@dataclass(frozen=True)
class OpenCLDevice:
    """An opened OpenCL device: its context, one in-order queue, and a buffer pool."""

    device: Any
    context: Any
    queue: Any
    allocator: Any

    @classmethod
    def open(cls, choice: str | None = None) -> OpenCLDevice:
        """Open the chosen device (`choice`, else `$LAZYFUEL_OPENCL_DEVICE`, else the best kind).

        Raises RuntimeError naming the fix when it cannot (see the module docstring).
        """
        cl, _ = _modules()
        import pyopencl.tools

        device = _choose(devices(), choice if choice is not None else config.opencl_device)
        context = cl.Context(devices=[device])
        queue = cl.CommandQueue(context)
        allocator = pyopencl.tools.MemoryPool(pyopencl.tools.ImmediateAllocator(queue))
        return cls(device, context, queue, allocator)

    @property
    def name(self) -> str:
        """`<device name> (<platform name>)`."""
        return f"{self.device.name.strip()} ({self.device.platform.name.strip()})"

    @property
    def kind(self) -> str:
        """GPU, ACCELERATOR or CPU."""
        return _kind(self.device)

    @property
    def max_alloc_bytes(self) -> int:
        """The largest single buffer the device allows (CL_DEVICE_MAX_MEM_ALLOC_SIZE)."""
        return int(self.device.max_mem_alloc_size)

    @property
    def unified_memory(self) -> bool:
        """Whether device buffers live in host memory (a CPU device such as PoCL's, or an integrated
        GPU): then buffers can wrap numpy arrays in place (CL_MEM_USE_HOST_PTR) instead of copying."""
        return self.kind == "CPU" or bool(getattr(self.device, "host_unified_memory", False))

    @property
    def fingerprint(self) -> str:
        """What the speed of a kernel here depends on: the device's name, kind, driver and OpenCL
        versions and compute units (PoCL: its worker threads)."""
        d = self.device
        return (f"{self.name} ({self.kind}) | driver {d.driver_version.strip()} | {d.version.strip()} | "
                f"platform {d.platform.version.strip()} | {d.max_compute_units} compute units")

    @property
    def has_double(self) -> bool:
        """Whether the device computes in double precision (C128 / F64 transforms)."""
        return bool(self.device.double_fp_config)
