// The "direct" algorithm: all-to-all, all-gather and broadcast into a receive buffer the peers
// address in place (symmetric, or registered with symcommRegister), as one launch on GPUs:
// a team barrier, SM stores of this rank's blocks straight into every member's receive
// buffer through the peer mapping, and a closing barrier (RmaBackend::copy_boxes_between_
// barriers: each block of the copy kernel waits for its own member's arrival only, the last
// block closes the barrier). No channels, no staging and no copy out on the receiving side:
// every byte crosses NVLink once, as a posted store. Where the sizes or addresses are not
// 4-byte multiples, the same barriers surround copy-engine puts instead (the copy kernels
// move elements of 4, 8 or 16 bytes). In the host space the barriers and memcpy copies run
// apart, so CI tests the same arithmetic.
//
// Not for reductions, all-to-all-v, or receive buffers the peers cannot address (its
// descriptor says so; the selection then falls through to the registry's next algorithm).
#include <cstdint>
#include <vector>

#include "coll/coll.h"

namespace symcomm {

namespace {

constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"direct", "SM stores into the peers' receive buffers"};
  d.ops = op_bit(CollOp::AllToAll) | op_bit(CollOp::AllGather) | op_bit(CollOp::Broadcast);
  d.spaces = kCudaSpace | kHostSpace;
  d.in_place_recv = true;
  return d;
}();

class DirectAlgorithm final : public CollAlgorithm {
 public:
  DirectAlgorithm() : CollAlgorithm(kDescriptor) {}

  void run(const CollArgs& a, CollContext& ctx) override {
    const size_t block = a.count * a.elem;  // bytes of one member's block
    if (block == 0) return;
    const int n = a.team.size;
    std::vector<BoxCopy> copies;
    struct Move {
      char* dst;
      const char* src;  // `block` bytes
      int peer;         // the world rank whose memory dst is (-1: this rank's)
    };
    std::vector<Move> moves;
    auto to = [&](int j, char* mine) {  // member j's copy of `mine` (this rank's address)
      return Move{j == a.me ? mine : ctx.on(a, mine, j), nullptr,
                  j == a.me ? -1 : a.team.world_of(j)};
    };
    if (a.op == CollOp::Broadcast) {
      if (a.me == a.root)
        for (int s = 1; s <= n; ++s) {
          Move m = to((a.me + s) % n, a.recv);
          m.src = a.send;
          if (m.dst != m.src) moves.push_back(m);
        }
    } else {
      // Members in turn from the next one, so that no member gets every sender's first
      // bytes at once; this rank's own block (a local copy; none for an all-gather in place).
      const bool to_all = a.op == CollOp::AllToAll;
      const size_t mine = static_cast<size_t>(a.me) * block;
      for (int s = 1; s <= n; ++s) {
        const int j = (a.me + s) % n;
        Move m = to(j, a.recv + mine);
        m.src = a.send + (to_all ? static_cast<size_t>(j) * block : 0);
        if (m.dst != m.src) moves.push_back(m);
      }
    }
    const size_t elem = width(a, ctx, block);
    const BarrierArgs barrier = ctx.rma().barrier_args(a.team_id);
    if (elem < 4) {  // the copy kernels take 4-, 8- or 16-byte elements
      ctx.backend().barrier(barrier, a.stream);
      for (const Move& m : moves) ctx.backend().put(m.dst, m.src, block, symcommEngineCe, a.stream);
      ctx.backend().barrier(barrier, a.stream);
      return;
    }
    // Rows of kLinearRow whatever the size: the table's direct rows (4 MiB and up) were
    // measured so. Shorter rows for shorter runs (linear_row) made direct 28-35% faster at
    // 256 KiB and 1 MiB but 11-12% slower at 4 MiB and 4-6% at 16 MiB on 4 x H200: more
    // blocks, each ending with a system fence (bench/results/h200x4/rows_ab_1d8eb4f.txt).
    for (const Move& m : moves)
      append_linear_copy(copies, m.dst, m.src, static_cast<int64_t>(block / elem), elem, m.peer,
                         kLinearRow);
    ctx.backend().copy_boxes_between_barriers(barrier, copies, elem, a.stream);
  }

 private:
  // The widest element (16, 8 or 4 bytes; else 1) that divides the block and every address
  // this rank copies from and to: the send buffer, and the receive buffer, which starts at
  // the same address modulo that width on every member.
  static size_t width(const CollArgs& a, const CollContext& ctx, size_t block) {
    const uintptr_t bits = block | reinterpret_cast<uintptr_t>(a.send) |
                           reinterpret_cast<uintptr_t>(a.recv);
    for (size_t w : {size_t{16}, size_t{8}, size_t{4}})
      if (bits % w == 0 && ctx.aligned_alike(a.recv, w)) return w;
    return 1;
  }
};

const Registered<CollAlgorithm, DirectAlgorithm> kRegistered(60);

}  // namespace

}  // namespace symcomm
