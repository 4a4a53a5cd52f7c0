// The "copy" algorithm: every collective (reduce, gather and scatter included) as puts (copy engines on GPUs, memcpy on the host)
// into the members' memory, through each member's transport (so it also runs on teams that
// span nodes: load/store on the node, the network beyond), with team barriers around them. Symmetric receive buffers are
// written in place (and registered ones, symcommRegister); otherwise data goes through the workspace in pieces, one slot per
// member: a barrier (the previous piece's slots are free), the puts, a barrier (every
// member's piece arrived), then local copies or a local reduction out of the slots.
// Works in both memory spaces; the reference the faster algorithms are checked against.
// All-to-all-v with counts "on the device" only in the host space, where that memory is the
// host's (on GPUs it is sm's: copy would have to synchronise the stream to read them).
#include <algorithm>
#include <vector>

#include "coll/alltoallv_table.h"
#include "coll/coll.h"

namespace symcomm {

namespace {

// Every operation in both spaces. All-to-all-v reads the counts back on the host (gather_v),
// which a stream being captured cannot do: the automatic choice passes over it there, and
// asked for by name it refuses before it enqueues anything (the capture stays usable).
constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"copy", "puts between team barriers"};
  d.ops = kCoreOps | op_bit(CollOp::Reduce) | op_bit(CollOp::Gather) | op_bit(CollOp::Scatter);
  d.spaces = kCudaSpace | kHostSpace;
  d.device_counts = kHostSpace;
  d.load_store = false;  // every member needs a transport (own_conditions)
  d.uncapturable_ops = op_bit(CollOp::AllToAllv);
  d.why_uncapturable = "reads every member's counts back on the host, which a stream being "
                       "captured cannot do";
  return d;
}();

class CopyAlgorithm final : public CollAlgorithm {
 public:
  CopyAlgorithm() : CollAlgorithm(kDescriptor) {}

 protected:
  Verdict own_conditions(const CollArgs& a, const CollContext& ctx) const override {
    if (std::string why = ctx.unconnected_member(a); !why.empty()) return Verdict::no(why);
    return Verdict::yes();
  }

 public:

  void run(const CollArgs& a, CollContext& ctx) override {
    if (a.op == CollOp::AllToAllv) {
      return a.counts_on_device ? device_counts(a, ctx) : gather_v(a, ctx);
    }
    const size_t block = a.count * a.elem;  // bytes of one block (see each operation)
    if (block == 0) return;
    switch (a.op) {
      case CollOp::AllToAllv: break;  // above
      case CollOp::AllGather: return gather(a, ctx, block, false);
      case CollOp::AllToAll: return gather(a, ctx, block, true);
      case CollOp::Broadcast: return broadcast(a, ctx, block);
      case CollOp::ReduceScatter: return reduce(a, ctx, block, true);
      case CollOp::AllReduce: return reduce(a, ctx, block, false);
      case CollOp::Reduce: return to_root(a, ctx, block, true);
      case CollOp::Gather: return to_root(a, ctx, block, false);
      case CollOp::Scatter: return scatter_from_root(a, ctx, block);
    }
  }

 private:
  static void put(const CollArgs& a, CollContext& ctx, void* dst, const void* src, size_t bytes) {
    ctx.backend().put(dst, src, bytes, symcommEngineCe, a.stream);
  }

