// The scatter GEMM (fused/scatter_gemm.h) on Hopper: CUTLASS's persistent, warp-specialised
// cooperative grouped GEMM (pointer arrays: each group its own A, D and strides; TMA loads into
// a pipeline of shared-memory stages, two consumer warp groups of WGMMA, a TMA epilogue whose
// descriptors the kernel points at each group's D). One group per owner, D in the owner's
// memory: the tiles' stores go over NVLink while later tiles compute.
//
// The groups' arguments live in device memory (the caller's scratch), written by a kernel of
// one block from its parameters, so that the call is stream-ordered and a CUDA graph that
// captures it replays it. Instantiated for float16 and bfloat16 inputs, B row-major or
// transposed, float32 products: 4 kernels, 128 x 128 x 64 tiles, clusters of one CTA.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "fused/scatter_gemm.h"
#include "fused/sm90a/cutlass_common.cuh"

namespace symcomm {

namespace {

using namespace cute;  // NOLINT: CUTLASS's shapes (_128, Shape, get) read as in its examples

constexpr int kMaxGroups = SYMCOMM_FUSED_MAX_MEMBERS;
// CUTLASS's workspace (the groups' TMA descriptors, one set per CTA) fits in this.
constexpr size_t kWorkspaceBytes = size_t{2} << 20;

// CUTLASS's kernel entry (its device_kernel), as a kernel of this file.
template <class GemmKernel>
__global__ void __launch_bounds__(GemmKernel::MaxThreadsPerBlock,
                                  GemmKernel::MinBlocksPerMultiprocessor)
    scatter_gemm_kernel(const __grid_constant__ typename GemmKernel::Params params) {
  extern __shared__ char shared[];
  GemmKernel op;
  op(params, shared);
}

// The groups' device arguments, copied from the kernel's parameters into scratch.
template <class Arrays>
__global__ void __launch_bounds__(128) write_arrays_kernel(const __grid_constant__ Arrays from,
                                                           Arrays* to) {
  constexpr size_t kWords = sizeof(Arrays) / sizeof(uint32_t);
  static_assert(sizeof(Arrays) % sizeof(uint32_t) == 0, "the arrays are copied in words");
  const auto* src = reinterpret_cast<const uint32_t*>(&from);
  auto* dst = reinterpret_cast<uint32_t*>(to);
  for (size_t i = threadIdx.x; i < kWords; i += blockDim.x) dst[i] = src[i];
}

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;

// The epilogue (float32 products to each group's D, row-major), the same for every input; out
// of the kernel template, where the host compiler rejected the builder's types.
using Epilogue = cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void,
    cutlass::layout::RowMajor*, 4, float, cutlass::layout::RowMajor*, 4,
    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
// Its shared memory, which the mainloop's stages leave (likewise out of the template).
constexpr int kEpilogueSmem = static_cast<int>(sizeof(Epilogue::SharedStorage));

template <class In, bool kBTransposed>
struct Kernel {
  using ElementA = typename Cutlass<In>::type;
  using LayoutA = cutlass::layout::RowMajor;
  // B [K, N] row-major is CUTLASS's RowMajor B; [N, K] row-major (op T) its ColumnMajor.
  using LayoutB =
      std::conditional_t<kBTransposed, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int kAlignIn = 16 / sizeof(ElementA);

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA*, kAlignIn,
      ElementA, LayoutB*, kAlignIn, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<kEpilogueSmem>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;

  using StrideA = typename GemmKernel::InternalStrideA;
  using StrideB = typename GemmKernel::InternalStrideB;
  using StrideD = typename GemmKernel::InternalStrideD;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;

  // What the kernel reads of each group, in device memory.
  struct Arrays {
    Shape3 shape[kMaxGroups];
    const ElementA* a[kMaxGroups];
    const ElementA* b[kMaxGroups];
    float* d[kMaxGroups];
    StrideA da[kMaxGroups];
    StrideB db[kMaxGroups];
    StrideD dd[kMaxGroups];
  };
  static constexpr size_t kArraysBytes = (sizeof(Arrays) + 255) / 256 * 256;

