/* SPDX-License-Identifier: BSD-2-Clause */
/* What threads that went quiet keep resident: THREADS threads each allocate
 * and write two blocks of every size from 16 KiB to 2 MiB (25 % steps),
 * free them all, and sleep; the process's resident memory above what it
 * had before is printed right after and again WAIT seconds later. Plain C,
 * malloc and free only, so LD_PRELOAD picks the allocator.
 *
 *   idle_threads [THREADS [WAIT]]     (defaults 64 and 2)
 *
 * Prints "after_mib WAITED_mib". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t freed;
static int go[2];

static long rss_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return kib;
}

static void* worker(void* arg) {
  (void)arg;
  void* held[256];
  int n = 0;
  for (size_t size = 16 << 10; size < (2 << 20) && n + 2 <= 256; size += size / 4)
    for (int k = 0; k < 2; k++) {
      held[n] = malloc(size);
      if (held[n] == NULL) exit(1);
      memset(held[n++], 1, size);
    }
  for (int i = 0; i < n; i++) free(held[i]);
  pthread_barrier_wait(&freed);
  char c;
  if (read(go[0], &c, 1) != 1) exit(1);  /* quiet until the end */
  return NULL;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 64;
  const int wait = argc > 2 ? atoi(argv[2]) : 2;
  if (threads < 1 || wait < 0 || pipe(go) != 0) return 2;
  pthread_barrier_init(&freed, NULL, (unsigned)threads + 1);
  pthread_t* t = malloc(sizeof *t * (size_t)threads);
  const long base = rss_kib();
  for (int i = 0; i < threads; i++)
    if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 1;
  pthread_barrier_wait(&freed);
  const long after = rss_kib();
  sleep((unsigned)wait);
  const long later = rss_kib();
  printf("%.1f %.1f\n", (after - base) / 1024.0, (later - base) / 1024.0);
  fflush(stdout);
  for (int i = 0; i < threads; i++)
    if (write(go[1], "x", 1) != 1) return 1;
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  free(t);
  return 0;
}
