"""Link registries: contract entry-point symbols -> Vulkan `KernelRef`s.

`fuel_vulkan_entry_points()` resolves the reference document's symbols
(`fuel_vulkan_backend::fkc::ENTRY_POINTS`): index_select has four per-dtype wrappers, so its four
symbols resolve to four distinct KernelRefs; gather and masked_fill each dispatch through one
dtype-agnostic wrapper, so all their symbols resolve to the same KernelRef.
`lazyfuel_entry_points()` resolves `lazyfuel::vulkan::ENTRY_POINTS`, the kernels declared in
`lazyfuel/contracts/vulkan.md` (contiguize, the select family for the other dtypes, and
select_fill: an index_select and the masked_fill of its result in one dispatch),
`lazyfuel/contracts/vulkan_strided.md` (index_select and gather reading any view of the source),
`lazyfuel/contracts/vulkan_copy.md` (Contiguize of a dense view as one vkCmdCopyBuffer) and
`lazyfuel/contracts/vulkan_variants.md` (the other code paths of index_select and gather),
`lazyfuel/contracts/vulkan_broadcast.md` (masked_fill and select_fill reading a broadcast mask in
place), and
the kernels an op's own module declares (`KERNELS` in `backends/vulkan/<op>.py`).
Both are cached: a symbol resolves to the same KernelRef object every time.
"""

from __future__ import annotations

from functools import cache

from lazyfuel.backends.vulkan.copy_kernels import BufferCopyKernel, ContiguizeKernel
from lazyfuel.backends.vulkan.fill_kernels import MaskedFillKernel, SelectFillKernel
from lazyfuel.backends.vulkan.kernels import GatherKernel, IndexSelectKernel, VulkanKernel
from lazyfuel.backends.vulkan.strided import StridedGatherKernel, StridedIndexSelectKernel
from lazyfuel.contracts.model import Backend, OpKind
from lazyfuel.dtypes import DType
from lazyfuel.ops.homes import declared
from lazyfuel.registry.model import KernelRef
from lazyfuel.registry.signature import op_signature

FUEL_REGISTRY = "fuel_vulkan_backend::fkc::ENTRY_POINTS"
LAZYFUEL_REGISTRY = "lazyfuel::vulkan::ENTRY_POINTS"
_FUEL = "fuel_vulkan_backend::fkc::"
_OWN = "lazyfuel::vulkan::"

SEED_INDEX_SELECT = (DType.F32, DType.F16, DType.BF16, DType.F64)
SEED_SELECT = (DType.F32, DType.F16, DType.BF16, DType.F64, DType.U8, DType.U32)
CONTIGUIZE_DTYPES = tuple(DType)  # the shaders move words of the element's width: every dtype
# dtypes lazyfuel's own document adds to the select family (those the seed does not declare)
EXTRA_INDEX_SELECT = tuple(d for d in DType if d not in SEED_INDEX_SELECT)
EXTRA_SELECT = tuple(d for d in DType if d not in SEED_SELECT)


# what each kernel class computes (declared on its KernelRef: a binding links only to its op kind)
OP_KINDS: dict[type[VulkanKernel], OpKind] = {
    ContiguizeKernel: OpKind.Contiguize, BufferCopyKernel: OpKind.Contiguize,
    IndexSelectKernel: OpKind.IndexSelect, StridedIndexSelectKernel: OpKind.IndexSelect,
    GatherKernel: OpKind.Gather, StridedGatherKernel: OpKind.Gather, MaskedFillKernel: OpKind.MaskedFill,
    SelectFillKernel: OpKind.SelectFill,
}
# an op with its own module here (`backends/vulkan/<op>.py`) declares its kernels there as
# `KERNELS = {"<base entry point>": kernel}`: each computes the op's kind, and its symbols
# `lazyfuel::vulkan::<base>_<suffix>` fan to every dtype (its document says which are bound)
OWN_KERNELS: dict[str, VulkanKernel] = {}
for _spec, _kernels in declared(__package__, "KERNELS"):
    for _base, _kernel in _kernels.items():
        OWN_KERNELS[_base], OP_KINDS[type(_kernel)] = _kernel, _spec.kind


