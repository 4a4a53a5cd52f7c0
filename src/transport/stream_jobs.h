// Host work in a CUDA stream's order, for transports whose peers no copy engine or kernel
// reaches (net): a call on a stream hands a job to a worker thread and returns at once. When
// the stream reaches the call it writes the job's number into a word of mapped host memory
// (cuStreamWriteValue64); the worker, seeing it, runs the job (everything before it on the
// stream has completed), then writes the number into a second word that the stream waits for
// (cuStreamWaitValue64 >=): the stream's later work runs after the job.
//
// The call takes the worker's lock only to hand the job over: enqueueing the stream
// operations may block (the stream's queue of work is full) until the GPU runs earlier ones,
// which wait for the worker.
//
// Jobs run one at a time, each once its stream reached it, the oldest such first: jobs of one
// stream in their order, jobs of different streams in whatever order their streams get there
// (a job whose stream is held up holds up no other stream). Each job has its own pair of
// words (a ring of them), so jobs may end in any order.
//
// A stream being captured into a CUDA graph gets stream memory operations on two words of
// the job's own: the replay sets the first, the worker (which watches the words of every
// captured job) clears it and runs the job, then sets the second, which the replay waits for
// and clears for the next replay. No host node (cudaLaunchHostFunc): with host nodes in a
// graph, cudaGraphLaunch waited inside the driver, holding a lock that the job's own copies
// (cudaMemcpyAsync) then waited for, while the graph waited for the job (2 GPUs as 2 nodes,
// Coll.CapturedInAGraph/hier and CollMix.RandomSequenceReplayedFromAGraph). Once a job was
// captured the worker looks at the words at least every millisecond while idle (a replay
// may come at any time), where it otherwise sleeps until a call hands it a job.
//
// A job that fails still lets its stream go on; its error is kept and thrown by the next call
// that asks (raise_failure), as CUDA reports asynchronous errors.
//
// Work that kernels hand over (the GPU-to-proxy ring, device_ring.h) reaches the worker as a
// source: a function it calls between jobs, which carries out one piece of work if one is
// ready and says whether it did. Before a job runs, the worker takes from the sources what
// they hold (what kernels earlier on the job's stream handed over is there by then), so
// that a job (a quiet) comes after it. Once a source is added the worker looks at least every
// millisecond while idle, as for captured jobs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  // Adds a source of work (above): `poll` runs on the worker thread, returns whether it did
  // something; what it throws is kept as a job's failure is.
  void add_source(std::function<bool()> poll);

 private:
  struct Job {
    uint64_t number;            // eager: its slot in the ring is number % kRing
    uint64_t* gate;             // captured: set to 1 once it ran (else nullptr)
    std::function<void()> work;
  };
  static constexpr uint64_t kRing = 4096;
  struct Flags {  // mapped host memory, written by streams and by the worker
    uint64_t reached[kRing];  // [number % kRing]: the stream reached job `number`
    uint64_t done[kRing];     // [number % kRing]: job `number` ran
  };
  // A job captured into a graph, run at each replay.
  struct Captured {
    uint64_t* reached;  // set by a replay that reached it, cleared by the worker
    uint64_t* gate;     // set by the worker once the job ran, cleared by the replay
    std::function<void()> work;
  };
  void enqueue_captured(symcommStream_t stream, std::function<void()> job);
  uint64_t* new_gate(uint64_t* device_address);
  void run();
  // The oldest job whose stream reached it, taken out of jobs_ (under mutex_); false if none.
  bool take_ready(Job* job);
  void complete(const Job& job);
  // Calls each source once (outside mutex_); whether any did something.
  bool poll_sources();
  void fail(symcommResult_t code, const std::string& why);

  int device_;
  const char* what_;
  Flags* flags_ = nullptr;       // host view
  uint64_t flags_device_ = 0;    // the same memory, as the GPU addresses it
  uint64_t next_ = 0;            // number of the last job handed over (under mutex_)

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;         // under mutex_
  std::vector<std::unique_ptr<Captured>> captured_;  // under mutex_: live as long as graphs may
  std::vector<std::function<bool()>> sources_;       // under mutex_; only ever added to
  std::vector<std::function<bool()>> polled_;        // the worker's copy of sources_
  std::vector<uint64_t*> gate_pages_;  // mapped host memory, kGatesPerPage words each
  std::vector<uint64_t> gate_devices_;  // the same pages as the GPU addresses them
  size_t gates_used_ = 0;              // of the last page
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;     // set before aborted_

  std::mutex failure_mutex_;
  symcommResult_t failure_code_ = symcommSuccess;  // under failure_mutex_
  std::atomic<bool> failed_{false};  // failure_code_ is set: raise_failure looks without the lock
  std::string failure_;
  std::thread thread_;
};

}  // namespace symcomm
