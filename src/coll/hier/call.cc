#include "coll/hier/call.h"

#include <algorithm>

namespace symcomm::hier {

Span part(size_t total, int parts, int index, size_t grain) {
  const size_t grains = (total + grain - 1) / grain, p = static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  const size_t begin = std::min(total, grains * i / p * grain);
  const size_t end = std::min(total, grains * (i + 1) / p * grain);
  return Span{begin, end - begin};
}

Call::Call(const CollArgs& args, CollContext& context, State& state, TeamNodes layout)
    : a(args), ctx(context), nodes(std::move(layout)), state_(state) {
  for (int l = 0; l < L(); ++l) node_members_.push_back(node_member(l));
  for (int k = 0; k < K(); ++k) rail_members_.push_back(rail_member(k));
}

void Call::put(int m, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || (m == a.me && dst == src)) return;
  if (m == a.me) ctx.backend().put(dst, src, bytes, symcommEngineCe, a.stream);
  else ctx.put_to(a, m, dst, src, bytes);
}

void Call::get(int m, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || (m == a.me && dst == src)) return;
  if (m == a.me) ctx.backend().put(dst, src, bytes, symcommEngineCe, a.stream);
  else ctx.get_from(a, m, dst, src, bytes);
}

void Call::reduce(void* dst, const void* src, size_t stride, int n, size_t count) {
  if (count) ctx.copies().reduce(dst, src, stride, n, count, a.type, a.redop, a.stream);
}

size_t Call::unit(size_t units) const {
  const size_t u = ctx.workspace_bytes() / units / 256 * 256;
  SYMCOMM_REQUIRE(u >= 256, symcommOutOfMemory,
                  "SYMCOMM_COLL_WORKSPACE (%zu bytes) is too small for hier's %zu areas on a "
                  "team of %d over %d nodes", ctx.workspace_bytes(), units, a.team.size, K());
  return u;
}

}  // namespace symcomm::hier