  // All-gather (my send to every member's block `me`) or all-to-all (my block j to member j).
  void gather(const CollArgs& a, CollContext& ctx, size_t block, bool to_all) {
    const int n = a.team.size;
    auto source = [&](int j) { return a.send + (to_all ? static_cast<size_t>(j) * block : 0); };
    if (ctx.writable_in_place(a, a.recv, block * static_cast<size_t>(n))) {
      ctx.barrier(a);  // every member is done with its receive buffer
      for (int j = 0; j < n; ++j)
        ctx.put_to(a, j, a.recv + static_cast<size_t>(a.me) * block, source(j), block);
      ctx.barrier(a);
      return;
    }
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      ctx.barrier(a);
      for (int j = 0; j < n; ++j)
        ctx.put_to(a, j, ws + static_cast<size_t>(a.me) * slot, source(j) + off, len);
      ctx.barrier(a);
      for (int j = 0; j < n; ++j)
        put(a, ctx, a.recv + static_cast<size_t>(j) * block + off, ws + static_cast<size_t>(j) * slot, len);
    }
  }

  // All-to-all-v. The counts travel first (coll/alltoallv_table.h): every member learns
  // every member's counts, checks that each pair agrees, and where each block lands; then
  // the blocks, into the receive buffers in place where every member's can be, else through
  // the workspace in the same pieces on every member. Reading the counts back synchronises
  // the stream: not capturable in a CUDA graph.
  void gather_v(const CollArgs& a, CollContext& ctx) {
    const int n = a.team.size;
    const AlltoallvTable table(a, ctx);
    auto send_of = [&](int j) { return a.send + a.send_displs[j] * a.elem; };
    if (table.in_place()) {
      for (int j = 0; j < n; ++j)
        if (a.send_counts[j])
          ctx.put_to(a, j, a.recv + table.displ(j, a.me) * a.elem, send_of(j),
                     a.send_counts[j] * a.elem);
      ctx.barrier(a);
      return;
    }
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < table.longest(); off += slot) {
      auto piece = [&](size_t bytes) { return bytes > off ? std::min(slot, bytes - off) : 0; };
      ctx.barrier(a);
      for (int j = 0; j < n; ++j)
        if (size_t len = piece(a.send_counts[j] * a.elem))
          ctx.put_to(a, j, ws + static_cast<size_t>(a.me) * slot, send_of(j) + off, len);
      ctx.barrier(a);
      for (int i = 0; i < n; ++i)
        if (size_t len = piece(a.recv_counts[i] * a.elem))
          put(a, ctx, a.recv + a.recv_displs[i] * a.elem + off, ws + static_cast<size_t>(i) * slot, len);
    }
  }

  // All-to-all-v with counts in (host space) device memory, with sm's semantics: blocks land
  // packed in team-rank order, one that does not fit in the capacity (a.count elements) is
  // dropped whole, and recv_counts / recv_displs are written. Every member puts its send
  // counts and capacity into every member's workspace, so that each knows every block's
  // place and fate; then gather_v moves what fits.
  void device_counts(const CollArgs& a, CollContext& ctx) {
    const int n = a.team.size;
    const size_t nn = static_cast<size_t>(n), words = nn + 1, row = words * sizeof(uint64_t);
    SYMCOMM_REQUIRE(row * nn <= ctx.workspace_bytes(), symcommOutOfMemory,
                    "SYMCOMM_COLL_WORKSPACE (%zu bytes) is too small for the counts of a team of %d",
                    ctx.workspace_bytes(), n);
    std::vector<uint64_t> mine(words), all(words * nn);
    std::copy(a.send_counts, a.send_counts + n, mine.begin());
    mine[nn] = a.count;
    char* ws = ctx.workspace();
    ctx.barrier(a);  // every member is in the call: its workspace is free
    for (int j = 0; j < n; ++j)
      ctx.put_to(a, j, ws + static_cast<size_t>(a.me) * row, mine.data(), row);
    ctx.barrier(a);
    ctx.backend().get(all.data(), ws, row * nn, symcommEngineCe, a.stream);
    ctx.backend().synchronize(a.stream);
    // What member i sends member j, where it lands there, and whether it fits there (the
    // table is the same on every member, so all agree).
    auto count = [&](int i, int j) {
      return static_cast<size_t>(all[static_cast<size_t>(i) * words + static_cast<size_t>(j)]);
    };
    auto place = [&](int i, int j) {
      size_t at = 0;
      for (int k = 0; k < i; ++k) at += count(k, j);
      return at;
    };
    // Decided on place(i, j) with counts past the capacity saturating (the capacity is at most
    // SIZE_MAX / 2 elements), so that counts whose sum wraps around cannot make a block fit
    // (as in sm's kernel).
    auto fits = [&](int i, int j) {
      const size_t capacity = static_cast<size_t>(all[static_cast<size_t>(j) * words + nn]);
      const size_t past = capacity + 1;
      size_t bound = 0;
      for (int k = 0; k < i; ++k) bound = std::min(bound + std::min(count(k, j), past), past);
      return count(i, j) <= capacity && bound <= capacity - count(i, j);
    };
    std::vector<size_t> sends(nn), receives(nn), displs(nn);
    for (int k = 0; k < n; ++k) {
      const size_t j = static_cast<size_t>(k);
      sends[j] = fits(a.me, k) ? count(a.me, k) : 0;
      receives[j] = fits(k, a.me) ? count(k, a.me) : 0;
      displs[j] = place(k, a.me);
      const_cast<size_t*>(a.recv_counts)[j] = count(k, a.me);  // outputs (CollArgs)
      const_cast<size_t*>(a.recv_displs)[j] = displs[j];
    }
    CollArgs b = a;
    b.counts_on_device = false;
    b.send_counts = sends.data();
    b.recv_counts = receives.data();
    b.recv_displs = displs.data();
    gather_v(b, ctx);  // its first barrier: every member has read the table above
  }

  void broadcast(const CollArgs& a, CollContext& ctx, size_t block) {
    const int n = a.team.size;
    const bool root = a.me == a.root;
    if (ctx.writable_in_place(a, a.recv, block)) {
      ctx.barrier(a);
      if (root)
        for (int j = 0; j < n; ++j)
          if (j != a.me || a.send != a.recv) ctx.put_to(a, j, a.recv, a.send, block);
      ctx.barrier(a);
      return;
    }
    const size_t slot = ctx.workspace_slot(1, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      ctx.barrier(a);
      if (root)
        for (int j = 0; j < n; ++j) ctx.put_to(a, j, ws, a.send + off, len);
      ctx.barrier(a);
      if (!root || a.send != a.recv) put(a, ctx, a.recv + off, ws, len);
    }
  }

  // Reduce-scatter (my block j to member j's slot `me`) or all-reduce (my whole buffer to
  // every member's slot `me`), then each member reduces its slots.
  void reduce(const CollArgs& a, CollContext& ctx, size_t block, bool scatter) {
    const int n = a.team.size;
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      ctx.barrier(a);
      for (int j = 0; j < n; ++j) {
        const char* src = a.send + (scatter ? static_cast<size_t>(j) * block : 0) + off;
        ctx.put_to(a, j, ws + static_cast<size_t>(a.me) * slot, src, len);
      }
      ctx.barrier(a);
      ctx.copies().reduce(a.recv + off, ws, slot, n, len / a.elem, a.type, a.redop, a.stream);
    }
  }

  // Reduce, gather and scatter go through the workspace, whatever the buffers: only the
  // root knows its receive buffer (the others pass none), and a member its own.
  // Reduce and gather: my send to the root's slot `me`; then the root reduces its slots
  // into recv (reduce), or copies slot j to block j of recv (gather).
  void to_root(const CollArgs& a, CollContext& ctx, size_t block, bool reduce) {
    const int n = a.team.size;
    const size_t slot = ctx.workspace_slot(n, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      ctx.barrier(a);
      ctx.put_to(a, a.root, ws + static_cast<size_t>(a.me) * slot, a.send + off, len);
      ctx.barrier(a);
      if (a.me != a.root) continue;
      if (reduce) {
        ctx.copies().reduce(a.recv + off, ws, slot, n, len / a.elem, a.type, a.redop, a.stream);
        continue;
      }
      for (int j = 0; j < n; ++j)
        put(a, ctx, a.recv + static_cast<size_t>(j) * block + off,
            ws + static_cast<size_t>(j) * slot, len);
    }
  }

  // Scatter: the root's block j to member j's workspace, which it copies to its recv.
  void scatter_from_root(const CollArgs& a, CollContext& ctx, size_t block) {
    const size_t slot = ctx.workspace_slot(1, a.team.size);
    char* ws = ctx.workspace();
    for (size_t off = 0; off < block; off += slot) {
      const size_t len = std::min(slot, block - off);
      ctx.barrier(a);
      if (a.me == a.root)
        for (int j = 0; j < a.team.size; ++j)
          ctx.put_to(a, j, ws, a.send + static_cast<size_t>(j) * block + off, len);
      ctx.barrier(a);
      put(a, ctx, a.recv + off, ws, len);
    }
  }
};

const Registered<CollAlgorithm, CopyAlgorithm> kRegistered(20);

}  // namespace

}  // namespace symcomm
