#include "transport/net/proxy.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "base/log.h"
#include "base/thread_guard.h"
#include "transport/trace.h"

namespace symcomm {

namespace {

constexpr int kReceives = 64;  // posted receive buffers
// A caller polls its operation this long before it sleeps on the condition variable (which
// leaves the core to the proxy thread), and this long where it drives the endpoint itself.
constexpr auto kCallerSpin = std::chrono::microseconds(50);
constexpr auto kCallerDriveSpin = std::chrono::microseconds(200);
// (The loop naps between passes rather than blocking on the completion queue's wait object:
// tcp's does not wake for data that arrives while nobody drives progress; measured, a wait of
// 100 ms held each message.)

using Clock = std::chrono::steady_clock;

}  // namespace

Proxy::Proxy(FabricEndpoint& endpoint, int rank, int rail, Apply apply, Landed landed,
             ProxyLoop& loop)
    : ep_(endpoint), rank_(rank), rail_(rail), apply_(std::move(apply)),
      landed_(std::move(landed)), loop_(loop) {
  for (int i = 0; i < kReceives; ++i) {
    auto r = std::make_unique<Receive>();
    r->buffer.resize(wire::kBufferBytes);
    post_receive(*r);
    receives_.push_back(std::move(r));
  }
}

Proxy::~Proxy() {
  std::lock_guard<std::mutex> ep_lock(ep_mutex_);
  fail_all("the communicator is being finalized");
}

Proxy::Pass Proxy::step() {
  std::lock_guard<std::mutex> ep_lock(ep_mutex_);
  const bool active = pass();
  return Pass{active, !in_flight_.empty() || !unposted_.empty() || polling_};
}

void Proxy::fail_everything(const std::string& why) {
  std::lock_guard<std::mutex> ep_lock(ep_mutex_);
  fail_all(why);
}

void Proxy::post_receive(Receive& r) {
  for (;;) {
    ssize_t rc = fi_recv(ep_.ep(), r.buffer.data(), r.buffer.size(), nullptr, FI_ADDR_UNSPEC,
                         &r.context);
    if (rc == 0) return;
    if (rc != -FI_EAGAIN) throw_fabric_error(static_cast<int>(rc), "fi_recv", __FILE__, __LINE__);
    fi_cq_read(ep_.cq(), nullptr, 0);  // progress, then again
  }
}

void Proxy::submit(std::shared_ptr<NetOp> op) {
  if (aborted_.load()) {
    finish(*op, symcommPeerLost, abort_reason_);
    return;
  }
  if (op->type == NetOp::Type::Send && op->expects_reply) {
    // The reply comes back to this proxy's rail: only its proxy knows the request.
    const int8_t rail = static_cast<int8_t>(rail_);
    std::memcpy(op->message.data() + offsetof(wire::Header, rail), &rail, sizeof rail);
  }
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    submitted_.push_back(std::move(op));
  }
  loop_.wake();
}

bool Proxy::try_inject(int pe, int rail, const void* message, size_t bytes) {
  if (bytes > ep_.inject_size() || aborted_.load()) return false;
  std::lock_guard<std::mutex> lock(ep_mutex_);
  const ssize_t rc = fi_inject(ep_.ep(), message, bytes, ep_.addr(pe, rail));
  if (rc == -FI_EAGAIN) return false;
  if (rc) throw_fabric_error(static_cast<int>(rc), "fi_inject", __FILE__, __LINE__);
  return true;
}

std::atomic<int64_t>& Proxy::last_done(int pe, int rail) {
  const size_t at = static_cast<size_t>(pe) * kMaxRails + static_cast<size_t>(rail);
  std::lock_guard<std::mutex> lock(done_mutex_);
  while (last_done_.size() <= at) last_done_.push_back(std::make_unique<std::atomic<int64_t>>(0));
  return *last_done_[at];
}

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
}  // namespace

