#include "transport/net/rail_transfer.h"

#include <algorithm>

#include "base/log.h"
#include "base/param.h"

namespace symcomm {

static const SizeParam kStripeMin(
    "SYMCOMM_NET_STRIPE_MIN", "1M",
    "with several rails (SYMCOMM_NET_RAILS), transfers from this size on are striped over the "
    "rails, weighted by each rail's measured rate; smaller ones go whole, on the rails in turn "
    "(above the largest transfer: every one whole, NVSHMEM's rule)", 4096);

static const IntParam kSlowRail(
    "SYMCOMM_NET_SLOW_RAIL", "4",
    "a rail this many times slower than the fastest (as measured) leaves the stripe set", 1,
    1000000);

static const IntParam kRailTimeout(
    "SYMCOMM_NET_RAIL_TIMEOUT", "2000",
    "milliseconds without a completion on a rail's connection to a peer, with a transfer "
    "outstanding there, after which the rail is taken as failed (a tcp connection over a link "
    "that went down stalls without an error) and its pieces go again on the other rails; 0: "
    "only error completions fail a rail", 0, 3600 * 1000);

namespace {

using Clock = std::chrono::steady_clock;

// Transfers up to this size are driven by the calling thread (Proxy::wait).
constexpr size_t kDriveMax = 64 << 10;
// A failed lane is down this long at first, twice as long at each failure in a row.
constexpr auto kFirstDown = std::chrono::milliseconds(1000);
constexpr auto kLongestDown = std::chrono::milliseconds(32000);

}  // namespace

bool lane_failure(const Error& e) {
  return e.code() == symcommPeerLost || dynamic_cast<const RailStalled*>(&e) != nullptr;
}

LaneTransfers::LaneTransfers(RailSet& rails, std::vector<Proxy*> proxies, int rank,
                             size_t chunk, int64_t timeout_ms)
    : rails_(rails), proxies_(std::move(proxies)), rank_(rank), chunk_(chunk),
      timeout_ms_(timeout_ms),
      // A stall is failed over only where both ends of the connection can be closed.
      rail_timeout_ms_(rails.tcp() ? kRailTimeout.get() : 0),
      // Transfers from 1 MiB on are striped; smaller ones go whole, on the rails in turn. On
      // 2 rails shaped to 1 Gbit/s, 64 KiB puts striped in halves ran at 0.34x one rail (two
      // proxies and the caller contending for 2 cores), whole in turn at 1.9x.
      striper_(rails::StripePolicy{kStripeMin.get(), 128, static_cast<double>(kSlowRail.get())}) {
  for (int pe = 0; pe < static_cast<int>(rails.nranks()); ++pe) {
    const size_t n = rails_.lanes(pe).size();
    peers_.push_back(PeerLanes{std::vector<rails::LaneState>(n), std::vector<LaneHealth>(n)});
    down_.push_back(std::make_unique<std::atomic<int>>(0));
  }
}

wire::Header LaneTransfers::header(wire::Kind kind) const {
  wire::Header h{};
  h.kind = kind;
  h.from = rank_;
  return h;
}

void LaneTransfers::run(NetOp::Type type, int pe, size_t offset, void* local, size_t bytes) {
  if (!bytes) return;
  Pending p = start(type, pe, offset, local, bytes);
  finish(p);
}

LaneTransfers::Pending LaneTransfers::start(NetOp::Type type, int pe, size_t offset, void* local,
                                            size_t bytes) {
  Pending t{type, pe, offset, local, {rails::Piece{0, 0, bytes}}, {}, Clock::now()};
  if (!bytes) {
    t.pieces.clear();
    return t;
  }
  const std::vector<rails::Lane>& lanes = rails_.lanes(pe);
  if (lanes.size() > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    bring_back(pe);
    t.pieces = striper_.plan(bytes, peers_[static_cast<size_t>(pe)].state);
  }
  for (const rails::Piece& p : t.pieces) {
    const rails::Lane& lane = lanes[static_cast<size_t>(p.lane)];
    t.ops.emplace_back(proxy_of(lane), op_of(lane, type, pe, offset + p.offset,
                                             static_cast<char*>(local) + p.offset, p.bytes));
    t.ops.back().first->submit(t.ops.back().second);
  }
  return t;
}

void LaneTransfers::finish(Pending& t) {
  const std::vector<rails::Lane>& lanes = rails_.lanes(t.pe);
  const char* what = t.type == NetOp::Type::Write ? "a put" : "a get";
  for (size_t k = 0; k < t.ops.size(); ++k) {
    Op& op = t.ops[k];
    try {
      // A small transfer is a round trip: the caller drives it (Proxy::wait).
      wait(op, op.second->parts.size() == 1 && op.second->parts[0].bytes <= kDriveMax,
           lanes.size() > 1, what);
    } catch (const Error& e) {
      // The lane failed under the piece (an error completion, or a stall): the piece goes
      // again on the other lanes (fail_over), each in turn, until one carries it.
      if (!lane_failure(e) || lanes.size() == 1 || aborted_.load())
        throw;
      fail_over(t.type, t.pe, t.offset, t.local, t.pieces[k], e.what(), &op);
    }
  }
  // Each lane's rate, from the time its piece took: the next stripes weigh by it (not where
  // another lane carried the piece); symcommPeerNetLanes reports it. A lane that carried its
  // piece has recovered: its next failure is down for the shortest time again.
  std::lock_guard<std::mutex> lock(mutex_);
  PeerLanes& peer = peers_[static_cast<size_t>(t.pe)];
  for (size_t k = 0; k < t.pieces.size(); ++k) {
    const size_t lane = static_cast<size_t>(t.pieces[k].lane);
    if (t.ops[k].first != proxy_of(lanes[lane]) ||
        t.ops[k].second->rail != lanes[lane].remote_rail)
      continue;
    rails::observe_rate(peer.state[lane], t.pieces[k].bytes,
                        std::chrono::duration<double>(t.ops[k].second->done_at - t.start).count());
    if (peer.state[lane].up) peer.health[lane].backoff = std::chrono::milliseconds(0);
  }
}

void LaneTransfers::begin(NetOp::Type type, int pe, size_t offset, void* local, size_t bytes) {
  if (!bytes) return;
  std::lock_guard<std::mutex> lock(begun_mutex_);
  if (begun_.size() >= kMostBegun) {
    Pending oldest = std::move(begun_.front());
    begun_.pop_front();
    finish(oldest);
  }
  begun_.push_back(start(type, pe, offset, local, bytes));
}

void LaneTransfers::finish_begun() {
  std::lock_guard<std::mutex> lock(begun_mutex_);
  std::exception_ptr first;
  // Every one is finished (or has failed) before this returns: none is left writing into or
  // reading from a buffer its caller may reuse once it is told of the failure.
  while (!begun_.empty()) {
    Pending p = std::move(begun_.front());
    begun_.pop_front();
    try {
      finish(p);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void LaneTransfers::wait(const Op& op, bool drive, bool stall_bound, const char* what) const {
  op.first->wait(*op.second, timeout_ms_, what, drive, stall_bound ? rail_timeout_ms_ : 0);
}

void LaneTransfers::bring_back(int pe) {
  const auto now = Clock::now();
  PeerLanes& peer = peers_[static_cast<size_t>(pe)];
  for (size_t i = 0; i < peer.state.size(); ++i) {
    if (peer.state[i].up) continue;
    LaneHealth& h = peer.health[i];
    const rails::Lane& lane = rails_.lanes(pe)[i];
    if (!h.probe) {
      if (now < h.down_until) continue;
      // A flush over the lane, answered over it: both ways work again.
      h.probe = Proxy::message(pe, header(wire::Kind::Flush), nullptr, true, lane.remote_rail);
      h.probe_sent = now;
      proxy_of(lane)->submit(h.probe);
      SYMCOMM_INFO("net transport: lane %zu to rank %d (rail %d to its rail %d) is tried "
                   "again", i, pe, lane.local_rail, lane.remote_rail);
      continue;
    }
    const int state = h.probe->state.load();
    const bool late = rail_timeout_ms_ > 0 &&
                      now - h.probe_sent > std::chrono::milliseconds(rail_timeout_ms_);
    if (state == 1) {
      peer.state[i].up = true;
      down_[static_cast<size_t>(pe)]->fetch_sub(1, std::memory_order_release);
      h.probe.reset();
      SYMCOMM_INFO("net transport: lane %zu to rank %d (rail %d to its rail %d) is back up", i,
                   pe, lane.local_rail, lane.remote_rail);
    } else if (state == 2 || late) {
      // Still failing: down for longer. The probe's connection closes at this end (a flush
      // carries nothing that could land late); the next probe connects anew.
      SYMCOMM_INFO("net transport: lane %zu to rank %d is still down (%s)", i, pe,
                   state == 2 ? h.probe->error.c_str() : "the probe was not answered in time");
      proxy_of(lane)->submit(Proxy::reconnect(pe, lane.remote_rail, h.probe));
      h.probe.reset();
      h.backoff = std::min(h.backoff * 2, kLongestDown);
      h.down_until = now + h.backoff;
    }
  }
}

bool LaneTransfers::up(int pe, size_t lane) {
  // Every lane up (the common case): no lock.
  if (down_[static_cast<size_t>(pe)]->load(std::memory_order_acquire) == 0) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  bring_back(pe);
  return peers_[static_cast<size_t>(pe)].state[lane].up;
}

void LaneTransfers::lane_failed(int pe, size_t lane, const std::shared_ptr<NetOp>& abandon,
                                const std::string& why) {
  const rails::Lane& failed = rails_.lanes(pe)[lane];
  SYMCOMM_WARN("net transport: lane %zu to rank %d (rail %d to its rail %d) failed under its "
               "messages (%s): they go again on another lane", lane, pe, failed.local_rail,
               failed.remote_rail, why.c_str());
  close_both_ends(pe, static_cast<int>(lane), abandon);
}

void LaneTransfers::fail_over(NetOp::Type type, int pe, size_t offset, void* local,
                              const rails::Piece& p, const std::string& why, Op* op) {
  const std::vector<rails::Lane>& lanes = rails_.lanes(pe);
  const rails::Lane& failed = lanes[static_cast<size_t>(p.lane)];
  SYMCOMM_WARN("net transport: lane %d to rank %d (rail %d to its rail %d) failed under a "
               "transfer (%s): its piece of %zu bytes goes again on the other lanes", p.lane,
               pe, failed.local_rail, failed.remote_rail, why.c_str(), p.bytes);
  close_both_ends(pe, p.lane, op->second);
  const char* what = type == NetOp::Type::Write ? "a put" : "a get";
  std::string last = why;
  for (size_t i = 1; i < lanes.size(); ++i) {
    const int index = static_cast<int>((static_cast<size_t>(p.lane) + i) % lanes.size());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!peers_[static_cast<size_t>(pe)].state[static_cast<size_t>(index)].up) continue;
    }
    const rails::Lane& lane = lanes[static_cast<size_t>(index)];
    Op again{proxy_of(lane), op_of(lane, type, pe, offset + p.offset,
                                   static_cast<char*>(local) + p.offset, p.bytes)};
    again.first->submit(again.second);
    try {
      wait(again, false, true, what);
      *op = again;
      return;
    } catch (const Error& e) {
      if (!lane_failure(e) || aborted_.load()) throw;
      last = e.what();
      SYMCOMM_WARN("net transport: lane %d to rank %d (rail %d to its rail %d) failed too "
                   "(%s)", index, pe, lane.local_rail, lane.remote_rail, last.c_str());
      close_both_ends(pe, index, again.second);
    }
  }
  SYMCOMM_THROW(symcommPeerLost, "every lane to rank %d failed under a transfer: %s", pe,
                last.c_str());
}

void LaneTransfers::mark_down(int pe, size_t lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  PeerLanes& peer = peers_[static_cast<size_t>(pe)];
  LaneHealth& h = peer.health[lane];
  if (peer.state[lane].up)
    down_[static_cast<size_t>(pe)]->fetch_add(1, std::memory_order_release);
  peer.state[lane].up = false;
  h.backoff = h.backoff.count() ? std::min(h.backoff * 2, kLongestDown) : kFirstDown;
  h.down_until = Clock::now() + h.backoff;
}

void LaneTransfers::close_both_ends(int pe, int index, const std::shared_ptr<NetOp>& abandon) {
  const std::vector<rails::Lane>& lanes = rails_.lanes(pe);
  const rails::Lane& failed = lanes[static_cast<size_t>(index)];
  mark_down(pe, static_cast<size_t>(index));
  // This end: the connection closes, the operation is given up (its pieces go elsewhere).
  std::shared_ptr<NetOp> here = Proxy::reconnect(pe, failed.remote_rail, abandon);
  proxy_of(failed)->submit(here);
  try {
    proxy_of(failed)->wait(*here, timeout_ms_, "closing a failed lane");
  } catch (const Error& e) {
    // Not tcp: only an error completion fails a lane there (no stall bound), and the provider
    // closed that connection itself.
    if (e.code() == symcommNotSupported) return;
    throw;
  }
  // The far end, asked over another lane that is up (lane 0 first: the messages').
  wire::Header h = header(wire::Kind::Disconnect);
  h.a = static_cast<uint64_t>(failed.local_rail);
  h.b = static_cast<uint64_t>(failed.remote_rail);
  std::string last = "no other lane is up";
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (static_cast<int>(i) == index) continue;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!peers_[static_cast<size_t>(pe)].state[i].up) continue;
    }
    Op ask{proxy_of(lanes[i]), Proxy::message(pe, h, nullptr, true, lanes[i].remote_rail)};
    ask.first->submit(ask.second);
    try {
      wait(ask, true, true, "a request to close a failed lane's far end");
      if (ask.second->reply == 1) return;
      last = "the peer could not close it";
    } catch (const Error& e) {
      if (!lane_failure(e) || aborted_.load()) throw;
      last = e.what();
      // That lane failed too (it carried only the request: nothing of it can land late):
      // its connection closes here, and it is down like any failed lane.
      SYMCOMM_WARN("net transport: lane %zu to rank %d (rail %d to its rail %d) failed under "
                   "a request to close another (%s)", i, pe, lanes[i].local_rail,
                   lanes[i].remote_rail, last.c_str());
      ask.first->submit(Proxy::reconnect(pe, lanes[i].remote_rail, ask.second));
      mark_down(pe, i);
    }
  }
  SYMCOMM_THROW(symcommPeerLost, "lane %d to rank %d (rail %d to its rail %d) failed, and its "
                "far end could not be closed over another lane (%s): what it held could "
                "still land", index, pe, failed.local_rail, failed.remote_rail, last.c_str());
}

