#include "coll/coll.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "base/param.h"
#include "coll/agreement.h"
#include "coll/selection.h"
#include "coll/team_nodes.h"
#include "memory/peer_address.h"

namespace symcomm {

static const SizeParam kWorkspace(
    "SYMCOMM_COLL_WORKSPACE", "0",
    "symmetric workspace of the collectives, per rank (0: 64M on GPUs, 8M on the host)");
static const StringParam kCollAlgo(
    "SYMCOMM_COLL_ALGO", "",
    "collective algorithm to use instead of the selection table: a name for every operation, "
    "or op=name pairs (allgather=copy,allreduce=copy); auto (or op=auto): the table");

static const CollOp kAllOps[] = {CollOp::AllGather, CollOp::AllToAll,  CollOp::AllToAllv,
                                 CollOp::ReduceScatter, CollOp::AllReduce, CollOp::Broadcast,
                                 CollOp::Reduce,    CollOp::Gather,    CollOp::Scatter};

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::AllGather: return "allgather";
    case CollOp::AllToAll: return "alltoall";
    case CollOp::AllToAllv: return "alltoallv";
    case CollOp::ReduceScatter: return "reducescatter";
    case CollOp::AllReduce: return "allreduce";
    case CollOp::Broadcast: return "broadcast";
    case CollOp::Reduce: return "reduce";
    case CollOp::Gather: return "gather";
    case CollOp::Scatter: return "scatter";
  }
  return "?";
}

size_t type_size(symcommDataType_t type) {
  switch (type) {
    case symcommInt8: case symcommUint8: case symcommFloat8E4M3: case symcommFloat8E5M2: return 1;
    case symcommFloat16: case symcommBfloat16: return 2;
    case symcommInt32: case symcommUint32: case symcommFloat32: return 4;
    case symcommInt64: case symcommUint64: case symcommFloat64: return 8;
    case symcommNumDataTypes: break;
  }
  SYMCOMM_THROW(symcommInvalidArgument, "type %d is not a symcommDataType_t", static_cast<int>(type));
}

size_t CollArgs::bytes_per_rank() const {
  switch (op) {
    case CollOp::AllToAll: return count * elem * static_cast<size_t>(team.size);
    case CollOp::AllToAllv: {
      if (counts_on_device) return count * elem;  // the capacity: the host knows no more
      size_t total = 0;
      for (int j = 0; j < team.size; ++j) total += send_counts[j];
      return total * elem;
    }
    case CollOp::ReduceScatter: return count * elem * static_cast<size_t>(team.size);
    case CollOp::Scatter: return count * elem * static_cast<size_t>(team.size);  // the root's
    default: return count * elem;
  }
}

CollContext::CollContext(const Topology& topology, Heap& heap,
                         const Registrations& registrations, Rma& rma, Copies& copies,
                         NcclComms& nccl, symcommMemorySpace_t space)
    : topology_(topology), heap_(heap), registrations_(registrations), rma_(rma), copies_(copies),
      nccl_(nccl), space_(space),
      check_calls_(coll_check_requested(space)) {
  size_t bytes = kWorkspace.get();
  if (bytes == 0) {
    // The default leaves most of a small heap (SYMCOMM_HEAP_MAX) to the application.
    bytes = space == symcommSpaceCuda ? (size_t{64} << 20) : (size_t{8} << 20);
    bytes = std::min(bytes, heap.max_bytes() / 8 / 256 * 256);
  }
  workspace_bytes_ = bytes;
  workspace_ = static_cast<char*>(heap.malloc_internal(bytes));
  for (CollAlgorithm* a : coll_algorithms())
    if (std::unique_ptr<AlgorithmState> s = a->make_state(*this)) states_[a] = std::move(s);
  rma.bootstrap().barrier();  // no peer uses an algorithm's area before it was cleared here
}

int CollContext::fewest_across_ranks(int mine) {
  std::vector<int> all(static_cast<size_t>(topology_.nranks));
  rma_.bootstrap().allgather(&mine, sizeof mine, all.data());
  return *std::min_element(all.begin(), all.end());
}

char* CollContext::on(const CollArgs& a, const void* p, int member) const {
  return peer_address(heap_, &registrations_, p, a.team.world_of(member));
}