void Proxy::wait(NetOp& op, int64_t timeout_ms, const char* what, bool drive,
                 int64_t stall_ms) {
  const auto start = Clock::now();
  std::atomic<int64_t>* done = stall_ms > 0 ? &last_done(op.pe, op.rail) : nullptr;
  const int64_t stall_ns = stall_ms * 1000000;
  const int64_t start_ns = now_ns();
  // A short spin first (driving the endpoint itself where asked and the proxy thread is not
  // at it: asleep, or waiting for a core): small operations complete in microseconds.
  const auto spin = drive ? kCallerDriveSpin : kCallerSpin;
  while (op.state.load(std::memory_order_acquire) == 0 && Clock::now() - start < spin)
    if (drive) progress();
  std::unique_lock<std::mutex> lock(op.mutex);
  while (op.state.load(std::memory_order_acquire) == 0) {
    op.done_cv.wait_for(lock, std::chrono::milliseconds(10));
    if (op.state.load() != 0) break;
    if (done) {
      const int64_t now = now_ns();
      if (now - std::max(start_ns, done->load()) > stall_ns)
        throw RailStalled(symcommTimeout,
                          format("%s to rank %d (its rail %d, from rail %d) stalled: nothing "
                                 "completed on that connection for SYMCOMM_NET_RAIL_TIMEOUT "
                                 "(%lld ms)", what, op.pe, op.rail, rail_,
                                 static_cast<long long>(stall_ms)));
    }
    if (timeout_ms > 0 && Clock::now() - start > std::chrono::milliseconds(timeout_ms))
      SYMCOMM_THROW(symcommTimeout,
                    "%s to rank %d did not complete within SYMCOMM_WAIT_TIMEOUT (%lld ms)", what,
                    op.pe, static_cast<long long>(timeout_ms));
  }
  if (op.state.load() == 2) SYMCOMM_THROW(op.code, "%s to rank %d: %s", what, op.pe, op.error.c_str());
}

void Proxy::finish(NetOp& op, symcommResult_t code, const std::string& error) {
  std::lock_guard<std::mutex> lock(op.mutex);
  if (op.state.load() != 0) return;
  op.code = code;
  op.error = error;
  op.done_at = Clock::now();
  op.state.store(code == symcommSuccess ? 1 : 2, std::memory_order_release);
  op.done_cv.notify_all();
}

void Proxy::abort(const std::string& why) {
  abort_reason_ = why;
  aborted_.store(true);
  loop_.wake();
}

void Proxy::fail_all(const std::string& why) {
  // Ops stay owned (in_flight_) until the endpoint closes: the provider may still hold their
  // contexts. Their callers are released now.
  std::deque<std::shared_ptr<NetOp>> submitted;
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    submitted.swap(submitted_);
  }
  for (auto& op : submitted) finish(*op, symcommPeerLost, why);
  for (auto& op : unposted_) finish(*op, symcommPeerLost, why);
  for (auto& op : in_flight_) finish(*op, symcommPeerLost, why);
}

bool Proxy::post(NetOp& op) {
  fid_ep* ep = ep_.ep();
  if (op.type == NetOp::Type::Send) {
    if (op.next == 1) return true;
    Posted& p = op.parts[0];
    ssize_t rc = fi_send(ep, op.message.data(), op.message.size(), nullptr, ep_.addr(op.pe, op.rail),
                         &p.context);
    if (rc == -FI_EAGAIN) return false;
    if (rc) throw_fabric_error(static_cast<int>(rc), "fi_send", __FILE__, __LINE__);
    op.next = 1;
    return true;
  }
  while (op.next < op.parts.size()) {
    Posted& p = op.parts[op.next];
    const fi_addr_t to = ep_.addr(op.pe, op.rail);
    ssize_t rc;
    if (op.type == NetOp::Type::Read)
      rc = fi_read(ep, p.local, p.bytes, nullptr, to, p.addr, p.key, &p.context);
    else if (op.remote_completion)
      rc = fi_writedata(ep, p.local, p.bytes, nullptr, p.data, to, p.addr, p.key, &p.context);
    else
      rc = fi_write(ep, p.local, p.bytes, nullptr, to, p.addr, p.key, &p.context);
    if (rc == -FI_EAGAIN) return false;
    if (rc)
      throw_fabric_error(static_cast<int>(rc), op.type == NetOp::Type::Write ? "fi_write" : "fi_read",
                         __FILE__, __LINE__);
    ++op.next;
  }
  return true;
}

void Proxy::complete_part(NetOp& op) {
  if (op.type != NetOp::Type::Reconnect) last_done(op.pe, op.rail).store(now_ns());
  if (--op.outstanding == 0) finish(op, symcommSuccess, "");
}

