#!/usr/bin/env bash
# Issue 18 W2 on the H200 in one device call (branch w2place): the warm compute(device=True) as a
# timeline with this branch's changes and without each (w2_timeline.py --no-turns / --assemble),
# the in-place read of the same ids random vs sorted (w2_in_place.py --orders), the placed-result,
# turns, in-place, device-array and hand-off tests, then data_path's W2 at 4 and 6 GiB (lazyfuel
# and torch, each configuration in a fresh process). Each part bounded; output under $OUT.
#   bash benchmarks/probes/w2_place_run.sh   (device command, carry .gl .whl and this checkout)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp
python3 -m lazyfuel devices >"$OUT/devices.txt" 2>&1 || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -m lazyfuel devices 2>&1 | tee "$OUT/devices.txt" | head -n 5
echo "=== w2_timeline (4 GiB, in place): this branch, then without the turns, then assembled after"
for variant in "" "--no-turns" "--assemble"; do
  timeout ${W2P_TIMELINE_S:-40} python3 benchmarks/probes/w2_timeline.py --gib 4 --rounds 5 --warm-s 1.5 \
    --way in-place $variant >>"$OUT/w2_timeline.txt" 2>&1
  grep -E "^W2 .* best" "$OUT/w2_timeline.txt" | tail -n 1
done
echo "=== w2_in_place: the same 1M ids of 1 KiB, random vs sorted"
timeout ${W2P_ORDER_S:-45} python3 benchmarks/probes/w2_in_place.py --gib 4 --rows 1024 --rounds 5 \
  --orders random,sorted,random --no-streamed 2>&1 | tee "$OUT/w2_in_place.txt"
echo "=== tests"
timeout ${W2P_TESTS_S:-60} python3 -m pytest -q -r sfE --tb=short -p no:cacheprovider \
  tests/backends/vulkan/test_vulkan_placed_result.py tests/backends/vulkan/test_vulkan_host_gather_turns.py \
  tests/backends/vulkan/test_vulkan_host_gather.py tests/backends/vulkan/test_vulkan_device_array.py \
  tests/backends/vulkan/test_vulkan_shared_cuda_handoff.py tests/test_dlpack.py >"$OUT/tests.txt" 2>&1
tail -n 12 "$OUT/tests.txt"
echo "=== data_path W2"
timeout ${W2P_DATA_PATH_S:-130} python3 benchmarks/data_path.py --json "$OUT/data_path.json" \
  ${DATA_PATH_ARGS:---workloads w2 --w2-gib 4,6 --w2-only lazyfuel,torch} 2>&1 | tee "$OUT/data_path.txt"
echo "=== timelines of the best rounds"
grep -E "^W2 |^ +[0-9.]+ (submit|wait|gather_in_place|reserve|assemble) |^  \[" "$OUT/w2_timeline.txt" | head -n 150
