#ifdef SYMCOMM_HAVE_NCCL

#include "nccl/nccl_comms.h"

#include <cuda_runtime.h>

#include <cstring>

#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "base/thread_guard.h"

namespace symcomm {

std::string nccl_team_problem(const Topology& topology, const Team& team) {
  for (int i = 0; i < team.size; ++i) {
    const int r = team.world_of(i);
    for (int k = 0; k < i; ++k)
      if (topology.gpu_owner[static_cast<size_t>(team.world_of(k))] ==
          topology.gpu_owner[static_cast<size_t>(r)])
        return format("ranks %d and %d share a GPU, which NCCL refuses", team.world_of(k), r);
  }
  return "";
}

namespace {

// The high bits of the bootstrap tags of NCCL ids ("NC").
constexpr uint64_t kNcclIdTag = uint64_t{0x4e43} << 48;

// Ends (destroys, or aborts) one communicator, logging what fails: clean-up never throws.
void end_comm(const NcclLib& lib, ncclComm_t comm, bool abort, int device) {
  try {
    DeviceScope scope(device);
    ncclResult_t r = abort ? lib.ncclCommAbort(comm) : lib.ncclCommDestroy(comm);
    if (r != ncclSuccess)
      SYMCOMM_WARN("%s failed: %s", abort ? "ncclCommAbort" : "ncclCommDestroy",
                   lib.ncclGetErrorString(r));
  } catch (const Error& e) {
    SYMCOMM_WARN("ending an NCCL communicator: %s", e.what());
  }
}

}  // namespace

NcclComms::NcclComms(const Topology& topology, Bootstrap& bootstrap, symcommMemorySpace_t space)
    : topology_(topology), bootstrap_(bootstrap), space_(space) {}

NcclComms::~NcclComms() {
  {
    std::lock_guard<std::mutex> lock(aborter_mutex_);
    if (aborter_.joinable()) aborter_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (comms_.empty()) return;
  const NcclLib* lib = NcclLib::get();  // loaded: it made them
  // Key order, the same on every rank: destroying may wait for the other members.
  for (auto& [k, comm] : comms_) end_comm(*lib, comm, aborted_.load(), topology_.device);
  comms_.clear();
}

void NcclComms::abort() {
  if (aborted_.exchange(true)) return;
  // ncclCommAbort may wait for a call in progress (the lock) and takes a while: not on the
  // monitor thread, which has peers to tell.
  std::lock_guard<std::mutex> lock(aborter_mutex_);
  aborter_ = std::thread([this] {
    LogRankScope scope(topology_.rank);
    run_guarded([this] { abort_all(); }, [this](symcommResult_t code, const std::string& why) {
      bootstrap_.fail(code, format("the NCCL aborter of rank %d failed: %s", topology_.rank,
                                   why.c_str()));
    });
  });
}

void NcclComms::abort_all() {
  thread_fault_point("nccl aborter");
  std::lock_guard<std::mutex> lock(mutex_);
  if (comms_.empty()) return;
  const NcclLib* lib = NcclLib::get();
  for (auto& [k, comm] : comms_) end_comm(*lib, comm, true, topology_.device);
  comms_.clear();
  SYMCOMM_INFO("a peer was lost: NCCL communicators aborted");
}

bool NcclComms::has(const Team& team) {
  std::lock_guard<std::mutex> lock(mutex_);
  return comms_.count(key(team)) != 0;
}

void NcclComms::prepare(symcommTeam_t id, const Team& team, symcommStream_t stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SYMCOMM_REQUIRE(!aborted_.load(), symcommPeerLost,
                    "the communicator lost a peer: its NCCL communicators were aborted");
    if (comms_.count(key(team))) return;
  }
  // Not under the lock: making one waits for every member, and abort must not wait for it.
  ncclComm_t comm = make(id, team, stream);
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.load()) {
    end_comm(nccl_lib(), comm, true, topology_.device);
    SYMCOMM_THROW(symcommPeerLost, "the communicator lost a peer while an NCCL communicator "
                  "was being made for team %d", id);
  }
  comms_.emplace(key(team), comm);
}