std::shared_ptr<NetOp> Proxy::reconnect(int pe, int rail, std::shared_ptr<NetOp> abandon,
                                        std::function<void(bool)> then) {
  auto op = std::make_shared<NetOp>();
  op->type = NetOp::Type::Reconnect;
  op->pe = pe;
  op->rail = rail;
  op->abandon = std::move(abandon);
  op->then = std::move(then);
  return op;
}

void Proxy::give_up(std::shared_ptr<NetOp> op, const std::string& why) {
  finish(*op, symcommPeerLost, why);
  op->outstanding = -1000000;  // never completes now
  unposted_.erase(std::remove(unposted_.begin(), unposted_.end(), op), unposted_.end());
  auto at = std::find(in_flight_.begin(), in_flight_.end(), op);
  if (at != in_flight_.end()) {
    in_flight_.erase(at);
    orphans_.push_back(op);
  }
}

void Proxy::run_reconnect(NetOp& op) {
  if (op.abandon)
    give_up(op.abandon, format("given up: the connection to rank %d's rail %d was closed",
                               op.pe, op.rail));
  const int aborted = ep_.abort_connection(op.pe, op.rail);
  const bool ok = aborted >= 0;
  if (ok)
    SYMCOMM_INFO("net transport: rail %d aborted %d connection(s) to rank %d's rail %d", rail_,
                 aborted, op.pe, op.rail);
  finish(op, ok ? symcommSuccess : symcommNotSupported,
         ok ? "" : "the provider's connections cannot be closed one by one (only tcp's)");
  if (op.then) op.then(ok);
}

void Proxy::on_message(Receive& r, size_t bytes) {
  wire::Header h;
  if (bytes < sizeof h) {
    SYMCOMM_WARN("net transport: a message of %zu bytes is too short; dropped", bytes);
    return;
  }
  std::memcpy(&h, r.buffer.data(), sizeof h);
  if (h.kind == wire::Kind::Reply) {
    for (auto& op : in_flight_)
      if (reinterpret_cast<uint64_t>(op.get()) == h.ticket && op->expects_reply) {
        op->reply = h.a;
        op->knows_applied = (h.flags & wire::kNext) != 0;
        op->applied_next = static_cast<uint32_t>(h.b);
        complete_part(*op);
        return;
      }
    SYMCOMM_WARN("net transport: a reply from rank %d matches no request; dropped", h.from);
    return;
  }
  const Answer answer = apply_(*this, h, r.buffer.data() + sizeof h);
  if (!answer.later && wire::answered(h.kind)) reply(h.from, h.rail, h.ticket, answer);
}

std::shared_ptr<NetOp> Proxy::message(int pe, const wire::Header& h, const void* payload,
                                      bool reply, int rail) {
  auto op = std::make_shared<NetOp>();
  op->type = NetOp::Type::Send;
  op->pe = pe;
  op->rail = rail;
  wire::Header with = h;
  if (reply) with.ticket = reinterpret_cast<uint64_t>(op.get());
  op->message.resize(sizeof with + h.bytes);
  std::memcpy(op->message.data(), &with, sizeof with);
  if (h.bytes) std::memcpy(op->message.data() + sizeof with, payload, h.bytes);
  op->parts.resize(1);
  op->parts[0].op = op.get();
  op->expects_reply = reply;
  op->outstanding = reply ? 2 : 1;
  return op;
}

std::shared_ptr<NetOp> Proxy::message(int pe, std::vector<uint8_t> composed, int rail) {
  auto op = std::make_shared<NetOp>();
  op->type = NetOp::Type::Send;
  op->pe = pe;
  op->rail = rail;
  op->message = std::move(composed);
  op->parts.resize(1);
  op->parts[0].op = op.get();
  op->outstanding = 1;
  return op;
}

void Proxy::reply(int to, int rail, uint64_t ticket, const Answer& answer) {
  wire::Header out{};
  out.kind = wire::Kind::Reply;
  out.from = rank_;
  out.a = answer.value;
  if (answer.knows_applied) {
    out.flags = wire::kNext;
    out.b = answer.applied_next;
  }
  out.ticket = ticket;
  std::shared_ptr<NetOp> reply = message(to, out, nullptr, false, rail);
  in_flight_.push_back(reply);
  unposted_.push_back(std::move(reply));
}

