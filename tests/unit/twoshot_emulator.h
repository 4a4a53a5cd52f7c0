// The machinery of the twoshot emulation (twoshot_emulation.cc has the overview): the
// Emulator (the ranks' areas as TwoshotState lays them out, the library's plans, kernels
// run as threads) and batches of calls run together, then checked against the reference
// (twoshot_reference.h).
#pragma once

#include "emulation/harness.h"  // first: what the protocol headers expect of CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "coll/device/counters.h"
#include "coll/twoshot/plan.h"
#include "coll/twoshot/shots.cuh"
#include "copy/reduce.h"
#include "twoshot_reference.h"

namespace symcomm::twoshot::test {

using emulation::Memory;

inline constexpr char kPoison = static_cast<char>(0xAB);  // where nothing may be written

// `nranks` ranks' areas (as TwoshotState lays them out: ready, done and seq flags, stage_in,
// stage_out), and kernels run as threads.
class Emulator {
 public:
  struct Launch {
    Plan plan;
    int blocks = 0;  // 0: run() launches nothing
    void (*kernel)(Plan) = nullptr;
  };

  // `threads` per block (at least the team size, as kThreads is); `stage_bytes` and
  // `max_blocks`: SYMCOMM_COLL_TWOSHOT_BYTES and SYMCOMM_COLL_TWOSHOT_BLOCKS.
  Emulator(int nranks, int threads, uint64_t stage_bytes, int max_blocks)
      : threads_(threads), stage_(stage_bytes / 256 * 256), max_blocks_(max_blocks),
        devices_(nranks, flags_bytes(nranks) + 2 * stage_, flags_bytes(nranks)) {}
  int size() const { return devices_.size(); }

  // The launch of team member a.me, as TwoshotAlgorithm::run makes it (make_plan):
  // `send_addr` and `recv_addr` stand for CollContext::addressable, sends[j] and recvs[j]
  // for on(a, ., j).
  Launch launch(const CollArgs& a, bool send_addr, bool recv_addr,
                const std::vector<const char*>& sends, const std::vector<char*>& recvs) {
    Launch l;
    if (a.count * a.elem == 0) return l;
    const int rank = a.team.world_of(a.me);
    // As run(): in place only where every member's buffer is reachable and aligned alike
    // (every member's pointer the same modulo 16, as CollContext::aligned_alike says of
    // symmetric and registered buffers).
    auto alike = [&](const auto& ptrs) {
      for (const auto* q : ptrs)
        if (reinterpret_cast<uintptr_t>(q) % 16 != reinterpret_cast<uintptr_t>(ptrs[0]) % 16)
          return false;
      return true;
    };
    auto on = [&](const void* q, int j) -> char* {
      if (q == a.send) return const_cast<char*>(sends[static_cast<size_t>(j)]);
      if (q == a.recv) return recvs[static_cast<size_t>(j)];
      return devices_.on(rank, q, a.team.world_of(j));
    };
    const uint64_t blocks = make_plan(l.plan, a, devices_.world(rank), devices_.area(rank),
                                      stage_, send_addr && alike(sends),
                                      recv_addr && alike(recvs),
                                      static_cast<uint64_t>(max_blocks_), on);
    l.blocks = static_cast<int>(blocks);
    with_type(a.type, [&](auto zero) { l.kernel = &twoshot_kernel<decltype(zero)>; });
    return l;
  }

  // One kernel: l.blocks blocks of threads_ threads.
  void run_kernel(const Launch& l) {
    emulation::run_grid(l.blocks, threads_, [&] { l.kernel(l.plan); });
  }
  // Each rank's kernels in order on its own stream, the ranks at once.
  void run(const std::vector<std::vector<Launch>>& streams) {
    emulation::run_streams(streams, [this](const Launch& l) { run_kernel(l); });
  }

  emulation::Devices& devices() { return devices_; }
  // Block b's word of `kind` (kReady, kDone: written by `peer`; kSeq: rounds done with it).
  uint64_t* word(int rank, Flag kind, int block, int peer) {
    auto* words = reinterpret_cast<uint64_t*>(devices_.area(rank));
    return protocol::counter_word<kMaxBlocks>(words, kind, block, size(), peer);
  }

 private:
  int threads_;
  uint64_t stage_;
  int max_blocks_;
  emulation::Devices devices_;
};

// --- Calls ---------------------------------------------------------------------------------

// One collective over a team: how its buffers are placed, and every member's buffers.
struct Call {
  CollOp op = CollOp::AllReduce;
  int root = 0;  // a reduce's (a team rank): the others pass NULL for recv
  Team team;
  symcommDataType_t type = symcommInt32;
  symcommRedOp_t redop = symcommSum;
  size_t count = 0;
  bool in_place = false;
  // Alike on every member, as the API asks of symmetric and registered buffers: whether
  // peers may address the buffer, and its offset from a 16-byte boundary.
  bool send_addr = true, recv_addr = true;
  size_t send_off = 0, recv_off = 0;
  // A reduce in place whose root passes an addressable buffer (its symmetric recv) while the
  // others' sends are plain: the members' buffers are not one object, so they must not
  // decide differently (Coll.ReduceGatherScatter's in-place reduce on GPUs).
  bool root_addr_differs = false;
  // Registered buffers may start at different addresses modulo 16 on different ranks: the
  // offsets then apply to the odd members only.
  bool odd_members_only = false;

  std::vector<std::unique_ptr<Memory>> send_mem, recv_mem;  // 16 guard bytes on each side
  std::vector<const char*> send;
  std::vector<char*> recv;
  std::vector<std::vector<char>> input;

