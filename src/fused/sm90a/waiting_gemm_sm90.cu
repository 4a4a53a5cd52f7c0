// The waiting GEMM (fused/waiting_gemm.h) on Hopper: CUTLASS's persistent, warp-specialised
// cooperative kernel (TMA loads into a pipeline of shared-memory stages, two consumer warp
// groups of WGMMA, a TMA epilogue), whose mainloop producer waits for a tile's rows of A
// before it loads them. Everything else is CUTLASS's own.
//
// The wait: every lane of the producer warp polls the flag of each member whose rows the
// tile's block of BLK_M rows holds (acquire loads at system scope, as the device API's
// waits), then fences the generic proxy against the async proxy, so that the TMA loads that
// follow read what the flag's writer wrote before it.
//
// Instantiated for float16 and bfloat16 inputs, outputs in the inputs' type or float32, and
// B row-major or transposed: 8 kernels, 128 x 128 x 64 tiles, clusters of one CTA.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "fused/sm90a/cutlass_common.cuh"
#include "fused/waiting_gemm.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

using namespace cute;  // NOLINT: CUTLASS's shapes (_128, Shape, get) read as in its examples

// CUTLASS's mainloop collective, whose load() first waits for the tile's rows.
// CUTLASS's kernel entry (its device_kernel), as a kernel of this file.
template <class GemmKernel>
__global__ void __launch_bounds__(GemmKernel::MaxThreadsPerBlock,
                                  GemmKernel::MinBlocksPerMultiprocessor)
    waiting_gemm_kernel(const __grid_constant__ typename GemmKernel::Params params) {
  extern __shared__ char shared[];
  GemmKernel op;
  op(params, shared);
}

template <class Base>
struct WaitingMainloop : Base {
  using TileShape = typename Base::TileShape;
  static constexpr int kBlockM = size<0>(TileShape{});

  struct Arguments : Base::Arguments {
    RowArrival arrival;
  };
  struct Params : Base::Params {
    RowArrival arrival;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem,
                                                  Arguments const& args, void* workspace) {
    return Params{Base::to_underlying_arguments(problem, args, workspace), args.arrival};
  }

  // Rows [m0, m0 + kBlockM) of A: waits for each member that holds some of them.
  CUTLASS_DEVICE static void wait_rows(RowArrival const& w, int64_t m0) {
    bool waited = false;
    for (int t = 0; t < w.members; ++t) {
      const int64_t lo = w.row_start[t], hi = w.row_start[t + 1];
      if (t == w.me || lo == hi || hi <= m0 || lo >= m0 + kBlockM) continue;
      detail::wait_local(w.comm, w.flags + t, symcommCmpGe, 1);
      waited = true;
    }
    if (waited) asm volatile("fence.proxy.async.global;" ::: "memory");
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState state,
                           cute::tuple<TensorA, TensorB> const& inputs,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter,
                           int k_tile_count, int thread_idx, uint32_t block_rank_in_cluster,
                           typename Base::TensorStorage& shared_tensors) {
    wait_rows(params.arrival, static_cast<int64_t>(cute::get<0>(blk_coord)) * kBlockM);
    Base::load(params, pipeline, state, inputs, blk_coord, k_tile_iter, k_tile_count,
               thread_idx, block_rank_in_cluster, shared_tensors);
  }
};

// Everything a call's kernel parameters are made from, zeroed first (memcmp compares it).
struct CallKey {
  int device;
  int64_t m, n, k;
  const void *a, *b, *c;
  const uint64_t* flags;
  int32_t members, me;
  int32_t row_start[SYMCOMM_FUSED_MAX_MEMBERS + 1];
  const void *error, *abort_flag;  // the communicator
  int max_ctas;
};

CallKey key_of(const WaitingGemmCall& call, int device) {
  CallKey key;
  std::memset(&key, 0, sizeof key);
  key.device = device;
  key.m = call.m, key.n = call.n, key.k = call.k;
  key.a = call.a, key.b = call.b, key.c = call.c;
  const RowArrival& w = call.arrival;
  key.flags = w.flags;
  key.members = w.members, key.me = w.me;
  std::memcpy(key.row_start, w.row_start, sizeof key.row_start);
  key.error = w.comm.error, key.abort_flag = const_cast<const int32_t*>(w.comm.abort_flag);
  key.max_ctas = call.max_ctas;
  return key;
}


template <class In, class Out, bool kBTransposed>
struct Kernel {
  using ElementA = typename Cutlass<In>::type;
  using ElementD = typename Cutlass<Out>::type;
  using LayoutA = cutlass::layout::RowMajor;
  // B [K, N] row-major is CUTLASS's RowMajor B; [N, K] row-major (op T) its ColumnMajor.
  using LayoutB =
      std::conditional_t<kBTransposed, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignIn = 16 / sizeof(ElementA);
  static constexpr int kAlignOut = 16 / sizeof(ElementD);

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignOut,
      ElementD, LayoutD, kAlignOut,
      cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, kAlignIn, ElementA,
      LayoutB, kAlignIn, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>,
                                                          WaitingMainloop<BaseMainloop>, Epilogue,
                                                          cutlass::gemm::PersistentScheduler>;

