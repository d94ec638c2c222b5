"""`VkFFTExecutor`: runs planned Programs of FFT steps through one of pyvkfft's back ends.

The step logic is the same whichever back end runs VkFFT (OpenCL in `opencl.py`, CUDA in
`cuda.py`); a back end fills the underscore hooks that touch device memory (`_allocate`,
`_on_device`, `_new_app`, `_context`, `_finish`) and may override the copies (`_upload`, `_host`,
`_result`, `_hermitian`) where its device allows better.

Each step's transformed axis is whole (the graph layer rechunks it so). A step reads its argument
either as a host array (a program input, any layout, or a result brought back) or as a device array
left by an earlier step. A host argument is staged in one copy: the axis moved last, cropped or
zero-padded to the points VkFFT reads, cast (real input of fft/ifft to complex), as (batch, points);
then uploaded. A device argument whose transformed axis is already last and the right length is used
where it is. The result stays on the device when the axis is last; otherwise it comes back and its
axis is moved into place. Only the program's outputs come back at the end.

VkFFT apps (a compiled plan per batch, length, dtype, direction kind and norm) are cached per
executor; building one compiles kernels (seconds on PoCL the first time; PoCL keeps a disk cache,
so later processes start fast). One lock serialises programs: an app's scratch buffers are not
safe to share between concurrent launches.
"""

from __future__ import annotations

import atexit
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from lazyfuel import profiling
from lazyfuel.backends.base import Outs, deliver, destinations
from lazyfuel.backends.vkfft.transforms import NORMS, Transform, drop_ignored_imag, stage, unstage
from lazyfuel.contracts.model import Backend
from lazyfuel.layout import Layout
from lazyfuel.ops.fft import FftParams
from lazyfuel.planner.program import Program, Step

APP_CACHE_SIZE = 64
_DOUBLE = (np.dtype(np.float64), np.dtype(np.complex128))


