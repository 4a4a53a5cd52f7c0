#!/usr/bin/env bash
# symcomm-info under symrun in the host memory space:
# - the node map names each node as the communicator grouped it (SYMCOMM_NODE_NAME here);
# - every collective algorithm and selection row says whether it can run in this space, and
#   why not;
# - --json prints one JSON document (rank 0 alone, with --comm) that parses;
# - the network transport's section: libfabric's version, the providers and domains that fit,
#   the one SYMCOMM_NET_PROVIDER and SYMCOMM_NET_DOMAIN select; where libfabric does not load,
#   why, naming the library (and symcomm-info still succeeds);
# - each member's transport to each rank: lsa on its node, net to the other node's ranks; the
#   net transport's lanes to each, with 1 rail each and with 2 against 1.
#
#   symcomm_info_test.sh SYMRUN SYMCOMM_INFO PYTHON3
set -uo pipefail
symrun=$1 info=$2 python=$3
rails_by_rank=$(cd "$(dirname "$0")/../util" && pwd)/rails_by_rank.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYMCOMM_MEMORY_SPACE=host SYMCOMM_NODE_NAME=info-test-node
passed=0 failed=0

# Cases run in a subshell each (see the loop below): fail ends the case.
fail() {
  echo "$*"
  exit 1
}

case_text() {
  "$symrun" -n 2 --timeout 60 "$info" --comm >"$work/text" 2>&1 ||
    fail "exit code $?: $(head -c 300 "$work/text")"
  local r
  for r in 0 1; do
    grep -q "^\[0\]   rank   $r: node 0 (info-test-node) local $r/2, host space" "$work/text" ||
      fail "rank $r's node is not named info-test-node: $(grep 'rank  ' "$work/text")"
    grep -q "^\[0\]   rank   $r: .*, transports lsa to 0-1$" "$work/text" ||
      fail "rank $r's transports: $(grep 'rank  ' "$work/text")"
  done
  # Each algorithm's line says what it runs or why it cannot; sm needs GPUs, copy runs anywhere.
  grep -q '^\[0\]   sm       cannot run here: .*cuda' "$work/text" ||
    fail "sm not marked: $(grep -A3 '^\[0\] Collective algorithms' "$work/text")"
  local every='allgather, alltoall, alltoallv, reducescatter, allreduce, broadcast, reduce, gather, scatter'
  grep -q "^\[0\]   copy     runs $every\$" "$work/text" ||
    fail "copy not marked"
  # Every row of the table is marked, and a row that cannot run says why.
  local rows unmarked
  rows=$(sed -n '/^\[0\] Collective selection table/,/^\[0\] *a call takes/p' "$work/text" | sed '1d;$d')
  [ -n "$rows" ] || fail "no selection table"
  unmarked=$(printf '%s\n' "$rows" | grep -v '^\[0\]   yes  \|^\[0\]   no   .*: cannot run here: .*[^]]$')
  [ -z "$unmarked" ] || fail "rows not marked: $(printf '%s' "$unmarked" | head -c 300)"
  printf '%s\n' "$rows" | grep -q '^\[0\]   no   ' || fail "no row marked as unable to run"
}

