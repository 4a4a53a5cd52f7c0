// symrun: writing to its own stdout and stderr. Once the ranks run, what symrun writes (their
// relayed lines and its own messages) is queued, and a thread per sink writes it out: a
// reader that stops reading blocks that thread only, while the event loop keeps reaping
// ranks, counting the timeout and handling signals. The loop stops reading a rank's pipe while
// the queue of its sink is full (the rank then blocks, as on a full pipe), except once
// symrun is stopping the ranks: output that does not fit is then dropped and counted.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "symrun.h"

namespace symrun {
namespace {

class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}

  void push(std::string_view text, bool may_drop) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) return;  // reported once, when it broke
    if (may_drop && queued_ >= kMaxQueuedOutput) {
      dropped_ += text.size();
      return;
    }
    if (!started_) {
      // With every signal blocked, so that symrun's signals go to the event loop's thread.
      // Detached: symrun ends with _exit, whatever this thread is blocked in.
      sigset_t all;
      sigset_t previous;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &previous);
      std::thread([this] { write_loop(); }).detach();
      pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      started_ = true;
    }
    queue_.emplace_back(text);
    queued_ += text.size();
    ready_.notify_one();
  }

  bool full() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !broken_ && queued_ >= kMaxQueuedOutput;
  }

  bool idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return broken_ || queued_ == 0;
  }

  size_t dropped() {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }

 private:
  void write_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return !queue_.empty(); });
      // What waits, in one write where it is small pieces.
      std::string text = std::move(queue_.front());
      queue_.pop_front();
      while (!queue_.empty() && text.size() + queue_.front().size() <= kReadChunk * 4) {
        text += queue_.front();
        queue_.pop_front();
      }
      lock.unlock();
      bool ok = write_all(fd_, text);
      int err = errno;
      lock.lock();
      queued_ -= text.size();
      if (ok) continue;
      // Keep the ranks running and their pipes drained; only the copying stops.
      broken_ = true;
      queue_.clear();
      queued_ = 0;
      lock.unlock();
      if (fd_ != STDERR_FILENO) say("cannot write to stdout: " + errno_string(err));
      return;
    }
  }

  const int fd_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::string> queue_;
  size_t queued_ = 0;  // bytes in queue_ and in the write under way
  size_t dropped_ = 0;  // by push, while symrun stops the ranks
  bool broken_ = false;
  bool started_ = false;
};

Sink* g_sinks[3] = {};

// stdout and stderr that are one file (2>&1) share a queue, so that lines stay whole and in
// order, as one writer keeps them.
bool same_file(int a, int b) {
  struct stat sa;
  struct stat sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

}  // namespace

void start_output_queues() {
  if (g_sinks[STDOUT_FILENO] != nullptr) return;
  g_sinks[STDOUT_FILENO] = new Sink(STDOUT_FILENO);
  g_sinks[STDERR_FILENO] = same_file(STDOUT_FILENO, STDERR_FILENO) ? g_sinks[STDOUT_FILENO]
                                                                   : new Sink(STDERR_FILENO);
}

void queue_output(int fd, std::string_view text, bool may_drop) {
  if (text.empty()) return;
  Sink* sink = g_sinks[fd];
  if (sink == nullptr) {
    (void)write_all(fd, text);  // before the ranks run: nothing else to wait for
    return;
  }
  sink->push(text, may_drop);
}

bool output_full(int fd) { return g_sinks[fd] != nullptr && g_sinks[fd]->full(); }

bool output_idle() { return output_idle(STDOUT_FILENO) && output_idle(STDERR_FILENO); }

bool output_idle(int fd) { return g_sinks[fd] == nullptr || g_sinks[fd]->idle(); }

size_t output_dropped() {
  size_t total = 0;
  if (g_sinks[STDOUT_FILENO] != nullptr) total += g_sinks[STDOUT_FILENO]->dropped();
  if (g_sinks[STDERR_FILENO] != nullptr && g_sinks[STDERR_FILENO] != g_sinks[STDOUT_FILENO]) {
    total += g_sinks[STDERR_FILENO]->dropped();
  }
  return total;
}

}  // namespace symrun
