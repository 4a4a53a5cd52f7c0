// The cuda space's second baseline of `symcomm-bench net`: NCCL's own network path between
// the two ranks, ncclSend and ncclRecv on GPU buffers over NCCL's socket transport, with its
// peer-to-peer and shared-memory paths off, so that its bytes cross the network as the net
// transport's do. NCCL is loaded with dlopen (SYMCOMM_NCCL_LIBRARY, default libnccl.so.2), as
// the library loads it, through the library's list of NCCL's calls (src/nccl/nccl_lib.h):
// where it cannot be loaded, the baseline's rows are skipped with the reason.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench.h"

namespace symcomm {
struct NcclLib;  // src/nccl/nccl_lib.h: NCCL's exported calls
}

namespace bench::net {

// NCCL's environment for the baseline, set before symcommInit starts any thread (so that no
// thread reads the environment while it changes) and before NCCL initialises:
// NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1, NCCL_NET=Socket and NCCL_SOCKET_IFNAME=lo where the
// caller has not set them (a caller's value is kept: another interface, say), and
// NCCL_NVLS_ENABLE=0 whatever it was (NVLink multicast is forbidden on the shared machines).
void set_nccl_environment();
// NCCL's variables above as this process has them, a JSON object (null where unset), for the
// records.
std::string nccl_environment_json();

class NcclPeer {
 public:
  // Collective over the two ranks of ctx.comm (cuda space): loads NCCL, makes a communicator
  // of the two over symcomm's bootstrap and a receive buffer of `bytes` of GPU memory.
  // nullptr where either rank cannot load NCCL, with the reason in *why; any later failure
  // ends the process (exit 1) with NCCL's reason.
  static std::unique_ptr<NcclPeer> open(const Context& ctx, size_t bytes, std::string* why);
  ~NcclPeer();
  NcclPeer(const NcclPeer&) = delete;
  NcclPeer& operator=(const NcclPeer&) = delete;

  // This rank's receive buffer (GPU memory, the bytes asked for).
  char* recv_buffer() const { return recv_; }
  // `bytes` to or from the other rank, enqueued on stream s.
  void send(const void* buf, size_t bytes, cudaStream_t s);
  void recv(void* buf, size_t bytes, cudaStream_t s);
  // "2.28.9".
  const std::string& version() const { return version_; }
  // The fields every NCCL record carries: the version and NCCL's environment as it ran.
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

 private:
  NcclPeer(const symcomm::NcclLib& lib, int peer) : lib_(lib), peer_(peer) {}
  void check(ncclResult_t result, const char* call) const;  // ends the run where it failed

  const symcomm::NcclLib& lib_;
  int peer_;
  ncclComm_t comm_ = nullptr;
  char* recv_ = nullptr;
  std::string version_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace bench::net
