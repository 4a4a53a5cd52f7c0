#include "transport/net/fabric_info.h"

#include <algorithm>

#include "transport/net/fabric_choice.h"
#include "transport/net/fabric_lib.h"

namespace symcomm {

std::vector<FabricChoice> list_fabric_choices(const std::string& provider,
                                              const std::string& domain, std::string* why_none) {
  const FabricLib& lib = fabric_lib();
  fi_info* found = nullptr;
  const int rc = net_fabric_info(lib, provider, domain, &found);
  std::vector<FabricChoice> choices;
  if (rc != 0 || !found) {
    if (why_none) *why_none = rc ? lib.fi_strerror(-rc) : "no match";
    return choices;
  }
  auto text = [](const char* s) { return std::string(s ? s : ""); };
  // libfabric lists a provider and domain once per variant of its attributes (address
  // formats, protocols): one entry each here.
  for (const fi_info* i = found; i; i = i->next) {
    FabricChoice c{text(i->fabric_attr->prov_name), text(i->domain_attr->name),
                   text(i->fabric_attr->name)};
    if (std::find(choices.begin(), choices.end(), c) == choices.end()) choices.push_back(c);
  }
  lib.fi_freeinfo(found);
  return choices;
}

}  // namespace symcomm
