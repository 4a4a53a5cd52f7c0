#!/usr/bin/env bash
# Tests of symrun, the local launcher.
#
#   symrun_test.sh PATH_TO_SYMRUN
#
# Runs every case in its own bash under `timeout 60`, prints "ok - NAME" or
# "not ok - NAME: REASON" per case and then "N passed, M failed"; exits non-zero if M > 0.
# The ranks are small bash programs. Each case gets a scratch directory ($TEST_DIR) and a
# unique string ($TEST_MARK) that its ranks carry on their command line ($0 of `bash -c`), so
# that leftover rank processes can be found with pgrep -f.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016
set -u

CASES=(prefix environment failure sigkill keep_going sigterm grace timeout usage success)

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

# ------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------

case_prefix() {
  local rc
  "$SYMRUN" -n 3 sh -c 'echo hello $SYMCOMM_RANK; echo oops $SYMCOMM_RANK >&2' "$TEST_MARK" \
    >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  [ "$(sort "$TEST_DIR/out")" = "$(printf '[0] hello 0\n[1] hello 1\n[2] hello 2')" ] ||
    fail "stdout is not the three prefixed lines: $(head -c 300 "$TEST_DIR/out")"
  # The library may add diagnostics of its own to stderr: look only at the ranks' lines.
  [ "$(grep '^\[' "$TEST_DIR/err" | sort)" = "$(printf '[0] oops 0\n[1] oops 1\n[2] oops 2')" ] ||
    fail "stderr does not hold the three prefixed lines: $(head -c 300 "$TEST_DIR/err")"
}

case_environment() {
  local rc uids
  env -u SYMCOMM_BOOTSTRAP_ADDR -u SYMCOMM_DEVICE NCCL_NVLS_ENABLE=1 NVSHMEM_DISABLE_NVLS=0 \
    TORCH_SYMM_MEM_DISABLE_MULTICAST=0 SYMCOMM_RANK=99 SYMCOMM_NRANKS=99 \
    "$SYMRUN" -n 3 --gpus 4,5 bash -c '
      echo "vars $SYMCOMM_RANK $SYMCOMM_NRANKS $SYMCOMM_LOCAL_RANK $SYMCOMM_LOCAL_SIZE" \
        "${SYMCOMM_DEVICE-unset} $NCCL_NVLS_ENABLE $NVSHMEM_DISABLE_NVLS" \
        "$TORCH_SYMM_MEM_DISABLE_MULTICAST ${SYMCOMM_BOOTSTRAP_ADDR-unset}"
      echo "uid ${SYMCOMM_UNIQUE_ID-}"' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  local want
  want=$(printf '%s\n' '[0] vars 0 3 0 3 4 0 1 1 127.0.0.1' '[1] vars 1 3 1 3 5 0 1 1 127.0.0.1' \
    '[2] vars 2 3 2 3 4 0 1 1 127.0.0.1')
  [ "$(grep '\] vars ' "$TEST_DIR/out" | sort)" = "$want" ] ||
    fail "wrong variables: $(grep '\] vars ' "$TEST_DIR/out" | sort | tr '\n' '|')"
  uids=$(sed -n 's/^\[[0-9]*\] uid //p' "$TEST_DIR/out" | sort -u)
  [ "$(grep -c '\] uid ' "$TEST_DIR/out")" -eq 3 ] || fail "expected 3 uid lines"
  [ "$(printf '%s\n' "$uids" | wc -l)" -eq 1 ] || fail "ranks got different unique ids"
  [[ "$uids" =~ ^[0-9a-fA-F]{256}$ ]] || fail "SYMCOMM_UNIQUE_ID is not 256 hex digits: '$uids'"
}

case_failure() {
  local rc start elapsed
  start=$(now_ms)
  "$SYMRUN" -n 3 bash -c '
    if [ "$SYMCOMM_RANK" = 1 ]; then exit 3; fi
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    wait' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  elapsed=$(($(now_ms) - start))
  expect_rc "$rc" 3 "symrun"
  [ "$elapsed" -lt 10000 ] || fail "took $elapsed ms"
  expect_grep '^symrun: rank 1 exited with code 3$' "$TEST_DIR/err"
  check_no_leftovers
}

case_sigkill() {
  local rc
  "$SYMRUN" -n 2 bash -c '
    if [ "$SYMCOMM_RANK" = 1 ]; then kill -KILL $$; fi
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    wait' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 137 "symrun"
  expect_grep '^symrun: rank 1 was killed by signal 9 (SIGKILL)$' "$TEST_DIR/err"
  check_no_leftovers
}

