// symcommGetNetInfo: the network transport's libfabric and the providers and domains that
// offer what it needs, as transport/net/fabric_info.h lists them.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/param.h"
#include "capi/guard.h"
#include "transport/net/endpoint.h"
#include "transport/net/fabric_info.h"
#include "transport/net/fabric_lib.h"

using namespace symcomm;

namespace {

// The value in force of a parameter that the net transport declares (endpoint.cc).
std::string param_text(const char* name) {
  for (const Param* p : Param::all())
    if (std::strcmp(p->name(), name) == 0) return p->text();
  SYMCOMM_THROW(symcommInternalError, "no parameter %s is registered", name);
}

// What the last call returned points here.
struct NetInfo {
  std::string version, unavailable, not_selected;
  std::vector<FabricChoice> choices;
  std::vector<symcommNetChoice_t> c_choices;
  struct Rail {
    std::string domain, provider, fabric, why_not;
  };
  std::vector<Rail> rails;
  std::vector<symcommNetRail_t> c_rails;
};

// The rails SYMCOMM_NET_RAILS names, each with what an endpoint there opens (its first
// choice under SYMCOMM_NET_PROVIDER), or why nothing fits.
void gather_rails(NetInfo& n) {
  if (param_text("SYMCOMM_NET_RAILS").empty()) return;
  const std::string provider = param_text("SYMCOMM_NET_PROVIDER");
  for (const std::string& domain : net_rail_domains()) {
    std::string why_none;
    const std::vector<FabricChoice> fits = list_fabric_choices(provider, domain, &why_none);
    NetInfo::Rail r{domain, "", "", ""};
    if (fits.empty()) {
      r.why_not = format("no provider offers what the net transport needs in domain '%s' with "
                         "SYMCOMM_NET_PROVIDER='%s': %s", domain.c_str(), provider.c_str(),
                         why_none.c_str());
    } else {
      r.provider = fits.front().provider;
      r.fabric = fits.front().fabric;
    }
    n.rails.push_back(r);
  }
}

// Fills `n`: every choice, and the one the parameters select (the endpoint's first match),
// added where the unrestricted list lacks it. Returns its index, or -1.
int gather(NetInfo& n) {
  n.unavailable = fabric_unavailable_reason();
  if (!n.unavailable.empty()) return -1;
  n.version = FabricLib::get()->version_text();
  std::string why_none;
  n.choices = list_fabric_choices("", "", &why_none);
  const std::string provider = param_text("SYMCOMM_NET_PROVIDER");
  const std::string domain = param_text("SYMCOMM_NET_DOMAIN");
  const std::vector<FabricChoice> accepted =
      provider.empty() && domain.empty() ? n.choices
                                         : list_fabric_choices(provider, domain, &why_none);
  if (accepted.empty()) {
    n.not_selected = format("no provider offers what the net transport needs with "
                            "SYMCOMM_NET_PROVIDER='%s' and SYMCOMM_NET_DOMAIN='%s': %s",
                            provider.c_str(), domain.c_str(), why_none.c_str());
    return -1;
  }
  auto at = std::find(n.choices.begin(), n.choices.end(), accepted.front());
  if (at == n.choices.end()) at = n.choices.insert(at, accepted.front());
  return static_cast<int>(at - n.choices.begin());
}

}  // namespace

extern "C" symcommResult_t symcommGetNetInfo(symcommNetInfo_t* info) {
  return guarded([] { return std::string("symcommGetNetInfo"); }, [&] {
    SYMCOMM_REQUIRE_ARG(info);
    static std::mutex m;
    static NetInfo n;
    std::lock_guard<std::mutex> lock(m);
    n = NetInfo{};
    const int selected = gather(n);
    if (n.unavailable.empty()) gather_rails(n);
    for (const FabricChoice& c : n.choices)
      n.c_choices.push_back({c.provider.c_str(), c.domain.c_str(), c.fabric.c_str()});
    for (const NetInfo::Rail& r : n.rails)
      n.c_rails.push_back({r.domain.c_str(), r.provider.c_str(), r.fabric.c_str(),
                           r.why_not.c_str()});
    *info = symcommNetInfo_t{};
    info->available = n.unavailable.empty() ? 1 : 0;
    info->version = n.version.c_str();
    info->unavailable = n.unavailable.c_str();
    info->choice_count = static_cast<int>(n.c_choices.size());
    info->choices = n.c_choices.data();
    info->selected = selected;
    info->not_selected = n.not_selected.c_str();
    info->rail_count = static_cast<int>(n.c_rails.size());
    info->rails = n.c_rails.data();
  });
}
