// symcomm-info: what this symcomm is and what it sees. Version and build options, the CUDA
// driver and devices, the peer-access matrix, the network transport's libfabric (its version,
// the providers and domains that fit, the one the parameters select), every environment
// parameter with its value and description, the collective algorithms, decomposition backends
// and selection table. With --comm (under a launcher: symrun -n N symcomm-info --comm) it also
// joins a communicator, prints the node map and each member's transport to each rank, and
// says which algorithms and table rows can run in it. --json prints the same as one JSON
// document (rank 0 alone prints).
#include <cstdio>
#include <cstring>

#include "info.h"

namespace {

constexpr char kUsage[] =
    "usage: symcomm-info [--comm] [--json]\n"
    "  --comm  also join a communicator from the launcher's environment (symrun -n N\n"
    "          symcomm-info --comm): the node map, the transport between each pair of\n"
    "          ranks, and which collective algorithms and selection rows can run in its\n"
    "          memory space (and why not)\n"
    "  --json  print one JSON document instead of text (with --comm: rank 0 prints it)\n";

}  // namespace

int main(int argc, char** argv) {
  bool comm = false, json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--comm") == 0) {
      comm = true;
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      const bool help = std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0;
      std::fputs(kUsage, help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  symcomm_info::Info info;
  symcomm_info::collect_static(&info);
  int rank = 0;
  if (comm) {
    const std::string error = symcomm_info::collect_comm(&info, &rank);
    if (!error.empty()) {
      std::fprintf(stderr, "symcomm-info: %s\n", error.c_str());
      return 1;
    }
  }
  if (rank != 0) return 0;
  if (json) {
    symcomm_info::print_json(info);
  } else {
    symcomm_info::print_text(info);
  }
  return 0;
}
