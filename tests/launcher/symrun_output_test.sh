#!/usr/bin/env bash
# Tests of symrun, the local launcher. The ranks' output: relayed with a rank prefix, every line
# complete and in order; a stdout or stderr that nobody reads; a rank's background child that
# holds its output open.
# How to run it, and the helpers: symrun_test_lib.sh.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016

CASES=(prefix success stalled_stdout stalled_output_sigterm leftover_background)

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

# symrun's stdout is a pipe that nobody reads: symrun must still stop the ranks at --timeout
# (and exit soon after, dropping what it cannot write) rather than block in write().
case_stalled_stdout() {
  local rc start elapsed
  mkfifo "$TEST_DIR/fifo" || fail "mkfifo"
  exec 3<>"$TEST_DIR/fifo"  # holds the pipe open without reading it
  start=$(now_ms)
  timeout -s KILL 20 "$SYMRUN" -n 2 --timeout 2 --grace 1 bash -c '
    seq 1 10000000
    sleep 100' "$TEST_MARK" >"$TEST_DIR/fifo" 2>"$TEST_DIR/err" 3>&-
  rc=$?
  elapsed=$(($(now_ms) - start))
  expect_rc "$rc" 124 "symrun"
  [ "$elapsed" -lt 12000 ] || fail "took $elapsed ms"
  expect_grep '^symrun: timeout after 2 s, stopping 2 rank(s)$' "$TEST_DIR/err"
  expect_grep 'not read' "$TEST_DIR/err"
  check_no_leftovers
}

# ... and stdout and stderr both unread: signals still work.
case_stalled_output_sigterm() {
  local rc start elapsed i
  mkfifo "$TEST_DIR/fifo" || fail "mkfifo"
  exec 3<>"$TEST_DIR/fifo"
  "$SYMRUN" -n 3 --grace 1 bash -c '
    touch "$TEST_DIR/ready.$SYMCOMM_RANK"
    seq 1 10000000 >&2
    seq 1 10000000
    sleep 100' "$TEST_MARK" >"$TEST_DIR/fifo" 2>&1 3>&- &
  SYMRUN_PID=$!
  wait_for_files "$TEST_DIR"/ready.{0,1,2} || fail "ranks did not start"
  sleep 0.5  # the pipe and symrun's queue fill up
  start=$(now_ms)
  kill -TERM "$SYMRUN_PID" || fail "cannot signal symrun"
  for ((i = 0; i < 200; i++)); do
    kill -0 "$SYMRUN_PID" 2>/dev/null || break
    sleep 0.05
  done
  elapsed=$(($(now_ms) - start))
  if kill -0 "$SYMRUN_PID" 2>/dev/null; then
    kill -KILL "$SYMRUN_PID"
    fail "symrun still runs $elapsed ms after SIGTERM with its output unread"
  fi
  wait "$SYMRUN_PID"
  rc=$?
  expect_rc "$rc" 143 "symrun"
  check_no_leftovers
}

# Ranks that exit while a background child of theirs holds their output: symrun waits the
# grace period without spinning (even past --timeout), then stops that child.
case_leftover_background() {
  local start elapsed cpu
  need_helper
  start=$(now_ms)
  "$SYMRUN_HELPER" run "$TEST_DIR/symrun" "$SYMRUN" -n 2 --timeout 2 --grace 4 bash -c '
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    echo started' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  elapsed=$(($(now_ms) - start))
  [ "$(head -n 1 "$TEST_DIR/symrun.status")" = "exited 0" ] ||
    fail "symrun ended as '$(head -n 1 "$TEST_DIR/symrun.status")', expected 'exited 0' (stderr: $(head -c 300 "$TEST_DIR/err"))"
  [ "$elapsed" -lt 12000 ] || fail "took $elapsed ms"
  [ "$(grep -c '^\[[01]\] started$' "$TEST_DIR/out")" -eq 2 ] ||
    fail "the ranks' output is missing: $(head -c 300 "$TEST_DIR/out")"
  cpu=$(sed -n 's/^cpu_ms //p' "$TEST_DIR/symrun.status")
  [ "$cpu" -lt 300 ] || fail "symrun used $cpu ms of CPU while waiting (busy loop)"
  expect_grep 'still hold their output open' "$TEST_DIR/err"
  check_no_leftovers
}

# shellcheck source=symrun_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/symrun_test_lib.sh"
symrun_test_main "$@"
