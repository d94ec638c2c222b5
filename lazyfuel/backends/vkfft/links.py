"""The vkfft provider's link registries, one per backend: fanned symbols → KernelRefs.

`lazyfuel/contracts/vkfft.md` (OpenCL, link registry `lazyfuel::vkfft::ENTRY_POINTS`) and
`vkfft_cuda.md` (Cuda, `lazyfuel::vkfft::cuda::ENTRY_POINTS`) declare each transform once per
precision; its base entry point (`lazyfuel::vkfft::rfft` …) fans to one symbol per input dtype
(`lazyfuel::vkfft::rfft_f32` …). In each registry all symbols of a transform resolve to one
`KernelRef` of that backend whose `impl` is its `Transform` (what the executor asks VkFFT for).
Only the dtypes a transform takes are linked, so a document binding another dtype fails to link,
naming the symbol. Building a registry imports neither pyopencl, CuPy nor pyvkfft: the documents
load on machines without them, where the backend is merely unusable.
"""

from __future__ import annotations

import inspect
from functools import partial
from importlib import metadata

from lazyfuel.backends.vkfft import cuda, executor, opencl, transforms
from lazyfuel.backends.vkfft.transforms import TRANSFORMS, Transform
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.registry.model import KernelRef
from lazyfuel.registry.signature import op_signature

LINK_REGISTRIES = {Backend.OpenCL: "lazyfuel::vkfft::ENTRY_POINTS",
                   Backend.Cuda: "lazyfuel::vkfft::cuda::ENTRY_POINTS"}
LINK_REGISTRY = LINK_REGISTRIES[Backend.OpenCL]
NAMESPACE = "lazyfuel::vkfft::"
# the modules that drive VkFFT on each backend, hashed into its bindings' revisions
DRIVERS = {Backend.OpenCL: (transforms, executor, opencl), Backend.Cuda: (transforms, executor, cuda)}


def entry_points(backend: Backend = Backend.OpenCL) -> dict[str, KernelRef]:
    """`{"lazyfuel::vkfft::<transform>_<suffix>": KernelRef}` for each transform and its dtypes,
    the refs being `backend`'s."""
    refs: dict[str, KernelRef] = {}
    for name, transform in TRANSFORMS.items():
        ref = KernelRef(NAMESPACE + name, backend, impl=transform, code=partial(code, transform, backend),
                        signature=op_signature(op_kind(transform)))
        for dtype in transform.dtypes:
            refs[f"{NAMESPACE}{name}_{dtype.suffix}"] = ref
    return refs


def op_kind(transform: Transform) -> OpKind:
    """What `transform` computes: Fft, Ifft, Rfft or Irfft (from its direction and r2c flag)."""
    return {(False, False): OpKind.Fft, (False, True): OpKind.Ifft, (True, False): OpKind.Rfft,
            (True, True): OpKind.Irfft}[(transform.r2c, transform.inverse)]


def code(transform: Transform, backend: Backend = Backend.OpenCL) -> bytes:
    """The bytes hashed into a binding's revision: the transform, the pyvkfft version (it bundles
    VkFFT, whose kernels it generates) and the source of the modules that drive it on `backend`."""
    try:
        version = metadata.version("pyvkfft")
    except metadata.PackageNotFoundError:
        version = "absent"
    head = f"{transform.name} r2c={transform.r2c} inverse={transform.inverse} pyvkfft={version}\n"
    return head.encode() + b"".join(inspect.getsource(m).encode() for m in DRIVERS[backend])


# one factory per registry, made once: registering the same factory again is a no-op
LINK_FACTORIES = {backend: partial(entry_points, backend) for backend in LINK_REGISTRIES}
