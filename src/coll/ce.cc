// The "ce" algorithm: every collective as copy-engine copies into the members' memory,
// synchronised by stream memory operations on flag words, so that no SM moves data or
// synchronises and computation can overlap the collective (a reduction adds one local
// reduction kernel). GPUs only. How it works and when it is chosen: docs/coll/ce.md.
// The state and its watchdog: ce_state.h; rounds and operations: ce_rounds.h.
#include <memory>
#include <string>

#include "base/cuda_runtime_check.h"
#include "coll/ce_rounds.h"
#include "coll/ce_state.h"
#include "coll/coll.h"

namespace symcomm {

namespace {

using namespace ce;

constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"ce", "copy engines and stream memory operations"};
  d.state = CollState::Own;
  return d;
}();

class CeAlgorithm final : public CollAlgorithm {
 public:
  CeAlgorithm() : CollAlgorithm(kDescriptor) {}

  Verdict own_conditions(const CollArgs&, const CollContext& ctx) const override {
    const CeState& s = ctx.state<CeState>(this);
    return s.problem().empty() ? Verdict::yes() : Verdict::no(s.problem());
  }

  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.space() != symcommSpaceCuda) return nullptr;
    return std::make_unique<CeState>(ctx);
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    CeState& s = ctx.state<CeState>(this);
    s.check_usable();
    s.start();
    DeviceScope guard(ctx.topology().device);
    Rounds rounds(a, ctx, s);
    if (a.op == CollOp::AllToAllv) return gather_v(a, ctx, rounds);
    const size_t block = a.count * a.elem;  // bytes of one block (see each operation)
    if (block == 0) return;
    switch (a.op) {
      case CollOp::AllToAllv: break;  // above
      case CollOp::AllGather: return gather(a, ctx, rounds, block, false);
      case CollOp::AllToAll: return gather(a, ctx, rounds, block, true);
      case CollOp::Broadcast: return broadcast(a, ctx, rounds, block);
      case CollOp::ReduceScatter: return reduce(a, ctx, rounds, block, true);
      case CollOp::AllReduce: return reduce(a, ctx, rounds, block, false);
      case CollOp::Reduce: case CollOp::Gather: case CollOp::Scatter:
        SYMCOMM_THROW(symcommInternalError, "ce runs a %s its descriptor does not declare",
                      coll_op_name(a.op));
    }
  }
};

const Registered<CollAlgorithm, CeAlgorithm> kRegistered(80);

}  // namespace

}  // namespace symcomm
