#include "transport/net/proxy_loop.h"

#include <algorithm>

#include "base/log.h"
#include "base/thread_guard.h"
#include "transport/net/proxy.h"
#include "transport/trace.h"

namespace symcomm {

namespace {

constexpr auto kFirstNap = std::chrono::microseconds(20);
constexpr auto kLongestNap = std::chrono::microseconds(4000);
// While it polls, a rail that no peer's messages arrive on, with nothing to do, is passed over
// on all but every this-many passes: a pass over 4 rails' completion queues made an 8-byte
// put-signal 1.17-1.30x slower than on one rail (held, wire::Kind::Hold: every rail every
// time). Idle, every rail is
// passed after every second nap (a peer's transfer on any rail starts within two naps, 8 ms),
// or at once where a caller handed work over: every rail after every nap cost an idle rank on
// 4 rails 2.0-2.2% of a core, against 1.7-1.8% with every fourth pass.
constexpr uint64_t kQuietRailEvery = 4;

}  // namespace

ProxyLoop::ProxyLoop(std::chrono::microseconds busy) : busy_(busy) {}

ProxyLoop::~ProxyLoop() { stop(); }

void ProxyLoop::add(Proxy* proxy, bool messages) {
  proxies_.push_back(proxy);
  messages_.push_back(messages);
}

void ProxyLoop::start() {
  thread_ = std::thread([this] {
    run_guarded([this] { run(); },
                [this](symcommResult_t, const std::string& what) {
                  for (Proxy* p : proxies_)
                    p->fail_everything(
                        format("the net transport's proxy thread failed: %s", what.c_str()));
                });
  });
}

void ProxyLoop::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  cv_.notify_one();
}

void ProxyLoop::hold_for(std::chrono::microseconds d) {
  const int64_t until = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            (std::chrono::steady_clock::now() + d).time_since_epoch())
                            .count();
  int64_t was = hold_until_.load();
  while (was < until && !hold_until_.compare_exchange_weak(was, until)) {
  }
  wake();
}

void ProxyLoop::stop() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
}

void ProxyLoop::run() {
  using Clock = std::chrono::steady_clock;
  auto last_activity = Clock::now();
  std::chrono::microseconds nap = kFirstNap;
  std::vector<char> rail_busy(proxies_.size(), 1);
  uint64_t passes = 0;
  bool napped = false;  // the next pass comes after a nap that calls for every rail
  uint64_t naps = 0;
  while (!stop_.load()) {
    thread_fault_point("net proxy");
    bool active = false, busy = false;
    ++passes;
    const bool held = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          Clock::now().time_since_epoch()).count() < hold_until_.load();
    const bool all = passes % kQuietRailEvery == 0 || napped || held;
    napped = false;
    for (size_t i = 0; i < proxies_.size(); ++i) {
      // Rails that peers' messages (signals, put-signals) arrive on: every pass. The others
      // carry bulk data: every pass while they have work, else every kQuietRailEvery-th.
      if (!messages_[i] && !rail_busy[i] && !all) continue;
      const Proxy::Pass r = proxies_[i]->step();
      rail_busy[i] = r.active || r.busy;
      active |= r.active;
      busy |= r.busy;
    }
    const auto now = Clock::now();
    if (active || busy) {
      if (active) last_activity = now;
      nap = kFirstNap;
      continue;
    }
    if (held || now - last_activity < busy_) {
      std::this_thread::yield();  // other ranks may share the core
      continue;
    }
    // Idle: sleep, longer each time, until a caller hands over work.
    std::unique_lock<std::mutex> lock(mutex_);
    napped = ++naps % 2 == 0 || woken_;
    if (!woken_ && !stop_.load()) {
      if (trace::enabled()) trace::add("proxy nap", static_cast<double>(nap.count()));
      cv_.wait_for(lock, nap);
    }
    if (woken_) {
      woken_ = false;
      napped = true;
      nap = kFirstNap;
    } else {
      nap = std::min(nap * 2, std::chrono::duration_cast<std::chrono::microseconds>(kLongestNap));
    }
  }
}

}  // namespace symcomm
