#include "transport/net/lane_messages.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "base/log.h"

namespace symcomm {

namespace {

// A flush goes after this many numbered messages not known to be applied (not waited for),
// and is waited for once the log holds kMaxPending.
constexpr size_t kAckEvery = 64;
constexpr size_t kMaxPending = 1024;

std::vector<uint8_t> compose(const wire::Header& h, const void* payload) {
  std::vector<uint8_t> m(sizeof h + h.bytes);
  std::memcpy(m.data(), &h, sizeof h);
  if (h.bytes) std::memcpy(m.data() + sizeof h, payload, h.bytes);
  return m;
}

// Numbered messages with an answer: fetching atomics, and staged landings (staging.h). A
// replay is answered with what the first one was.
bool fetching(wire::Kind k) {
  return k == wire::Kind::FetchAdd || k == wire::Kind::CompareSwap || k == wire::Kind::Landed;
}

}  // namespace

LaneMessages::LaneMessages(LaneTransfers& transfers, RailSet& rails, std::vector<Proxy*> proxies,
                           int rank, int nranks, int64_t timeout_ms)
    : transfers_(transfers), rails_(rails), proxies_(std::move(proxies)), rank_(rank),
      timeout_ms_(timeout_ms) {
  for (int pe = 0; pe < nranks; ++pe) {
    peers_.push_back(std::make_unique<Peer>());
    windows_.push_back(std::make_unique<rails::MessageWindow>());
    applied_from_.push_back(std::make_unique<std::atomic<uint32_t>>(0));
  }
}

Proxy* LaneMessages::proxy_of(int pe, size_t lane) const {
  return proxies_[static_cast<size_t>(rails_.lanes(pe)[lane].local_rail)];
}

size_t LaneMessages::lane_of(Peer& p, int pe) {
  const size_t n = rails_.lanes(pe).size();
  for (size_t i = 0; i < n; ++i) {
    const size_t lane = (p.lane + i) % n;
    if (!transfers_.up(pe, lane)) continue;
    if (lane != p.lane)
      SYMCOMM_INFO("net transport: messages to rank %d go on lane %zu now", pe, lane);
    p.lane = lane;
    return lane;
  }
  SYMCOMM_THROW(symcommPeerLost, "every lane to rank %d is down: its messages cannot go", pe);
}

void LaneMessages::failed(Peer& p, int pe, size_t lane, const std::shared_ptr<NetOp>& op,
                          const std::string& why) {
  if (p.ack && p.ack_lane == lane) p.ack.reset();  // given up with the connection
  p.resend = true;
  transfers_.lane_failed(pe, lane, op, why);
}

void LaneMessages::ask_ack(Peer& p, int pe, size_t lane) {
  wire::Header h{};
  h.kind = wire::Kind::Flush;
  h.from = rank_;
  p.ack = Proxy::message(pe, h, nullptr, true, rails_.lanes(pe)[lane].remote_rail);
  p.ack_proxy = proxy_of(pe, lane);
  p.ack_lane = lane;
  p.ack_proxy->submit(p.ack);
}

void LaneMessages::settle_ack(Peer& p, int pe, bool wait) {
  if (!p.ack) return;
  if (wait) {
    try {
      p.ack_proxy->wait(*p.ack, timeout_ms_, "a flush of messages", true, stall_ms());
    } catch (const Error& e) {
      if (!lane_failure(e) || transfers_.aborted()) throw;
      failed(p, pe, p.ack_lane, p.ack, e.what());
      return;
    }
  }
  const int state = p.ack->state.load();
  if (state == 0) return;
  if (state == 1 && p.ack->knows_applied) p.log.applied(p.ack->applied_next);
  if (state == 2) return failed(p, pe, p.ack_lane, p.ack, p.ack->error);
  p.ack.reset();
}

void LaneMessages::resend(Peer& p, int pe, size_t lane, bool skipping, uint32_t skip) {
  const int rail = rails_.lanes(pe)[lane].remote_rail;
  Proxy* proxy = proxy_of(pe, lane);
  std::vector<std::shared_ptr<NetOp>> ops;
  for (const rails::MessageLog::Entry& e : p.log.pending()) {
    if (skipping && e.seq == skip) continue;
    ops.push_back(Proxy::message(pe, e.message, rail));
    proxy->submit(ops.back());
  }
  if (!ops.empty())
    SYMCOMM_INFO("net transport: %zu message(s) to rank %d go again on lane %zu", ops.size(), pe,
                 lane);
  for (const auto& op : ops) {
    try {
      proxy->wait(*op, timeout_ms_, "a message sent again", true, stall_ms());
    } catch (const Error& e) {
      if (!lane_failure(e) || transfers_.aborted()) throw;
      failed(p, pe, lane, op, e.what());
      throw;  // (caught by send: the log goes again on the next lane)
    }
  }
  p.resend = false;
}

uint64_t LaneMessages::send(int pe, wire::Header h, const void* payload, const char* what,
                            bool reply) {
  Peer& p = *peers_[static_cast<size_t>(pe)];
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.knows_peer_applied.load(std::memory_order_acquire))
    p.log.applied(p.peer_applied.load(std::memory_order_relaxed));
  settle_ack(p, pe, p.log.size() >= kMaxPending);
  const bool numbered = wire::changes_memory(h.kind);
  if (numbered) {
    h.flags |= wire::kNumbered;
    h.seq = p.log.next();
  }
  if (!reply && h.ticket == 0) {  // one-way: it says what this rank applied of pe's
    h.flags |= wire::kPeerApplied;
    h.ticket = applied_from_[static_cast<size_t>(pe)]->load(std::memory_order_relaxed);
  }
  std::vector<uint8_t> composed = compose(h, payload);
  if (numbered) p.log.add(std::move(composed));
  const std::vector<uint8_t>& message = numbered ? p.log.pending().back().message : composed;
  for (;;) {
    const size_t lane = lane_of(p, pe);
    const int rail = rails_.lanes(pe)[lane].remote_rail;
    Proxy* proxy = proxy_of(pe, lane);
    std::shared_ptr<NetOp> op;
    try {
      if (p.resend) {
        // The log first: the messages before this one, and this one where it needs no
        // reply (then it has gone).
        resend(p, pe, lane, numbered && reply, h.seq);
        if (numbered && !reply) {
          if (p.log.size() >= kAckEvery && !p.ack) ask_ack(p, pe, lane);
          return 0;
        }
      }
      if (!reply && proxy->try_inject(pe, rail, message.data(), message.size())) {
        if (numbered && p.log.size() >= kAckEvery && !p.ack) ask_ack(p, pe, lane);
        return 0;
      }
      op = reply ? Proxy::message(pe, h, payload, true, rail) : Proxy::message(pe, message, rail);
      proxy->submit(op);
      proxy->wait(*op, timeout_ms_, what, /*drive=*/true, stall_ms());
      if (op->knows_applied) p.log.applied(op->applied_next);
      if (numbered && p.log.size() >= kAckEvery && !p.ack) ask_ack(p, pe, lane);
      return op->reply;
    } catch (const Error& e) {
      if (!lane_failure(e) || transfers_.aborted()) throw;
      if (!p.resend) failed(p, pe, lane, op, e.what());  // (resend failed its lane itself)
    }
  }
}

