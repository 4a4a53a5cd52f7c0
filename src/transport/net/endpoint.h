// One libfabric endpoint of the net transport, on one rail: the provider and domain chosen
// by parameter, a reliable-datagram (FI_EP_RDM) endpoint with its completion queue and
// address vector. Made on its own (rail_set.h exchanges the addresses and the memory keys of
// every rank's rails); every rank's rails' addresses are then inserted, and the heap's memory
// registered with the domain as it grows. Only the proxy thread calls the data-path functions
// of the objects held here (FI_THREAD_DOMAIN).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/fabric_lib.h"

namespace symcomm {

// Where a range of a peer's heap is for fi_write / fi_read.
struct RemoteRange {
  uint64_t addr;  // remote address as the provider takes it (virtual, or offset in the region)
  uint64_t key;
  size_t bytes;   // of the range asked for, how much this region holds
};

// The domains of the net transport's rails, one endpoint each: SYMCOMM_NET_RAILS where set
// (at most SYMCOMM_NET_MAX_RAILS of them), else the one of SYMCOMM_NET_DOMAIN ("": the
// provider's first).
std::vector<std::string> net_rail_domains();

class FabricEndpoint {
 public:
  // The most bytes of an endpoint's address (tcp: a sockaddr).
  static constexpr size_t kMaxNameBytes = 256;

  // Opens an endpoint on `domain` (as SYMCOMM_NET_DOMAIN: "" is the provider's first).
  explicit FabricEndpoint(const std::string& domain);
  ~FabricEndpoint();
  FabricEndpoint(const FabricEndpoint&) = delete;
  FabricEndpoint& operator=(const FabricEndpoint&) = delete;

  // This endpoint's address, for the peers.
  std::vector<uint8_t> name() const;
  // Every rank's rails' addresses: names[pe][rail] (as many rails as pe has).
  void insert(const std::vector<std::vector<std::vector<uint8_t>>>& names);
  // Aborts the connection to `pe`'s rail `rail` (tcp_abort.h): both of its kernel queues
  // dropped; libfabric connects anew at the next operation. Returns the connections aborted,
  // -1 where the provider is not tcp (nothing done).
  int abort_connection(int pe, int rail);
  bool abortable() const;  // the provider is tcp
  // Registers [base, base + bytes) with the domain: what a peer's write or read names.
  struct Registration {
    uint64_t base;  // the remote address of `base` (0 where the provider takes offsets)
    uint64_t key;
  };
  Registration register_range(char* base, size_t bytes, uint64_t requested_key);

  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  fi_addr_t addr(int pe, int rail) const {
    return addrs_[static_cast<size_t>(pe)][static_cast<size_t>(rail)];
  }
  // Bytes of immediate data a write carries to the target's completion queue.
  size_t cq_data_size() const { return info_->domain_attr->cq_data_size; }
  // The largest message fi_inject takes (the buffer is free again when it returns).
  size_t inject_size() const { return info_->tx_attr->inject_size; }
  // "provider tcp;ofi_rxm, domain lo, manual data progress, libfabric 1.17".
  std::string describe() const;

 private:
  void close_all();

  const FabricLib& lib_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<std::vector<fi_addr_t>> addrs_;  // [pe][rail]
  std::vector<std::vector<std::vector<uint8_t>>> names_;  // [pe][rail]
  bool virt_addr_ = false;
  std::mutex mrs_mutex_;
  std::vector<fid_mr*> mrs_;  // closed before the domain
};

}  // namespace symcomm
