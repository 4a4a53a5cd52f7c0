// Rounds: copies to the members and the flag operations around them, on the caller's
// stream and the state's side streams.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "coll/ce_rounds.h"

namespace symcomm::ce {

template <typename F>
void Rounds::spread(size_t count, F&& issue) {
  if (count == 0) return;
  const size_t ks = std::min(count, static_cast<size_t>(s_.streams()));
  const int k = static_cast<int>(ks);
  if (k == 1) {
    for (size_t i = 0; i < count; ++i) issue(i, main_);
    return;
  }
  SYMCOMM_CUDART(cudaEventRecord(s_.fork_event(), main_));
  for (int q = 0; q < k; ++q) SYMCOMM_CUDART(cudaStreamWaitEvent(s_.side(q), s_.fork_event(), 0));
  for (size_t i = 0; i < count; ++i) issue(i, s_.side(static_cast<int>(i % ks)));
  for (int q = 0; q < k; ++q) {
    SYMCOMM_CUDART(cudaEventRecord(s_.join_event(q), s_.side(q)));
    SYMCOMM_CUDART(cudaStreamWaitEvent(main_, s_.join_event(q), 0));
  }
}

void Rounds::run(const Round& r) {
  // This rank's own block needs no flag: it is copied beside the round.
  if (!r.own.empty()) {
    SYMCOMM_CUDART(cudaEventRecord(s_.aside_fork(), main_));
    SYMCOMM_CUDART(cudaStreamWaitEvent(s_.aside(), s_.aside_fork(), 0));
    for (const Copy& c : r.own) put(c, s_.aside());
  }
  // The slots (or the receive buffer) of the members that write here are free.
  for (int j : r.in)
    s_.write32(main_, low_half(peer(kReady, j)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  std::vector<int> to;
  for (const auto& o : r.out) to.push_back(o.first);
  wait_all(kReady, to, false);
  spread(r.out.size(), [&](size_t i, cudaStream_t stream) {
    const auto& [j, copy] = r.out[i];
    put(copy, stream);
    // The reset is ordered before the signal by the signal's barrier; the peer writes the
    // word again only after it has seen the signal.
    s_.write32(stream, low_half(s_.word(kReady, a_.team.world_of(j))), 0, kWrite);
    s_.write32(stream, low_half(peer(kDone, j)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  });
  wait_all(kDone, r.in, true);
  spread(r.unpack.size(), [&](size_t i, cudaStream_t stream) { put(r.unpack[i], stream); });
  if (!r.own.empty()) {
    SYMCOMM_CUDART(cudaEventRecord(s_.aside_join(), s_.aside()));
    SYMCOMM_CUDART(cudaStreamWaitEvent(main_, s_.aside_join(), 0));
  }
}

uint64_t* Rounds::peer(Kind kind, int j) const {
  return reinterpret_cast<uint64_t*>(ctx_.on(a_, s_.word(kind, me_), j));
}

void Rounds::put(const Copy& c, cudaStream_t stream) {
  if (c.bytes) ctx_.backend().put(c.dst, c.src, c.bytes, symcommEngineCe, stream);
}

void Rounds::wait_all(Kind kind, const std::vector<int>& members, bool reset) {
  if (members.empty()) return;
  std::vector<int> worlds;
  for (int j : members) worlds.push_back(a_.team.world_of(j));
  announce(kind, worlds);
  for (int world : worlds) s_.wait_geq(main_, s_.word(kind, world), 1);
  if (reset)
    for (int world : worlds) s_.write32(main_, low_half(s_.word(kind, world)), 0, kWrite);
  passed();
}

void Rounds::announce(Kind kind, const std::vector<int>& worlds) {
  if (Watch* w = s_.watch())
    s_.write64(main_, &w->waiting, uint64_t{kind} << 32 | (uint64_t{s_.group_of(worlds)} + 1),
               kWrite);
}

void Rounds::passed() {
  if (Watch* w = s_.watch()) {
    s_.write64(main_, &w->passed, 1, kWrite);
    s_.write64(main_, &w->waiting, 0, kWrite);
  }
}

}  // namespace symcomm::ce
