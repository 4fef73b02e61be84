/* SPDX-License-Identifier: BSD-2-Clause */
/* larson: server-like churn (a larson-style pattern, written for ductile).
 *
 * Each of T threads owns an array of S slots holding blocks of random sizes
 * (mostly 16-256 B, some up to 4 KiB). A round is R operations in which a
 * thread frees the block in a random slot and puts a fresh block there.
 * After every round the threads hand their arrays on (thread i takes the
 * array of thread i+1), so most frees hit blocks another thread allocated.
 *
 * Usage: larson [scale [threads [slots]]]   (defaults 1, 2, 2000)
 * Work: 240 * scale rounds of 50000 operations per thread. */
#include <pthread.h>

#include "wl.h"

#define OPS_PER_ROUND 50000

static long nthreads, nslots, nrounds;
static void ***arrays; /* arrays[i] = slot array currently at index i */
static pthread_barrier_t barrier;

static size_t pick_size(wl_rng *r) {
  return wl_below(r, 10) < 9 ? wl_range(r, 16, 256) : wl_range(r, 257, 4096);
}

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  wl_rng r;
  wl_seed(&r, (uint64_t)id + 1);
  for (long round = 0; round < nrounds; round++) {
    /* Take the array another thread filled in the previous round. */
    void **slots = arrays[(id + round) % nthreads];
    for (long op = 0; op < OPS_PER_ROUND; op++) {
      long k = (long)wl_below(&r, (uint64_t)nslots);
      free(slots[k]);
      size_t n = pick_size(&r);
      char *p = (char *)malloc(n);
      if (!p) abort();
      p[0] = (char)op;
      p[n - 1] = (char)round;
      slots[k] = p;
    }
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  nthreads = wl_arg(argc, argv, 2, 2);
  nslots = wl_arg(argc, argv, 3, 2000);
  if (nthreads < 1 || nslots < 1) return 2;
  nrounds = (long)(240 * scale + 0.5);
  if (nrounds < 1) nrounds = 1;

  wl_rng r;
  wl_seed(&r, 12345);
  arrays = (void ***)malloc(sizeof(void **) * (size_t)nthreads);
  for (long i = 0; i < nthreads; i++) {
    arrays[i] = (void **)malloc(sizeof(void *) * (size_t)nslots);
    for (long k = 0; k < nslots; k++) arrays[i][k] = malloc(pick_size(&r));
  }
  pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);

  double t0 = wl_now();
  pthread_t *tid = (pthread_t *)malloc(sizeof(pthread_t) * (size_t)nthreads);
  for (long i = 0; i < nthreads; i++)
    if (pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i)) abort();
  for (long i = 0; i < nthreads; i++) pthread_join(tid[i], NULL);
  double secs = wl_now() - t0;

  for (long i = 0; i < nthreads; i++) {
    for (long k = 0; k < nslots; k++) free(arrays[i][k]);
    free(arrays[i]);
  }
  free(arrays);
  free(tid);
  char extra[128];
  snprintf(extra, sizeof extra, "threads=%ld ops=%ld", nthreads,
           nthreads * nrounds * (long)OPS_PER_ROUND);
  wl_report("larson", secs, extra);
  return 0;
}
