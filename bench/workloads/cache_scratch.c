/* SPDX-License-Identifier: BSD-2-Clause */
/* cache-scratch: passive false sharing (a cache-scratch-style pattern,
 * written for ductile).
 *
 * The main thread allocates one small object per worker, back to back (they
 * likely share a cache line) and hands object i to worker i. Each worker
 * frees the object it was given, then repeatedly allocates an object of the
 * same size, writes it many times and frees it. An allocator that gives a
 * worker back the block it just freed -- a neighbour of another worker's --
 * makes the workers fight over one cache line.
 *
 * Usage: cache_scratch [scale [threads [objsize]]]   (defaults 1, 2, 8)
 * Work: 10000 * scale objects per thread, each written 5000 times. */
#include <pthread.h>

#include "wl.h"

#define WRITES 5000

static long iterations, objsize;
static char **handed;

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  free(handed[id]);
  for (long it = 0; it < iterations; it++) {
    volatile char *p = (volatile char *)malloc((size_t)objsize);
    if (!p) abort();
    for (int w = 0; w < WRITES; w++)
      for (long j = 0; j < objsize; j++) p[j] = (char)(p[j] + 1);
    free((void *)p);
  }
  return NULL;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long nthreads = wl_arg(argc, argv, 2, 2);
  objsize = wl_arg(argc, argv, 3, 8);
  if (nthreads < 1 || objsize < 1) return 2;
  iterations = (long)(10000 * scale);
  if (iterations < 1) iterations = 1;

  handed = (char **)malloc(sizeof(char *) * (size_t)nthreads);
  for (long i = 0; i < nthreads; i++) {
    handed[i] = (char *)malloc((size_t)objsize);
    memset(handed[i], 0, (size_t)objsize);
  }
  pthread_t *tid = (pthread_t *)malloc(sizeof(pthread_t) * (size_t)nthreads);
  double t0 = wl_now();
  for (long i = 0; i < nthreads; i++)
    if (pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i)) abort();
  for (long i = 0; i < nthreads; i++) pthread_join(tid[i], NULL);
  double secs = wl_now() - t0;
  free(tid);
  free(handed);
  char extra[96];
  snprintf(extra, sizeof extra, "threads=%ld objsize=%ld", nthreads, objsize);
  wl_report("cache-scratch", secs, extra);
  return 0;
}
