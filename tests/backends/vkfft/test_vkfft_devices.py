"""The vkfft provider's FFT bindings on each real device it has here (OpenCL: PoCL here, NVIDIA's
driver on a GPU; Cuda: a CUDA GPU through CuPy): numpy.fft's results within the declared precision,
numpy's semantics (n, norm, axis, layouts), results kept on the device between steps, and the
errors. Each backend's tests are skipped, saying why, where it cannot run."""

from __future__ import annotations

import numpy as np
import pytest
from fftcheck import (
    FFT_KINDS,
    VKFFT_BACKENDS,
    check,
    fft_bindings,
    plan,
    random_input,
    reference,
    row_error,
    run,
    usable_executor,
)

from lazyfuel import profiling
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.layout import Layout
from lazyfuel.planner import Chain, OpNode, Planner
from lazyfuel.providers import default_registry

# a power of two, a length with radices 2 and 3, and primes (17: VkFFT's Rader/Bluestein path)
LENGTHS = (16, 12, 17)


def _input(rng: np.random.Generator, kind: OpKind, dtype: DType, batch: tuple[int, ...], length: int):
    points = length // 2 + 1 if kind is OpKind.Irfft else length
    return random_input(rng, dtype, (*batch, points))


@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batched"])
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("binding", [b for k in VKFFT_BACKENDS for b in fft_bindings(k)], ids=str)
def test_every_binding_matches_numpy(binding, length: int, batch: tuple[int, ...]) -> None:
    usable_executor(binding.backend)
    rng = np.random.default_rng(length)
    x = _input(rng, binding.op_kind, binding.dtypes[0], batch, length)
    kept = x.copy()
    program = plan(binding.op_kind, x, [binding.backend], n=length)
    assert [s.binding for s in program.steps] == [binding]
    check(run(program, x), reference(binding.op_kind, x, n=length), binding)
    assert np.array_equal(x, kept)  # the input (read in place where the device allows) is untouched


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize(("kind", "dtype"), [(OpKind.Rfft, DType.F32), (OpKind.Irfft, DType.C64),
                                             (OpKind.Fft, DType.C128), (OpKind.Ifft, DType.C64)])
def test_norms_are_numpys(vkfft, kind: OpKind, dtype: DType, norm: str) -> None:
    x = _input(np.random.default_rng(1), kind, dtype, (3,), 16)
    program = plan(kind, x, [vkfft.backend], n=16, norm=norm)
    check(run(program, x), reference(kind, x, n=16, norm=norm), program.steps[0].binding)


@pytest.mark.parametrize(("kind", "n"), [(OpKind.Rfft, 10), (OpKind.Rfft, 24), (OpKind.Fft, 9),
                                         (OpKind.Irfft, 7), (OpKind.Irfft, 30), (OpKind.Ifft, 20)])
def test_n_crops_or_pads_a_transposed_input_along_axis_0(vkfft, kind: OpKind, n: int) -> None:
    dtype = DType.C64 if kind in (OpKind.Irfft, OpKind.Ifft) else DType.F32
    x = random_input(np.random.default_rng(n), dtype, (5, 16)).T  # (16, 5), strided: axis 0
    program = plan(kind, x, [vkfft.backend], axis=0, n=n)
    check(run(program, x), reference(kind, x, axis=0, n=n), program.steps[0].binding, axis=0)


@pytest.mark.parametrize("view", ["reversed", "offset-strided", "broadcast", "middle-axis"])
def test_awkward_views_are_staged(vkfft, view: str) -> None:
    rng = np.random.default_rng(7)
    base = random_input(rng, DType.F64, (6, 4, 12))
    x, axis = {"reversed": (base[::-1, :, ::-1], -1), "offset-strided": (base[1::2, 1:, 1:], -1),
               "broadcast": (np.broadcast_to(base[:1], base.shape), -1),
               "middle-axis": (base, 1)}[view]
    program = plan(OpKind.Rfft, x, [vkfft.backend], axis=axis)
    assert len(program.steps) == 1  # native strided: no Contiguize inserted
    check(run(program, x), reference(OpKind.Rfft, x, axis=axis), program.steps[0].binding, axis=axis)


@pytest.mark.parametrize(("kind", "dtype", "length"), [
    (OpKind.Rfft, DType.F32, 16), (OpKind.Irfft, DType.C64, 17), (OpKind.Rfft, DType.F64, 17),
    (OpKind.Irfft, DType.C128, 16)])
def test_a_quiet_row_beside_a_loud_one_keeps_its_own_precision(vkfft, kind: OpKind, dtype: DType,
                                                               length: int) -> None:
    # VkFFT's default real transforms merge two rows into one complex transform: the quiet row then
    # came back with an error relative to the loud one (10 % in single precision); the audit's per-row
    # bound caught it, and the vkfft provider builds its real apps with the callback version
    x = _input(np.random.default_rng(length), kind, dtype, (3,), length)
    x *= np.array([[1.0], [1e6], [1.0]], dtype=x.real.dtype)
    program = plan(kind, x, [vkfft.backend], n=length)
    check(run(program, x), reference(kind, x, n=length), program.steps[0].binding)


