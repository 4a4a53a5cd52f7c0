// The pieces of `symcomm-bench coll` that coll_bench.cu (options, the run loop, timing and
// output) and coll_check.cu (the data, the calls of every implementation and the checks of
// their results) share: the operations, the implementations, the buffers and the calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"

namespace bench::coll {

// ---- Operations -------------------------------------------------------------------------

enum class Op {
  AllToAll, AllToAllv, AllToAllvDevice, AllGather, ReduceScatter, AllReduce, Broadcast, Barrier,
  Reduce, Gather, Scatter, SendRecv, AllReduceGroup
};

// AllReduceGroup: the buffer's all-reduce as this many calls of a part each, in one group
// (the small all-reduces of a model's layers that users batch so).
constexpr int kGroupCalls = 8;

struct OpInfo {
  Op op;
  const char* name;
  bool reduces;         // float32 sums; else data movement
  const char* size_is;  // which buffer `bytes` is
  // The three all-to-all forms (with equal counts, the same data movement).
  bool alltoall() const { return op == Op::AllToAll || op == Op::AllToAllv || op == Op::AllToAllvDevice; }
  // Elements of each rank's buffers; the blocked operations have n blocks of count.
  size_t send_elems(size_t count, int n) const {
    const bool blocks = alltoall() || op == Op::ReduceScatter || op == Op::Scatter;
    return blocks ? count * static_cast<size_t>(n) : count;
  }
  size_t recv_elems(size_t count, int n) const {
    const bool blocks = alltoall() || op == Op::AllGather || op == Op::Gather;
    return blocks ? count * static_cast<size_t>(n) : count;
  }
  bool blocked() const {
    return alltoall() || op == Op::AllGather || op == Op::ReduceScatter || op == Op::Gather ||
           op == Op::Scatter;
  }
  // To or from --root (reduce, gather and scatter write or read the root's buffer alone).
  bool rooted() const {
    return op == Op::Broadcast || op == Op::Reduce || op == Op::Gather || op == Op::Scatter;
  }
  double bus_factor(int n) const {  // (nccl-tests')
    if (op == Op::AllReduce || op == Op::AllReduceGroup) return 2.0 * (n - 1) / n;
    if (op == Op::Broadcast || op == Op::Reduce || op == Op::SendRecv) return 1.0;
    return static_cast<double>(n - 1) / n;
  }
};

constexpr size_t kGuardBytes = 4096;       // after recv's used part: must stay poisoned

// ---- Implementations --------------------------------------------------------------------

struct Impl {
  std::string name;       // "nccl", "symcomm:auto", "symcomm:<algorithm>"
  const char* algorithm;  // symcomm's argument (NULL: auto)
  bool nccl;
  // All-to-all-v with counts on the device, NCCL as its callers run it: the counts exchanged
  // (grouped send/recv of one count per pair), copied to the host, the stream synchronised,
  // then the blocks. ("nccl" alone is given the counts on the host: its best case.)
  bool counts_to_host = false;
};

struct Buffers {
  char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;  // of each, the guard included
  bool symmetric = true;
  // All-to-all-v: send counts, send displacements, recv counts, recv displacements (n each),
  // on the host and (cudaMalloc'd) on the device, where the call writes the last two.
  std::vector<size_t> v;
  size_t* dev_v = nullptr;
};

// How a check makes the call on every rank, its inputs in place: call_everywhere, or the
// replay of a captured graph. False where every rank's call was refused (*why says why).
using Caller = std::function<bool(std::string* why)>;

// Memory of the communicator's space: the GPU's (cudaMalloc; sets and copies in on
// ctx.stream) or, in the host space, the host's (malloc, memset, memcpy). copy_out reads it
// back to the host after everything on the stream; sync waits for the stream.
void* space_alloc(const Context& ctx, size_t bytes);
void space_free(const Context& ctx, void* p);
void space_set(const Context& ctx, void* p, int byte, size_t bytes);
void copy_in(const Context& ctx, void* dst, const void* host_src, size_t bytes);
void copy_out(const Context& ctx, void* host_dst, const void* src, size_t bytes);
void sync(const Context& ctx);

// Defined in coll_check.cu, where each is described.
void set_counts(const Context& ctx, Buffers& b, size_t count, int n);
symcommResult_t run_once(const Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl,
                         size_t count, int root);
std::string point_name(const OpInfo& op, const Impl& impl, size_t bytes, size_t count);
std::vector<int> gather_ints(const Context& ctx, int mine);
bool call_everywhere(Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl,
                     size_t count, const std::string& where, std::string* why);
bool check(Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl, size_t count,
           size_t bytes, uint64_t iteration, const Caller& call, std::string* why);
bool check_barrier(Context& ctx, const Buffers& b, uint64_t* words, const OpInfo& op,
                   const Impl& impl, uint64_t iteration, const Caller& call, std::string* why);

}  // namespace bench::coll
