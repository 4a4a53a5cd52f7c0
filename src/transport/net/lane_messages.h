// The net transport's messages (signals, eager put-signals, atomics, flushes) to a peer with
// several lanes (host space), failed over like transfers: applied exactly once and in order
// however the lanes fail (rails/sequence.h).
//
// Sending: every message that changes the peer's memory is numbered and kept in the peer's
// log until an answer of the peer reports it applied (every reply carries the next number the
// peer waits for: wire::kNext). Messages go on one lane, lane 0 at first. Where that lane fails
// under a message (an error completion, or no completion for SYMCOMM_NET_RAIL_TIMEOUT, as
// for transfers) it goes down and both ends of its connection close (LaneTransfers); then the
// whole log goes again, in order, on the next lane that is up, and messages stay there. A
// message without a reply is not waited for: a failure under it shows at the next one that is
// (a flush every 64 numbered messages keeps the log short, and quiet asks for one). quiet
// returns once the peer applied everything in the log.
//
// Receiving: a window per sender applies numbered messages in order, once each; a replay of
// a fetching atomic is answered with the value the first one found.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/proxy.h"
#include "transport/net/rail_set.h"
#include "transport/net/rail_transfer.h"
#include "transport/net/rails/sequence.h"
#include "transport/net/wire.h"

namespace symcomm {

class LaneMessages {
 public:
  // `proxies`: this rank's, one a rail. `timeout_ms`: a call's bound (SYMCOMM_WAIT_TIMEOUT).
  LaneMessages(LaneTransfers& transfers, RailSet& rails, std::vector<Proxy*> proxies,
               int rank, int nranks, int64_t timeout_ms);

  // Sends `h` (and its h.bytes of payload) to `pe`; with `reply`, waits for the answer and
  // returns its value. Throws symcommPeerLost where every lane failed.
  uint64_t send(int pe, wire::Header h, const void* payload, const char* what, bool reply);
  // Returns once `pe` applied every message sent to it before (`flush`: a Flush header).
  void quiet(int pe, const wire::Header& flush);

  // A peer's message, on a proxy thread: `apply_now` applies one to this rank's memory and
  // returns a fetching atomic's value. Numbered ones go through the sender's window.
  using Applier = std::function<uint64_t(const wire::Header&, const uint8_t* payload)>;
  Proxy::Answer receive(Proxy& via, const wire::Header& h, const uint8_t* payload,
                        const Applier& apply_now);

 private:
  struct Peer {
    // What the peer applied of this rank's messages, as its one-way messages say (receive()
    // writes it without the mutex: a sender waiting under the mutex needs the proxy thread).
    std::atomic<uint32_t> peer_applied{0};
    std::atomic<bool> knows_peer_applied{false};
    std::mutex mutex;
    rails::MessageLog log;
    size_t lane = 0;              // the lane messages go on
    bool resend = false;          // a lane failed under messages: the log goes again first
    std::shared_ptr<NetOp> ack;   // a flush in flight, answered with the peer's next()
    Proxy* ack_proxy = nullptr;
    size_t ack_lane = 0;
  };

  // The lane messages to `pe` go on now (the next one up where p.lane is down). Throws
  // symcommPeerLost where none is up.
  size_t lane_of(Peer& p, int pe);
  // The ack in flight: its answer trims the log; its failure fails its lane. Waited for where
  // the log is long (`wait`).
  void settle_ack(Peer& p, int pe, bool wait);
  void ask_ack(Peer& p, int pe, size_t lane);
  // Sends the log again on `lane` (all but number `skip` where `skipping`), waiting until
  // each was delivered.
  void resend(Peer& p, int pe, size_t lane, bool skipping, uint32_t skip);
  void failed(Peer& p, int pe, size_t lane, const std::shared_ptr<NetOp>& op,
              const std::string& why);
  Proxy* proxy_of(int pe, size_t lane) const;
  int64_t stall_ms() const { return transfers_.rail_timeout_ms(); }

  LaneTransfers& transfers_;
  RailSet& rails_;
  std::vector<Proxy*> proxies_;
  int rank_;
  int64_t timeout_ms_;
  std::vector<std::unique_ptr<Peer>> peers_;  // [pe]
  std::mutex windows_mutex_;  // proxies of several rails receive at once
  std::vector<std::unique_ptr<rails::MessageWindow>> windows_;  // [sender]
  // windows_[pe].next(), for one-way messages to pe to carry (wire::kPeerApplied).
  std::vector<std::unique_ptr<std::atomic<uint32_t>>> applied_from_;
};

}  // namespace symcomm
