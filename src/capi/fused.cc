// Fused communication and computation (include/symcomm/fused.h): argument checks, the
// members' agreement on a plan, and the plan handles; src/fused/ does the work.
#include <cstring>
#include <memory>

#include "capi/guard.h"
#include "fused/fused.h"
#include "fused/team_agreement.h"

using namespace symcomm;

struct symcommFusedPlan {
  static constexpr uint64_t kMagic = 0x73796d667573656full;  // "symfuseo"
  uint64_t magic = kMagic;
  symcommComm* comm = nullptr;  // null once the communicator was finalized first
  FusedShape shape;
  symcommTeam_t team_id = 0;
  Team team;
  int me = 0;
  const FusedImplementation* implementation = nullptr;
  size_t workspace = 0;
};

namespace {

constexpr uint64_t kFusedTag = uint64_t{0x4655} << 48;  // "FU": the bootstrap tags of plans

// The team `id` of `c`, with this rank in it.
Team member_team(symcommComm& c, symcommTeam_t id, int* me) {
  const Team t = c.rma->teams().get(id);
  *me = t.index_of(c.topology.rank);
  SYMCOMM_REQUIRE(*me >= 0, symcommInvalidArgument, "rank %d is not a member of team %d",
                  c.topology.rank, id);
  return t;
}

FusedContext context(symcommComm& c, symcommTeam_t id, const Team& team, int me) {
  return FusedContext{c.space_kind, *c.bootstrap, c.topology, *c.heap, *c.rma, id, team, me};
}

// "field=value;..." of a checked shape, compared between members.
std::string describe(const FusedShape& s) {
  std::string d = format("op=%d;n=%lld;k=%lld;a_type=%d;b_type=%d;c_type=%d;b_transposed=%d;"
                         "gather_a=%d;implementation='%s'", static_cast<int>(s.op),
                         static_cast<long long>(s.n), static_cast<long long>(s.k),
                         static_cast<int>(s.a_type), static_cast<int>(s.b_type),
                         static_cast<int>(s.c_type), s.b_transposed ? 1 : 0, s.gather_a ? 1 : 0,
                         s.implementation.c_str());
  for (size_t i = 0; i < s.rows.size(); ++i)
    d += format(";rows[%zu]=%lld", i, static_cast<long long>(s.rows[i]));
  for (size_t i = 0; i < s.cols.size(); ++i)
    d += format(";cols[%zu]=%lld", i, static_cast<long long>(s.cols[i]));
  return d;
}

symcommFusedPlan& checked_plan(symcommFusedPlan_t plan) {
  SYMCOMM_REQUIRE(plan != nullptr, symcommInvalidArgument, "plan is NULL");
  SYMCOMM_REQUIRE(plan->magic == symcommFusedPlan::kMagic, symcommInvalidUsage,
                  "plan %p is not a live fused plan (destroyed, or never made)",
                  static_cast<void*>(plan));
  SYMCOMM_REQUIRE(plan->comm != nullptr, symcommInvalidUsage,
                  "the plan's communicator was finalized: destroy the plan");
  checked(plan->comm);  // its rank in the log; a lost rank named in the call's error
  return *plan;
}

// A buffer that must be given where its part is not empty (and may be NULL where it is).
void require_buffer(const void* p, size_t bytes, const char* name) {
  SYMCOMM_REQUIRE(p != nullptr || bytes == 0, symcommInvalidArgument,
                  "%s is NULL, but this member's part of it holds %zu bytes", name, bytes);
}

}  // namespace

extern "C" symcommResult_t symcommFusedConfigInit(symcommFusedConfig_t* config) {
  return guarded([] { return std::string("symcommFusedConfigInit"); }, [&] {
    SYMCOMM_REQUIRE_ARG(config);
    std::memset(config, 0, sizeof *config);
    config->struct_size = sizeof *config;
    config->magic = SYMCOMM_FUSED_CONFIG_MAGIC;
    config->op = symcommFusedAllGatherGemm;
    config->a_type = config->b_type = config->c_type = symcommBfloat16;
  });
}

extern "C" int symcommFusedImplementationCount(void) {
  return static_cast<int>(Registry<FusedImplementation>::instance().all().size());
}

extern "C" const char* symcommFusedImplementationName(int index) {
  const auto& all = Registry<FusedImplementation>::instance().all();
  if (index < 0 || static_cast<size_t>(index) >= all.size()) return nullptr;
  return all[static_cast<size_t>(index)]->name();
}

extern "C" symcommResult_t symcommFusedCanImplement(symcommComm_t comm, symcommTeam_t team,
                                                    const symcommFusedConfig_t* config,
                                                    char* why, size_t why_bytes) {
  if (why && why_bytes) why[0] = '\0';
  const symcommResult_t rc =
      guarded([&] { return format("symcommFusedCanImplement(team=%d)", team); }, [&] {
        symcommComm& c = checked(comm);
        int me = 0;
        const Team t = member_team(c, team, &me);
        const FusedShape shape = check_fused_config(config, t.size);
        choose_fused(shape, context(c, team, t, me));
      });
  if (rc != symcommSuccess && why && why_bytes) {
    std::strncpy(why, symcommGetLastError(), why_bytes - 1);
    why[why_bytes - 1] = '\0';
  }
  return rc;
}

