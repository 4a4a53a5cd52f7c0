// How the net transport chooses its libfabric provider and domain: the hints of its endpoint
// and the source address of a domain that names an interface. Header-only and free of the
// library's error machinery, so that symcomm-bench's raw libfabric baseline chooses exactly
// what the transport does (bench/net_raw.cc).
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <rdma/fabric.h>

#include <cstring>
#include <string>
#include <vector>

#include "transport/net/fabric_lib.h"

namespace symcomm {

// The IPv4 address of network interface `name`, or "" where no interface has that name.
inline std::string interface_address(const std::string& name) {
  if (name.empty()) return "";
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || name != i->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {0};
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) found = text;
    break;
  }
  freeifaddrs(all);
  return found;
}

// The data progress modes to ask libfabric for, in turn, for SYMCOMM_NET_PROGRESS's value:
// "manual" (the proxy's polls move the data), "auto" (the provider moves it itself; tcp's
// rxm with a thread of its own per endpoint), "auto-or-manual" (auto where the provider
// offers it, else manual: NVSHMEM's rule). Empty for any other value.
inline std::vector<fi_progress> net_progress_modes(const std::string& name) {
  if (name == "manual") return {FI_PROGRESS_MANUAL};
  if (name == "auto") return {FI_PROGRESS_AUTO};
  if (name == "auto-or-manual") return {FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL};
  return {};
}

inline const char* net_progress_name(fi_progress p) {
  return p == FI_PROGRESS_AUTO ? "auto" : p == FI_PROGRESS_MANUAL ? "manual" : "unspecified";
}

// fi_getinfo for the net transport's endpoint: reliable datagrams with messages and RMA,
// delivery-complete writes, the registration modes the transport handles (virtual
// addresses, provider keys, allocated memory; not FI_MR_LOCAL), `provider` and `domain`
// where not empty. A domain that names an interface (tcp's domains do) is also where the
// endpoint binds: otherwise tcp listens on every address and peers connect to the host's
// first one, not to the interface asked for (lo: traffic must stay on loopback). Only
// entries of `domain` are kept. `progress`: the data progress mode asked for. Returns
// fi_getinfo's code (0, or negative; -FI_ENODATA where none is left); *info is the list on
// success (fi_freeinfo it).
inline int net_fabric_info(const FabricLib& lib, const std::string& provider,
                           const std::string& domain, fi_info** info,
                           fi_progress progress = FI_PROGRESS_MANUAL) {
  fi_info* hints = lib.fi_dupinfo(nullptr);
  if (!hints) return -FI_ENOMEM;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |
                FI_SEND | FI_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->data_progress = progress;
  hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  if (!domain.empty()) hints->domain_attr->name = strdup(domain.c_str());
  const std::string source = interface_address(domain);
  *info = nullptr;
  const int rc = lib.fi_getinfo(FI_VERSION(1, 10), source.empty() ? nullptr : source.c_str(),
                                nullptr, source.empty() ? 0 : FI_SOURCE, hints, info);
  lib.fi_freeinfo(hints);
  if (rc != 0 || domain.empty()) return rc;
  // libfabric (1.17) answers with domains other than the one the hint names: the IP providers
  // (tcp, udp, sockets and those layered over them) with every interface where the name is
  // no interface's, shm beside an interface's address. Keep the ones it names.
  for (fi_info** at = info; *at;) {
    fi_info* entry = *at;
    if (entry->domain_attr->name && domain == entry->domain_attr->name) {
      at = &entry->next;
      continue;
    }
    *at = entry->next;
    entry->next = nullptr;
    lib.fi_freeinfo(entry);
  }
  return *info ? 0 : -FI_ENODATA;
}

// net_fabric_info with the first of `modes` that some provider offers; *chosen says which.
inline int net_fabric_info(const FabricLib& lib, const std::string& provider,
                           const std::string& domain, fi_info** info,
                           const std::vector<fi_progress>& modes, fi_progress* chosen) {
  int rc = -FI_ENODATA;
  for (fi_progress mode : modes) {
    rc = net_fabric_info(lib, provider, domain, info, mode);
    if (rc == 0 && *info) {
      *chosen = mode;
      return 0;
    }
    if (rc != -FI_ENODATA) return rc;
  }
  return rc;
}

}  // namespace symcomm
