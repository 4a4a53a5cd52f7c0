// The bootstrap network of one communicator: how its ranks found each other, host-side
// collectives for setup (allgather, broadcast, barrier), and the monitor that notices a
// rank that dies or stops answering.
//
// Every blocking step is bounded: by SYMCOMM_BOOTSTRAP_TIMEOUT (symcommTimeout), and by
// the monitor, which marks the communicator aborted within SYMCOMM_PEER_TIMEOUT of a
// rank's death or silence (symcommPeerLost at the next call of every other rank). A failure
// inside a thread of the communicator (the monitor's own included) fails it too (fail()).
#pragma once

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "bootstrap/protocol.h"
#include "bootstrap/unique_id.h"

namespace symcomm {

// SYMCOMM_BOOTSTRAP_TIMEOUT in milliseconds; for 0 (no bound), SecondsParam::kMaxSeconds.
int64_t bootstrap_timeout_ms();

class Bootstrap {
 public:
  // Collective: joins the communicator of `nranks` ranks whose root `uid` names.
  static std::unique_ptr<Bootstrap> join(const UniqueId& uid, int nranks, int rank);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t comm_id() const { return comm_id_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }

  // Each rank gives `bytes` (the same on every rank, checked); `all` gets nranks * bytes.
  void allgather(const void* mine, size_t bytes, void* all);
  // `bytes` of `root`'s buf to every rank's buf (bytes and root checked to agree).
  void broadcast(void* buf, size_t bytes, int root);
  void barrier();
  // Collective: every rank reports how a local step went; if any failed, every rank throws
  // the first failing rank's code with its message (prefixed by "rank r: " elsewhere).
  void agree(symcommResult_t mine, const std::string& message);
  // Runs `step` and agrees on its outcome: a failure on any rank throws on all.
  template <typename F>
  void agree_on(F&& step) {
    symcommResult_t code = symcommSuccess;
    std::string message;
    try {
      step();
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception& e) {
      code = symcommInternalError;
      message = e.what();
    }
    agree(code, message);
  }

  // Point to point, for exchanges among some ranks only (a team's), which the collectives
  // above cannot do: every rank takes part in those. send_to gives `payload` to rank `peer`
  // under `tag` and returns once it is sent; the receiver need not be waiting. recv_from
  // returns what rank `from` sent under `tag`, keeping messages that arrive first for other
  // (rank, tag) pairs for their own recv_from. Both are bounded by SYMCOMM_BOOTSTRAP_TIMEOUT
  // and by the monitor (symcommPeerLost). A tag names one message between two ranks: the
  // caller makes it unique (a second message under the same tag is received after the first).
  void send_to(int peer, uint64_t tag, const std::string& payload);
  std::string recv_from(int from, uint64_t tag);
  // recv_from without waiting: the message if it has arrived, else nothing.
  std::optional<std::string> try_recv_from(int from, uint64_t tag);

  // Throws symcommPeerLost if the monitor has seen a rank die or go silent, or the error
  // that fail() recorded.
  void check_alive() const;
  // "rank R (pid P on HOST) was lost: WHY" once the monitor has seen a rank die or go
  // silent, else "".
  std::string lost_summary() const;
  // What check_alive would throw, without throwing: symcommSuccess, or the code and (in
  // *why) the message. From any thread.
  symcommResult_t failure(std::string* why) const;
  // How long the peer monitor sleeps between looks, for heartbeats every `heartbeat_ms`: at
  // most one interval (beats go out on time however short it is), and at most 100 ms.
  static int monitor_wake_ms(int64_t heartbeat_ms) {
    return static_cast<int>(std::clamp<int64_t>(heartbeat_ms, 1, 100));
  }
  // Called (from the monitor thread) when a rank is lost, or from the thread that calls
  // fail(); at once if one already was, or it already failed.
  void on_lost(std::function<void()> callback);
  // A thread of this communicator failed (its peer monitor, the ce watchdog, the NCCL
  // aborter): this rank's next call throws `code` with `why`, waits in flight end (the
  // on_lost callback), and the liveness connections are shut so that the peers lose this
  // rank at once. The first failure, or a lost rank before it, is what calls report.
  void fail(symcommResult_t code, const std::string& why);
  // Stops treating closed connections as lost peers: called before the last barrier.
  // Non-hub ranks also tell the hub that they leave on purpose.
  void begin_finalize();

 private:
  Bootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  void connect_hub(const UniqueId& uid, Fd hub_listener, Deadline deadline);
  // One round through the hub: every rank sends (op, arg, payload); the hub checks and
  // answers each rank with `reply` (or with an error that every rank throws). The reply has
  // `reply_bytes` on every rank whose call matches rank 0's: no rank allocates what a header
  // announces before checking it against the sizes its own call gives.
  std::string round(Op op, int64_t arg, const std::string& payload, uint64_t reply_bytes);
  std::string hub_round(Op op, int64_t arg, const std::string& payload, uint64_t reply_bytes);
  // Ends the host collectives for good (see Op::Broken) and throws `code` with `why`.
  [[noreturn]] void end_rounds(symcommResult_t code, const std::string& why);
  std::optional<std::string> receive(int from, uint64_t tag, bool wait);
  void start_monitor();
  void stop_monitor();
  void monitor_loop();
  // The monitor's bounds, read in the joining thread (a bad value fails the join).
  int64_t peer_timeout_ms_ = 0, heartbeat_ms_ = 0;
  void mark_lost(int rank, const std::string& why);
  // A round's wait on `rank`'s connection ended with `e` (symcommPeerLost): marks the rank
  // lost where its connection closed.
  void note_lost_in_round(int rank, const Error& e);
  AbortCheck abort_check() const { return [this] { check_alive(); }; }

  int rank_;
  int nranks_;
  uint64_t comm_id_ = 0;
  Token token_{};
  uint64_t seq_ = 0;
  // Why the host collectives ended for good ("": they work); its code. Rounds run on the
  // calling thread only.
  std::string rounds_ended_;
  symcommResult_t rounds_ended_code_ = symcommSuccess;
  std::vector<PeerInfo> peers_;
  // Rank 0: one per rank (index 0 unused). Others: index 0 is the hub.
  std::vector<Fd> data_;
  std::vector<Fd> live_;
  std::thread monitor_;
  Fd wake_read_, wake_write_;
  std::atomic<bool> finalizing_{false};
  std::atomic<int> lost_rank_{-1};
  std::atomic<bool> failed_{false};
  mutable std::mutex lost_mutex_;
  std::string lost_reason_;
  symcommResult_t failure_code_ = symcommSuccess;  // fail()'s, under lost_mutex_
  std::string failure_;
  bool broken_ = false;  // lost a rank or failed (on_lost_ ran), under lost_mutex_
  std::function<void()> on_lost_;
  // Reads one message from an accepted connection into p2p_kept_ (under p2p_mutex_);
  // false where the connection is done with (closed by the sender, or broke the protocol).
  bool read_message(const Fd& c, const Deadline& deadline);
  Fd p2p_listener_;
  std::mutex p2p_mutex_;  // one receiver reads at a time; p2p_kept_, p2p_in_
  std::map<std::pair<int, uint64_t>, std::deque<std::string>> p2p_kept_;
  std::vector<Fd> p2p_in_;      // connections accepted from senders, kept
  std::mutex p2p_send_mutex_;   // p2p_out_
  std::vector<Fd> p2p_out_;     // [peer]: this rank's connection to it, made at the first message
};

}  // namespace symcomm
