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
};

// Throws symcommInvalidArgument naming the variables it looked for when none is set or a
// value is malformed.
LaunchEnv read_launch_env();

}  // namespace symcomm
