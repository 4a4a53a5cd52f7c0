#include "net_nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "nccl/nccl_lib.h"  // the list of NCCL's calls and the table that holds them
#include "net_bench.h"

namespace bench::net {

namespace {

// The baseline's NCCL variables and the value each gets where the caller set none.
constexpr std::pair<const char*, const char*> kNcclDefaults[] = {
    {"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "Socket"},
    {"NCCL_SOCKET_IFNAME", "lo"}};

// NCCL, loaded once (libsymcomm does not export its loader, so the bench fills a table of its
// own); nullptr where it cannot be, with the reason in *why.
const symcomm::NcclLib* load_nccl(std::string* why) {
  static symcomm::NcclLib lib;
  static std::string reason;
  static const bool loaded = [] {
    const char* path = std::getenv("SYMCOMM_NCCL_LIBRARY");
    if (!path || !*path) path = "libnccl.so.2";
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      reason = std::string("NCCL cannot be loaded (SYMCOMM_NCCL_LIBRARY=") + path +
               "): " + (e ? e : "dlopen failed");
      return false;
    }
#define BENCH_LOAD_NCCL_PFN(fn)                                                  \
  lib.fn = reinterpret_cast<decltype(lib.fn)>(dlsym(handle, #fn));               \
  if (!lib.fn) {                                                                 \
    reason = std::string(path) + " lacks " #fn ": the baseline needs NCCL 2.7 or later"; \
    return false;                                                                \
  }
    SYMCOMM_NCCL_FUNCTIONS(BENCH_LOAD_NCCL_PFN)
#undef BENCH_LOAD_NCCL_PFN
    lib.ncclGetLastError =
        reinterpret_cast<decltype(lib.ncclGetLastError)>(dlsym(handle, "ncclGetLastError"));
    if (lib.ncclGetVersion(&lib.version) != ncclSuccess) {
      reason = std::string(path) + ": ncclGetVersion failed";
      return false;
    }
    return true;
  }();
  if (!loaded) *why = reason;
  return loaded ? &lib : nullptr;
}

}  // namespace

void set_nccl_environment() {
  for (const auto& [name, value] : kNcclDefaults) setenv(name, value, 0);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
}

std::string nccl_environment_json() {
  std::string env = "{";
  for (const char* name : {"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET",
                           "NCCL_SOCKET_IFNAME", "NCCL_NVLS_ENABLE"}) {
    const char* value = std::getenv(name);
    env += std::string(env.size() > 1 ? ", " : "") + "\"" + name + "\": " +
           (value ? "\"" + std::string(value) + "\"" : "null");
  }
  return env + "}";
}

std::unique_ptr<NcclPeer> NcclPeer::open(const Context& ctx, size_t bytes, std::string* why) {
  // Both ranks load it or neither runs the baseline; each rank's reason, for rank 0 to print.
  std::string mine;
  const symcomm::NcclLib* lib = load_nccl(&mine);
  char reason[512] = {}, reasons[2][512];
  std::strncpy(reason, mine.c_str(), sizeof reason - 1);
  BENCH_SC(symcommHostAllgather(ctx.comm, reason, reasons, sizeof reason));
  if (reasons[0][0] || reasons[1][0]) {
    const int r = reasons[0][0] ? 0 : 1;
    *why = "rank " + std::to_string(r) + ": " + reasons[r];
    return nullptr;
  }
  std::unique_ptr<NcclPeer> p(new NcclPeer(*lib, 1 - ctx.rank));
  ncclUniqueId id{};
  if (ctx.rank == 0) p->check(lib->ncclGetUniqueId(&id), "ncclGetUniqueId");
  BENCH_SC(symcommHostBroadcast(ctx.comm, &id, sizeof id, 0));
  p->check(lib->ncclCommInitRank(&p->comm_, ctx.nranks, id, ctx.rank), "ncclCommInitRank");
  BENCH_CUDA(cudaMalloc(&p->recv_, bytes));

  const int v = lib->version;  // NCCL_VERSION: X * 10000 + Y * 100 + Z from 2.9 on
  p->version_ = v >= 10000 ? std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
                                 "." + std::to_string(v % 100)
                           : std::to_string(v / 1000) + "." + std::to_string(v / 100 % 10) +
                                 "." + std::to_string(v % 100);
  // NCCL's environment as this run gave it (a caller's value is kept where it set one).
  p->fields_ = {{"nccl_version", "\"" + p->version_ + "\""}, {"nccl_env", nccl_environment_json()}};
  return p;
}

NcclPeer::~NcclPeer() {
  if (comm_) lib_.ncclCommDestroy(comm_);
  if (recv_) cudaFree(recv_);
}

void NcclPeer::check(ncclResult_t result, const char* call) const {
  if (result == ncclSuccess) return;
  std::string why = lib_.ncclGetErrorString(result);
  const char* last = lib_.ncclGetLastError ? lib_.ncclGetLastError(comm_) : nullptr;
  if (last && *last) why += std::string(": ") + last;
  die(call, why.c_str(), __FILE__, __LINE__);
}

void NcclPeer::send(const void* buf, size_t bytes, cudaStream_t s) {
  check(lib_.ncclSend(buf, bytes, ncclUint8, peer_, comm_, s), "ncclSend");
}

void NcclPeer::recv(void* buf, size_t bytes, cudaStream_t s) {
  check(lib_.ncclRecv(buf, bytes, ncclUint8, peer_, comm_, s), "ncclRecv");
}

}  // namespace bench::net
