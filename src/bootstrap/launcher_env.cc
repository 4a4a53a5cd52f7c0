#include "bootstrap/launcher_env.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/param.h"

namespace symcomm {

// symrun's and the user's own variables.
static const StringParam kRank("SYMCOMM_RANK", "", "rank of this process (set by symrun)");
static const StringParam kNranks("SYMCOMM_NRANKS", "", "number of ranks (set by symrun)");
static const IntParam kLocalRank("SYMCOMM_LOCAL_RANK", "-1", "rank within the node (symrun)");
static const StringParam kUniqueId("SYMCOMM_UNIQUE_ID", "",
                                   "text form of a unique id to join (set by symrun)");
static const StringParam kRoot(
    "SYMCOMM_BOOTSTRAP_ROOT", "",
    "host:port where rank 0 serves the bootstrap root when the environment has no unique id");
static const StringParam kToken(
    "SYMCOMM_BOOTSTRAP_TOKEN", "",
    "32 hex digits every rank presents to the root (default: derived from the job's ids)");
static const IntParam kMasterPortOffset(
    "SYMCOMM_MASTER_PORT_OFFSET", "1",
    "the root listens on MASTER_PORT plus this (decimal, may be negative), leaving "
    "MASTER_PORT to torch.distributed");
// Other launchers' variables, read through the registry like our own.
static const StringParam kTorchRank("RANK", "", "torchrun: global rank");
static const StringParam kTorchWorld("WORLD_SIZE", "", "torchrun: number of ranks");
static const StringParam kTorchLocal("LOCAL_RANK", "", "torchrun: rank within the node");
static const StringParam kMasterAddr("MASTER_ADDR", "", "torchrun: rank 0's host");
static const StringParam kMasterPort("MASTER_PORT", "", "torchrun: rank 0's port");
static const StringParam kTorchRunId("TORCHELASTIC_RUN_ID", "", "torchrun: job id");
static const StringParam kOmpiRank("OMPI_COMM_WORLD_RANK", "", "Open MPI: global rank");
static const StringParam kOmpiSize("OMPI_COMM_WORLD_SIZE", "", "Open MPI: number of ranks");
static const StringParam kOmpiLocal("OMPI_COMM_WORLD_LOCAL_RANK", "", "Open MPI: rank in node");
static const StringParam kOmpiJob("OMPI_MCA_ess_base_jobid", "", "Open MPI: job id");
static const StringParam kPmixNs("PMIX_NAMESPACE", "", "PMIx: job namespace");
static const StringParam kPmiRank("PMI_RANK", "", "PMI: global rank");
static const StringParam kPmiSize("PMI_SIZE", "", "PMI: number of ranks");
static const StringParam kMpiLocal("MPI_LOCALRANKID", "", "MPICH/Hydra: rank in node");
static const StringParam kSlurmRank("SLURM_PROCID", "", "Slurm: global rank");
static const StringParam kSlurmSize("SLURM_NTASKS", "", "Slurm: number of ranks");
static const StringParam kSlurmLocal("SLURM_LOCALID", "", "Slurm: rank within the node");
static const StringParam kSlurmJob("SLURM_JOB_ID", "", "Slurm: job id");
static const StringParam kSlurmStep("SLURM_STEP_ID", "", "Slurm: step id");

namespace {

// Launchers write plain decimal numbers, and a rank that read one differently would
// disagree with the others on who is who: an optional '-' where allowed, then decimal
// digits only (the registry's parse_int also takes "+8" and surrounding spaces).
std::optional<int64_t> parse_decimal(const std::string& t, bool allow_minus) {
  size_t i = allow_minus && !t.empty() && t[0] == '-' ? 1 : 0;
  if (i == t.size() || t.size() - i > 12) return std::nullopt;  // bounded: no overflow
  int64_t v = 0;
  for (size_t k = i; k < t.size(); ++k) {
    if (t[k] < '0' || t[k] > '9') return std::nullopt;
    v = v * 10 + (t[k] - '0');
  }
  return i == 1 ? -v : v;
}

int as_int(const Param& p, int min) {
  std::string t = p.text();
  auto v = parse_decimal(t, false);
  SYMCOMM_REQUIRE(v && *v >= min && *v <= (1 << 30), symcommInvalidArgument,
                  "%s='%s' is not a decimal integer from %d to %d", p.name(), t.c_str(), min,
                  1 << 30);
  return static_cast<int>(*v);
}

// MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET, computed without overflow and checked to be a port.
int master_root_port() {
  std::string port_text = kMasterPort.text(), offset_text = kMasterPortOffset.text();
  auto port = parse_decimal(port_text, false);
  SYMCOMM_REQUIRE(port && *port >= 1 && *port <= 65535, symcommInvalidArgument,
                  "MASTER_PORT='%s' is not a decimal port number from 1 to 65535",
                  port_text.c_str());
  auto offset = parse_decimal(offset_text, true);
  SYMCOMM_REQUIRE(offset, symcommInvalidArgument,
                  "SYMCOMM_MASTER_PORT_OFFSET='%s' is not a decimal integer",
                  offset_text.c_str());
  const int64_t root_port = *port + *offset;
  SYMCOMM_REQUIRE(root_port >= 1 && root_port <= 65535, symcommInvalidArgument,
                  "MASTER_PORT (%s) + SYMCOMM_MASTER_PORT_OFFSET (%s) = %lld is not a port: "
                  "the bootstrap root listens there, which must be from 1 to 65535",
                  port_text.c_str(), offset_text.c_str(), static_cast<long long>(root_port));
  return static_cast<int>(root_port);
}

bool set(const Param& p) { return p.raw().has_value() && !p.raw()->empty(); }

// FNV-1a over the job's identifiers: not secret, but different for every job, so that a
// process of another job that reaches the root is refused.
Token derived_token() {
  std::string ids = "symcomm";
  const StringParam* job_ids[] = {&kTorchRunId, &kOmpiJob,    &kPmixNs,     &kSlurmJob,
                                  &kSlurmStep,  &kMasterAddr, &kMasterPort, &kRoot};
  for (const StringParam* p : job_ids) ids += "|" + p->text();
  Token t{};
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : ids) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  std::memcpy(t.data(), &h1, 8);
  std::memcpy(t.data() + 8, &h2, 8);
  return t;
}

}  // namespace

