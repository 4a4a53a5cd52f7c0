#!/usr/bin/env bash
# Tests of symrun, the local launcher. Ranks that join a communicator (symrun_init, --init)
# through symrun's bootstrap root: late, again and again, past the open-file limit, and killed
# after joining.
# How to run it, and the helpers: symrun_test_lib.sh.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016

CASES=(late_join join_again killed_rank_sockets fd_limit)

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

# shellcheck source=symrun_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/symrun_test_lib.sh"
symrun_test_main "$@"
