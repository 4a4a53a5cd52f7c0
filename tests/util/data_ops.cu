// fill / count_mismatches in both memory spaces. On GPUs, the kernels load and store the
// peer's memory directly through the address symcommPtr gave: that is what the heap
// promises, so that is what the tests exercise.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mp.h"

namespace mp {

namespace {

__global__ void fill_kernel(uint8_t* dst, size_t bytes, int who, uint64_t what) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < bytes;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = pattern(who, what, i);
}

__global__ void check_kernel(const uint8_t* src, size_t bytes, int who, uint64_t what,
                             unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < bytes;
       i += size_t{gridDim.x} * blockDim.x)
    mine += src[i] != pattern(who, what, i);
  if (mine) atomicAdd(bad, mine);
}

__global__ void late_copy_kernel(uint8_t* dst, const uint8_t* src, size_t bytes,
                                 uint64_t delay_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < delay_ns);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < bytes;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

// Records a failed CUDA call in the running test; true when it succeeded.
bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  ADD_FAILURE() << what << ": " << cudaGetErrorString(e);
  return false;
}

unsigned blocks_for(size_t bytes) {
  size_t b = (bytes + 255) / 256;
  return static_cast<unsigned>(b < 1024 ? (b ? b : 1) : 1024);
}

}  // namespace

bool space_available(std::string* why) {
  if (space() == symcommSpaceHost) return true;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    return false;
  }
  if (count == 0) {
    *why = "no GPU is visible";
    return false;
  }
  // One GPU per rank: ranks sharing a GPU without MPS stall each other's waiting kernels.
  // SYMCOMM_TEST_SHARED_GPUS=1 lets them share under MPS (tools/probe/shared_gpus.sh).
  const char* local = std::getenv("SYMCOMM_LOCAL_SIZE");
  const char* shared = std::getenv("SYMCOMM_TEST_SHARED_GPUS");
  bool may_share = shared != nullptr && std::strcmp(shared, "1") == 0;
  if (local != nullptr && std::atoi(local) > count && !may_share) {
    *why = std::string(local) + " ranks on this node and " + std::to_string(count) +
           " GPUs; the tests need one GPU per rank";
    return false;
  }
  return true;
}

void fill(void* dst, size_t bytes, int who, uint64_t what) {
  auto* p = static_cast<uint8_t*>(dst);
  if (space() == symcommSpaceHost) {
    for (size_t i = 0; i < bytes; ++i) p[i] = pattern(who, what, i);
    return;
  }
  fill_kernel<<<blocks_for(bytes), 256>>>(p, bytes, who, what);
  if (cuda_ok(cudaGetLastError(), "fill_kernel launch"))
    cuda_ok(cudaDeviceSynchronize(), "fill_kernel");
}

void copy_after_early_trigger(symcommStream_t stream, void* dst, const void* src, size_t bytes,
                              unsigned delay_us) {
  if (space() != symcommSpaceCuda) {
    ADD_FAILURE() << "copy_after_early_trigger needs the cuda space";
    return;
  }
  // Few blocks: the GPU keeps room for the next kernel's blocks, which start at once.
  late_copy_kernel<<<std::min(blocks_for(bytes), 8u), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes,
      uint64_t{delay_us} * 1000);
  cuda_ok(cudaGetLastError(), "late_copy_kernel launch");
}

size_t count_mismatches(const void* src, size_t bytes, int who, uint64_t what) {
  auto* p = static_cast<const uint8_t*>(src);
  if (space() == symcommSpaceHost) {
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += p[i] != pattern(who, what, i);
    return bad;
  }
  const size_t failed = bytes ? bytes : 1;
  unsigned long long* bad = nullptr;
  if (!cuda_ok(cudaMalloc(&bad, sizeof *bad), "cudaMalloc")) return failed;
  unsigned long long host = failed;
  if (cuda_ok(cudaMemset(bad, 0, sizeof *bad), "cudaMemset")) {
    check_kernel<<<blocks_for(bytes), 256>>>(p, bytes, who, what, bad);
    if (!cuda_ok(cudaGetLastError(), "check_kernel launch") ||
        !cuda_ok(cudaMemcpy(&host, bad, sizeof host, cudaMemcpyDeviceToHost), "check_kernel"))
      host = failed;
  }
  cuda_ok(cudaFree(bad), "cudaFree");
  return static_cast<size_t>(host);
}