void NcclComms::run(symcommTeam_t id, const Team& team, symcommStream_t stream,
                    const Enqueue& enqueue) {
  const NcclLib& lib = nccl_lib();
  prepare(id, team, stream);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = comms_.find(key(team));
  SYMCOMM_REQUIRE(!aborted_.load() && it != comms_.end(), symcommPeerLost,
                  "the communicator lost a peer: its NCCL communicators were aborted");
  DeviceScope scope(topology_.device);
  enqueue(lib, it->second);
}

ncclComm_t NcclComms::make(symcommTeam_t id, const Team& team, symcommStream_t stream) {
  const NcclLib& lib = nccl_lib();
  SYMCOMM_REQUIRE(space_ == symcommSpaceCuda, symcommNotSupported,
                  "NCCL runs in the cuda memory space only");
  const int me = team.index_of(topology_.rank);
  SYMCOMM_REQUIRE(me >= 0, symcommInternalError, "rank %d is not a member of team %d",
                  topology_.rank, id);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SYMCOMM_CUDART(cudaStreamIsCapturing(stream, &capture));
  SYMCOMM_REQUIRE(capture == cudaStreamCaptureStatusNone, symcommInvalidUsage,
                  "the first NCCL operation over team %d makes its NCCL communicator, which "
                  "synchronises the stream: it cannot be captured in a CUDA graph (run one "
                  "outside the capture first)", id);
  // Team rank 0 makes the id and sends it to every member over the bootstrap network (which
  // reaches every rank, on this node or another). One that cannot make an id sends zeros
  // (never a valid id) rather than leaving the others waiting: every member then fails.
  // The tag names the membership, whose communicator is made once.
  const uint64_t tag = kNcclIdTag ^ (static_cast<uint64_t>(team.start) << 40) ^
                       (static_cast<uint64_t>(team.stride) << 20) ^
                       static_cast<uint64_t>(team.size);
  ncclUniqueId uid{};
  if (me == 0) {
    std::string failure;
    symcommResult_t code = symcommSuccess;
    try {
      DeviceScope scope(topology_.device);
      SYMCOMM_NCCL(lib, ncclGetUniqueId(&uid));
    } catch (const Error& e) {
      uid = ncclUniqueId{};
      code = e.code();
      failure = e.what();
    }
    const std::string payload(reinterpret_cast<const char*>(&uid), sizeof uid);
    for (int j = 1; j < team.size; ++j) bootstrap_.send_to(team.world_of(j), tag, payload);
    if (code != symcommSuccess) throw Error(code, failure);
  } else {
    const std::string payload = bootstrap_.recv_from(team.world_of(0), tag);
    SYMCOMM_REQUIRE(payload.size() == sizeof uid, symcommInternalError,
                    "the NCCL id of team %d arrived with %zu bytes", id, payload.size());
    std::memcpy(&uid, payload.data(), sizeof uid);
  }
  static const ncclUniqueId kNone{};
  SYMCOMM_REQUIRE(std::memcmp(&uid, &kNone, sizeof uid) != 0, symcommRemoteError,
                  "team rank 0 (rank %d) of team %d could not make an NCCL unique id",
                  team.world_of(0), id);
  DeviceScope scope(topology_.device);
  ncclComm_t comm = nullptr;
  SYMCOMM_NCCL(lib, ncclCommInitRank(&comm, team.size, uid, me));
  SYMCOMM_INFO("NCCL %s communicator of team %d (ranks %d + %d * i, %d of them) made",
               nccl_version_string(lib.version).c_str(), id, team.start, team.stride, team.size);
  return comm;
}

}  // namespace symcomm

#endif  // SYMCOMM_HAVE_NCCL
