#include "coll/coll.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/param.h"
#include "coll/agreement.h"
#include "coll/selection.h"

namespace symcomm {

static const SizeParam kWorkspace(
    "SYMCOMM_COLL_WORKSPACE", "0",
    "symmetric workspace of the collectives, per rank (0: 64M on GPUs, 8M on the host)");
static const StringParam kCollAlgo(
    "SYMCOMM_COLL_ALGO", "",
    "collective algorithm to use instead of the selection table: a name for every operation, "
    "or op=name pairs (allgather=copy,allreduce=copy); auto (or op=auto): the table");

static const CollOp kAllOps[] = {CollOp::AllGather,     CollOp::AllToAll,
                                 CollOp::AllToAllv,     CollOp::ReduceScatter,
                                 CollOp::AllReduce,     CollOp::Broadcast};

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::AllGather: return "allgather";
    case CollOp::AllToAll: return "alltoall";
    case CollOp::AllToAllv: return "alltoallv";
    case CollOp::ReduceScatter: return "reducescatter";
    case CollOp::AllReduce: return "allreduce";
    case CollOp::Broadcast: return "broadcast";
  }
  return "?";
}

size_t type_size(symcommDataType_t type) {
  switch (type) {
    case symcommInt8: case symcommUint8: return 1;
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
    default: return count * elem;
  }
}

CollContext::CollContext(const Topology& topology, Heap& heap,
                         const Registrations& registrations, Rma& rma,
                         symcommMemorySpace_t space)
    : topology_(topology), heap_(heap), registrations_(registrations), rma_(rma), space_(space),
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
  const int pe = a.team.world_of(member);
  if (heap_.contains(p)) return static_cast<char*>(heap_.peer_ptr(p, pe));
  return registrations_.peer_ptr(p, pe);
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
  // The registry of collective algorithms: one line each, preferred first.
  static const std::vector<CollAlgorithm*> all = {
      make_sm_algorithm(),   make_copy_algorithm(),    make_nccl_algorithm(),
      make_ll_algorithm(),   make_twoshot_algorithm(), make_direct_algorithm(),
      make_relay_algorithm(), make_ce_algorithm(),
  };
  return all;
}

static CollAlgorithm* find(const char* name) {
  for (CollAlgorithm* a : coll_algorithms())
    if (std::strcmp(a->name(), name) == 0) return a;
  return nullptr;
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
                    "alltoallv, reducescatter, allreduce, broadcast)", v.c_str(), key.c_str());
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
    if (!a->supports(args, ctx)) {
      const std::string why = a->why_not(args, ctx);
      SYMCOMM_THROW(symcommNotSupported, "collective algorithm '%s' cannot run %s here%s%s",
                    name.c_str(), coll_op_name(args.op), why.empty() ? "" : ": ", why.c_str());
    }
    return *a;
  }
  // The measured selection table: the first matching row whose algorithm can run the call
  // (the rows after the first are the choices measured for the next sizes, closer to the
  // call than the registry's order); then the registry's order. supports() and capturable()
  // decide alike on every member, so all take the same row. The rows' algorithms are looked
  // up once, when the table is read (every call goes through here: no allocation, no name
  // compared).
  const SelectionCall call{args.op, args.team.size, args.bytes_per_rank(), args.symmetric};
  if (const SelectionRow* row = select_row(selection_table(), call, [&](const SelectionRow& r) {
        return r.impl->supports(args, ctx) && r.impl->capturable(args, ctx);
      }))
    return *row->impl;
  for (CollAlgorithm* a : coll_algorithms())
    if (a->supports(args, ctx) && a->capturable(args, ctx)) return *a;
  std::string reasons;
  for (CollAlgorithm* a : coll_algorithms())
    reasons += format("\n  %s: %s", a->name(), a->refusal(args, ctx).c_str());
  SYMCOMM_THROW(symcommNotSupported, "no collective algorithm can run %s here:%s",
                coll_op_name(args.op), reasons.c_str());
}

}  // namespace symcomm