size_t CollContext::workspace_slot(int slots, int team_size) const {
  const size_t slot = workspace_bytes_ / static_cast<size_t>(slots) / 256 * 256;
  SYMCOMM_REQUIRE(slot >= 256, symcommOutOfMemory,
                  "SYMCOMM_COLL_WORKSPACE (%zu bytes) is too small for a team of %d",
                  workspace_bytes_, team_size);
  return slot;
}

bool CollContext::reaches_team(const CollArgs& a) const {
  for (int i = 0; i < a.team.size; ++i)
    if (!topology_.accessible[static_cast<size_t>(a.team.world_of(i))]) return false;
  return true;
}

std::string CollContext::unreachable_member(const CollArgs& a) const {
  for (int i = 0; i < a.team.size; ++i)
    if (std::string why = topology_.why_inaccessible(a.team.world_of(i)); !why.empty())
      return format("team member %d: %s", i, why.c_str());
  return "";
}

void CollContext::put_to(const CollArgs& a, int member, void* dst, const void* src, size_t bytes,
                         symcommEngine_t engine) {
  const int pe = a.team.world_of(member);
  rma_.transports().to(pe).put(pe, dst, src, bytes, engine, a.stream);
}

void CollContext::get_from(const CollArgs& a, int member, void* dst, const void* src, size_t bytes,
                           symcommEngine_t engine) {
  const int pe = a.team.world_of(member);
  rma_.transports().to(pe).get(pe, dst, src, bytes, engine, a.stream);
}

std::string CollContext::unconnected_member(const CollArgs& a) const {
  for (int j = 0; j < a.team.size; ++j)
    if (!rma_.transports().connected(a.team.world_of(j)))
      return rma_.transports().why_unconnected(a.team.world_of(j));
  return "";
}

bool CollContext::writable_in_place(const CollArgs& a, const void* p, size_t bytes) const {
  if (!addressable(p, bytes)) return false;
  if (heap_.contains(p)) return true;
  for (int j = 0; j < a.team.size; ++j) {
    const int pe = a.team.world_of(j);
    if (!rma_.transports().connected(pe) || !rma_.transports().to(pe).registered_buffers())
      return false;
  }
  return true;
}

bool CollContext::addressable(const void* p, size_t bytes) const {
  if (heap_.contains(p)) return bytes <= heap_.mapped() - heap_.offset_of(p);
  return registrations_.find(p, bytes) != nullptr;
}

void CollContext::place_counters(CounterState& s, size_t bytes, size_t clear) {
  s.area = static_cast<char*>(heap_.malloc_internal(bytes));
  backend().clear(s.area, clear);
  backend().fill_device_comm(s.world, SYMCOMM_TEAM_WORLD, rma_.teams().get(SYMCOMM_TEAM_WORLD));
}

void CollContext::check_counters(const char* algorithm) const {
  SYMCOMM_REQUIRE(!rma_.backend().any_wait_failed(), symcommTimeout,
                  "a device-side wait on this communicator failed earlier (timed out or "
                  "aborted): the counters %s keeps with its peers may no longer agree, so %s "
                  "cannot run on this communicator any more (finalize it)", algorithm, algorithm);
}

bool CollContext::aligned_alike(const void* p, size_t alignment) const {
  // Heap windows start at the same allocation granularity on every rank.
  if (heap_.contains(p)) return true;
  const Registration* r = registrations_.find(p, 1);
  return r != nullptr && r->alike >= alignment;
}

const std::vector<CollAlgorithm*>& coll_algorithms() {
  return Registry<CollAlgorithm>::instance().all();
}

CollAlgorithm* find_coll_algorithm(const char* name) {
  return Registry<CollAlgorithm>::instance().find(name);
}

static CollAlgorithm* find(const char* name) { return find_coll_algorithm(name); }

