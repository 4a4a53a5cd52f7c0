#!/usr/bin/env bash
# Tests of symrun, the local launcher.
#
#   symrun_test.sh PATH_TO_SYMRUN [--helper PATH] [--init PATH] [--cases NAME,NAME...]
#
# Runs every case (the default list below, or those named) in its own bash under
# `timeout 60`, prints "ok - NAME" or "not ok - NAME: REASON" per case and then
# "N passed, M failed"; exits non-zero if M > 0. Some cases need --helper (symrun_helper.c:
# how a process ended, blocked signals) or --init (symrun_init.c: a rank that joins a
# communicator).
# The ranks are small bash programs. Each case gets a scratch directory ($TEST_DIR) and a
# unique string ($TEST_MARK) that its ranks carry on their command line ($0 of `bash -c`), so
# that leftover rank processes can be found with pgrep -f.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016
set -u

CASES=(prefix environment master_kept np output failure sigkill keep_going sigterm grace timeout
       stopped_rank usage success)
# Cases that need --helper or --init (each ctest entry names its own; see tools/symrun.cmake).
MORE_CASES=(blocked_signals blocked_sigterm symrun_killed dies_by_signal sigquit
            leftover_background stalled_stdout stalled_output_sigterm late_join join_again
            fd_limit killed_rank_sockets)

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

# Fails unless the lines of "$TEST_DIR/out" tagged "] $1 " are, sorted, the arguments after $1.
expect_lines() {
  local tag=$1 got
  shift
  got=$(grep "\] $tag " "$TEST_DIR/out" | sort)
  [ "$got" = "$(printf '%s\n' "$@")" ] || fail "wrong $tag lines: $(printf '%s' "$got" | tr '\n' '|')"
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
  local rc uids ports
  env -u SYMCOMM_BOOTSTRAP_ADDR -u SYMCOMM_DEVICE -u MASTER_ADDR -u MASTER_PORT \
    NCCL_NVLS_ENABLE=1 NVSHMEM_DISABLE_NVLS=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=0 \
    SYMCOMM_RANK=99 SYMCOMM_NRANKS=99 RANK=99 WORLD_SIZE=99 LOCAL_WORLD_SIZE=99 \
    "$SYMRUN" -n 3 --gpus 4,5 bash -c '
      echo "vars $SYMCOMM_RANK $SYMCOMM_NRANKS $SYMCOMM_LOCAL_RANK $SYMCOMM_LOCAL_SIZE" \
        "${SYMCOMM_DEVICE-unset} $NCCL_NVLS_ENABLE $NVSHMEM_DISABLE_NVLS" \
        "$TORCH_SYMM_MEM_DISABLE_MULTICAST ${SYMCOMM_BOOTSTRAP_ADDR-unset}"
      echo "torch $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR"
      echo "port ${MASTER_PORT-unset}"
      echo "uid ${SYMCOMM_UNIQUE_ID-}"' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  expect_lines vars '[0] vars 0 3 0 3 4 0 1 1 127.0.0.1' '[1] vars 1 3 1 3 5 0 1 1 127.0.0.1' \
    '[2] vars 2 3 2 3 4 0 1 1 127.0.0.1'
  uids=$(sed -n 's/^\[[0-9]*\] uid //p' "$TEST_DIR/out" | sort -u)
  [ "$(grep -c '\] uid ' "$TEST_DIR/out")" -eq 3 ] || fail "expected 3 uid lines"
  [ "$(printf '%s\n' "$uids" | wc -l)" -eq 1 ] || fail "ranks got different unique ids"
  [[ "$uids" =~ ^[0-9a-fA-F]{256}$ ]] || fail "SYMCOMM_UNIQUE_ID is not 256 hex digits: '$uids'"
  # torchrun's names, with the same numbers, and a meeting point for torch.distributed.
  expect_lines torch '[0] torch 0 3 0 3 127.0.0.1' '[1] torch 1 3 1 3 127.0.0.1' \
    '[2] torch 2 3 2 3 127.0.0.1'
  ports=$(sed -n 's/^\[[0-9]*\] port //p' "$TEST_DIR/out" | sort -u)
  [ "$(grep -c '\] port ' "$TEST_DIR/out")" -eq 3 ] || fail "expected 3 port lines"
  if ! [[ "$ports" =~ ^[0-9]+$ ]] || [ "$ports" -lt 1 ] || [ "$ports" -gt 65535 ]; then
    fail "MASTER_PORT is not one port for all ranks: '$ports'"
  fi
}

# MASTER_ADDR and MASTER_PORT that the caller set reach the ranks unchanged.
case_master_kept() {
  local rc
  MASTER_ADDR=10.1.2.3 MASTER_PORT=29555 "$SYMRUN" -n 2 bash -c '
    echo "master $MASTER_ADDR $MASTER_PORT"' "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  [ "$(grep -c '^\[[01]\] master 10.1.2.3 29555$' "$TEST_DIR/out")" -eq 2 ] ||
    fail "the caller's MASTER_ADDR and MASTER_PORT changed: $(head -c 300 "$TEST_DIR/out")"
}

# -np N, as mpirun users type it (and --np N, --np=N).
case_np() {
  local rc args
  for args in "-np 2" "--np 3" "--np=4"; do
    # shellcheck disable=SC2086  # the options are words
    "$SYMRUN" $args sh -c 'echo "size $SYMCOMM_NRANKS"' "$TEST_MARK" >"$TEST_DIR/out" \
      2>"$TEST_DIR/err"
    rc=$?
    expect_rc "$rc" 0 "symrun $args"
    [ "$(grep -c '\] size '"${args: -1}"'$' "$TEST_DIR/out")" -eq "${args: -1}" ] ||
      fail "symrun $args: $(head -c 300 "$TEST_DIR/out")"
  done
}

