// LD_PRELOAD=segv_backtrace.so program ...: prints a backtrace on SIGSEGV (for machines
// without gdb). Build: gcc -shared -fPIC -o segv_backtrace.so segv_backtrace.c
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

static void on_segv(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) { signal(SIGSEGV, on_segv); }
