// symcomm-info --comm: joins a communicator from the launcher's environment, gathers every
// rank's place in it and the transport that reaches each of its peers to rank 0, and asks, on
// rank 0, which collective algorithms can run in it.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "info.h"
#include "symcomm/symcomm.h"

namespace symcomm_info {
namespace {

// The value in force of a parameter, read through the library's registry.
std::string param_value(const char* name) {
  for (int i = 0; i < symcommGetParamCount(); ++i) {
    symcommParamInfo_t p;
    if (symcommGetParam(i, &p) == symcommSuccess && std::strcmp(p.name, name) == 0) return p.value;
  }
  return "";
}

// The name by which the communicator grouped this rank into a node: SYMCOMM_NODE_NAME where
// set, else the host name.
std::string node_name() {
  std::string name = param_value("SYMCOMM_NODE_NAME");
  if (!name.empty()) return name;
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return host;
}

// One rank's place, as it travels to rank 0 (followed by its reach, a character per rank,
// and the name of the transport to each rank, kTransportBytes each).
struct Record {
  int32_t rank, node, local_rank, local_size, device;
  char space[8];
  char node_name[256];
};
constexpr size_t kTransportBytes = 8;  // "lsa", "net", "none"

// Whether `algorithm` can run `op` over the world (symmetric buffers, 1024 floats): the
// library's own answer (symcommCollAlgorithmCanRun: an error that says why when it cannot).
OpSupport ask(symcommComm_t comm, const std::string& algorithm, int op) {
  OpSupport s;
  s.op = kOps[op];
  s.runs = symcommCollAlgorithmCanRun(comm, SYMCOMM_TEAM_WORLD, static_cast<symcommCollOp_t>(op),
                                      1024, symcommFloat32, 1, algorithm.c_str()) == symcommSuccess;
  if (s.runs) return s;
  s.why_not = symcommGetLastError();
  // The reason alone: after "... cannot run OP here: ", without the " [file:line]" that
  // the library's messages end with.
  const std::string here = "cannot run " + s.op + " here: ";
  const size_t at = s.why_not.find(here);
  if (at != std::string::npos) s.why_not = s.why_not.substr(at + here.size());
  const size_t where = s.why_not.rfind(" [");
  if (where != std::string::npos && s.why_not.back() == ']' &&
      s.why_not.find(':', where) != std::string::npos)
    s.why_not.resize(where);
  return s;
}

void ask_all(symcommComm_t comm, Info* info) {
  for (Algorithm& a : info->algorithms)
    for (int op = 0; op < static_cast<int>(std::size(kOps)); ++op) a.ops.push_back(ask(comm, a.name, op));
  for (SelectionRow& row : info->selection) {
    for (const Algorithm& a : info->algorithms) {
      if (a.name != row.algorithm) continue;
      for (const OpSupport& s : a.ops) {
        if (s.op != row.op) continue;
        row.known = true;
        row.runs = s.runs;
        row.why_not = s.why_not;
      }
    }
  }
}

// The lanes of every member to every peer that "net" carries, gathered on rank 0. In the host
// space (where transfers stripe over the lanes) each member first puts kProbeBytes to each
// such peer, so that the lanes have measured rates.
constexpr size_t kProbeBytes = size_t{8} << 20;
constexpr int kLanesMax = 16;

std::string collect_lanes(symcommComm_t comm, int rank, int size, symcommMemorySpace_t space,
                          Info* info) {
  const size_t n = static_cast<size_t>(size);
  std::vector<int> net(n, 0);
  int any = 0;
  for (int pe = 0; pe < size; ++pe) {
    const char* t = "";
    if (symcommPeerTransport(comm, pe, &t) != symcommSuccess) return symcommGetLastError();
    net[static_cast<size_t>(pe)] = std::strcmp(t, "net") == 0;
    any |= net[static_cast<size_t>(pe)];
  }
  std::vector<int> anywhere(n);
  if (symcommHostAllgather(comm, &any, anywhere.data(), sizeof any) != symcommSuccess)
    return symcommGetLastError();
  if (std::count(anywhere.begin(), anywhere.end(), 0) == size) return "";  // one node
  if (space == symcommSpaceHost) {
    void* probe = nullptr;
    if (symcommMalloc(comm, kProbeBytes, &probe) != symcommSuccess) return symcommGetLastError();
    std::vector<char> from(kProbeBytes, 1);
    for (int pe = 0; pe < size; ++pe)
      if (net[static_cast<size_t>(pe)] &&
          symcommPutOnStream(comm, probe, from.data(), kProbeBytes, pe, symcommEngineAuto,
                             nullptr) != symcommSuccess)
        return symcommGetLastError();
    if (symcommHostBarrier(comm) != symcommSuccess || symcommFree(comm, probe) != symcommSuccess)
      return symcommGetLastError();
  }
  // Per peer: the number of lanes, then up to kLanesMax of them.
  struct PeerLanes {
    int count;
    symcommNetLane_t lanes[kLanesMax];
  };
  std::vector<PeerLanes> mine(n), all(n * n);
  for (int pe = 0; pe < size; ++pe) {
    PeerLanes& p = mine[static_cast<size_t>(pe)];
    p.count = 0;
    if (net[static_cast<size_t>(pe)] &&
        symcommPeerNetLanes(comm, pe, p.lanes, kLanesMax, &p.count) != symcommSuccess)
      return symcommGetLastError();
  }
  if (symcommHostAllgather(comm, mine.data(), all.data(), n * sizeof(PeerLanes)) !=
      symcommSuccess)
    return symcommGetLastError();
  if (rank != 0) return "";
  for (int from = 0; from < size; ++from)
    for (int to = 0; to < size; ++to) {
      const PeerLanes& p = all[static_cast<size_t>(from) * n + static_cast<size_t>(to)];
      if (p.count == 0) continue;
      LaneSet set{from, to, {}};
      set.lanes.assign(p.lanes, p.lanes + std::min(p.count, kLanesMax));
      info->comm.lanes.push_back(std::move(set));
    }
  return "";
}

}  // namespace

std::string collect_comm(Info* info, int* rank) {
  symcommComm_t comm;
  if (symcommInitFromEnv(&comm, nullptr) != symcommSuccess) return symcommGetLastError();
  int size = 0, local = 0, local_size = 0, node = 0, nnodes = 0, device = -1;
  symcommMemorySpace_t space;
  symcommCommRank(comm, rank);
  symcommCommSize(comm, &size);
  symcommCommLocalRank(comm, &local);
  symcommCommLocalSize(comm, &local_size);
  symcommCommNode(comm, &node, &nnodes);
  symcommCommDevice(comm, &device);
  symcommCommMemorySpace(comm, &space);
  const size_t n = static_cast<size_t>(size);
  const size_t bytes = sizeof(Record) + n + n * kTransportBytes;
  std::vector<char> mine(bytes, 0), all(bytes * n);
  Record r{*rank, node, local, local_size, device, {}, {}};
  std::snprintf(r.space, sizeof r.space, "%s", space == symcommSpaceCuda ? "cuda" : "host");
  std::snprintf(r.node_name, sizeof r.node_name, "%s", node_name().c_str());
  std::memcpy(mine.data(), &r, sizeof r);
  for (int pe = 0; pe < size; ++pe) {
    int ok = 0;
    symcommPeerAccessible(comm, pe, &ok);
    mine[sizeof r + static_cast<size_t>(pe)] = ok ? 'Y' : '.';
    const char* transport = "?";
    symcommPeerTransport(comm, pe, &transport);
    std::snprintf(mine.data() + sizeof r + n + static_cast<size_t>(pe) * kTransportBytes,
                  kTransportBytes, "%s", transport);
  }
  std::string error;
  if (symcommHostAllgather(comm, mine.data(), all.data(), bytes) != symcommSuccess)
    error = symcommGetLastError();
  if (error.empty() && *rank == 0) {
    info->comm.joined = true;
    info->comm.nranks = size;
    info->comm.nnodes = nnodes;
    info->comm.space = r.space;
    for (int pe = 0; pe < size; ++pe) {
      const char* at = all.data() + bytes * static_cast<size_t>(pe);
      Record got;
      std::memcpy(&got, at, sizeof got);
      got.node_name[sizeof got.node_name - 1] = '\0';
      got.space[sizeof got.space - 1] = '\0';
      std::vector<std::string> transports;
      for (size_t to = 0; to < n; ++to) {
        const char* name = at + sizeof got + n + to * kTransportBytes;
        transports.emplace_back(name, strnlen(name, kTransportBytes));
      }
      info->comm.members.push_back({got.rank, got.node, got.local_rank, got.local_size, got.device,
                                    got.node_name, got.space, std::string(at + sizeof got, n),
                                    transports});
    }
    ask_all(comm, info);
  }
  if (error.empty()) error = collect_lanes(comm, *rank, size, space, info);
  if (symcommFinalize(comm) != symcommSuccess && error.empty()) error = symcommGetLastError();
  return error;
}

}  // namespace symcomm_info
