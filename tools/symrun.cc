// symrun: starts N local ranks of a program with the environment that symcommInitFromEnv reads,
// relays their output line by line with a "[rank] " prefix, and stops them all together.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <symcomm/symcomm.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 1024;
constexpr int kUsageExit = 2;
constexpr int kExecFailedExit = 127;
constexpr int kTimeoutExit = 124;
constexpr double kMaxSeconds = 1e8;
constexpr size_t kReadChunk = size_t{64} * 1024;
// Longer lines are cut so that one rank that never writes a newline cannot exhaust memory.
constexpr size_t kMaxLine = size_t{1024} * 1024;
// Bounds the last read of pipes that processes outside symrun's control may keep writing to.
constexpr int kFinalSweepChunks = 16;
// How long pipes may stay open after SIGKILL (held only by processes that left their group).
constexpr double kDrainAfterKillSeconds = 1;

constexpr char kUsage[] =
    "usage: symrun -n N [--gpus LIST] [--keep-going] [--timeout SEC] [--grace SEC]\n"
    "              [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N local ranks of PROGRAM (each in its own process group, stdin from /dev/null)\n"
    "with SYMCOMM_RANK, SYMCOMM_NRANKS, SYMCOMM_LOCAL_RANK, SYMCOMM_LOCAL_SIZE and\n"
    "SYMCOMM_UNIQUE_ID set, and prefixes every line they print with \"[rank] \".\n"
    "\n"
    "  -n N           number of ranks, 1 to 1024\n"
    "  --gpus LIST    comma-separated device numbers: rank i gets SYMCOMM_DEVICE=LIST[i % len]\n"
    "  --keep-going   let the other ranks run to the end when one fails\n"
    "  --timeout SEC  stop the ranks after SEC seconds and exit 124 (default 0: no limit)\n"
    "  --grace SEC    seconds from SIGTERM to SIGKILL when stopping ranks (default 5)\n"
    "  -h, --help     print this help\n"
    "\n"
    "Exit status: 0 if every rank succeeded; else the code of the first failing rank (128+S\n"
    "for a rank killed by signal S), 124 on timeout, 128+S when symrun receives signal S,\n"
    "2 on a usage error.\n"
    "\n"
    "symrun starts ranks on this node only;\n"
    "for several nodes use mpirun or srun: symcommInitFromEnv reads their variables "
    "(docs/launch.md)\n";

// ---------------------------------------------------------------------------------------------
// Low-level helpers
// ---------------------------------------------------------------------------------------------

