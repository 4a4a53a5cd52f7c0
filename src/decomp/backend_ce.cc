// The "ce" backend: transposes moved by the copy engines alone, no pack and no unpack
// kernel. Each block goes from this rank's input to its place in the member's memory as one
// strided copy (RmaBackend::copy_box_ce: a cudaMemcpy2D/3D), one member after another on the
// caller's stream: a copy engine moves about 386 GB/s per GPU that way in an all-to-all on
// H200, and less with copies to several peers at once (tools/probe/ce_a2a.cu). The SMs stay
// free for the caller's computation, except for the two barriers.
//
// Transpose, per call:
//   my own block, on the decomposition's side stream (forked from the caller's stream, joined
//     after the second barrier), so that it overlaps the copies to the members: input ->
//     output, or -> my workspace where the transpose is in place
//   barrier                     every member is done with what it writes into below
//   for each other member, starting with the next one: my block for it ->
//     direct: its output, in its output layout (the output is symmetric, not in place)
//     staged: its workspace, packed at the place the plan gives my block
//   barrier                     every block has landed (each member's copies come before its
//                               arrival on its stream)
//   staged: every block from my workspace -> my output
// Blocks whose layouts a copy engine cannot walk (axis-contiguous pencils, whose memory order
// differs between input and output) are copied by the backend's box kernel instead
// (move_box): those transposes use SMs.
//
// The side stream and its two events belong to the decomposition (make_state, in the cuda
// space; in the host space, and without a state, the own block is copied on the caller's
// stream first). Calls of one decomposition therefore must not be issued from several host
// threads at once.
//
// Halo exchanges are ce_pipelined's: copy-engine puts with signals.
#include <cuda_runtime.h>

#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "coll/coll.h"
#include "decomp/backend.h"

