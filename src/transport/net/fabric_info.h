// The providers and domains that offer what the net transport needs, as its endpoint asks
// for them (net_fabric_info, fabric_choice.h): the endpoint opens the first that the
// parameters accept; symcomm-info lists them all (symcommGetNetInfo).
#pragma once

#include <string>
#include <vector>

namespace symcomm {

// A provider and domain that offers what the net transport needs.
struct FabricChoice {
  std::string provider;  // libfabric's name: "tcp;ofi_rxm"
  std::string domain;    // for tcp, the interface: "lo"
  std::string fabric;    // for tcp, the interface's network: "127.0.0.1/32"
  bool operator==(const FabricChoice&) const = default;
};

// Those that `provider` and `domain` ("": any) accept, each once, in libfabric's order of
// preference: the net transport opens the first. Empty where none does, with libfabric's
// reason in *why_none. Throws symcommNotSupported where libfabric is unavailable
// (fabric_unavailable_reason()).
std::vector<FabricChoice> list_fabric_choices(const std::string& provider,
                                              const std::string& domain,
                                              std::string* why_none = nullptr);

}  // namespace symcomm
