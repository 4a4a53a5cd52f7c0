#include "coll/p2p.h"

#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/p2p_parts.h"
#include "rma/wait.h"

namespace symcomm {

static const SizeParam kSlotBytes(
    "SYMCOMM_P2P_SLOT", "256K",
    "bytes of one slot of a send/recv mailbox (a 64-byte header, then data); every rank keeps "
    "4 slots per peer; at least 4K");
static const IntParam kWays(
    "SYMCOMM_P2P_WAYS", "32",
    "the most blocks (ways) that the cuda space's send/recv runs on a lane to a member of "
    "this node, each with its own slots; fewer where the GPU holds fewer", 1, kP2pWays);

namespace {

// The first bytes of the slot that holds a message's first chunk: the message's size, team
// and sender.
struct ChunkHeader {
  uint64_t total;  // the message's bytes
  int32_t team;
  int32_t from;
};
static_assert(sizeof(ChunkHeader) <= PointToPoint::kHeader, "the header fits its room");

uint64_t load(const uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

}  // namespace

// What one call has done so far.
struct PointToPoint::Progress {
  size_t chunks_done = 0;
  size_t chunks = 0;     // 0 for a receive until its first chunk's header was read
  uint64_t total = 0;    // a receive: the sender's message size, from that header
  std::string mismatch;  // a receive whose send did not match it
  bool done() const { return chunks != 0 && chunks_done == chunks; }
};

PointToPoint::PointToPoint(const Topology& topology, Rma& rma, Heap& heap,
                           symcommMemorySpace_t space)
    : rma_(rma), space_(space), rank_(topology.rank), nranks_(topology.nranks) {
  const bool cuda = space_ == symcommSpaceCuda;
  if (cuda) {
    cuda_ = std::make_unique<P2pCuda>(topology.device, nranks_ * kP2pWays);
    const int lanes = 2 * nranks_;  // the most a group can have (itself included)
    const int most = static_cast<int>(kWays.get());
    const int mine = std::clamp(cuda_->max_blocks() / lanes, 1, most);
    std::vector<int> all(static_cast<size_t>(nranks_));
    rma_.bootstrap().allgather(&mine, sizeof mine, all.data());
    lsa_ways_ = *std::min_element(all.begin(), all.end());
  }
  // The cuda space's mailboxes, words and headers are per (peer, way) (coll/p2p_plan.h).
  const size_t n = static_cast<size_t>(nranks_) * static_cast<size_t>(cuda ? lsa_ways_ : 1);
  // Every rank's mailboxes take at most an eighth of the heap's most (a small
  // SYMCOMM_HEAP_MAX is left to the application), in slots of at least 4 KiB.
  size_t slot = std::max<size_t>(kSlotBytes.get(), 4096);
  const size_t most = heap.max_bytes() / 8 / (n * kSlots) / 256 * 256;
  slot = std::max<size_t>(std::min(slot, most), 4096);
  slot_bytes_ = slot / 64 * 64;
  const size_t words = 2 * n * sizeof(uint64_t);
  const size_t headers = cuda ? n * kHeader : 0;
  char* area = static_cast<char*>(heap.malloc_internal(words + headers + n * kSlots * slot_bytes_));
  filled_ = reinterpret_cast<uint64_t*>(area);
  freed_ = filled_ + n;
  if (cuda) {
    headers_ = area + words;
    p2p_clear_device(topology.device, area, words);
    // The kernels' handle, made here rather than at the first group, which may be captured
    // into a graph (a ring to members on other nodes is made with it: memory, a sync).
    world_ = rma_.device_comm(SYMCOMM_TEAM_WORLD);
  } else {
    std::memset(area, 0, words);
    sent_.assign(n, 0);  // the host space's progress (the cuda space's is on the device)
    taken_.assign(n, 0);
    first_.resize(slot_bytes_);
  }
  boxes_ = area + words + headers;
}

void PointToPoint::raise_mismatch() {
  P2pMismatch m;
  if (!cuda_ || !cuda_->take_mismatch(&m)) return;
  SYMCOMM_THROW(symcommInvalidArgument,
                "an earlier receive on the stream did not match its send, and wrote nothing: "
                "rank %d sent %llu bytes on team %d where rank %d receives %llu bytes on team "
                "%d (sends and receives between two ranks are matched in the order of their "
                "calls, whatever the team)", m.peer, static_cast<unsigned long long>(m.total),
                m.team, rank_, static_cast<unsigned long long>(m.want), m.want_team);
}

void PointToPoint::run_cuda(const std::vector<Call>& calls) {
  // Lanes in the order of their first call; each lane's calls in their order.
  std::vector<std::pair<std::pair<int, bool>, std::vector<const Call*>>> lanes;
  for (const Call& c : calls) {
    auto it = std::find_if(lanes.begin(), lanes.end(), [&](const auto& l) {
      return l.first == std::make_pair(c.peer, c.send);
    });
    if (it == lanes.end()) it = lanes.insert(lanes.end(), {{c.peer, c.send}, {}});
    it->second.push_back(&c);
  }
  SYMCOMM_REQUIRE(lanes.size() <= static_cast<size_t>(P2pPlan::kMaxLanes) &&
                      calls.size() <= static_cast<size_t>(P2pPlan::kMaxCalls),
                  symcommNotSupported,
                  "a group of %zu sends and receives between this rank and %zu (peer, "
                  "direction) pairs: the cuda space runs at most %d calls and %d pairs in one "
                  "group", calls.size(), lanes.size(), P2pPlan::kMaxCalls, P2pPlan::kMaxLanes);
  P2pPlan plan{};
  plan.boxes = boxes_;
  plan.filled = filled_;
  plan.freed = freed_;
  plan.headers = headers_;
  cuda_->fill(plan);
  plan.slot_bytes = slot_bytes_;
  plan.slots = kSlots;
  plan.ways = lsa_ways_;
  int k = 0;
  Transports& transports = rma_.transports();
  for (const auto& [key, list] : lanes) {
    P2pLane& lane = plan.lanes[plan.nlanes++];
    lane.peer = key.first;
    lane.send = key.second ? 1 : 0;
    lane.first = static_cast<int16_t>(k);
    lane.count = static_cast<int16_t>(list.size());
    lane.block = static_cast<int16_t>(plan.nblocks);
    // Ways to members of this node (both ends see the same transport between them).
    lane.ways = static_cast<int8_t>(transports.to(key.first).load_store() ? lsa_ways_ : 1);
    plan.nblocks += lane.ways;
    for (const Call* c : list)
      plan.calls[k++] = P2pCall{c->send_buf, c->recv_buf, c->bytes,
                                static_cast<int32_t>(c->team), 0};
  }
  // The first call's stream runs the kernel; the group's other streams join it.
  void* stream = calls[0].stream;
  std::vector<const void*> others;
  for (const Call& c : calls)
    if (c.stream != stream &&
        std::find(others.begin(), others.end(), static_cast<const void*>(c.stream)) == others.end())
      others.push_back(c.stream);
  cuda_->launch(world_, plan, stream, others.data(), static_cast<int>(others.size()));
}

char* PointToPoint::mailbox(int sender, int slot) const {
  return boxes_ + (static_cast<size_t>(sender) * kSlots + static_cast<size_t>(slot)) * slot_bytes_;
}

bool PointToPoint::step(Call& c, Progress& p) {
  const size_t chunk = chunk_bytes();
  const size_t peer = static_cast<size_t>(c.peer);
  Transports& transports = rma_.transports();
  if (c.send) {
    if (p.chunks == 0) p.chunks = p2p_chunks(c.bytes, chunk);
    // A free slot: the receiver has taken all but kSlots - 1 of the chunks sent to it.
    if (sent_[peer] - load(&freed_[peer]) >= static_cast<uint64_t>(kSlots)) return false;
    const int slot = static_cast<int>(sent_[peer] % kSlots);
    const size_t at = p.chunks_done * chunk;
    const size_t bytes = std::min(chunk, c.bytes - std::min(c.bytes, at));
    char* box = mailbox(rank_, slot);  // the receiver's mailbox for this rank, by offset
    Transport& t = transports.to(c.peer);
    if (p.chunks_done == 0) {
      // The first chunk carries the message's header before its data: one put-signal.
      const ChunkHeader h{c.bytes, static_cast<int32_t>(c.team), rank_};
      std::memcpy(first_.data(), &h, sizeof h);
      if (bytes) std::memcpy(first_.data() + kHeader, c.send_buf, bytes);
      t.put_signal(c.peer, box, first_.data(), kHeader + bytes, &filled_[rank_], 1,
                   symcommSignalAdd, symcommEngineAuto, nullptr);
    } else {
      t.put_signal(c.peer, box + kHeader, c.send_buf + at, bytes, &filled_[rank_], 1,
                   symcommSignalAdd, symcommEngineAuto, nullptr);
    }
    ++sent_[peer];
    ++p.chunks_done;
    return true;
  }
  if (load(&filled_[peer]) <= taken_[peer]) return false;  // nothing from the peer yet
  const int slot = static_cast<int>(taken_[peer] % kSlots);
  const char* box = mailbox(c.peer, slot);
  if (p.chunks == 0) {  // the message's first chunk: its header
    ChunkHeader h;
    std::memcpy(&h, box, sizeof h);
    SYMCOMM_REQUIRE(h.from == c.peer, symcommInternalError,
                    "send/recv: rank %d's mailbox slot %d for rank %d held a chunk from rank %d",
                    rank_, slot, c.peer, h.from);
    p.total = h.total;
    p.chunks = p2p_chunks(h.total, chunk);
    if (h.total != c.bytes || h.team != static_cast<int32_t>(c.team))
      p.mismatch = format("rank %d sent %llu bytes on team %d where rank %d receives %zu bytes "
                          "on team %d (sends and receives between two ranks are matched in "
                          "the order of their calls, whatever the team)",
                          c.peer, static_cast<unsigned long long>(h.total), h.team, rank_,
                          c.bytes, static_cast<int>(c.team));
  }
  const size_t at = p.chunks_done * chunk;
  const size_t total = static_cast<size_t>(p.total);
  const size_t bytes = std::min(chunk, total - std::min(total, at));
  if (p.mismatch.empty() && bytes) std::memcpy(c.recv_buf + at, box + kHeader, bytes);
  ++taken_[peer];
  ++p.chunks_done;
  // The slot is free again: told to the sender, in its word for this rank.
  transports.to(c.peer).signal(c.peer, &freed_[rank_], 1, symcommSignalAdd, nullptr);
  return true;
}

void PointToPoint::run(std::vector<Call>& calls) {
  if (calls.empty()) return;
  if (calls[0].owner->space_ != symcommSpaceCuda) return run_host(calls);
  for (const Call& c : calls)
    SYMCOMM_REQUIRE(c.owner == calls[0].owner, symcommNotSupported,
                    "a group of sends and receives of several communicators: the cuda space "
                    "runs a group of one communicator only, so far");
  calls[0].owner->run_cuda(calls);
}

void PointToPoint::run_host(std::vector<Call>& calls) {
  for (const Call& c : calls)
    SYMCOMM_REQUIRE(c.owner->space_ == symcommSpaceHost, symcommNotSupported,
                    "a group of sends and receives of communicators of both memory spaces");
  std::vector<Progress> progress(calls.size());
  // Of each (communicator, peer, direction), only the first unfinished call moves: the pair's
  // calls are matched in order. before[i]: the call of i's kind just before it (-1: none).
  std::vector<std::ptrdiff_t> before(calls.size(), -1);
  {
    std::map<std::tuple<const PointToPoint*, int, bool>, std::ptrdiff_t> last;
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto at = static_cast<std::ptrdiff_t>(i);
      auto [it, fresh] = last.try_emplace({calls[i].owner, calls[i].peer, calls[i].send}, at);
      if (!fresh) before[i] = std::exchange(it->second, at);
    }
  }
  // The communicators the calls belong to, once each: what has arrived is applied for each.
  std::vector<PointToPoint*> owners;
  for (const Call& c : calls)
    if (std::find(owners.begin(), owners.end(), c.owner) == owners.end())
      owners.push_back(c.owner);
  const int64_t timeout_ms = wait_timeout_ms();
  using Clock = std::chrono::steady_clock;
  auto last_move = Clock::now();
  for (uint64_t spins = 0;; ++spins) {
    bool moved = false, all_done = true;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (progress[i].done()) continue;
      all_done = false;
      if (before[i] >= 0 && !progress[static_cast<size_t>(before[i])].done()) continue;
      Call& c = calls[i];
      while (!progress[i].done() && c.owner->step(c, progress[i])) moved = true;
    }
    if (all_done) break;
    if (moved) {
      last_move = Clock::now();
      continue;
    }
    // Nothing could move: what has arrived from other nodes is applied here.
    for (PointToPoint* o : owners) o->rma_.transports().progress();
    if (spins % 256 != 255) continue;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (progress[i].done()) continue;
      const Call& c = calls[i];
      auto what = [&] {
        return c.send ? format("a send of %zu bytes to rank %d waited for a free slot of its "
                               "mailbox there (chunk %zu of %zu)", c.bytes, c.peer,
                               progress[i].chunks_done + 1, progress[i].chunks)
                      : format("a receive of %zu bytes from rank %d waited for chunk %zu",
                               c.bytes, c.peer, progress[i].chunks_done + 1);
      };
      if (c.owner->rma_.backend().aborted())
        SYMCOMM_THROW(symcommPeerLost, "the communicator was aborted: %s", what().c_str());
      if (timeout_ms > 0 && Clock::now() - last_move > std::chrono::milliseconds(timeout_ms))
        SYMCOMM_THROW(symcommTimeout, "%s for SYMCOMM_WAIT_TIMEOUT (%lld ms) with nothing "
                      "moving", what().c_str(), static_cast<long long>(timeout_ms));
      break;  // the first waiting call names the wait
    }
    std::this_thread::yield();
  }
  for (const Progress& p : progress)
    SYMCOMM_REQUIRE(p.mismatch.empty(), symcommInvalidArgument, "%s", p.mismatch.c_str());
}

Group& this_threads_group() {
  thread_local Group group;
  return group;
}

}  // namespace symcomm
