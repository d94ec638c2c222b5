#!/usr/bin/env bash
# One whole GPU run on the device machine (the `device` tool's H200), in one call:
#   loaders and wheels in, the Vulkan device checked, the Vulkan tests and the audit on the GPU,
#   then the GPU benchmarks; everything they print and write lands in $OUT.
# Prepare here once, in the repository root (all three folders are git-ignored via .git/info/exclude):
#   echo /.gl/ >>.git/info/exclude; echo /.whl/ >>.git/info/exclude; echo /.shared-copy/ >>.git/info/exclude
#   mkdir -p .gl /tmp/amd64/partial; o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update; (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
#   for p in vulkan==1.3.275.1 cffi==2.0.0 pycparser dask==2026.8.0 partd locket; do python3 -m pip download
#     --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64
#     --platform manylinux2014_x86_64 --platform any -d .whl $p; done
#   mkdir -p .shared-copy && cp -r ../shared/seeds .shared-copy/
# Usage (device command, carry [".gl", ".whl", ".shared-copy"]):  bash benchmarks/gpu_run.sh [STAGE...]
# Stages: check tests audit kernels kernels_gpu pipeline (default: all but kernels_gpu).
# multi (not in the default list): benchmarks/multi_gpu.py on a machine of two GPUs (MULTI_ARGS).
# transfer (not in the default list): benchmarks/transfer.py, host<->device bandwidth per transfer
#   mode and the 4 GiB chunked pipeline vs torch (TRANSFER_ARGS).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
# The reference seed lives in ../shared beside a checkout; carry a copy as .shared-copy when needed.
[ -d ../shared ] || { [ -d .shared-copy ] && mkdir -p ../shared && cp -r .shared-copy/* ../shared/; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! python3 -m lazyfuel devices >/dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
stages=${*:-check tests audit kernels pipeline}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
for stage in $stages; do
  echo "=== $stage"
  case $stage in
    check)    python3 -m lazyfuel devices 2>&1 | tee "$OUT/devices.txt" ;;
    tests)    python3 -m pytest -q -x -p no:cacheprovider tests/backends/vulkan 2>&1 | tail -n 25 | tee "$OUT/tests.txt" ;;
    audit)    LAZYFUEL_BACKEND=vulkan python3 -m lazyfuel audit --backend vulkan 2>&1 | tail -n 5 | tee "$OUT/audit.txt" ;;
    kernels)  python3 benchmarks/kernels.py ${KERNELS_ARGS:-} 2>&1 | tee "$OUT/kernels.txt" ;;
    kernels_gpu) python3 benchmarks/kernels_gpu.py --out "$OUT" ${KERNELS_GPU_ARGS:-} 2>&1 | tee "$OUT/kernels_gpu.txt" ;;
    pipeline) python3 benchmarks/pipeline.py ${PIPELINE_ARGS:-} 2>&1 | tee "$OUT/pipeline.txt" ;;
    multi)    python3 benchmarks/multi_gpu.py ${MULTI_ARGS:-} 2>&1 | tee "$OUT/multi.txt" ;;
    transfer) python3 benchmarks/transfer.py ${TRANSFER_ARGS:-} 2>&1 | tee "$OUT/transfer.txt" ;;
    *)        echo "unknown stage $stage" ;;
  esac
done
