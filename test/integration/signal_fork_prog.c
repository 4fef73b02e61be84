/* SPDX-License-Identifier: BSD-2-Clause */
/* fork() from a signal handler that interrupted malloc, free or fork itself
 * in the same thread: the fork handlers must not wait for a lock (or for
 * work in flight) that the interrupted code holds, and the child must still
 * be able to allocate. A timer signals 3 ms after each handler while the
 * main loop allocates and frees; the handler forks a child that allocates
 * and exits, and waits for it.
 *
 * Two drivers, each a process of its own (this program run again):
 *   malloc  the main loop allocates and frees, as configured by default (the
 *           background thread runs: the process has two threads);
 *   fork    the main loop also forks, with ductile's helper threads off. A
 *           signal that interrupts fork() in a process of more than one
 *           thread finds the C library's own lock around the fork handlers
 *           held (glibc takes it only then), and a fork from the handler
 *           waits for it forever, whatever the allocator: only a
 *           single-threaded program can fork from a handler that
 *           interrupted fork.
 * This program waits for each driver with a deadline: a deadlock ends in a
 * report, not a hang. Exits 0 when every check holds. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

#include "prog_check.h"

/* Each driver runs for kSeconds (a deadlock came within the first second
 * before the fork handlers knew of it), then stops. */
enum { kSeconds = 6, kDeadlineSeconds = 60 };

static volatile sig_atomic_t handler_forks = 0;
static volatile sig_atomic_t handler_failures = 0;

/* What a child does: allocate from every range, write, free. */
static int child_allocates(void) {
  static const size_t kSizes[] = {24, 500, 20000, 300000, 3 << 20};
  for (size_t i = 0; i < sizeof kSizes / sizeof kSizes[0]; i++) {
    unsigned char* p = malloc(kSizes[i]);
    if (p == NULL) return 10 + (int)i;  /* the exit status says which */
    memset(p, 0x5a, kSizes[i]);
    if (p[kSizes[i] - 1] != 0x5a) return 20 + (int)i;
    free(p);
  }
  return 0;
}

static volatile int last_bad_status = 0;

static int wait_for(pid_t pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 0;
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) last_bad_status = status;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void on_timer(int sig) {
  (void)sig;
  const int saved = errno;
  pid_t pid = fork();
  if (pid == 0) _exit(child_allocates());
  if (pid < 0 || !wait_for(pid)) handler_failures++;
  handler_forks++;
  /* The next signal 3 ms from now, so that the main loop runs between
   * handlers however long a fork takes. */
  struct itimerval next = {{0, 0}, {0, 3000}};
  setitimer(ITIMER_REAL, &next, NULL);
  errno = saved;
}

static int drive(int forks) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_timer;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
  struct itimerval it = {{0, 0}, {0, 3000}};
  CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
  void* keep[64] = {0};
  uint64_t x = 0x9e3779b97f4a7c15u;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int round = 0;; round++) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= kSeconds) break;
    for (int i = 0; i < 200; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t slot = x % 64;
      const size_t size = (x >> 8) % 5 == 0 ? 16384 + (x >> 16) % (1 << 20) : 8 + (x >> 16) % 2000;
      free(keep[slot]);
      keep[slot] = malloc(size);
      CHECK(keep[slot] != NULL);
      memset(keep[slot], 1, size < 64 ? size : 64);
    }
    if (forks) {
      pid_t pid = fork();
      if (pid == 0) _exit(child_allocates());
      CHECK(pid > 0);
      CHECK(wait_for(pid));
    }
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  for (int i = 0; i < 64; i++) free(keep[i]);
  if (handler_failures != 0)
    fprintf(stderr, "%d of %d children forked by the handler failed; the last: status %#x\n", (int)handler_failures,
            (int)handler_forks, last_bad_status);
  CHECK(handler_failures == 0);
  CHECK(handler_forks > 0);
  return 0;
}

/* Runs this program again as the driver `which`, with `conf` added to the
 * environment as DUCTILE_CONF (nothing allocated here: the arrays are on
 * the stack), and waits for it with the deadline. */
static int run_driver(const char* which, const char* conf) {
  pid_t driver = fork();
  CHECK(driver >= 0);
  if (driver == 0) {
    char* env[256];
    size_t n = 0;
    for (char** e = environ; *e != NULL && n < 254; e++)
      if (strncmp(*e, "DUCTILE_CONF=", 13) != 0) env[n++] = *e;
    env[n++] = (char*)conf;
    env[n] = NULL;
    char* argv[] = {(char*)"signal_fork_prog", (char*)which, NULL};
    execve("/proc/self/exe", argv, env);
    _exit(127);
  }
  const struct timespec tick = {0, 50 * 1000 * 1000};
  for (int waited = 0; waited < kDeadlineSeconds * 20; waited++) {
    int status;
    pid_t r = waitpid(driver, &status, WNOHANG);
    CHECK(r >= 0);
    if (r == driver) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
      fprintf(stderr, "driver %s failed (status %#x)\n", which, status);
      return 1;
    }
    nanosleep(&tick, NULL);
  }
  fprintf(stderr, "driver %s (pid %d) is stuck after %d s: fork from a signal handler deadlocked\n", which,
          (int)driver, kDeadlineSeconds);
  kill(driver, SIGKILL);
  return 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "malloc") == 0) return drive(0);
  if (argc == 2 && strcmp(argv[1], "fork") == 0) return drive(1);
  int failed = run_driver("malloc", "DUCTILE_CONF=");
  failed |= run_driver("fork", "DUCTILE_CONF=background_thread:false,prefault:false");
  return failed;
}
