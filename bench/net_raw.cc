#include "net_raw.h"

#include <dlfcn.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

// The list of libfabric's exported calls and the table that holds them: the library's own
// (libsymcomm does not export its loader, so the bench fills a table of its own).
#include "transport/net/fabric_choice.h"
#include "transport/net/fabric_lib.h"

namespace bench::net {

namespace {

constexpr size_t kMaxName = 256;  // bytes of an endpoint's address, as the transport allows

const symcomm::FabricLib* load_fabric() {
  static symcomm::FabricLib lib;
  static const bool loaded = [] {
    const char* path = std::getenv("SYMCOMM_FABRIC_LIBRARY");
    if (!path || !*path) path = "libfabric.so.1";
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) die("dlopen of libfabric", dlerror(), __FILE__, __LINE__);
#define BENCH_LOAD_FABRIC_PFN(fn)                                                  \
  lib.fn = reinterpret_cast<decltype(lib.fn)>(dlsym(handle, #fn));                 \
  if (!lib.fn) die("dlsym", #fn " is missing from libfabric", __FILE__, __LINE__);
    SYMCOMM_FABRIC_FUNCTIONS(BENCH_LOAD_FABRIC_PFN)
#undef BENCH_LOAD_FABRIC_PFN
    lib.version = lib.fi_version();
    return true;
  }();
  (void)loaded;
  return &lib;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string RawFabric::why(int rc) const { return lib_->fi_strerror(-rc); }

#define BENCH_FI(call)                                                        \
  do {                                                                        \
    const int rc_ = static_cast<int>(call);                                   \
    if (rc_ < 0) die(#call, why(rc_).c_str(), __FILE__, __LINE__);            \
  } while (0)

RawFabric::RawFabric(const Context& ctx, size_t bytes, int contexts)
    : lib_(load_fabric()), bytes_(bytes) {
  // The net transport's own choice (src/transport/net/fabric_choice.h): the same parameters
  // choose the same provider and domain (bound to the same interface), with the same
  // completion semantics (delivery complete: a write completes once its data is at the
  // target).
  const char* progress = getenv("SYMCOMM_NET_PROGRESS");
  std::vector<fi_progress> modes = symcomm::net_progress_modes(progress ? progress : "manual");
  if (modes.empty()) die("SYMCOMM_NET_PROGRESS", "none of manual, auto, auto-or-manual", __FILE__,
                         __LINE__);
  fi_progress chosen = FI_PROGRESS_UNSPEC;
  BENCH_FI(symcomm::net_fabric_info(*lib_, env("SYMCOMM_NET_PROVIDER"), env("SYMCOMM_NET_DOMAIN"),
                                    &info_, modes, &chosen));
  provider_ = info_->fabric_attr->prov_name;
  domain_name_ = info_->domain_attr->name;
  max_write_ = std::max<size_t>(info_->ep_attr->max_msg_size, 4096);

  BENCH_FI(lib_->fi_fabric(info_->fabric_attr, &fabric_, nullptr));
  BENCH_FI(fi_domain(fabric_, info_, &domain_, nullptr));
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.size = 4096;
  cq_attr.wait_obj = FI_WAIT_NONE;  // polled: the baseline spins, as fi_rma_bw does
  BENCH_FI(fi_cq_open(domain_, &cq_attr, &cq_, nullptr));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 2;
  BENCH_FI(fi_av_open(domain_, &av_attr, &av_, nullptr));
  BENCH_FI(fi_endpoint(domain_, info_, &ep_, nullptr));
  BENCH_FI(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
  BENCH_FI(fi_ep_bind(ep_, &av_->fid, 0));
  BENCH_FI(fi_enable(ep_));

  buf_ = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (!buf_) die("aligned_alloc", "out of memory", __FILE__, __LINE__);
  std::memset(buf_, 0, bytes);
  BENCH_FI(fi_mr_reg(domain_, buf_, bytes, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
                     0, 1, 0, &mr_, nullptr));

  // What the peer needs to write here: the endpoint's address, the buffer's and its key.
  struct Card {
    uint64_t name_bytes;
    uint8_t name[kMaxName];
    uint64_t base, key;
  } mine{}, all[2];
  size_t len = kMaxName;
  BENCH_FI(fi_getname(&ep_->fid, mine.name, &len));
  mine.name_bytes = len;
  mine.base = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(buf_) : 0;
  mine.key = fi_mr_key(mr_);
  BENCH_SC(symcommHostAllgather(ctx.comm, &mine, all, sizeof mine));
  const Card& peer = all[1 - ctx.rank];
  if (fi_av_insert(av_, peer.name, 1, &peer_, 0, nullptr) != 1)
    die("fi_av_insert", "the peer's address was refused", __FILE__, __LINE__);
  peer_base_ = peer.base;
  peer_key_ = peer.key;

  contexts_.resize(static_cast<size_t>(std::max(contexts, 1)));
  for (fi_context2& c : contexts_) free_.push_back(&c);
}

RawFabric::~RawFabric() {
  drain();
  if (mr_) fi_close(&mr_->fid);
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) lib_->fi_freeinfo(info_);
  std::free(buf_);
}

void RawFabric::write(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) die("RawFabric::write", "past the peer's buffer", __FILE__, __LINE__);
  const char* from = static_cast<const char*>(src);
  for (size_t done = 0; done < bytes;) {
    const size_t piece = std::min(max_write_, bytes - done);
    while (free_.empty()) progress();
    fi_context2* c = free_.back();
    for (;;) {
      const ssize_t rc = fi_write(ep_, from + done, piece, nullptr, peer_,
                                  peer_base_ + offset + done, peer_key_, c);
      if (rc == 0) break;
      if (rc != -FI_EAGAIN) die("fi_write", why(static_cast<int>(rc)).c_str(), __FILE__, __LINE__);
      progress();
    }
    free_.pop_back();
    ++posted_;
    done += piece;
  }
}

int RawFabric::progress() {
  fi_cq_entry entries[16];
  const ssize_t n = fi_cq_read(cq_, entries, 16);
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) free_.push_back(static_cast<fi_context2*>(entries[i].op_context));
    completed_ += static_cast<size_t>(n);
    return static_cast<int>(n);
  }
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    fi_cq_readerr(cq_, &err, 0);
    const char* text = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
    die("a raw fi_write", (why(-err.err) + "; provider: " + (text ? text : "?")).c_str(), __FILE__,
        __LINE__);
  }
  die("fi_cq_read", why(static_cast<int>(n)).c_str(), __FILE__, __LINE__);
}

void RawFabric::drain(size_t most) {
  while (in_flight() > most) progress();
}

void RawFabric::await_word(size_t offset, uint64_t value) {
  const uint64_t* word = reinterpret_cast<const uint64_t*>(buf_ + offset);
  for (;;) {
    progress();
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value && in_flight() == 0) return;
  }
}

}  // namespace bench::net
