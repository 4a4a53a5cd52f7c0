#!/usr/bin/env bash
# Configures and builds symcomm into ${BUILD_DIR:-build}. Extra arguments go to cmake.
# BUILD_TARGETS="a b" builds those targets (and what they need) rather than all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
targets=()
for target in ${BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" ${targets[@]+"${targets[@]}"}
