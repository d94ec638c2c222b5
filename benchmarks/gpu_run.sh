#!/usr/bin/env bash
# One whole GPU run on the device machine (the `device` tool's H200), in one call:
#   loaders and wheels in, the Vulkan device checked, the Vulkan tests and the audit on the GPU,
#   then the GPU benchmarks; everything they print and write lands in $OUT.
# Prepare here once, in the repository root (.gl and .whl are git-ignored):
#   mkdir -p .gl /tmp/amd64/partial; o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update; (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
#   for p in vulkan==1.3.275.1 cffi==2.0.0 pycparser dask==2026.8.0 partd locket; do python3 -m pip download
#     --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64
#     --platform manylinux2014_x86_64 --platform any -d .whl $p; done
#   for fftcuda, pyvkfft's sdist without its 35 MB of examples and docs (the version the venv has):
#   pip download --no-binary :all: --no-deps -d /tmp/vk pyvkfft==2025.1.1 && tar xzf /tmp/vk/pyvkfft-2025.1.1.tar.gz
#     -C /tmp/vk && rm -r /tmp/vk/pyvkfft-2025.1.1/{examples,doc} && tar czf .whl/pyvkfft-2025.1.1-slim.tar.gz
#     -C /tmp/vk pyvkfft-2025.1.1
# Usage (device command, carry [".gl", ".whl"]):  bash benchmarks/gpu_run.sh [STAGE...]
# Stages: check tests audit kernels kernels_gpu pipeline (default: all but kernels_gpu).
# multi (not in the default list): benchmarks/multi_gpu.py on a machine of two GPUs (MULTI_ARGS).
# w3 (not in the default list; nvidia-h200-x2): benchmarks/multi_gpu.py --only-w3, issue 18's resident
#   W3 through the public API (16 GiB persisted f32, index_select + masked_fill, result kept on the
#   GPUs) on one GPU and on two in one run, plus compute(device=True) gathered onto one (W3_ARGS;
#   output w3.txt). About 2-3 minutes: making and persisting 2 x 16 GiB, checking the results.
# choices (not in the default list): `python3 -m lazyfuel judge --quick` on the device, then
#   benchmarks/probes/choices.py: the judge's fitted device-side GB/s (GPU timestamps) of both Contiguize
#   bindings (vkCmdCopyBuffer of a dense view, the copy shader) and both index_select bindings, the
#   transfer term (submit, host<->device per array and GB/s), both Contiguize bindings timed on a
#   dense offset view of 64M f32, and `lf.explain` of x[1:].contiguous() and of index_select on a
#   transposed source with the costs compared (CHOICES_ARGS). About a minute on the H200.
# zerocopy (not in the default list): benchmarks/probes/zero_copy.py, one program per chunk on page-locked
#   arrays per op (select, fill, select+fill, a copy) in zero-copy and staged modes (ZEROCOPY_ARGS).
# graph (not in the default list): the graph layer's tests (tests/graph: lowering, fusion, pieces,
#   crossing), each on every backend usable there, the H200's Vulkan device among them.
# transfer (not in the default list): benchmarks/probes/transfer.py, host<->device bandwidth per transfer
#   mode and the 4 GiB chunked pipeline vs torch (TRANSFER_ARGS; output transfer$TRANSFER_TAG.txt).
# data_path (not in the default list): benchmarks/data_path.py, issue 18's W1 through the public API
#   at chunks of 8 MiB-1 GiB, pageable and page-locked, beside torch at its best (pinned, 3 streams),
#   torch as first written and numpy, and lazyfuel pageable by thread count (DATA_PATH_ARGS; output
#   data_path.txt and data_path.json). About 3-4 minutes on the H200.
# w1timeline (not in the default list): benchmarks/probes/w1_timeline.py, W1 page-locked as a timeline of
#   its programs (lead, tail, programs in flight, host time between tasks) round by round beside torch at
#   its best, by chunk size, threads and task_bytes (W1T_ARGS; W1T_S seconds at most).
# w2first (not in the default list): benchmarks/probes/w2_first.py, W2's first compute to host over many fresh
#   processes, lazyfuel and torch CPU index_select in turn, the first compute split (lead, gathers, tail),
#   fresh result-size arrays touched with and without huge-page advice (W2F_ARGS; W2F_CONFIGS, its --configs,
#   which hold spaces; W2F_S seconds at most).
# w2gpufirst (not in the default list): benchmarks/probes/w2_timeline.py --first, a fresh process's first W2
#   compute(device=True) as a timeline per thread (the pool, the link probe, plans built, blocks made, staging,
#   takes), for each table of W2G_GIBS (4 6) in W2G_PROCESSES (2) processes, each with an empty judge cache
#   (W2G_ARGS; output w2_gpu_first_GIB_K.txt). About 15 s a process.
# staging (not in the default list): benchmarks/probes/staging_cost.py, what making page-locked staging costs by
#   block size and thread count: the driver's upload and download blocks against host pages imported
#   fresh or touched beforehand (STAGING_ARGS). Under a minute.
# per_task (not in the default list): benchmarks/probes/per_task.py, W1's time per task at small chunks by
#   thread count, cProfile of one compute, and the cost of importing pageable pages (PER_TASK_ARGS).
# resident (not in the default list): issue 18's CUDA hand-off and resident figures: the DLPack / CUDA
#   hand-off and resident tests (tests/backends/vulkan/test_vulkan_shared_cuda_handoff.py,
#   test_vulkan_residency_persist_device.py, tests/test_dlpack.py: the CUDA ones run where torch sees the pool's
#   GPU), then benchmarks/data_path.py --workloads w3,w4 (RESIDENT_ARGS; output resident.txt and
#   resident.json): W3 16 GiB resident index_select + masked_fill vs torch and CuPy at 1 KiB and 64 B
#   rows, W4 torch.from_dlpack(y.compute(device=True)) vs the compute alone, the store's budget
#   under 16 threads; then test_vulkan_residency_persist_device.py (RESIDENT_PERSIST_S seconds at most).
#   About 4 minutes on the H200 (W3 2, the tests 1-2).
# w3_wall (not in the default list): benchmarks/probes/w3_wall.py, W3's wall time between programs: 16 GiB
#   resident in 1 GiB blocks, kept_indices off (main's behaviour) vs on vs the mask persisted too, torch
#   beside, allocations and contexts made per compute, cProfile of one compute (W3W_ARGS); then
#   tests/graph/test_kept_indices.py and test_vulkan_residency_persist_device.py (W3W_TESTS_S seconds at
#   most) and data_path.py --workloads w3 --rounds 3 (W3W_DATA_PATH_S seconds at most; 0 skips it).
#   About 4-5 minutes on the H200.
# w3kernel (not in the default list): benchmarks/probes/w3_kernel_probe.py, W3's kernel alone on one resident
#   1 GiB block at 1 KiB and 64 B rows: copy shader, select_fill general vs row walk under each launch shape,
#   index_select and masked_fill alone, 4 blocks per command buffer and on 4 queues, clocks sampled
#   (W3K_ARGS; output w3_kernel_probe.txt / .json). About 1-2 minutes on the H200.
# w3narrow (not in the default list): benchmarks/probes/w3_kernel_probe.py --narrow, W3's kernel on one resident 1 GiB block
#   at 64 B, 128 B and 1 KiB rows: select_fill reading every row vs not reading the rows its mask fills,
#   loads in turn vs in passes, the mask half set and none set; the copy shader and index_select beside
#   (W3N_ARGS; output w3_narrow.txt / .json). About a minute on the H200.
# w4handoff (not in the default list): benchmarks/probes/w4_handoff.py, W4's torch hand-off piece by piece
#   (compute, __dlpack__, torch.from_dlpack, synchronize, drop) and cProfile of hand-offs against computes
#   alone (W4H_ARGS; output w4_handoff.txt). Under a minute.
# w3timeline (not in the default list): benchmarks/probes/w3_timeline.py, one W3 persist(device=True) as a
#   timeline per thread (lowering, task bodies, recording, submits, fence waits, device ms of each batch),
#   host mask and mask resident (W3T_ARGS; output w3_timeline.txt, w3_timeline_mask.txt). About a minute.
# w3rounds (not in the default list): the replay and hand-off tests on the GPU (tests/graph/test_replay.py,
#   test_vulkan_shared_cuda_handoff.py, test_vulkan_run_many_status.py; 60 s at most), then
#   benchmarks/probes/w3_rounds.py: W3 round by round in phases (data_path's first row, after an idle
#   GPU, held right before, a new Array, the last result alive), each round's wall split at the first
#   submit and the last fence, new device memory, clocks (W3R_ARGS; output w3_rounds.txt). About a minute.
# link (not in the default list): benchmarks/probes/link.py, the link with no host copies: threads copying
#   pageable memory, vkCmdCopyBuffer from the driver's host memory and from arrays imported once,
#   torch pinned (LINK_ARGS).
# fftcuda (not in the default list): the vkfft provider's Cuda backend. Builds pyvkfft's CUDA back
#   end from .whl/pyvkfft-*.tar.gz with the image's nvcc (no OpenCL: the OpenCL backend stays
#   unusable), then the FFT tests (tests/backends/vkfft, tests/graph/test_fft.py: Cuda and the
#   Vulkan -> Cuda crossing), the audit of the Cuda FFT bindings, and rfft lazyfuel cuda vs CuPy's
#   cuFFT (FFTCUDA_ARGS: benchmarks/fft.py's arguments, no spaces inside one). At most ~9.5 minutes
#   (build 200 s, tests 130 s, audit 90 s, benchmark 150 s), about 4 expected.
# crossing (not in the default list; run right after fftcuda in the same call, which builds pyvkfft's
#   CUDA back end and sets its env: `bash benchmarks/gpu_run.sh fftcuda crossing`): the Vulkan ->
#   Cuda crossing through exported memory: tests/graph/test_crossing.py and
#   tests/backends/vulkan/test_vulkan_export.py, then benchmarks/probes/crossing.py (gather -> masked_fill
#   -> rfft, crossing auto vs host; CROSSING_ARGS). About 1-2 minutes (tests 40 s, benchmark 80 s).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! python3 -m lazyfuel devices >/dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
fftcuda() {  # see the header; each part bounded so the whole stays within one device call
  local nvcc; nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) \
    || { echo "fftcuda: no nvcc on PATH or in /usr/local/cuda/bin" | tee "$OUT/fftcuda_build.txt"; return 1; }
  local cuda_home; cuda_home=$(dirname "$(dirname "$nvcc")")
  mkdir -p /tmp/vkbuild && tar xzf .whl/pyvkfft-*.tar.gz -C /tmp/vkbuild || return 1
  ( cd /tmp/vkbuild/pyvkfft-* && CUDA_HOME=$cuda_home VKFFT_BACKEND=cuda \
      LIBRARY_PATH=$cuda_home/lib64:$cuda_home/lib64/stubs:${LIBRARY_PATH:-} timeout 200 \
      python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . ) \
    >"$OUT/fftcuda_build.txt" 2>&1 || { tail -n 30 "$OUT/fftcuda_build.txt"; return 1; }
  export LD_LIBRARY_PATH=$cuda_home/lib64:${LD_LIBRARY_PATH:-} PATH=$cuda_home/bin:$PATH
  python3 -c "import cupy, pyvkfft.cuda, pyvkfft.version as v; print('pyvkfft', v.__version__, 'cuda', \
cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.getDeviceProperties(0)['name'])" 2>&1 \
    | tee "$OUT/fftcuda_env.txt"
  timeout 130 python3 -m pytest -q -r fE -p no:cacheprovider tests/backends/vkfft tests/graph/test_fft.py \
    >"$OUT/fftcuda_tests.txt" 2>&1; tail -n 25 "$OUT/fftcuda_tests.txt"
  timeout 90 python3 -m lazyfuel audit --backend cuda --op Fft --op Ifft --op Rfft --op Irfft \
    >"$OUT/fftcuda_audit.txt" 2>&1; tail -n 16 "$OUT/fftcuda_audit.txt"
  timeout 150 python3 benchmarks/fft.py ${FFTCUDA_ARGS:---repeats 3 --cases 8192x8192:float32,8192x8191:float32,64x65537:float64 \
    --configs "numpy,cupy,cupy + copies,vkfft cuda,lazyfuel cuda"} 2>&1 | tee "$OUT/fftcuda_bench.txt"
}
crossing() {  # see the header
  python3 -c "import cuda.bindings.runtime as r; print('cuda-python', r.cudaRuntimeGetVersion())" 2>&1 \
    | tee "$OUT/crossing_env.txt"
  timeout 60 python3 -m pytest -q -r sfE -p no:cacheprovider tests/graph/test_crossing.py \
    tests/backends/vulkan/test_vulkan_export.py >"$OUT/crossing_tests.txt" 2>&1; tail -n 25 "$OUT/crossing_tests.txt"
  timeout 120 python3 benchmarks/probes/crossing.py ${CROSSING_ARGS:-} 2>&1 | tee "$OUT/crossing_bench.txt"
}
stages=${*:-check tests audit kernels pipeline}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
for stage in $stages; do
  echo "=== $stage"
  case $stage in
    check)    python3 -m lazyfuel devices 2>&1 | tee "$OUT/devices.txt" ;;
    tests)    python3 -m pytest -q -x -p no:cacheprovider tests/backends/vulkan 2>&1 | tail -n 25 | tee "$OUT/tests.txt" ;;
    graph)    python3 -m pytest -q -x -p no:cacheprovider tests/graph 2>&1 | tail -n 25 | tee "$OUT/graph.txt" ;;
    audit)    LAZYFUEL_BACKEND=vulkan python3 -m lazyfuel audit --backend vulkan 2>&1 | tail -n 5 | tee "$OUT/audit.txt" ;;
    kernels)  python3 benchmarks/kernels.py ${KERNELS_ARGS:-} 2>&1 | tee "$OUT/kernels.txt" ;;
    kernels_gpu) python3 benchmarks/probes/kernels_gpu.py --out "$OUT" ${KERNELS_GPU_ARGS:-} 2>&1 | tee "$OUT/kernels_gpu.txt" ;;
    pipeline) python3 benchmarks/pipeline.py ${PIPELINE_ARGS:-} 2>&1 | tee "$OUT/pipeline.txt" ;;
    multi)    python3 benchmarks/multi_gpu.py ${MULTI_ARGS:-} 2>&1 | tee "$OUT/multi.txt" ;;
    w3_kernels) python3 benchmarks/probes/w3_kernels.py ${W3K_ARGS:-} 2>&1 | tee "$OUT/w3_kernels.txt" ;;
    w3)       python3 benchmarks/multi_gpu.py --only-w3 ${W3_ARGS:-} 2>&1 | tee "$OUT/w3.txt" ;;
    choices)  python3 -m lazyfuel judge --quick >"$OUT/judge.txt" 2>&1
              grep -E "^(op_kind|Contiguize |IndexSelect +\[F32,U32,F32\])" "$OUT/judge.txt"
              python3 benchmarks/probes/choices.py ${CHOICES_ARGS:-} 2>&1 | tee "$OUT/choices.txt" ;;
    transfer) python3 benchmarks/probes/transfer.py ${TRANSFER_ARGS:-} 2>&1 | tee "$OUT/transfer${TRANSFER_TAG:-}.txt" ;;
    data_path) python3 benchmarks/data_path.py --json "$OUT/data_path.json" ${DATA_PATH_ARGS:-} 2>&1 \
                | tee "$OUT/data_path.txt" ;;
    per_task) python3 benchmarks/probes/per_task.py ${PER_TASK_ARGS:-} 2>&1 | tee "$OUT/per_task.txt" ;;
    resident) python3 -c "from lazyfuel.backends.vulkan import get_pool, register; register(); p = get_pool(); \
from lazyfuel.backends.vulkan.shared import hand_off; print(p.label, p.info.max_memory_allocation_size, hand_off(p))" \
                2>&1 | tee "$OUT/resident_env.txt"
              timeout 120 python3 -m pytest -q -r sfE --tb=short -p no:cacheprovider \
                tests/backends/vulkan/test_vulkan_shared_cuda_handoff.py tests/test_dlpack.py >"$OUT/resident_tests.txt" 2>&1
              tail -n 25 "$OUT/resident_tests.txt"
              python3 benchmarks/data_path.py --workloads w3,w4 --json "$OUT/resident.json" ${RESIDENT_ARGS:-} \
                2>&1 | tee "$OUT/resident.txt"
              timeout ${RESIDENT_PERSIST_S:-180} python3 -m pytest -q -r fE --tb=line -p no:cacheprovider \
                tests/backends/vulkan/test_vulkan_residency_persist_device.py >"$OUT/resident_persist.txt" 2>&1
              tail -n 25 "$OUT/resident_persist.txt" ;;
    w3_wall)  timeout ${W3W_S:-240} python3 benchmarks/probes/w3_wall.py ${W3W_ARGS:---mib 16384 --chunk-mib 1024 \
                --rounds 3 --threads 16 --profile} 2>&1 | tee "$OUT/w3_wall.txt"
              timeout ${W3W_TESTS_S:-60} python3 -m pytest -q -r fE --tb=line -p no:cacheprovider \
                tests/graph/test_kept_indices.py tests/backends/vulkan/test_vulkan_residency_persist_device.py \
                >"$OUT/w3_wall_tests.txt" 2>&1; tail -n 15 "$OUT/w3_wall_tests.txt"
              if [ "${W3W_DATA_PATH_S:-150}" != 0 ]; then timeout ${W3W_DATA_PATH_S:-150} python3 benchmarks/data_path.py \
                --workloads w3 --rounds 3 --json "$OUT/w3_data_path.json" 2>&1 | tee "$OUT/w3_data_path.txt"; fi ;;
    w3timeline) timeout ${W3T_S:-200} python3 benchmarks/probes/w3_timeline.py ${W3T_ARGS:-} 2>&1 | tee "$OUT/w3_timeline.txt"
              timeout ${W3T_S:-200} python3 benchmarks/probes/w3_timeline.py --row-bytes 1024 --rounds 3 --resident-mask \
                2>&1 | tee "$OUT/w3_timeline_mask.txt" ;;
    w3rounds) timeout 60 python3 -m pytest -q -r fE --tb=short -p no:cacheprovider tests/graph/test_replay.py \
                tests/backends/vulkan/test_vulkan_shared_cuda_handoff.py tests/backends/vulkan/test_vulkan_run_many_status.py \
                2>&1 | tail -n 8 | tee "$OUT/w3_rounds_tests.txt"
              timeout ${W3R_S:-120} python3 benchmarks/probes/w3_rounds.py --out "$OUT" ${W3R_ARGS:-} 2>&1 \
                | tee "$OUT/w3_rounds.txt" ;;
    w3kernel) timeout ${W3K_S:-240} python3 benchmarks/probes/w3_kernel_probe.py --out "$OUT" ${W3K_ARGS:-} \
                2>&1 | tee "$OUT/w3_kernel_probe.txt" ;;
    w3narrow) timeout ${W3N_S:-200} python3 benchmarks/probes/w3_kernel_probe.py --narrow --out "$OUT" ${W3N_ARGS:-} \
                2>&1 | tee "$OUT/w3_narrow.txt" ;;
    w1timeline) timeout ${W1T_S:-300} python3 benchmarks/probes/w1_timeline.py ${W1T_ARGS:-} 2>&1 \
                | tee "$OUT/w1_timeline.txt" ;;
    w2first)  timeout ${W2F_S:-300} python3 benchmarks/probes/w2_first.py ${W2F_ARGS:-} ${W2F_CONFIGS:+--configs "$W2F_CONFIGS"} 2>&1 \
                | tee "$OUT/w2_first.txt" ;;
    w2gpufirst) for gib in ${W2G_GIBS:-4 6}; do for k in $(seq ${W2G_PROCESSES:-2}); do
                LAZYFUEL_BACKEND=auto LAZYFUEL_CACHE_DIR=$(mktemp -d) timeout ${W2G_S:-90} python3 \
                  benchmarks/probes/w2_timeline.py --first --gib "$gib" --way auto --rounds 8 ${W2G_ARGS:-} 2>&1 \
                  | tee "$OUT/w2_gpu_first_${gib}_$k.txt" | grep -E "^(explain|compute|first|W2|Traceback)"
              done; done ;;
    staging)  timeout ${STAGING_S:-240} python3 benchmarks/probes/staging_cost.py ${STAGING_ARGS:-} 2>&1 \
                | tee "$OUT/staging.txt" ;;
    w4handoff) timeout ${W4H_S:-120} python3 benchmarks/probes/w4_handoff.py ${W4H_ARGS:-} 2>&1 \
                | tee "$OUT/w4_handoff.txt" ;;
    link)     python3 benchmarks/probes/link.py ${LINK_ARGS:-} 2>&1 | tee "$OUT/link.txt" ;;
    zerocopy) python3 benchmarks/probes/zero_copy.py ${ZEROCOPY_ARGS:-} 2>&1 | tee "$OUT/zero_copy.txt" ;;
    fftcuda)  fftcuda ;;
    crossing) crossing ;;
    *)        echo "unknown stage $stage" ;;
  esac
done
