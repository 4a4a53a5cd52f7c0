/* A helper of symrun_test.sh for what bash cannot do.
 *
 *   symrun_helper run PREFIX PROGRAM [ARGS...]
 *     Runs PROGRAM as a child with SIGINT and SIGQUIT at their default action (a shell
 *     starts background commands with both ignored), writes its pid to PREFIX.pid, waits for
 *     it and writes how it ended ("exited N" or "signaled S") and the CPU time it used
 *     ("cpu_ms M") to PREFIX.status; exits 0. (A shell reports both an exit code of 128+S
 *     and a death by signal S as 128+S.)
 *   symrun_helper block SIGNUM[,SIGNUM...] PROGRAM [ARGS...]
 *     Executes PROGRAM with those signals blocked (as some callers leave them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int usage(void) {
  fprintf(stderr, "usage: symrun_helper run PREFIX PROGRAM [ARGS...]\n"
                  "       symrun_helper block SIGNUM[,SIGNUM...] PROGRAM [ARGS...]\n");
  return 2;
}

/* Writes `text` to PATH through a temporary file, so that a reader never sees it in part. */
static int write_file(const char* prefix, const char* suffix, const char* text) {
  char path[4096], tmp[4100];
  snprintf(path, sizeof path, "%s.%s", prefix, suffix);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    perror("symrun_helper: writing a file");
    return -1;
  }
  return 0;
}

static int run(const char* prefix, char** argv) {
  pid_t pid = fork();
  if (pid < 0) {
    perror("symrun_helper: fork");
    return 1;
  }
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    execvp(argv[0], argv);
    fprintf(stderr, "symrun_helper: cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  char text[256];
  snprintf(text, sizeof text, "%d\n", (int)pid);
  if (write_file(prefix, "pid", text) != 0) kill(pid, SIGKILL);
  int status = 0;
  struct rusage usage;
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      perror("symrun_helper: wait4");
      return 1;
    }
  }
  long cpu_ms = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000L +
                (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000L;
  if (WIFEXITED(status)) snprintf(text, sizeof text, "exited %d\ncpu_ms %ld\n", WEXITSTATUS(status), cpu_ms);
  else if (WIFSIGNALED(status)) snprintf(text, sizeof text, "signaled %d\ncpu_ms %ld\n", WTERMSIG(status), cpu_ms);
  else snprintf(text, sizeof text, "status %d\ncpu_ms %ld\n", status, cpu_ms);
  return write_file(prefix, "status", text) == 0 ? 0 : 1;
}

static int block(char* list, char** argv) {
  sigset_t set;
  sigemptyset(&set);
  for (char* s = strtok(list, ","); s != NULL; s = strtok(NULL, ",")) {
    int sig = atoi(s);
    if (sig <= 0 || sigaddset(&set, sig) != 0) return usage();
  }
  if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
    perror("symrun_helper: sigprocmask");
    return 1;
  }
  execvp(argv[0], argv);
  fprintf(stderr, "symrun_helper: cannot execute %s: %s\n", argv[0], strerror(errno));
  return 127;
}

int main(int argc, char** argv) {
  if (argc >= 4 && strcmp(argv[1], "run") == 0) return run(argv[2], argv + 3);
  if (argc >= 4 && strcmp(argv[1], "block") == 0) return block(argv[2], argv + 3);
  return usage();
}
