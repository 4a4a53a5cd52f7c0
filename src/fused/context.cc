#include "fused/fused.h"
#include "transport/transport.h"

namespace symcomm {

void team_barrier(FusedContext& ctx, symcommStream_t stream) {
  ctx.rma.backend().barrier(ctx.rma.barrier_args(ctx.team_id), stream);
}

Transport& member_transport(FusedContext& ctx, int member) {
  return ctx.rma.transports().to(ctx.team.world_of(member));
}

}  // namespace symcomm
