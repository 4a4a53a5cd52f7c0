// Reading a launcher's environment: symrun, torchrun, Open MPI, PMI, Slurm.
#pragma once

#include <optional>
#include <string>

#include "bootstrap/unique_id.h"

namespace symcomm {

struct LaunchEnv {
  const char* launcher = "";  // "symrun", "torchrun", "Open MPI", "PMI", "Slurm"
  int rank = -1;
  int nranks = -1;
  std::optional<UniqueId> uid;  // symrun (or a user's SYMCOMM_UNIQUE_ID)
  // Without a uid: where rank 0 serves the root, and the token every rank presents.
  std::optional<NetAddr> root;
  Token token{};
  // Where the root comes from MASTER_ADDR/MASTER_PORT: it listens on the first free port of
  // kMasterRootPorts from MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET (a launcher's own sockets
  // hold ports near MASTER_PORT: torchrun --standalone's store clients took MASTER_PORT + 1
  // in 2 of 4 runs), and the others try them in turn. 1 for SYMCOMM_BOOTSTRAP_ROOT.
  int root_ports = 1;
};

constexpr int kMasterRootPorts = 8;

// Throws symcommInvalidArgument naming the variables it looked for when none is set or a
// value is malformed.
LaunchEnv read_launch_env();

}  // namespace symcomm
