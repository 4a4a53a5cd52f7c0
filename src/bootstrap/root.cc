#include "bootstrap/root.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/thread_guard.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/protocol.h"

namespace symcomm {

namespace {

struct Joined {
  Fd conn;
  JoinHello hello;
};

// A serial root waits for the first rank of each join without a bound (about 35 years).
constexpr int64_t kForeverMs = int64_t{1} << 40;

class Root {
 public:
  // `timeout_ms`: SYMCOMM_BOOTSTRAP_TIMEOUT, read by the thread that starts the root.
  Root(Fd listener, const Token& token, RootMode mode, int64_t timeout_ms)
      : listener_(std::move(listener)), token_(token), mode_(mode), timeout_ms_(timeout_ms) {}

  void run() {
    run_guarded(
        [this] {
          do {
            thread_fault_point("bootstrap root");
            serve();
          } while (mode_ == RootMode::Serial);
        },
        [](symcommResult_t, const std::string& why) {
          // The ranks learn of the failure through their own connections and deadlines.
          SYMCOMM_WARN("bootstrap root stopped: %s", why.c_str());
        });
  }

 private:
  // Serves one join, successful or not.
  void serve() {
    const int64_t timeout_ms = timeout_ms_;
    Deadline deadline = Deadline::after_ms(mode_ == RootMode::Serial ? kForeverMs : timeout_ms);
    int nranks = -1;
    std::vector<Joined> joined;
    // Once the join has failed, the root stays until the deadline to give every rank that
    // still arrives the same error, so that none waits for a root that is gone.
    symcommResult_t failed = symcommSuccess;
    std::string failure;
    int answered = 0;
    bool started = false;
    while (failed != symcommSuccess ? answered < nranks
                                    : nranks < 0 || static_cast<int>(joined.size()) < nranks) {
      Fd conn;
      try {
        conn = accept_before(listener_.get(), deadline, nullptr, "waiting for ranks to join");
      } catch (const Error& e) {
        if (e.code() != symcommTimeout) {
          // The root stops: the ranks that joined hear why rather than a closed connection.
          if (failed == symcommSuccess)
            fail_all(joined, e.code(), std::string("the bootstrap root stopped: ") + e.what());
          throw;
        }
        if (failed == symcommSuccess)
          fail_all(joined, symcommTimeout, missing_message(joined, nranks, timeout_ms));
        return;
      }
      JoinHello hello;
      try {
        // A connection that says nothing must not hold up the others for long.
        Deadline hello_deadline = Deadline::after_ms(std::min<int64_t>(5000, timeout_ms));
        recv_all(conn.get(), &hello, sizeof hello, hello_deadline, nullptr, "reading a join");
      } catch (const Error& e) {
        SYMCOMM_WARN("bootstrap root: dropped a connection that sent no join: %s", e.what());
        continue;
      }
      if (hello.magic != kJoinMagic || !same_token(hello.token, token_)) {
        SYMCOMM_WARN("bootstrap root: refused a connection without the unique id's token");
        reply(conn, symcommInvalidArgument,
              "the bootstrap root refused the connection: wrong token (the unique id does not "
              "match the root's)");
        continue;
      }
      if (!started) {
        started = true;
        deadline = Deadline::after_ms(timeout_ms);  // the join starts with the first rank
      }
      if (failed != symcommSuccess) {
        reply(conn, failed, failure);
        ++answered;
        continue;
      }
      std::string problem = check(hello, nranks, joined);
      if (!problem.empty()) {
        failed = symcommInvalidArgument;
        failure = problem;
        reply(conn, failed, failure);
        fail_all(joined, failed, failure);
        answered = static_cast<int>(joined.size()) + 1;
        nranks = std::max(nranks, hello.nranks);
        joined.clear();
        continue;
      }
      if (nranks < 0) {
        nranks = hello.nranks;
        // The root keeps every rank's connection until all have joined.
        ensure_descriptors(std::min(nranks, 1 << 20), "the bootstrap root");
      }
      joined.push_back(Joined{std::move(conn), hello});
    }
    if (failed == symcommSuccess) succeed(joined, nranks);
  }

  static std::string check(const JoinHello& hello, int nranks, const std::vector<Joined>& joined) {
    if (nranks >= 0 && hello.nranks != nranks)
      return format("ranks disagree on nranks: rank %d says %d, rank %d says %d", hello.rank,
                    hello.nranks, joined.front().hello.rank, nranks);
    if (hello.rank < 0 || hello.rank >= hello.nranks)
      return format("rank %d is out of range for nranks %d", hello.rank, hello.nranks);
    for (const Joined& j : joined)
      if (j.hello.rank == hello.rank)
        return format("two processes joined as rank %d (pids %d on %s and %d on %s)", hello.rank,
                      j.hello.info.pid, j.hello.info.hostname, hello.info.pid,
                      hello.info.hostname);
    return "";
  }

