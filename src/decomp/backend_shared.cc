// Pieces the transpose and halo backends share: peer addresses, the contiguity test behind
// the pack and unpack shortcuts, translated layouts for slabs read in place.
#include <algorithm>

#include "base/error.h"
#include "decomp/backend.h"
#include "memory/peer_address.h"

namespace symcomm {

std::string unmapped_peer(const DecompContext& ctx) {
  const std::vector<char*>& windows = ctx.heap.windows();
  for (size_t r = 0; r < windows.size(); ++r)
    if (!windows[r])
      return "it loads and stores every rank's heap: " +
             ctx.rma.topology().why_inaccessible(static_cast<int>(r));
  return "";
}

bool transport_takes_as_is(const DecompContext& ctx, const Transport& transport, const void* p,
                           size_t bytes) {
  if (transport.load_store()) return true;
  // The heap is registered with every transport as it grows.
  if (ctx.heap.contains(p)) return bytes <= ctx.heap.mapped() - ctx.heap.offset_of(p);
  return transport.registered_buffers() && ctx.registrations &&
         ctx.registrations->find(p, bytes) != nullptr;
}

bool chosen_unasked(const DecompBackend& b, const Heap& heap) {
  if (!b.descriptor().for_unmapped_ranks) return true;
  for (char* window : heap.windows())
    if (!window) return true;
  return false;
}

size_t signal_words_bytes(int count) {
  return (static_cast<size_t>(count) * sizeof(uint64_t) + 255) / 256 * 256;
}

int largest_team(const Geometry& g) {
  return std::max(g.config().pdims[0], g.config().pdims[1]);
}

char* peer_address(const DecompContext& ctx, const void* p, int rank) {
  char* there = symcomm::peer_address(ctx.heap, nullptr, p, rank);
  SYMCOMM_REQUIRE(there, symcommNotSupported, "rank %d is not load/store accessible", rank);
  return there;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

bool packed_run(const Box& box, const BoxLayout& l) {
  // Walking x, then y, then z must advance the offset by exactly one element each step; an
  // axis of extent 1 takes no step, so its stride does not matter.
  int64_t expected = 1;
  for (int a = 0; a < 3; ++a) {
    const int64_t extent = box.hi[a] - box.lo[a];
    if (extent > 1 && l.stride[a] != expected) return false;
    expected *= std::max<int64_t>(extent, 1);
  }
  return true;
}

TransposeFrame::TransposeFrame(const DecompContext& ctx, const TransposeCall& t)
    : plan(plan_exchange(ctx.geometry, ctx.rank, t.from, t.to)),
      e(t.elem),
      se(static_cast<int64_t>(t.elem)),
      in_layout(pencil_layout(t.in)),
      out_layout(pencil_layout(t.out)),
      in_place(overlaps(t.input, static_cast<size_t>(t.in.size) * t.elem, t.output,
                        static_cast<size_t>(t.out.size) * t.elem)) {}

bool in_place_on_any_member(const DecompContext& ctx, const TransposeCall& t,
                            const ExchangePlan& plan) {
  // A buffer outside the heap is this rank's own: it can overlap only this rank's other one.
  if (!ctx.heap.contains(t.input) || !ctx.heap.contains(t.output))
    return overlaps(t.input, static_cast<size_t>(t.in.size) * t.elem, t.output,
                    static_cast<size_t>(t.out.size) * t.elem);
  const Geometry& g = ctx.geometry;
  for (int member : plan.members) {
    const int64_t in = g.pencil(member, t.from, t.in.halo, t.in.padding).size;
    const int64_t out = g.pencil(member, t.to, t.out.halo, t.out.padding).size;
    if (overlaps(t.input, static_cast<size_t>(in) * t.elem, t.output,
                 static_cast<size_t>(out) * t.elem))
      return true;
  }
  return false;
}

HaloFrame::HaloFrame(const DecompContext& ctx, const HaloCall& h)
    : plan(plan_halo(ctx.geometry, ctx.rank, h.axis, h.dim, h.halo, h.padding, h.periodic)),
      e(h.elem),
      slot(largest_halo_slab(ctx, h.axis, h.dim, h.halo, h.padding) * h.elem),
      layout(pencil_layout(ctx.geometry.pencil(ctx.rank, h.axis, h.halo, h.padding))) {}

BoxLayout translated(BoxLayout l, int dim, int64_t delta) {
  l.origin[dim] += delta;
  return l;
}

void move_box(const DecompContext& ctx, void* dst, const BoxLayout& dl, const void* src,
              const BoxLayout& sl, const Box& box, size_t elem, symcommEngine_t engine,
              symcommStream_t stream) {
  const int64_t n = box.count();
  if (n == 0) return;
  if (packed_run(box, dl) && packed_run(box, sl)) {
    const int64_t se = static_cast<int64_t>(elem);
    ctx.rma.backend().put(
        static_cast<char*>(dst) + dl.offset(box.lo[0], box.lo[1], box.lo[2]) * se,
        static_cast<const char*>(src) + sl.offset(box.lo[0], box.lo[1], box.lo[2]) * se,
        static_cast<size_t>(n) * elem, engine, stream);
    return;
  }
  ctx.copies.copy_box(dst, dl, src, sl, box.lo, box.hi, elem, stream);
}

void BoxCopies::add(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                    const Box& box, int peer) {
  const int64_t n = box.count();
  if (n == 0) return;
  if (!(packed_run(box, dl) && packed_run(box, sl))) {
    copies_.push_back({dst, dl, src, sl, {box.lo[0], box.lo[1], box.lo[2]},
                       {box.hi[0], box.hi[1], box.hi[2]}, peer});
    return;
  }
  // One run of n elements.
  const int64_t se = static_cast<int64_t>(elem_);
  append_linear_copy(copies_, static_cast<char*>(dst) + dl.offset(box.lo[0], box.lo[1], box.lo[2]) * se,
                     static_cast<const char*>(src) + sl.offset(box.lo[0], box.lo[1], box.lo[2]) * se,
                     n, elem_, peer);
}

void BoxCopies::run(const DecompContext& ctx, symcommStream_t stream) {
  if (!copies_.empty()) ctx.copies.copy_boxes(copies_, elem_, stream);
  copies_.clear();
}

void BoxCopies::run_between_barriers(const DecompContext& ctx, const BarrierArgs& barrier,
                                     symcommStream_t stream) {
  ctx.copies.copy_boxes_between_barriers(barrier, copies_, elem_, stream);
  copies_.clear();
}

void unpack_all(const DecompContext& ctx, const ExchangePlan& plan, const TransposeCall& t,
                const char* recv) {
  const BoxLayout out = pencil_layout(t.out);
  BoxCopies copies(t.elem);
  for (size_t k = 0; k < plan.members.size(); ++k)
    copies.add(t.output, out, recv + plan.recv_off[k] * static_cast<int64_t>(t.elem),
               packed_layout(plan.recv[k]), plan.recv[k]);
  copies.run(ctx, t.stream);
}

size_t largest_halo_slab(const DecompContext& ctx, int axis, int dim, const int64_t* halo,
                         const int64_t* padding) {
  const auto& c = ctx.geometry.config();
  int64_t most = 0;
  for (int r = 0; r < c.pdims[0] * c.pdims[1]; ++r)
    most = std::max(most, plan_halo(ctx.geometry, r, axis, dim, halo, padding, true).slab);
  return static_cast<size_t>(most);
}

symcommTeam_t transpose_team(const DecompContext& ctx, int from, int to) {
  return from + to == 1 ? ctx.col_team : ctx.row_team;
}

symcommTeam_t halo_team(const DecompContext& ctx, bool over_rows) {
  return over_rows ? ctx.col_team : ctx.row_team;
}

int member_index(const Team& team, int rank) {
  const int i = team.index_of(rank);
  SYMCOMM_REQUIRE(i >= 0, symcommInternalError, "rank %d is not in the exchange's team", rank);
  return i;
}

void halo_from_self(const DecompContext& ctx, const HaloCall& h, const HaloPlan& plan) {
  const BoxLayout layout =
      pencil_layout(ctx.geometry.pencil(ctx.rank, h.axis, h.halo, h.padding));
  // My low halo holds my own high slab (wrapped around), my high halo my low slab; halo and
  // slab never overlap (a part holds at least halo[dim] points).
  const struct {
    const HaloSide& into;
    const HaloSide& from;
  } sides[] = {{plan.low, plan.high}, {plan.high, plan.low}};
  for (const auto& s : sides) {
    if (s.into.neighbour < 0) continue;
    const int64_t delta = s.into.recv.lo[h.dim] - s.from.send.lo[h.dim];
    move_box(ctx, h.buffer, layout, h.buffer, translated(layout, h.dim, delta),
             s.into.recv, h.elem, symcommEngineCe, h.stream);
  }
}

}  // namespace symcomm
