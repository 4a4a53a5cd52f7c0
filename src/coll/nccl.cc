// The "nccl" algorithm: every collective as the NCCL call of the same name over the team's
// NCCL communicator (the communicator's NcclComms, nccl/nccl_comms.h: made on the team's
// first use, kept until finalize, shared with the decompositions); all-to-all as grouped
// ncclSend/ncclRecv. The in-run baseline that the other algorithms are measured against. GPUs
// only (the cuda memory space), where NCCL can be loaded.
//
// Unlike "copy", results of floating-point sums follow NCCL's order of combination (and
// 16-bit floats are not accumulated in float): they may differ in the last bits from copy's.
#include "coll/coll.h"
#include "nccl/nccl_comms.h"
#include "nccl/nccl_lib.h"

namespace symcomm {

namespace {

// NCCL reaches the members through its own transports (no load/store access needed), and
// ranks that share a GPU it refuses (own_conditions). It keeps no state of its own: the NCCL
// communicators are the communicator's (CollContext::nccl).
constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"nccl", "NCCL's collectives"};
  d.ops = kCoreOps | op_bit(CollOp::Reduce) | op_bit(CollOp::Gather) | op_bit(CollOp::Scatter);
  d.load_store = false;
  d.library = "NCCL";
  return d;
}();

#ifdef SYMCOMM_HAVE_NCCL

class NcclAlgorithm final : public CollAlgorithm {
 public:
  NcclAlgorithm() : CollAlgorithm(kDescriptor) {}

  Verdict own_conditions(const CollArgs& a, const CollContext& ctx) const override {
    const NcclLib* lib = NcclLib::get();
    if (!lib) return Verdict::no(nccl_unavailable_reason());
    if (!nccl_has_type(a.type, lib->version))
      return Verdict::no(format("NCCL %s has no type %d (bfloat16 needs 2.10)",
                                nccl_version_string(lib->version).c_str(),
                                static_cast<int>(a.type)));
    if (std::string why = nccl_team_problem(ctx.topology(), a.team); !why.empty())
      return Verdict::no(why);
    const Heap& heap = ctx.heap();
    const bool reads_send = a.op != CollOp::Broadcast || a.me == a.root;
    // What NCCL's kernels on this rank's GPU cannot reach (NULL: nothing to pass).
    auto problem = [&](const void* p) {
      return !p || heap.contains(p) ? std::string() : heap.space().device_access_problem(p);
    };
    if (std::string why = reads_send ? problem(a.send) : ""; !why.empty())
      return Verdict::no("send " + why);
    if (std::string why = problem(a.recv); !why.empty()) return Verdict::no("recv " + why);
    return Verdict::yes();
  }

  // The first call over a team makes its NCCL communicator, which cannot be done inside a
  // capture (NCCL allocates device memory): the automatic choice passes over NCCL until then.
  Verdict own_capture_conditions(const CollArgs& a, CollContext& ctx) const override {
    if (!stream_capturing(a, ctx) || ctx.nccl().has(a.team)) return Verdict::yes();
    return Verdict::no("its communicator for this team is made at the team's first NCCL call, "
                       "which cannot be captured (NCCL allocates device memory): make one call "
                       "outside the capture first");
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    // The same on every member (no communicator is made either); all-to-all-v always runs,
    // since one member's zero counts say nothing of the others'.
    if (a.count == 0 && a.op != CollOp::AllToAllv) return;
    const NcclLib& loaded = nccl_lib();
    const ncclDataType_t type = nccl_type(a.type, loaded.version);
    const size_t block = a.count * a.elem;  // bytes of one block (all-to-all)
    ctx.nccl().run(a.team_id, a.team, a.stream, [&](const NcclLib& lib, ncclComm_t comm) {
      switch (a.op) {
        case CollOp::AllGather:
          SYMCOMM_NCCL(lib, ncclAllGather(a.send, a.recv, a.count, type, comm, a.stream));
          break;
        case CollOp::AllToAll:
          nccl_group(lib, [&] {
            for (int j = 0; j < a.team.size; ++j) {
              const size_t at = static_cast<size_t>(j) * block;
              SYMCOMM_NCCL(lib, ncclSend(a.send + at, a.count, type, j, comm, a.stream));
              SYMCOMM_NCCL(lib, ncclRecv(a.recv + at, a.count, type, j, comm, a.stream));
            }
          });
          break;
        case CollOp::AllToAllv:
          nccl_group(lib, [&] {
            for (int j = 0; j < a.team.size; ++j) {
              if (a.send_counts[j])
                SYMCOMM_NCCL(lib, ncclSend(a.send + a.send_displs[j] * a.elem, a.send_counts[j],
                                           type, j, comm, a.stream));
              if (a.recv_counts[j])
                SYMCOMM_NCCL(lib, ncclRecv(a.recv + a.recv_displs[j] * a.elem, a.recv_counts[j],
                                           type, j, comm, a.stream));
            }
          });
          break;
        case CollOp::ReduceScatter:
          SYMCOMM_NCCL(lib, ncclReduceScatter(a.send, a.recv, a.count, type, nccl_op(a.redop),
                                              comm, a.stream));
          break;
        case CollOp::AllReduce:
          SYMCOMM_NCCL(lib, ncclAllReduce(a.send, a.recv, a.count, type, nccl_op(a.redop), comm,
                                          a.stream));
          break;
        case CollOp::Broadcast:
          SYMCOMM_NCCL(lib, ncclBroadcast(a.send, a.recv, a.count, type, a.root, comm, a.stream));
          break;
        case CollOp::Reduce:
          SYMCOMM_NCCL(lib, ncclReduce(a.send, a.recv, a.count, type, nccl_op(a.redop), a.root,
                                       comm, a.stream));
          break;
        case CollOp::Gather:  // (NCCL has neither: sends and receives in a group)
        case CollOp::Scatter: {
          // The root's side: one block each way with every member (itself included).
          const bool gather = a.op == CollOp::Gather;
          nccl_group(lib, [&] {
            if (a.me == a.root)
              for (int j = 0; j < a.team.size; ++j) {
                const size_t at = static_cast<size_t>(j) * block;
                if (gather)
                  SYMCOMM_NCCL(lib, ncclRecv(a.recv + at, a.count, type, j, comm, a.stream));
                else
                  SYMCOMM_NCCL(lib, ncclSend(a.send + at, a.count, type, j, comm, a.stream));
              }
            if (gather)
              SYMCOMM_NCCL(lib, ncclSend(a.send, a.count, type, a.root, comm, a.stream));
            else
              SYMCOMM_NCCL(lib, ncclRecv(a.recv, a.count, type, a.root, comm, a.stream));
          });
          break;
        }
      }
    });
  }
};

#else  // !SYMCOMM_HAVE_NCCL: registered, so that asking for it says why it cannot run

class NcclAlgorithm final : public CollAlgorithm {
 public:
  NcclAlgorithm() : CollAlgorithm(kDescriptor) {}
  Verdict own_conditions(const CollArgs&, const CollContext&) const override {
    return Verdict::no(nccl_unavailable_reason());
  }
  void run(const CollArgs&, CollContext&) override {
    SYMCOMM_THROW(symcommNotSupported, "%s", nccl_unavailable_reason().c_str());
  }
};

#endif

const Registered<CollAlgorithm, NcclAlgorithm> kRegistered(30);

}  // namespace

}  // namespace symcomm