// Also called in forked children, so it must stay async-signal-safe.
bool wait_writable(int fd) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    if (poll(&p, 1, -1) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

// Also called in forked children, so it must stay async-signal-safe.
bool write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n > 0) {
      data += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout may be a non-blocking description shared with the caller.
      if (!wait_writable(fd)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool write_all(int fd, std::string_view text) { return write_all(fd, text.data(), text.size()); }

std::string errno_string(int err) { return strerror(err); }

void say(std::string_view message) {
  std::string line = "symrun: ";
  line += message;
  line += '\n';
  // Nowhere left to report a failure to write to stderr.
  (void)write_all(STDERR_FILENO, line);
}

// strerror may allocate (it translates), which a child forked from a threaded process must not.
const char* child_errno_text(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* text = strerrordesc_np(err);
  return text != nullptr ? text : "unknown error";
#else
  return strerror(err);
#endif
}

std::string signal_name(int sig) {
  static const struct {
    int sig;
    const char* name;
  } kNames[] = {
      {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},     {SIGQUIT, "SIGQUIT"},
      {SIGILL, "SIGILL"},       {SIGTRAP, "SIGTRAP"},   {SIGABRT, "SIGABRT"},
      {SIGBUS, "SIGBUS"},       {SIGFPE, "SIGFPE"},     {SIGKILL, "SIGKILL"},
      {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"},   {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"},   {SIGTERM, "SIGTERM"},
      {SIGCHLD, "SIGCHLD"},     {SIGCONT, "SIGCONT"},   {SIGSTOP, "SIGSTOP"},
      {SIGTSTP, "SIGTSTP"},     {SIGTTIN, "SIGTTIN"},   {SIGTTOU, "SIGTTOU"},
      {SIGURG, "SIGURG"},       {SIGXCPU, "SIGXCPU"},   {SIGXFSZ, "SIGXFSZ"},
      {SIGPROF, "SIGPROF"},     {SIGWINCH, "SIGWINCH"}, {SIGVTALRM, "SIGVTALRM"},
      {SIGIO, "SIGIO"},         {SIGSYS, "SIGSYS"},
#ifdef SIGSTKFLT
      {SIGSTKFLT, "SIGSTKFLT"},
#endif
#ifdef SIGPWR
      {SIGPWR, "SIGPWR"},
#endif
  };
  for (const auto& entry : kNames) {
    if (entry.sig == sig) return entry.name;
  }
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  return "unknown signal";
}

// A pipe created here must not land on fd 0-2, where a child's dup2 would clobber it.
bool ensure_std_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    if (errno != EBADF) return false;
    int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null_fd < 0) return false;
    if (null_fd != fd) {
      say("unexpected descriptor while reopening standard streams");
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

struct Options {
  int nranks = 0;
  std::vector<int> gpus;
  bool keep_going = false;
  double timeout_s = 0;
  std::string timeout_text = "0";
  double grace_s = 5;
  char** program_argv = nullptr;  // PROGRAM and ARGS, NULL-terminated (a tail of main's argv)
};

// Digits only: strtol would accept signs, spaces and overflow silently.
bool parse_int(std::string_view text, int* value) {
  if (text.empty() || text.size() > 9) return false;
  int result = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    result = result * 10 + (c - '0');
  }
  *value = result;
  return true;
}

bool parse_seconds(std::string_view text, double* value) {
  if (text.empty() || text.size() > 32) return false;
  int digits = 0;
  int dots = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.') {
      ++dots;
    } else {
      return false;
    }
  }
  if (digits == 0 || dots > 1) return false;
  std::string copy(text);
  double result = strtod(copy.c_str(), nullptr);
  if (!(result >= 0 && result <= kMaxSeconds)) return false;
  *value = result;
  return true;
}

bool parse_gpus(std::string_view text, std::vector<int>* gpus) {
  std::vector<int> result;
  for (;;) {
    size_t comma = text.find(',');
    int device = 0;
    if (!parse_int(text.substr(0, comma), &device)) return false;
    result.push_back(device);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  *gpus = std::move(result);
  return true;
}

std::string apply_option(std::string_view name, std::string_view value, Options* opt) {
  std::string quoted = "'" + std::string(value) + "'";
  if (name == "-n") {
    if (!parse_int(value, &opt->nranks) || opt->nranks < 1 || opt->nranks > kMaxRanks) {
      return "-n needs a number of ranks from 1 to 1024, not " + quoted;
    }
  } else if (name == "--gpus") {
    if (!parse_gpus(value, &opt->gpus)) {
      return "--gpus needs comma-separated non-negative integers, not " + quoted;
    }
  } else if (name == "--timeout") {
    if (!parse_seconds(value, &opt->timeout_s)) {
      return "--timeout needs a non-negative number of seconds, not " + quoted;
    }
    opt->timeout_text = value;
  } else if (!parse_seconds(value, &opt->grace_s)) {
    return "--grace needs a non-negative number of seconds, not " + quoted;
  }
  return "";
}

bool takes_value(std::string_view name) {
  return name == "-n" || name == "--gpus" || name == "--timeout" || name == "--grace";
}

// Returns a usage error, or "" on success. Options end at "--" or at the first non-option, so
// that PROGRAM's own options are left alone.
std::string parse_args(int argc, char** argv, Options* opt, bool* help) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return "";
    }
    if (arg == "--keep-going") {
      opt->keep_going = true;
      continue;
    }
    std::string_view name = arg;
    std::string_view value;
    bool has_value = false;
    if (arg.substr(0, 2) == "--" && arg.find('=') != std::string_view::npos) {
      name = arg.substr(0, arg.find('='));
      value = arg.substr(arg.find('=') + 1);
      has_value = true;
    } else if (arg.substr(0, 2) == "-n" && arg.size() > 2) {
      name = "-n";
      value = arg.substr(2);
      has_value = true;
    }
    if (!takes_value(name)) return "unknown option '" + std::string(arg) + "'";
    if (!has_value) {
      if (i + 1 >= argc) return "option " + std::string(name) + " needs a value";
      value = argv[++i];
    }
    std::string error = apply_option(name, value, opt);
    if (!error.empty()) return error;
  }
  if (opt->nranks == 0) return "missing -n N";
  if (i >= argc) return "missing PROGRAM";
  opt->program_argv = argv + i;
  return "";
}

