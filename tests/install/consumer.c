/* Links against an installed libsymcomm and runs a one-rank communicator in the host space. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <symcomm/symcomm.h>

int main(void) {
  int version = 0;
  symcommComm_t comm;
  symcommUniqueId uid;
  symcommConfig_t cfg = SYMCOMM_CONFIG_INITIALIZER;
  void* p = NULL;
  cfg.space = symcommSpaceHost;
  if (symcommGetVersion(&version) != symcommSuccess || version != SYMCOMM_VERSION_CODE) return 1;
  if (symcommGetUniqueId(&uid) != symcommSuccess || symcommInit(&comm, 1, 0, &uid, &cfg) ||
      symcommMalloc(comm, 4096, &p) || symcommPtr(comm, p, 0) != p || symcommFree(comm, p) ||
      symcommFinalize(comm)) {
    fprintf(stderr, "consumer: %s\n", symcommGetLastError());
    return 1;
  }
  printf("consumer: symcomm %d works\n", version);
  return 0;
}