case_json() {
  "$info" --json >"$work/static.json" 2>"$work/static.err" || fail "exit code $?"
  "$python" -m json.tool "$work/static.json" >/dev/null ||
    fail "--json: not JSON: $(head -c 300 "$work/static.json")"
  "$symrun" -n 2 --timeout 60 --output "$work/json" "$info" --comm --json >"$work/log" 2>&1 ||
    fail "--comm --json: exit code $?: $(head -c 300 "$work/log")"
  [ ! -s "$work/json/rank.1.out" ] || fail "rank 1 printed: $(head -c 300 "$work/json/rank.1.out")"
  "$python" - "$work/json/rank.0.out" <<'PY' || fail "--comm --json: wrong document"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["communicator"]
assert c["ranks"] == 2 and c["space"] == "host", c
assert [m["node_name"] for m in c["members"]] == ["info-test-node"] * 2, c["members"]
# What each algorithm declares decides what it runs here (the host space, symmetric buffers).
for a in d["collective_algorithms"]:
    decl, ops = a["declares"], a["operations"]
    assert decl["summary"] and decl["operations"] and decl["spaces"], a
    for op, s in ops.items():
        if "host" not in decl["spaces"] or op not in decl["operations"]:
            assert not s["runs"] and s["why_not"], a
        elif decl["across_nodes"]:  # one node here: the node's algorithms run it
            assert not s["runs"] and s["why_not"], a
        elif not decl["library"]:
            assert s["runs"], a
assert any(not s["runs"] for a in d["collective_algorithms"] for s in a["operations"].values())
rows = d["selection_table"]
assert rows and all("runs" in r for r in rows), rows
assert all(r["runs"] or r["why_not"] for r in rows), rows
assert any(p["name"] == "SYMCOMM_NODE_NAME" and p["set"] for p in d["parameters"])
assert all(m["transports"] == ["lsa", "lsa"] for m in c["members"]), c["members"]
assert "reference" in d["fused_implementations"], d["fused_implementations"]
PY
}

case_net() {
  SYMCOMM_NET_PROVIDER=tcp SYMCOMM_NET_DOMAIN=lo "$info" --json >"$work/net.json" 2>"$work/net.err" ||
    fail "exit code $?: $(head -c 300 "$work/net.err")"
  "$python" - "$work/net.json" <<'PY' || fail "--json: wrong net_transport section"
import json, sys
n = json.load(open(sys.argv[1]))["net_transport"]
assert n["libfabric"]["available"] and n["libfabric"]["version"], n["libfabric"]
assert all(c["provider"] and c["domain"] and c["fabric"] for c in n["choices"]), n["choices"]
selected = [c for c in n["choices"] if c["selected"]]
assert len(selected) == 1, n
assert "tcp" in selected[0]["provider"] and selected[0]["domain"] == "lo", selected
PY
  SYMCOMM_NET_PROVIDER=tcp SYMCOMM_NET_DOMAIN=lo "$info" >"$work/net.text" 2>&1 ||
    fail "text: exit code $?"
  grep -q '^  libfabric [0-9][0-9.]*$' "$work/net.text" ||
    fail "no libfabric version: $(grep -A2 '^Network transport' "$work/net.text")"
  grep -q '^  \* provider [^ ]*tcp[^ ]*  *domain lo  *fabric ' "$work/net.text" ||
    fail "tcp on lo not selected: $(grep -A5 '^Network transport' "$work/net.text")"
  # A domain that no provider has: listed, none selected, and why.
  SYMCOMM_NET_DOMAIN=no-such-interface "$info" --json >"$work/none.json" ||
    fail "no-such-interface: exit code $?"
  "$python" - "$work/none.json" <<'PY' || fail "no-such-interface: wrong net_transport section"
import json, sys
n = json.load(open(sys.argv[1]))["net_transport"]
assert not any(c["selected"] for c in n["choices"]), n
assert "no-such-interface" in n["not_selected"], n
assert n["rails"] == [], n["rails"]
PY
  # Rails: each that SYMCOMM_NET_RAILS names, with what opens there or why nothing does.
  SYMCOMM_NET_PROVIDER=tcp SYMCOMM_NET_RAILS=lo,no-such-interface "$info" --json \
    >"$work/rails.json" || fail "rails: exit code $?"
  "$python" - "$work/rails.json" <<'PY' || fail "rails: wrong net_transport section"
import json, sys
r = json.load(open(sys.argv[1]))["net_transport"]["rails"]
assert [x["domain"] for x in r] == ["lo", "no-such-interface"], r
assert "tcp" in r[0]["provider"] and r[0]["fabric"] and "why_not" not in r[0], r
assert "no-such-interface" in r[1]["why_not"] and "provider" not in r[1], r
PY
  SYMCOMM_NET_PROVIDER=tcp SYMCOMM_NET_RAILS=lo,no-such-interface "$info" >"$work/rails.text" ||
    fail "rails text: exit code $?"
  grep -q '^    rail 0  domain lo  provider [^ ]*tcp' "$work/rails.text" &&
    grep -q '^    rail 1  domain no-such-interface  none: ' "$work/rails.text" ||
    fail "rails text: $(grep -A4 'rails (' "$work/rails.text")"
}

