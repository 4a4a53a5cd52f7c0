#!/usr/bin/env bash
# Tests of symrun, the local launcher. The environment symrun gives its ranks: its own
# variables, torchrun's, the devices of --gpus, one unique id, a meeting point for
# torch.distributed, and the caller's MASTER_ADDR and MASTER_PORT kept.
# How to run it, and the helpers: symrun_test_lib.sh.
#
# The ranks' programs are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016

CASES=(environment master_kept)

# Fails unless the lines of "$TEST_DIR/out" tagged "] $1 " are, sorted, the arguments after $1.
expect_lines() {
  local tag=$1 got
  shift
  got=$(grep "\] $tag " "$TEST_DIR/out" | sort)
  [ "$got" = "$(printf '%s\n' "$@")" ] || fail "wrong $tag lines: $(printf '%s' "$got" | tr '\n' '|')"
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

# shellcheck source=symrun_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/symrun_test_lib.sh"
symrun_test_main "$@"
