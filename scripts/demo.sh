#!/usr/bin/env bash
# Command 1 of the README: installs what is missing, builds what the demo needs (symrun and
# symcomm-demo, not the tests), and runs it (scripts/run-demo.sh: a rank per GPU, or 4 ranks
# in the host memory space). NRANKS overrides the count; arguments go to symcomm-demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_TARGETS="symrun symcomm-demo" scripts/build.sh
exec scripts/run-demo.sh "$@"