case_net_unavailable() {
  local lib=/nonexistent/libfabric.so
  SYMCOMM_FABRIC_LIBRARY=$lib "$info" --json >"$work/nofab.json" 2>"$work/nofab.err" ||
    fail "exit code $?: $(head -c 300 "$work/nofab.err")"
  "$python" - "$work/nofab.json" "$lib" <<'PY' || fail "--json: wrong net_transport section"
import json, sys
n = json.load(open(sys.argv[1]))["net_transport"]
f = n["libfabric"]
assert not f["available"] and sys.argv[2] in f["unavailable"] and "version" not in f, f
assert n["choices"] == [], n
PY
  SYMCOMM_FABRIC_LIBRARY=$lib "$info" >"$work/nofab.text" 2>&1 || fail "text: exit code $?"
  grep -q "^  unavailable: .*$lib" "$work/nofab.text" ||
    fail "no reason: $(grep -A2 '^Network transport' "$work/nofab.text")"
}

# Two nodes on this machine (symrun --nodes): each rank reaches its own by lsa, the other's by
# net (tcp on loopback).
case_nodes() {
  env -u SYMCOMM_NODE_NAME SYMCOMM_NET_PROVIDER=tcp SYMCOMM_NET_DOMAIN=lo \
    "$symrun" -n 2 --nodes 2 --timeout 60 --output "$work/nodes" "$info" --comm --json \
    >"$work/nodes.log" 2>&1 || fail "exit code $?: $(head -c 300 "$work/nodes.log")"
  "$python" - "$work/nodes/rank.0.out" <<'PY' || fail "wrong transports"
import json, sys
c = json.load(open(sys.argv[1]))["communicator"]
assert c["nodes"] == 2, c
assert [m["transports"] for m in c["members"]] == [["lsa", "net"], ["net", "lsa"]], c["members"]
assert [m["reach"] for m in c["members"]] == ["Y.", ".Y"], c["members"]
# One lane each way (one rail each), up, its rate measured by the 8 MiB put.
lanes = {(s["from"], s["to"]): s["lanes"] for s in c["net_lanes"]}
assert sorted(lanes) == [(0, 1), (1, 0)], c["net_lanes"]
for l in lanes.values():
    assert len(l) == 1 and l[0]["up"] and l[0]["bytes_per_second"] > 0, l
PY
  # Rank 0 with 2 rails, rank 1 with 1: 2 lanes each way, from rank 1's one rail to both of
  # rank 0's (rails_by_rank.sh sets each rank's SYMCOMM_NET_RAILS), in the text.
  env -u SYMCOMM_NODE_NAME SYMCOMM_NET_PROVIDER=tcp SYMCOMM_TEST_RAILS_BY_RANK="lo,lo lo" \
    "$symrun" -n 2 --nodes 2 --timeout 60 "$rails_by_rank" "$info" --comm \
    >"$work/lanes.text" 2>&1 || fail "lanes: exit code $?: $(head -c 300 "$work/lanes.text")"
  grep -q '^\[0\]     0 -> 1  :  rail 0->0 up [0-9.]* GB/s  rail 1->0 up [0-9.]* GB/s$' \
    "$work/lanes.text" && grep -q '^\[0\]     1 -> 0  :  rail 0->1 up .*  rail 0->0 up ' \
    "$work/lanes.text" || fail "lanes: $(grep -A3 'Net lanes' "$work/lanes.text")"
}

for name in text json net net_unavailable nodes; do
  if out=$("case_$name" 2>&1); then
    echo "ok - $name"
    passed=$((passed + 1))
  else
    echo "not ok - $name: $(printf '%s' "$out" | tail -n 5)"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
