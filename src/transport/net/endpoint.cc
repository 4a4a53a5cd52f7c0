#include "transport/net/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstring>

#include "base/log.h"
#include "base/param.h"
#include "transport/net/fabric_choice.h"

namespace symcomm {

static const StringParam kProvider(
    "SYMCOMM_NET_PROVIDER", "",
    "the libfabric provider of the net transport (tcp, verbs, efa, cxi, ...; as fi_info -l "
    "names them); empty: the first that offers RMA on a reliable-datagram endpoint");
static const StringParam kDomain(
    "SYMCOMM_NET_DOMAIN", "",
    "the libfabric domain of the net transport: for tcp the interface (lo, eth0); empty: the "
    "provider's first");

static const StringParam kRails(
    "SYMCOMM_NET_RAILS", "",
    "comma-separated libfabric domains (for tcp, interfaces) of the net transport's rails: "
    "an endpoint on each, large transfers striped over them (SYMCOMM_NET_DOMAIN is then "
    "not used); empty: one rail, SYMCOMM_NET_DOMAIN's");
static const EnumParam kProgress(
    "SYMCOMM_NET_PROGRESS", "manual", "manual|auto|auto-or-manual",
    "the data progress the net transport asks libfabric for: manual (its proxy's polls move "
    "the data), auto (the provider moves it; tcp's rxm runs a thread of its own per endpoint), "
    "auto-or-manual (auto where the provider offers it, else manual)");

static const IntParam kMaxRails("SYMCOMM_NET_MAX_RAILS", "4",
                                "the most rails of SYMCOMM_NET_RAILS the net transport uses",
                                1, 16);

std::vector<std::string> net_rail_domains() {
  const std::string list = kRails.get();
  if (list.empty()) return {kDomain.get()};
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = list.find(',', at);
    const std::string item = list.substr(at, comma == std::string::npos ? comma : comma - at);
    SYMCOMM_REQUIRE(!item.empty(), symcommInvalidArgument,
                    "SYMCOMM_NET_RAILS='%s' names an empty domain", list.c_str());
    if (static_cast<int>(out.size()) < kMaxRails.get()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

namespace {

constexpr size_t kMaxName = 256;  // bytes of an endpoint's address (tcp: a sockaddr)

struct Name {
  uint64_t bytes;
  uint8_t data[kMaxName];
};

fi_info* choose(const FabricLib& lib, const std::string& provider, const std::string& domain) {
  const std::string progress = kProgress.get();
  const std::vector<fi_progress> modes = net_progress_modes(progress);  // (get() checked it)
  fi_info* found = nullptr;
  fi_progress chosen = FI_PROGRESS_UNSPEC;
  const int rc = net_fabric_info(lib, provider, domain, &found, modes, &chosen);
  SYMCOMM_REQUIRE(rc == 0 && found, symcommNotSupported,
                  "no libfabric provider offers what the net transport needs (RMA and messages "
                  "on a reliable-datagram endpoint, delivery-complete writes, %s data progress "
                  "(SYMCOMM_NET_PROGRESS)) with SYMCOMM_NET_PROVIDER='%s' and domain '%s' "
                  "(SYMCOMM_NET_DOMAIN or SYMCOMM_NET_RAILS): %s (fi_info -l lists the "
                  "providers)", progress.c_str(), provider.c_str(), domain.c_str(),
                  rc ? lib.fi_strerror(-rc) : "no match");
  // The first match; the rest are alternatives we do not use.
  fi_info* mine = lib.fi_dupinfo(found);
  lib.fi_freeinfo(found);
  SYMCOMM_REQUIRE(mine, symcommOutOfMemory, "fi_dupinfo failed");
  return mine;
}

}  // namespace

FabricEndpoint::FabricEndpoint(Bootstrap& bootstrap, int rank, int nranks,
                               const std::string& domain)
    : lib_(fabric_lib()), rank_(rank), nranks_(nranks), bootstrap_(bootstrap) {
  Name mine{};
  bootstrap.agree_on([&] {
    try {
      info_ = choose(lib_, kProvider.get(), domain);
      virt_addr_ = info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
      SYMCOMM_FI(lib_.fi_fabric(info_->fabric_attr, &fabric_, nullptr));
      SYMCOMM_FI(fi_domain(fabric_, info_, &domain_, nullptr));
      fi_cq_attr cq_attr{};
      cq_attr.format = FI_CQ_FORMAT_DATA;
      cq_attr.size = 4096;
      cq_attr.wait_obj = FI_WAIT_NONE;  // the proxy polls (proxy.cc says why)
      SYMCOMM_FI(fi_cq_open(domain_, &cq_attr, &cq_, nullptr));
      fi_av_attr av_attr{};
      av_attr.type = FI_AV_TABLE;
      av_attr.count = static_cast<size_t>(nranks);
      SYMCOMM_FI(fi_av_open(domain_, &av_attr, &av_, nullptr));
      SYMCOMM_FI(fi_endpoint(domain_, info_, &ep_, nullptr));
      SYMCOMM_FI(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
      SYMCOMM_FI(fi_ep_bind(ep_, &av_->fid, 0));
      SYMCOMM_FI(fi_enable(ep_));
      size_t len = kMaxName;
      SYMCOMM_FI(fi_getname(&ep_->fid, mine.data, &len));
      mine.bytes = len;
    } catch (...) {
      close_all();
      throw;
    }
  });
  std::vector<Name> names(static_cast<size_t>(nranks));
  bootstrap.allgather(&mine, sizeof mine, names.data());
  addrs_.assign(static_cast<size_t>(nranks), FI_ADDR_UNSPEC);
  bootstrap.agree_on([&] {
    for (int pe = 0; pe < nranks; ++pe) {
      int n = fi_av_insert(av_, names[static_cast<size_t>(pe)].data, 1, &addrs_[static_cast<size_t>(pe)],
                           0, nullptr);
      SYMCOMM_REQUIRE(n == 1, symcommSystemError,
                      "fi_av_insert of rank %d's endpoint address failed (%d)", pe, n);
    }
  });
  SYMCOMM_DEBUG("net transport: %s", describe().c_str());
}

FabricEndpoint::~FabricEndpoint() { close_all(); }

void FabricEndpoint::close_all() {
  for (Region& r : regions_)
    if (r.mr) fi_close(&r.mr->fid);
  regions_.clear();
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) lib_.fi_freeinfo(info_);
  ep_ = nullptr, av_ = nullptr, cq_ = nullptr, domain_ = nullptr, fabric_ = nullptr;
  info_ = nullptr;
}

std::string FabricEndpoint::describe() const {
  if (!info_) return "not open";
  return format("provider %s, domain %s, %s data progress, libfabric %s",
                info_->fabric_attr->prov_name, info_->domain_attr->name,
                net_progress_name(info_->domain_attr->data_progress),
                lib_.version_text().c_str());
}

void FabricEndpoint::register_heap_range(char* base, size_t offset, size_t bytes) {
  struct Key {
    uint64_t base, key;
  } mine{};
  fid_mr* mr = nullptr;
  bootstrap_.agree_on([&] {
    // Keys the provider does not choose are ours: the region's index, alike on every rank.
    const uint64_t requested = regions_.size() + 1;
    SYMCOMM_FI(fi_mr_reg(domain_, base, bytes,
                         FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, requested, 0,
                         &mr, nullptr));
    mine = {virt_addr_ ? reinterpret_cast<uint64_t>(base) : 0, fi_mr_key(mr)};
  });
  std::vector<Key> all(static_cast<size_t>(nranks_));
  try {
    bootstrap_.allgather(&mine, sizeof mine, all.data());
  } catch (...) {
    fi_close(&mr->fid);
    throw;
  }
  Region r{offset, bytes, mr, {}, {}};
  for (const Key& k : all) {
    r.base.push_back(k.base);
    r.key.push_back(k.key);
  }
  std::lock_guard<std::mutex> lock(regions_mutex_);
  regions_.push_back(std::move(r));
}

RemoteRange FabricEndpoint::remote(int pe, size_t offset, size_t bytes) const {
  std::lock_guard<std::mutex> lock(regions_mutex_);
  for (const Region& r : regions_) {
    if (offset < r.offset || offset >= r.offset + r.bytes) continue;
    const size_t in = offset - r.offset;
    return RemoteRange{r.base[static_cast<size_t>(pe)] + in, r.key[static_cast<size_t>(pe)],
                       std::min(bytes, r.bytes - in)};
  }
  SYMCOMM_THROW(symcommInternalError, "heap offset %zu is not registered with the network",
                offset);
}

}  // namespace symcomm