  size_t elem() const { return type_size(type); }
  size_t send_bytes() const {
    return count * elem() * (op == CollOp::ReduceScatter ? static_cast<size_t>(team.size) : 1);
  }
  std::string describe() const {
    char text[200];
    std::snprintf(text, sizeof text,
                  "%s on %d ranks (start %d stride %d, root %d), count %zu, type %d, op %d%s, "
                  "send %s+%zu, recv %s+%zu",
                  coll_op_name(op), team.size, team.start, team.stride, root, count,
                  static_cast<int>(type), static_cast<int>(redop), in_place ? ", in place" : "",
                  send_addr ? "addressable" : "plain", send_off,
                  recv_addr ? "addressable" : "plain", recv_off);
    if (root_addr_differs)
      std::strncat(text, ", the root's addressable", sizeof text - 1 - std::strlen(text));
    return text;
  }
};

// Calls run together (each rank's in order on its stream), then checked.
class Batch {
 public:
  Batch(Emulator& emu, std::mt19937_64& rng)
      : emu_(emu), rng_(rng), streams_(static_cast<size_t>(emu.size())) {}

  // Makes the members' buffers (outputs poisoned) and appends their kernels to their streams.
  void add(std::unique_ptr<Call> c) {
    Call& k = *c;
    const size_t nn = static_cast<size_t>(k.team.size), sb = k.send_bytes(),
                 rb = k.count * k.elem();
    if (k.in_place) {
      k.recv_addr = k.send_addr;
      k.recv_off = k.send_off;
    }
    for (size_t m = 0; m < nn; ++m) {
      const bool shifted = !k.odd_members_only || m % 2 == 1;
      const size_t send_off = shifted ? k.send_off : 0, recv_off = shifted ? k.recv_off : 0;
      k.send_mem.push_back(std::make_unique<Memory>(16 + send_off + sb + 16, kPoison));
      char* send = k.send_mem[m]->data() + 16 + send_off;
      fill_input(rng_, k.type, send, sb / k.elem());
      k.input.emplace_back(send, send + sb);
      k.send.push_back(send);
      if (k.op == CollOp::Reduce && static_cast<int>(m) != k.root) {
        k.recv_mem.push_back(nullptr);
        k.recv.push_back(nullptr);
      } else if (k.in_place) {
        k.recv.push_back(send);
      } else {
        k.recv_mem.push_back(std::make_unique<Memory>(16 + recv_off + rb + 16, kPoison));
        k.recv.push_back(k.recv_mem[m]->data() + 16 + recv_off);
      }
    }
    for (int me = 0; me < k.team.size; ++me) {
      CollArgs a{};
      a.op = k.op;
      a.team = k.team;
      a.me = me;
      a.send = k.send[static_cast<size_t>(me)];
      a.recv = k.recv[static_cast<size_t>(me)];
      a.count = k.count;
      a.type = k.type;
      a.elem = k.elem();
      a.redop = k.redop;
      a.root = k.root;
      const bool send_addr = k.root_addr_differs && me == k.root ? true : k.send_addr;
      const Emulator::Launch l = emu_.launch(a, send_addr, k.recv_addr, k.send, k.recv);
      if (l.blocks > 0) streams_[static_cast<size_t>(k.team.world_of(me))].push_back(l);
    }
    calls_.push_back(std::move(c));
  }

  void run_and_check() {
    emu_.run(streams_);
    emu_.devices().expect_no_failed_wait();
    for (const auto& c : calls_) check(*c);
    // Both sides of a pair count the same rounds (the next call's flags depend on it).
    for (int a = 0; a < emu_.size(); ++a)
      for (int b = 0; b < emu_.size(); ++b)
        for (int blk = 0; a != b && blk < kMaxBlocks; ++blk)
          ASSERT_EQ(*emu_.word(a, kSeq, blk, b), *emu_.word(b, kSeq, blk, a))
              << "ranks " << a << " and " << b << ", block " << blk;
  }

 private:
  void check(const Call& k) {
    SCOPED_TRACE(k.describe());
    const size_t nn = static_cast<size_t>(k.team.size), rb = k.count * k.elem();
    const bool scatter = k.op == CollOp::ReduceScatter;
    for (size_t m = 0; m < nn; ++m) {
      if (k.op == CollOp::Reduce && static_cast<int>(m) != k.root) {  // no recv: send kept
        EXPECT_TRUE(std::equal(k.input[m].begin(), k.input[m].end(), k.send[m]))
            << "member " << m << ": send changed";
        continue;
      }
      std::vector<const char*> in;
      for (size_t i = 0; i < nn; ++i) in.push_back(k.input[i].data() + (scatter ? m * rb : 0));
      std::vector<char> want(rb);
      reference(k.type, k.redop, in, k.count, want.data());
      const char* got = k.recv[m];
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < rb; ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << "member " << m << ": " << bad << " bytes of " << rb
                         << " differ, the first at " << first;
      // Nothing written around recv, nor into send (unless in place).
      const Memory& out = k.in_place ? *k.send_mem[m] : *k.recv_mem[m];
      const char* lo = reinterpret_cast<const char*>(out.words.data());
      const char* hi = lo + out.words.size() * 16;
      const size_t out_bytes = k.in_place ? k.send_bytes() : rb;
      EXPECT_TRUE(std::all_of(lo, got, [](char x) { return x == kPoison; }) &&
                  std::all_of(got + out_bytes, hi, [](char x) { return x == kPoison; }))
          << "member " << m << " written outside its buffer";
      if (!k.in_place) {
        EXPECT_TRUE(std::equal(k.input[m].begin(), k.input[m].end(), k.send[m]))
            << "member " << m << ": send changed";
      }
    }
  }

  Emulator& emu_;
  std::mt19937_64& rng_;
  std::vector<std::vector<Emulator::Launch>> streams_;
  std::vector<std::unique_ptr<Call>> calls_;
};

}  // namespace symcomm::twoshot::test
