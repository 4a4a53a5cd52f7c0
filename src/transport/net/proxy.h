// The net transport's proxy: one per rail, owning its endpoint's data path. Callers hand it
// operations (writes, reads, messages) and wait for them; the communicator's proxy thread
// (proxy_loop.h, one for all rails) posts them, reads the completion queue, applies what
// peers' messages ask of this rank's memory (signals, eager put-signals, atomics) and
// answers them. While operations are in flight, and shortly after, the thread polls; once
// idle it sleeps between polls, longer each time up to 4 ms, so that an idle rank costs about
// 1% of a core; a caller that hands work over wakes it at once.
#pragma once

#include <rdma/fi_eq.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "symcomm/symcomm.h"
#include "transport/net/endpoint.h"
#include "transport/net/proxy_loop.h"
#include "transport/net/wire.h"

namespace symcomm {

struct NetOp;

// One libfabric operation of a NetOp: its context (fi_context2 first, for FI_CONTEXT modes).
struct Posted {
  fi_context2 context;
  NetOp* op;
  // Write or read: the local buffer, the remote range.
  char* local;
  size_t bytes;
  uint64_t addr, key;
  uint64_t data;  // a write's immediate data (0: a plain write; see Proxy::Landed)
};

// What a caller waits for: every Posted of it completed (and, for an atomic, the reply came).
struct NetOp {
  // Reconnect: a control operation, carried out by the proxy thread when it takes it in
  // (Proxy::reconnect).
  enum class Type { Write, Read, Send, Reconnect };
  Type type = Type::Send;
  int pe = -1;
  int rail = 0;                     // pe's rail it goes to (rail_set.h: the lane's remote rail)
  std::vector<Posted> parts;        // Write / Read: one per chunk
  std::vector<uint8_t> message;     // Send: header and payload
  // Write: completes at the target too (immediate data), which keeps the target's proxy
  // polling while a long transfer comes in. Off where a lane may be closed at the target under
  // the write (rail_transfer.h): rxm (libfabric 1.17 to 1.21) crashes closing a connection
  // in the middle of receiving such a write (a cancelled completion without a context).
  bool remote_completion = true;
  bool expects_reply = false;       // an atomic or a flush: done when the reply arrives
  uint64_t reply = 0;               // the reply's value
  // The reply's kNext (wire.h): the target applied every numbered message of this rank's
  // before `applied_next`.
  bool knows_applied = false;
  uint32_t applied_next = 0;
  int outstanding = 0;              // parts (or the send) not completed, plus the reply
  size_t next = 0;                  // parts posted so far (the proxy's)
  // Reconnect: the operation given up (left to the closed connection), what runs after.
  std::shared_ptr<NetOp> abandon;
  std::function<void(bool closed)> then;

  // Completion, as the caller sees it.
  std::mutex mutex;
  std::condition_variable done_cv;
  std::atomic<int> state{0};        // 0 in flight, 1 done, 2 failed
  std::chrono::steady_clock::time_point done_at;  // when state left 0
  symcommResult_t code = symcommSuccess;
  std::string error;
};

// Proxy::wait's stall: nothing completed on the operation's connection for the rail timeout.
class RailStalled : public Error {
 public:
  using Error::Error;
};

class Proxy {
 public:
  static constexpr int kMaxRails = 16;  // SYMCOMM_NET_MAX_RAILS' largest

  // What `apply` answers a message that expects a reply with.
  struct Answer {
    uint64_t value = 0;
    bool knows_applied = false;  // the reply carries applied_next (wire::kNext)
    uint32_t applied_next = 0;
    bool later = false;          // no reply now: the transport replies itself (reply())
  };
  // `apply`: what to do with a message from a peer (the transport's; runs on the proxy
  // thread); returns the reply for messages that expect one.
  // `via`: the proxy the message arrived at.
  using Apply =
      std::function<Answer(Proxy& via, const wire::Header&, const uint8_t* payload)>;
  // What to do when a peer's write with nonzero immediate data landed here (the transport's;
  // runs on the proxy thread).
  using Landed = std::function<void(Proxy& proxy, uint64_t data)>;
  // Called in every pass (under the endpoint's lock, so it may reply): carries on work that a
  // Landed began and that ends later; returns whether some is still unfinished (the pass is
  // then busy: the loop polls).
  using Poll = std::function<bool(Proxy& proxy)>;
  // `loop`: the thread that drives it (add it there, then start the loop). `rail`: this
  // rank's rail whose endpoint it drives (a request's replies come back to it).
  Proxy(FabricEndpoint& endpoint, int rank, int rail, Apply apply, Landed landed,
        ProxyLoop& loop);
  ~Proxy();