// ---------------------------------------------------------------------------------------------
// Signals and process limits (state shared with forked children)
// ---------------------------------------------------------------------------------------------

constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
constexpr int kNumHandled = sizeof(kHandledSignals) / sizeof(kHandledSignals[0]);

int g_wake_write_fd = -1;
struct sigaction g_saved_actions[kNumHandled];
bool g_action_changed[kNumHandled] = {};
sigset_t g_saved_mask;
struct rlimit g_saved_nofile;
bool g_nofile_raised = false;

extern "C" void on_signal(int sig) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  // A full pipe already holds wake-ups; nothing better can be done from a handler.
  ssize_t ignored = write(g_wake_write_fd, &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

bool set_action(int index, void (*handler)(int), int flags) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  action.sa_flags = flags;
  if (sigfillset(&action.sa_mask) != 0) return false;
  if (sigaction(kHandledSignals[index], &action, &g_saved_actions[index]) != 0) return false;
  g_action_changed[index] = true;
  return true;
}

// Installs symrun's disposition of kHandledSignals[index].
bool install_signal(int index) {
  int sig = kHandledSignals[index];
  struct sigaction current;
  if (sigaction(sig, nullptr, &current) != 0) return false;
  if (sig == SIGPIPE) return set_action(index, SIG_IGN, 0);
  if (sig == SIGCHLD) return set_action(index, on_signal, SA_RESTART | SA_NOCLDSTOP);
  // A signal ignored on entry stays ignored (nohup symrun ... must survive SIGHUP).
  if (current.sa_handler == SIG_IGN) return true;
  return set_action(index, on_signal, SA_RESTART);
}

// Returns the read end of the self-pipe that the handlers write signal numbers to, or -1.
int install_signals() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    say("cannot create a pipe: " + errno_string(errno));
    return -1;
  }
  g_wake_write_fd = fds[1];
  int rc = pthread_sigmask(SIG_SETMASK, nullptr, &g_saved_mask);
  if (rc != 0) {
    say("cannot read the signal mask: " + errno_string(rc));
    return -1;
  }
  for (int i = 0; i < kNumHandled; ++i) {
    if (!install_signal(i)) {
      say("cannot install a signal handler: " + errno_string(errno));
      return -1;
    }
  }
  return fds[0];
}

// Each rank needs two pipes; the soft limit is often 1024, too few for -n 1024.
void raise_fd_limit(int nranks) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;  // pipe2 will report the shortage
  rlim_t needed = 2 * static_cast<rlim_t>(nranks) + 64;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  struct rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) return;  // pipe2 will report the shortage
  g_saved_nofile = limit;
  g_nofile_raised = true;
}

// ---------------------------------------------------------------------------------------------
// The child side of fork: async-signal-safe calls only, because libsymcomm's bootstrap thread
// may hold locks (malloc's among them) at the moment of fork.
// ---------------------------------------------------------------------------------------------

struct ChildPlan {
  const char* file;
  char* const* argv;
  char* const* envp;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  const char* exec_error_prefix;  // "symrun: cannot execute PROGRAM: "
};

[[noreturn]] void child_fail(const char* prefix, const char* what, int err) {
  const char* parts[] = {prefix, what, child_errno_text(err), "\n"};
  for (const char* part : parts) {
    if (!write_all(STDERR_FILENO, part, strlen(part))) break;
  }
  _exit(kExecFailedExit);
}

bool restore_signals_in_child() {
  for (int i = 0; i < kNumHandled; ++i) {
    if (g_action_changed[i] && sigaction(kHandledSignals[i], &g_saved_actions[i], nullptr) != 0) {
      return false;
    }
  }
  return sigprocmask(SIG_SETMASK, &g_saved_mask, nullptr) == 0;
}

