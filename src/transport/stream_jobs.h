// Host work in a CUDA stream's order, for transports whose peers no copy engine or kernel
// reaches (net): a call on a stream hands a job to a worker thread and returns at once. When
// the stream reaches the call it writes the job's number into a word of mapped host memory
// (cuStreamWriteValue64); the worker, seeing it, runs the job (everything before it on the
// stream has completed), then writes the number into a second word that the stream waits for
// (cuStreamWaitValue64 >=): the stream's later work runs after the job.
//
// Jobs run one at a time in the order of the calls, jobs of different streams too: CUDA's own
// dependencies never contradict that order (a stream can only wait for work issued before).
// A job that fails still lets its stream go on; its error is kept and thrown by the next call
// that asks (raise_failure), as CUDA reports asynchronous errors. A stream being captured into
// a CUDA graph is refused: a graph's replays would repeat the numbers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "symcomm/symcomm.h"

namespace symcomm {

class StreamJobs {
 public:
  // `what`: the transport's name, for messages.
  StreamJobs(int device, const char* what);
  ~StreamJobs();

  // Runs `job` on the worker once `stream` reaches this point; the stream's later work waits
  // for it. Throws the failure of an earlier job first, if one is kept.
  void enqueue(symcommStream_t stream, std::function<void()> job);
  // Throws the first failure of a job that no call has reported yet.
  void raise_failure();
  // The communicator lost a peer: jobs not yet run fail (their streams go on).
  void abort(const std::string& why);

 private:
  struct Job {
    uint64_t number;
    std::function<void()> work;
  };
  struct Flags {  // mapped host memory, written by streams and by the worker
    uint64_t done;
    uint64_t reached[4096];  // [number % 4096]: the stream reached job `number`
  };
  void run();
  bool wait_reached(uint64_t number);
  void fail(symcommResult_t code, const std::string& why);

  int device_;
  const char* what_;
  Flags* flags_ = nullptr;       // host view
  uint64_t flags_device_ = 0;    // the same memory, as the GPU addresses it
  uint64_t next_ = 0;            // number of the last job handed over (caller's, under mutex_)

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;         // under mutex_
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;     // set before aborted_

  std::mutex failure_mutex_;
  symcommResult_t failure_code_ = symcommSuccess;  // under failure_mutex_
  std::string failure_;
  std::thread thread_;
};

}  // namespace symcomm