def _ref(name: str, kernel: VulkanKernel) -> KernelRef:
    return KernelRef(name, Backend.Vulkan, impl=kernel, code=kernel.code,
                     signature=op_signature(OP_KINDS[type(kernel)]))


@cache
def fuel_vulkan_entry_points() -> dict[str, KernelRef]:
    """`fuel_vulkan_backend::fkc::ENTRY_POINTS`: every fanned symbol of the reference document."""
    table: dict[str, KernelRef] = {}
    for dtype in SEED_INDEX_SELECT:
        name = f"{_FUEL}index_select_{dtype.suffix}"
        table[name] = _ref(name, IndexSelectKernel(dtype))
    gather = _ref(f"{_FUEL}gather", GatherKernel())
    masked_fill = _ref(f"{_FUEL}masked_fill", MaskedFillKernel())
    for dtype in SEED_SELECT:
        table[f"{_FUEL}gather_{dtype.suffix}"] = gather
        table[f"{_FUEL}masked_fill_{dtype.suffix}"] = masked_fill
    return table


@cache
def lazyfuel_entry_points() -> dict[str, KernelRef]:
    """`lazyfuel::vulkan::ENTRY_POINTS`: the kernels of `lazyfuel/contracts/vulkan.md`,
    `lazyfuel/contracts/vulkan_strided.md` and `lazyfuel/contracts/vulkan_copy.md`."""
    table: dict[str, KernelRef] = {}
    contiguize = _ref(f"{_OWN}contiguize", ContiguizeKernel())
    copy_buffer = _ref(f"{_OWN}copy_buffer", BufferCopyKernel())
    index_select = _ref(f"{_OWN}index_select", IndexSelectKernel())
    gather = _ref(f"{_OWN}gather", GatherKernel())
    masked_fill = _ref(f"{_OWN}masked_fill", MaskedFillKernel())
    strided_index_select = _ref(f"{_OWN}index_select_strided", StridedIndexSelectKernel())
    strided_gather = _ref(f"{_OWN}gather_strided", StridedGatherKernel())
    select_fill = _ref(f"{_OWN}select_fill", SelectFillKernel())
    general = _ref(f"{_OWN}index_select_general", IndexSelectKernel(aligned_rows=False))
    scalar = _ref(f"{_OWN}gather_scalar", GatherKernel(quads=False))
    masked_fill_broadcast = _ref(f"{_OWN}masked_fill_broadcast", MaskedFillKernel())
    select_fill_broadcast = _ref(f"{_OWN}select_fill_broadcast", SelectFillKernel())
    for dtype in CONTIGUIZE_DTYPES:
        table[f"{_OWN}select_fill_{dtype.suffix}"] = select_fill
        table[f"{_OWN}index_select_general_{dtype.suffix}"] = general
        table[f"{_OWN}gather_scalar_{dtype.suffix}"] = scalar
        table[f"{_OWN}masked_fill_broadcast_{dtype.suffix}"] = masked_fill_broadcast
        table[f"{_OWN}select_fill_broadcast_{dtype.suffix}"] = select_fill_broadcast
        table[f"{_OWN}contiguize_{dtype.suffix}"] = contiguize
        table[f"{_OWN}copy_buffer_{dtype.suffix}"] = copy_buffer
        table[f"{_OWN}index_select_strided_{dtype.suffix}"] = strided_index_select
        table[f"{_OWN}gather_strided_{dtype.suffix}"] = strided_gather
    for base, kernel in OWN_KERNELS.items():
        ref = _ref(f"{_OWN}{base}", kernel)
        table.update({f"{_OWN}{base}_{dtype.suffix}": ref for dtype in DType})
    for dtype in EXTRA_INDEX_SELECT:
        table[f"{_OWN}index_select_{dtype.suffix}"] = index_select
    for dtype in EXTRA_SELECT:
        table[f"{_OWN}gather_{dtype.suffix}"] = gather
        table[f"{_OWN}masked_fill_{dtype.suffix}"] = masked_fill
    return table


LINK_REGISTRIES = {FUEL_REGISTRY: fuel_vulkan_entry_points, LAZYFUEL_REGISTRY: lazyfuel_entry_points}
