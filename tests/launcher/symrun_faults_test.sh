#!/usr/bin/env bash
# Tests of symrun, the local launcher. Ranks that fail: one exits with an error or is killed
# (the others are stopped, or with --keep-going run on), the run outlasts --timeout, a rank
# stays stopped.
# How to run it, and the helpers: symrun_test_lib.sh.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016

CASES=(failure sigkill keep_going timeout stopped_rank)

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

# Without --timeout, a rank that stays stopped once the others have ended is killed after
# SYMCOMM_PEER_TIMEOUT (not before), named on stderr, and symrun exits 137.
case_stopped_rank() {
  local rc start elapsed
  start=$(now_ms)
  SYMCOMM_PEER_TIMEOUT=2 timeout 40 "$SYMRUN" -n 3 bash -c '
    if [ "$SYMCOMM_RANK" = 1 ]; then echo $$ >"$TEST_DIR/pid.1"; kill -STOP $$; fi
    echo done' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  elapsed=$(($(now_ms) - start))
  expect_rc "$rc" 137 "symrun with a stopped rank"
  [ "$elapsed" -ge 2000 ] || fail "the stopped rank was killed after $elapsed ms, within 2 s"
  expect_grep '^symrun: rank 1 is stopped (SIGSTOP) and the other ranks have ended: killing it after 2 s (SYMCOMM_PEER_TIMEOUT)$' \
    "$TEST_DIR/err"
  [ "$(grep -c '^\[[02]\] done$' "$TEST_DIR/out")" -eq 2 ] ||
    fail "the other ranks did not finish: $(head -c 300 "$TEST_DIR/out")"
  check_no_leftovers
}

# shellcheck source=symrun_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/symrun_test_lib.sh"
symrun_test_main "$@"