[[noreturn]] void run_child(const ChildPlan& plan) {
  const char* start_error = "symrun: cannot start rank: ";
  if (setpgid(0, 0) != 0) child_fail(start_error, "setpgid: ", errno);
  if (dup2(plan.stdin_fd, STDIN_FILENO) < 0) child_fail(start_error, "dup2: ", errno);
  if (dup2(plan.stdout_fd, STDOUT_FILENO) < 0) child_fail(start_error, "dup2: ", errno);
  if (dup2(plan.stderr_fd, STDERR_FILENO) < 0) child_fail(start_error, "dup2: ", errno);
  if (g_nofile_raised && setrlimit(RLIMIT_NOFILE, &g_saved_nofile) != 0) {
    child_fail(start_error, "setrlimit: ", errno);
  }
  // Unblocking last lets a signal that hit the new group early act with its default action.
  if (!restore_signals_in_child()) child_fail(start_error, "sigaction: ", errno);
  execvpe(plan.file, plan.argv, plan.envp);
  child_fail(plan.exec_error_prefix, "", errno);
}

// ---------------------------------------------------------------------------------------------
// Environment of the ranks
// ---------------------------------------------------------------------------------------------

std::string_view env_name(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::vector<std::string> rank_variables(const Options& opt, int rank, const std::string& uid) {
  std::vector<std::string> vars = {
      "SYMCOMM_RANK=" + std::to_string(rank),
      "SYMCOMM_NRANKS=" + std::to_string(opt.nranks),
      "SYMCOMM_LOCAL_RANK=" + std::to_string(rank),
      "SYMCOMM_LOCAL_SIZE=" + std::to_string(opt.nranks),
      "SYMCOMM_UNIQUE_ID=" + uid,
      // Multicast objects (NVLS) have hung or corrupted memory on shared machines: keep every
      // library in a rank off them, whatever the caller's environment says.
      "NCCL_NVLS_ENABLE=0",
      "NVSHMEM_DISABLE_NVLS=1",
      "TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
  };
  if (!opt.gpus.empty()) {
    size_t index = static_cast<size_t>(rank) % opt.gpus.size();
    vars.push_back("SYMCOMM_DEVICE=" + std::to_string(opt.gpus[index]));
  }
  return vars;
}

// The caller's environment without the variables that symrun sets for every rank.
std::vector<std::string> inherited_environment(const Options& opt) {
  std::vector<std::string> overridden = rank_variables(opt, 0, "");
  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view name = env_name(*entry);
    bool replaced = std::any_of(overridden.begin(), overridden.end(),
                                [&](const std::string& var) { return env_name(var) == name; });
    if (!replaced) result.emplace_back(*entry);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// The launcher
// ---------------------------------------------------------------------------------------------

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

struct Stream {
  int fd = -1;
  int sink = STDOUT_FILENO;
  std::string pending;  // a partial line
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  std::string prefix;
  Stream out;
  Stream err;

  // An exited rank's group lives on while a member (a background child) holds its pipes.
  bool group_may_live() const { return running || out.fd >= 0 || err.fd >= 0; }
};

class Launcher {
 public:
  Launcher(const Options& opt, int wake_fd) : opt_(opt), wake_fd_(wake_fd) {}
  int run(const std::string& uid);

 private:
  void spawn_all(const std::string& uid);
  std::string spawn(int rank, const std::string& uid, const std::vector<std::string>& inherited,
                    int null_fd);
  void loop();
  bool finished() const;
  int poll_timeout_ms() const;
  void handle_wake_pipe();
  void on_signal(int sig);
  void reap();
  void on_rank_end(int rank, int status);
  void begin_stop(int sig, int exit_code);
  void signal_groups(int sig);
  void check_timers();
  bool read_stream(Rank& rank, Stream& stream);
  void relay(const Rank& rank, Stream& stream, const char* data, size_t len);
  void emit(int sink, const std::string& text);
  void close_stream(Rank& rank, Stream& stream);
  void final_sweep();
  void abort_all();

  const Options& opt_;
  int wake_fd_;
  std::vector<Rank> ranks_;
  std::vector<char> buffer_ = std::vector<char>(kReadChunk);
  int running_ = 0;
  int open_streams_ = 0;
  int exit_code_ = 0;
  bool failed_ = false;
  bool stopping_ = false;
  bool killed_ = false;
  bool sink_broken_[3] = {};
  Clock::time_point timeout_at_;
  Clock::time_point kill_at_;
  Clock::time_point drain_until_;
};

int Launcher::run(const std::string& uid) {
  timeout_at_ = Clock::now() + seconds(opt_.timeout_s);
  drain_until_ = Clock::now();
  try {
    spawn_all(uid);
    loop();
    final_sweep();
  } catch (...) {
    // Never leave ranks behind, whatever went wrong here.
    abort_all();
    throw;
  }
  return exit_code_;
}

void Launcher::spawn_all(const std::string& uid) {
  ranks_.resize(static_cast<size_t>(opt_.nranks));
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    say("cannot open /dev/null: " + errno_string(errno));
    exit_code_ = 1;
    return;
  }
  std::vector<std::string> inherited = inherited_environment(opt_);
  for (int i = 0; i < opt_.nranks; ++i) {
    std::string error = spawn(i, uid, inherited, null_fd);
    if (!error.empty()) {
      say("cannot start rank " + std::to_string(i) + ": " + error);
      begin_stop(SIGTERM, 1);
      break;
    }
  }
  if (close(null_fd) != 0) say("cannot close /dev/null: " + errno_string(errno));
}

// Closes both ends of each pipe in `fds` that is still open.
void close_pipes(int (&fds)[2][2]) {
  for (auto& pipe_fds : fds) {
    for (int fd : pipe_fds) {
      if (fd >= 0 && close(fd) != 0) say("cannot close a pipe: " + errno_string(errno));
    }
  }
}

// Returns "" on success, else why rank `rank` could not be started.
std::string Launcher::spawn(int rank, const std::string& uid,
                            const std::vector<std::string>& inherited, int null_fd) {
  int fds[2][2] = {{-1, -1}, {-1, -1}};
  for (auto& pipe_fds : fds) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
      std::string error = "pipe: " + errno_string(errno);
      close_pipes(fds);
      return error;
    }
    // Only symrun's end is non-blocking: the rank's end must behave like an ordinary stdout.
    if (fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK) != 0) {
      std::string error = "fcntl: " + errno_string(errno);
      close_pipes(fds);
      return error;
    }
  }
  std::vector<std::string> own = rank_variables(opt_, rank, uid);
  std::vector<char*> envp;
  envp.reserve(inherited.size() + own.size() + 1);
  for (const std::string& var : inherited) envp.push_back(const_cast<char*>(var.c_str()));
  for (std::string& var : own) envp.push_back(var.data());
  envp.push_back(nullptr);
  std::string exec_error = "symrun: cannot execute " + std::string(opt_.program_argv[0]) + ": ";
  ChildPlan plan{
      opt_.program_argv[0], opt_.program_argv, envp.data(), null_fd, fds[0][1], fds[1][1],
      exec_error.c_str()};

  // Blocked until the child has restored the caller's dispositions: a handler running in the
  // child would write to symrun's self-pipe.
  sigset_t all;
  sigset_t previous;
  if (sigfillset(&all) != 0 || pthread_sigmask(SIG_SETMASK, &all, &previous) != 0) {
    close_pipes(fds);
    return "cannot block signals";
  }
  pid_t pid = fork();
  if (pid == 0) run_child(plan);
  int fork_errno = errno;
  if (pthread_sigmask(SIG_SETMASK, &previous, nullptr) != 0) say("cannot unblock signals");
  if (pid < 0) {
    close_pipes(fds);
    return "fork: " + errno_string(fork_errno);
  }
  // Also done here so the group exists before symrun may signal it; EACCES means that the
  // child has already called exec (after its own setpgid), ESRCH that it has already exited.
  if (setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH) {
    say("setpgid of rank " + std::to_string(rank) + ": " + errno_string(errno));
  }
  for (auto& pipe_fds : fds) {
    if (close(pipe_fds[1]) != 0) say("cannot close a pipe: " + errno_string(errno));
  }
  Rank& r = ranks_[static_cast<size_t>(rank)];
  r.pid = pid;
  r.running = true;
  r.prefix = "[" + std::to_string(rank) + "] ";
  r.out.fd = fds[0][0];
  r.out.sink = STDOUT_FILENO;
  r.err.fd = fds[1][0];
  r.err.sink = STDERR_FILENO;
  ++running_;
  open_streams_ += 2;
  return "";
}