void LaneTransfers::on_disconnect(Proxy& via, const wire::Header& h) {
  const int mine = static_cast<int>(h.b);
  const int theirs = static_cast<int>(h.a);
  const int to = h.from, reply_rail = h.rail;
  const uint64_t ticket = h.ticket;
  if (mine < 0 || static_cast<size_t>(mine) >= proxies_.size() || theirs < 0 ||
      theirs >= rails_.rails_of(to)) {
    SYMCOMM_WARN("net transport: rank %d asked to close a connection of rail %d to its rail "
                 "%d, which do not exist", to, mine, theirs);
    return via.reply(to, reply_rail, ticket, Proxy::Answer{});
  }
  SYMCOMM_WARN("net transport: rank %d's rail %d failed towards this rank's rail %d: that "
               "connection closes here too", to, theirs, mine);
  // On the proxy of rail `mine` (its endpoint's thread); the answer goes back the way the
  // request came (`via`), which works: rail `mine` may not.
  Proxy* at = &via;
  proxies_[static_cast<size_t>(mine)]->submit(
      Proxy::reconnect(to, theirs, nullptr, [at, to, reply_rail, ticket, this](bool closed) {
        wire::Header out = header(wire::Kind::Reply);
        out.a = closed ? 1 : 0;
        out.ticket = ticket;
        at->submit(Proxy::message(to, out, nullptr, false, reply_rail));
      }));
}

