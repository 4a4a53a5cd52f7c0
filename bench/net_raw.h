// The raw libfabric baseline of `symcomm-bench net`: an endpoint of the bench's own on the
// provider and domain that the net transport uses (SYMCOMM_NET_PROVIDER, SYMCOMM_NET_DOMAIN,
// chosen with the transport's hints), and nothing on top: fi_write into a registered buffer
// of the peer, completions read by the calling thread. libfabric is loaded with dlopen, as
// the library loads it, so that symcomm-bench starts on machines without it.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench.h"

namespace symcomm {
struct FabricLib;  // src/transport/net/fabric_lib.h: libfabric's exported calls
}

namespace bench::net {

class RawFabric {
 public:
  // Collective over the two ranks of ctx.comm: opens the endpoint, registers a buffer of
  // `bytes` (this rank's, for the peer's writes) and exchanges the endpoints' addresses and
  // the buffers' addresses and keys with symcommHostAllgather. `contexts`: the most writes
  // in flight at once. Any failure ends the process (exit 1) with libfabric's reason.
  RawFabric(const Context& ctx, size_t bytes, int contexts);
  ~RawFabric();
  RawFabric(const RawFabric&) = delete;
  RawFabric& operator=(const RawFabric&) = delete;

  char* buffer() const { return buf_; }
  const std::string& provider() const { return provider_; }
  const std::string& domain() const { return domain_name_; }

  // Posts a write of `bytes` from `src` to the peer's buffer at `offset` (pieces of at most
  // the provider's largest message), reading completions while no context is free or the
  // provider says try again.
  void write(const void* src, size_t bytes, size_t offset);
  // Reads the completion queue once: the provider's progress is manual, so this also moves
  // the data of writes in both directions. Returns the completions read.
  int progress();
  // Writes posted and not completed yet.
  size_t in_flight() const { return posted_ - completed_; }
  // Progress until at most `most` writes are in flight.
  void drain(size_t most = 0);
  // Progress until the 8-byte word at `offset` of this rank's buffer equals `value` (and
  // every write of this rank completed).
  void await_word(size_t offset, uint64_t value);

 private:
  std::string why(int rc) const;

  const symcomm::FabricLib* lib_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* mr_ = nullptr;
  char* buf_ = nullptr;
  size_t bytes_ = 0;
  fi_addr_t peer_ = FI_ADDR_UNSPEC;
  uint64_t peer_base_ = 0, peer_key_ = 0;  // the peer's buffer, as fi_write addresses it
  size_t max_write_ = 0;
  std::string provider_, domain_name_;
  std::vector<fi_context2> contexts_;  // FI_CONTEXT2 mode: one per write in flight
  std::vector<fi_context2*> free_;
  size_t posted_ = 0, completed_ = 0;
};

}  // namespace bench::net
