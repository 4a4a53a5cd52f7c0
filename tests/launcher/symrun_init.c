/* A rank for symrun_test.sh: joins a communicator from symrun's environment in the host
 * memory space, INIT_TIMES times in a row (default 1: init, finalize, init again, ...), after
 * sleeping INIT_SLEEP seconds (default 0). Prints "joined RANK of NRANKS" each time; exits 10
 * with the library's message if a join fails, 11 if a finalize does. */
#include <stdio.h>
#include <stdlib.h>
#include <symcomm/symcomm.h>
#include <unistd.h>

int main(void) {
  const char* pause = getenv("INIT_SLEEP");
  const char* times_text = getenv("INIT_TIMES");
  int times = times_text != NULL ? atoi(times_text) : 1;
  if (pause != NULL) usleep((useconds_t)(atof(pause) * 1e6));
  for (int i = 0; i < times; ++i) {
    symcommConfig_t config;
    symcommConfigInit(&config);
    config.space = symcommSpaceHost;
    symcommComm_t comm = NULL;
    if (symcommInitFromEnv(&comm, &config) != symcommSuccess) {
      fprintf(stderr, "init %d failed: %s\n", i, symcommGetLastError());
      return 10;
    }
    int rank = -1, nranks = -1;
    symcommCommRank(comm, &rank);
    symcommCommSize(comm, &nranks);
    printf("joined %d of %d\n", rank, nranks);
    fflush(stdout);
    if (symcommFinalize(comm) != symcommSuccess) {
      fprintf(stderr, "finalize %d failed: %s\n", i, symcommGetLastError());
      return 11;
    }
  }
  return 0;
}