namespace {

// "all-gather", ...: the operations as the reasons name them.
const char* op_words(CollOp op) {
  switch (op) {
    case CollOp::AllGather: return "all-gather";
    case CollOp::AllToAll: return "all-to-all";
    case CollOp::AllToAllv: return "all-to-all-v";
    case CollOp::ReduceScatter: return "reduce-scatter";
    case CollOp::AllReduce: return "all-reduce";
    case CollOp::Broadcast: return "broadcast";
    case CollOp::Reduce: return "reduce";
    case CollOp::Gather: return "gather";
    case CollOp::Scatter: return "scatter";
  }
  return "?";
}

const char* space_words(symcommMemorySpace_t s) { return s == symcommSpaceCuda ? "cuda" : "host"; }

// "a", "a and b", "a, b and c".
std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

std::string ops_listed(unsigned ops) {
  std::vector<std::string> names;
  for (CollOp o : kAllOps)
    if (ops & op_bit(o)) names.emplace_back(op_words(o));
  return listed(names);
}

std::string spaces_listed(unsigned spaces) {
  std::vector<std::string> names;
  for (symcommMemorySpace_t s : {symcommSpaceCuda, symcommSpaceHost})
    if (spaces & space_bit(s)) names.emplace_back(space_words(s));
  return listed(names);
}

// Why an algorithm refuses all-to-all-v with counts on the device in `space`, and which
// registered algorithms run it there (from their descriptors).
std::string device_counts_refusal(const CollDescriptor& d, symcommMemorySpace_t space) {
  std::vector<std::string> others;
  for (const CollAlgorithm* a : coll_algorithms())
    if (a->descriptor().device_counts & space_bit(space)) others.emplace_back(a->name());
  std::string why = d.device_counts == 0
                        ? std::string("it reads all-to-all-v's counts on the host only")
                        : format("it reads all-to-all-v's counts on the device in the %s "
                                 "memory space only", spaces_listed(d.device_counts).c_str());
  return why + format(" (in the %s memory space, counts on the device are %s)",
                      space_words(space),
                      others.empty() ? "no algorithm's" : (listed(others) + "'s").c_str());
}

}  // namespace

Verdict CollAlgorithm::can_implement(const CollArgs& a, const CollContext& ctx) const {
  const CollDescriptor& d = descriptor_;
  if (!(d.spaces & space_bit(ctx.space())))
    return Verdict::no(format("it needs the %s memory space (%s)", spaces_listed(d.spaces).c_str(),
                              d.summary));
  if (!(d.ops & op_bit(a.op))) return Verdict::no("it does " + ops_listed(d.ops) + " only");
  if (a.segments && a.segments->size() > static_cast<size_t>(d.max_segments))
    return Verdict::no(d.max_segments ? format("it reduces at most %d buffers in one all-reduce",
                                               d.max_segments)
                                      : std::string("it reduces one buffer in an all-reduce"));
  if (a.counts_on_device && !(d.device_counts & space_bit(ctx.space())))
    return Verdict::no(device_counts_refusal(d, ctx.space()));
  if (d.max_team > 0 && a.team.size > d.max_team)
    return Verdict::no(format("it runs on teams of at most %d ranks (this one has %d)", d.max_team,
                              a.team.size));
  if (d.state != CollState::None && !ctx.has_state(this)) return Verdict::no(why_no_state(ctx));
  if (d.load_store && !ctx.reaches_team(a)) return Verdict::no(ctx.unreachable_member(a));
  if (d.across_nodes) {
    TeamNodes nodes;
    if (Verdict v = team_nodes(a.team, a.me, ctx.topology(), &nodes); !v) return v;
    for (int l = 0; l < nodes.per_node; ++l)
      if (std::string why = ctx.topology().why_inaccessible(a.team.world_of(nodes.at(nodes.node, l)));
          !why.empty())
        return Verdict::no(format("team member %d, on this rank's node: %s",
                                  nodes.at(nodes.node, l), why.c_str()));
    if (std::string why = ctx.unconnected_member(a); !why.empty()) return Verdict::no(why);
  }
  if (d.in_place_recv && !(a.query ? a.symmetric : ctx.addressable(a.recv, a.recv_bytes)))
    return Verdict::no("the receive buffer must be symmetric (symcommMalloc) or registered "
                       "(symcommRegister): the members write it in place");
  return own_conditions(a, ctx);
}

std::string CollAlgorithm::why_no_state(const CollContext&) const {
  return format("the communicator has no %s state", name());
}

Verdict CollAlgorithm::capturable(const CollArgs& a, CollContext& ctx) const {
  const CollDescriptor& d = descriptor_;
  // The stream is asked only where the answer matters (every automatic choice comes here).
  if ((d.uncapturable_ops & op_bit(a.op)) && stream_capturing(a, ctx))
    return Verdict::no(format("its %s %s", op_words(a.op),
                              d.why_uncapturable ? d.why_uncapturable
                                                 : "cannot run on a stream being captured into "
                                                   "a CUDA graph"));
  return own_capture_conditions(a, ctx);
}

bool stream_capturing(const CollArgs& a, const CollContext& ctx) {
  if (ctx.space() != symcommSpaceCuda) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SYMCOMM_CUDART(cudaStreamIsCapturing(static_cast<cudaStream_t>(a.stream), &capture));
  return capture != cudaStreamCaptureStatusNone;
}

