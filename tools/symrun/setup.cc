// symrun: what it settles before the ranks start. The peer timeout, read through
// libsymcomm's parameter registry as the ranks will read it; MASTER_ADDR and MASTER_PORT for
// programs that also use torch.distributed; and --output's directory and each rank's files.
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <symcomm/symcomm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "symrun.h"

namespace symrun {
namespace {

bool caller_set(const char* name) {
  const char* value = getenv(name);
  return value != nullptr && value[0] != '\0';
}

// A TCP port that nothing listens on now (the kernel's pick for port 0), as torchrun picks
// one for --standalone; "" (and errno) if none could be had.
std::string free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  std::string port;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = std::to_string(ntohs(addr.sin_port));
  }
  int err = errno;
  close(fd);
  errno = err;
  return port;
}

}  // namespace

std::string read_peer_timeout(Options* opt) {
  for (int i = 0; i < symcommGetParamCount(); ++i) {
    symcommParamInfo_t p;
    if (symcommGetParam(i, &p) != symcommSuccess || strcmp(p.name, "SYMCOMM_PEER_TIMEOUT") != 0) {
      continue;
    }
    // The registry's value in force (malformed ones come back marked, and fail here).
    char* end = nullptr;
    double seconds = strtod(p.value, &end);
    if (end == p.value || *end != '\0' || !std::isfinite(seconds) || seconds < 0) {
      return std::string("SYMCOMM_PEER_TIMEOUT is not a non-negative number of seconds: ") +
             p.value;
    }
    opt->peer_timeout_s = seconds;
    opt->peer_timeout_text = p.value;
    return "";
  }
  return "";  // not registered: the default stays
}

std::string choose_master(Options* opt) {
  if (!caller_set("MASTER_ADDR")) opt->master_addr = "127.0.0.1";
  if (!caller_set("MASTER_PORT")) {
    opt->master_port = free_port();
    if (opt->master_port.empty()) {
      return "cannot find a free port for MASTER_PORT: " + errno_string(errno);
    }
  }
  return "";
}

std::string make_output_dir(const std::string& dir) {
  // Every component in turn, as mkdir -p.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      return "cannot create " + part + ": " + errno_string(errno);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return "cannot use " + dir + ": " + errno_string(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  return "";
}

std::string open_rank_files(const std::string& dir, int rank, int (&fds)[2]) {
  const char* suffixes[2] = {".out", ".err"};
  for (int i = 0; i < 2; ++i) {
    std::string path = dir + "/rank." + std::to_string(rank) + suffixes[i];
    fds[i] = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fds[i] < 0) {
      std::string error = "cannot open " + path + ": " + errno_string(errno);
      if (i == 1) close(fds[0]);
      fds[0] = fds[1] = -1;
      return error;
    }
  }
  return "";
}

}  // namespace symrun
