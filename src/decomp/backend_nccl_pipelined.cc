// The "nccl_pipelined" backend (cuDecomp's NCCL_PL): the plans, boxes and workspace of "nccl"
// (so the output bytes are the same), with the exchange cut into one NCCL step per member so
// that packing and unpacking overlap the transfers. Two streams: the caller's, which packs
// and unpacks, and the decomposition's own NCCL stream (make_state, made with the
// decomposition), forked from the caller's and joined back with events, so that a transpose
// is still one piece of the caller's stream and can be captured in a CUDA graph.
//
// Transpose, per call, on a team of n with this rank at me (members mod n):
//   for step s = 1 .. n-1, to = me + s, from = me - s:
//     caller: pack the block for `to` into the send area
//     NCCL stream: wait for the caller (fork: the pack, and all the caller did before); one
//       group: ncclSend of the block to `to`, ncclRecv of the block from `from`; record
//       "step s arrived"
//   caller: this rank's own block, input to output (staged in the receive area when in place)
//   for step s = 1 .. n-1: wait for "step s arrived", unpack the block from `from`
//   caller: wait for the NCCL stream (join)
// While NCCL moves step s the caller packs step s + 1 (every pack is issued before the first
// unpack, so NCCL never waits behind an unpack) and, once the packs are done, unpacks the
// steps that have arrived. In place, the input is read to the end (packs, own block) before
// the first unpack writes the output; NCCL touches only the workspace.
//
// Why a step sends to me + s but receives from me - s: in step s every rank serves a
// different member each way, and `to` receives from this rank in the same step s, so every
// group is matched by groups of the same step elsewhere. A group with one member both ways
// (me + s) would be matched by that member's step n - s: NCCL kernels of different steps
// waiting for each other around the ring, a deadlock once a block outgrows NCCL's buffers.
// A step with neither a block to send nor one to receive makes no NCCL call (its partners
// skip theirs too: my block for `to` is the one `to` expects from me).
//
// The fork of each step orders the NCCL stream after the caller's previous work (a receive
// never overwrites a receive area that an earlier call's unpack still reads), the join
// orders the caller after the call's transfers (the send area is free again); a wait binds
// to the record issued just before it, so the events serve call after call, eager or
// replayed. Calls of one decomposition therefore must not be issued from several host
// threads at once (they share the stream and the events).
//
// Halo exchanges are the nccl backend's: two neighbours, one group.
#include "decomp/backend.h"
#include "nccl/nccl_comms.h"
#include "nccl/nccl_lib.h"

#ifdef SYMCOMM_HAVE_NCCL
#include <cuda_runtime.h>

#include <algorithm>

#include "base/cuda_runtime_check.h"
#endif

