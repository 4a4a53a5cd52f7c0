// symrun: starts N local ranks of a program with the environment that symcommInitFromEnv reads,
// relays their output line by line with a "[rank] " prefix, and stops them all together.
// This file: the usage text and the parsing of symrun's options, the low-level helpers that
// every file uses, and main. spawn.cc starts the ranks; supervise.cc watches them; output.cc
// writes what symrun prints.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <symcomm/symcomm.h>
#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "symrun.h"

// Defined by libsymcomm for symrun alone (src/capi/init.cc; in no public header): a unique id
// whose bootstrap root serves one join after another for as long as this process lives,
// each bounded by SYMCOMM_BOOTSTRAP_TIMEOUT from the first rank that joins it.
extern "C" symcommResult_t symcommLauncherUniqueId(symcommUniqueId* uid);

namespace symrun {
namespace {

constexpr char kUsage[] =
    "usage: symrun -n N [--nodes K | --ranks-per-node R] [--netns LIST] [--gpus LIST]\n"
    "              [--keep-going] [--timeout SEC] [--grace SEC] [--output DIR] [--]\n"
    "              PROGRAM [ARGS...]\n"
    "\n"
    "Starts N local ranks of PROGRAM (each in its own process group, stdin from /dev/null)\n"
    "with SYMCOMM_RANK, SYMCOMM_NRANKS, SYMCOMM_LOCAL_RANK, SYMCOMM_LOCAL_SIZE and\n"
    "SYMCOMM_UNIQUE_ID set, and the same numbers as torchrun sets them: RANK, WORLD_SIZE,\n"
    "LOCAL_RANK and LOCAL_WORLD_SIZE, with MASTER_ADDR=127.0.0.1 and MASTER_PORT a free port\n"
    "unless already set. Prefixes every line the ranks print with \"[rank] \".\n"
    "\n"
    "  -n N, -np N    number of ranks, 1 to 1024\n"
    "  --nodes K      the ranks form K nodes of N/K consecutive ranks each (K divides N):\n"
    "                 each rank gets SYMCOMM_NODE_NAME=symrun-node<i> of its node, and local\n"
    "                 rank and size within it, so that ranks of different nodes talk over\n"
    "                 the network transport as on separate machines\n"
    "  --ranks-per-node R  the same with R ranks per node (R divides N)\n"
    "  --netns LIST   comma-separated network namespaces, one a node (with --nodes or\n"
    "                 --ranks-per-node): node i's ranks join namespace LIST[i] (made by\n"
    "                 `ip netns add`; needs root) before they start\n"
    "  --gpus LIST    comma-separated device numbers: rank i gets SYMCOMM_DEVICE=LIST[i % len]\n"
    "  --keep-going   let the other ranks run to the end when one fails\n"
    "  --timeout SEC  stop the ranks after SEC seconds and exit 124 (default 0: no limit)\n"
    "  --grace SEC    seconds from SIGTERM to SIGKILL when stopping ranks (default 5)\n"
    "  --output DIR   write rank i's stdout and stderr to DIR/rank.i.out and DIR/rank.i.err\n"
    "                 (created or truncated; not prefixed, not relayed); DIR is created\n"
    "  -h, --help     print this help\n"
    "\n"
    "Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to every\n"
    "rank's process group; the ranks get --grace seconds, then SIGKILL, and symrun then dies\n"
    "by the same signal. Ranks are killed if symrun itself is killed.\n"
    "\n"
    "Stopped ranks: once every other rank has ended, ranks that stay stopped (SIGSTOP,\n"
    "SIGTSTP) for SYMCOMM_PEER_TIMEOUT seconds (default 10; 0: no bound) are killed, each\n"
    "named on stderr, and symrun exits 137.\n"
    "\n"
    "Exit status: 0 if every rank succeeded; else the code of the first failing rank (128+S\n"
    "for a rank killed by signal S), 124 on timeout, 137 when stopped ranks are killed, 2 on\n"
    "a usage error; killed by signal S (128+S in a shell) when symrun receives S.\n"
    "\n"
    "symrun starts ranks on this machine only (--nodes only names them apart);\n"
    "for several machines use mpirun or srun: symcommInitFromEnv reads their variables "
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

}  // namespace

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
  queue_output(STDERR_FILENO, line, false);
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

namespace {

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
  } else if (name == "--nodes" || name == "--ranks-per-node") {
    int v = 0;
    if (!parse_int(value, &v) || v < 1 || v > kMaxRanks)
      return std::string(name) + " needs a number from 1 to 1024, not " + quoted;
    (name == "--nodes" ? opt->nodes : opt->ranks_per_node) = v;
  } else if (name == "--gpus") {
    if (!parse_gpus(value, &opt->gpus)) {
      return "--gpus needs comma-separated non-negative integers, not " + quoted;
    }
  } else if (name == "--netns") {
    opt->netns.clear();
    for (std::string_view rest = value;;) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      if (item.empty() || item == "." || item == ".." || item.find('/') != std::string_view::npos)
        return "--netns needs comma-separated namespace names, not " + quoted;
      opt->netns.emplace_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  } else if (name == "--output") {
    if (value.empty()) return "--output needs a directory";
    opt->output_dir = value;
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
  return name == "-n" || name == "--gpus" || name == "--timeout" || name == "--grace" ||
         name == "--output" || name == "--nodes" || name == "--ranks-per-node" ||
         name == "--netns";
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
    } else if (arg.substr(0, 2) == "-n" && arg.size() > 2 && arg != "-np") {
      name = "-n";
      value = arg.substr(2);
      has_value = true;
    }
    if (name == "-np" || name == "--np") name = "-n";  // as mpirun users type it
    if (!takes_value(name)) return "unknown option '" + std::string(arg) + "'";
    if (!has_value) {
      if (i + 1 >= argc) return "option " + std::string(name) + " needs a value";
      value = argv[++i];
    }
    std::string error = apply_option(name, value, opt);
    if (!error.empty()) return error;
  }
  if (opt->nranks == 0) return "missing -n N";
  if (opt->nodes && opt->ranks_per_node) return "give --nodes or --ranks-per-node, not both";
  if (opt->nodes) {
    if (opt->nranks % opt->nodes)
      return "--nodes " + std::to_string(opt->nodes) + " does not divide -n " +
             std::to_string(opt->nranks) + " ranks into equal nodes";
    opt->ranks_per_node = opt->nranks / opt->nodes;
  } else if (opt->ranks_per_node) {
    if (opt->nranks % opt->ranks_per_node)
      return "--ranks-per-node " + std::to_string(opt->ranks_per_node) + " does not divide -n " +
             std::to_string(opt->nranks) + " ranks into equal nodes";
    opt->nodes = opt->nranks / opt->ranks_per_node;
  }
  if (!opt->netns.empty() && static_cast<int>(opt->netns.size()) != opt->nodes)
    return "--netns names one namespace a node: " + std::to_string(opt->netns.size()) +
           " given for " + std::to_string(opt->nodes) + " nodes (--nodes or --ranks-per-node)";
  if (i >= argc) return "missing PROGRAM";
  opt->program_argv = argv + i;
  return "";
}

