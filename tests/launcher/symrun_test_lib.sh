# What the tests of symrun, the local launcher, share: sourced by each
# tests/launcher/symrun_<concern>_test.sh, which defines CASES (its case names) and a function
# case_NAME per case, then sources this file and calls symrun_test_main "$@". Each script runs as
#
#   symrun_<concern>_test.sh PATH_TO_SYMRUN [--helper PATH] [--init PATH] [--cases NAME,NAME...]
#
# and runs every case of its CASES (or those named) in its own bash under `timeout 60`,
# printing "ok - NAME" or "not ok - NAME: REASON" per case and then "N passed, M failed"; it
# exits non-zero if M > 0. Some cases need --helper (symrun_helper.c: how a process ended,
# blocked signals) or --init (symrun_init.c: a rank that joins a communicator).
# The ranks are small bash programs. Each case gets a scratch directory ($TEST_DIR) and a
# unique string ($TEST_MARK) that its ranks carry on their command line ($0 of `bash -c`), so
# that leftover rank processes can be found with pgrep -f.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck shell=bash disable=SC2016
set -u

# ------------------------------------------------------------------------------------------
# Helpers for the cases (each runs in the case's own bash process)
# ------------------------------------------------------------------------------------------

fail() {
  echo "$*"
  exit 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Waits up to 10 s for the files named by the arguments.
wait_for_files() {
  local i f missing
  for ((i = 0; i < 200; i++)); do
    missing=0
    for f in "$@"; do
      [ -e "$f" ] || missing=1
    done
    [ "$missing" -eq 0 ] && return 0
    sleep 0.05
  done
  return 1
}

# Fails if a process still carries the case's marker, or if a PID recorded in one of the
# files "$TEST_DIR"/pid.* (the ranks' background sleeps, which do not carry it) still runs.
# Zombies count as gone: orphans wait for init, which may reap them late (or, in some
# containers, never). Killing takes a moment, hence the retries.
check_no_leftovers() {
  local i f pid state alive
  for ((i = 0; i < 60; i++)); do
    alive=""
    if pgrep -f "$TEST_MARK" >/dev/null; then
      alive="marked processes: $(pgrep -f "$TEST_MARK" | tr '\n' ' ')"
    fi
    for f in "$TEST_DIR"/pid.*; do
      [ -e "$f" ] || continue
      pid=$(cat "$f")
      [ -n "$pid" ] || continue
      state=$(ps -o stat= -p "$pid" 2>/dev/null)
      if [ -n "$state" ] && [ "${state:0:1}" != "Z" ]; then
        alive="$alive sleep $pid ($state)"
      fi
    done
    [ -z "$alive" ] && return 0
    sleep 0.05
  done
  fail "rank processes left after symrun ended: $alive"
}

expect_rc() {
  local got=$1 want=$2 what=$3
  [ "$got" -eq "$want" ] ||
    fail "$what: exit code $got, expected $want (stderr: $(head -c 300 "$TEST_DIR/err"))"
}

expect_grep() {
  local pattern=$1 file=$2
  grep -q -- "$pattern" "$file" ||
    fail "no line matching '$pattern' in $(basename "$file"): $(head -c 300 "$file")"
}

# Starts symrun in the background with 3 ranks running the bash program $1 (which must touch
# "$TEST_DIR/ready.$SYMCOMM_RANK" once set up) and extra symrun options $2..., and waits until
# every rank is ready. Sets SYMRUN_PID.
start_background() {
  local program=$1
  shift
  "$SYMRUN" -n 3 "$@" bash -c "$program" "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err" &
  SYMRUN_PID=$!
  if ! wait_for_files "$TEST_DIR"/ready.{0,1,2}; then
    kill -KILL "$SYMRUN_PID" 2>/dev/null
    fail "ranks did not start: $(head -c 300 "$TEST_DIR/err")"
  fi
}

need_helper() { [ -x "${SYMRUN_HELPER:-}" ] || fail "needs --helper PATH (symrun_helper)"; }
need_init() { [ -x "${SYMRUN_INIT:-}" ] || fail "needs --init PATH (symrun_init)"; }

# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------

run_all() {
  local script name dir mark f rc reason passed=0 failed=0
  script=$(readlink -f "$0")
  TMP_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/symrun_test.XXXXXX") || exit 1
  trap 'rm -rf "$TMP_ROOT"' EXIT
  if [ ! -x "$SYMRUN" ]; then
    echo "not ok - setup: $SYMRUN is not an executable file"
    echo "0 passed, 1 failed"
    exit 1
  fi
  for name in "${CASES[@]}"; do
    dir="$TMP_ROOT/$name"
    mkdir -p "$dir"
    # The marker goes through the environment: on the case's command line pgrep would find it.
    mark="symrun_test_marker_$$_${RANDOM}_$name"
    TEST_DIR=$dir TEST_MARK=$mark timeout 60 bash "$script" "$SYMRUN" --case "$name" \
      >"$dir/log" 2>&1
    rc=$?
    # Ranks left behind by a failed or timed-out case (they carry the case's unique marker),
    # and their background sleeps.
    pkill -KILL -f "$mark" 2>/dev/null
    if [ "$rc" -ne 0 ]; then
      for f in "$dir"/pid.*; do
        [ -e "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
      done
    fi
    if [ "$rc" -eq 0 ]; then
      echo "ok - $name"
      passed=$((passed + 1))
      continue
    fi
    if [ "$rc" -eq 124 ]; then
      reason="timed out after 60 s"
    else
      reason=$(tail -n 1 "$dir/log")
      [ -n "$reason" ] || reason="exit code $rc"
    fi
    echo "not ok - $name: $reason"
    failed=$((failed + 1))
  done
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

absolute() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$PWD/$1" ;;
  esac
}

# The command line of a symrun_<concern>_test.sh: runs its cases, or (--case NAME, as
# run_all re-runs the script) the one case in this process.
symrun_test_main() {
  if [ "$#" -lt 1 ]; then
    echo "usage: $0 PATH_TO_SYMRUN [--helper PATH] [--init PATH] [--cases NAME,NAME...]" >&2
    exit 2
  fi
  SYMRUN=$(absolute "$1")
  shift

  if [ "${1:-}" = "--case" ]; then
    export TEST_DIR TEST_MARK
    "case_$2"
    exit 0
  fi
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --helper) SYMRUN_HELPER=$(absolute "$2") ;;
      --init) SYMRUN_INIT=$(absolute "$2") ;;
      --cases) IFS=, read -r -a CASES <<<"$2" ;;
      *)
        echo "unknown option $1" >&2
        exit 2
        ;;
    esac
    shift 2
  done
  export SYMRUN_HELPER SYMRUN_INIT
  run_all
}
