// What symcomm-info reports, gathered first and printed after as text or as one JSON document
// (--json): collect.cc gathers what needs no communicator, comm.cc what a communicator sees,
// print.cc writes both.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "symcomm/symcomm.h"

namespace symcomm_info {

// The collective operations as symcommCollOp_t numbers them, named as the library names them.
inline constexpr const char* kOps[] = {"allgather",     "alltoall",  "alltoallv",
                                       "reducescatter", "allreduce", "broadcast",
                                       "reduce",        "gather",    "scatter"};
inline constexpr unsigned kOpCount = sizeof kOps / sizeof kOps[0];

struct Device {
  int index = 0;
  std::string name;
  int major = 0, minor = 0, sms = 0;
  double gib = 0;
  int vmm = 0, fd_handles = 0, fabric_handles = 0, copy_engines = 0;
};

struct Devices {
  std::string unavailable;  // why communicators use the host space ("": a driver answered)
  int driver_version = 0;
  std::vector<Device> list;
  std::vector<std::vector<bool>> peer_access;  // [row][column]: row can access column
};

// The network transport's libfabric (symcommGetNetInfo).
struct NetChoice {
  std::string provider, domain, fabric;
  bool selected = false;  // the one SYMCOMM_NET_PROVIDER and SYMCOMM_NET_DOMAIN select
};

// A rail that SYMCOMM_NET_RAILS names, and what opens there.
struct NetRail {
  std::string domain, provider, fabric;
  std::string why_not;  // why nothing fits there ("": something does)
};

struct Net {
  std::string unavailable;   // why libfabric does not load ("": it does)
  std::string version;       // libfabric's
  std::vector<NetChoice> choices;
  std::string not_selected;  // why none is selected ("": one is, or libfabric is unavailable)
  std::vector<NetRail> rails;  // SYMCOMM_NET_RAILS's (none where it is not set)
};

struct Param {
  std::string name, type, value, default_value, description;
  bool is_set = false;
};

// Whether an algorithm can run one operation in the communicator (as rank 0 sees it).
struct OpSupport {
  std::string op;
  bool runs = false;
  std::string why_not;
};

// What an algorithm declares (symcommGetCollAlgorithmInfo).
struct Declared {
  std::string summary, library;  // library: "" where none
  std::vector<std::string> ops, spaces, device_counts, uncapturable;
  int max_team = 0;
  bool in_place_recv = false, load_store = false, counters = false, across_nodes = false;
};

struct Algorithm {
  std::string name;
  Declared declared;
  std::vector<OpSupport> ops;  // empty without a communicator
};

struct SelectionRow {
  std::string text;       // the table's line
  std::string algorithm;  // "" when the line is no row (the table's closing note)
  std::string op;
  bool known = false;     // whether runs/why_not were asked (a communicator is joined)
  bool runs = false;
  std::string why_not;
};

struct Member {
  int rank = 0, node = 0, local_rank = 0, local_size = 0, device = -1;
  std::string node_name, space, reach;
  std::vector<std::string> transports;  // [rank]: the transport that reaches it from this member
};

// The net transport's lanes from one member to one peer (symcommPeerNetLanes).
struct LaneSet {
  int from = 0, to = 0;
  std::vector<symcommNetLane_t> lanes;
};

struct Communicator {
  bool joined = false;
  int nranks = 0, nnodes = 0;
  std::string space;
  std::vector<Member> members;
  std::vector<LaneSet> lanes;  // every member to every peer that "net" carries
};

struct Info {
  int version = 0;
  std::vector<std::pair<std::string, std::string>> build;  // key=value lines
  Devices devices;
  Net net;
  std::vector<Param> params;
  std::vector<Algorithm> algorithms;
  std::vector<std::string> backends;
  std::vector<std::string> fused;  // fused implementations, preferred first
  std::vector<SelectionRow> selection;
  Communicator comm;
};

// collect.cc
void collect_static(Info* info);
// comm.cc: joins from the launcher's environment, fills info->comm and marks what can run.
// Collective. Returns "" or the library's message.
std::string collect_comm(Info* info, int* rank);
// print.cc
void print_text(const Info& info);
void print_json(const Info& info);

}  // namespace symcomm_info
