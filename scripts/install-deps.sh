#!/usr/bin/env bash
# Installs the Debian packages symcomm needs to build and test, where they are missing.
# The CUDA toolkit (nvcc, headers, libcudart) is expected in /usr/local/cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake ] || \
  [ -f /usr/lib/cmake/GTest/GTestConfig.cmake ] || need+=(libgtest-dev)
# libfabric's headers for the net transport (its library is loaded at run time) and its
# runtime with the tcp provider, which the multi-node tests use on loopback.
[ -f /usr/include/rdma/fabric.h ] || [ -f .deps/libfabric/include/rdma/fabric.h ] || \
  need+=(libfabric-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: nvcc is in /usr/local/cuda/bin (added to PATH by the build scripts)"
fi
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "install-deps: the CUDA toolkit (nvcc) is missing: install CUDA 12.4 or newer" >&2; exit 1; }
# The Python module's build and test requirements (nanobind, scikit-build-core, numpy, pytest:
# python/requirements.txt), where the interpreter lacks them. Without them the module and its
# tests are left out of the build, which says so.
if command -v python3 >/dev/null && ! python3 -c "import nanobind, numpy, pytest" 2>/dev/null; then
  echo "install-deps: pip install -r python/requirements.txt"
  python3 -m pip install -q -r python/requirements.txt || \
    echo "install-deps: pip could not install python/requirements.txt: no Python module" >&2
fi
# CUTLASS's C++ headers for the fused GEMM kernels (pip's nvidia-cutlass, 6 MB:
# scripts/requirements-cutlass.txt), where missing; without them those kernels are not built
# and the build says so. --no-deps: the headers are all the build reads (the package's own
# Python dependencies, cuda-python and scipy among them, are for its Python interface).
if command -v python3 >/dev/null && ! python3 -c "import cutlass_library" 2>/dev/null; then
  echo "install-deps: pip install -r scripts/requirements-cutlass.txt"
  python3 -m pip install -q --no-deps -r scripts/requirements-cutlass.txt || \
    echo "install-deps: pip could not install nvidia-cutlass: no fused GEMM kernels" >&2
fi
# torch for the torch.distributed backend's tests (python/requirements-torch.txt: 4.6 GB with
# CUDA's libraries), where missing and the disk has room; without it those tests report
# themselves skipped.
if command -v python3 >/dev/null && ! python3 -c "import torch" 2>/dev/null; then
  free_kb=$(df -Pk "$(python3 -c 'import site; print(site.getsitepackages()[0])')" | awk 'NR==2 {print $4}')
  if [ "${free_kb:-0}" -ge $((10 * 1024 * 1024)) ]; then
    echo "install-deps: pip install -r python/requirements-torch.txt (about 4.6 GB)"
    python3 -m pip install -q -r python/requirements-torch.txt || \
      echo "install-deps: pip could not install torch: its tests will skip" >&2
  else
    echo "install-deps: less than 10 GB free: torch is not installed, its tests will skip" >&2
  fi
fi
