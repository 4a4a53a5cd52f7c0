// One libfabric endpoint of the net transport: the provider and domain chosen by parameter,
// a reliable-datagram (FI_EP_RDM) endpoint with its completion queue and address vector,
// every rank's address inserted, and the heap's memory registered with the domain as it
// grows (with every peer's base address and key for it). Only the proxy thread calls the
// data-path functions of the objects held here (FI_THREAD_DOMAIN).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
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
  // Collective over the communicator (addresses are exchanged). `domain`: as
  // SYMCOMM_NET_DOMAIN ("": the provider's first).
  FabricEndpoint(Bootstrap& bootstrap, int rank, int nranks, const std::string& domain);
  ~FabricEndpoint();

  // Collective: registers [base, base + bytes), the heap's range at `offset`, and learns
  // every rank's key and address for its own range at that offset.
  void register_heap_range(char* base, size_t offset, size_t bytes);
  // Where heap offset `offset` of rank `pe` is, for at most `bytes` from there (the rest lies
  // in the next region). Throws where the offset is not registered.
  RemoteRange remote(int pe, size_t offset, size_t bytes) const;

  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  fi_addr_t addr(int pe) const { return addrs_[static_cast<size_t>(pe)]; }
  // Bytes of immediate data a write carries to the target's completion queue.
  size_t cq_data_size() const { return info_->domain_attr->cq_data_size; }
  // The largest message fi_inject takes (the buffer is free again when it returns).
  size_t inject_size() const { return info_->tx_attr->inject_size; }
  // "tcp;ofi_rxm on lo, libfabric 1.17".
  std::string describe() const;

 private:
  struct Region {
    size_t offset, bytes;
    fid_mr* mr;
    std::vector<uint64_t> base;  // [pe]: the region's remote address on pe
    std::vector<uint64_t> key;   // [pe]
  };
  void close_all();

  const FabricLib& lib_;
  int rank_, nranks_;
  Bootstrap& bootstrap_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<fi_addr_t> addrs_;
  bool virt_addr_ = false;
  mutable std::mutex regions_mutex_;  // registration (app thread) against lookups (any)
  std::vector<Region> regions_;
};

}  // namespace symcomm