bool Launcher::finished() const {
  if (running_ > 0) return false;
  if (open_streams_ == 0) return true;
  // While stopping, what holds the pipes belongs to the ranks' groups: SIGKILL will end it.
  if (stopping_ && !killed_) return false;
  return Clock::now() >= drain_until_;
}

int Launcher::poll_timeout_ms() const {
  std::vector<Clock::time_point> deadlines;
  if (!stopping_ && opt_.timeout_s > 0) deadlines.push_back(timeout_at_);
  if (stopping_ && !killed_) deadlines.push_back(kill_at_);
  if (running_ == 0 && (!stopping_ || killed_)) deadlines.push_back(drain_until_);
  if (deadlines.empty()) return -1;
  auto left = *std::min_element(deadlines.begin(), deadlines.end()) - Clock::now();
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 60000));
}

void Launcher::loop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, Stream*>> owners;
  while (!finished()) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    owners.assign(1, {nullptr, nullptr});
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0) continue;
        fds.push_back(pollfd{stream->fd, POLLIN, 0});
        owners.emplace_back(&rank, stream);
      }
    }
    if (poll(fds.data(), fds.size(), poll_timeout_ms()) < 0) {
      if (errno == EINTR) continue;
      say("poll: " + errno_string(errno));
      abort_all();
      exit_code_ = 1;
      return;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_stream(*owners[i].first, *owners[i].second);
    }
    if (fds[0].revents != 0) handle_wake_pipe();
    check_timers();
  }
}