std::vector<symcommNetLane_t> LaneTransfers::lanes(int pe) const {
  const std::vector<rails::Lane>& lanes = rails_.lanes(pe);
  std::vector<symcommNetLane_t> out;
  std::lock_guard<std::mutex> lock(mutex_);
  const PeerLanes& l = peers_[static_cast<size_t>(pe)];
  for (size_t i = 0; i < lanes.size(); ++i)
    out.push_back(symcommNetLane_t{lanes[i].local_rail, lanes[i].remote_rail,
                                   l.state[i].up ? 1 : 0, l.state[i].rate});
  return out;
}

std::shared_ptr<NetOp> LaneTransfers::op_of(const rails::Lane& lane, NetOp::Type type, int pe,
                                            size_t offset, char* at, size_t bytes) const {
  // The range split at registered regions and at the chunk size.
  auto op = std::make_shared<NetOp>();
  op->type = type;
  op->pe = pe;
  op->rail = lane.remote_rail;
  // Where a failed lane's far end is closed under it (several lanes), the target must be able
  // to drop a write it is receiving (NetOp::remote_completion).
  op->remote_completion = rails_.lanes(pe).size() == 1;
  while (bytes) {
    RemoteRange r = rails_.remote(pe, lane.remote_rail, offset, bytes);
    for (size_t done = 0; done < r.bytes;) {
      const size_t piece = std::min(chunk_, r.bytes - done);
      op->parts.push_back(Posted{{}, op.get(), at + done, piece, r.addr + done, r.key, 0});
      done += piece;
    }
    at += r.bytes, offset += r.bytes, bytes -= r.bytes;
  }
  op->outstanding = static_cast<int>(op->parts.size());
  return op;
}

}  // namespace symcomm
