/* A rank for symrun_test.sh: joins a communicator from symrun's environment in the host
 * memory space, INIT_TIMES times in a row (default 1: init, finalize, init again, ...), after
 * sleeping INIT_SLEEP seconds (default 0). Prints "joined RANK of NRANKS" each time; exits 10
 * with the library's message if a join fails, 11 if a finalize does. The rank INIT_KILL_RANK
 * (if set) prints how many abstract symcomm sockets /proc/net/unix lists ("abstract sockets
 * N") and kills itself with SIGKILL after its first join, without finalizing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <symcomm/symcomm.h>
#include <unistd.h>

static int abstract_sockets(void) {
  FILE* f = fopen("/proc/net/unix", "r");
  char line[512];
  int n = 0;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) n += strstr(line, " @symcomm-") != NULL;
  fclose(f);
  return n;
}

int main(void) {
  const char* pause = getenv("INIT_SLEEP");
  const char* times_text = getenv("INIT_TIMES");
  const char* kill_text = getenv("INIT_KILL_RANK");
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
    if (kill_text != NULL && atoi(kill_text) == rank) {
      printf("abstract sockets %d\n", abstract_sockets());
      fflush(stdout);
      kill(getpid(), SIGKILL);
    }
    fflush(stdout);
    if (symcommFinalize(comm) != symcommSuccess) {
      fprintf(stderr, "finalize %d failed: %s\n", i, symcommGetLastError());
      return 11;
    }
  }
  return 0;
}
