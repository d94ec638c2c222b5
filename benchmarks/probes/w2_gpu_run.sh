#!/usr/bin/env bash
# Issue 18 W2 on the H200 in one device call (branch w2again): gpu_run.sh's check and data_path
# stages (DATA_PATH_ARGS: W2 at 4 and 6 GiB), then the CUDA hand-off tests, the in-place and streamed
# tests, w2_timeline.py (one warm compute(device=True) per thread, in place and streamed) and
# w2_streamed.py (the streamed way's pieces, the kernel alone, the first compute in fresh
# processes). Each part bounded; output under $OUT.
#   bash benchmarks/probes/w2_gpu_run.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DATA_PATH_ARGS=${DATA_PATH_ARGS:-"--workloads w2 --w2-gib 4,6 --w2-only lazyfuel,torch"} \
  timeout ${W2_DATA_PATH_S:-200} bash benchmarks/gpu_run.sh check data_path
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp
python3 -m lazyfuel devices >/dev/null 2>&1 || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
echo "=== hand-off tests"
timeout 100 python3 -m pytest -q -r sfE --tb=short -p no:cacheprovider \
  tests/backends/vulkan/test_vulkan_shared_cuda_handoff.py tests/test_dlpack.py >"$OUT/handoff_tests.txt" 2>&1
tail -n 15 "$OUT/handoff_tests.txt"
echo "=== w2_timeline"
for way in in-place streamed; do
  timeout 45 python3 benchmarks/probes/w2_timeline.py --gib 4 --rounds 3 --way $way 2>&1 | tee "$OUT/w2_timeline_$way.txt" | tail -n 80
done
echo "=== w2_streamed"
timeout ${W2_STREAMED_S:-100} python3 benchmarks/probes/w2_streamed.py --gib 4 --rounds 5 --pieces 16 --flights 2 \
  --fresh 1 --profile-lines 12 2>&1 | tee "$OUT/w2_streamed.txt"
echo "=== in-place and streamed tests"
timeout ${W2_TESTS_S:-60} python3 -m pytest -q -x -p no:cacheprovider tests/backends/vulkan/test_vulkan_host_gather.py \
  tests/backends/vulkan/test_vulkan_streamed.py 2>&1 | tail -n 8 | tee "$OUT/w2_tests.txt"
