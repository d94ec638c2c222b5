"""The vkfft transforms (`backends.vkfft.transforms`): staging crops, pads and casts in one copy (none
where nothing is to do), and unstaging puts the axis back."""

from __future__ import annotations

from lazyfuel.backends.vkfft.transforms import stage, unstage


def test_stage_moves_crops_pads_and_casts_in_one_copy() -> None:
    import numpy as np

    a = np.arange(24.0).reshape(2, 3, 4)
    staged = stage(a, 1, 5, np.dtype(np.complex64))
    assert staged.shape == (8, 5) and staged.dtype == np.complex64 and staged.flags.c_contiguous
    assert np.array_equal(staged[:, :3].real.reshape(2, 4, 3), np.moveaxis(a, 1, -1))
    assert not staged[:, 3:].any()
    same = np.ascontiguousarray(a, np.float32)
    assert np.shares_memory(stage(same, 2, 4, np.dtype(np.float32)), same)  # nothing to do: no copy
    assert not np.shares_memory(stage(same, 2, 4, np.dtype(np.float32), fresh=True), same)
    back = unstage(np.moveaxis(a, 1, -1).reshape(8, 3), (2, 3, 4), 1)
    assert np.array_equal(back, a) and back.flags.c_contiguous