namespace symcomm {

namespace {

#ifdef SYMCOMM_HAVE_NCCL

// The decomposition's NCCL stream and its events, made on the communicator's device: per
// step one from the caller to the NCCL stream (forked) and one back (arrived), and the join.
// The stream has the device's highest priority: as the caller's pack and unpack kernels
// drain, the blocks of a waiting NCCL kernel are scheduled first, so a transfer does not wait
// for a whole copy kernel.
class NcclStream final : public DecompState {
 public:
  NcclStream(int device, int steps) : device(device) {
    DeviceScope scope(device);
    try {
      int least = 0, greatest = 0;
      SYMCOMM_CUDART(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      SYMCOMM_CUDART(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest));
      for (std::vector<cudaEvent_t>* list : {&forked, &arrived}) {
        list->assign(static_cast<size_t>(steps), nullptr);
        for (cudaEvent_t& e : *list)
          SYMCOMM_CUDART(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      }
      SYMCOMM_CUDART(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
    } catch (...) {
      release();
      throw;
    }
  }
  ~NcclStream() override { release(); }
  NcclStream(const NcclStream&) = delete;
  NcclStream& operator=(const NcclStream&) = delete;

  const int device;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> forked, arrived;  // [step]
  cudaEvent_t joined = nullptr;

 private:
  // Work still in flight completes first (CUDA defers the release); failures are logged.
  void release() noexcept {
    try {
      DeviceScope scope(device);
      cudaError_t worst = cudaSuccess;
      auto note = [&](cudaError_t e) { worst = worst == cudaSuccess ? e : worst; };
      for (std::vector<cudaEvent_t>* list : {&forked, &arrived})
        for (cudaEvent_t e : *list)
          if (e) note(cudaEventDestroy(e));
      if (joined) note(cudaEventDestroy(joined));
      if (stream) note(cudaStreamDestroy(stream));
      if (worst != cudaSuccess)
        SYMCOMM_WARN("releasing the nccl_pipelined stream: %s", cudaGetErrorString(worst));
    } catch (const Error& e) {
      SYMCOMM_WARN("releasing the nccl_pipelined stream: %s", e.what());
    }
  }
};

// One call's forks and joins between the caller's stream and the NCCL stream.
class Pipeline {
 public:
  Pipeline(NcclStream& s, cudaStream_t caller) : s_(s), caller_(caller) {}
  // On a path that threw: the caller's stream still waits for what was forked (errors
  // ignored: the one in flight is the one to report).
  ~Pipeline() {
    if (!forked_) return;
    (void)cudaEventRecord(s_.joined, s_.stream);
    (void)cudaStreamWaitEvent(caller_, s_.joined, 0);
  }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The NCCL stream waits for what the caller issued so far; returns the NCCL stream.
  cudaStream_t fork(int step) {
    SYMCOMM_CUDART(cudaEventRecord(s_.forked[static_cast<size_t>(step)], caller_));
    SYMCOMM_CUDART(cudaStreamWaitEvent(s_.stream, s_.forked[static_cast<size_t>(step)], 0));
    forked_ = true;
    return s_.stream;
  }
  // Marks what the NCCL stream was given so far as step `step`.
  void arrived(int step) {
    SYMCOMM_CUDART(cudaEventRecord(s_.arrived[static_cast<size_t>(step)], s_.stream));
  }
  // The caller waits for step `step`.
  void wait(int step) {
    SYMCOMM_CUDART(cudaStreamWaitEvent(caller_, s_.arrived[static_cast<size_t>(step)], 0));
  }
  // The caller waits for everything given to the NCCL stream.
  void join() {
    if (!forked_) return;
    SYMCOMM_CUDART(cudaEventRecord(s_.joined, s_.stream));
    SYMCOMM_CUDART(cudaStreamWaitEvent(caller_, s_.joined, 0));
    forked_ = false;
  }

 private:
  NcclStream& s_;
  cudaStream_t caller_;
  bool forked_ = false;
};

#endif  // SYMCOMM_HAVE_NCCL

constexpr DecompDescriptor kDescriptor = {
    .name = "nccl_pipelined",
    // After copy, before nccl: 0.63-1.32x nccl with communication
    // (bench/results/h200x4/decomp_497fdd2.jsonl).
    .preference = 60,
    .spaces = decomp_space_bit(symcommSpaceCuda),
    .load_store_peers = false,
    .nccl = true,
    .copies_wait_for_peers = false,
};

class NcclPipelinedBackend final : public DecompBackend {
 public:
  NcclPipelinedBackend() : DecompBackend(kDescriptor) {}

  // What it sets up, the workspace and the halo exchange: the nccl backend's.
  void prepare(const DecompContext& ctx) override { nccl_backend().prepare(ctx); }
  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return nccl_backend().transpose_workspace(ctx, elem);
  }
  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return nccl_backend().halo_workspace(ctx, axis, dim, elem, halo, padding);
  }
  void halo(const DecompContext& ctx, const HaloCall& h) override { nccl_backend().halo(ctx, h); }

#ifdef SYMCOMM_HAVE_NCCL
  std::unique_ptr<DecompState> make_state(const DecompContext& ctx) override {
    const auto& c = ctx.geometry.config();
    return std::make_unique<NcclStream>(ctx.rma.topology().device,
                                        std::max(c.pdims[0], c.pdims[1]));
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    auto* state = dynamic_cast<NcclStream*>(ctx.state);
    SYMCOMM_REQUIRE(state, symcommInternalError, "nccl_pipelined: the decomposition has no stream");
    DeviceScope scope(state->device);  // the caller's stream and the events: one device
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    const symcommTeam_t id = transpose_team(ctx, t.from, t.to);
    const Team& team = ctx.rma.teams().get(id);
    char* send = t.workspace;
    char* recv = t.workspace + transpose_workspace(ctx, e) / 2;
    const int n = static_cast<int>(plan.members.size()), me = plan.me;
    auto to_of = [&](int s) { return static_cast<size_t>((me + s) % n); };
    auto from_of = [&](int s) { return static_cast<size_t>((me - s + n) % n); };
    Pipeline pipe(*state, t.stream);
    if (team.size > 1)  // every member calls, in the same steps
      ctx.nccl->run(id, team, t.stream, [&](const NcclLib& lib, ncclComm_t comm) {
        for (int s = 1; s < n; ++s) {
          const size_t to = to_of(s), from = from_of(s);
          const size_t out = static_cast<size_t>(plan.send[to].count()) * e;
          const size_t in = static_cast<size_t>(plan.recv[from].count()) * e;
          if (out == 0 && in == 0) continue;
          move_box(ctx, send + plan.send_off[to] * se, packed_layout(plan.send[to]), t.input,
                   in_layout, plan.send[to], e, symcommEngineAuto, t.stream);
          const cudaStream_t stream = pipe.fork(s);
          nccl_group(lib, [&] {
            if (out > 0)
              SYMCOMM_NCCL(lib, ncclSend(send + plan.send_off[to] * se, out, ncclUint8,
                                         member_index(team, plan.members[to]), comm, stream));
            if (in > 0)
              SYMCOMM_NCCL(lib, ncclRecv(recv + plan.recv_off[from] * se, in, ncclUint8,
                                         member_index(team, plan.members[from]), comm, stream));
          });
          pipe.arrived(s);
        }
      });
    const size_t self = static_cast<size_t>(me);
    const Box& own = plan.send[self];
    if (in_place)  // the input is read to the end before the first unpack below
      move_box(ctx, recv + plan.recv_off[self] * se, packed_layout(own), t.input, in_layout, own, e,
               symcommEngineAuto, t.stream);
    else
      move_box(ctx, t.output, out_layout, t.input, in_layout, own, e, symcommEngineAuto, t.stream);
    for (int s = 1; s < n; ++s) {
      const size_t from = from_of(s);
      const Box& box = plan.recv[from];
      if (box.count() == 0) continue;
      pipe.wait(s);
      move_box(ctx, t.output, out_layout, recv + plan.recv_off[from] * se, packed_layout(box), box,
               e, symcommEngineAuto, t.stream);
    }
    if (in_place)
      move_box(ctx, t.output, out_layout, recv + plan.recv_off[self] * se, packed_layout(own), own,
               e, symcommEngineAuto, t.stream);
    pipe.join();
  }
#else
  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    nccl_backend().transpose(ctx, t);  // throws why NCCL is not available
  }
#endif
};

const Registered<DecompBackend, NcclPipelinedBackend> kRegistered(kDescriptor.preference);

}  // namespace

}  // namespace symcomm
