"""The vkfft provider's link registry (`backends.vkfft.links`): a transform's revision folds in the
pyvkfft version and the code that drives it."""

from __future__ import annotations

from lazyfuel.backends.vkfft.links import code
from lazyfuel.backends.vkfft.transforms import TRANSFORMS


def test_revision_folds_in_the_pyvkfft_version_and_the_driving_code() -> None:
    blob = code(TRANSFORMS["rfft"])
    assert blob.startswith(b"rfft r2c=True inverse=False pyvkfft=")
    assert b"class OpenCLExecutor" in blob and b"def stage(" in blob
    assert code(TRANSFORMS["irfft"]) != blob
