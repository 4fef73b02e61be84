/* SPDX-License-Identifier: BSD-2-Clause */
/* startup: the cost of starting a program that allocates once (written for
 * ductile).
 *
 * Runs itself as a child N times, one after another (posix_spawn, then
 * wait); each child calls malloc once, writes the block, frees it and
 * exits. The children inherit the environment, LD_PRELOAD included, so the
 * time is what a short-lived tool (run thousands of times by a shell
 * script) pays for its allocator: loading it, its first call's start-up,
 * and its exit. Prints the mean per run and the children's largest peak
 * RSS (a program that holds almost nothing).
 *
 * Usage: startup [scale]   (default 1)
 * Work: 300 * scale runs. */
#include <spawn.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "wl.h"

extern char **environ;

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) {
    char *p = (char *)malloc(100);
    if (!p) return 1;
    memset(p, 1, 100);
    int r = p[99] == 1 ? 0 : 1;
    free(p);
    return r;
  }
  double scale = wl_scale(argc, argv);
  long runs = (long)(300 * scale);
  if (runs < 1) runs = 1;
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) abort();
  self[len] = 0;
  char *child_argv[] = {self, (char *)"--child", NULL};
  double t0 = wl_now();
  for (long i = 0; i < runs; i++) {
    pid_t pid;
    int status;
    if (posix_spawn(&pid, self, NULL, NULL, child_argv, environ) != 0) abort();
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) abort();
  }
  double secs = wl_now() - t0;
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  char extra[96];
  snprintf(extra, sizeof extra, "runs=%ld ms_per_run=%.3f child_peak_rss_mib=%.1f", runs, secs * 1e3 / (double)runs,
           (double)ru.ru_maxrss / 1024.0);
  wl_report("startup", secs, extra);
  return 0;
}
