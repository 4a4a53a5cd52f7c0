#!/usr/bin/env bash
# Tests of symrun, the local launcher. symrun's command line: usage errors (exit code 2, a
# reason and the usage), a program that cannot be executed, -np as mpirun users type it,
# --output DIR and --netns LIST.
# How to run it, and the helpers: symrun_test_lib.sh.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016

CASES=(usage np nodes output netns)

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
  expect_usage_error -n 4 --nodes 3 true
  expect_usage_error -n 4 --nodes 0 true
  expect_usage_error -n 4 --ranks-per-node 3 true
  expect_usage_error -n 4 --nodes 2 --ranks-per-node 2 true
  "$SYMRUN" --help >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 0 "symrun --help"
  expect_grep 'for several machines use mpirun or srun' "$TEST_DIR/out"
  "$SYMRUN" -n 1 /nonexistent/prog >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 127 "symrun -n 1 /nonexistent/prog"
  expect_grep 'cannot execute /nonexistent/prog' "$TEST_DIR/err"
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

# --nodes K / --ranks-per-node R: nodes of consecutive ranks, each rank told its node's name,
# its local rank and the node's size (symcomm's and torchrun's variables alike).
case_nodes() {
  local rc args r line
  for args in "--nodes 2" "--ranks-per-node 2" "--nodes=2"; do
    # shellcheck disable=SC2086  # the options are words
    "$SYMRUN" -n 4 $args sh -c \
      'echo "node $SYMCOMM_NODE_NAME $SYMCOMM_LOCAL_RANK $SYMCOMM_LOCAL_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE"' \
      "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
    rc=$?
    expect_rc "$rc" 0 "symrun -n 4 $args"
    for r in 0 1 2 3; do
      line="[$r] node symrun-node$((r / 2)) $((r % 2)) 2 $((r % 2)) 2"
      grep -qxF "$line" "$TEST_DIR/out" || fail "symrun -n 4 $args: no '$line' in $(head -c 300 "$TEST_DIR/out")"
    done
  done
  # Without them the caller's node name is left alone.
  SYMCOMM_NODE_NAME=mine "$SYMRUN" -n 2 sh -c 'echo "node $SYMCOMM_NODE_NAME $SYMCOMM_LOCAL_SIZE"' \
    "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  expect_rc "$?" 0 "symrun -n 2 with SYMCOMM_NODE_NAME set"
  [ "$(grep -c '\] node mine 2$' "$TEST_DIR/out")" -eq 2 ] || fail "node name: $(head -c 300 "$TEST_DIR/out")"
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

# --netns LIST: one namespace a node, node i's ranks in LIST[i]. Usage errors always; a
# namespace that does not exist fails before any rank starts; where this user can make
# namespaces (root), each rank is checked to run in its node's, and the namespaces made here
# are deleted by name.
case_netns() {
  local rc r a b
  expect_usage_error -n 2 --netns a,b true
  expect_usage_error -n 4 --nodes 2 --netns a true
  expect_usage_error -n 4 --nodes 2 --netns a,,b true
  expect_usage_error -n 2 --nodes 2 --netns a,../b true
  "$SYMRUN" -n 2 --nodes 2 --netns "symcomm-none-$$,symcomm-none-$$" true \
    >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  expect_rc "$rc" 1 "symrun --netns of a namespace that does not exist"
  expect_grep "cannot open network namespace symcomm-none-$$" "$TEST_DIR/err"
  if ! a=$(ip netns add "symcomm-args-a-$$" 2>&1 && echo made); then
    echo "note: --netns not run into namespaces: cannot make one here ($a)"
    return 0
  fi
  a="symcomm-args-a-$$" b="symcomm-args-b-$$"
  if ! ip netns add "$b"; then
    ip netns delete "$a"
    fail "made namespace $a but not $b"
  fi
  "$SYMRUN" -n 4 --nodes 2 --netns "$a,$b" sh -c 'echo "ns $(readlink /proc/self/ns/net)"' \
    "$TEST_MARK" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
  rc=$?
  local want_a want_b
  want_a=$(ip netns exec "$a" readlink /proc/self/ns/net)
  want_b=$(ip netns exec "$b" readlink /proc/self/ns/net)
  ip netns delete "$a"
  ip netns delete "$b"
  expect_rc "$rc" 0 "symrun --netns"
  for r in 0 1 2 3; do
    local want=$want_a
    [ "$r" -ge 2 ] && want=$want_b
    grep -qxF "[$r] ns $want" "$TEST_DIR/out" || fail "rank $r not in its namespace ($want): $(head -c 300 "$TEST_DIR/out")"
  done
}

# shellcheck source=symrun_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/symrun_test_lib.sh"
symrun_test_main "$@"
