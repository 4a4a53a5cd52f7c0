// What a call of the twoshot collectives is on one rank (twoshot.cu has the protocol): the
// Plan that travels by value into the kernel, a rank's area, the segments, rounds and
// slices of a call. Host code (the Plan is the kernel's too); the host emulation
// (tests/unit/twoshot_emulator.h) makes its plans with these same functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "coll/coll.h"
#include "symcomm/device_comm.h"

namespace symcomm {
namespace twoshot {

constexpr int kMaxTeam = 32;
constexpr int kThreads = 512;
static_assert(kThreads >= kMaxTeam, "exchange(): thread m signals and waits for member m");
constexpr int kMaxBlocks = 128;
constexpr uint64_t kMinSlice = 8 << 10;  // bytes of a segment's round per block, at least
constexpr int kBatch = 8;                // contributions loaded before they are combined

enum Flag { kReady = 0, kDone = 1, kSeq = 2 };

// What one call does, by value into the kernel (graph capture keeps it).
struct Plan {
  DeviceComm comm;  // the world view: error record, abort flag, bound
  int n, me;
  bool all;         // all-reduce (two shots), else reduce-scatter or reduce
  int root;         // reduce: the member that gets the whole result (-1: not a reduce)
  bool in_staged, out_staged;
  bool recv_vec;     // this rank's result may be stored in 16-byte vectors
  symcommRedOp_t op;
  int world[kMaxTeam];
  const char* send;  // this rank's
  char* recv;
  char* stage_in;    // this rank's areas
  char* stage_out;
  uint64_t* flags;   // this rank's [3][kMaxBlocks][nranks]
  uint64_t seg;      // segment stride: segment s starts at s * seg of send (and of recv,
                     // all-reduce)
  uint64_t len[kMaxTeam];  // segment lengths
  uint64_t span;     // S: bytes per segment and round
  uint64_t slice;    // sl: bytes per block of a segment's round
  uint64_t rounds;
  const char* in_base[kMaxTeam];  // member m's send, or its stage_in, as mapped here
  char* out_base[kMaxTeam];       // member m's recv, or its stage_out (all-reduce)
  uint64_t* flags_on[kMaxTeam];   // member m's flags, as mapped here
};

// 16-byte vectors reach every segment of `p` in place (checked on this rank; the caller
// makes sure every member's copy of p is aligned alike, so that all decide the same).
inline bool aligned(const void* p, uint64_t seg) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && seg % 16 == 0;
}

// The shape of a call (host code): the segments, whether each side is staged, the rounds
// and the blocks' slices, in `p` (whose n, all, send and recv are set); returns the number
// of blocks. `send_direct` / `recv_direct`: the members reach that buffer of every member
// in place, aligned alike; `stage`: bytes of each stage area.
inline uint64_t shape_call(Plan& p, uint64_t count, uint64_t elem, uint64_t block,
                           bool send_direct, bool recv_direct, uint64_t stage,
                           uint64_t max_blocks) {
  const int n = p.n;
  uint64_t longest = 0;
  const bool whole = p.all || p.root >= 0;  // segments of one buffer, not blocks of send
  if (whole) {
    const uint64_t per = (count + n - 1) / n * elem;
    p.seg = (per + 15) / 16 * 16;
    for (int j = 0; j < n; ++j) {
      const uint64_t lo = std::min<uint64_t>(block, j * p.seg);
      p.len[j] = std::min<uint64_t>(block, lo + p.seg) - lo;
    }
    longest = p.len[0];
  } else {
    p.seg = block;
    for (int j = 0; j < n; ++j) p.len[j] = block;
    longest = block;
  }
  // A reduce's input is staged, always: a root in place passes its recv, which need not be
  // the object the others pass as send (a symmetric recv at the root, plain sends
  // elsewhere), so the members could not decide alike.
  p.in_staged = p.root >= 0 || !(send_direct && aligned(p.send, p.seg));
  // A reduce's results go into the root's stage_out: only the root knows its recv.
  p.out_staged = p.root >= 0 || (p.all && !(recv_direct && aligned(p.recv, p.seg)));
  const bool staged = p.in_staged || p.out_staged;
  p.recv_vec = aligned(p.recv, whole ? p.seg : 16);
  p.span = staged ? stage / static_cast<uint64_t>(n) / 16 * 16 : (longest + 15) / 16 * 16;
  p.rounds = (longest + p.span - 1) / p.span;
  const uint64_t round = std::min(p.span, (longest + 15) / 16 * 16);
  const uint64_t blocks = std::min<uint64_t>(max_blocks, (round + kMinSlice - 1) / kMinSlice);
  p.slice = ((round + blocks - 1) / blocks + 15) / 16 * 16;
  return blocks;
}

// A rank's area: the flags ([3][kMaxBlocks][nranks] words), then stage_in and stage_out.
inline size_t flags_bytes(int nranks) {
  return size_t{3} * kMaxBlocks * static_cast<size_t>(nranks) * sizeof(uint64_t);
}

// The plan of the call `a` (a team of 2 or more, block > 0) on this rank: the world's view,
// this rank's `area` (flags_bytes, then stage_in and stage_out of `stage` bytes each), the
// team, the shape (shape_call, with `send_direct`, `recv_direct` and `max_blocks`), and
// every member's input, output and flags as mapped here: on(q, j) is this rank's address q
// (in its area, or a buffer of the call) on member j, as CollContext::on. Returns the number
// of blocks.
template <typename On>
uint64_t make_plan(Plan& p, const CollArgs& a, const DeviceComm& world, char* area,
                   uint64_t stage, bool send_direct, bool recv_direct, uint64_t max_blocks,
                   On on) {
  const int n = a.team.size;
  const bool all = a.op == CollOp::AllReduce;
  const uint64_t block = a.count * a.elem;  // all-reduce, reduce: the buffer; else a segment
  p.comm = world;
  p.n = n;
  p.me = a.me;
  p.all = all;
  p.root = a.op == CollOp::Reduce ? a.root : -1;
  p.op = a.redop;
  p.send = a.send;
  p.recv = a.recv;
  p.flags = reinterpret_cast<uint64_t*>(area);
  p.stage_in = area + flags_bytes(world.nranks);
  p.stage_out = p.stage_in + stage;
  for (int j = 0; j < n; ++j) p.world[j] = a.team.world_of(j);
  const uint64_t blocks =
      shape_call(p, a.count, a.elem, block, send_direct, recv_direct, stage, max_blocks);
  for (int j = 0; j < n; ++j) {
    p.in_base[j] = p.in_staged ? on(p.stage_in, j) : on(a.send, j);
    p.out_base[j] = p.out_staged ? on(p.stage_out, j) : (all ? on(a.recv, j) : nullptr);
    p.flags_on[j] = reinterpret_cast<uint64_t*>(on(p.flags, j));
  }
  return blocks;
}

}  // namespace twoshot
}  // namespace symcomm
