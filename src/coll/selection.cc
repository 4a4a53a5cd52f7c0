#include "coll/selection.h"

#include "base/error.h"

namespace symcomm {

const std::vector<SelectionRow>& selection_table() {
  // Rows from bench/selection_rows.py --margin 0.05 (another algorithm displaces sm only
  // where it is more than 5% faster), then merged by hand across runs:
  // - reductions from the later runs (which have twoshot), on symmetric buffers and on plain
  //   ones (twoshot stages plain buffers, which costs it up to 0.8x NCCL at 64 MiB: its rows
  //   past 4 MiB are for symmetric buffers only; sm, ll and nccl take the same time on both);
  // - all-to-all past 256 MiB and all-gather past 64 MiB sent per rank (the table counts an
  //   all-gather's send size, the bench its receive size: n times more) from ce's run with its
  //   copies to peers one after another: 1.06-1.13x NCCL at 512 MiB and 1 GiB (bench size)
  //   where sm is 0.96-1.04x; below, sm ties (all-to-all, 256 MiB) or wins (all-gather, 32
  //   MiB sent: by 14%). On symmetric buffers only: ce
  //   stages other buffers in pieces, which copy engines move badly;
  // - the rest, and larger reductions, from the earlier run, except a row that gave 128-byte
  //   all-to-alls to NCCL: sm and NCCL were within 6% of each other there, either way, in
  //   the runs at 7e0eada and 040f7b6 (auto through that row: 0.91-0.95x NCCL).
  // - reduce-scatter of 512 MiB per rank (input) on symmetric buffers: twoshot, 1.03x NCCL
  //   in three runs where the sm row gave 0.97x; at 1 GiB twoshot and NCCL tie (NCCL kept);
  // - reduce-scatter of 512 KiB per rank (input): sm, as on either side of it. Its NCCL row
  //   (sm 0.94x there before kernels moved to PDL launches) went once sm tied or beat NCCL:
  //   1.004x in coll_b14453f, 1.22x eager and 1.10x in CUDA graphs in coll_eager_feff727
  //   and coll_graph_feff727 (twoshot 1.14x in graphs; 0.97-1.02x of sm eagerly);
  // - all-to-all from 4 MiB to 256 MiB per rank and all-gather from 1 MiB to 64 MiB sent, on
  //   symmetric buffers: direct (one launch of SM stores straight into the members' receive
  //   buffers), 1.00-1.32x sm and 1.09-1.92x NCCL there; below, sm's 7 us floor beats its
  //   8.5; above, ce (by 1-5%). Extrapolated to teams of 8 (direct's one launch holds 16
  //   copies: 8 members).
  // Measured on 4 x H200 (8 were not lent), so they bound teams of at most 4. Larger teams
  // get the rows marked "extrapolated": the 4-rank choice for large all-to-all and all-gather
  // (a copy engine's rate per GPU does not depend on the number of peers:
  // tools/probe/ce_a2a.cu) and for reductions, whose twoshot traffic per rank does not grow
  // with the team (ll's one shot does: its bounds are halved); broadcasts to 16 MiB into
  // symmetric buffers go to relay (kRelayGuess below); larger broadcasts and
  // reduce-scatters go to NCCL as on 4 ranks, where sm was 0.43-0.70x NCCL past its rows
  // (sm's broadcast bound is halved: the root sends 7 copies instead of 3). A call whose row
  // names an algorithm that cannot run it (no NCCL, an alignment, the host space) takes the
  // next matching row's; everything else falls through to the registry order ("sm" on
  // GPUs, "copy" in the host space, where direct's rows take symmetric all-to-alls and
  // all-gathers).
  static const char* const kRun4 =
      "bench/results/h200x4/coll_a45e7a6.jsonl (2026-11-21, commit a45e7a6)";
  static const char* const kSym4 =
      "bench/results/h200x4/coll_fa9542c_reductions.jsonl (2026-11-21, commit fa9542c, symmetric)";
  static const char* const kPlain4 =
      "bench/results/h200x4/coll_plain_ccbbbf9.jsonl (2026-11-21, commit ccbbbf9, plain)";
  static const char* const kCe4 =
      "bench/results/h200x4/coll_7e0eada.jsonl (2026-11-21, commit 7e0eada, ce with its copies "
      "to peers one after another, symmetric)";
  static const char* const kDirect4 =
      "bench/results/h200x4/coll_direct_00ef8b0.jsonl (2026-11-21, commit 00ef8b0, direct, "
      "symmetric)";
  static const char* const kRs4 =
      "bench/results/h200x4/coll_fa9542c_reductions.jsonl (2026-11-21, commit fa9542c, "
      "symmetric); to 512 MiB: coll_040f7b6, coll_7e0eada and coll_497fdd2.jsonl, twoshot "
      "1245-1249 us, NCCL 1280-1304, sm 1320-1360";
  // Broadcasts to 512 KiB on 4 ranks: sm (its row ended at 128 KiB while sm took 12.7-13.7
  // us at 512 KiB; since d52510d it takes 9.3): 7.0 us against NCCL's 10.7 at 256 KiB, and
  // 0.98-1.20x NCCL at 512 KiB in five runs, eager and in graphs; at 1 MiB NCCL is 7-9%
  // faster and keeps its row. Measured on symmetric buffers only: plain ones keep the
  // 128 KiB bound (sm stages them through its workspace).
  static const char* const kBcast4 =
      "bench/results/h200x4/coll_{eager,graph}_655bab1.jsonl (2026-11-21, commit 655bab1); "
      "coll_{eager,graph}_feff727.jsonl, coll_bcast_relay_d52510d.jsonl";
  // Broadcasts of 1-2 MiB on 4 ranks into symmetric buffers: relay, with lanes of 8 KiB
  // where pieces are at most 1 MiB (since f5a72dc): 18.5-18.8 us at 2 MiB against NCCL's
  // 19.5-19.7, 1.05-1.06x in three runs (3 ranks: 1.15x); at 1 MiB NCCL keeps its row
  // (relay 14.0-14.2 us, NCCL 12.3-12.6), and from 4 MiB (relay 0.94x).
  static const char* const kRelay4 =
      "bench/results/h200x4/relay_lane_bytes_f5a72dc.jsonl (2026-11-22, commit f5a72dc, 8 KiB "
      "lanes, symmetric)";
  static const char* const kGuess = "extrapolated from the 4-rank rows";
  // relay's traffic per rank does not grow with the team (the root sends L, every other
  // member receives L) and its pipeline is two hops deep at any size; on 4 x H200 it took
  // 26-65 us for 4-16 MiB (0.97-0.99x NCCL there; bench/results/h200x4/relay_lanes_cc707f7.jsonl),
  // where NCCL's ring on 8 x H200 takes 57 us for 1 MB and 94 us for 16 MB
  // (../shared/HARDWARE.md). Larger sizes stay with NCCL (relay 0.90-0.94x on 4 ranks).
  static const char* const kRelayGuess =
      "extrapolated: relay's 4-rank times against NCCL's 8-GPU broadcast in HARDWARE.md";
  // Below that, sm, as on 4 ranks to half its bound there (its root stores 7 copies, not 3):
  // relay's call waits for a ready round trip from its members, 11.8-12.8 us on 4 ranks to
  // 512 KiB where sm takes 6.1-9.3 (bench/results/h200x4/bcast_2aab046_run*.jsonl,
  // relay_floor_f5a72dc.txt); sm's time grows by some 2.9 us per MiB the root stores, 7 per
  // MiB broadcast on 8 ranks, so it should still lead at 256 KiB (about 8.6 us).
  static const char* const kSmGuess =
      "extrapolated: sm's and relay's 4-rank times (bcast_2aab046_run*.jsonl), sm's bound halved";
  // Teams of 2 (2 x H200, after the own part's copy moved to 64 KiB blocks): ll's packets
  // take 4-4.7 us where sm takes 5.9-6.3 for every moving collective up to 128 KiB (64 KiB
  // for broadcast), sm's one kernel beats NCCL and twoshot on reductions of 128-512 KiB (and
  // reduce-scatters to 2 MiB), broadcast is sm's to 128 MiB (1.02-1.9x NCCL; the 4-rank
  // rows give it to NCCL), and twoshot keeps large reductions on symmetric buffers (1.08-1.5x
  // NCCL, where the 4-rank rows fall to NCCL past 32 MiB); plain buffers past 16 MiB: sm.
  // The rest follows the 4-rank rows, which the same runs bear out for 2 ranks. No rows for
  // all-to-all-v: its size (what this rank sends) differs between members, so a row would
  // give them different algorithms (a teams-of-2 ll row did: AllToAllvRandomCounts/auto
  // hung on 2 x H200); it takes the registry's order, the same on every member.
  static const char* const kSym2 =
      "bench/results/h200x2/coll_n2_sym_674f46b.jsonl (2026-11-21, commit 674f46b, symmetric)";
  static const char* const kPlain2 =
      "bench/results/h200x2/coll_n2_plain_674f46b.jsonl (2026-11-21, commit 674f46b, plain)";
  constexpr Buffers kSym = Buffers::Symmetric;
  static const std::vector<SelectionRow> table = {
      {CollOp::AllGather, 2, 65536, "ll", kSym2},
      {CollOp::AllGather, 2, 1048576, "sm", kSym2},
      {CollOp::AllGather, 4, 524288, "sm", kRun4},
      {CollOp::AllGather, 4, 67108864, "direct", kDirect4, kSym},
      {CollOp::AllGather, 4, 67108864, "sm", kRun4},
      {CollOp::AllGather, 4, 0, "ce", kCe4, kSym},
      {CollOp::AllGather, 4, 0, "sm", kRun4},
      {CollOp::AllGather, 8, 524288, "sm", kGuess},
      {CollOp::AllGather, 8, 67108864, "direct", kGuess, kSym},
      {CollOp::AllGather, 0, 67108864, "sm", kGuess},
      {CollOp::AllGather, 0, 0, "ce", kGuess, kSym},
      {CollOp::AllReduce, 2, 65536, "ll", kSym2},
      {CollOp::AllReduce, 2, 524288, "sm", kSym2},
      {CollOp::AllReduce, 2, 0, "twoshot", kSym2, kSym},
      {CollOp::AllReduce, 2, 16777216, "twoshot", kPlain2},
      {CollOp::AllReduce, 2, 0, "sm", kPlain2},
      {CollOp::AllReduce, 4, 65536, "ll", kSym4},
      {CollOp::AllReduce, 4, 33554432, "twoshot", kSym4, kSym},
      {CollOp::AllReduce, 4, 262144, "sm", kPlain4},
      {CollOp::AllReduce, 4, 4194304, "twoshot", kPlain4},
      {CollOp::AllReduce, 4, 0, "nccl", kRun4},
      {CollOp::AllReduce, 0, 32768, "ll", kGuess},
      {CollOp::AllReduce, 0, 33554432, "twoshot", kGuess, kSym},
      {CollOp::AllReduce, 0, 4194304, "twoshot", kGuess},
      {CollOp::AllReduce, 0, 0, "nccl", kGuess},
      {CollOp::AllToAll, 2, 131072, "ll", kSym2},
      {CollOp::AllToAll, 4, 2097152, "sm", kRun4},
      {CollOp::AllToAll, 4, 268435456, "direct", kDirect4, kSym},
      {CollOp::AllToAll, 4, 268435456, "sm", kRun4},
      {CollOp::AllToAll, 4, 0, "ce", kCe4, kSym},
      {CollOp::AllToAll, 4, 0, "sm", kRun4},
      {CollOp::AllToAll, 8, 2097152, "sm", kGuess},
      {CollOp::AllToAll, 8, 268435456, "direct", kGuess, kSym},
      {CollOp::AllToAll, 0, 268435456, "sm", kGuess},
      {CollOp::AllToAll, 0, 0, "ce", kGuess, kSym},
      {CollOp::Broadcast, 2, 65536, "ll", kSym2},
      {CollOp::Broadcast, 2, 134217728, "sm", kSym2},
      {CollOp::Broadcast, 2, 0, "ce", kSym2, kSym},
      {CollOp::Broadcast, 2, 0, "nccl", kPlain2},
      {CollOp::Broadcast, 4, 524288, "sm", kBcast4, kSym},
      {CollOp::Broadcast, 4, 131072, "sm", kRun4},
      {CollOp::Broadcast, 4, 1048576, "nccl", kRun4},
      {CollOp::Broadcast, 4, 2097152, "relay", kRelay4, kSym},
      {CollOp::Broadcast, 4, 0, "nccl", kRun4},
      {CollOp::Broadcast, 0, 65536, "sm", kGuess},
      {CollOp::Broadcast, 0, 262144, "sm", kSmGuess, kSym},
      {CollOp::Broadcast, 0, 16777216, "relay", kRelayGuess, kSym},
      {CollOp::Broadcast, 0, 0, "nccl", kGuess},
      {CollOp::ReduceScatter, 2, 131072, "ll", kSym2},
      {CollOp::ReduceScatter, 2, 2097152, "sm", kSym2},
      {CollOp::ReduceScatter, 2, 0, "twoshot", kSym2, kSym},
      {CollOp::ReduceScatter, 2, 16777216, "twoshot", kPlain2},
      {CollOp::ReduceScatter, 2, 0, "sm", kPlain2},
      {CollOp::ReduceScatter, 4, 262144, "ll", kSym4},
      {CollOp::ReduceScatter, 4, 1048576, "sm", kSym4},
      {CollOp::ReduceScatter, 4, 536870912, "twoshot", kRs4, kSym},
      {CollOp::ReduceScatter, 4, 536870912, "sm", kRun4},
      {CollOp::ReduceScatter, 4, 0, "nccl", kRun4},
      {CollOp::ReduceScatter, 0, 131072, "ll", kGuess},
      {CollOp::ReduceScatter, 0, 536870912, "twoshot", kGuess, kSym},
      {CollOp::ReduceScatter, 0, 536870912, "sm", kGuess},
      {CollOp::ReduceScatter, 0, 0, "nccl", kGuess},
  };
  return table;
}

bool row_matches(const SelectionRow& row, CollOp op, int team_size, size_t bytes,
                 bool symmetric) {
  return row.op == op && (row.buffers != Buffers::Symmetric || symmetric) &&
         (row.max_team <= 0 || team_size <= row.max_team) &&
         (row.max_bytes == 0 || bytes <= row.max_bytes);
}

std::string selection_text() {
  std::string out;
  for (const SelectionRow& row : selection_table()) {
    out += format("%s, teams %s, %s%s: %s (%s)\n", coll_op_name(row.op),
                  row.max_team ? format("<= %d", row.max_team).c_str() : "of any size",
                  row.max_bytes ? ("<= " + format_bytes(row.max_bytes)).c_str() : "any size",
                  row.buffers == Buffers::Symmetric ? ", symmetric buffers" : "",
                  row.algorithm, row.source);
  }
  out += "a call takes the first matching row whose algorithm can run it; otherwise the first "
         "registered algorithm that can\n";
  return out;
}

}  // namespace symcomm
