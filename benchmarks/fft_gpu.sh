#!/usr/bin/env bash
# The FFT provider on the H200 (the `device` tool), in one call: pyvkfft built there from a carried
# sdist (OpenCL and CUDA back ends, with the image's nvcc and the CUDA toolkit's OpenCL headers),
# NVIDIA's OpenCL driver registered for the ICD loader, the FFT tests on the GPU's OpenCL device,
# then benchmarks/fft.py (numpy, lazyfuel cpu / opencl, cupy cuFFT, raw VkFFT on CUDA).
# Prepare here once: .whl as for gpu_run.sh; .scratch/fftgpu holds the cp312 wheels of pyopencl,
# pytools, platformdirs, siphash24 and pyvkfft-2025.1.1-slim.tar.gz (the sdist without examples/doc).
# Usage (as the device command, carrying .gl, .whl and .scratch/fftgpu):  bash benchmarks/fft_gpu.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
REPO=$PWD
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl .scratch/fftgpu/*.whl || exit 1
export PYTHONPATH=/tmp/site:$REPO PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); export CUDA_HOME
CLH=$(find "$CUDA_HOME" /usr/include /usr/local -name cl.h -path '*CL/cl.h' 2>/dev/null | head -1)
LIBCL=$(find "$CUDA_HOME" /usr/lib /usr/local -name 'libOpenCL.so*' 2>/dev/null | head -1)
NVCL=$(find /usr/local/nvidia /usr/lib -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
echo "nvcc $(command -v nvcc); CL/cl.h $CLH; libOpenCL $LIBCL; NVIDIA OpenCL $NVCL" | tee "$OUT/env.txt"
if [ -n "$NVCL" ]; then mkdir -p /tmp/icd && echo "$NVCL" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd; fi
mkdir -p /tmp/libcl && [ -n "$LIBCL" ] && ln -sf "$LIBCL" /tmp/libcl/libOpenCL.so
( cd /tmp && tar xzf "$REPO"/.scratch/fftgpu/pyvkfft-*-slim.tar.gz && cd pyvkfft-2025.1.1 \
  && CPATH=$(dirname "$(dirname "$CLH")") LIBRARY_PATH=/tmp/libcl:$CUDA_HOME/lib64 VKFFT_BACKEND=opencl,cuda \
     python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . ) \
  > "$OUT/build.txt" 2>&1 || { tail -n 40 "$OUT/build.txt"; }
export LD_LIBRARY_PATH=/tmp/libcl:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 - <<'PY' 2>&1 | tee "$OUT/opencl.txt"
import pyopencl as cl
for p in cl.get_platforms():
    print(p.name, p.version, [d.name for d in p.get_devices()])
import pyvkfft.opencl, pyvkfft.cuda  # noqa: F401
print("pyvkfft opencl + cuda import")
PY
echo "=== tests"; python3 -m pytest -q -p no:cacheprovider tests/backends/vkfft 2>&1 | tail -n 15 | tee "$OUT/tests.txt"
echo "=== bench"; python3 benchmarks/fft.py ${FFT_ARGS:-} 2>&1 | tee "$OUT/fft.txt"
