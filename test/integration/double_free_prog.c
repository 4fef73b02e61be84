/* SPDX-License-Identifier: BSD-2-Clause */
/* A medium or huge block freed twice is reported at its second free, in a
 * process that starts with nothing allocated: the second free must not be
 * taken as the free of something ductile made in between (the first free of
 * a huge block rang the background thread's doorbell, and making that thread
 * callocs: its slab region took the freed block's own span, and the second
 * free went into a thread cache as a slab object). Each case runs in a child
 * forked before this program allocates anything, so that the child's calls
 * are ductile's first. Exits 0 when every check holds. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG_CHECK_RUN_IN_CHILD
#include "prog_check.h"

/* The other thread is made before the first free (making it allocates,
 * and could take the freed block's memory, as any allocation may); it frees
 * the block it is handed through a pipe. */
static int handoff[2];

static void* free_handed(void* arg) {
  void* p;
  (void)arg;
  if (read(handoff[0], &p, sizeof p) != (ssize_t)sizeof p) _exit(3);
  free(p);
  return NULL;
}

/* malloc(size), free it twice (the second time from another thread when
 * `other_thread`), then malloc twice: exits 4 if both got the same block. */
static void free_twice(size_t size, int other_thread) {
  pthread_t t;
  if (other_thread && (pipe(handoff) != 0 || pthread_create(&t, NULL, free_handed, NULL) != 0)) _exit(3);
  void* p = malloc(size);
  if (p == NULL) _exit(3);
  memset(p, 1, 4096);
  free(p);
  if (other_thread) {
    if (write(handoff[1], &p, sizeof p) != (ssize_t)sizeof p) _exit(3);
    pthread_join(t, NULL);
  } else {
    free(p);
  }
  void* a = malloc(size);
  void* b = malloc(size);
  _exit(a == b ? 4 : 0);
}

/* Runs free_twice in a child, its stderr into out; returns its wait status. */
struct free_twice_args {
  size_t size;
  int other_thread;
};
static void call_free_twice(void* a) {
  const struct free_twice_args* args = a;
  free_twice(args->size, args->other_thread);
}
static int run(size_t size, int other_thread, char* out, size_t n) {
  struct free_twice_args args = {size, other_thread};
  return run_in_child(call_free_twice, &args, out, n);
}

int main(void) {
  static const size_t kSizes[] = {20 << 10, 64 << 10, 1 << 20, 3 << 20, 4 << 20, 8 << 20, 64 << 20};
  static const char kDouble[] = "ductile: free(): double free detected 0x";
  int failed = 0;
  for (size_t i = 0; i < sizeof kSizes / sizeof kSizes[0]; i++)
    for (int other = 0; other < 2; other++) {
      char err[512];
      int st = run(kSizes[i], other, err, sizeof err);
      if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strncmp(err, kDouble, sizeof kDouble - 1) == 0)) {
        fprintf(stderr, "%zu bytes freed twice%s: %s %d, stderr \"%s\"\n", kSizes[i],
                other ? " (the second time by another thread)" : "",
                WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err);
        failed = 1;
      }
    }
  return failed;
}