  static void run(const WaitingGemmCall& call, int device, cudaStream_t stream) {
    const typename GemmKernel::Params params = params_of(call, device);
    const int smem = GemmKernel::SharedStorageSize;
    allow_shared_memory<waiting_gemm_kernel<GemmKernel>>(device, smem);
    waiting_gemm_kernel<GemmKernel><<<GemmKernel::get_grid_shape(params),
                                      GemmKernel::get_block_shape(), smem, stream>>>(params);
    SYMCOMM_CUDART(cudaGetLastError());
  }

  // The kernel's parameters for `call` (ParamsCache).
  static typename GemmKernel::Params params_of(const WaitingGemmCall& call, int device) {
    static ParamsCache<CallKey, typename GemmKernel::Params> cache;
    return cache.get(key_of(call, device), [&] { return make_params(call, device); });
  }

  static typename GemmKernel::Params make_params(const WaitingGemmCall& call, int device) {
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    using StrideD = typename GemmKernel::StrideD;
    const int m = static_cast<int>(call.m), n = static_cast<int>(call.n),
              k = static_cast<int>(call.k);
    typename GemmKernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {m, n, k, 1};
    args.mainloop.ptr_A = static_cast<const ElementA*>(call.a);
    args.mainloop.dA = packed_stride<StrideA>(m, k);
    args.mainloop.ptr_B = static_cast<const ElementA*>(call.b);
    args.mainloop.dB = packed_stride<StrideB>(n, k);
    args.mainloop.arrival = call.arrival;
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = packed_stride<StrideD>(m, n);
    args.epilogue.ptr_D = static_cast<ElementD*>(call.c);
    args.epilogue.dD = packed_stride<StrideD>(m, n);
    args.hw_info = hardware(device, call.max_ctas);
    SYMCOMM_REQUIRE(GemmKernel::can_implement(args), symcommInvalidArgument,
                    "the fused GEMM kernel cannot multiply [%d, %d] x [%d, %d] (CUTLASS's "
                    "can_implement: alignment)", m, k, k, n);
    SYMCOMM_REQUIRE(GemmKernel::get_workspace_size(args) == 0, symcommInternalError,
                    "the fused GEMM kernel asks for a workspace");
    return GemmKernel::to_underlying_arguments(args, nullptr);
  }

  // The device's SMs (CUTLASS's persistent grid is one CTA an SM), at most max_ctas.
  static cutlass::KernelHardwareInfo hardware(int device, int max_ctas) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    SYMCOMM_CUDART(cudaDeviceGetAttribute(&hw.sm_count, cudaDevAttrMultiProcessorCount, device));
    if (max_ctas > 0) hw.sm_count = std::min(hw.sm_count, max_ctas);
    return hw;
  }
};

template <class In, class Out>
void run_typed(const WaitingGemmCall& call, int device, cudaStream_t stream) {
  if (call.b_transposed) Kernel<In, Out, true>::run(call, device, stream);
  else Kernel<In, Out, false>::run(call, device, stream);
}

template <class In>
void run_in(const WaitingGemmCall& call, int device, cudaStream_t stream) {
  if (call.out == symcommFloat32) run_typed<In, float>(call, device, stream);
  else run_typed<In, In>(call, device, stream);
}

class WaitingGemmSm90 final : public WaitingGemm {
 public:
  const char* name() const override { return "sm90 (CUTLASS WGMMA + TMA, 128 x 128 tiles)"; }

  Verdict can_run(int64_t m, int64_t n, int64_t k, symcommDataType_t in, symcommDataType_t out,
                  bool) const override {
    if (in != symcommFloat16 && in != symcommBfloat16)
      return Verdict::no("its kernels take float16 or bfloat16 inputs");
    if (out != in && out != symcommFloat32)
      return Verdict::no("its kernels write C in the inputs' type or in float32");
    if (k % 8 || n % 8)
      return Verdict::no("its TMA loads need rows of 16-byte multiples: K and N multiples of "
                         "8 (K " + std::to_string(k) + ", N " + std::to_string(n) + ")");
    constexpr int64_t kMost = int64_t{1} << 31;
    if (m >= kMost || n >= kMost || k >= kMost)
      return Verdict::no("its kernels take M, N and K below 2^31");
    return Verdict::yes();
  }

  int64_t tiles(int64_t m, int64_t n) const override {
    constexpr int64_t bm = size<0>(TileShape{}), bn = size<1>(TileShape{});
    return (m + bm - 1) / bm * ((n + bn - 1) / bn);
  }

  void run(const WaitingGemmCall& call, int device, cudaStream_t stream) const override {
    if (call.in == symcommFloat16) run_in<__half>(call, device, stream);
    else run_in<__nv_bfloat16>(call, device, stream);
  }
};

const Registered<WaitingGemm, WaitingGemmSm90> kRegistered(10);
const KernelLibrary kKernels(reinterpret_cast<const void*>(
    &waiting_gemm_kernel<Kernel<__nv_bfloat16, __nv_bfloat16, false>::GemmKernel>));

}  // namespace

}  // namespace symcomm
