#!/usr/bin/env bash
# A wheel built from the repository works outside it: builds the wheel, installs it into a fresh
# venv in a temporary directory, and from that directory (not the repository) runs
# `lazyfuel devices`, `lazyfuel contracts list` on a contract document the wheel installed, and a
# small lf.index_select compared bit for bit with numpy. Exits non-zero on the first failure.
#
# Usage: tools/check-wheel.sh [PYTHON]   (PYTHON makes the venv; default python3)
set -euo pipefail

PYTHON=${1:-python3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/lazyfuel-wheel.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

step() { echo "== $*"; }

step "building the wheel from $REPO"
"$PYTHON" -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q --upgrade pip
(cd "$REPO" && "$TMP/venv/bin/python" -m pip wheel -q --no-deps . -w "$TMP/dist")
wheel=$(ls "$TMP"/dist/lazyfuel-*.whl)
step "installing $(basename "$wheel") into a fresh venv in $TMP"
"$TMP/venv/bin/python" -m pip install -q "$wheel"

cd "$TMP"
package=$("$TMP/venv/bin/python" -c 'import lazyfuel, os; print(os.path.dirname(lazyfuel.__file__))')
case "$package" in "$REPO"*) echo "check-wheel: lazyfuel was imported from the repository ($package)" >&2; exit 1 ;; esac
step "lazyfuel imported from $package"
step "lazyfuel devices"
"$TMP/venv/bin/lazyfuel" devices
step "lazyfuel contracts list $package/contracts/vulkan_select.md"
"$TMP/venv/bin/lazyfuel" contracts list "$package/contracts/vulkan_select.md" > "$TMP/list.txt"
head -n 3 "$TMP/list.txt"
step "lf.index_select on fresh random data, compared bit for bit with numpy"
"$TMP/venv/bin/python" - <<'PY'
import numpy as np

import lazyfuel as lf

rng = np.random.default_rng()
table = rng.standard_normal((4_000, 64)).astype(np.float32)
ids = rng.integers(0, table.shape[0], 1_500)
got = lf.from_array(table, chunks=(1_000, 64)).index_select(0, ids).compute()
assert got.dtype == table.dtype and np.array_equal(got.view(np.uint32), table[ids].view(np.uint32))
print(f"index_select of {ids.size} rows: equal to numpy bit for bit")
PY
step "the wheel works outside the repository"
