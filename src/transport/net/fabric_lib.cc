#include "transport/net/fabric_lib.h"

#include <dlfcn.h>

#include <cstdlib>

#include "base/error.h"
#include "base/param.h"

namespace symcomm {

static const StringParam kLibrary(
    "SYMCOMM_FABRIC_LIBRARY", "libfabric.so.1",
    "the libfabric library that the net transport loads (a name for dlopen or a path)");

namespace {

struct Loaded {
  FabricLib lib;
  std::string reason;  // why not, where it failed
};

Loaded load() {
  Loaded l;
  const std::string path = kLibrary.get();
  // Before libfabric reads its parameters (at its first call): removing a peer's address
  // closes the connection to it (rxm's hidden connections), as the net transport's failover
  // needs (FabricEndpoint::abort_connection). A value the user set stands.
  setenv("FI_AV_REMOVE_CLEANUP", "1", 0);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    l.reason = format("libfabric cannot be loaded (SYMCOMM_FABRIC_LIBRARY=%s): %s", path.c_str(),
                      e ? e : "dlopen failed");
    return l;
  }
#define SYMCOMM_LOAD_FABRIC_PFN(fn)                                                 \
  {                                                                                 \
    void* p = dlsym(handle, #fn);                                                   \
    if (!p) {                                                                       \
      l.reason = format("%s lacks %s: symcomm needs libfabric 1.10 or later", path.c_str(), \
                        #fn);                                                       \
      dlclose(handle);                                                              \
      return l;                                                                     \
    }                                                                               \
    l.lib.fn = reinterpret_cast<decltype(l.lib.fn)>(p);                             \
  }
  SYMCOMM_FABRIC_FUNCTIONS(SYMCOMM_LOAD_FABRIC_PFN)
#undef SYMCOMM_LOAD_FABRIC_PFN
  l.lib.version = l.lib.fi_version();
  if (FI_VERSION_LT(l.lib.version, FI_VERSION(1, 10))) {
    l.reason = format("%s is libfabric %s: symcomm needs 1.10 or later", path.c_str(),
                      l.lib.version_text().c_str());
    dlclose(handle);
  }
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const FabricLib* FabricLib::get() {
  const Loaded& l = loaded();
  return l.reason.empty() ? &l.lib : nullptr;
}

std::string FabricLib::version_text() const {
  return format("%u.%u", FI_MAJOR(version), FI_MINOR(version));
}

std::string fabric_unavailable_reason() { return loaded().reason; }

const FabricLib& fabric_lib() {
  const FabricLib* lib = FabricLib::get();
  SYMCOMM_REQUIRE(lib, symcommNotSupported, "%s", fabric_unavailable_reason().c_str());
  return *lib;
}

void throw_fabric_error(int rc, const char* call, const char* file, int line) {
  const FabricLib* lib = FabricLib::get();
  throw_error(symcommSystemError, file, line,
              format("%s failed: %s (%d)", call, lib ? lib->fi_strerror(-rc) : "?", rc));
}

}  // namespace symcomm
