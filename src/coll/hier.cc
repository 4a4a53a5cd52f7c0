// The "hier" algorithm: collectives on teams that span nodes, in phases. Among the members of
// one node, by load/store (the members of a node reach each other's heaps); across nodes,
// through the transport (the network), only between the members of one rail: those with the
// same local index on every node, which on machines with a network interface per GPU talk
// through their own. All-reduce is a reduce-scatter in the node, a reduce-scatter and an
// all-gather across it, an all-gather in the node; reduce-scatter, all-gather and broadcast
// are the same phases in part (coll/hier/reduce.cc, coll/hier/gather.cc); all-to-all(v)
// sends every block straight to its member, the network's first (coll/hier/exchange.cc).
// The network carries a 1 / L share of what copy's flat puts send it (L members per node)
// for reductions and all-gathers.
//
// Runs where the team spans two or more nodes with as many members on each, its node peers
// load/store accessible and every member reached by a transport (the descriptor's
// across_nodes); teams of one node are left to the node's algorithms, and teams whose nodes
// hold different numbers of members to copy. Both memory spaces: every move and wait is on
// the call's stream, through the transports and the space's own copies and reductions.
// Syncs of a node or a rail, not of the whole team (coll/hier/state.h), except around
// all-to-all's pieces, where every member writes to every other.
#include "coll/hier/call.h"

namespace symcomm {

namespace {

// Every operation but all-to-all-v with counts on the device (copy reads those in the host
// space, sm on GPUs), in both spaces. All-to-all-v reads every member's counts back on the
// host (coll/alltoallv_table.h), which a stream being captured cannot do.
constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"hier", "node phases by load/store, the network between the members of "
                           "one local index"};
  d.spaces = kCudaSpace | kHostSpace;
  d.load_store = false;
  d.across_nodes = true;
  d.state = CollState::Own;
  d.uncapturable_ops = op_bit(CollOp::AllToAllv);
  d.why_uncapturable = "reads every member's counts back on the host, which a stream being "
                       "captured cannot do";
  return d;
}();

class HierAlgorithm final : public CollAlgorithm {
 public:
  HierAlgorithm() : CollAlgorithm(kDescriptor) {}

  // Only where the communicator spans nodes (collective: every rank sees the same count).
  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.topology().nnodes < 2) return nullptr;
    return std::make_unique<hier::State>(ctx);
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    hier::State& state = ctx.state<hier::State>(this);
    SYMCOMM_REQUIRE(!state.failed(), symcommTimeout,
                    "an earlier hier call on this communicator failed part of the way (a wait "
                    "timed out, or a peer was lost): its members' syncs may no longer agree, so "
                    "hier cannot run on this communicator any more (finalize it)");
    ctx.check_counters("hier");
    if (a.op != CollOp::AllToAllv && a.count == 0) return;
    TeamNodes nodes;
    if (Verdict v = team_nodes(a.team, a.me, ctx.topology(), &nodes); !v)
      SYMCOMM_THROW(symcommInternalError, "hier runs a team it refuses: %s", v.reason().c_str());
    hier::Call call(a, ctx, state, std::move(nodes));
    try {
      switch (a.op) {
        case CollOp::AllReduce: return hier::all_reduce(call);
        case CollOp::ReduceScatter: return hier::reduce_scatter(call);
        case CollOp::AllGather: return hier::all_gather(call);
        case CollOp::Broadcast: return hier::broadcast(call);
        case CollOp::AllToAll: return hier::all_to_all(call);
        case CollOp::AllToAllv: return hier::all_to_all_v(call);
        case CollOp::Reduce: case CollOp::Gather: case CollOp::Scatter:
          SYMCOMM_THROW(symcommInternalError, "hier runs a %s its descriptor does not declare",
                        coll_op_name(a.op));
      }
    } catch (...) {
      // Before its first sync a call fails alike on every member (a workspace too small,
      // counts that do not pair up) and leaves the syncs in step.
      if (call.synced()) state.fail();
      throw;
    }
  }

 protected:
  std::string why_no_state(const CollContext&) const override {
    return "every rank of the communicator is on one node (the node's algorithms run its "
           "collectives)";
  }
};

const Registered<CollAlgorithm, HierAlgorithm> kRegistered(15);

}  // namespace

}  // namespace symcomm