  // The message `h` (and its h.bytes of payload) to `pe`'s rail `rail` as an operation to
  // hand over; with `reply`, its ticket is the operation itself, which the answer completes
  // (at the proxy it is submitted to).
  static std::shared_ptr<NetOp> message(int pe, const wire::Header& h, const void* payload,
                                        bool reply, int rail = 0);
  // A message already composed (header and payload), without a reply, to `pe`'s rail `rail`.
  static std::shared_ptr<NetOp> message(int pe, std::vector<uint8_t> composed, int rail);
  // Hands `op` over; the caller then waits with wait().
  void submit(std::shared_ptr<NetOp> op);
  // Sends a message of `bytes` (up to the provider's inject size) to `pe` from the calling
  // thread, at once: fi_inject, which reports no completion and leaves the buffer free when
  // it returns. Saves a small message the hand-over to the proxy thread and the wait for its
  // completion. False where it cannot now (too long, no room: the provider said try again,
  // aborted): then submit it. Messages to one peer stay in order either way (FI_ORDER_SAS).
  bool try_inject(int pe, int rail, const void* message, size_t bytes);
  // Waits until `op` completes; throws its error (symcommPeerLost where the connection
  // failed or the communicator was aborted; symcommTimeout after `timeout_ms`, 0: none).
  // `drive`: while it spins, the caller also drives the endpoint (progress()), for small
  // messages whose latency a hand-over to a sleeping or descheduled proxy thread would
  // dominate; bulk transfers leave the endpoint to the proxy thread (two threads contending
  // for it halved a 1 MiB put's bandwidth on 2 cores).
  // `stall_ms` (0: none): throws RailStalled where neither `op` nor anything else to its
  // peer's rail on this proxy completed for that long (SYMCOMM_NET_RAIL_TIMEOUT: a tcp
  // connection over a link that went down stalls without an error).
  void wait(NetOp& op, int64_t timeout_ms, const char* what, bool drive = false,
            int64_t stall_ms = 0);
  // A control operation: aborts this endpoint's connection to `pe`'s rail `rail`
  // (FabricEndpoint::abort_connection; the next operation connects anew), after giving up
  // `abandon` (its caller released with symcommPeerLost; its contexts kept until the endpoint
  // closes), then runs `then` (whether it could) on the proxy thread. Submit it, then wait.
  static std::shared_ptr<NetOp> reconnect(int pe, int rail, std::shared_ptr<NetOp> abandon,
                                          std::function<void(bool closed)> then = {});
  // Handles what has arrived and posts what waits, on the calling thread, where the proxy
  // thread is not at it (Transport::progress); the proxy thread goes on as before.
  void progress();
  // Sends rank `to` (its rail `rail`) the reply to its request `ticket`. Inside a pass only
  // (Landed, Apply).
  void reply(int to, int rail, uint64_t ticket, const Answer& answer);
  // Every operation in flight fails with symcommPeerLost; later ones fail at once.
  void abort(const std::string& why);
  // Sets the Poll (before the loop starts).
  void set_poll(Poll poll) { poll_ = std::move(poll); }
  // After the loop stopped, before the endpoint closes: failed receives are not posted again.
  void stop() { stop_.store(true); }

  // The loop's pass over this rail: `active` where anything happened, `busy` where operations
  // are in flight or wait to be posted.
  struct Pass {
    bool active, busy;
  };
  Pass step();
  // The loop's thread failed: every operation fails with `why`.
  void fail_everything(const std::string& why);

 private:
  struct Receive {
    fi_context2 context;
    std::vector<uint8_t> buffer;
  };
  // One pass: what callers handed over taken in, posted, completions handled, replies
  // posted. Under ep_mutex_ (the proxy thread's or progress()'s). True where anything
  // happened.
  bool pass();
  void post_receive(Receive& r);
  // Posts what it can of `op`; false where the provider said try again.
  bool post(NetOp& op);
  void complete_part(NetOp& op);
  void finish(NetOp& op, symcommResult_t code, const std::string& error);
  void on_completion(const fi_cq_data_entry& e);
  void on_message(Receive& r, size_t bytes);
  void on_error();
  void fail_all(const std::string& why);
  void run_reconnect(NetOp& op);
  // Stops waiting for `op`: it leaves the queues for orphans_ (what the provider may still
  // report stays owned), its caller gets `why`. By value: callers pass elements of the queues
  // it erases from.
  void give_up(std::shared_ptr<NetOp> op, const std::string& why);
  // The last completion here of an operation to `pe`'s rail `rail`, in steady-clock ns.
  std::atomic<int64_t>& last_done(int pe, int rail);

  FabricEndpoint& ep_;
  int rank_;
  int rail_;
  Apply apply_;
  Landed landed_;
  Poll poll_;
  bool polling_ = false;  // the last pass's poll_ left work unfinished
  ProxyLoop& loop_;
  std::vector<std::unique_ptr<Receive>> receives_;

  // The endpoint's data path is used by one thread at a time (FI_THREAD_DOMAIN): the proxy's
  // loop holds it while it posts and reads completions, try_inject while it injects.
  std::mutex ep_mutex_;
  std::mutex submit_mutex_;
  std::deque<std::shared_ptr<NetOp>> submitted_;  // under submit_mutex_
  std::deque<std::shared_ptr<NetOp>> unposted_;   // under ep_mutex_: waiting for room
  std::vector<std::shared_ptr<NetOp>> in_flight_;  // under ep_mutex_
  // Failed or given up, parts perhaps still with the provider: kept, not waited for (under
  // ep_mutex_).
  std::vector<std::shared_ptr<NetOp>> orphans_;
  std::mutex done_mutex_;
  std::vector<std::unique_ptr<std::atomic<int64_t>>> last_done_;  // [pe * kMaxRails + rail]
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // set before aborted_
};

}  // namespace symcomm