def _chain(*kinds_n: tuple[str, int | None]) -> Chain:
    nodes = tuple(OpNode(kind, (i,), (("axis", -1), ("n", n), ("norm", None)))
                  for i, (kind, n) in enumerate(kinds_n))
    return Chain(1, nodes, (len(nodes),))


def test_a_chain_keeps_its_intermediate_on_the_device(vkfft) -> None:
    x = random_input(np.random.default_rng(3), DType.F32, (4, 30))
    program = Planner(default_registry(), [vkfft.backend]).plan(_chain(("Rfft", None), ("Irfft", 30)),
                                                        [DType.F32], [Layout.of(x)])
    with profiling.profile() as p:
        out = run(program, x)
    assert out.dtype == np.float32 and row_error(out, x.astype(np.float64)) < 1e-5
    assert p.programs == 1 and p.dispatches == 2
    # nothing moves in between; where device memory is host memory (PoCL) nothing is copied at all
    copied = 0 if vkfft.device.unified_memory else 1
    assert p.bytes_uploaded == copied * x.nbytes and p.bytes_downloaded == copied * out.nbytes
    assert not np.shares_memory(out, x)


def test_irfft_of_a_device_value_ignores_the_imaginary_dc_and_nyquist(vkfft) -> None:
    # fft of complex data is not Hermitian: irfft must ignore the imaginary parts numpy ignores
    z = random_input(np.random.default_rng(4), DType.C64, (3, 9))
    program = Planner(default_registry(), [vkfft.backend]).plan(_chain(("Fft", None), ("Irfft", 16)),
                                                        [DType.C64], [Layout.of(z)])
    ref = np.fft.irfft(np.fft.fft(z.astype(np.complex128)), n=16)
    assert row_error(run(program, z), ref) < 1e-5


def test_an_empty_batch_gives_an_empty_result(vkfft) -> None:
    x = np.zeros((0, 8), np.float32)
    out = run(plan(OpKind.Rfft, x, [vkfft.backend]), x)
    assert out.shape == (0, 5) and out.dtype == np.complex64


def test_inputs_that_do_not_fit_the_program_are_refused(vkfft) -> None:
    x = random_input(np.random.default_rng(0), DType.F32, (2, 8))
    program = plan(OpKind.Rfft, x, [vkfft.backend])
    with pytest.raises(TypeError, match="input 0 has dtype float64, the program expects F32"):
        vkfft.run(program, [x.astype(np.float64)])
    with pytest.raises(ValueError, match="the program was planned for"):
        vkfft.run(program, [x.T.copy().T])
    cpu_program = plan(OpKind.Rfft, x, [Backend.Cpu])
    with pytest.raises(ValueError, match=f"is not a {vkfft.backend.name} FFT binding") as err:
        vkfft.run(cpu_program, [x])
    assert "in step 0:" in err.value.__notes__[0]


@pytest.mark.slow
def test_a_long_prime_length_runs(vkfft) -> None:
    # 24571 is prime: VkFFT's Bluestein kernels overflow PoCL's default 8 MiB worker stacks there
    # (SIGSEGV) unless the platform started with the larger stack lazyfuel gives it
    x = random_input(np.random.default_rng(5), DType.F32, (2, 24571))
    kept = x.copy()
    program = plan(OpKind.Rfft, x, [vkfft.backend])
    check(run(program, x), reference(OpKind.Rfft, x), program.steps[0].binding)
    assert np.array_equal(x, kept)


def test_a_read_only_input_is_copied_not_wrapped(vkfft) -> None:
    x = random_input(np.random.default_rng(6), DType.C64, (3, 16))
    x.flags.writeable = False
    program = plan(OpKind.Fft, x, [vkfft.backend])
    check(run(program, x), reference(OpKind.Fft, x), program.steps[0].binding)


@pytest.mark.parametrize("backend", VKFFT_BACKENDS, ids=str)
def test_fft_kinds_cover_the_bindings(backend: Backend) -> None:
    kinds = {b.op_kind for b in fft_bindings(backend)}
    assert kinds == set(FFT_KINDS)


@pytest.mark.parametrize("length", [1, 2])
@pytest.mark.parametrize(("kind", "dtype"), [(OpKind.Rfft, DType.F32), (OpKind.Irfft, DType.C64),
                                             (OpKind.Fft, DType.F64)])
def test_tiny_lengths(vkfft, kind: OpKind, dtype: DType, length: int) -> None:
    # VkFFT refuses 1-point transforms: the executor copies the point (numpy: the identity)
    x = _input(np.random.default_rng(0), kind, dtype, (3,), length)
    program = plan(kind, x, [vkfft.backend], n=length, norm="ortho")
    check(run(program, x), reference(kind, x, n=length, norm="ortho"), program.steps[0].binding)


def test_out_receives_the_result(vkfft) -> None:
    # the Cuda backend downloads straight into the caller's array; OpenCL copies into it
    x = random_input(np.random.default_rng(8), DType.F32, (4, 24))
    program = plan(OpKind.Rfft, x, [vkfft.backend])
    dest = np.full((4, 13), np.nan, np.complex64)
    (got,) = vkfft.run(program, [x], out=[dest])
    assert got is dest
    check(dest, reference(OpKind.Rfft, x), program.steps[0].binding)