extern "C" symcommResult_t symcommFusedPlanCreate(symcommComm_t comm, symcommTeam_t team,
                                                  const symcommFusedConfig_t* config,
                                                  symcommFusedPlan_t* plan) {
  return guarded([&] { return format("symcommFusedPlanCreate(team=%d)", team); }, [&] {
    symcommComm& c = checked(comm);
    if (plan) *plan = nullptr;
    c.check_live();
    int me = 0;
    const Team t = member_team(c, team, &me);  // (a non-member takes no part)
    // Every member's checks, then the agreement: a member whose checks failed fails every
    // member with its reason, rather than leaving them waiting.
    auto p = std::make_unique<symcommFusedPlan>();
    symcommResult_t code = symcommSuccess;
    std::string text;
    try {
      SYMCOMM_REQUIRE_ARG(plan);
      p->shape = check_fused_config(config, t.size);
      FusedContext ctx = context(c, team, t, me);
      p->implementation = &choose_fused(p->shape, ctx);
      p->workspace = p->implementation->workspace_bytes(p->shape, ctx);
      text = describe(p->shape) + format(";chosen=%s;workspace=%zu",
                                         p->implementation->name(), p->workspace);
    } catch (const Error& e) {
      code = e.code();
      text = e.what();
    }
    const uint64_t number = c.fused_plans[team]++;
    agree_over_team(*c.bootstrap, t, me, kFusedTag | (uint64_t(team) << 32 & 0xffff00000000ull) |
                                             (number & 0xffffffffull),
                    code, text, "symcommFusedPlanCreate");
    p->comm = &c;
    p->team_id = team;
    p->team = t;
    p->me = me;
    symcommFusedPlan* raw = p.get();
    c.dependents[raw] = [raw] { raw->comm = nullptr; };
    *plan = p.release();
  });
}

extern "C" symcommResult_t symcommFusedPlanDestroy(symcommFusedPlan_t plan) {
  return guarded([] { return std::string("symcommFusedPlanDestroy"); }, [&] {
    SYMCOMM_REQUIRE(plan != nullptr, symcommInvalidArgument, "plan is NULL");
    SYMCOMM_REQUIRE(plan->magic == symcommFusedPlan::kMagic, symcommInvalidUsage,
                    "plan %p is not a live fused plan (destroyed, or never made)",
                    static_cast<void*>(plan));
    if (plan->comm) plan->comm->dependents.erase(plan);
    // The handle is kept, dead, as a communicator's is: a stale one is known as destroyed.
    plan->magic = 0;
    plan->comm = nullptr;
  });
}

extern "C" symcommResult_t symcommFusedPlanImplementation(symcommFusedPlan_t plan,
                                                          const char** name) {
  return guarded([] { return std::string("symcommFusedPlanImplementation"); }, [&] {
    symcommFusedPlan& p = checked_plan(plan);
    SYMCOMM_REQUIRE_ARG(name);
    *name = p.implementation->name();
  });
}

extern "C" symcommResult_t symcommFusedWorkspaceSize(symcommFusedPlan_t plan, size_t* bytes) {
  return guarded([] { return std::string("symcommFusedWorkspaceSize"); }, [&] {
    symcommFusedPlan& p = checked_plan(plan);
    SYMCOMM_REQUIRE_ARG(bytes);
    *bytes = p.workspace;
  });
}

extern "C" symcommResult_t symcommFusedRun(symcommFusedPlan_t plan, const void* a,
                                           const void* b, void* c_out, void* gathered,
                                           void* workspace, symcommStream_t stream) {
  return guarded([] { return std::string("symcommFusedRun"); }, [&] {
    symcommFusedPlan& p = checked_plan(plan);
    symcommComm& c = *p.comm;
    c.check_live();
    check_stream(c, stream);
    const FusedShape& s = p.shape;
    const size_t me = static_cast<size_t>(p.me);
    const size_t ea = fused_element_bytes(s.a_type), ec = fused_element_bytes(s.c_type);
    size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
    if (s.op == symcommFusedAllGatherGemm) {
      a_bytes = static_cast<size_t>(s.rows[me] * s.k) * ea;
      b_bytes = static_cast<size_t>(s.k * s.n) * ea;
      c_bytes = static_cast<size_t>(s.m * s.n) * ec;
    } else if (s.op == symcommFusedGemmReduceScatter) {
      a_bytes = static_cast<size_t>(s.m * s.cols[me]) * ea;
      b_bytes = static_cast<size_t>(s.cols[me] * s.n) * ea;
      c_bytes = static_cast<size_t>(s.rows[me] * s.n) * ec;
    } else {
      a_bytes = c_bytes = static_cast<size_t>(s.n * s.cols[me]) * ea;
    }
    require_buffer(a, a_bytes, "a");
    require_buffer(b, b_bytes, "b");
    require_buffer(c_out, c_bytes, "c");
    if (s.gather_a) require_buffer(gathered, static_cast<size_t>(s.m * s.k) * ea, "gathered");
    else
      SYMCOMM_REQUIRE(gathered == nullptr, symcommInvalidArgument,
                      "gathered is given, but the plan does not gather A (gather_a is 0)");
    if (p.workspace) {
      SYMCOMM_REQUIRE(workspace != nullptr, symcommInvalidArgument,
                      "workspace is NULL: the plan needs %zu bytes of symmetric workspace "
                      "(symcommFusedWorkspaceSize)", p.workspace);
      SYMCOMM_REQUIRE(c.heap->contains(workspace), symcommInvalidArgument,
                      "workspace %p is not symmetric (symcommMalloc): peers write into it",
                      workspace);
      c.heap->require_in_allocation(workspace, p.workspace, "workspace");
    }
    if (s.op == symcommFusedTransposeAccumulate && a_bytes) {
      SYMCOMM_REQUIRE(c.heap->contains(a), symcommInvalidArgument,
                      "a %p is not symmetric (symcommMalloc): the members read X from it", a);
      c.heap->require_in_allocation(a, a_bytes, "a");
    }
    FusedContext ctx = context(c, p.team_id, p.team, p.me);
    p.implementation->run(s, ctx, FusedBuffers{a, b, c_out, gathered, workspace}, stream);
  });
}
