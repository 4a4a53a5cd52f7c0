#!/usr/bin/env bash
# Installs the build in $1 into a scratch prefix, then builds and runs a consumer through
# find_package(symcomm CONFIG) and another through pkg-config.
set -euo pipefail
build=$1; src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export SYMCOMM_BOOTSTRAP_ADDR=127.0.0.1 LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer_cmake"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cc "$src/consumer.c" $(pkg-config --cflags --libs symcomm) -o "$work/consumer_pc"
"$work/consumer_pc"
test -x "$work/prefix/bin/symrun" && test -x "$work/prefix/bin/symcomm-info"
test -f "$work/prefix/include/symcomm/symcomm_mpi.h"
echo "install: 2 passed, 0 failed"
