// The net transport's host-space transfers over the lanes to a peer (rail_set.h): striped by
// measured rate (rails/stripes.h), and failed over when a lane fails under one.
//
// A lane fails under a piece when the piece ends in an error completion (a connection reset)
// or stalls: nothing completed on its connection for SYMCOMM_NET_RAIL_TIMEOUT (a tcp
// connection over a link that went down stalls silently until tcp gives up, minutes later).
// Then, before the piece goes again on another lane, both ends of the failed connection are
// closed: this rank removes the peer's address from the lane's endpoint (which closes the
// connection and discards what it holds), and asks the peer, over another lane, to do the
// same on its side (wire::Kind::Disconnect) and waits for its answer. A write still queued
// in either end's socket, or retransmitted once the link is back, can then no longer land
// over newer data; a read's answer can no longer land in a buffer the caller reuses.
//
// The failed lane is down for a while (1 s, doubling while it keeps failing, up to 32 s);
// then a probe (a flush, answered) goes over it beside the traffic, and the lane carries
// pieces again once the probe's answer came. Where every lane fails the call fails with
// symcommPeerLost. One lane to a peer: no failover (its failures are the call's).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "symcomm/symcomm.h"
#include "transport/net/proxy.h"
#include "transport/net/rail_set.h"
#include "transport/net/rails/stripes.h"
#include "transport/net/wire.h"

namespace symcomm {

// Whether `e` is a lane's failure (an error completion, or a stall), which another lane can
// get around; not where the communicator was aborted or a call's bound ran out.
bool lane_failure(const Error& e);

class LaneTransfers {
 public:
  // `proxies`: this rank's, one a rail (rail_set's order). `timeout_ms`: a call's bound
  // (SYMCOMM_WAIT_TIMEOUT); `chunk`: the largest single write or read.
  LaneTransfers(RailSet& rails, std::vector<Proxy*> proxies, int rank, size_t chunk,
                int64_t timeout_ms);

  using Op = std::pair<Proxy*, std::shared_ptr<NetOp>>;
  // A transfer started (its pieces handed to the proxies) and not yet finished.
  struct Pending {
    NetOp::Type type;
    int pe;
    size_t offset;
    void* local;
    std::vector<rails::Piece> pieces;
    std::vector<Op> ops;  // [piece]
    std::chrono::steady_clock::time_point start;
  };
  // A write or read of `bytes` between `local` and heap offset `offset` of `pe`, complete
  // when it returns: every piece landed, on whichever lane carried it. run() is start() then
  // finish(), which may come later (a put_nbi, with other transfers started in between).
  void run(NetOp::Type type, int pe, size_t offset, void* local, size_t bytes);
  Pending start(NetOp::Type type, int pe, size_t offset, void* local, size_t bytes);
  void finish(Pending& p);
  // A transfer left in flight when this returns (put_nbi, get_nbi), finished by
  // finish_begun(); at most kMostBegun at a time (the oldest is finished to make room).
  void begin(NetOp::Type type, int pe, size_t offset, void* local, size_t bytes);
  // Finishes every begun transfer, then throws the first one's failure, if any.
  void finish_begun();
  static constexpr size_t kMostBegun = 64;
  // The lanes to `pe`, as symcommPeerNetLanes reports them.
  std::vector<symcommNetLane_t> lanes(int pe) const;
  // A peer's Disconnect (wire.h), arrived at `via`: closes this rank's end, then answers.
  void on_disconnect(Proxy& via, const wire::Header& h);
  void abort() { aborted_.store(true); }
  bool aborted() const { return aborted_.load(); }

  // For the messages over the same lanes (lane_messages.h):
  // Whether lane `lane` to `pe` is up; down lanes are probed first, and are back where their
  // probe was answered.
  bool up(int pe, size_t lane);
  // The lane failed under `abandon` (`why`): it goes down and both ends of its connection
  // close (close_both_ends).
  void lane_failed(int pe, size_t lane, const std::shared_ptr<NetOp>& abandon,
                   const std::string& why);
  // SYMCOMM_NET_RAIL_TIMEOUT where a stall fails a lane (tcp), else 0.
  int64_t rail_timeout_ms() const { return rail_timeout_ms_; }

 private:
  struct LaneHealth {
    std::chrono::steady_clock::time_point down_until;
    std::chrono::milliseconds backoff{0};  // the next time down; 0: has not failed
    std::shared_ptr<NetOp> probe;          // in flight while the lane is down
    std::chrono::steady_clock::time_point probe_sent;
  };
  struct PeerLanes {  // under mutex_
    std::vector<rails::LaneState> state;  // [lane]: up, measured rate
    std::vector<LaneHealth> health;       // [lane]
  };
  Proxy* proxy_of(const rails::Lane& lane) const {
    return proxies_[static_cast<size_t>(lane.local_rail)];
  }
  // Under mutex_: down lanes to `pe` probed, and back where their probe was answered.
  void bring_back(int pe);
  // Piece `p` failed on its lane (`why`; `stalled`: its operation op.second, still with the
  // provider): the lane goes down, both ends of its connection close, and the piece goes
  // again on each other lane in turn until one carries it (`op` then holds that one).
  void fail_over(NetOp::Type type, int pe, size_t offset, void* local, const rails::Piece& p,
                 const std::string& why, Op* op);
  // The lane `lane` to `pe` is down; both ends of its connection are closed (the operation
  // `abandon` given up at this end first). Throws symcommPeerLost where no other lane can
  // carry the request to close the far end.
  void close_both_ends(int pe, int lane, const std::shared_ptr<NetOp>& abandon);
  // Lane `lane` to `pe` is down, for 1 s at its first failure in a row, twice as long at each
  // further one (up to 32 s).
  void mark_down(int pe, size_t lane);
  // Waits for a lane's operation, bounded by the rail timeout where other lanes could take
  // over.
  void wait(const Op& op, bool drive, bool stall_bound, const char* what) const;
  std::shared_ptr<NetOp> op_of(const rails::Lane& lane, NetOp::Type type, int pe,
                               size_t offset, char* at, size_t bytes) const;
  wire::Header header(wire::Kind kind) const;

  RailSet& rails_;
  std::vector<Proxy*> proxies_;
  int rank_;
  size_t chunk_;
  int64_t timeout_ms_;
  int64_t rail_timeout_ms_;  // SYMCOMM_NET_RAIL_TIMEOUT
  mutable std::mutex mutex_;
  rails::Striper striper_;
  std::vector<PeerLanes> peers_;  // [pe]
  std::vector<std::unique_ptr<std::atomic<int>>> down_;  // [pe]: its lanes down (under mutex_)
  std::atomic<bool> aborted_{false};
  std::mutex begun_mutex_;
  std::deque<Pending> begun_;  // under begun_mutex_, oldest first
};

}  // namespace symcomm