case_keep_going() {
  local rc
  "$SYMRUN" -n 2 --keep-going bash -c '
    if [ "$SYMCOMM_RANK" = 0 ]; then exit 5; fi
    sleep 1
    touch "$TEST_DIR/done"' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 5 "symrun"
  [ -e "$TEST_DIR/done" ] || fail "rank 1 did not run to the end"
  expect_grep '^symrun: rank 0 exited with code 5$' "$TEST_DIR/err"
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

case_sigterm() {
  local rc r
  start_background '
    trap "touch \"$TEST_DIR/term.$SYMCOMM_RANK\"; exit 0" TERM
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    touch "$TEST_DIR/ready.$SYMCOMM_RANK"
    wait'
  kill -TERM "$SYMRUN_PID" || fail "cannot signal symrun"
  wait "$SYMRUN_PID"
  rc=$?
  expect_rc "$rc" 143 "symrun"
  for r in 0 1 2; do
    [ -e "$TEST_DIR/term.$r" ] || fail "rank $r did not receive SIGTERM"
  done
  check_no_leftovers
}

case_grace() {
  local rc start elapsed
  start_background '
    trap "" TERM
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    touch "$TEST_DIR/ready.$SYMCOMM_RANK"
    wait' --grace 1
  start=$(now_ms)
  kill -TERM "$SYMRUN_PID" || fail "cannot signal symrun"
  wait "$SYMRUN_PID"
  rc=$?
  elapsed=$(($(now_ms) - start))
  expect_rc "$rc" 143 "symrun"
  [ "$elapsed" -lt 10000 ] || fail "took $elapsed ms"
  [ "$elapsed" -ge 900 ] || fail "ranks were killed after $elapsed ms, before the grace period"
  check_no_leftovers
}

case_timeout() {
  local rc start elapsed
  start=$(now_ms)
  "$SYMRUN" -n 2 --timeout 1 bash -c '
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    wait' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  elapsed=$(($(now_ms) - start))
  expect_rc "$rc" 124 "symrun"
  [ "$elapsed" -lt 10000 ] || fail "took $elapsed ms"
  expect_grep '^symrun: timeout after 1 s, stopping 2 rank(s)$' "$TEST_DIR/err"
  check_no_leftovers
}

# Runs symrun with the arguments and expects a usage error: exit code 2, a reason and usage.
expect_usage_error() {
  local rc
  "$SYMRUN" "$@" >"$TEST_DIR/out" 2>"$TEST_DIR/err" </dev/null
  rc=$?
  expect_rc "$rc" 2 "symrun $*"
  [ "$(head -n 1 "$TEST_DIR/err")" != "" ] || fail "symrun $*: no reason on stderr"
  grep -q '^usage: symrun' "$TEST_DIR/err" || fail "symrun $*: no usage on stderr"
  [ ! -s "$TEST_DIR/out" ] || fail "symrun $*: wrote to stdout"
}

case_usage() {
  local rc
  expect_usage_error
  expect_usage_error -n 0 true
  expect_usage_error -n abc true
  expect_usage_error -n -1 true
  expect_usage_error -n 1025 true
  expect_usage_error -n 2
  expect_usage_error -n 2 --
  expect_usage_error -n 2 --gpus x true
  expect_usage_error -n 2 --gpus 1,,2 true
  expect_usage_error -n 2 --bogus true
  expect_usage_error -n 2 --timeout soon true
  "$SYMRUN" --help >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun --help"
  expect_grep 'for several nodes use mpirun or srun' "$TEST_DIR/out"
  "$SYMRUN" -n 1 /nonexistent/prog >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 127 "symrun -n 1 /nonexistent/prog"
  expect_grep 'cannot execute /nonexistent/prog' "$TEST_DIR/err"
}

case_success() {
  local rc
  "$SYMRUN" -n 4 bash -c '
    seq 1 20000
    seq 1 500 >&2
    printf "tail-%s" "$SYMCOMM_RANK"' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  # Every rank's lines complete and in order, and the unterminated last line flushed.
  awk '
    match($0, /^\[[0-9]+\] /) {
      r = substr($0, 2, RLENGTH - 3); v = substr($0, RLENGTH + 1)
      if (v == "tail-" r) { tail[r]++; next }
      if (v != n[r] + 1) { print "rank " r ": line \"" v "\" after " n[r] + 0; bad = 1; exit }
      n[r]++; next
    }
    { print "line without prefix: " $0; bad = 1; exit }
    END {
      if (bad) exit 1
      for (r = 0; r < 4; r++)
        if (n[r] != 20000 || tail[r] != 1) {
          print "rank " r ": " n[r] + 0 " lines and " tail[r] + 0 " tails"; exit 1
        }
    }' "$TEST_DIR/out" >"$TEST_DIR/check" || fail "stdout: $(cat "$TEST_DIR/check")"
  [ "$(grep -c '^\[[0-3]\] [0-9]*$' "$TEST_DIR/err")" -eq 2000 ] ||
    fail "expected 2000 prefixed lines on stderr, got $(grep -c '^\[' "$TEST_DIR/err")"
}

# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------

run_all() {
  local script name dir mark f rc reason passed=0 failed=0
  script=$(readlink -f "${BASH_SOURCE[0]}")
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

if [ "$#" -lt 1 ]; then
  echo "usage: $0 PATH_TO_SYMRUN" >&2
  exit 2
fi
SYMRUN=$1
case "$SYMRUN" in
  /*) ;;
  *) SYMRUN=$PWD/$SYMRUN ;;
esac

if [ "${2:-}" = "--case" ]; then
  export TEST_DIR TEST_MARK
  "case_$3"
  exit 0
fi
run_all
