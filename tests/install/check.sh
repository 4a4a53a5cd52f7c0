#!/usr/bin/env bash
# Installs the build in $1 into a scratch prefix, then, without LD_LIBRARY_PATH: builds and
# runs a consumer through find_package(symcomm CONFIG) and another through pkg-config, and
# runs the installed programs (symcomm-info, symrun, and the demo where installed). Then moves
# the prefix elsewhere and does it all again there: the installation is relocatable.
set -euo pipefail
build=$1; src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
unset LD_LIBRARY_PATH
export SYMCOMM_BOOTSTRAP_ADDR=127.0.0.1 SYMCOMM_MEMORY_SPACE=host
cmake --install "$build" --prefix "$work/prefix" >/dev/null

# Checks the installation at $1; $2 names the step in messages and scratch paths.
check_prefix() {
  local prefix=$1 step=$2 out
  out="$work/$step"
  mkdir -p "$out"
  cmake -S "$src" -B "$out/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$out/build" >/dev/null
  "$out/build/consumer_cmake"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  # shellcheck disable=SC2046  # pkg-config's flags are words
  cc "$src/consumer.c" $(pkg-config --cflags --libs symcomm) \
    -Wl,-rpath,"$(pkg-config --variable=libdir symcomm)" -o "$out/consumer_pc"
  "$out/consumer_pc"
  test -f "$prefix/include/symcomm/symcomm_mpi.h"
  "$prefix/bin/symcomm-info" >"$out/info" 2>&1 ||
    { echo "$step: installed symcomm-info failed: $(head -c 300 "$out/info")"; return 1; }
  if [ -x "$prefix/bin/symrun" ]; then
    "$prefix/bin/symrun" -n 2 --timeout 60 "$prefix/bin/symcomm-info" --comm >"$out/comm" 2>&1 ||
      { echo "$step: installed symrun failed: $(head -c 300 "$out/comm")"; return 1; }
    grep -q '^\[0\] Communicator: 2 rank(s)' "$out/comm" ||
      { echo "$step: no communicator in: $(head -c 300 "$out/comm")"; return 1; }
  fi
  if [ -x "$prefix/bin/symcomm-demo" ] && [ -x "$prefix/bin/symrun" ]; then
    "$prefix/bin/symrun" -n 2 --timeout 60 "$prefix/bin/symcomm-demo" --mib-per-peer 1 \
      >"$out/demo" 2>&1 ||
      { echo "$step: installed symcomm-demo failed: $(head -c 300 "$out/demo")"; return 1; }
  fi
  echo "install: $step ok"
}

check_prefix "$work/prefix" installed
mv "$work/prefix" "$work/moved"
check_prefix "$work/moved" moved
echo "install: 2 passed, 0 failed"
