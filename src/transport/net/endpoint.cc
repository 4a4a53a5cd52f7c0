#include "transport/net/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstring>

#include "base/log.h"
#include "base/param.h"
#include "transport/net/fabric_choice.h"
#include "transport/net/tcp_abort.h"

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

FabricEndpoint::FabricEndpoint(const std::string& domain) : lib_(fabric_lib()) {
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
    SYMCOMM_FI(fi_av_open(domain_, &av_attr, &av_, nullptr));
    SYMCOMM_FI(fi_endpoint(domain_, info_, &ep_, nullptr));
    SYMCOMM_FI(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
    SYMCOMM_FI(fi_ep_bind(ep_, &av_->fid, 0));
    SYMCOMM_FI(fi_enable(ep_));
  } catch (...) {
    close_all();
    throw;
  }
}

FabricEndpoint::~FabricEndpoint() { close_all(); }

void FabricEndpoint::close_all() {
  for (fid_mr* mr : mrs_) fi_close(&mr->fid);
  mrs_.clear();
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) lib_.fi_freeinfo(info_);
  ep_ = nullptr, av_ = nullptr, cq_ = nullptr, domain_ = nullptr, fabric_ = nullptr;
  info_ = nullptr;
}

std::vector<uint8_t> FabricEndpoint::name() const {
  std::vector<uint8_t> out(kMaxNameBytes);
  size_t len = out.size();
  SYMCOMM_FI(fi_getname(&ep_->fid, out.data(), &len));
  out.resize(len);
  return out;
}

void FabricEndpoint::insert(const std::vector<std::vector<std::vector<uint8_t>>>& names) {
  names_ = names;
  addrs_.assign(names.size(), {});
  for (size_t pe = 0; pe < names.size(); ++pe)
    for (size_t rail = 0; rail < names[pe].size(); ++rail) {
      fi_addr_t a = FI_ADDR_UNSPEC;
      const int n = fi_av_insert(av_, names[pe][rail].data(), 1, &a, 0, nullptr);
      SYMCOMM_REQUIRE(n == 1, symcommSystemError,
                      "fi_av_insert of rank %zu's rail %zu address failed (%d)", pe, rail, n);
      addrs_[pe].push_back(a);
    }
}

bool FabricEndpoint::abortable() const {
  return std::strstr(info_->fabric_attr->prov_name, "tcp") != nullptr;
}

int FabricEndpoint::abort_connection(int pe, int rail) {
  if (!abortable()) return -1;
  const std::vector<uint8_t>& peer = names_[static_cast<size_t>(pe)][static_cast<size_t>(rail)];
  const int aborted = abort_tcp_connections(name(), peer);
  if (aborted == 0) return 0;
  // rxm keeps a connection whose socket was reset as it was (its sends fail with ENOTCONN):
  // removing the peer's address closes it (FI_AV_REMOVE_CLEANUP, fabric_lib.cc), and the
  // address goes in again. Only after a socket was found: rxm crashes removing a connection
  // that has none (one whose connect failed).
  fi_addr_t& a = addrs_[static_cast<size_t>(pe)][static_cast<size_t>(rail)];
  const int rc = fi_av_remove(av_, &a, 1, 0);
  SYMCOMM_REQUIRE(rc == 0, symcommSystemError, "fi_av_remove of rank %d's rail %d failed: %s",
                  pe, rail, lib_.fi_strerror(-rc));
  fi_addr_t again = FI_ADDR_UNSPEC;
  const int n = fi_av_insert(av_, peer.data(), 1, &again, 0, nullptr);
  SYMCOMM_REQUIRE(n == 1, symcommSystemError,
                  "fi_av_insert of rank %d's rail %d address failed (%d)", pe, rail, n);
  a = again;
  return aborted;
}

std::string FabricEndpoint::describe() const {
  if (!info_) return "not open";
  return format("provider %s, domain %s, %s data progress, libfabric %s",
                info_->fabric_attr->prov_name, info_->domain_attr->name,
                net_progress_name(info_->domain_attr->data_progress),
                lib_.version_text().c_str());
}

FabricEndpoint::Registration FabricEndpoint::register_range(char* base, size_t bytes,
                                                            uint64_t requested_key) {
  fid_mr* mr = nullptr;
  SYMCOMM_FI(fi_mr_reg(domain_, base, bytes, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
                       0, requested_key, 0, &mr, nullptr));
  std::lock_guard<std::mutex> lock(mrs_mutex_);
  mrs_.push_back(mr);
  return Registration{virt_addr_ ? reinterpret_cast<uint64_t>(base) : 0, fi_mr_key(mr)};
}

}  // namespace symcomm
