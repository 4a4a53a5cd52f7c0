// The thread that drives a net transport's proxies: one for all of a communicator's rails.
//
// Each rail's Proxy holds its endpoint's data path (what callers handed over, what is in
// flight); this thread passes over every rail in turn. While any rail had activity within
// `busy` it polls; then it sleeps between passes, each sleep twice the last from 20 us up to
// 4 ms, until a caller hands work to any rail. One thread instead of one a rail: 4 idle rails
// cost 3.5-3.6% of a core with a thread each, napping on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace symcomm {

class Proxy;

class ProxyLoop {
 public:
  explicit ProxyLoop(std::chrono::microseconds busy);
  ~ProxyLoop();  // stops
  ProxyLoop(const ProxyLoop&) = delete;
  ProxyLoop& operator=(const ProxyLoop&) = delete;

  // Before start(): the proxies it drives (they outlive the thread: stop() first).
  // `messages`: peers' messages arrive on its rail, so that it is passed over every time.
  void add(Proxy* proxy, bool messages);
  void start();
  // Work was handed over (or an abort): the next pass comes at once.
  void wake();
  // Polls every rail without napping for `d` (at least; holds add up to the latest end): a
  // peer's transfer that completes nothing here comes in (wire::Kind::Hold).
  void hold_for(std::chrono::microseconds d);
  // Ends the thread. The endpoints must then be closed before the proxies go: their receive
  // buffers stay posted until then.
  void stop();

 private:
  void run();

  std::chrono::microseconds busy_;
  std::vector<Proxy*> proxies_;
  std::vector<char> messages_;  // [proxy]: add()'s `messages`
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;  // under mutex_
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> hold_until_{0};  // steady-clock ns
  std::thread thread_;
};

}  // namespace symcomm
