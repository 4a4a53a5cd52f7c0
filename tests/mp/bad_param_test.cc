// A rank under symrun that sets a parameter to a value in its own environment, before it
// joins (symrun itself checks the parameters it reads, and would stop first):
//
//   mp_bad_param NAME VALUE refused TEXT   symcommInitFromEnv must fail with
//                                          symcommInvalidArgument and a message containing
//                                          TEXT (which names the parameter and value)
//   mp_bad_param NAME VALUE joins          it must succeed: a host barrier, then finalize
//
// Exits 0 if so, 1 otherwise; the rank's verdict goes to stderr. symrun's exit code then says
// whether every rank passed: a rank killed by a signal (SIGABRT, as when a parameter's bad
// value is thrown on a thread of the library) fails it.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "symcomm/symcomm.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 3 ? argv[3] : "";
  if (!((mode == "refused" && argc == 5) || (mode == "joins" && argc == 4))) {
    std::fprintf(stderr, "usage: mp_bad_param NAME VALUE refused TEXT | NAME VALUE joins\n");
    return 2;
  }
  setenv(argv[1], argv[2], 1);
  const char* rank = std::getenv("SYMCOMM_RANK");
  symcommConfig_t config;
  symcommConfigInit(&config);
  config.space = symcommSpaceHost;
  symcommComm_t comm = nullptr;
  const symcommResult_t rc = symcommInitFromEnv(&comm, &config);
  const std::string message = rc == symcommSuccess ? "" : symcommGetLastError();
  if (mode == "joins") {
    if (rc != symcommSuccess) {
      std::fprintf(stderr, "FAIL rank %s: init failed: %s\n", rank, message.c_str());
      return 1;
    }
    const bool ok = symcommHostBarrier(comm) == symcommSuccess;
    if (!ok) std::fprintf(stderr, "FAIL rank %s: barrier: %s\n", rank, symcommGetLastError());
    if (symcommFinalize(comm) != symcommSuccess) {
      std::fprintf(stderr, "FAIL rank %s: finalize: %s\n", rank, symcommGetLastError());
      return 1;
    }
    std::fprintf(stderr, "ok rank %s joined\n", rank);
    return ok ? 0 : 1;
  }
  if (rc == symcommSuccess) {
    std::fprintf(stderr, "FAIL rank %s: init succeeded\n", rank);
    symcommFinalize(comm);
    return 1;
  }
  if (rc != symcommInvalidArgument || message.find(argv[4]) == std::string::npos) {
    std::fprintf(stderr, "FAIL rank %s: init failed with %s: %s (expected %s, saying %s)\n", rank,
                 symcommGetErrorString(rc), message.c_str(),
                 symcommGetErrorString(symcommInvalidArgument), argv[4]);
    return 1;
  }
  std::fprintf(stderr, "ok rank %s refused: %s\n", rank, message.c_str());
  return 0;
}
