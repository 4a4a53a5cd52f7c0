// symcomm-info's output: text for people, or one JSON document (--json) for scripts.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "info.h"
#include "json.h"

namespace symcomm_info {
namespace {

std::string version_text(int version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// "runs allgather, alltoall; cannot run allreduce: WHY", or "cannot run here: WHY".
std::string support_text(const Algorithm& a) {
  std::vector<std::string> runs;
  std::vector<std::pair<std::string, std::vector<std::string>>> not_runs;  // why, ops
  for (const OpSupport& s : a.ops) {
    if (s.runs) {
      runs.push_back(s.op);
      continue;
    }
    auto same = not_runs.begin();
    while (same != not_runs.end() && same->first != s.why_not) ++same;
    if (same == not_runs.end()) same = not_runs.insert(not_runs.end(), {s.why_not, {}});
    same->second.push_back(s.op);
  }
  if (runs.empty() && not_runs.size() == 1) return "cannot run here: " + not_runs[0].first;
  std::string out = runs.empty() ? "" : "runs " + join(runs);
  for (const auto& [why, ops] : not_runs)
    out += (out.empty() ? "" : "; ") + ("cannot run " + join(ops) + ": " + why);
  return out;
}

// "puts between team barriers; allgather, ...; spaces cuda, host; ..." from the descriptor.
std::string declared_text(const Declared& d) {
  const std::string ops = d.ops.size() == kOpCount ? "every operation" : join(d.ops);
  std::string out = d.summary + "; " + ops +
                    "; in the " + join(d.spaces) + " space" + (d.spaces.size() > 1 ? "s" : "");
  if (!d.device_counts.empty()) out += "; counts on the device in " + join(d.device_counts);
  if (d.max_team > 0) out += "; teams of at most " + std::to_string(d.max_team);
  if (d.in_place_recv) out += "; symmetric or registered receive buffers";
  if (d.across_nodes) out += "; teams across nodes, as many members on each";
  if (!d.uncapturable.empty()) out += "; no " + join(d.uncapturable) + " in a CUDA graph capture";
  if (d.counters) out += "; counters with its peers";
  if (!d.library.empty()) out += "; needs " + d.library;
  return out;
}

void print_devices(const Devices& d) {
  std::printf("\nCUDA driver and devices\n");
  if (!d.unavailable.empty()) {
    std::printf("  %s: communicators use the host memory space\n", d.unavailable.c_str());
    return;
  }
  std::printf("  driver CUDA %d.%d, %zu device(s)\n", d.driver_version / 1000,
              d.driver_version % 1000 / 10, d.list.size());
  for (const Device& v : d.list)
    std::printf("  %d: %s, sm_%d%d, %d SMs, %.1f GiB, VMM %d, fd handles %d, fabric handles %d, "
                "%d copy engines\n", v.index, v.name.c_str(), v.major, v.minor, v.sms, v.gib,
                v.vmm, v.fd_handles, v.fabric_handles, v.copy_engines);
  const size_t n = d.list.size();
  if (n < 2) return;
  std::printf("  peer access (row can access column):\n      ");
  for (size_t j = 0; j < n; ++j) std::printf("%3zu", j);
  std::printf("\n");
  for (size_t i = 0; i < n; ++i) {
    std::printf("  %3zu ", i);
    for (size_t j = 0; j < n; ++j) std::printf("%3s", i == j ? "-" : d.peer_access[i][j] ? "Y" : "n");
    std::printf("\n");
  }
}

// The value in force of parameter `name`, as collected.
std::string param_value(const Info& info, const char* name) {
  for (const Param& p : info.params)
    if (p.name == name) return p.value;
  return "";
}

void print_net(const Info& info) {
  const Net& n = info.net;
  std::printf("\nNetwork transport (peers on other nodes)\n");
  if (!n.unavailable.empty()) {
    std::printf("  unavailable: %s\n", n.unavailable.c_str());
    return;
  }
  std::printf("  libfabric %s\n", n.version.c_str());
  std::printf("  providers and domains offering FI_EP_RDM with FI_MSG and FI_RMA, preferred "
              "first%s\n", n.choices.empty() ? ": none" : "");
  if (n.not_selected.empty())
    std::printf("  *: the one a communicator opens, the first that SYMCOMM_NET_PROVIDER='%s' and "
                "SYMCOMM_NET_DOMAIN='%s' accept\n",
                param_value(info, "SYMCOMM_NET_PROVIDER").c_str(),
                param_value(info, "SYMCOMM_NET_DOMAIN").c_str());
  size_t provider = 0, domain = 0;
  for (const NetChoice& c : n.choices) {
    provider = std::max(provider, c.provider.size());
    domain = std::max(domain, c.domain.size());
  }
  for (const NetChoice& c : n.choices)
    std::printf("  %s provider %-*s  domain %-*s  fabric %s\n", c.selected ? "*" : " ",
                static_cast<int>(provider), c.provider.c_str(), static_cast<int>(domain),
                c.domain.c_str(), c.fabric.c_str());
  if (!n.not_selected.empty()) std::printf("  none selected: %s\n", n.not_selected.c_str());
  if (n.rails.empty()) return;
  std::printf("  rails (SYMCOMM_NET_RAILS='%s'; SYMCOMM_NET_DOMAIN is not used)\n",
              param_value(info, "SYMCOMM_NET_RAILS").c_str());
  for (size_t i = 0; i < n.rails.size(); ++i) {
    const NetRail& r = n.rails[i];
    if (r.why_not.empty())
      std::printf("    rail %zu  domain %s  provider %s  fabric %s\n", i, r.domain.c_str(),
                  r.provider.c_str(), r.fabric.c_str());
    else
      std::printf("    rail %zu  domain %s  none: %s\n", i, r.domain.c_str(), r.why_not.c_str());
  }
}

// "lsa to 0-3, net to 4-7": each transport and the ranks it reaches, as ranges.
std::string transports_text(const std::vector<std::string>& of) {
  std::vector<std::pair<std::string, std::string>> lists;  // transport, "0-3, 6"
  for (size_t first = 0, last = 0; first < of.size(); first = last + 1) {
    last = first;
    while (last + 1 < of.size() && of[last + 1] == of[first]) ++last;
    auto list = std::find_if(lists.begin(), lists.end(),
                             [&](const auto& l) { return l.first == of[first]; });
    if (list == lists.end()) list = lists.insert(lists.end(), {of[first], ""});
    list->second += (list->second.empty() ? "" : ", ") + std::to_string(first) +
                    (last > first ? "-" + std::to_string(last) : "");
  }
  std::string out;
  for (const auto& [transport, ranks] : lists)
    out += (out.empty() ? "" : ", ") + transport + " to " + ranks;
  return out;
}

void json_net(Json& j, const Net& n) {
  j.begin_object();
  j.key("libfabric");
  j.begin_object();
  j.member("available", n.unavailable.empty());
  if (n.unavailable.empty()) {
    j.member("version", n.version);
  } else {
    j.member("unavailable", n.unavailable);
  }
  j.end_object();
  j.key("choices");
  j.begin_array();
  for (const NetChoice& c : n.choices) {
    j.begin_object();
    j.member("provider", c.provider);
    j.member("domain", c.domain);
    j.member("fabric", c.fabric);
    j.member("selected", c.selected);
    j.end_object();
  }
  j.end_array();
  if (!n.not_selected.empty()) j.member("not_selected", n.not_selected);
  j.key("rails");
  j.begin_array();
  for (const NetRail& r : n.rails) {
    j.begin_object();
    j.member("domain", r.domain);
    if (r.why_not.empty()) {
      j.member("provider", r.provider);
      j.member("fabric", r.fabric);
    } else {
      j.member("why_not", r.why_not);
    }
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

void json_devices(Json& j, const Devices& d) {
  j.begin_object();
  j.member("available", d.unavailable.empty());
  if (!d.unavailable.empty()) j.member("unavailable", d.unavailable);
  j.member("driver_version", d.driver_version);
  j.key("devices");
  j.begin_array();
  for (const Device& v : d.list) {
    j.begin_object();
    j.member("index", v.index);
    j.member("name", v.name);
    j.member("compute_capability", std::to_string(v.major) + "." + std::to_string(v.minor));
    j.member("sms", v.sms);
    j.member("memory_gib", v.gib);
    j.member("vmm", v.vmm != 0);
    j.member("fd_handles", v.fd_handles != 0);
    j.member("fabric_handles", v.fabric_handles != 0);
    j.member("copy_engines", v.copy_engines);
    j.end_object();
  }
  j.end_array();
  j.key("peer_access");
  j.begin_array();
  for (const auto& row : d.peer_access) {
    j.begin_array();
    for (bool ok : row) j.value(ok);
    j.end_array();
  }
  j.end_array();
  j.end_object();
}

// " rail 0->1 up 1.18 GB/s" (a rate of 0: "not measured").
std::string format_lane(const symcommNetLane_t& l) {
  char buf[96];
  if (l.bytes_per_second > 0)
    std::snprintf(buf, sizeof buf, "  rail %d->%d %s %.2f GB/s", l.local_rail, l.remote_rail,
                  l.up ? "up" : "down", l.bytes_per_second / 1e9);
  else
    std::snprintf(buf, sizeof buf, "  rail %d->%d %s not measured", l.local_rail, l.remote_rail,
                  l.up ? "up" : "down");
  return buf;
}

}  // namespace

void print_text(const Info& info) {
  std::printf("symcomm %s\n\nBuild\n", version_text(info.version).c_str());
  for (const auto& [key, value] : info.build) std::printf("  %s=%s\n", key.c_str(), value.c_str());
  print_devices(info.devices);
  print_net(info);
  std::printf("\nParameters (environment variables)\n");
  for (const Param& p : info.params)
    std::printf("  %-28s %-7s = %-12s%s (default '%s'): %s\n", p.name.c_str(), p.type.c_str(),
                p.value.empty() ? "''" : p.value.c_str(), p.is_set ? " [set]" : "",
                p.default_value.c_str(), p.description.c_str());
  const bool joined = info.comm.joined;
  std::printf("\nCollective algorithms (preferred first; the selection table takes the first that "
              "can run a call)%s\n", joined ? ", and what each can run in this communicator" : "");
  for (const Algorithm& a : info.algorithms) {
    if (joined) {
      std::printf("  %-8s %s\n", a.name.c_str(), support_text(a).c_str());
    } else {
      std::printf("  %-8s %s\n", a.name.c_str(), declared_text(a.declared).c_str());
    }
  }
  std::printf("\nDecomposition backends (each runs transposes and halo exchanges, as the "
              "config's backend and halo_backend say; preferred first)\n");
  for (const std::string& b : info.backends) std::printf("  %s\n", b.c_str());
  std::printf("\nFused implementations (all-gather + GEMM, GEMM + reduce-scatter, transpose + "
              "accumulate; preferred first)\n");
  for (const std::string& f : info.fused) std::printf("  %s\n", f.c_str());
  std::printf("\nCollective selection table%s\n",
              joined ? " (yes/no: whether the row's algorithm can run in this communicator)" : "");
  for (const SelectionRow& row : info.selection) {
    if (!row.known) {
      std::printf(joined ? "       %s\n" : "  %s\n", row.text.c_str());
    } else if (row.runs) {
      std::printf("  yes  %s\n", row.text.c_str());
    } else {
      std::printf("  no   %s: cannot run here: %s\n", row.text.c_str(), row.why_not.c_str());
    }
  }
  if (!joined) return;
  std::printf("\nCommunicator: %d rank(s) on %d node(s)\n", info.comm.nranks, info.comm.nnodes);
  for (const Member& m : info.comm.members)
    std::printf("  rank %3d: node %d (%s) local %d/%d, %s space, device %d, load/store reach %s, "
                "transports %s\n", m.rank, m.node, m.node_name.c_str(), m.local_rank,
                m.local_size, m.space.c_str(), m.device, m.reach.c_str(),
                transports_text(m.transports).c_str());
  if (info.comm.lanes.empty()) return;
  std::printf("\nNet lanes (rank -> peer: this rank's rail -> the peer's rail, state, measured "
              "rate after an 8 MiB put in the host space)\n");
  for (const LaneSet& set : info.comm.lanes) {
    std::string text;
    for (const symcommNetLane_t& l : set.lanes)
      text += format_lane(l);
    std::printf("  %3d -> %-3d:%s\n", set.from, set.to, text.c_str());
  }
}

void print_json(const Info& info) {
  Json j;
  j.begin_object();
  j.member("version", version_text(info.version));
  j.key("build");
  j.begin_object();
  for (const auto& [key, value] : info.build) j.member(key, value);
  j.end_object();
  j.key("cuda");
  json_devices(j, info.devices);
  j.key("net_transport");
  json_net(j, info.net);
  j.key("parameters");
  j.begin_array();
  for (const Param& p : info.params) {
    j.begin_object();
    j.member("name", p.name);
    j.member("type", p.type);
    j.member("value", p.value);
    j.member("default", p.default_value);
    j.member("set", p.is_set);
    j.member("description", p.description);
    j.end_object();
  }
  j.end_array();
  j.key("collective_algorithms");
  j.begin_array();
  for (const Algorithm& a : info.algorithms) {
    j.begin_object();
    j.member("name", a.name);
    const Declared& d = a.declared;
    j.key("declares");
    j.begin_object();
    j.member("summary", d.summary);
    for (const auto& [key, list] :
         {std::pair<const char*, const std::vector<std::string>*>{"operations", &d.ops},
          {"spaces", &d.spaces}, {"device_counts", &d.device_counts},
          {"uncapturable_operations", &d.uncapturable}}) {
      j.key(key);
      j.begin_array();
      for (const std::string& s : *list) j.value(s);
      j.end_array();
    }
    j.member("max_team", d.max_team);
    j.member("in_place_recv", d.in_place_recv);
    j.member("load_store", d.load_store);
    j.member("counters", d.counters);
    j.member("across_nodes", d.across_nodes);
    j.member("library", d.library);
    j.end_object();
    if (info.comm.joined) {
      j.key("operations");
      j.begin_object();
      for (const OpSupport& s : a.ops) {
        j.key(s.op);
        j.begin_object();
        j.member("runs", s.runs);
        if (!s.runs) j.member("why_not", s.why_not);
        j.end_object();
      }
      j.end_object();
    }
    j.end_object();
  }
  j.end_array();
  j.key("decomposition_backends");
  j.begin_array();
  for (const std::string& b : info.backends) j.value(b);
  j.end_array();
  j.key("fused_implementations");
  j.begin_array();
  for (const std::string& f : info.fused) j.value(f);
  j.end_array();
  j.key("selection_table");
  j.begin_array();
  for (const SelectionRow& row : info.selection) {
    if (row.algorithm.empty()) continue;  // the table's closing note
    j.begin_object();
    j.member("row", row.text);
    j.member("operation", row.op);
    j.member("algorithm", row.algorithm);
    if (row.known) {
      j.member("runs", row.runs);
      if (!row.runs) j.member("why_not", row.why_not);
    }
    j.end_object();
  }
  j.end_array();
  if (info.comm.joined) {
    j.key("communicator");
    j.begin_object();
    j.member("ranks", info.comm.nranks);
    j.member("nodes", info.comm.nnodes);
    j.member("space", info.comm.space);
    j.key("members");
    j.begin_array();
    for (const Member& m : info.comm.members) {
      j.begin_object();
      j.member("rank", m.rank);
      j.member("node", m.node);
      j.member("node_name", m.node_name);
      j.member("local_rank", m.local_rank);
      j.member("local_size", m.local_size);
      j.member("space", m.space);
      j.member("device", m.device);
      j.member("reach", m.reach);
      j.key("transports");
      j.begin_array();
      for (const std::string& t : m.transports) j.value(t);
      j.end_array();
      j.end_object();
    }
    j.end_array();
    j.key("net_lanes");
    j.begin_array();
    for (const LaneSet& set : info.comm.lanes) {
      j.begin_object();
      j.member("from", set.from);
      j.member("to", set.to);
      j.key("lanes");
      j.begin_array();
      for (const symcommNetLane_t& l : set.lanes) {
        j.begin_object();
        j.member("local_rail", l.local_rail);
        j.member("remote_rail", l.remote_rail);
        j.member("up", l.up != 0);
        j.member("bytes_per_second", l.bytes_per_second);
        j.end_object();
      }
      j.end_array();
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_object();
  std::printf("%s\n", j.text().c_str());
}

}  // namespace symcomm_info