void Launcher::handle_wake_pipe() {
  unsigned char bytes[256];
  bool child_exited = false;
  for (;;) {
    ssize_t n = read(wake_fd_, bytes, sizeof bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      say("cannot read the signal pipe: " + errno_string(n < 0 ? errno : EPIPE));
      break;
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (bytes[i] == SIGCHLD) {
        child_exited = true;
      } else {
        on_signal(bytes[i]);
      }
    }
  }
  if (child_exited) reap();
}

void Launcher::on_signal(int sig) {
  if (stopping_) {
    signal_groups(sig);
    return;
  }
  begin_stop(sig, 128 + sig);
}

void Launcher::reap() {
  int was_running = running_;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& rank = ranks_[i];
    if (!rank.running) continue;
    int status = 0;
    pid_t pid = waitpid(rank.pid, &status, WNOHANG);
    if (pid == 0) continue;
    if (pid < 0) {
      say("cannot wait for rank " + std::to_string(i) + ": " + errno_string(errno));
      status = 1 << 8;  // as if it exited with code 1
    }
    rank.running = false;
    --running_;
    on_rank_end(static_cast<int>(i), status);
  }
  if (was_running > 0 && running_ == 0) drain_until_ = Clock::now() + seconds(opt_.grace_s);
}

// Ranks that end once symrun is stopping them are not reported: their ends are expected.
void Launcher::on_rank_end(int rank, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (stopping_) return;
  std::string what = "rank " + std::to_string(rank);
  int code = 1;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    what += " exited with code " + std::to_string(code);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    code = 128 + sig;
    what += " was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
  }
  say(what);
  if (!failed_) {
    failed_ = true;
    exit_code_ = code;
  }
  if (!opt_.keep_going) begin_stop(SIGTERM, code);
}

// The event that starts the stop (a failure, a signal, the timeout) decides the exit code, even
// over an earlier failure under --keep-going.
void Launcher::begin_stop(int sig, int exit_code) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = exit_code;
  kill_at_ = Clock::now() + seconds(opt_.grace_s);
  signal_groups(sig);
}

void Launcher::signal_groups(int sig) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& rank = ranks_[i];
    if (rank.pid < 0 || !rank.group_may_live()) continue;
    if (kill(-rank.pid, sig) != 0 && errno != ESRCH) {
      say("cannot signal rank " + std::to_string(i) + ": " + errno_string(errno));
    }
  }
}

void Launcher::check_timers() {
  Clock::time_point now = Clock::now();
  if (!stopping_ && opt_.timeout_s > 0 && running_ > 0 && now >= timeout_at_) {
    say("timeout after " + opt_.timeout_text + " s, stopping " + std::to_string(running_) +
        " rank(s)");
    begin_stop(SIGTERM, kTimeoutExit);
  }
  if (stopping_ && !killed_ && now >= kill_at_) {
    killed_ = true;
    signal_groups(SIGKILL);
    drain_until_ = std::max(drain_until_, now + seconds(kDrainAfterKillSeconds));
  }
}