void LaneMessages::quiet(int pe, const wire::Header& flush) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    send(pe, flush, nullptr, "a quiet", true);
    Peer& p = *peers_[static_cast<size_t>(pe)];
    {
      std::lock_guard<std::mutex> lock(p.mutex);
      settle_ack(p, pe, false);
      if (p.log.size() == 0) return;
      // Answered, but not everything numbered was applied: what is missing went on a lane
      // whose loss showed nowhere. It goes again before the next flush.
      SYMCOMM_WARN("net transport: rank %d answered a flush with %zu message(s) of this rank "
                   "not applied; they go again", pe, p.log.size());
      p.resend = true;
    }
    SYMCOMM_REQUIRE(timeout_ms_ <= 0 || std::chrono::steady_clock::now() - start <
                                            std::chrono::milliseconds(timeout_ms_),
                    symcommTimeout, "quiet: rank %d did not apply this rank's messages within "
                    "SYMCOMM_WAIT_TIMEOUT (%lld ms)", pe, static_cast<long long>(timeout_ms_));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Proxy::Answer LaneMessages::receive(Proxy& via, const wire::Header& h, const uint8_t* payload,
                                    const Applier& apply_now) {
  if (h.from < 0 || static_cast<size_t>(h.from) >= windows_.size()) return Proxy::Answer{};
  Peer& sender = *peers_[static_cast<size_t>(h.from)];
  if (h.flags & wire::kPeerApplied) {
    sender.peer_applied.store(static_cast<uint32_t>(h.ticket), std::memory_order_relaxed);
    sender.knows_peer_applied.store(true, std::memory_order_release);
  }
  std::atomic<uint32_t>& applied = *applied_from_[static_cast<size_t>(h.from)];
  // Unnumbered (every message from a peer with one lane): no window, no lock. The numbered
  // ones before it from the same lane were applied on this rail's proxy already.
  if (!(h.flags & wire::kNumbered))
    return Proxy::Answer{apply_now(h, payload), true, applied.load(std::memory_order_relaxed)};
  std::lock_guard<std::mutex> lock(windows_mutex_);
  rails::MessageWindow& w = *windows_[static_cast<size_t>(h.from)];
  struct Publish {  // what this rank applied of the sender's, for its messages to carry
    rails::MessageWindow& w;
    std::atomic<uint32_t>& to;
    ~Publish() { to.store(w.next(), std::memory_order_relaxed); }
  } publish{w, applied};
  auto answer = [&](uint64_t value) { return Proxy::Answer{value, true, w.next(), false}; };
  std::vector<uint8_t> held;  // kept only where it comes early
  if (h.seq != w.next()) held = compose(h, payload);
  switch (w.arrive(h.seq, held.data(), held.size())) {
    case rails::MessageWindow::Fate::Apply: {
      const uint64_t value = apply_now(h, payload);
      if (fetching(h.kind)) w.answered(h.seq, value);
      // Those that came early and waited for this one, in order; answered here.
      for (uint32_t seq = w.next(); w.due(&held); seq = w.next()) {
        wire::Header e;
        std::memcpy(&e, held.data(), sizeof e);
        const uint64_t v = apply_now(e, held.data() + sizeof e);
        if (!fetching(e.kind)) continue;
        w.answered(seq, v);
        via.reply(e.from, e.rail, e.ticket, answer(v));
      }
      return answer(value);
    }
    case rails::MessageWindow::Fate::Duplicate: {
      uint64_t value = 0;
      if (fetching(h.kind) && !w.answer(h.seq, &value))
        SYMCOMM_WARN("net transport: rank %d sent message %u again after its answer was "
                     "forgotten; answered with 0", h.from, h.seq);
      return answer(value);
    }
    case rails::MessageWindow::Fate::Early:
      return Proxy::Answer{0, false, 0, true};  // answered once applied
    case rails::MessageWindow::Fate::Dropped:
      SYMCOMM_WARN("net transport: rank %d's message %u came %zu ahead of the one awaited; "
                   "dropped", h.from, h.seq, w.early());
      return Proxy::Answer{0, false, 0, true};
  }
  return Proxy::Answer{};
}

}  // namespace symcomm
