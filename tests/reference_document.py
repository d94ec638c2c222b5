"""Where the tests find the reference kernel-contract document (the seed the project was given).

It is kept in the repository in its flattened form, byte for byte as it was handed over
(`tests/contracts/data/reference_seed.txt`; tests/contracts/test_reference_document.py pins its
sha256), so that no test reads anything outside the repository. The package ships the same
contracts in canonical form as `lazyfuel/contracts/vulkan_select.md`.

Importable by name from any test module: pytest puts `tests/` on `sys.path` when it loads
`tests/conftest.py`, before it collects any test.
"""

from __future__ import annotations

from pathlib import Path

SEED = Path(__file__).resolve().parent / "contracts" / "data" / "reference_seed.txt"
SEED_SHA256 = "63c4457a0ecc281467ddd78d68644ce39d33decc5888cb93a7337af30e79fcf2"
