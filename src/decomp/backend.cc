// What every backend's descriptor asks of a communicator, checked once for all of them, each
// need with its reason.
#include "decomp/backend.h"

#include "base/error.h"
#include "nccl/nccl_comms.h"
#include "nccl/nccl_lib.h"

namespace symcomm {

namespace {

std::string space_names(unsigned spaces) {
  std::string names;
  for (symcommMemorySpace_t s : {symcommSpaceCuda, symcommSpaceHost})
    if (spaces & decomp_space_bit(s))
      names += (names.empty() ? "" : " and ") + std::string(s == symcommSpaceCuda ? "cuda" : "host");
  return names.empty() ? "no" : names;
}

// Why NCCL cannot move this decomposition's blocks ("" where it can).
std::string nccl_problem(const DecompContext& ctx) {
#ifdef SYMCOMM_HAVE_NCCL
  if (!ctx.nccl)
    return "it runs on the communicator's NCCL communicators, and the decomposition was made "
           "without them";
  if (!NcclLib::get()) return nccl_unavailable_reason();
  for (symcommTeam_t id : {ctx.row_team, ctx.col_team})
    if (std::string why = nccl_team_problem(ctx.rma.topology(), ctx.rma.teams().get(id));
        !why.empty())
      return why;
  return "";
#else
  (void)ctx;
  return nccl_unavailable_reason();
#endif
}

}  // namespace

Verdict DecompBackend::can_implement(const DecompContext& ctx) const {
  const DecompDescriptor& d = descriptor_;
  const symcommMemorySpace_t space = ctx.heap.space().kind();
  if (!(d.spaces & decomp_space_bit(space)))
    return Verdict::no(format("it runs in the %s memory space%s only, and this communicator's "
                              "is the %s memory space",
                              space_names(d.spaces).c_str(),
                              d.spaces & (d.spaces - 1) ? "s" : "",
                              space_names(decomp_space_bit(space)).c_str()));
  if (d.load_store_peers)
    if (std::string why = unmapped_peer(ctx); !why.empty()) return Verdict::no(why);
  if (d.nccl)
    if (std::string why = nccl_problem(ctx); !why.empty()) return Verdict::no(why);
  return own_conditions(ctx);
}

}  // namespace symcomm