// SYMCOMM_COLL_ALGO's choice for `op`, or "" (unset, or "auto": the selection table). The
// whole value is checked at every call, so that a typo is reported at once, whichever
// operation it concerns: every op=name pair names an operation and an algorithm (or auto).
static std::string parameter_choice(CollOp op) {
  const std::string v = kCollAlgo.get();
  auto algorithm = [&](const std::string& name) {
    SYMCOMM_REQUIRE(name == "auto" || find(name.c_str()), symcommInvalidArgument,
                    "SYMCOMM_COLL_ALGO=%s names no collective algorithm '%s'", v.c_str(),
                    name.c_str());
    return name == "auto" ? std::string() : name;
  };
  if (v.find('=') == std::string::npos) return v.empty() ? v : algorithm(v);
  std::string mine;
  for (size_t at = 0; at <= v.size();) {
    size_t end = v.find(',', at);
    if (end == std::string::npos) end = v.size();
    const std::string pair = v.substr(at, end - at);
    at = end + 1;
    if (pair.empty()) continue;  // "a=x," or "a=x,,b=y"
    const size_t eq = pair.find('=');
    SYMCOMM_REQUIRE(eq != std::string::npos, symcommInvalidArgument,
                    "SYMCOMM_COLL_ALGO=%s: '%s' is not op=algorithm (a single name applies to "
                    "every operation and cannot be mixed with pairs)", v.c_str(), pair.c_str());
    const std::string key = pair.substr(0, eq), name = algorithm(pair.substr(eq + 1));
    bool known = false;
    for (CollOp o : kAllOps) known |= key == coll_op_name(o);
    SYMCOMM_REQUIRE(known, symcommInvalidArgument,
                    "SYMCOMM_COLL_ALGO=%s: '%s' is no collective operation (allgather, alltoall, "
                    "alltoallv, reducescatter, allreduce, broadcast, reduce, gather, scatter)", v.c_str(), key.c_str());
    if (key == coll_op_name(op)) mine = name;
  }
  return mine;
}

CollAlgorithm& choose_algorithm(const CollArgs& args, CollContext& ctx, const char* requested) {
  std::string name = requested && std::strcmp(requested, "auto") != 0 ? requested : "";
  const char* source = "the algorithm argument";
  if (name.empty()) {
    name = parameter_choice(args.op);
    source = "SYMCOMM_COLL_ALGO";
  }
  if (!name.empty()) {
    CollAlgorithm* a = find(name.c_str());
    SYMCOMM_REQUIRE(a, symcommInvalidArgument, "%s names no collective algorithm '%s'", source,
                    name.c_str());  // (SYMCOMM_COLL_ALGO's names are checked above)
    if (const Verdict v = a->refusal(args, ctx); !v)  // (in a capture: before anything is enqueued)
      SYMCOMM_THROW(symcommNotSupported, "collective algorithm '%s' cannot run %s here: %s",
                    name.c_str(), coll_op_name(args.op), v.reason().c_str());
    return *a;
  }
  // The measured selection table: the first matching row whose algorithm can run the call
  // (the rows after the first are the choices measured for the next sizes, closer to the
  // call than the registry's order); then the registry's order. The rows were measured on
  // one node: a team that spans nodes takes the registry's order (hier, then copy).
  // can_implement() and capturable() decide alike on every member, so all take the same
  // row. The rows' algorithms are looked
  // up once, when the table is read (every call goes through here: no name is compared, and
  // nothing is allocated unless an algorithm refuses, to word its reason).
  const SelectionCall call{args.op, args.team.size, args.bytes_per_rank(), args.symmetric,
                           spans_nodes(args.team, ctx.topology())};
  if (const SelectionRow* row = select_row(selection_table(), call, [&](const SelectionRow& r) {
        return r.impl->refusal(args, ctx).ok();
      }))
    return *row->impl;
  for (CollAlgorithm* a : coll_algorithms())
    if (a->refusal(args, ctx).ok()) return *a;
  std::string reasons;
  for (CollAlgorithm* a : coll_algorithms())
    reasons += format("\n  %s: %s", a->name(), a->refusal(args, ctx).reason().c_str());
  SYMCOMM_THROW(symcommNotSupported, "no collective algorithm can run %s here:%s",
                coll_op_name(args.op), reasons.c_str());
}

}  // namespace symcomm