  static std::string missing_message(const std::vector<Joined>& joined, int nranks,
                                     int64_t timeout_ms) {
    if (nranks < 0) return "no rank joined";
    std::vector<bool> seen(static_cast<size_t>(nranks), false);
    for (const Joined& j : joined) seen[static_cast<size_t>(j.hello.rank)] = true;
    std::string missing;
    int count = 0;
    for (int r = 0; r < nranks; ++r) {
      if (seen[static_cast<size_t>(r)]) continue;
      if (count < 16) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      ++count;
    }
    if (count > 16) missing += ",...";
    return format("%d of %d ranks did not join within SYMCOMM_BOOTSTRAP_TIMEOUT=%.3g s "
                  "(missing: %s)", count, nranks, timeout_ms / 1000.0, missing.c_str());
  }

  static void reply(const Fd& conn, symcommResult_t status, const std::string& message,
                    uint64_t comm_id = 0) {
    JoinReply r{};
    r.magic = kJoinMagic;
    r.status = status;
    r.comm_id = comm_id;
    std::snprintf(r.message, sizeof r.message, "%s", message.c_str());
    try {
      send_all(conn.get(), &r, sizeof r, Deadline::after_ms(5000), nullptr, "replying to a rank");
    } catch (const Error&) {
      // A rank that went away after joining finds out on its own.
    }
  }

  static void fail_all(const std::vector<Joined>& joined, symcommResult_t code,
                       const std::string& message) {
    SYMCOMM_WARN("bootstrap root: %s", message.c_str());
    for (const Joined& j : joined) reply(j.conn, code, message);
  }

  static void succeed(std::vector<Joined>& joined, int nranks) {
    std::vector<PeerInfo> table(static_cast<size_t>(nranks));
    for (const Joined& j : joined) table[static_cast<size_t>(j.hello.rank)] = j.hello.info;
    uint64_t comm_id = random_u64();
    for (const Joined& j : joined) {
      reply(j.conn, symcommSuccess, "", comm_id);
      try {
        send_all(j.conn.get(), table.data(), table.size() * sizeof(PeerInfo),
                 Deadline::after_ms(5000), nullptr, "sending the peer table");
      } catch (const Error&) {
      }
    }
  }

  Fd listener_;
  Token token_;
  RootMode mode_;
  int64_t timeout_ms_;
};

// Descriptors open in this process, or -1 where /proc cannot tell.
int64_t open_descriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t count = 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count - 3;  // ".", ".." and the directory's own descriptor
}

}  // namespace

void ensure_descriptors(int64_t more, const char* who) {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const int64_t open = open_descriptors();
  // Room for what the process opens meanwhile (shared memory, sockets of the library).
  const int64_t needed = std::max<int64_t>(open, 0) + more + 64;
  if (static_cast<int64_t>(limit.rlim_cur) >= needed) return;
  rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max == RLIM_INFINITY
                        ? static_cast<rlim_t>(needed)
                        : std::min(static_cast<rlim_t>(needed), limit.rlim_max);
  if (raised.rlim_cur > limit.rlim_cur && setrlimit(RLIMIT_NOFILE, &raised) == 0) {
    SYMCOMM_DEBUG("%s: raised the open-file limit from %llu to %llu", who,
                  static_cast<unsigned long long>(limit.rlim_cur),
                  static_cast<unsigned long long>(raised.rlim_cur));
    limit = raised;
  }
  if (static_cast<int64_t>(limit.rlim_cur) < needed)
    SYMCOMM_WARN("%s needs about %lld open files (%lld open, %lld more), but the limit is "
                 "%llu and cannot be raised (raise ulimit -n)",
                 who, static_cast<long long>(needed), static_cast<long long>(open),
                 static_cast<long long>(more), static_cast<unsigned long long>(limit.rlim_cur));
}

NetAddr start_bootstrap_root(Fd listener, const Token& token, RootMode mode) {
  NetAddr addr = socket_local_addr(listener.get());
  auto root = std::make_shared<Root>(std::move(listener), token, mode, bootstrap_timeout_ms());
  std::thread([root] { root->run(); }).detach();
  return addr;
}

}  // namespace symcomm