void Proxy::on_completion(const fi_cq_data_entry& e) {
  if (e.flags & FI_REMOTE_CQ_DATA) {
    // A peer's write landed here: give back the receive buffer, where the provider used one
    // to report it; a write that carries data asks for more (the transport's Landed).
    for (auto& r : receives_)
      if (&r->context == e.op_context) post_receive(*r);
    if (e.data != 0 && landed_) landed_(*this, e.data);
    return;
  }
  if (e.flags & FI_RECV)
    for (auto& r : receives_)
      if (&r->context == e.op_context) {
        on_message(*r, e.len);
        post_receive(*r);
        return;
      }
  if (e.op_context) complete_part(*static_cast<Posted*>(e.op_context)->op);
}

void Proxy::on_error() {
  fi_cq_err_entry err{};
  ssize_t rc = fi_cq_readerr(ep_.cq(), &err, 0);
  if (rc < 0) return;
  const char* text = fi_cq_strerror(ep_.cq(), err.prov_errno, err.err_data, nullptr, 0);
  std::string why = format("the network operation failed: %s (%d; provider: %s)",
                           fabric_lib().fi_strerror(err.err), err.err, text ? text : "?");
  if (!err.op_context) {
    fail_all(why);
    return;
  }
  for (auto& r : receives_)
    if (&r->context == err.op_context) {
      // A receive failed (the endpoint is closing, or a message was too long): post it again.
      if (!stop_.load()) post_receive(*r);
      return;
    }
  NetOp* failed = static_cast<Posted*>(err.op_context)->op;
  for (auto& op : in_flight_)
    if (op.get() == failed) return give_up(op, why);
  finish(*failed, symcommPeerLost, why);  // given up before (an orphan)
}

bool Proxy::pass() {
  bool active = false;
  std::vector<std::shared_ptr<NetOp>> reconnects;  // run outside submit_mutex_ (`then` submits)
  if (aborted_.load() && (!unposted_.empty() || !in_flight_.empty() || !submitted_.empty())) {
    fail_all(abort_reason_);
    unposted_.clear();
  }
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    while (!submitted_.empty()) {
      if (submitted_.front()->type == NetOp::Type::Reconnect) {
        reconnects.push_back(std::move(submitted_.front()));
        submitted_.pop_front();
        continue;
      }
      in_flight_.push_back(submitted_.front());
      unposted_.push_back(std::move(submitted_.front()));
      submitted_.pop_front();
      active = true;
    }
  }
  for (auto& op : reconnects) run_reconnect(*op);
  active |= !reconnects.empty();
  auto post_all = [&] {
    while (!unposted_.empty()) {
      std::shared_ptr<NetOp> op = unposted_.front();
      bool posted;
      try {
        posted = post(*op);
      } catch (const Error& e) {
        // This operation cannot go (a connection to a link that is down is refused at
        // once): it fails; the others, and the thread, go on.
        give_up(op, e.what());  // (out of unposted_)
        active = true;
        continue;
      }
      if (!posted) break;
      unposted_.pop_front();
      active = true;
    }
  };
  post_all();
  fi_cq_data_entry entries[16];
  ssize_t n = fi_cq_read(ep_.cq(), entries, 16);
  if (n > 0) {
    active = true;
    for (ssize_t i = 0; i < n; ++i) on_completion(entries[i]);
  } else if (n == -FI_EAVAIL) {
    active = true;
    on_error();
  } else if (n != -FI_EAGAIN) {
    throw_fabric_error(static_cast<int>(n), "fi_cq_read", __FILE__, __LINE__);
  }
  if (poll_) {
    const size_t before = unposted_.size();
    polling_ = poll_(*this);
    active |= unposted_.size() != before;  // it replied
  }
  post_all();  // the replies those messages (and the poll) asked for
  // Done operations leave (failed ones went to orphans_, where the provider may still hold
  // their contexts).
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [](const std::shared_ptr<NetOp>& op) {
                                    return op->outstanding == 0;
                                  }),
                   in_flight_.end());
  return active;
}

void Proxy::progress() {
  std::unique_lock<std::mutex> lock(ep_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || stop_.load()) return;  // the proxy thread is at it
  pass();
}

}  // namespace symcomm