  static void run(const ScatterGemmCall& call, int device, cudaStream_t stream) {
    Arrays host{};
    std::vector<Shape3> shapes;
    const int n = static_cast<int>(call.n), k = static_cast<int>(call.k);
    const auto* a = static_cast<const ElementA*>(call.a);
    for (int g = 0; g < call.groups; ++g) {
      const int m = static_cast<int>(call.rows[g]);
      host.shape[g] = Shape3{m, n, k};
      shapes.push_back(host.shape[g]);
      host.a[g] = a + call.a_row[g] * call.k;
      host.b[g] = static_cast<const ElementA*>(call.b);
      host.d[g] = call.out[g];
      host.da[g] = packed_stride<StrideA>(m, k);
      host.db[g] = packed_stride<StrideB>(n, k);
      host.dd[g] = packed_stride<StrideD>(m, n);
    }
    auto* arrays = static_cast<Arrays*>(call.scratch);
    void* workspace = static_cast<char*>(call.scratch) + kArraysBytes;
    write_arrays_kernel<Arrays><<<1, 128, 0, stream>>>(host, arrays);
    SYMCOMM_CUDART(cudaGetLastError());

    typename GemmKernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {call.groups, arrays->shape, shapes.data()};
    args.mainloop.ptr_A = arrays->a;
    args.mainloop.dA = arrays->da;
    args.mainloop.ptr_B = arrays->b;
    args.mainloop.dB = arrays->db;
    auto& fusion = args.epilogue.thread;
    fusion.alpha = 1.0f;
    fusion.beta = 0.0f;
    fusion.alpha_ptr = nullptr;
    fusion.beta_ptr = nullptr;
    fusion.alpha_ptr_array = nullptr;
    fusion.beta_ptr_array = nullptr;
    fusion.dAlpha = {cute::_0{}, cute::_0{}, 0};
    fusion.dBeta = {cute::_0{}, cute::_0{}, 0};
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
    args.epilogue.ptr_D = arrays->d;
    args.epilogue.dD = arrays->dd;
    args.hw_info.device_id = device;
    SYMCOMM_CUDART(
        cudaDeviceGetAttribute(&args.hw_info.sm_count, cudaDevAttrMultiProcessorCount, device));
    SYMCOMM_REQUIRE(GemmKernel::can_implement(args), symcommInvalidArgument,
                    "the fused scatter GEMM cannot multiply rows of %d x %d by %d x %d "
                    "(CUTLASS's can_implement: alignment)", k, k, k, n);
    const size_t need = GemmKernel::get_workspace_size(args);
    SYMCOMM_REQUIRE(need <= kWorkspaceBytes, symcommInternalError,
                    "the fused scatter GEMM asks for %zu bytes of workspace, more than %zu",
                    need, kWorkspaceBytes);
    SYMCOMM_REQUIRE(GemmKernel::initialize_workspace(args, workspace, stream) ==
                        cutlass::Status::kSuccess,
                    symcommInternalError, "the fused scatter GEMM's workspace");
    // Not kept per call as the waiting GEMM's are: the grouped scheduler's parameters point
    // at `shapes`, this call's host copy of the groups' shapes (its grid is made from them).
    const typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, workspace);
    const int smem = GemmKernel::SharedStorageSize;
    allow_shared_memory<scatter_gemm_kernel<GemmKernel>>(device, smem);
    scatter_gemm_kernel<GemmKernel><<<GemmKernel::get_grid_shape(params),
                                      GemmKernel::get_block_shape(), smem, stream>>>(params);
    SYMCOMM_CUDART(cudaGetLastError());
  }
};

class ScatterGemmSm90 final : public ScatterGemm {
 public:
  const char* name() const override {
    return "sm90 grouped (CUTLASS WGMMA + TMA, 128 x 128 tiles)";
  }

  Verdict can_run(int64_t n, int64_t k, symcommDataType_t in) const override {
    if (in != symcommFloat16 && in != symcommBfloat16)
      return Verdict::no("its kernels take float16 or bfloat16 inputs");
    if (k % 8 || n % 8)
      return Verdict::no("its TMA loads need rows of 16-byte multiples: every member's K and N "
                         "multiples of 8 (K " + std::to_string(k) + ", N " + std::to_string(n) +
                         ")");
    constexpr int64_t kMost = int64_t{1} << 31;
    if (n >= kMost || k >= kMost) return Verdict::no("its kernels take N and K below 2^31");
    return Verdict::yes();
  }

  size_t scratch_bytes() const override {
    return std::max({Kernel<__half, false>::kArraysBytes, Kernel<__half, true>::kArraysBytes,
                     Kernel<__nv_bfloat16, false>::kArraysBytes,
                     Kernel<__nv_bfloat16, true>::kArraysBytes}) +
           kWorkspaceBytes;
  }

  void run(const ScatterGemmCall& call, int device, cudaStream_t stream) const override {
    if (call.groups == 0) return;
    if (call.in == symcommFloat16) {
      if (call.b_transposed) Kernel<__half, true>::run(call, device, stream);
      else Kernel<__half, false>::run(call, device, stream);
    } else {
      if (call.b_transposed) Kernel<__nv_bfloat16, true>::run(call, device, stream);
      else Kernel<__nv_bfloat16, false>::run(call, device, stream);
    }
  }
};

const Registered<ScatterGemm, ScatterGemmSm90> kRegistered(10);
const KernelLibrary kKernels(reinterpret_cast<const void*>(
    &scatter_gemm_kernel<Kernel<__nv_bfloat16, false>::GemmKernel>));

}  // namespace

}  // namespace symcomm
