#!/usr/bin/env bash
# Runs COMMAND with SYMCOMM_NET_RAILS set by the rank symrun gave this process: the i-th
# space-separated list of SYMCOMM_TEST_RAILS_BY_RANK for rank i (the last list for the ranks
# after), so that ranks open different rail counts (the net transport's lanes between them).
#   SYMCOMM_TEST_RAILS_BY_RANK="lo,lo lo,lo,lo" symrun -n 2 --nodes 2 rails_by_rank.sh mp_rma
set -euo pipefail
read -r -a lists <<< "${SYMCOMM_TEST_RAILS_BY_RANK:?lists the rails of each rank}"
rank=${SYMCOMM_RANK:?run under symrun}
[ "$rank" -lt "${#lists[@]}" ] || rank=$((${#lists[@]} - 1))
export SYMCOMM_NET_RAILS=${lists[$rank]}
exec "$@"