bool make_unique_id(std::string* text) {
  // Loopback, unless the caller chose an address or an interface (ranks in other network
  // namespaces, --netns, reach the root by an interface's address).
  if (getenv("SYMCOMM_BOOTSTRAP_ADDR") == nullptr &&
      getenv("SYMCOMM_BOOTSTRAP_IFNAME") == nullptr &&
      setenv("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1", 1) != 0) {
    say("cannot set SYMCOMM_BOOTSTRAP_ADDR: " + errno_string(errno));
    return false;
  }
  symcommUniqueId uid;
  char buf[SYMCOMM_UNIQUE_ID_STRING_BYTES];
  // The root's thread starts with every signal blocked: the handlers' signals go to the main
  // thread, whose poll they wake (pending ones arrive when the mask is restored).
  sigset_t all;
  sigset_t previous;
  if (sigfillset(&all) != 0 || pthread_sigmask(SIG_SETMASK, &all, &previous) != 0) {
    say("cannot block signals");
    return false;
  }
  symcommResult_t made = symcommLauncherUniqueId(&uid);
  if (pthread_sigmask(SIG_SETMASK, &previous, nullptr) != 0) say("cannot unblock signals");
  if (made != symcommSuccess ||
      symcommUniqueIdToString(&uid, buf, sizeof buf) != symcommSuccess) {
    const char* error = symcommGetLastError();
    say(std::string("cannot create a unique id: ") + (error != nullptr ? error : ""));
    return false;
  }
  *text = buf;
  return true;
}

// Ends symrun by `sig` with its default action, so that a calling shell sees the signal (a
// script stops at Ctrl-C) rather than an exit code; returns if that fails.
void die_by_signal(int sig) {
  // A core of symrun itself (SIGQUIT's default) helps nobody.
  struct rlimit no_core = {0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, nullptr) != 0) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  raise(sig);  // pending while blocked, delivered when unblocked just below
  (void)pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

// Waits briefly for symrun's last messages to be written (stderr may be a pipe that nobody
// reads).
void flush_stderr_briefly() {
  for (int i = 0; i < 100 && !output_idle(STDERR_FILENO); ++i) poll(nullptr, 0, 10);
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
  error = read_peer_timeout(&opt);
  if (error.empty()) error = choose_master(&opt);
  if (error.empty() && !opt.output_dir.empty()) error = make_output_dir(opt.output_dir);
  if (!error.empty()) {
    say(error);
    return 1;
  }
  raise_fd_limit(opt.nranks);
  int wake_fd = install_signals();
  if (wake_fd < 0) return 1;
  std::string uid;
  if (!make_unique_id(&uid)) return 1;
  Launcher launcher(opt, wake_fd);
  int code = launcher.run(uid);
  if (launcher.fatal_signal() != 0) {
    flush_stderr_briefly();  // symrun's last messages first
    die_by_signal(launcher.fatal_signal());
  }
  return code;
}

}  // namespace
}  // namespace symrun

using symrun::run_main;
using symrun::say;

int main(int argc, char** argv) {
  int code = 1;
  try {
    code = run_main(argc, argv);
  } catch (const std::exception& e) {
    say(std::string("internal error: ") + e.what());
  } catch (...) {
    say("internal error");
  }
  symrun::flush_stderr_briefly();  // symrun's last messages, if queued
  // libsymcomm's bootstrap thread may still run: exit() would destroy static objects under it.
  _exit(code);
}
