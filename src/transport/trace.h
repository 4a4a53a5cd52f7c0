// SYMCOMM_TRANSPORT_TRACE=1: how long the phases of the transports' own threads take on this
// rank (a landing, a signal, the wait between a signal applied and the stream's next job),
// printed to stderr as percentiles when the process exits. For finding where a message's time
// goes; off, each point costs one branch.
#pragma once

namespace symcomm::trace {

bool enabled();
double now_us();
void add(const char* phase, double us);
// The time of an event other phases measure from (set: `mark(name)`, read: `since(name)`, in
// microseconds, or a negative number if never marked).
void mark(const char* event);
double since(const char* event);

class Scope {
 public:
  explicit Scope(const char* phase) : phase_(phase), t0_(enabled() ? now_us() : 0) {}
  ~Scope() {
    if (enabled()) add(phase_, now_us() - t0_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* phase_;
  double t0_;
};

}  // namespace symcomm::trace
