// Result codes, last-error messages, version, parameters and build information.
#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include "base/cuda_driver.h"
#include "base/param.h"
#include "capi/guard.h"
#include "symcomm/build_info.h"

namespace symcomm {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string& message) { t_last_error = message; }

symcommComm*& call_comm() {
  thread_local symcommComm* comm = nullptr;
  return comm;
}

std::string name_the_lost_rank(const std::string& what) {
  const symcommComm* c = call_comm();
  // Finalize tears the layers down in its body: the handle stays, its bootstrap may not.
  if (!c || c->magic != symcommComm::kMagic || !c->bootstrap) return what;
  const std::string lost = c->bootstrap->lost_summary();
  if (lost.empty() || what.find(lost) != std::string::npos) return what;
  return lost + "; " + what;
}

symcommComm& checked(symcommComm_t comm) {
  SYMCOMM_REQUIRE(comm != nullptr, symcommInvalidArgument, "comm is NULL");
  SYMCOMM_REQUIRE(comm->magic == symcommComm::kMagic, symcommInvalidArgument,
                  "comm %p is not a live communicator (finalized already?)",
                  static_cast<void*>(comm));
  set_log_rank(comm->topology.rank);
  call_comm() = comm;
  return *comm;
}

void check_stream(const symcommComm& c, symcommStream_t stream) {
  SYMCOMM_REQUIRE(stream == nullptr || c.space_kind == symcommSpaceCuda, symcommInvalidArgument,
                  "stream %p is not NULL: in the host memory space operations are synchronous "
                  "and take no stream", static_cast<void*>(stream));
  // A stream of another GPU would run the communicator's kernels there, on addresses that
  // GPU does not map: they fault, and the fault ends both GPUs' contexts. The legacy and
  // per-thread default streams are the current device's, which each call makes the
  // communicator's.
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
  const CudaDriver& d = cuda_driver();
  CUcontext context = nullptr;
  CUgreenCtx green = nullptr;
  const CUresult r =
      d.cuStreamGetCtx_v2(reinterpret_cast<CUstream>(stream), &context, &green);
  SYMCOMM_REQUIRE(r == CUDA_SUCCESS, symcommInvalidArgument,
                  "stream %p is not a CUDA stream (cuStreamGetCtx: error %d)",
                  static_cast<void*>(stream), static_cast<int>(r));
  SYMCOMM_REQUIRE(context == primary_context(d, c.topology.device), symcommInvalidArgument,
                  "stream %p is not of the primary context of the communicator's device %d "
                  "(another GPU's stream?): make it with device %d current",
                  static_cast<void*>(stream), c.topology.device, c.topology.device);
}

void require_aligned(const void* p, size_t alignment, const char* what) {
  SYMCOMM_REQUIRE(reinterpret_cast<uintptr_t>(p) % alignment == 0, symcommInvalidArgument,
                  "%s %p is not aligned to %zu bytes (the size of its elements)", what, p,
                  alignment);
}

}  // namespace symcomm

using namespace symcomm;

extern "C" const char* symcommGetErrorString(symcommResult_t result) {
  switch (result) {
    case symcommSuccess: return "symcommSuccess: no error";
    case symcommInvalidArgument: return "symcommInvalidArgument: an argument is invalid";
    case symcommInvalidUsage: return "symcommInvalidUsage: the call does not fit the state";
    case symcommSystemError: return "symcommSystemError: a system call failed";
    case symcommCudaError: return "symcommCudaError: a CUDA call failed";
    case symcommOutOfMemory: return "symcommOutOfMemory: memory is exhausted";
    case symcommTimeout: return "symcommTimeout: a bounded wait expired";
    case symcommPeerLost: return "symcommPeerLost: another rank died or stopped answering";
    case symcommRemoteError: return "symcommRemoteError: another rank failed in the call";
    case symcommNotSupported: return "symcommNotSupported: not available here";
    case symcommInternalError: return "symcommInternalError: a bug in symcomm";
    case symcommNumResults: break;
  }
  return "unknown symcommResult_t";
}

extern "C" const char* symcommGetLastError(void) { return t_last_error.c_str(); }

extern "C" symcommResult_t symcommGetVersion(int* version) {
  return guarded([] { return std::string("symcommGetVersion"); }, [&] {
    SYMCOMM_REQUIRE_ARG(version);
    *version = SYMCOMM_VERSION_CODE;
  });
}

extern "C" int symcommGetParamCount(void) { return static_cast<int>(Param::all().size()); }

extern "C" symcommResult_t symcommGetParam(int index, symcommParamInfo_t* info) {
  return guarded([&] { return format("symcommGetParam(index=%d)", index); }, [&] {
    SYMCOMM_REQUIRE_ARG(info);
    const auto& all = Param::all();
    SYMCOMM_REQUIRE(index >= 0 && static_cast<size_t>(index) < all.size(),
                    symcommInvalidArgument, "index %d is out of range [0, %zu)", index,
                    all.size());
    const Param& p = *all[static_cast<size_t>(index)];
    // The value text must outlive this call: keep one string per parameter.
    static std::mutex m;
    static std::vector<std::string> values(all.size());
    std::lock_guard<std::mutex> lock(m);
    values.resize(all.size());
    std::string& v = values[static_cast<size_t>(index)];
    try {
      v = p.validated_text();
    } catch (const Error&) {
      v = p.text() + " (invalid)";
    }
    *info = {p.name(), p.type_name(), p.default_value(), v.c_str(), p.description(),
             p.raw().has_value() ? 1 : 0};
  });
}

extern "C" const char* symcommGetBuildInfo(void) { return kSymcommBuildInfo; }
