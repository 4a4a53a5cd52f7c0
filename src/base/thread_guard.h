// The body of every thread that symcomm starts (the bootstrap root, a communicator's peer
// monitor, the ce watchdog, the NCCL aborter) runs through run_guarded(): an exception that
// left a thread's function would end the whole program (std::terminate, SIGABRT). What the
// body throws goes to the thread's `failed` handler instead, which records it where the next
// call on the communicator reports it (Bootstrap::fail). Parameters a thread needs are read
// before it starts, in the thread that starts it, so that a bad value fails that call.
//
// inject_thread_fault() is for tests: failures inside these threads are rare and hard to
// cause for real (out of memory, a broken socket at the wrong moment).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "base/error.h"

namespace symcomm {

namespace thread_fault_detail {
inline std::atomic<bool> g_armed{false};
inline std::mutex g_mutex;
inline std::string g_thread;  // under g_mutex
}  // namespace thread_fault_detail

// Makes the next thread_fault_point(thread) throw symcommInternalError, on whichever thread
// reaches it first (one fault per call).
inline void inject_thread_fault(const char* thread) {
  std::lock_guard<std::mutex> lock(thread_fault_detail::g_mutex);
  thread_fault_detail::g_thread = thread;
  thread_fault_detail::g_armed.store(true);
}

// Where a thread's body may fail, for tests: called once per round of its loop.
inline void thread_fault_point(const char* thread) {
  if (!thread_fault_detail::g_armed.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(thread_fault_detail::g_mutex);
  if (!thread_fault_detail::g_armed.load() || thread_fault_detail::g_thread != thread) return;
  thread_fault_detail::g_armed.store(false);
  throw Error(symcommInternalError, std::string("a fault injected into the ") + thread +
                                        " thread (test hook)");
}

// Runs body(); what it throws is passed to failed(code, message) (noexcept: nothing leaves).
template <typename Body, typename Failed>
void run_guarded(Body&& body, Failed&& failed) noexcept {
  try {
    Caught caught;
    try {
      body();
      return;
    } catch (...) {
      caught = caught_exception();
    }
    failed(caught.code, caught.what);
  } catch (...) {
    // Not even the failure could be recorded (out of memory): the thread ends all the same.
  }
}

}  // namespace symcomm
