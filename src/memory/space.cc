#include "memory/space.h"

#include <mutex>

#include "base/cuda_driver.h"
#include "base/log.h"
#include "base/param.h"

namespace symcomm {

static const EnumParam kSpace("SYMCOMM_MEMORY_SPACE", "auto", "auto|cuda|host",
                              "where the symmetric heap lives (auto: cuda if a GPU is present)");

void Space::check_device_accessible(const void* ptr, const char* what) const {
  const std::string problem = device_access_problem(ptr);
  SYMCOMM_REQUIRE(problem.empty(), symcommInvalidArgument, "%s %s", what, problem.c_str());
}

const char* space_name(symcommMemorySpace_t space) {
  switch (space) {
    case symcommSpaceAuto: return "auto";
    case symcommSpaceCuda: return "cuda";
    case symcommSpaceHost: return "host";
  }
  return "?";
}

static std::string no_gpu_reason() {
  const CudaDriver* drv = CudaDriver::get();
  if (!drv) return CudaDriver::unavailable_reason();
  int count = 0;
  if (drv->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return "no GPU is visible";
  return "";
}

symcommMemorySpace_t resolve_space(symcommMemorySpace_t requested) {
  SYMCOMM_REQUIRE(requested == symcommSpaceAuto || requested == symcommSpaceCuda ||
                      requested == symcommSpaceHost,
                  symcommInvalidArgument, "config->space is %d, not a symcommMemorySpace_t",
                  static_cast<int>(requested));
  if (requested == symcommSpaceAuto) {
    std::string p = kSpace.get();
    requested = p == "cuda" ? symcommSpaceCuda : p == "host" ? symcommSpaceHost : requested;
  }
  if (requested == symcommSpaceHost) return requested;
  std::string why = no_gpu_reason();
  if (requested == symcommSpaceCuda) {
    SYMCOMM_REQUIRE(why.empty(), symcommNotSupported, "the cuda memory space is not available: %s",
                    why.c_str());
    return requested;
  }
  if (why.empty()) return symcommSpaceCuda;
  static std::once_flag once;
  std::call_once(once, [&] {
    SYMCOMM_WARN("%s; using the host memory space (set SYMCOMM_MEMORY_SPACE=host to silence)",
                 why.c_str());
  });
  return symcommSpaceHost;
}

SharedHandle Space::share_buffer(const void*, size_t, size_t*) {
  SYMCOMM_THROW(symcommNotSupported,
                "the %s memory space cannot share memory that a process allocated itself; "
                "use symmetric buffers (symcommMalloc), or plain ones, which the collectives "
                "stage through their workspace",
                name());
}

char* Space::open_buffer(const SharedHandle&) {
  SYMCOMM_THROW(symcommNotSupported, "the %s memory space opens no shared buffers", name());
}

void Space::close_buffer(char*) {}

std::unique_ptr<Space> make_space(symcommMemorySpace_t space, const Topology& topology) {
  // The registry of memory spaces: one line each.
  if (space == symcommSpaceCuda) return make_cuda_space(topology.device);
  if (space == symcommSpaceHost) return make_host_space();
  SYMCOMM_THROW(symcommInternalError, "no memory space %d", static_cast<int>(space));
}

}  // namespace symcomm
