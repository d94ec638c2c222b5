"""Checks of the shapes ops combine: a mask against its data (`broadcast_mask_shape`,
`masked_fill_shape`) and a gather's index against its source (`check_gather_shapes`); each
returns the result's shape (or the normalised dim) or raises ValueError naming both shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyfuel.layout import normalize_dim


def broadcast_mask_shape(mask_shape: Sequence[int], data_shape: Sequence[int]) -> tuple[int, ...]:
    """The data's shape, after checking that a mask of `mask_shape` broadcasts to it (numpy rules).

    The broadcast goes one way: the mask is stretched to the data, never the data to the mask.
    This is what a MaskedFill step sees: the API (`masked_fill_shape`) has already stretched the
    data to the common shape where the mask is larger.

    Raises:
        ValueError: naming both shapes and the first dim that does not fit.
    """
    mask_shape, data_shape = tuple(mask_shape), tuple(data_shape)
    if len(mask_shape) > len(data_shape):
        raise ValueError(f"mask of shape {mask_shape} does not broadcast to data of shape {data_shape}: "
                         f"the mask has {len(mask_shape)} dims, the data {len(data_shape)}")
    lead = len(data_shape) - len(mask_shape)
    for i, (m, d) in enumerate(zip(mask_shape, data_shape[lead:])):
        if m not in (1, d):
            raise ValueError(f"mask of shape {mask_shape} does not broadcast to data of shape "
                             f"{data_shape}: mask dim {i} has {m} elements, expected 1 or {d}")
    return data_shape


def masked_fill_shape(mask_shape: Sequence[int], data_shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of `masked_fill(data, mask, v)`: data and mask broadcast together (numpy rules),
    as `np.where(mask, v, data)` and PyTorch's out-of-place `masked_fill` do. A mask larger than
    the data stretches the data up: mask (2, 1) over data (25,) gives (2, 25).

    Raises:
        ValueError: the shapes do not broadcast together, naming both and the first dim (counted
            from the right, as broadcasting aligns them) where they differ and neither is 1.
    """
    mask_shape, data_shape = tuple(mask_shape), tuple(data_shape)
    out = []
    for back in range(1, max(len(mask_shape), len(data_shape)) + 1):
        m = mask_shape[-back] if back <= len(mask_shape) else 1
        d = data_shape[-back] if back <= len(data_shape) else 1
        if m != d and 1 not in (m, d):
            raise ValueError(f"mask of shape {mask_shape} and data of shape {data_shape} do not "
                             f"broadcast together: dim -{back} has {m} elements in the mask and {d} "
                             f"in the data (expected equal extents, or 1 in either)")
        out.append(d if m == 1 else m)
    return tuple(reversed(out))


def check_gather_shapes(source_shape: Sequence[int], index_shape: Sequence[int], dim: int) -> int:
    """The normalised `dim` of a gather, after checking the index shape against the source shape.

    `dim` may be negative. The index must have the source's rank and equal the source's extent on
    every axis but `dim` (PyTorch also allows smaller extents there). A 0-d source or
    index counts as one element along dim 0, as in PyTorch. The output has the index's shape.

    Raises:
        IndexError: `dim` is out of range for the source's rank.
        ValueError: the ranks differ, or an extent differs on an axis other than `dim`.
    """
    source_shape, index_shape = tuple(source_shape), tuple(index_shape)
    d = normalize_dim(dim, len(source_shape))
    src = source_shape or (1,)
    idx = index_shape or (1,)
    if len(src) != len(idx):
        raise ValueError(f"gather index has {len(index_shape)} dims but the source has "
                         f"{len(source_shape)}; expected an index of rank {len(source_shape)} "
                         f"(got shape {index_shape} for source shape {source_shape})")
    for axis, (s, i) in enumerate(zip(src, idx)):
        if axis != d and s != i:
            expected = (*src[:d], "any", *src[d + 1:])
            raise ValueError(f"gather index has shape {index_shape}, expected "
                             f"({', '.join(map(str, expected))}) for source shape {source_shape} "
                             f"and dim {d}: axis {axis} has {i} elements, the source {s}")
    return d