namespace symcomm {

namespace {

// The decomposition's side stream, for the own block, and the events of its fork and join.
class Aside final : public DecompState {
 public:
  explicit Aside(int device) : device(device) {
    DeviceScope scope(device);
    try {
      SYMCOMM_CUDART(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      SYMCOMM_CUDART(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
      SYMCOMM_CUDART(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Aside() override { release(); }
  Aside(const Aside&) = delete;
  Aside& operator=(const Aside&) = delete;

  const int device;
  cudaStream_t stream = nullptr;
  cudaEvent_t forked = nullptr, joined = nullptr;

 private:
  // Work still in flight completes first (CUDA defers the release); failures are logged.
  void release() noexcept {
    cudaError_t worst = cudaSuccess;
    auto note = [&](cudaError_t e) { worst = worst == cudaSuccess ? e : worst; };
    if (forked) note(cudaEventDestroy(forked));
    if (joined) note(cudaEventDestroy(joined));
    if (stream) note(cudaStreamDestroy(stream));
    if (worst != cudaSuccess)
      SYMCOMM_WARN("releasing the ce decomposition stream: %s", cudaGetErrorString(worst));
  }
};

// One call's fork of the side stream from the caller's stream, and the join; a path that
// threw still joins (errors ignored: the one in flight is the one to report), so that a
// capture is not left with a dangling fork.
class Fork {
 public:
  Fork(Aside& a, cudaStream_t caller) : a_(a), caller_(caller) {
    SYMCOMM_CUDART(cudaEventRecord(a_.forked, caller_));
    SYMCOMM_CUDART(cudaStreamWaitEvent(a_.stream, a_.forked, 0));
  }
  ~Fork() {
    if (!joined_) {
      (void)cudaEventRecord(a_.joined, a_.stream);
      (void)cudaStreamWaitEvent(caller_, a_.joined, 0);
    }
  }
  Fork(const Fork&) = delete;
  Fork& operator=(const Fork&) = delete;
  void join() {
    joined_ = true;
    SYMCOMM_CUDART(cudaEventRecord(a_.joined, a_.stream));
    SYMCOMM_CUDART(cudaStreamWaitEvent(caller_, a_.joined, 0));
  }

 private:
  Aside& a_;
  cudaStream_t caller_;
  bool joined_ = false;
};

class CeBackend final : public DecompBackend {
 public:
  const char* name() const override { return "ce"; }

  bool supports(const DecompContext& ctx) const override { return all_peers_mapped(ctx); }

  // The staged path's receive area.
  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  std::unique_ptr<DecompState> make_state(const DecompContext& ctx) override {
    if (!ctx.coll || ctx.coll->space() != symcommSpaceCuda) return nullptr;
    return std::make_unique<Aside>(ctx.coll->topology().device);
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const Geometry& g = ctx.geometry;
    const ExchangePlan plan = plan_exchange(g, ctx.rank, t.from, t.to);
    const size_t e = t.elem;
    const int64_t se = static_cast<int64_t>(e);
    RmaBackend& b = ctx.rma.backend();
    const BarrierArgs barrier = ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to));
    const BoxLayout in_layout = pencil_layout(t.in), out_layout = pencil_layout(t.out);
    const bool in_place = overlaps(t.input, static_cast<size_t>(t.in.size) * e, t.output,
                                   static_cast<size_t>(t.out.size) * e);
    const bool direct = ctx.heap.contains(t.output) && !in_place;
    auto copy = [&](void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                    const Box& box, symcommStream_t stream) {
      if (!b.copy_box_ce(dst, dl, src, sl, box.lo, box.hi, e, stream))
        move_box(b, dst, dl, src, sl, box, e, symcommEngineCe, stream);
    };
    const int n = static_cast<int>(plan.members.size()), me = plan.me;
    const size_t self = static_cast<size_t>(me);
    // Where member k's block goes: its output (direct), else its receive area (packed).
    auto place = [&](size_t k) -> std::pair<void*, BoxLayout> {
      const int member = plan.members[k];
      if (direct)
        return {member == ctx.rank ? t.output : peer_address(ctx, t.output, member),
                pencil_layout(g.pencil(member, t.to, t.out.halo, t.out.padding))};
      char* area = t.workspace + plan.remote_off[k] * se;
      return {member == ctx.rank ? area : peer_address(ctx, area, member),
              packed_layout(plan.send[k])};
    };
    // My own block: to my output, unless in place (then staged in my receive area); beside
    // the copies to the members where there are any.
    auto* aside = n > 1 ? dynamic_cast<Aside*>(ctx.state) : nullptr;
    std::unique_ptr<Fork> fork;
    if (aside) {
      DeviceScope scope(aside->device);
      fork = std::make_unique<Fork>(*aside, t.stream);
    }
    const symcommStream_t own_stream = aside ? aside->stream : t.stream;
    if (plan.send[self].count() > 0) {
      if (in_place) {
        const auto [there, layout] = place(self);
        copy(there, layout, t.input, in_layout, plan.send[self], own_stream);
      } else {
        copy(t.output, out_layout, t.input, in_layout, plan.send[self], own_stream);
      }
    }
    if (n > 1) b.barrier(barrier, t.stream);  // a team of one has nobody to wait for
    for (int s = 1; s < n; ++s) {
      const size_t k = static_cast<size_t>((me + s) % n);
      if (plan.send[k].count() == 0) continue;
      const auto [there, layout] = place(k);
      copy(there, layout, t.input, in_layout, plan.send[k], t.stream);
    }
    if (n > 1) b.barrier(barrier, t.stream);
    if (fork) {
      DeviceScope scope(aside->device);
      fork->join();
    }
    if (direct) return;
    for (int k = 0; k < n; ++k) {
      const Box& box = plan.recv[static_cast<size_t>(k)];
      if (box.count() > 0 && (k != me || in_place))
        copy(t.output, out_layout, t.workspace + plan.recv_off[static_cast<size_t>(k)] * se,
             packed_layout(box), box, t.stream);
    }
  }

  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return make_ce_pipelined_backend()->halo_workspace(ctx, axis, dim, elem, halo, padding);
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    make_ce_pipelined_backend()->halo(ctx, h);
  }
};

}  // namespace

DecompBackend* make_ce_backend() {
  static CeBackend backend;
  return &backend;
}

}  // namespace symcomm
