// symrun: starting the ranks. The signal handlers and file-descriptor limit that symrun sets
// (and each forked child restores), the child side of fork, the environment of each rank, and
// Launcher::spawn_all and Launcher::spawn.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "symrun.h"

extern char** environ;

namespace symrun {
namespace {

// ---------------------------------------------------------------------------------------------
// Signals and process limits (state shared with forked children)
// ---------------------------------------------------------------------------------------------

// The signals that stop the ranks (forwarded to their groups, then symrun dies by the same
// signal), SIGCHLD, and SIGPIPE (ignored: a closed stdout must not kill symrun).
constexpr int kHandledSignals[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                   SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};
constexpr int kNumHandled = sizeof(kHandledSignals) / sizeof(kHandledSignals[0]);

int g_wake_write_fd = -1;
struct sigaction g_saved_actions[kNumHandled];
bool g_action_changed[kNumHandled] = {};
sigset_t g_saved_mask;
struct rlimit g_saved_nofile;
bool g_nofile_saved = false;
pid_t g_launcher_pid = -1;  // symrun's pid, which each child checks against its parent's

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

}  // namespace

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
  // The caller may have blocked them (a blocked SIGCHLD would leave every exit unnoticed):
  // symrun itself must receive the signals it handles. Each rank gets the caller's mask back.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : kHandledSignals) {
    if (sig != SIGPIPE) sigaddset(&handled, sig);
  }
  rc = pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
  if (rc != 0) {
    say("cannot unblock signals: " + errno_string(rc));
    return -1;
  }
  g_launcher_pid = getpid();
  return fds[0];
}

// Each rank needs two pipes, and symrun's bootstrap root holds one connection per rank while
// the ranks join; the soft limit is often 1024, too few for -n 360. The soft limit is raised
// toward the hard limit; each rank gets the caller's limit back.
void raise_fd_limit(int nranks) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;  // pipe2 will report the shortage
  g_saved_nofile = limit;
  g_nofile_saved = true;
  rlim_t needed = 3 * static_cast<rlim_t>(nranks) + 64;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  struct rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    say("cannot raise the limit on open files to " + std::to_string(raised.rlim_cur) + ": " +
        errno_string(errno));
    return;  // pipe2 will report the shortage
  }
  if (raised.rlim_cur < needed) {
    say("-n " + std::to_string(nranks) + " needs about " + std::to_string(needed) +
        " open files, but the hard limit is " + std::to_string(limit.rlim_max) +
        " (raise ulimit -Hn)");
  }
}

namespace {

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
  int netns_fd;  // a network namespace to join (--netns), or -1
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
  if (plan.netns_fd >= 0 && setns(plan.netns_fd, CLONE_NEWNET) != 0)
    child_fail(start_error, "setns (--netns): ", errno);
  // The bootstrap root (another thread of symrun) may raise the limit at any time.
  if (g_nofile_saved && setrlimit(RLIMIT_NOFILE, &g_saved_nofile) != 0) {
    child_fail(start_error, "setrlimit: ", errno);
  }
  // A rank must not outlive symrun, even one killed by SIGKILL: the kernel kills the rank
  // when the thread that forked it exits (symrun's main thread, which lives as long as
  // symrun). If symrun died before this call, the rank has another parent already and must
  // not run.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(start_error, "prctl: ", errno);
  if (getppid() != g_launcher_pid) _exit(kExecFailedExit);
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
  const int per_node = opt.ranks_per_node ? opt.ranks_per_node : opt.nranks;
  const int local = rank % per_node;
  std::vector<std::string> vars = {
      "SYMCOMM_RANK=" + std::to_string(rank),
      "SYMCOMM_NRANKS=" + std::to_string(opt.nranks),
      "SYMCOMM_LOCAL_RANK=" + std::to_string(local),
      "SYMCOMM_LOCAL_SIZE=" + std::to_string(per_node),
      "SYMCOMM_UNIQUE_ID=" + uid,
      // torchrun's names for the same numbers, so that torch.distributed runs under symrun.
      // symcommInitFromEnv reads symrun's variables first (src/bootstrap/launcher_env.cc).
      "RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(opt.nranks),
      "LOCAL_RANK=" + std::to_string(local),
      "LOCAL_WORLD_SIZE=" + std::to_string(per_node),
      // Multicast objects (NVLS) have hung or corrupted memory on shared machines: keep every
      // library in a rank off them, whatever the caller's environment says.
      "NCCL_NVLS_ENABLE=0",
      "NVSHMEM_DISABLE_NVLS=1",
      "TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
  };
  if (opt.ranks_per_node) vars.push_back("SYMCOMM_NODE_NAME=symrun-node" + std::to_string(rank / per_node));
  if (!opt.master_addr.empty()) vars.push_back("MASTER_ADDR=" + opt.master_addr);
  if (!opt.master_port.empty()) vars.push_back("MASTER_PORT=" + opt.master_port);
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// The launcher
// ---------------------------------------------------------------------------------------------

void Launcher::spawn_all(const std::string& uid) {
  ranks_.resize(static_cast<size_t>(opt_.nranks));
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    say("cannot open /dev/null: " + errno_string(errno));
    exit_code_ = 1;
    return;
  }
  for (const std::string& name : opt_.netns) {
    const std::string path = "/run/netns/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      say("cannot open network namespace " + name + " (" + path + ", made by `ip netns add`): " +
          errno_string(errno));
      exit_code_ = 1;
      for (int f : netns_fds_) close(f);
      netns_fds_.clear();
      if (close(null_fd) != 0) say("cannot close /dev/null: " + errno_string(errno));
      return;
    }
    netns_fds_.push_back(fd);
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
  for (int fd : netns_fds_)
    if (close(fd) != 0) say("cannot close a network namespace: " + errno_string(errno));
  netns_fds_.clear();
}

namespace {

// Closes both ends of each pipe in `fds` that is still open.
void close_pipes(int (&fds)[2][2]) {
  for (auto& pipe_fds : fds) {
    for (int fd : pipe_fds) {
      if (fd >= 0 && close(fd) != 0) say("cannot close a pipe: " + errno_string(errno));
    }
  }
}

}  // namespace

// Returns "" on success, else why rank `rank` could not be started. The rank's stdout and
// stderr are pipes that symrun reads, or with --output its own files (fds[i][1] each).
std::string Launcher::spawn(int rank, const std::string& uid,
                            const std::vector<std::string>& inherited, int null_fd) {
  int fds[2][2] = {{-1, -1}, {-1, -1}};
  const bool to_files = !opt_.output_dir.empty();
  if (to_files) {
    int files[2];
    std::string error = open_rank_files(opt_.output_dir, rank, files);
    if (!error.empty()) return error;
    fds[0][1] = files[0];
    fds[1][1] = files[1];
  }
  for (auto& pipe_fds : fds) {
    if (to_files) break;
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
      netns_fds_.empty() ? -1 : netns_fds_[static_cast<size_t>(rank / opt_.ranks_per_node)],
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
  if (!to_files) open_streams_ += 2;
  return "";
}

}  // namespace symrun
