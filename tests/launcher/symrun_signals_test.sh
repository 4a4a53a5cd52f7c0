#!/usr/bin/env bash
# Tests of symrun, the local launcher. Signals to symrun: forwarded to the ranks, the grace
# period before SIGKILL, signals blocked by the caller, symrun killed, symrun dying by the
# signal that stopped it.
# How to run it, and the helpers: symrun_test_lib.sh.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016

CASES=(sigterm grace blocked_signals blocked_sigterm symrun_killed dies_by_signal sigquit)

# Like start_background, but symrun runs under `symrun_helper run`, which writes how symrun
# ended to "$TEST_DIR/symrun.status" (and lets it handle SIGINT and SIGQUIT, which a shell's
# background commands ignore). Sets SYMRUN_PID (symrun) and HELPER_PID.
start_background_helper() {
  local program=$1
  shift
  need_helper
  "$SYMRUN_HELPER" run "$TEST_DIR/symrun" "$SYMRUN" -n 3 "$@" bash -c "$program" \
    "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err" &
  HELPER_PID=$!
  if ! wait_for_files "$TEST_DIR"/ready.{0,1,2} "$TEST_DIR/symrun.pid"; then
    kill -KILL "$(cat "$TEST_DIR/symrun.pid" 2>/dev/null)" 2>/dev/null
    fail "ranks did not start: $(head -c 300 "$TEST_DIR/err")"
  fi
  SYMRUN_PID=$(cat "$TEST_DIR/symrun.pid")
}

# Waits for the helper started by start_background_helper; fails unless symrun ended as $1
# says ("exited N" or "signaled S").
expect_status() {
  local want=$1 got
  wait "$HELPER_PID"
  got=$(head -n 1 "$TEST_DIR/symrun.status")
  [ "$got" = "$want" ] || fail "symrun ended as '$got', expected '$want' (stderr: $(head -c 300 "$TEST_DIR/err"))"
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

# Callers may start symrun with signals blocked (Python's subprocess after
# pthread_sigmask, some daemons): symrun must still see its ranks end, and each rank gets
# the caller's mask back.
case_blocked_signals() {
  local rc start elapsed blocked masks mask
  need_helper
  blocked="$(kill -l CHLD),$(kill -l TERM),$(kill -l INT),$(kill -l HUP)"
  start=$(now_ms)
  timeout -k 1 20 "$SYMRUN_HELPER" block "$blocked" "$SYMRUN" -n 2 --timeout 15 \
    grep SigBlk /proc/self/status >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  elapsed=$(($(now_ms) - start))
  expect_rc "$rc" 0 "symrun with SIGCHLD blocked"
  [ "$elapsed" -lt 8000 ] || fail "took $elapsed ms"
  # SIGHUP, SIGINT, SIGTERM and SIGCHLD are bits 0, 1, 14 and 16 (0x14003).
  masks=$(sed -n 's/^\[[01]\] SigBlk:[[:space:]]*\([0-9a-f]*\)$/\1/p' "$TEST_DIR/out")
  [ "$(printf '%s\n' "$masks" | grep -c .)" -eq 2 ] || fail "no masks: $(head -c 300 "$TEST_DIR/out")"
  for mask in $masks; do
    [ $((16#$mask & 16#14003)) -eq $((16#14003)) ] ||
      fail "the ranks did not get the caller's signal mask back: $(head -c 300 "$TEST_DIR/out")"
  done
}

case_blocked_sigterm() {
  local rc i
  need_helper
  "$SYMRUN_HELPER" block "$(kill -l TERM),$(kill -l CHLD)" "$SYMRUN" -n 3 --grace 1 bash -c '
    echo $$ >"$TEST_DIR/pid.$SYMCOMM_RANK"
    touch "$TEST_DIR/ready.$SYMCOMM_RANK"
    exec sleep 100' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err" &
  SYMRUN_PID=$!
  wait_for_files "$TEST_DIR"/ready.{0,1,2} || fail "ranks did not start: $(head -c 300 "$TEST_DIR/err")"
  kill -TERM "$SYMRUN_PID" || fail "cannot signal symrun"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$SYMRUN_PID" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$SYMRUN_PID" 2>/dev/null && fail "symrun still runs 5 s after SIGTERM (blocked on entry)"
  wait "$SYMRUN_PID"
  rc=$?
  expect_rc "$rc" 143 "symrun"
  check_no_leftovers
}

# symrun killed by SIGKILL (or dying of a signal it does not handle) takes its ranks along.
case_symrun_killed() {
  start_background '
    echo $$ >"$TEST_DIR/pid.$SYMCOMM_RANK"
    touch "$TEST_DIR/ready.$SYMCOMM_RANK"
    exec sleep 100'
  kill -KILL "$SYMRUN_PID" || fail "cannot kill symrun"
  wait "$SYMRUN_PID"
  check_no_leftovers
}

# symrun forwards the signal, then dies by it (a calling script stops at Ctrl-C).
case_dies_by_signal() {
  local sig
  for sig in INT TERM USR1; do
    rm -f "$TEST_DIR"/ready.* "$TEST_DIR"/pid.* "$TEST_DIR"/symrun.*
    start_background_helper '
      echo $$ >"$TEST_DIR/pid.$SYMCOMM_RANK"
      touch "$TEST_DIR/ready.$SYMCOMM_RANK"
      exec sleep 100' --grace 2
    kill -"$sig" "$SYMRUN_PID" || fail "cannot signal symrun"
    expect_status "signaled $(kill -l "$sig")"
    check_no_leftovers
  done
}

case_sigquit() {
  local r
  start_background_helper '
    trap "touch \"$TEST_DIR/quit.$SYMCOMM_RANK\"; exit 0" QUIT
    sleep 100 &
    echo $! >"$TEST_DIR/pid.$SYMCOMM_RANK"
    touch "$TEST_DIR/ready.$SYMCOMM_RANK"
    wait' --grace 1
  kill -QUIT "$SYMRUN_PID" || fail "cannot signal symrun"
  expect_status "signaled $(kill -l QUIT)"
  for r in 0 1 2; do
    [ -e "$TEST_DIR/quit.$r" ] || fail "rank $r did not receive SIGQUIT"
  done
  check_no_leftovers
}

# shellcheck source=symrun_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/symrun_test_lib.sh"
symrun_test_main "$@"