void* local_alloc(size_t bytes) {
  if (space() == symcommSpaceHost) return std::malloc(bytes);
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void local_free(void* p) {
  if (space() == symcommSpaceHost) std::free(p);
  else cuda_ok(cudaFree(p), "cudaFree");
}

symcommStream_t new_stream() {
  if (space() == symcommSpaceHost) return nullptr;
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return s;
}

void free_stream(symcommStream_t s) {
  if (s) cuda_ok(cudaStreamDestroy(s), "cudaStreamDestroy");
}

void use_device(symcommComm_t comm) {
  if (space() != symcommSpaceCuda) return;
  int device = -1;
  if (symcommCommDevice(comm, &device) != symcommSuccess) {
    ADD_FAILURE() << "symcommCommDevice: " << symcommGetLastError();
    return;
  }
  cuda_ok(cudaSetDevice(device), "cudaSetDevice");
}

void sync(symcommStream_t s) {
  if (space() == symcommSpaceCuda) cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (space() == symcommSpaceHost) std::memcpy(dst, src, bytes);
  else cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(copy_to_host)");
}

int begin_capture(symcommStream_t s) {
  return cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "BeginCapture") ? 0 : 1;
}

void* end_capture(symcommStream_t s) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!cuda_ok(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture")) return nullptr;
  bool ok = cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cuda_ok(cudaGraphDestroy(graph), "cudaGraphDestroy");
  return ok ? exec : nullptr;
}

int launch_graph(void* exec, symcommStream_t s) {
  return cuda_ok(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), s), "cudaGraphLaunch") ? 0 : 1;
}

void destroy_graph(void* exec) {
  cuda_ok(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)), "cudaGraphExecDestroy");
}

// From pageable memory, cudaMemcpy may return before the DMA to the device has finished;
// work on other (non-blocking) streams would then read the old bytes. Wait for it.
void host_to_device(void* dst, const void* src, size_t bytes, const char* what) {
  cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), what);
  cuda_ok(cudaDeviceSynchronize(), what);
}

void copy_from_host(void* dst, const void* src, size_t bytes) {
  if (space() == symcommSpaceHost) std::memcpy(dst, src, bytes);
  else host_to_device(dst, src, bytes, "cudaMemcpy(copy_from_host)");
}

void copy_to_host_on(symcommStream_t stream, void* dst, const void* src, size_t bytes) {
  if (space() == symcommSpaceHost) return std::memcpy(dst, src, bytes), void();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync"))
    cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize(copy_to_host_on)");
}

void copy_from_host_on(symcommStream_t stream, void* dst, const void* src, size_t bytes) {
  if (space() == symcommSpaceHost) return std::memcpy(dst, src, bytes), void();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // From pageable memory the call may return before the DMA is done: wait for the stream.
  if (cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync"))
    cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize(copy_from_host_on)");
}

void copy_on(symcommStream_t stream, void* dst, const void* src, size_t bytes) {
  if (space() == symcommSpaceHost) return std::memcpy(dst, src, bytes), void();
  cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
          "cudaMemcpyAsync(copy_on)");
}

std::vector<uint8_t> fetch(symcommStream_t stream, const void* p, size_t bytes) {
  sync(stream);
  std::vector<uint8_t> out(bytes);
  if (bytes) copy_to_host(out.data(), p, bytes);
  return out;
}

void store(void* p, const std::vector<uint8_t>& v) {
  if (!v.empty()) copy_from_host(p, v.data(), v.size());
}

uint64_t read_u64(const void* p) {
  uint64_t v = 0;
  if (space() == symcommSpaceHost) return __atomic_load_n(static_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
  cuda_ok(cudaMemcpy(&v, p, 8, cudaMemcpyDeviceToHost), "cudaMemcpy(read_u64)");
  return v;
}

void write_u64(void* p, uint64_t v) {
  if (space() == symcommSpaceHost) __atomic_store_n(static_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
  else host_to_device(p, &v, 8, "cudaMemcpy(write_u64)");
}

}  // namespace mp
