#!/usr/bin/env bash
# The test suite under load: runs scripts/test.sh ROUNDS times in a row (3 by default) with
# every core of the machine kept busy beside it (one busy loop per core, at the same
# priority as the tests), as on a shared CI machine; stops at the first round that fails.
# A test whose outcome depends on how fast it is scheduled shows up here.
#   tests/stress.sh [ROUNDS] [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
[ $# -gt 0 ] && shift
burners=()
stop_burners() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null || true; }
trap stop_burners EXIT
for _ in $(seq "$(nproc)"); do
  (while :; do :; done) &
  burners+=($!)
done
for round in $(seq "$rounds"); do
  echo "stress: round $round of $rounds, with $(nproc) busy loops beside the suite"
  start=$SECONDS
  if ! scripts/test.sh "$@"; then
    echo "stress: round $round FAILED after $((SECONDS - start)) s" >&2
    exit 1
  fi
  echo "stress: round $round passed in $((SECONDS - start)) s"
done
echo "stress: $rounds rounds passed"