# --output DIR: each rank's stdout and stderr in files of their own, DIR created; nothing
# relayed. A DIR that cannot be made is an error before any rank starts.
case_output() {
  local rc r
  "$SYMRUN" -n 2 --output "$TEST_DIR/logs/run" bash -c '
    echo "out $SYMCOMM_RANK"; printf "tail"; echo "err $SYMCOMM_RANK" >&2' "$TEST_MARK" \
    >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun --output"
  for r in 0 1; do
    [ "$(cat "$TEST_DIR/logs/run/rank.$r.out")" = "$(printf 'out %s\ntail' "$r")" ] ||
      fail "rank.$r.out: $(head -c 300 "$TEST_DIR/logs/run/rank.$r.out")"
    grep -qx "err $r" "$TEST_DIR/logs/run/rank.$r.err" ||
      fail "rank.$r.err: $(head -c 300 "$TEST_DIR/logs/run/rank.$r.err")"
  done
  ! grep -q '^\[' "$TEST_DIR/out" "$TEST_DIR/err" || fail "output was also relayed"
  touch "$TEST_DIR/file"
  "$SYMRUN" -n 1 --output "$TEST_DIR/file/sub" true >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 1 "symrun --output under a file"
  expect_grep "^symrun: cannot create $TEST_DIR/file/sub" "$TEST_DIR/err"
  "$SYMRUN" --help >"$TEST_DIR/out" 2>&1
  expect_grep '--output DIR' "$TEST_DIR/out"
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

# ------------------------------------------------------------------------------------------
# Cases with symrun_helper (--helper) and symrun_init (--init)
# ------------------------------------------------------------------------------------------

need_helper() { [ -x "${SYMRUN_HELPER:-}" ] || fail "needs --helper PATH (symrun_helper)"; }
need_init() { [ -x "${SYMRUN_INIT:-}" ] || fail "needs --init PATH (symrun_init)"; }

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

# symrun's root waits for each join's first rank without a bound (a program may take longer
# than SYMCOMM_BOOTSTRAP_TIMEOUT before it joins).
case_late_join() {
  local rc
  need_init
  SYMCOMM_BOOTSTRAP_TIMEOUT=3 INIT_SLEEP=5 "$SYMRUN" -n 2 --timeout 40 "$SYMRUN_INIT" \
    >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  [ "$(grep -c '^\[[01]\] joined [01] of 2$' "$TEST_DIR/out")" -eq 2 ] ||
    fail "expected 2 joins: $(head -c 300 "$TEST_DIR/out")"
}

# ... and serves one join after another: init, finalize, init again.
case_join_again() {
  local rc
  need_init
  INIT_TIMES=3 "$SYMRUN" -n 3 --timeout 40 "$SYMRUN_INIT" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun"
  [ "$(grep -c '^\[[0-2]\] joined [0-2] of 3$' "$TEST_DIR/out")" -eq 9 ] ||
    fail "expected 9 joins: $(head -c 300 "$TEST_DIR/out")"
}

# More ranks than the caller's open-file limit allows symrun's pipes and root (3 per rank)
# and rank 0's hub (2 per other rank): both raise their soft limit toward the hard one.
case_fd_limit() {
  local rc n=${FD_LIMIT_RANKS:-80} soft=${FD_LIMIT_SOFT:-100} hard
  need_init
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] || [ "$hard" -ge $((3 * n + 200)) ] || {
    echo "skip: hard limit $hard is too low for this case"
    return 0
  }
  ulimit -Sn "$soft" || fail "cannot lower the soft limit"
  SYMCOMM_BOOTSTRAP_TIMEOUT=10 "$SYMRUN" -n "$n" --timeout 20 "$SYMRUN_INIT" \
    >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun -n $n under ulimit -Sn $soft"
  [ "$(grep -c '\] joined [0-9]* of '"$n"'$' "$TEST_DIR/out")" -eq "$n" ] ||
    fail "expected $n joins: $(grep -v joined "$TEST_DIR/err" | head -c 300)"
}

# A rank killed after joining (no finalize) leaves no socket file: the memory-handle sockets
# are abstract (listed in /proc/net/unix with '@', no path). SYMCOMM_SOCKET_DIR, where
# file-system sockets would go, points into the case's directory, which must stay empty.
case_killed_rank_sockets() {
  local rc left
  need_init
  mkdir "$TEST_DIR/sockets" || fail "mkdir"
  SYMCOMM_SOCKET_DIR="$TEST_DIR/sockets" INIT_KILL_RANK=1 "$SYMRUN" -n 2 --timeout 40 \
    "$SYMRUN_INIT" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  [ "$rc" -ne 0 ] || fail "symrun succeeded although rank 1 was killed"
  expect_grep '^\[1\] joined 1 of 2$' "$TEST_DIR/out"
  grep -q '^\[1\] abstract sockets [1-9]' "$TEST_DIR/out" ||
    fail "no abstract socket while the ranks ran: $(head -c 300 "$TEST_DIR/out")"
  left=$(find "$TEST_DIR/sockets" -mindepth 1 | head -n 5)
  [ -z "$left" ] || fail "left behind: $left"
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

absolute() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$PWD/$1" ;;
  esac
}

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
    --cases)
      if [ "$2" = all ]; then
        CASES+=("${MORE_CASES[@]}")
      else
        IFS=, read -r -a CASES <<<"$2"
      fi
      ;;
    *)
      echo "unknown option $1" >&2
      exit 2
      ;;
  esac
  shift 2
done
export SYMRUN_HELPER SYMRUN_INIT
run_all