LaunchEnv read_launch_env() {
  // The launchers, in the order their variables are looked for: one line each.
  const struct {
    const char* name;
    const StringParam& rank;
    const StringParam& size;
  } launchers[] = {{"symrun", kRank, kNranks},
                   {"torchrun", kTorchRank, kTorchWorld},
                   {"Open MPI", kOmpiRank, kOmpiSize},
                   {"PMI", kPmiRank, kPmiSize},
                   {"Slurm", kSlurmRank, kSlurmSize}};
  LaunchEnv env;
  for (const auto& l : launchers) {
    if (!set(l.rank) && !set(l.size)) continue;
    env.launcher = l.name;
    env.rank = as_int(l.rank, 0);
    env.nranks = as_int(l.size, 1);
    break;
  }
  SYMCOMM_REQUIRE(env.rank >= 0, symcommInvalidArgument,
                  "no launcher environment found: set SYMCOMM_RANK/SYMCOMM_NRANKS (symrun), "
                  "RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/SIZE (mpirun), "
                  "PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS (srun)");
  SYMCOMM_REQUIRE(env.rank < env.nranks, symcommInvalidArgument,
                  "%s environment: rank %d is not below the number of ranks %d", env.launcher,
                  env.rank, env.nranks);
  if (set(kUniqueId)) {
    symcommUniqueId raw;
    SYMCOMM_REQUIRE(from_hex(kUniqueId.text(), raw.internal, sizeof raw.internal),
                    symcommInvalidArgument,
                    "SYMCOMM_UNIQUE_ID is not the %d-digit hex text of a unique id",
                    2 * SYMCOMM_UNIQUE_ID_BYTES);
    env.uid = UniqueId::decode(raw);
    return env;
  }
  if (set(kRoot)) {
    env.root = NetAddr::parse(kRoot.text());
  } else if (set(kMasterAddr) && set(kMasterPort)) {
    env.root = NetAddr::parse(kMasterAddr.text(), master_root_port());
    env.root_ports = std::min(kMasterRootPorts, 65536 - static_cast<int>(env.root->port));
  } else {
    SYMCOMM_THROW(symcommInvalidArgument,
                  "%s environment gives rank %d of %d but no way to meet: set "
                  "SYMCOMM_BOOTSTRAP_ROOT=host:port, or MASTER_ADDR and MASTER_PORT (rank 0's "
                  "host; the root listens on MASTER_PORT+SYMCOMM_MASTER_PORT_OFFSET)",
                  env.launcher, env.rank, env.nranks);
  }
  if (set(kToken)) {
    SYMCOMM_REQUIRE(from_hex(kToken.text(), env.token.data(), env.token.size()),
                    symcommInvalidArgument, "SYMCOMM_BOOTSTRAP_TOKEN is not 32 hex digits");
  } else {
    env.token = derived_token();
  }
  return env;
}

}  // namespace symcomm