class VkFFTExecutor:
    """The `Executor` of one pyvkfft back end on one device (FFT steps only); see the module docstring.

    `device` names itself (`name`) and says `has_double`, `max_alloc_bytes` and `unified_memory`;
    `vkfft` is the pyvkfft back-end module whose `VkFFTApp` `_new_app` builds; `errors` are the
    device API's exception types, noted with the failing step like VkFFT's RuntimeErrors.
    """

    backend: Backend

    def __init__(self, device: Any, vkfft: Any, errors: tuple[type[BaseException], ...] = ()) -> None:
        self.device = device
        self.vkfft = vkfft
        self._errors = (ValueError, TypeError, MemoryError, RuntimeError, *errors)
        self._apps: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()
        self._moved = [0, 0]  # bytes uploaded, downloaded by the program running now
        # free the apps while pyvkfft is still importable: their __del__ fails at interpreter exit
        atexit.register(self._apps.clear)

    # --- what a back end fills in ---------------------------------------------------------------

    def _allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A fresh device array (`_empty` has checked its size)."""
        raise NotImplementedError(f"{type(self).__name__} must define _allocate")

    def _on_device(self, value: Any) -> bool:
        """Whether `value` is a device array of this back end (else a numpy array)."""
        raise NotImplementedError(f"{type(self).__name__} must define _on_device")

    def _new_app(self, shape: tuple[int, int], dtype: np.dtype, **options: Any) -> Any:
        """pyvkfft's `VkFFTApp` for (batch, points) `shape` on this device, with `options`."""
        raise NotImplementedError(f"{type(self).__name__} must define _new_app")

    def _context(self) -> AbstractContextManager[Any]:
        """Entered around a whole program (e.g. the CUDA device and stream made current)."""
        return nullcontext()

    def _finish(self) -> None:
        """Wait until the device has finished everything the program queued."""

    def _take(self, value: Any) -> Any:
        """A program input as the steps read it: a numpy array (a back end whose device can read
        `value` where it lies returns a device array instead)."""
        return np.asarray(value)

    # --- the copies, overridable where a device does better -------------------------------------

    def _upload(self, host: np.ndarray) -> Any:
        """`host` as a device array."""
        dst = self._empty(host.shape, host.dtype)
        dst.set(host)
        self._moved[0] += host.nbytes
        return dst

    def _host(self, value: Any) -> np.ndarray:
        """`value` on the host: itself, or a download."""
        if isinstance(value, np.ndarray):
            return value
        self._moved[1] += value.nbytes
        return value.get()

    def _fetch(self, value: Any, dest: np.ndarray | None) -> np.ndarray:
        """A program output on the host; `dest` is the caller's `out=` array for it (or None),
        which a back end able to download straight into it fills (`deliver` copies otherwise)."""
        return self._host(value)

    def _result(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """The device array a step whose result is a program output writes (axis last)."""
        return self._empty(shape, dtype)

    def _hermitian(self, src: Any, length: int) -> Any:
        """A copy of device array `src` (batch, points) without the imaginary parts numpy's irfft
        ignores (the array's own indexing; a back end whose arrays lack it overrides this)."""
        dst = src.copy()
        drop_ignored_imag(dst, length)
        return dst

    # --- the steps ------------------------------------------------------------------------------

    def run(self, program: Program, inputs: Sequence[np.ndarray], out: Outs = None) -> list[np.ndarray]:
        """Run `program` on `inputs`; return fresh contiguous host arrays for `program.outputs`
        (copied into `out`'s arrays where given: see `backends.base`).

        Raises:
            ValueError: the inputs do not match the program, or a step is not an FFT binding of
                this backend.
            TypeError: an input's dtype differs from the program's.
            MemoryError: a buffer exceeds the device's largest allocation.
            RuntimeError: VkFFT or the device failed (the message names the step).
        """
        values: list[Any] = self._check_inputs(program, inputs)
        dests = destinations(program, out)
        n = program.n_inputs
        with self._lock, self._context():
            start, self._moved = time.perf_counter(), [0, 0]
            try:
                for number, step in enumerate(program.steps):
                    try:
                        returned = n + number in program.outputs
                        values.append(self._step(step, values[step.args[0]], returned))
                    except self._errors as err:
                        err.add_note(f"in step {number}: {step.binding} on {self.device.name}")
                        raise
                results = [np.array(values[i], order="C", copy=True) if i < n
                           else self._fetch(values[i], dest) for i, dest in zip(program.outputs, dests)]
            finally:
                self._finish()  # nothing may still read a wrapped host array
            profiling.record(programs=1, submits=1, dispatches=len(program.steps),
                             bytes_uploaded=self._moved[0], bytes_downloaded=self._moved[1],
                             device_seconds=time.perf_counter() - start,
                             bindings=program.binding_names, device=self.device.name,
                             backend=self.backend.name)
        return deliver(results, dests)

    def _step(self, step: Step, value: Any, returned: bool) -> Any:
        transform = step.binding.kernel_ref.impl
        if step.binding.backend is not self.backend or not isinstance(transform, Transform):
            raise ValueError(f"{step.binding} is not a {self.backend.name} FFT binding; the "
                             f"{self.backend.name} executor runs the vkfft provider's bindings only")
        p = FftParams.of(step.param)
        axis, length, norm = int(p.axis), int(p.length), p.norm
        in_dtype = np.dtype(value.dtype)
        out_dtype = transform.output_dtype(in_dtype)
        if out_dtype != step.out_dtype.numpy:
            raise ValueError(f"{transform.name} of {in_dtype} gives {out_dtype}, the step expects "
                             f"{step.out_dtype}")
        if in_dtype in _DOUBLE and not self.device.has_double:
            raise RuntimeError(f"{self.device.name} has no double precision; use the Cpu backend "
                               "(LAZYFUEL_BACKEND=cpu) for F64 / C128 transforms")
        points_in, points_out = transform.in_points(length), transform.out_points(length)
        batch = math.prod(step.out_shape) // max(points_out, 1)
        last = axis == len(step.out_shape) - 1
        if batch == 0:
            return np.empty(step.out_shape, out_dtype)
        if length == 1:  # VkFFT refuses 1-point transforms; each is the point itself, for every norm
            moved = stage(self._host(value), axis, points_in, transform.upload_dtype(in_dtype))
            return unstage(moved.real.astype(out_dtype) if out_dtype.kind == "f" else moved.astype(out_dtype),
                           tuple(step.out_shape), axis)
        src = self._source(transform, value, axis, points_in, length, batch)
        shape = (batch, points_out)
        dst = self._result(shape, out_dtype) if returned and last else self._empty(shape, out_dtype)
        vk_norm, scale_forward = NORMS[norm]
        app = self._app(transform, batch, length, transform.app_dtype(in_dtype), vk_norm)
        (app.ifft if transform.inverse else app.fft)(src, dst)
        if scale_forward and not transform.inverse:
            dst *= np.dtype(out_dtype.char.lower()).type(1.0 / length)
        if last:
            return dst.reshape(step.out_shape)
        return unstage(self._host(dst), tuple(step.out_shape), axis)

    def _source(self, transform: Transform, value: Any, axis: int, points: int, length: int,
                batch: int) -> Any:
        """The (batch, points) device array VkFFT reads (see the module docstring)."""
        up = transform.upload_dtype(value.dtype)
        hermitian = transform.r2c and transform.inverse
        if self._on_device(value) and axis == value.ndim - 1 and value.shape[-1] == points \
                and value.dtype == up:
            src = value.reshape(batch, points)
            return self._hermitian(src, length) if hermitian else src
        host = stage(self._host(value), axis, points, up, fresh=hermitian)
        if hermitian:  # numpy's irfft ignores the imaginary parts of the 0 and Nyquist terms
            drop_ignored_imag(host, length)
        return self._upload(host)

    def _app(self, transform: Transform, batch: int, length: int, dtype: np.dtype, norm: Any) -> Any:
        key = (transform.r2c, batch, length, dtype, norm, transform.app_options)
        app = self._apps.get(key)
        if app is None:
            app = self._new_app((batch, length), dtype, ndim=1, inplace=False, norm=norm,
                                r2c=transform.r2c, **dict(transform.app_options))
            self._apps[key] = app
            if len(self._apps) > APP_CACHE_SIZE:
                self._apps.popitem(last=False)
        else:
            self._apps.move_to_end(key)
        return app

    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if nbytes > self.device.max_alloc_bytes:
            raise MemoryError(f"an FFT buffer of {nbytes} bytes ({shape} {np.dtype(dtype)}) exceeds "
                              f"{self.device.name}'s largest allocation of {self.device.max_alloc_bytes} "
                              "bytes; use smaller chunks along the other axes")
        return self._allocate(shape, dtype)

    def _check_inputs(self, program: Program, inputs: Sequence[np.ndarray]) -> list[Any]:
        if len(inputs) != program.n_inputs:
            raise ValueError(f"the program takes {program.n_inputs} inputs, got {len(inputs)}")
        values: list[Any] = []
        for i, (a, dtype, layout) in enumerate(zip(inputs, program.input_dtypes, program.input_layouts)):
            a = self._take(a)
            if a.dtype != dtype.numpy:
                raise TypeError(f"input {i} has dtype {a.dtype}, the program expects {dtype} ({dtype.numpy})")
            if Layout.of(a) != layout:
                raise ValueError(f"input {i} has layout {Layout.of(a)}, the program was planned for {layout}")
            values.append(a)
        return values
