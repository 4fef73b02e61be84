/* SPDX-License-Identifier: BSD-2-Clause */
/* Medium blocks that idle threads' caches hold go back to the kernel
 * within a few decay times, with no call of those threads', and the
 * threads get them back as before when they wake; threads that stay busy
 * meanwhile never see a block of theirs purged under them.
 *
 * Runs itself again with DUCTILE_CONF=decay_ms:200 (the background thread
 * steps every 50 ms). Idle: 8 threads each allocate, fill and free one
 * block of 20 KiB, 64 KiB, 200 KiB and 1 MiB (their caches keep them), then
 * wait on a pipe; their blocks must have no page resident within 10 s (an
 * --enable-hardened build keeps each block's first page, which holds its
 * freed mark).
 * Busy: 4 threads allocate, fill, check and free blocks of those sizes for
 * 2 s while the collection runs. Exits 0 when every check holds. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ductile/ductile.h"
#include "prog_check.h"

extern char** environ;

enum { kThreads = 8, kSizes = 4, kBusyThreads = 4 };
static const size_t kSize[kSizes] = {20 << 10, 64 << 10, 200 << 10, 1 << 20};
static void* blocks[kThreads][kSizes];
static int ready[2], go[2];

static void* idle_thread(void* arg) {
  const uintptr_t t = (uintptr_t)arg;
  for (int s = 0; s < kSizes; s++) {
    blocks[t][s] = malloc(kSize[s]);
    CHECK(blocks[t][s] != NULL);
    memset(blocks[t][s], 0x77, kSize[s]);
  }
  for (int s = 0; s < kSizes; s++) free(blocks[t][s]);
  char c = 0;
  CHECK(write(ready[1], &c, 1) == 1);
  CHECK(read(go[0], &c, 1) == 1);  /* idle until told */
  /* Awake: the same blocks come back from the cache, and hold what is written. */
  for (int s = 0; s < kSizes; s++) {
    unsigned char* p = malloc(kSize[s]);
    CHECK(p == blocks[t][s]);
    memset(p, 0x33, kSize[s]);
    CHECK(p[0] == 0x33 && p[kSize[s] - 1] == 0x33);
    free(p);
  }
  return NULL;
}

/* Resident pages of the blocks, past the first `skip` of each. */
static size_t resident_pages(size_t skip) {
  const long page = sysconf(_SC_PAGESIZE);
  size_t n = 0;
  for (int t = 0; t < kThreads; t++)
    for (int s = 0; s < kSizes; s++) {
      unsigned char vec[(1 << 20) / 4096];
      const size_t pages = kSize[s] / (size_t)page;
      CHECK(mincore(blocks[t][s], kSize[s], vec) == 0);
      for (size_t i = skip; i < pages; i++) n += vec[i] & 1;
    }
  return n;
}

static int idle(void) {
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  pthread_t th[kThreads];
  for (uintptr_t t = 0; t < kThreads; t++) CHECK(pthread_create(&th[t], NULL, idle_thread, (void*)t) == 0);
  char c;
  for (int t = 0; t < kThreads; t++) CHECK(read(ready[0], &c, 1) == 1);
  bool hardened = false;
  size_t len = sizeof hardened;
  CHECK(ductile_mallctl("config.hardened", &hardened, &len, NULL, 0) == 0);
  const size_t skip = hardened ? 1 : 0;
  const size_t before = resident_pages(skip);
  CHECK(before > 0);
  size_t now = before;
  const struct timespec tick = {0, 100 * 1000 * 1000};
  for (int i = 0; i < 100 && now != 0; i++) {
    nanosleep(&tick, NULL);
    now = resident_pages(skip);
  }
  if (now != 0) fprintf(stderr, "idle threads' cached blocks: %zu pages resident, then %zu after 10 s\n", before, now);
  CHECK(now == 0);
  for (int t = 0; t < kThreads; t++) CHECK(write(go[1], &c, 1) == 1);
  for (int t = 0; t < kThreads; t++) CHECK(pthread_join(th[t], NULL) == 0);
  return 0;
}

static void* busy_thread(void* arg) {
  uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    for (int i = 0; i < 64; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t size = kSize[x % kSizes];
      const unsigned char v = (unsigned char)(x >> 32) | 1;
      unsigned char* p = malloc(size);
      CHECK(p != NULL);
      memset(p, v, size);
      /* A pause now and then, so that blocks age in the cache between uses. */
      if ((x >> 40) % 16 == 0) {
        const struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
      }
      for (size_t k = 0; k < size; k += 4096) CHECK(p[k] == v);
      CHECK(p[size - 1] == v);
      free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - start.tv_sec < 2);
  return NULL;
}

static int busy(void) {
  pthread_t th[kBusyThreads];
  for (uintptr_t t = 0; t < kBusyThreads; t++) CHECK(pthread_create(&th[t], NULL, busy_thread, (void*)t) == 0);
  for (int t = 0; t < kBusyThreads; t++) CHECK(pthread_join(th[t], NULL) == 0);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "idle") == 0) return idle();
  if (argc == 2 && strcmp(argv[1], "busy") == 0) return busy();
  static const char* const kModes[] = {"idle", "busy"};
  for (int m = 0; m < 2; m++) {
    char* env[256];
    size_t n = 0;
    for (char** e = environ; *e != NULL && n < 254; e++)
      if (strncmp(*e, "DUCTILE_CONF=", 13) != 0) env[n++] = *e;
    env[n++] = (char*)"DUCTILE_CONF=decay_ms:200";
    env[n] = NULL;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      char* args[] = {argv[0], (char*)kModes[m], NULL};
      execve("/proc/self/exe", args, env);
      _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fprintf(stderr, "%s: failed (status %#x)\n", kModes[m], status);
      return 1;
    }
  }
  return 0;
}