// Returns false when the stream has nothing more to read now (would block, or closed).
bool Launcher::read_stream(Rank& rank, Stream& stream) {
  ssize_t n = read(stream.fd, buffer_.data(), buffer_.size());
  if (n > 0) {
    relay(rank, stream, buffer_.data(), static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n < 0) say("cannot read the output of a rank: " + errno_string(errno));
  close_stream(rank, stream);
  return false;
}

void Launcher::relay(const Rank& rank, Stream& stream, const char* data, size_t len) {
  std::string text;
  size_t start = 0;
  while (start < len) {
    const void* newline = memchr(data + start, '\n', len - start);
    if (newline == nullptr) break;
    size_t end = static_cast<size_t>(static_cast<const char*>(newline) - data) + 1;
    text += rank.prefix;
    text += stream.pending;
    text.append(data + start, end - start);
    stream.pending.clear();
    start = end;
  }
  stream.pending.append(data + start, len - start);
  if (stream.pending.size() > kMaxLine) {
    text += rank.prefix + stream.pending + "\n";
    stream.pending.clear();
  }
  emit(stream.sink, text);
}

void Launcher::emit(int sink, const std::string& text) {
  if (text.empty() || sink_broken_[sink]) return;
  if (write_all(sink, text)) return;
  // Keep the ranks running and their pipes drained; only the copying stops.
  sink_broken_[sink] = true;
  if (sink != STDERR_FILENO) say("cannot write to stdout: " + errno_string(errno));
}

void Launcher::close_stream(Rank& rank, Stream& stream) {
  if (!stream.pending.empty()) {
    emit(stream.sink, rank.prefix + stream.pending + "\n");
    stream.pending.clear();
  }
  if (close(stream.fd) != 0) say("cannot close a pipe: " + errno_string(errno));
  stream.fd = -1;
  --open_streams_;
}

// Copies what is already in the pipes that outlived the drain period (processes that escaped
// the ranks' groups may hold them), then closes them.
void Launcher::final_sweep() {
  for (Rank& rank : ranks_) {
    for (Stream* stream : {&rank.out, &rank.err}) {
      for (int i = 0; i < kFinalSweepChunks && stream->fd >= 0; ++i) {
        if (!read_stream(rank, *stream)) break;
      }
      if (stream->fd >= 0) close_stream(rank, *stream);
    }
  }
}

// Last resort: must not allocate, as it also runs when memory has run out.
void Launcher::abort_all() {
  for (Rank& rank : ranks_) {
    if (!rank.running) continue;
    if (kill(-rank.pid, SIGKILL) != 0 && errno != ESRCH) continue;
    int status = 0;
    while (waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
    }
    rank.running = false;
    --running_;
  }
}

bool make_unique_id(std::string* text) {
  if (getenv("SYMCOMM_BOOTSTRAP_ADDR") == nullptr &&
      setenv("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1", 1) != 0) {
    say("cannot set SYMCOMM_BOOTSTRAP_ADDR: " + errno_string(errno));
    return false;
  }
  symcommUniqueId uid;
  char buf[SYMCOMM_UNIQUE_ID_STRING_BYTES];
  if (symcommGetUniqueId(&uid) != symcommSuccess ||
      symcommUniqueIdToString(&uid, buf, sizeof buf) != symcommSuccess) {
    const char* error = symcommGetLastError();
    say(std::string("cannot create a unique id: ") + (error != nullptr ? error : ""));
    return false;
  }
  *text = buf;
  return true;
}

int run_main(int argc, char** argv) {
  Options opt;
  bool help = false;
  std::string error = parse_args(argc, argv, &opt, &help);
  if (help) return write_all(STDOUT_FILENO, kUsage) ? 0 : 1;
  if (!error.empty()) {
    say(error);
    (void)write_all(STDERR_FILENO, kUsage);
    return kUsageExit;
  }
  if (!ensure_std_fds()) return 1;
  raise_fd_limit(opt.nranks);
  int wake_fd = install_signals();
  if (wake_fd < 0) return 1;
  std::string uid;
  if (!make_unique_id(&uid)) return 1;
  Launcher launcher(opt, wake_fd);
  return launcher.run(uid);
}

}  // namespace

int main(int argc, char** argv) {
  int code = 1;
  try {
    code = run_main(argc, argv);
  } catch (const std::exception& e) {
    say(std::string("internal error: ") + e.what());
  } catch (...) {
    say("internal error");
  }
  // libsymcomm's bootstrap thread may still run: exit() would destroy static objects under it.
  _exit(code);
}
