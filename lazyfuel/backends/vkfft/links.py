"""The vkfft provider's link registry `lazyfuel::vkfft::ENTRY_POINTS`: fanned symbols → KernelRefs.

`lazyfuel/contracts/vkfft.md` declares each transform once per precision; its base entry point
(`lazyfuel::vkfft::rfft` …) fans to one symbol per input dtype (`lazyfuel::vkfft::rfft_f32` …). All
symbols of a transform resolve to one `KernelRef` whose `impl` is its `Transform` (what the
executor asks VkFFT for). Only the dtypes a transform takes are linked, so a document binding
another dtype fails to link, naming the symbol. Building the registry imports neither pyopencl
nor pyvkfft: the documents load on machines without OpenCL, where the backend is merely unusable.
"""

from __future__ import annotations

import inspect
from functools import partial
from importlib import metadata

from lazyfuel.backends.vkfft import executor, transforms
from lazyfuel.backends.vkfft.transforms import TRANSFORMS, Transform
from lazyfuel.contracts.model import Backend
from lazyfuel.registry.model import KernelRef

LINK_REGISTRY = "lazyfuel::vkfft::ENTRY_POINTS"
NAMESPACE = "lazyfuel::vkfft::"


def entry_points() -> dict[str, KernelRef]:
    """`{"lazyfuel::vkfft::<transform>_<suffix>": KernelRef}` for each transform and its dtypes."""
    refs: dict[str, KernelRef] = {}
    for name, transform in TRANSFORMS.items():
        ref = KernelRef(NAMESPACE + name, Backend.OpenCL, impl=transform, code=partial(code, transform))
        for dtype in transform.dtypes:
            refs[f"{NAMESPACE}{name}_{dtype.suffix}"] = ref
    return refs


def code(transform: Transform) -> bytes:
    """The bytes hashed into a binding's revision: the transform, the pyvkfft version (it bundles
    VkFFT, whose kernels it generates) and the source of the modules that drive it."""
    try:
        version = metadata.version("pyvkfft")
    except metadata.PackageNotFoundError:
        version = "absent"
    head = f"{transform.name} r2c={transform.r2c} inverse={transform.inverse} pyvkfft={version}\n"
    return head.encode() + b"".join(inspect.getsource(m).encode() for m in (transforms, executor))
