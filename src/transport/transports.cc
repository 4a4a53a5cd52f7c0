#include "transport/transport.h"

#include <algorithm>

#include "base/log.h"

namespace symcomm {

Transports::Transports(TransportContext ctx)
    : of_(static_cast<size_t>(ctx.topology.nranks), nullptr),
      why_(static_cast<size_t>(ctx.topology.nranks)) {
  const auto& kinds = Registry<TransportKind>::instance().all();
  SYMCOMM_REQUIRE(kinds.size() <= 64, symcommInternalError, "more than 64 transport kinds");
  // Each peer's kind: the first that accepts it. Choosing is local; opening is collective for
  // every kind that any rank needs.
  const int n = ctx.topology.nranks;
  std::vector<int> kind_of(static_cast<size_t>(n), -1);
  uint64_t needed = 0;
  ctx.bootstrap.agree_on([&] {
    for (int pe = 0; pe < n; ++pe) {
      std::string why;
      for (size_t k = 0; k < kinds.size(); ++k) {
        Verdict v = kinds[k]->can_connect(ctx, pe);
        if (v) {
          kind_of[static_cast<size_t>(pe)] = static_cast<int>(k);
          needed |= uint64_t{1} << k;
          break;
        }
        why += format("%s%s: %s", why.empty() ? "" : "; ", kinds[k]->name(), v.reason().c_str());
      }
      if (kind_of[static_cast<size_t>(pe)] < 0)
        why_[static_cast<size_t>(pe)] = format("no transport reaches rank %d from rank %d (%s)",
                                               pe, ctx.topology.rank, why.c_str());
    }
  });
  std::vector<uint64_t> all(static_cast<size_t>(n));
  ctx.bootstrap.allgather(&needed, sizeof needed, all.data());
  uint64_t anywhere = 0;
  for (uint64_t m : all) anywhere |= m;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (!(anywhere >> k & 1)) continue;
    std::vector<int> peers;
    for (int pe = 0; pe < n; ++pe)
      if (kind_of[static_cast<size_t>(pe)] == static_cast<int>(k)) peers.push_back(pe);
    std::unique_ptr<Transport> t = kinds[k]->open(ctx, peers);
    for (int pe : peers) of_[static_cast<size_t>(pe)] = t.get();
    SYMCOMM_DEBUG("transport %s serves %zu peer(s)", kinds[k]->name(), peers.size());
    open_.push_back(std::move(t));
  }
}

Transports::~Transports() = default;

Transport& Transports::to(int pe) const {
  Transport* t = of_[static_cast<size_t>(pe)];
  SYMCOMM_REQUIRE(t, symcommNotSupported, "%s", why_[static_cast<size_t>(pe)].c_str());
  return *t;
}

const char* Transports::name_of(int pe) const {
  Transport* t = of_[static_cast<size_t>(pe)];
  return t ? t->name() : "none";
}

void Transports::quiet(symcommStream_t stream) {
  for (auto& t : open_) t->quiet(stream);
}

void Transports::abort() {
  for (auto& t : open_) t->abort();
}

void Transports::progress() {
  for (auto& t : open_) t->progress();
}

void Transports::raise_failure() {
  for (auto& t : open_) t->raise_failure();
}

void Transports::single_writer_words(const void* base, size_t bytes) {
  for (auto& t : open_) t->single_writer_words(base, bytes);
}

}  // namespace symcomm
