// libfabric, loaded at run time with dlopen (SYMCOMM_FABRIC_LIBRARY, default
// "libfabric.so.1") so that libsymcomm starts where it is absent: the net transport then
// refuses, naming what is missing, and only a communicator with a peer on another node
// fails. Types, constants and the inline calls (fi_domain, fi_write, fi_cq_read: calls
// through the objects' operation tables) come from Debian's libfabric-dev headers; the few
// exported functions below are looked up by name.
#pragma once

#include <rdma/fabric.h>

#include <string>

namespace symcomm {

#define SYMCOMM_FABRIC_FUNCTIONS(X) \
  X(fi_getinfo) X(fi_freeinfo) X(fi_dupinfo) X(fi_fabric) X(fi_strerror) X(fi_version)

struct FabricLib {
#define SYMCOMM_DECLARE_FABRIC_PFN(fn) decltype(&::fn) fn = nullptr;
  SYMCOMM_FABRIC_FUNCTIONS(SYMCOMM_DECLARE_FABRIC_PFN)
#undef SYMCOMM_DECLARE_FABRIC_PFN
  uint32_t version = 0;  // fi_version(): FI_MAJOR(version).FI_MINOR(version)

  // The library, loaded once; nullptr when it cannot be (see fabric_unavailable_reason()).
  static const FabricLib* get();
  // "1.17" for the loaded library.
  std::string version_text() const;
};

// Why libfabric cannot be used in this process ("" when it can). Loads it on the first call.
std::string fabric_unavailable_reason();

// The library, or throws symcommNotSupported with the reason.
const FabricLib& fabric_lib();

// Throws symcommSystemError naming the call and libfabric's description of `rc` (negative).
[[noreturn]] void throw_fabric_error(int rc, const char* call, const char* file, int line);

}  // namespace symcomm

// Checks a libfabric call that returns 0 or a negative error code.
#define SYMCOMM_FI(call)                                                       \
  do {                                                                         \
    int symcomm_fi_rc_ = static_cast<int>(call);                               \
    if (symcomm_fi_rc_ < 0)                                                    \
      ::symcomm::throw_fabric_error(symcomm_fi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
